"""A chapter shows no code that answers an exercise before the reader has written it.

Referees found exercises answered by a code cell above them:
- chapter 4: the scaled lookup (``W_E = math.sqrt(d_model) * emb.lut.weight``) above exercise
  4.1, and the tied model's logits (``ref = math.sqrt(d_model) * S[tokens] @ S.T + b_tied``)
  above exercise 4.2. Each exercise now comes before its demonstration, which calls the
  reader's ``embed`` and ``tied_logits``.
- chapter 9: the full OV product (W_E W_V W_O W_U, in the Annotated Transformer cell and in
  the cell that checks the package's factors) above exercise 9.1, and the copying score
  (Re sum lambda / sum |lambda|) in the cost cell above exercise 9.2. Exercise 9.1 now comes
  before both cells, which call the reader's ``full_ov``; the GPT-2-shaped head's score from
  BA's eigenvalues uses the reader's ``copying_score`` after exercise 9.2.
- chapter 12: the hand recompute of cross-attention (the q, k, v einsums, the scale, the
  padding mask, the softmax) and the full-OV table (the four-matrix einsum summed over heads)
  above exercises 12.1 and 12.2. Both are computed after the exercises, with the reader's
  functions.
- chapter 10: the module checked against the formula (``torch.clamp(x @ W1 + b1, min=0) @ W2 + b2``
  with ``W1 = w_1.weight.T``) above exercise 10.1. The exercise now comes before that cell.
- chapter 7: the head-slicing cells (``x @ A.T[:, cols]`` and ``lin.weight.T[:, blk]``) above
  exercise 7.1. The exercise now comes right after the forward pass, before they spell it out.
- chapter 7: the rounding helpers in the first cells (``head_sum_terms``, ``head_sum_size``),
  whose docstrings write the layer as ``sum_h A^h (X W_V^h + b_V^h) W_O^h + b_O`` and whose code
  folds the value bias (``einsum("he,hem->m", b_V, W_O)``), above exercise 7.2. They now sit in
  a hidden cell after the section that derives the sum.
- chapter 5: the float64 check of TransformerLens's rotary tables (``theta64 = rotary_base ** (...)``,
  ``angles64 = arange(n_ctx)[:, None] * theta64``, their cos and sin) above exercise 5.3, which asks
  for the rotation built from those angles. The tables and their check now come after the exercise.
- chapter 5: the bridge cell that builds RoPE's ``R(k)`` with ``rotary_rotation(cfg, k)`` and checks it
  against the sinusoidal shift, above exercise 5.3: the same call with SmolLM2's pairing and base,
  times the rows, answers it. The cell now comes after the exercise.
- chapter 6: the page's ``attention()`` and its ``torch.tril`` mask cell above exercise 6.1, which
  asked for the scaled, causally masked pattern that both compute. The exercise now asks for the
  pattern of a padded batch (a causal mask, a padding mask on keys and on queries, and rows of 0
  for queries that may read nothing), which no cell above builds; the fragments are the code
  that would.
- chapter 13: the next-token gather (``correct_logit``) above exercise 13.2, which now comes
  before the measurement that uses it.
- chapter 14: the rounding scale ``|W_E| |W_U| + |b_U|`` of the Annotated Transformer cell above
  exercise 14.1, now read off the two modules with their weights made positive.
- chapter 6: the scores from the residual stream (``W_QK = model.W_Q[0] @ model.W_K[0]...`` and
  ``x @ W_QK @ x.T / sqrt(d_head)``) in the identity check above exercise 6.2. The exercise now
  comes before that check.
This keeps it so: no code cell before an exercise's cell holds the operations that answer it,
and each chapter's fragments match the code the referee found (so the guard can fail).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[2] / "book"

# what would answer each exercise, as code (comments and whitespace removed), by chapter
ANSWERS = {
    "04_embeddings.py": {
        "ch04_ex1": ["math.sqrt(d_model)*emb.lut.weight", "*math.sqrt(lut.shape[-1])",
                     "math.sqrt(d_model)*lut", ".lut.weight[tokens]*", "sqrt(d_model)*S["],
        "ch04_ex2": ["@S.T+", "@lut.T", "sqrt(d_model)*S[tokens]@S.T",
                     "proj(stream)", "generator.proj.weight=", "[tokens]@S.T"],
    },
    "05_positional.py": {
        "ch05_ex3": ["rotary_base**(", "[:,None]*theta64", "angles64.cos(),angles64.sin()",
                     "rotate_every_two(x)*sin", "rotary_rotation(", ".apply_rotary("],
    },
    "09_full_circuits.py": {
        "ch09_ex1": ['@w["W_V"][h]@w["W_O"][h]@', "W_V[IH]@(attn.W_O[IH]@W_U", "W_V@W_O@W_U",
                     "W_V[0,0]@W_O", "@W_V)@(W_O@", "W_V@W_O", "W_O@W_U"],
        "ch09_ex2": [".sum().real/", ".real.sum()/", "eig.abs().sum()", "eig64.abs().sum()"],
    },
    "06_attention.py": {
        "ch06_ex1": ["key_mask[:,None", "key_mask[:,:,None]", "key_mask.unsqueeze(", "nan_to_num(",
                     "make_std_mask(", "!=pad).unsqueeze(-2)&", ".any(-1,keepdim=True)"],
        "ch06_ex2": ["model.W_Q[0]@model.W_K[0].transpose(-1,-2)", "x@W_QK@x.T/",
                     "W_Q@W_K.transpose(-1,-2)"],
    },
    "07_multi_head.py": {
        "ch07_ex1": ["x@A.T[:,cols]", "lin.weight.T[:,blk]", ".weight.T[:,blk]"],
        "ch07_ex2": ['einsum("he,hem->m",', '"bhqk,bkd,hdm->', "(XW_V^h+b_V^h)W_O^h",
                     "A^hXW_V^hW_O^h+b_eff", "+b_V[:,None", "b_V@W_O", "b_V[h]@W_O[h]"],
    },
    "10_ffn.py": {
        "ch10_ex1": ["clamp(x@W1+b1", "@W1+b1,min=0)", "w_1.weight.T", "@W1.T+b1", ".relu()@W2.T"],
    },
    "13_path_expansion.py": {
        "ch13_ex2": [".gather(-1,nxt", "[:,:-1].gather(-1,", "W_U[:,tokens[1:]]"],
    },
    "14_zero_layer.py": {
        "ch14_ex1": ["W_E.abs()@model.W_U.abs()", "W_E[tokens]@W_U", "W_E[tokens]@model.W_U"],
    },
    "12_cross_attention.py": {
        "ch12_ex1": ["einsum(", "masked_fill(", ".softmax(", "transpose(-1,-2)"],
        "ch12_ex2": ["hde,hem,mt->", "W_V@W_O", "@W_V_init@W_O_init", ".argmax(-1)"],
    },
}

# the code each referee found above the exercises, one line a cell
OLD_LAYOUT = {
    "ch04_ex1": ["W_E = math.sqrt(d_model) * emb.lut.weight.detach()"],
    "ch04_ex2": ["ref = math.sqrt(d_model) * S[tokens] @ S.T + b_tied"],
    "ch09_ex1": ['    circuit = W_E_at @ w["W_V"][h] @ w["W_O"][h] @ W_U_at',
                 "ov_ref = W_E @ (attn.W_V[IH] @ (attn.W_O[IH] @ W_U))"],
    "ch09_ex2": ["score = (eig.sum().real / eig.abs().sum()).item()"],
    # the old exercise 6.1 (the causal pattern) was answered by ``attention()`` and the tril mask;
    # these are the lines that would answer the new one (the package's target mask, and a zeroed row)
    "ch06_ex1": ["return (tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1), device=tgt.device)",
                 "allowed = causal & key_mask[:, None, :] & key_mask[:, :, None]",
                 'p = scores.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)'],
    "ch06_ex2": ["W_QK = model.W_Q[0] @ model.W_K[0].transpose(-1, -2)   # [head, d_m, d_m]",
                 "ours = x @ W_QK @ x.T / math.sqrt(cfg.d_head)          # [head, q, k]"],
    "ch05_ex3": ["theta64 = smol.cfg.rotary_base ** (",
                 "angles64 = torch.arange(n_ctx, dtype=torch.float64)[:, None] * theta64",
                 "tables64 = torch.stack([angles64.cos(), angles64.sin()]).repeat(1, 1, 2)",
                 "bridge = torch.stack([rotary_rotation(sinusoid_like, k, dtype=torch.float64)"],
    "ch07_ex1": ["        by_hand.append(x @ A.T[:, cols] + bias[cols])  # [batch, pos, d_k]",
                 '        errors.append((w[f"W_{name}"][i] - lin.weight.T[:, blk]).abs().max())'],
    # the rounding helpers' docstrings and code, in the first cells above exercise 7.2
    "ch07_ex2": ['    """sum_h A^h X W_V^h W_O^h + b_eff, reassociated. Ours: W_V W_O (d_k),',
                 '    """The products\' sizes in sum_h A^h (X W_V^h + b_V^h) W_O^h + b_O, for a',
                 '    return float((torch.einsum("bhqk,bkd,hdm->bqm", A, X.abs(), abs_OV)',
                 '                  + torch.einsum("he,hem->m", w["b_V"].abs(), w["W_O"].abs())'],
    "ch10_ex1": ["formula = torch.clamp(x @ W1 + b1, min=0) @ W2 + b2",
                 "W1, b1 = ffn_module.w_1.weight.T.detach(), ffn_module.w_1.bias.detach()"],
    "ch12_ex1": ['q = torch.einsum("btd,hde->bhte", y, w["W_Q"]) + w["b_Q"][:, None]',
                 'scores = scores.masked_fill(~src_mask[:, None], float("-inf"))'],
    "ch12_ex2": ['torch.einsum("sd,hde,hem,mt->hst", W_E_src, t["W_V"], t["W_O"], W_U)'],
    # the next-token gather in correct_logit, above exercise 13.2
    "ch13_ex2": ["    return term[:, :-1].gather(-1, nxt[..., None])[..., 0]"],
    # the rounding scale of the Annotated Transformer cell above exercise 14.1
    "ch14_ex1": ["logit_scale = (model.W_E.abs() @ model.W_U.abs()"],
}

