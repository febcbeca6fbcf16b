"""A Sphinx extension for the exercise index: ``{exercise-index}`` renders, per chapter, every
exercise with its id, its title, a link to the chapter, and its status in this build.

Each exercise is an ``exercise``-tagged cell followed by a generated ``solution`` cell (the
reference solution) that ends with ``checks.<id>(answer)`` (see scripts/notebooks.py). The
directive reads the executed notebooks from the execution cache, like the claims ledger, so
the status is the output of that very check in this build: "passed" when the reference
solution passed its own check on fresh random inputs. A reference solution that did not pass
is shown as such and raises a build warning, which fails ``scripts/build_site.py``.
Titles come from ``circuitbook.checks.all_exercises()``. Each row's title links to the exercise
itself (:class:`ExerciseTargets` labels it on its chapter's page: ``exercise-<id>``), the chapter
name to the chapter; the links are Sphinx references, so a label missing from its page is a build
warning, which fails the build.

On the static pages an exercise reads as an exercise (:class:`StaticExercises`): the student
template (the ``exercise`` cell) keeps its code, but where its check would print "not attempted
yet" (the site has no kernel, so nobody has attempted anything) the page says where the check
runs; the reference solution and its passing check sit in one collapsed block below it. The
notebooks themselves are unchanged: in JupyterLab and on Colab the template runs its check.

The course site (``make course``, scripts/course.py) sets ``circuitbook_course``: its notebooks
have no solution cells at all, each exercise's note names the check that grades it in the
notebook, and the index lists each exercise as assigned, read from its template. A solution
cell that reached a course page anyway is removed, with a warning that fails the build.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

from sphinx_ledger import executed_chapters, rebuild_always

logger = logging.getLogger(__name__)

CHECK_CALL = re.compile(r"^checks\.(\w+)(?:\.record)?\(", re.M)


def _text(output) -> str:
    if "text" in output:
        return output["text"] if isinstance(output["text"], str) else "".join(output["text"])
    plain = output.get("data", {}).get("text/plain", "")
    return plain if isinstance(plain, str) else "".join(plain)


def _code_cells(nb, tag: str):
    """(number, cell) of each code cell tagged ``tag``, numbered among all code cells (1-based),
    as the pages count them."""
    n = 0
    for cell in nb.cells:
        if cell.cell_type == "code":
            n += 1
            if tag in cell.metadata.get("tags", []):
                yield n, cell


def exercises_of(nb) -> list[dict]:
    """Every exercise of an executed chapter, in order: id, code cell number of the reference
    solution, and its check's outcome (``passed`` True/False, or None when it printed none)."""
    out = []
    for n, cell in _code_cells(nb, "solution"):
        ids = CHECK_CALL.findall(cell.source)
        if not ids:
            continue
        outputs = "\n".join(_text(o) for o in cell.get("outputs", []))
        lines = [line for line in outputs.splitlines() if line.startswith(("[PASSED]", "[NOT YET]"))]
        passed = None if not lines else all(line.startswith("[PASSED]") for line in lines)
        out.append({"id": ids[-1], "cell": n, "passed": passed, "message": lines[0] if lines else ""})
    return out


def assigned_of(nb) -> list[dict]:
    """Every exercise of a notebook, read from its student templates (the ``exercise`` cells):
    id, code cell number and the check's call as the template makes it (the course's index)."""
    out = []
    for n, cell in _code_cells(nb, "exercise"):
        calls = CHECK_CALL_LINE.findall(cell.source)
        if calls:
            out.append({"id": CHECK_CALL.match(calls[-1]).group(1), "cell": n, "call": calls[-1]})
    return out


CHECK_CALL_LINE = re.compile(r"^checks\.\w+(?:\.record)?\(.*\)\s*$", re.M)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def exercise_label(ex_id: str) -> str:
    """The label of exercise ``ex_id`` on its chapter's page (:class:`ExerciseTargets`)."""
    return f"exercise-{ex_id}".lower()


def _link(text: str, ex_id: str) -> str:
    """A MyST reference to exercise ``ex_id`` reading ``text`` (a role's text cannot escape an
    angle bracket, which would start its target: drawn as a single guillemet instead)."""
    text = _escape(text).replace("<", "\u2039").replace(">", "\u203a")
    return f"{{ref}}`{text} <{exercise_label(ex_id)}>`"


