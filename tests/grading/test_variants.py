"""Per-student variants of the problem set (scripts/variants.py): the keyed choice of inputs, the
notebooks `make assignments STUDENTS=roster.csv` writes, and grading with the variant recomputed
from the file name and the secret. The otter run grades three submissions cut after problem 3
(problems 1 and 3 hold the value answers; 4-6 load SmolLM2 and would take minutes each)."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import jupytext
import nbformat
import pytest

from submissions import (PROBLEMS, ROOT, answer_cells, assignments, cut_after_problem_3, solutions, variant_ids,
                         with_answers)

import grade
import variants
from circuitbook import checks
from circuitbook.checks import ps

NAME = assignments.assignment_name(PROBLEMS)
KEY = b"a test secret, not an instructor's"
VALUE_PROBLEMS = ("ps_p1a", "ps_p3b")
GRADED = ("ps_p1a", "ps_p1b", "ps_p2", "ps_p3", "ps_p3b")  # problems 1-3: what the cut notebooks reach


def _code_cells(predicate) -> list[str]:
    return [c.source for c in jupytext.read(PROBLEMS, fmt="py:percent").cells
            if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []) and predicate(c.source)]


def _run(cells: list[str], values: dict) -> dict:
    """The page's cells that use the parameters, with the parameter cell set to ``values``,
    after the page's imports cell (the first code cell: the book's statement kinds, the progress
    line), as the notebook runs them."""
    scope = dict(values)
    for source in [_code_cells(lambda s: True)[0], *cells]:
        exec(compile(source, str(PROBLEMS), "exec"), scope)  # noqa: S102 - the book's own cells
    return scope


def test_the_choices_start_with_the_book_page_and_match_the_shipped_models():
    nb = assignments.master(PROBLEMS)
    assert variants.parameters_of(nb) == variants.default(NAME)
    from circuitbook.models import load

    toy = load("text-2l").cfg
    assert ps.P1_MODELS["text-2l"] == {"d_model": toy.d_model, "n_heads": toy.n_heads, "d_head": toy.d_head,
                                       "d_vocab": toy.d_vocab}
    from types import SimpleNamespace

    from circuitbook.models.pretrained import smollm2_config

    smol = smollm2_config(SimpleNamespace(rms_norm_eps=1e-5))  # the config the loader builds the model with
    assert ps.P1_MODELS["smollm2-135m"] == {"d_model": smol.d_model, "n_heads": smol.n_heads,
                                            "d_head": smol.d_head, "d_vocab": smol.d_vocab}


def test_every_variant_has_its_own_answers_and_the_pages_steps_pass_with_them(monkeypatch):
    # problem 1 and problem 3 draw independently: run each one's cells at each of its values
    p1_cells = _code_cells(lambda s: "P1_MODEL" in s)
    p3_cells = _code_cells(lambda s: "P3_CTX" in s)
    # problem 3's design, the page's solution (its own check is not one of a variant's)
    design = _run([re.sub(r"(?m)^checks\.\w+\(.*\)$", "", c) for c in _code_cells(
        lambda s: "def design_induction_head" in s)], {})["design_induction_head"]
    answers = {}
    for parameter, cells, answer, ex in (("P1_MODEL", p1_cells, "p1_answers", ps.P1A),
                                         ("P3_CTX", p3_cells, "broken_score", ps.P3B)):
        for value in variants.CHOICES[NAME][parameter]:
            monkeypatch.setattr(checks.SESSION, "_latest", {})  # a fresh session; restored at the end
            scope = _run(cells, {**variants.default(NAME), parameter: value,
                                 "design_induction_head": design})
            assert checks.SESSION.passed(ex.id), (parameter, value)
            answers[parameter, value] = scope[answer]
            if parameter == "P3_CTX":  # the page's claims about the scaffold hold at every length
                assert scope["working"]["induction_score"] > 0.9 and scope["broken_score"] < 0.2, value
        # no two values of a parameter accept each other's answer
        # (each answer passed its own check: it is the expected value of its variant)
        for (a, b) in itertools.permutations(variants.CHOICES[NAME][parameter], 2):
            assert not ex.compare(answers[parameter, a], answers[parameter, b]), (parameter, a, b)


def test_variants_are_keyed_spread_and_distinct_for_a_class():
    options = variants.all_variants(NAME)
    n = len(options)
    assert n == len(ps.P1_MODELS) * len(ps.P3_CONTEXTS) == 75
    class_ids = [f"s{2026000 + i}" for i in range(200)]
    chosen = [variants.variant(NAME, s, KEY) for s in class_ids]
    assert chosen == [variants.variant(NAME, s, KEY) for s in class_ids]  # reproducible
    distinct = len({repr(v) for v in chosen})
    pairs = sum(a == b for a, b in itertools.combinations(chosen, 2))
    # uniform draws: a pair shares a variant with probability 1/n; 200 students fill about
    # n (1 - (1 - 1/n)^200) variants
    expected_distinct = n * (1 - (1 - 1 / n) ** 200)
    print(f"{n} variants; 200 ids: {distinct} distinct (uniform: {expected_distinct:.1f}), "
          f"{pairs} of {math.comb(200, 2)} pairs share one (uniform: {math.comb(200, 2) / n:.0f})")
    assert abs(distinct - expected_distinct) < 8
    assert 0.5 / n < pairs / math.comb(200, 2) < 2 / n
    # another secret, another assignment: another draw for most students
    other = [variants.variant(NAME, s, b"another secret") for s in class_ids]
    assert sum(a != b for a, b in zip(chosen, other)) > 150


def test_the_secret_is_made_once_outside_the_book_and_kept(tmp_path, monkeypatch, capsys):
    path = tmp_path / "config" / "instructor_secret"
    monkeypatch.delenv("INSTRUCTOR_SECRET", raising=False)
    monkeypatch.setenv("INSTRUCTOR_SECRET_FILE", str(path))
    first = variants.secret()
    assert str(path) in capsys.readouterr().err and (path.stat().st_mode & 0o777) == 0o600
    assert len(first) == 64 and variants.secret() == first
    monkeypatch.setenv("INSTRUCTOR_SECRET", "from the environment")
    assert variants.secret() == b"from the environment"
    assert not variants.SECRET_FILE.is_relative_to(ROOT)


def test_a_roster_needs_an_id_column_and_ids_that_are_file_names(tmp_path):
    good = tmp_path / "good.csv"
    good.write_text("id,name\nab12,Ada\ncd34,Ben\n")
    assert variants.read_roster(good) == ["ab12", "cd34"]
    for text in ("name\nAda\n", "id\n../etc\n", "id\nab\nab\n"):
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(ValueError):
            variants.read_roster(tmp_path / "bad.csv")


@pytest.fixture(scope="module")
def roster_notebooks(built, tmp_path_factory):
    ids = variant_ids(3, KEY)
    folder = built[PROBLEMS]
    out = assignments.student_notebooks(folder, ids, KEY, out=tmp_path_factory.mktemp("students"))
    return ids, folder, out


def test_student_notebooks_differ_only_in_their_parameter_cell(roster_notebooks):
    ids, folder, out = roster_notebooks
    base = nbformat.read(folder / "student" / f"{NAME}.ipynb", as_version=4)
    assert variants.parameters_of(base) == variants.default(NAME)  # no roster: the book's page
    for student in ids:
        nb = nbformat.read(out / f"{student}.ipynb", as_version=4)
        assert variants.parameters_of(nb) == variants.variant(NAME, student, KEY)
        assert nb.metadata == base.metadata and len(nb.cells) == len(base.cells)
        changed = [i for i, (a, b) in enumerate(zip(nb.cells, base.cells)) if a != b]
        assert changed == [base.cells.index(variants.parameter_cell(base))]
        assert KEY.decode() not in (out / f"{student}.ipynb").read_text()


def test_copied_values_fail_and_a_copied_notebook_is_flagged(roster_notebooks, tmp_path):
    (ada, ben, cal), folder, out = roster_notebooks
    right = dict(zip([c.metadata["otter"]["tests"][0] for c in answer_cells(
        nbformat.read(out / f"{ada}.ipynb", as_version=4))], solutions(PROBLEMS)))
    va = variants.variant(NAME, ada, KEY)
    ada_values = {"ps_p1a": f"p1_answers = {ps.p1_reference(va['P1_MODEL'])!r}",
                  "ps_p3b": f"broken_score = {ps.p3b_reference(va['P3_CTX'])!r}"}
    subs = tmp_path / "subs"
    subs.mkdir()

    def write(student, source, answers):
        nb = with_answers(nbformat.read(out / f"{source}.ipynb", as_version=4), answers)
        cut_after_problem_3(nb)
        nbformat.write(nb, subs / f"{student}.ipynb")

    write(ada, ada, right)                          # ada's own work
    write(ben, ben, {**right, **ada_values})        # ada's values pasted into ben's notebook
    write(cal, ada, right)                          # ada's whole notebook handed in as cal's
    write("zed_not_enrolled", ada, right)
    roster = tmp_path / "roster.csv"
    roster.write_text("id\n" + "\n".join([ada, ben, cal]) + "\n")
    grades = tmp_path / "grades"
    # the instructor's secret in its file (mode 600), as `make grade` finds it: never in the environment
    secret_file = tmp_path / "instructor" / "instructor_secret"
    secret_file.parent.mkdir()
    secret_file.write_text(KEY.decode() + "\n")
    secret_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if k != "INSTRUCTOR_SECRET"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(subs), "--out", str(grades),
                           "--jobs", "2", "--timeout", "600", "--roster", str(roster)],
                          capture_output=True, text=True, timeout=1500,
                          env={**env, "INSTRUCTOR_SECRET_FILE": str(secret_file)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(grades / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    score = {(r["student"], r["problem"]): (float(r["score"]), r["feedback"]) for r in rows}
    print(proc.stdout)
    # each variant's reference solution: full marks on every problem it reaches, no flag
    assert all(score[ada, p][0] == 1.0 for p in GRADED), rows
    assert (ada, "variant") not in score and (ben, "variant") not in score
    # ada's values in ben's notebook: the value problems fail, the rest (functions) pass
    assert all(score[ben, p][0] == 0.0 for p in VALUE_PROBLEMS), rows
    assert all(score[ben, p][0] == 1.0 for p in set(GRADED) - set(VALUE_PROBLEMS)), rows
    # ada's notebook under cal's name: graded with cal's inputs, so the values fail, and flagged
    assert all(score[cal, p][0] == 0.0 for p in VALUE_PROBLEMS), rows
    assert score[cal, "variant"][0] == 0.0 and "FLAG" in score[cal, "variant"][1]
    assert "not on the roster" in score["zed_not_enrolled", "*"][1]
    assert set(grade.problems_of(NAME)) >= set(GRADED)
    for text in [proc.stdout, proc.stderr] + [p.read_text() for p in grades.rglob("*") if p.is_file()]:
        assert KEY.decode() not in text


def test_the_gradescope_runner_picks_the_students_variant_and_flags_a_classmates_notebook(roster_notebooks,
                                                                                          tmp_path):
    # variants.gradescope in this process, with a stand-in for otter that records the hidden tests it
    # would run (the otter runs themselves: tests/grading/test_gradescope.py)
    (ada, ben, cal), folder, out = roster_notebooks
    spec = variants.table(NAME, [ada, ben, cal], KEY)
    seen = {}

    def otter(autograder_dir):
        root = Path(autograder_dir)
        seen["tests"] = {p.stem: p.read_text() for p in (root / "source" / "tests").glob("*.py")}
        (root / "results" / "results.json").write_text(json.dumps({"tests": [{"name": "ps_p1a", "score": 1.0,
                                                                              "max_score": 1.0}]}))

    def grade_as(users, notebook):
        seen.clear()
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        for sub in ("source/tests", "submission", "results"):
            (root / sub).mkdir(parents=True)
        with zipfile.ZipFile(folder / "autograder" / "autograder.zip") as z:
            for n in z.namelist():
                if n.startswith("tests/"):
                    (root / "source" / n).write_bytes(z.read(n))
        (root / "source" / variants.TABLE).write_text(json.dumps(spec))
        (root / "submission_metadata.json").write_text(json.dumps({"users": users}))
        shutil.copy(out / f"{notebook}.ipynb", root / "submission" / "submission.ipynb")
        variants.gradescope(str(root), otter)
        return json.loads((root / "results" / "results.json").read_text())

    def graded_with():
        found = set()
        for text in seen["tests"].values():
            scope = {}
            exec(text, scope)  # noqa: S102 - our own bundle's test file
            found |= {m.group(0).removeprefix(">>> ") for suite in scope["test"]["suites"] for case in suite["cases"]
                      for m in variants.VARIANT_LINE.finditer(case["code"])}
        assert len(found) == 1, found
        return found.pop()

    def rows(results):
        return {t["name"]: t for t in results["tests"]}

    va, vb = variants.variant(NAME, ada, KEY), variants.variant(NAME, ben, KEY)
    # the sid names the student; her own notebook: her variant, no flag
    done = grade_as([{"sid": ada, "email": "someone@example.edu"}], ada)
    assert graded_with() == variants.variant_line(va) and "variant" not in rows(done)
    # no sid: the email; ada's notebook handed in by ben: graded with ben's variant, flagged
    done = grade_as([{"email": ben, "sid": ""}], ada)
    assert graded_with() == variants.variant_line(vb)
    assert rows(done)["variant"]["max_score"] == 0.0 and "FLAG" in rows(done)["variant"]["output"]
    # a group: the first member on the roster; members with different variants are flagged
    done = grade_as([{"sid": "not-enrolled"}, {"sid": cal}, {"sid": ada}], cal)
    assert graded_with() == variants.variant_line(variants.variant(NAME, cal, KEY))
    assert "different variants" in rows(done)["variant"]["output"]
    # no one on the roster: otter does not run, every problem scores zero with the reason
    done = grade_as([{"sid": "not-enrolled", "email": "zed@example.edu"}], ada)
    assert not seen and done["score"] == 0 and "not on the roster" in done["output"]
    assert {t["name"] for t in done["tests"]} == set(grade.problems_of(NAME, folder.parent))
    assert all(t["score"] == 0 for t in done["tests"])
