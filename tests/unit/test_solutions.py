"""Each exercise is declared once (circuitbook.checks): the chapter's exercise function is its
reference, text for text, and scripts/solutions.py rewrites a chapter from the declarations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import notebooks  # noqa: E402
import solutions  # noqa: E402

from circuitbook import checks  # noqa: E402
from circuitbook.checks import ValueExercise  # noqa: E402

CHAPTERS = notebooks.sources()


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_each_solution_is_its_declared_reference(source):
    drift = solutions.drift(source.read_text())
    assert not drift, (f"{source.relative_to(ROOT)}: the solution of {', '.join(drift)} differs from its reference "
                       "in circuitbook.checks; edit the reference, then run `python scripts/notebooks.py sync`")


def test_every_function_exercise_is_shown_by_a_chapter():
    shown = {ex.id for source in CHAPTERS for ex in solutions.exercises(source.read_text())}
    declared = {k for k, v in checks.all_exercises().items()
                if not isinstance(v, ValueExercise) and getattr(v, "reference", None) is not None}
    assert declared <= shown, f"declared but in no chapter's exercise cell: {sorted(declared - shown)}"


def test_a_changed_reference_rewrites_the_chapter_and_a_changed_chapter_is_drift():
    source = ROOT / "book" / "08_qk_ov.py"
    text = source.read_text()
    ex = solutions.exercises(text)[0]
    assert ex.written == ex.declared
    # the chapter's solution edited by hand: drift, and rewriting restores the declaration
    edited = text.replace(ex.written, ex.written.replace("return Q_ext @ K_ext.T", "return K_ext @ Q_ext.T"))
    assert edited != text
    assert solutions.drift(edited) == [f"{ex.id} ({ex.function})"]
    assert solutions.written_from_declarations(edited) == text
    # the markers go around the body, after the docstring, at the body's indentation
    lines = ex.declared.splitlines()
    assert lines[0].startswith("def extended_qk(")
    assert [line.strip() for line in lines].count(solutions.BEGIN) == 1 and lines[-1].strip() == solutions.END
