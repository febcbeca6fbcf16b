"""Chapter 12 shows no code that answers an exercise before the reader has written it.

A referee found the page's hand recompute of cross-attention (the q, k, v einsums, the
scale, the padding mask, the softmax) and its full-OV table (the four-matrix einsum summed
over heads) printed in code cells above exercises 12.1 and 12.2, which asked for exactly
that code. The page now computes both after the exercises, with the reader's functions.
This keeps it so: no code cell before an exercise's cell holds the operations that answer it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = ROOT / "book" / "12_cross_attention.py"

# what would answer each exercise, as code (whitespace removed)
ANSWERS = {
    "ch12_ex1": ["einsum(", "masked_fill(", ".softmax(", "transpose(-1,-2)"],
    "ch12_ex2": ["hde,hem,mt->", "W_V@W_O", "@W_V_init@W_O_init", ".argmax(-1)"],
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
def test_no_code_cell_before_a_chapter_12_exercise_answers_it(ex_id):
    found = {frag: cell.splitlines()[0] for cell in code_cells_before(ex_id)
             for frag in ANSWERS[ex_id]
             if frag in re.sub(r"\s+", "", "\n".join(line for line in cell.splitlines()
                                                     if not line.lstrip().startswith("#")))}
    assert not found, f"{CHAPTER.name}: code above {ex_id} already does what it asks: {found}"


def test_the_guard_sees_the_old_layout():
    """The fragments match the code the referee found (so the test above can fail)."""
    old = ('q = torch.einsum("btd,hde->bhte", y, w["W_Q"]) + w["b_Q"][:, None]\n'
           'scores = scores.masked_fill(~src_mask[:, None], float("-inf"))\n'
           'torch.einsum("sd,hde,hem,mt->hst", W_E_src, t["W_V"], t["W_O"], W_U)')
    squashed = re.sub(r"\s+", "", old)
    assert all(any(f in squashed for f in ANSWERS[ex]) for ex in ANSWERS)