class ExerciseIndex(Directive):
    has_content = False

    def run(self):
        from circuitbook.checks import all_exercises

        env = self.state.document.settings.env
        known = all_exercises()
        if env.config.circuitbook_course:
            return self._course(env, known)
        rows, chapters = [], 0
        for docname, title, nb in executed_chapters(self):
            found = exercises_of(nb)
            chapters += bool(found)
            rows += [(docname, title, ex) for ex in found]

        lines = ["| chapter | exercise | what it asks | status in this build |", "|---|---|---|---|"]
        failed = []
        for docname, title, ex in rows:
            exercise = known.get(ex["id"])
            if exercise is None:
                logger.warning(f"exercise-index: {docname} checks {ex['id']!r}, which circuitbook.checks "
                               "does not define", location=(env.docname, self.lineno))
            what = exercise.title if exercise is not None else "(not defined in circuitbook.checks)"
            if ex["passed"]:
                status = "&#10004; passed"
            else:
                failed.append(f"{docname}: {ex['id']}")
                status = ("&#10008; not passed: " + ex["message"]) if ex["passed"] is False else "&#10008; no check output"
            lines.append(f"| {{doc}}`{_escape(title)} </{docname}>` | `{ex['id']}` | {_link(what, ex['id'])} "
                         f"| {_escape(status)} |")
        if failed:
            logger.warning(f"exercise-index: reference solutions that did not pass their check: {failed}",
                           location=(env.docname, self.lineno))
        n_passed = sum(1 for *_, ex in rows if ex["passed"])
        intro = (f"{len(rows)} exercises in {chapters} chapters; the reference solutions of {n_passed} "
                 "passed their checks in this build.")
        container = nodes.container(classes=["exercise-index"])
        self.state.nested_parse(StringList([intro, ""] + lines, source="exercise-index"), self.content_offset,
                                container)
        return [container]

    def _course(self, env, known):
        rows, chapters = [], 0
        for docname, title, nb in executed_chapters(self):
            found = assigned_of(nb)
            chapters += bool(found)
            rows += [(docname, title, ex) for ex in found]
        lines = ["| chapter | exercise | what it asks | where it is checked |", "|---|---|---|---|"]
        for docname, title, ex in rows:
            exercise = known.get(ex["id"])
            if exercise is None:
                logger.warning(f"exercise-index: {docname} checks {ex['id']!r}, which circuitbook.checks "
                               "does not define", location=(env.docname, self.lineno))
            what = exercise.title if exercise is not None else "(not defined in circuitbook.checks)"
            lines.append(f"| {{doc}}`{_escape(title)} </{docname}>` | `{ex['id']}` | {_link(what, ex['id'])} "
                         f"| in the notebook, by `{_escape(ex['call'].strip())}` |")
        intro = (f"{len(rows)} exercises in {chapters} chapters. Each is done in its chapter's notebook, "
                 "where the check on the exercise cell's last line grades it.")
        container = nodes.container(classes=["exercise-index"])
        self.state.nested_parse(StringList([intro, ""] + lines, source="exercise-index"), self.content_offset,
                                container)
        return [container]


EXERCISE_NOTE = ("Your answer is checked here when this cell runs. Open the chapter on Colab or in "
                 "JupyterLab (the launch buttons at the top of the page), write your code in place of "
                 "the placeholder, and run the cell.")
#: the course site's note: where the exercise is done and which check grades it
COURSE_NOTE = {
    "download": ("Do this exercise in the chapter's notebook (the download button at the top of the page "
                 "gives it; open it in JupyterLab or on Colab): write your code in place of the "
                 "placeholder and run the cell. "),
    "colab": ("Do this exercise in the chapter's notebook (the Colab button at the top of the page opens "
              "it; the download button gives it for JupyterLab): write your code in place of the "
              "placeholder and run the cell. "),
}
#: the note's last sentence: what the template's call on its last line does
COURSE_CHECK = "The check on its last line, {call}, grades it there."
#: ... where it records the answer without a verdict (a choice among a few options: ValueExercise.record)
COURSE_RECORD = ("The call on its last line, {call}, records your answer without saying whether it is "
                 "right; the autograder grades it when you submit.")
SOLUTION_PROMPT = ("Show the solution and its check", "Hide the solution")


