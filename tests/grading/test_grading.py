"""The instructor workflow end to end: make student versions and autograders, then grade a
class of planted submissions (right, partly wrong, hostile and broken) and check the CSV."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import assignments  # noqa: E402

CH06 = ROOT / "book" / "06_attention.py"
PROBLEMS = ROOT / "book" / "induction" / "03_problems.py"


@pytest.fixture(scope="module")
def built():
    folders = {src: assignments.assign(src) for src in (CH06, PROBLEMS)}
    return folders


def _answer_cells(nb):
    return [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]


def _solutions(src: Path) -> list[str]:
    master = assignments.master(src)
    out, inside = [], False
    for cell in master.cells:
        if cell.cell_type == "raw" and cell.source.startswith("# BEGIN SOLUTION"):
            inside = True
        elif cell.cell_type == "raw" and cell.source.startswith("# END SOLUTION"):
            inside = False
        elif inside:
            out.append("\n".join(l for l in cell.source.splitlines() if "SOLUTION" not in l))
    return out


def test_student_versions_leak_no_solution_or_hidden_test(built):
    for src, folder in built.items():
        name = assignments.assignment_name(src)
        student_files = [p for p in (folder / "student").rglob("*") if p.is_file()]
        assert [p.name for p in student_files] == [f"{name}.ipynb"], student_files
        text = student_files[0].read_text()
        assert "BEGIN SOLUTION" not in text and "# HIDDEN" not in text
        assert str(assignments.HIDDEN_SEED) not in text
        nb = nbformat.reads(text, as_version=4)
        import jupytext

        public = [c for c in jupytext.read(src, fmt="py:percent").cells if "exercise" not in c.metadata.get("tags", [])]
        template_lines = {l.strip() for c in _answer_cells(nb) + public for l in c.source.splitlines()}
        for solution in _solutions(src):
            # the lines only a solution has: every one must be absent from the student notebook
            secret = [l.strip() for l in solution.splitlines()
                      if len(l.strip()) >= 12 and l.strip() not in template_lines]
            assert secret, f"{name}: a solution with no line of its own?"
            for line in secret:
                assert line not in text, f"{name}: solution line leaked into the student notebook: {line}"
        assert nb.metadata["circuitbook"]["assignment"] == name
        assert len(_answer_cells(nb)) == len(_solutions(src))
        assert (folder / "autograder" / "autograder.zip").exists()


def _submission(folder: Path, name: str, answers: list[str] | None = None, edit=None) -> nbformat.NotebookNode:
    nb = nbformat.read(folder / "student" / f"{name}.ipynb", as_version=4)
    if answers is not None:
        for cell, code in zip(_answer_cells(nb), answers):
            cell.source = code
    if edit is not None:
        edit(nb)
    return nb


@pytest.fixture(scope="module")
def graded(built, tmp_path_factory):
    folder = built[CH06]
    name = assignments.assignment_name(CH06)
    right = _solutions(CH06)
    no_scale = right[1].replace("/ W_Q.shape[-1] ** 0.5", "")
    assert no_scale != right[1]
    subs = tmp_path_factory.mktemp("submissions")

    def write(student, nb):
        nbformat.write(nb, subs / f"{student}.ipynb")

    write("ada_full", _submission(folder, name, right))
    write("ben_partial", _submission(folder, name, [right[0], no_scale]))
    write("cal_template", _submission(folder, name))
    write("dan_loop", _submission(folder, name, ["while True:\n    pass", right[1]]))
    write("eve_kills_kernel", _submission(folder, name, ["import os\nos._exit(1)", right[1]]))

    def delete_second(nb):
        nb.cells.remove(_answer_cells(nb)[1])

    write("fay_deleted_cell", _submission(folder, name, right, edit=delete_second))

    def move_answers_first(nb):
        answers = _answer_cells(nb)
        for cell in answers:
            nb.cells.remove(cell)
        nb.cells[1:1] = answers  # before the imports: torch and checks are not defined yet

    write("gus_reordered", _submission(folder, name, right, edit=move_answers_first))
    cheat = ("from circuitbook.checks.ch06 import attention_pattern\n\n"
             "checks.ch06_ex1(attention_pattern)")
    write("hal_imports_reference", _submission(folder, name, [cheat, right[1]]))
    snoop = ("import glob, pathlib\n_found = [pathlib.Path(p).read_text() for p in "
             "glob.glob('/**/tests/ch06_ex1.py', recursive=True)[:3]]\n"
             "def attention_pattern(q, k, causal=True):\n    return q @ k.transpose(-1, -2)\n")
    write("ivy_reads_tests", _submission(folder, name, [snoop, right[1]]))
    (subs / "jon_not_a_notebook.ipynb").write_text("this is not json")

    out = tmp_path_factory.mktemp("grades")
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(subs), "--out", str(out),
                           "--timeout", "90"], capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    scores = {}
    for row in rows:
        scores.setdefault(row["student"], {})[row["problem"]] = (float(row["score"]), row["feedback"])
    return scores, out


def test_reference_solution_scores_full_marks(graded):
    scores, _ = graded
    assert scores["ada_full"] == {"ch06_ex1": (1.0, "passed"), "ch06_ex2": (1.0, "passed")}


def test_partly_wrong_submission_gets_partial_credit_with_the_diagnosis(graded):
    scores, _ = graded
    assert scores["ben_partial"]["ch06_ex1"][0] == 1.0
    assert scores["ben_partial"]["ch06_ex2"][0] == 0.0
    assert "forgot the scale" in scores["ben_partial"]["ch06_ex2"][1]


@pytest.mark.parametrize("student", ["cal_template", "dan_loop", "eve_kills_kernel", "hal_imports_reference",
                                     "ivy_reads_tests"])
def test_hostile_or_empty_submissions_lose_the_affected_points_with_a_reason(graded, student):
    scores, _ = graded
    assert scores[student]["ch06_ex1"][0] == 0.0
    assert scores[student]["ch06_ex1"][1], "a zero must come with a reason"


def test_each_failure_says_why(graded):
    scores, _ = graded
    assert "stopped after 90 s" in scores["dan_loop"]["ch06_ex1"][1]
    assert "reference solution" in scores["hal_imports_reference"]["ch06_ex1"][1]
    assert scores["fay_deleted_cell"]["ch06_ex1"][0] == 1.0 and scores["fay_deleted_cell"]["ch06_ex2"][0] == 0.0
    assert scores["gus_reordered"]["ch06_ex1"][0] == 0.0
    assert "known assignment" in scores["jon_not_a_notebook"]["*"][1]


def test_every_student_gets_a_feedback_file(graded):
    _, out = graded
    names = {p.stem for p in (out / "feedback").glob("*.txt")}
    assert names == {"ada_full", "ben_partial", "cal_template", "dan_loop", "eve_kills_kernel", "fay_deleted_cell",
                     "gus_reordered", "hal_imports_reference", "ivy_reads_tests", "jon_not_a_notebook"}
    assert "2 / 2" in (out / "feedback" / "ada_full.txt").read_text()


def test_problem_set_reference_scores_full_marks(built, tmp_path):
    folder = built[PROBLEMS]
    name = assignments.assignment_name(PROBLEMS)
    sub = tmp_path / "subs"
    sub.mkdir()
    nbformat.write(_submission(folder, name, _solutions(PROBLEMS)), sub / "ref.ipynb")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(sub), "--out", str(out),
                           "--timeout", "600"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 9 and all(float(r["score"]) == 1.0 for r in rows), rows
