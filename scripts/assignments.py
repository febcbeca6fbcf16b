"""Make student versions and autograder bundles of the book's exercises with otter-grader.

For each chapter (and the induction problem set) that has exercises, we write an otter
"master" notebook from the chapter's text source - the same solutions, written once - and
run ``otter assign`` on it. Per exercise the master holds one otter question whose solution
is the exercise cell (otter understands our ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers),
a public test (the in-notebook check, as the student sees it) and a hidden test (the same
check on other random inputs, under a guard that turns the book's reference functions, and the
package functions the exercise declares as computing its answer, into tripwires while the answer
runs: ``checks.core.guarded``). A failing test's message, which
otter's and Gradescope's ``results.json`` keep as the test's output, is the check's line and,
on a line of its own, ``[CHECK] <exercise>: <category>``: the check's named mistake (never the
solution), "not attempted", or the built-in exception the answer raised (``Result.autograded``).

Output, per assignment, under ``_build/assignments/<name>/``:
  student/<name>.ipynb        the notebook to hand out (no solutions, no hidden tests)
  autograder/autograder.zip   what `make grade` uses, and what Gradescope runs (hidden tests included)
  autograder/<name>.ipynb     the solution notebook
  students/<id>.ipynb         with a roster (``--students roster.csv``): one notebook per student, whose
                              parameter cell holds that student's variant (see :mod:`variants`)

Each ``autograder.zip`` is self-contained (see :mod:`bundle`): otter's Gradescope files
(``run_autograder``, ``run_otter.py``, ``setup.sh``, ``environment.yml``, ``otter_config.json``,
``tests/``) plus the book's package as a wheel built from the commit checked out, the pinned
requirements that the notebook needs (torch as a CPU build) and the data packages it reads.

A source may have a code cell tagged ``parameters`` (the problem set does): the inputs of its
value problems, which the checks take as keyword arguments (``checks.ps_p1a(answers, model=P1_MODEL)``).
The public test uses the notebook's values; the hidden test uses the values written on its
``_variant = {...}`` line: the book's own in the bundle built here, each student's own
in the copy of the bundle that scripts/grade.py makes per submission from the roster and the
instructor's secret. Built with a roster, the bundle also carries the roster's variants (hashed
ids -> variant, not the secret) and rewrites its hidden tests for each Gradescope submission's
student (:func:`bundle.add_variants`). Without a roster, the student notebook is the book's page as it is.

Usage: python scripts/assignments.py [--students roster.csv] [names...]   (default: every source with exercises)
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat

from circuitbook.checks.core import guarded

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bundle  # noqa: E402
import notebooks  # noqa: E402
import variants  # noqa: E402

ROOT = notebooks.ROOT
OUT = ROOT / "_build" / "assignments"
CHECK_CALL = re.compile(r"^checks\.(\w+)\((.*)\)\s*$", re.M)
HIDDEN_SEED = 20261129  # fixed, so a grade is reproducible; never shown to students
# every test's last line: a failing test's message is the check's line and its category
# (``[CHECK] <exercise>: <the named mistake>``, Result.autograded); scripts/grade.py reads it
ASSERT = "assert _result.passed, _result.autograded()"


def assignment_name(source: Path) -> str:
    rel = source.relative_to(ROOT / "book").with_suffix("")
    return "-".join(rel.parts)


def exercise_sources() -> list[Path]:
    out = []
    for src in notebooks.sources():
        nb = jupytext.read(src, fmt="py:percent")
        if any("exercise" in c.metadata.get("tags", []) for c in nb.cells):
            out.append(src)
    return out


def _raw(text: str):
    return nbformat.v4.new_raw_cell(text)


def master(source: Path):
    """The otter master notebook for one chapter source."""
    nb = jupytext.read(source, fmt="py:percent")
    name = assignment_name(source)
    cells = [_raw("# ASSIGNMENT CONFIG\n"
                  f"name: {name}\n"
                  "init_cell: false\n"
                  "check_all_cell: false\n"
                  "export_cell: false\n"
                  "run_tests: false\n"
                  "solutions_pdf: false\n"
                  f"python_version: '{bundle.PYTHON}'\n"
                  "generate:\n"
                  "  seed: 0\n"
                  "  pdf: false\n"
                  "  zips: false\n"),
             notebooks.setup_cell()]
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "exercise" in tags:
            call = CHECK_CALL.search(cell.source)
            if call is None:
                raise ValueError(f"{source.name}: exercise cell without a `checks.<id>(answer)` line")
            ex_id, args = call.group(1), call.group(2)
            answer, inputs = split_call(args)
            body = CHECK_CALL.sub("", cell.source).rstrip()
            cells += [
                _raw(f"# BEGIN QUESTION\nname: {ex_id}\npoints: 1\ncheck_cell: false\nall_or_nothing: true"),
                _raw("# BEGIN SOLUTION"),
                nbformat.v4.new_code_cell(body + "\n\n" + notebooks.course_calls(f"checks.{ex_id}({args})")),
                _raw("# END SOLUTION"),
                _raw("# BEGIN TESTS"),
                nbformat.v4.new_code_cell(public_test(ex_id, args)),
                nbformat.v4.new_code_cell(hidden_test(ex_id, answer, inputs, variants.default(name))),
                _raw("# END TESTS"),
                _raw("# END QUESTION"),
            ]
        elif cell.cell_type == "code":
            keep = {"tags": ["parameters"]} if "parameters" in tags else {}
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata=keep))
        else:  # a student's notebook has no answer folds (model answers, exercises worked out)
            cells.append(nbformat.v4.new_markdown_cell(
                notebooks.ANSWER_FOLD.sub(notebooks.ANSWER_FOLD_NOTE, cell.source)))
    out = nbformat.v4.new_notebook(cells=cells)
    out.metadata = {"kernelspec": notebooks.KERNELSPEC, "language_info": {"name": "python"}}
    return out


def split_call(args: str) -> tuple[str, dict[str, str]]:
    """``"answer, model=P1_MODEL"`` -> ("answer", {"model": "P1_MODEL"}): the answer and the inputs."""
    call = ast.parse(f"f({args})", mode="eval").body
    if len(call.args) != 1:
        raise ValueError(f"a check takes one answer, then keyword inputs: checks.<id>({args})")
    return ast.unparse(call.args[0]), {kw.arg: ast.unparse(kw.value) for kw in call.keywords}


def public_test(ex_id: str, args: str) -> str:
    # the check as the student runs it, with the notebook's own inputs (its parameter cell); the
    # assertion message is the check's line without the answer's own text, then the mistake's
    # category on a line "[CHECK] <exercise>: <category>" (Result.autograded): what a failing
    # test's result in otter's and Gradescope's results.json says
    return (f"from circuitbook import checks\n"
            f"_result = checks.get({ex_id!r})({args})\n"
            f"{ASSERT}")


def hidden_test(ex_id: str, answer: str, inputs: dict[str, str], values: dict) -> str:
    # Hidden: other random inputs, under the reference guard (checks.core.guarded: while the
    # answer runs, the book's reference functions and the package functions that the exercise
    # declares as its answer, its library_answers, are tripwires, so calling one, bare or through
    # a wrapper, fails). A value problem's inputs come from the `_variant` line (the grader writes
    # the student's variant there), never from the notebook's parameter cell, which the student
    # can edit.
    kwargs = ", ".join(f"{k}=_variant[{v!r}]" if v in values else f"{k}={v}" for k, v in inputs.items())
    return ("# HIDDEN\n"
            "from circuitbook import checks\n"
            + (variants.variant_line(values) + "\n" if values else "")
            + f"_answer = {answer}\n"
            f"_exercise = checks.get({ex_id!r})\n"
            f"_result = checks.core.{guarded.__name__}(_exercise.check, _answer, seed={HIDDEN_SEED}) "
            f"if hasattr(_exercise, 'make_inputs') else checks.core.{guarded.__name__}(_exercise.check, _answer"
            f"{', ' + kwargs if kwargs else ''})\n"
            + ASSERT)


def student_notebooks(folder: Path, roster: list[str], key: bytes, out: Path | None = None) -> Path:
    """One notebook per student in ``out`` (default ``folder/students``, where scripts/grade.py finds
    the roster): the student version with that student's variant in its parameter cell (the same
    notebook for all, for an assignment without one)."""
    name = folder.name
    nb = nbformat.read(folder / "student" / f"{name}.ipynb", as_version=4)
    out = out or folder / "students"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir()
    for student in roster:
        if variants.parameter_cell(nb) is not None:
            variants.set_parameters(nb, variants.variant(name, student, key))
        nbformat.write(nb, out / f"{student}.ipynb")
    return out


def assign(source: Path, wheel: Path | None = None) -> Path:
    """Run otter assign for one source; returns the assignment's output folder.

    ``wheel``: the book's package, built once for all assignments (default: build it now)."""
    name = assignment_name(source)
    folder = OUT / name
    if folder.exists():
        shutil.rmtree(folder)
    (folder / "master").mkdir(parents=True)
    master_path = folder / "master" / f"{name}.ipynb"
    nbformat.write(master(source), master_path)
    otter = Path(sys.executable).parent / "otter"
    proc = subprocess.run([str(otter), "assign", str(master_path), str(folder)],
                          cwd=source.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"otter assign failed for {name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    # one stable name for the bundle (otter stamps it with the time)
    zips = sorted((folder / "autograder").glob("*.zip"))
    zips[-1].rename(folder / "autograder" / "autograder.zip")
    # make the bundle self-contained: the package, its pinned requirements, the data
    extras, data = notebooks.source_needs(source)
    bundle.complete(folder / "autograder" / "autograder.zip", wheel or bundle.build_wheel(OUT / "wheel"),
                    extras=extras, data=data)
    # tell `make grade` which assignment a submitted notebook belongs to
    student = folder / "student" / f"{name}.ipynb"
    nb = nbformat.read(student, as_version=4)
    nb.metadata["circuitbook"] = {"assignment": name}
    nbformat.write(nb, student)
    return folder


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="only the sources whose path contains one of these")
    ap.add_argument("--students", type=Path, help="roster CSV (column 'id'): one notebook per student")
    args = ap.parse_args(argv)
    roster = variants.read_roster(args.students) if args.students else None
    key = variants.secret() if roster else None
    sources = [s for s in exercise_sources() if not args.names or any(a in str(s) for a in args.names)]
    wheel = bundle.build_wheel(OUT / "wheel")
    for src in sources:
        folder = assign(src, wheel)
        print(f"{assignment_name(src):28s} -> {folder.relative_to(ROOT)}")
        if roster:
            out = student_notebooks(folder, roster, key)
            if variants.CHOICES.get(folder.name):  # Gradescope: the roster's variants in the bundle
                bundle.add_variants(folder / "autograder" / "autograder.zip", variants.table(folder.name, roster, key))
            n = len({repr(variants.variant(folder.name, s, key)) for s in roster})
            print(f"{'':28s} -> {out.relative_to(ROOT)}: {len(roster)} students, {n} distinct variant(s) "
                  f"of {len(variants.all_variants(folder.name))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
