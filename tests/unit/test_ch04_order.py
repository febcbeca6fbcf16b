"""Chapter 4 shows no code that answers an exercise before the reader has written it.

A referee found the scaled lookup (``W_E = math.sqrt(d_model) * emb.lut.weight``) in the
code cell above exercise 4.1, which asks for exactly that, and the tied model's logits
(``ref = math.sqrt(d_model) * S[tokens] @ S.T + b_tied``) in the cell above exercise 4.2,
which asks for those. The page now sets each exercise before its demonstration, and the
demonstrations call the reader's ``embed`` and ``tied_logits``.
This keeps it so: no code cell before an exercise's cell holds the operations that answer it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "04_embeddings.py"

# what would answer each exercise, as code (whitespace removed)
ANSWERS = {
    "ch04_ex1": ["math.sqrt(d_model)*emb.lut.weight", "*math.sqrt(lut.shape[-1])",
                 "math.sqrt(d_model)*lut", ".lut.weight[tokens]*", "sqrt(d_model)*S["],
    "ch04_ex2": ["@S.T+", "@lut.T", "sqrt(d_model)*S[tokens]@S.T",
                 "proj(stream)", "generator.proj.weight=", "[tokens]@S.T"],
}


def code_cells_before(ex_id: str) -> list[str]:
    """The code cells of the chapter above the cell that calls ``checks.<ex_id>(``."""
    cells = re.split(r"^(?=# %%)", CHAPTER.read_text(), flags=re.M)
    before = []
    for cell in cells:
        if re.search(rf"^checks\.{ex_id}\(", cell, re.M):
            return before
        if cell.startswith("# %%") and not cell.startswith("# %% [markdown]"):
            before.append(cell)
    raise AssertionError(f"no cell calls checks.{ex_id}( in {CHAPTER.name}")


@pytest.mark.parametrize("ex_id", sorted(ANSWERS))
def test_no_code_cell_before_a_chapter_4_exercise_answers_it(ex_id):
    found = {frag: cell.splitlines()[0] for cell in code_cells_before(ex_id)
             for frag in ANSWERS[ex_id]
             if frag in re.sub(r"\s+", "", "\n".join(line for line in cell.splitlines()
                                                     if not line.lstrip().startswith("#")))}
    assert not found, f"{CHAPTER.name}: code above {ex_id} already does what it asks: {found}"


def test_the_guard_sees_the_old_layout():
    """The fragments match the code the referee found (so the test above can fail)."""
    old = ("W_E = math.sqrt(d_model) * emb.lut.weight.detach()\n"
           "ref = math.sqrt(d_model) * S[tokens] @ S.T + b_tied")
    squashed = re.sub(r"\s+", "", old)
    assert all(any(f in squashed for f in ANSWERS[ex]) for ex in ANSWERS)