EXERCISES = [(chapter, ex_id) for chapter, answers in ANSWERS.items() for ex_id in sorted(answers)]


def squash(code: str) -> str:
    """The code without comments or whitespace."""
    return re.sub(r"\s+", "", "\n".join(line for line in code.splitlines()
                                        if not line.lstrip().startswith("#")))


def code_cells_before(chapter: str, ex_id: str) -> list[str]:
    """The code cells of the chapter above the cell that calls ``checks.<ex_id>(``."""
    before = []
    for cell in re.split(r"^(?=# %%)", (BOOK / chapter).read_text(), flags=re.M):
        if re.search(rf"^checks\.{ex_id}\(", cell, re.M):
            return before
        if cell.startswith("# %%") and not cell.startswith("# %% [markdown]"):
            before.append(cell)
    raise AssertionError(f"no cell calls checks.{ex_id}( in {chapter}")


@pytest.mark.parametrize("chapter, ex_id", EXERCISES)
def test_no_code_cell_before_an_exercise_answers_it(chapter, ex_id):
    found = {frag: cell.splitlines()[0] for cell in code_cells_before(chapter, ex_id)
             for frag in ANSWERS[chapter][ex_id] if frag in squash(cell)}
    assert not found, f"{chapter}: code above {ex_id} already does what it asks: {found}"


@pytest.mark.parametrize("chapter, ex_id", EXERCISES)
def test_the_guard_sees_the_old_layout(chapter, ex_id):
    """Every cell the referee found is seen, one by one, by the fragments of its exercise."""
    for line in OLD_LAYOUT[ex_id]:
        assert any(f in squash(line) for f in ANSWERS[chapter][ex_id]), \
            f"the guard for {ex_id} would not see: {line.strip()}"
