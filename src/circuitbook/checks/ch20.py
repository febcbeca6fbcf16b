"""Chapter 20 (the notation Rosetta stone): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


# --------------------------------------------------------------------------------------
# Exercise 20.1: nn.Linear weights -> TransformerLens per-head weights
# --------------------------------------------------------------------------------------


def linear_to_tl(weight, n_heads, which):
    """nn.Linear weight [out, in] -> per-head TransformerLens tensor."""
    W = weight.T                                   # the row-vector matrix
    d_in, d_out = W.shape
    if which == "o":                               # heads are blocks of rows
        return W.reshape(n_heads, d_in // n_heads, d_out)
    # heads are blocks of columns: [d_model, h, d_head] -> [h, d_model, d_head]
    return W.reshape(d_in, n_heads, d_out // n_heads).permute(1, 0, 2)


def _linear_inputs(g: torch.Generator) -> dict:
    n_heads = int(torch.randint(2, 5, (1,), generator=g))
    d_head = int(torch.randint(3, 7, (1,), generator=g))
    d_model = n_heads * d_head
    # Consecutive trials of a check use consecutive seeds, so the parity of the seed
    # alternates: every check sees both an output matrix and a query/key/value matrix.
    if g.initial_seed() % 2:
        which = "o"
    else:
        which = "qkv"[int(torch.randint(0, 3, (1,), generator=g))]
    return {"weight": torch.randn(d_model, d_model, generator=g), "n_heads": n_heads, "which": which}


def _interleaved(weight, n_heads, which):
    W = weight.T
    d_in, d_out = W.shape
    if which == "o":
        return W.reshape(d_in // n_heads, n_heads, d_out).permute(1, 0, 2)
    return W.reshape(d_in, d_out // n_heads, n_heads).permute(2, 0, 1)


# Each mistake below is about one kind of matrix; on the other kinds it answers as the
# reference does, as a reader's function with that one mistake would.


def _no_permute(weight, n_heads, which):
    if which == "o":
        return linear_to_tl(weight, n_heads, which)
    W = weight.T
    return W.reshape(n_heads, W.shape[0], W.shape[1] // n_heads)


def _o_like_q(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, "q")


def _q_like_o(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, "o")


EX1 = FunctionExercise(
    id="ch20_ex1",
    title="nn.Linear weights to TransformerLens per-head weights",
    reference=linear_to_tl,
    make_inputs=_linear_inputs,
    mistakes=[
        Mistake("forgot nn.Linear's transpose",
                "nn.Linear stores [out, in] and computes x @ weight.T; the row-vector matrix is weight.T.",
                lambda weight, n_heads, which: linear_to_tl(weight.T, n_heads, which)),
        Mistake("returned the column-convention (paper) matrices",
                "Per head you returned Elhage et al.'s [d_head, d_model] W_Q (or [d_model, d_head] W_O): "
                "TransformerLens wants the transpose, W_Q[h] of shape [d_model, d_head] and W_O[h] of "
                "shape [d_head, d_model].",
                lambda weight, n_heads, which: linear_to_tl(weight, n_heads, which).transpose(-1, -2)),
        Mistake("heads interleaved",
                "Split the head dimension as (n_heads, d_head), head-major: head h owns the contiguous "
                "block h*d_head:(h+1)*d_head, not every n_heads-th entry.",
                _interleaved),
        Mistake("reshaped without moving the head axis",
                "weight.T is [d_model, n_heads * d_head]: reshape it to [d_model, n_heads, d_head] and then "
                "move the head axis to the front (permute(1, 0, 2)); a plain reshape to "
                "[n_heads, d_model, d_head] mixes rows of different heads.",
                _no_permute),
        Mistake("split W_O like W_Q",
                "W_O reads the concatenated heads, so its heads are blocks of *rows* of weight.T (its "
                "input side): W_O[h] = weight.T[h*d_head:(h+1)*d_head, :], shape [d_head, d_model].",
                _o_like_q),
        Mistake("split W_Q like W_O",
                "W_Q, W_K and W_V produce the concatenated heads, so their heads are blocks of *columns* "
                "of weight.T (the output side): W_Q[h] = weight.T[:, h*d_head:(h+1)*d_head].",
                _q_like_o),
    ],
    hint="Transpose first: nn.Linear stores [out, in] and multiplies by the transpose, while "
         "TransformerLens stores row-vector matrices. For W^Q, W^K and W^V the heads are blocks of the "
         "output side: split it into heads and move the head axis to the front, [n_heads, d_model, "
         "d_head]. For W^O ('o') the heads are blocks of the input side: [n_heads, d_head, d_model].",
)


# --------------------------------------------------------------------------------------
# Exercise 20.2: the OV circuits of every head, straight from nn.Linear weights
# --------------------------------------------------------------------------------------


def ov_from_linears(w_v, w_o, n_heads):
    """nn.Linear weights of W^V and W^O -> W_OV per head [n_heads, d, d]."""
    return linear_to_tl(w_v, n_heads, "v") @ linear_to_tl(w_o, n_heads, "o")


def _ov_inputs(g: torch.Generator) -> dict:
    n_heads = int(torch.randint(2, 5, (1,), generator=g))
    d_model = n_heads * int(torch.randint(3, 7, (1,), generator=g))
    return {"w_v": torch.randn(d_model, d_model, generator=g),
            "w_o": torch.randn(d_model, d_model, generator=g), "n_heads": n_heads}


EX2 = FunctionExercise(
    id="ch20_ex2",
    title="OV circuits from nn.Linear weights",
    reference=ov_from_linears,
    make_inputs=_ov_inputs,
    mistakes=[
        Mistake("column convention (the paper's W_OV)",
                "You returned Elhage et al.'s W_O W_V, which acts on column vectors. In TransformerLens's "
                "row-vector convention W_OV = W_V W_O, its transpose.",
                lambda w_v, w_o, n_heads: ov_from_linears(w_v, w_o, n_heads).transpose(-1, -2)),
        Mistake("forgot nn.Linear's transpose",
                "Convert each weight to its row-vector form (weight.T) before splitting the heads.",
                lambda w_v, w_o, n_heads: linear_to_tl(w_v.T, n_heads, "v") @ linear_to_tl(w_o.T, n_heads, "o")),
        Mistake("heads interleaved",
                "Head h owns the contiguous block h*d_head:(h+1)*d_head of the concatenated heads.",
                lambda w_v, w_o, n_heads: _interleaved(w_v, n_heads, "v") @ _interleaved(w_o, n_heads, "o")),
        Mistake("summed over heads",
                "Return one matrix per head, [n_heads, d_model, d_model]; summed over heads you get the "
                "whole layer's W_V W_O, which is not a circuit of any one head.",
                lambda w_v, w_o, n_heads: w_v.T @ w_o.T),
        Mistake("multiplied in the wrong order (W_O W_V)",
                "In the row-vector convention a value is computed first and then written: x W_V W_O, so "
                "W_OV = W_V[h] @ W_O[h], [d_model, d_model].",
                lambda w_v, w_o, n_heads: linear_to_tl(w_o, n_heads, "o") @ linear_to_tl(w_v, n_heads, "v")),
    ],
    hint="Put both weights in per-head form with your linear_to_tl; each head's OV circuit is then its "
         "value map followed by its output map, a product batched over the heads: [n_heads, d_model, "
         "d_head] times [n_heads, d_head, d_model].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
