"""Chapter 9 shows no code that answers an exercise before the reader has written it.

A referee found the page's own full OV product (W_E W_V W_O W_U, in the Annotated
Transformer cell and in the cell that checks the package's factors) above exercise 9.1,
which asks for exactly that product, and the copying score (Re sum lambda / sum |lambda|)
computed in the cost cell above exercise 9.2. The page now sets exercise 9.1 before both
cells, which call the reader's `full_ov`, and computes the GPT-2-shaped head's score from
BA's eigenvalues with the reader's `copying_score` after exercise 9.2.
This keeps it so: no code cell before an exercise's cell holds the operations that answer it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "09_full_circuits.py"

# what would answer each exercise, as code (whitespace removed)
ANSWERS = {
    "ch09_ex1": ['@w["W_V"][h]@w["W_O"][h]@', "W_V[IH]@(attn.W_O[IH]@W_U", "W_V@W_O@W_U",
                 "W_V[0,0]@W_O", "@W_V)@(W_O@", "W_V@W_O", "W_O@W_U"],
    "ch09_ex2": [".sum().real/", ".real.sum()/", "eig.abs().sum()", "eig64.abs().sum()"],
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


def squash(cell: str) -> str:
    """The cell's code without comments or whitespace."""
    return re.sub(r"\s+", "", "\n".join(line for line in cell.splitlines()
                                        if not line.lstrip().startswith("#")))


@pytest.mark.parametrize("ex_id", sorted(ANSWERS))
def test_no_code_cell_before_a_chapter_9_exercise_answers_it(ex_id):
    found = {frag: cell.splitlines()[0] for cell in code_cells_before(ex_id)
             for frag in ANSWERS[ex_id] if frag in squash(cell)}
    assert not found, f"{CHAPTER.name}: code above {ex_id} already does what it asks: {found}"


def test_the_guard_sees_the_old_layout():
    """The fragments match the code the referee found (so the test above can fail)."""
    old = {"ch09_ex1": ('    circuit = W_E_at @ w["W_V"][h] @ w["W_O"][h] @ W_U_at\n'
                        'ov_ref = W_E @ (attn.W_V[IH] @ (attn.W_O[IH] @ W_U))\n'),
           "ch09_ex2": 'score = (eig.sum().real / eig.abs().sum()).item()\n'}
    for ex, code in old.items():
        hits = [f for f in ANSWERS[ex] if f in squash(code)]
        assert hits, f"the guard for {ex} would not see the old layout"
    # the ex1 guard sees both old cells, one by one
    assert '@w["W_V"][h]@w["W_O"][h]@' in squash(old["ch09_ex1"].splitlines()[0])
    assert "W_V[IH]@(attn.W_O[IH]@W_U" in squash(old["ch09_ex1"].splitlines()[1])
