"""Submissions for the grading tests, made from the student notebooks that `make assignments`
writes: the reference solution (each answer cell replaced by the chapter's solution), the
untouched template, or either with cells edited."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import assignments  # noqa: E402
import variants  # noqa: E402

CH06 = ROOT / "book" / "06_attention.py"
# the problem set is read from whatever its source holds: questions are never named here
PROBLEMS = ROOT / "book" / "induction" / "03_problems.py"


def answer_cells(nb) -> list:
    return [c for c in nb.cells if "otter_answer_cell" in c.metadata.get("tags", [])]


def solutions(src: Path) -> list[str]:
    """The solution of each exercise of ``src``, in order, as the master notebook holds it."""
    out, inside = [], False
    for cell in assignments.master(src).cells:
        if cell.cell_type == "raw" and cell.source.startswith("# BEGIN SOLUTION"):
            inside = True
        elif cell.cell_type == "raw" and cell.source.startswith("# END SOLUTION"):
            inside = False
        elif inside:
            out.append("\n".join(line for line in cell.source.splitlines() if "SOLUTION" not in line))
    return out


def submission(folder: Path, name: str, answers: list[str] | None = None, edit=None) -> nbformat.NotebookNode:
    """The student notebook of the assignment in ``folder``, its answer cells replaced by ``answers``."""
    nb = nbformat.read(folder / "student" / f"{name}.ipynb", as_version=4)
    if answers is not None:
        cells = answer_cells(nb)
        assert len(cells) == len(answers), (len(cells), len(answers))
        for cell, code in zip(cells, answers):
            cell.source = code
    if edit is not None:
        edit(nb)
    return nb


def reference(src: Path, folder: Path) -> nbformat.NotebookNode:
    return submission(folder, assignments.assignment_name(src), solutions(src))


def variant_ids(wanted: int, key: bytes) -> list[str]:
    """Ids whose variants of the problem set differ from each other in both parameters, and none the book's."""
    name, out = assignments.assignment_name(PROBLEMS), []
    for i in itertools.count():
        v = variants.variant(name, f"st{i:03d}", key)
        if v != variants.default(name) and all(v[p] != variants.variant(name, o, key)[p] for o in out for p in v):
            out.append(f"st{i:03d}")
            if len(out) == wanted:
                return out


def cut_after_problem_3(nb) -> None:
    """Problems 1-3 hold the value answers; 4-6 load SmolLM2 and would take minutes each."""
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "## Problem 4" in c.source)
    del nb.cells[start:]


def with_answers(nb, answers: dict[str, str]):
    """``nb`` with the answer cells of the questions in ``answers`` replaced."""
    for cell in answer_cells(nb):
        question = cell.metadata["otter"]["tests"][0]
        if question in answers:
            cell.source = answers[question]
    return nb