def _tags(node) -> set[str]:
    return {c.removeprefix("tag_") for c in node.get("classes", []) if c.startswith("tag_")}


def _exercise_cells(node) -> list:
    return [c for c in node.findall(nodes.container)
            if c.get("nb_element") == "cell_code" and "exercise" in _tags(c)]


def _check_id(cell) -> str | None:
    """The exercise id that an exercise cell's template checks on its last line, if any."""
    source = "".join(c.astext() for c in cell.children if c.get("nb_element") == "cell_code_source")
    calls = CHECK_CALL_LINE.findall(source)
    return CHECK_CALL.match(calls[-1].strip()).group(1) if calls else None


class ExerciseTargets(SphinxTransform):
    """Label every exercise of a page ``exercise-<id>`` (:func:`exercise_label`), for the
    exercise index's links. The label is the exercise's section ("Exercise 8.1: ...") where
    the section holds this exercise alone, so that a link shows its statement from the heading
    down; otherwise (the problem set: several parts under one problem) the exercise cell
    itself. Runs when the page is read, before Sphinx's domains collect the labels (850)."""

    default_priority = 800

    def apply(self, **kwargs):
        if not self.document.get("source", "").endswith(".ipynb"):
            return
        for cell in _exercise_cells(self.document):
            ex_id = _check_id(cell)
            if ex_id is None:
                continue
            label = exercise_label(ex_id)
            if label in self.document.nameids:
                logger.warning(f"exercise {ex_id} appears twice on this page: its link goes to the first",
                               location=cell)
                continue
            section = cell.parent
            while section is not None and not isinstance(section, nodes.section):
                section = section.parent
            node = section if section is not None and len(_exercise_cells(section)) == 1 else cell
            if not node["ids"]:
                node["ids"].append(nodes.make_id(label))
            node["names"].append(label)
            self.document.ids.setdefault(node["ids"][0], node)
            # an explicit target: Sphinx's standard domain turns it into a label
            self.document.nameids[label] = node["ids"][0]
            self.document.nametypes[label] = True


class StaticExercises(SphinxPostTransform):
    """The exercise cells of a page, as the static site shows them: the template's check output
    (its "not attempted yet" box) replaced by a note saying where the check runs, and the
    solution cell (input, output and all) folded into one collapsed block. Runs before
    myst-nb's ``HideInputCells`` (priority 199), which makes the fold."""

    default_priority = 190
    formats = ("html",)

    def run(self, **kwargs):
        course = self.config.circuitbook_course
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code":
                continue
            tags = _tags(cell)
            if "exercise" in tags:
                outputs = [c for c in cell.children if c.get("nb_element") == "cell_code_output"]
                note = nodes.container(classes=["cb-exercise-note"] + (["cb-course-note"] if course else []))
                if course:
                    source = "".join(c.astext() for c in cell.children if c.get("nb_element") == "cell_code_source")
                    calls = CHECK_CALL_LINE.findall(source)
                    call = calls[-1].strip() if calls else "checks"
                    text = COURSE_NOTE[course] + (COURSE_RECORD if ".record(" in call else COURSE_CHECK)
                    before, after = text.split("{call}")
                    note += nodes.paragraph("", "", nodes.Text(before), nodes.literal(call, call), nodes.Text(after))
                else:
                    note += nodes.paragraph(EXERCISE_NOTE, EXERCISE_NOTE)
                if outputs:
                    cell.replace(outputs[0], note)
                    for extra in outputs[1:]:
                        cell.remove(extra)
                else:
                    cell += note
                cell["classes"].append("cb-exercise")
            elif "solution" in tags and course:
                logger.warning("a solution cell reached a course page: removed", location=cell)
                cell.parent.remove(cell)
            elif "solution" in tags:
                cell["hide_mode"] = "all"
                cell["prompt_show"], cell["prompt_hide"] = SOLUTION_PROMPT
                cell["classes"].append("cb-solution")


def setup(app):
    # "" on the self-study site; "download" or "colab" on the course site (scripts/course.py):
    # how its readers get the student notebook
    app.add_config_value("circuitbook_course", "", "env", [str])
    app.add_post_transform(StaticExercises)
    app.add_transform(ExerciseTargets)
    app.add_directive("exercise-index", ExerciseIndex)
    app.connect("env-get-outdated", rebuild_always("{exercise-index}"))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
