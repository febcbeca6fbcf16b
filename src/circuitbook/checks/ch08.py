"""Chapter 8 (the OV and QK circuits): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, PairExercise
from circuitbook.checks.core import random_int as _randint


# --- Exercise 8.1: a head's output from its pattern and its OV circuit ---------------------


def head_output(x: torch.Tensor, pattern: torch.Tensor, W_V: torch.Tensor, W_O: torch.Tensor,
                b_V: torch.Tensor) -> torch.Tensor:
    """One head's write into the residual stream (row-vector convention).

    x: [pos, d_model] (the stream the values are read from); pattern: [pos_q, pos_k], rows
    are queries and sum to 1; W_V: [d_model, d_head]; W_O: [d_head, d_model]; b_V: [d_head].
    Returns [pos_q, d_model] = pattern (x W_V + b_V) W_O = pattern x W_OV + 1 (b_V W_O).
    """
    return pattern @ (x @ W_V + b_V) @ W_O


def _head_inputs(g: torch.Generator) -> dict:
    pos = _randint(5, 9, g)
    d_model, d_head = _randint(12, 20, g), _randint(3, 6, g)
    scores = 2 * torch.randn(pos, pos, generator=g)
    future = torch.ones(pos, pos).triu(1).bool()
    pattern = scores.masked_fill(future, float("-inf")).softmax(-1)  # causal, rows sum to 1
    return {"x": torch.randn(pos, d_model, generator=g),
            "pattern": pattern,
            "W_V": torch.randn(d_model, d_head, generator=g),
            "W_O": torch.randn(d_head, d_model, generator=g),
            "b_V": 1 + torch.rand(d_head, generator=g)}  # large enough that leaving it out shows


EX1 = FunctionExercise(
    id="ch08_ex1",
    title="a head's output from its pattern and its OV circuit",
    reference=head_output,
    make_inputs=_head_inputs,
    mistakes=[
        Mistake("pattern transposed", "pattern[i, j] is how much query i reads from key j, so the output at "
                "position i is sum_j pattern[i, j] v_j: multiply pattern @ values, with the pattern as it is.",
                lambda x, pattern, W_V, W_O, b_V: pattern.T @ (x @ W_V + b_V) @ W_O),
        Mistake("forgot b_V", "The values are x W_V + b_V; the bias passes through the pattern (its rows sum to "
                "1) and adds b_V W_O at every position.",
                lambda x, pattern, W_V, W_O, b_V: pattern @ x @ W_V @ W_O),
        Mistake("used the transposed W_OV", "(W_V W_O)^T is the paper's column-vector W_OV. On row vectors, as "
                "here, the map is x -> x W_V W_O.",
                lambda x, pattern, W_V, W_O, b_V: pattern @ x @ (W_V @ W_O).T + b_V @ W_O),
        Mistake("left out the pattern", "Each position reads a weighted average of all the values, not only "
                "its own: apply the pattern to the values.",
                lambda x, pattern, W_V, W_O, b_V: (x @ W_V + b_V) @ W_O),
        Mistake("stopped before W_O", "pattern (x W_V + b_V) is the head's d_head-dimensional result z; W_O "
                "writes it back into the d_model-dimensional stream.",
                lambda x, pattern, W_V, W_O, b_V: pattern @ (x @ W_V + b_V)),
        Mistake("divided by sqrt(d_head)", "The 1/sqrt(d_head) scale belongs to the attention scores, before the "
                "softmax; the values are not scaled.",
                lambda x, pattern, W_V, W_O, b_V: pattern @ (x @ W_V + b_V) @ W_O / W_V.shape[-1] ** 0.5),
    ],
    hint="A head reads a value at every position (the value map and its bias: [pos, d_head]), mixes the "
         "values across positions with the pattern (rows are queries), and writes the mix into the stream "
         "with the output map: [pos, d_model].",
)


# --- Exercise 8.2: from TransformerLens's convention to the paper's ------------------------


def to_paper_convention(W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor,
                        W_O: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Elhage et al.'s (W_QK, W_OV) of one head, from its TransformerLens weights.

    W_Q, W_K, W_V: [d_model, d_head]; W_O: [d_head, d_model] (row vectors, x W). The paper acts on
    column vectors with W_Q^p = W_Q^T etc., so W_QK^p = (W_Q^p)^T W_K^p = W_Q W_K^T (the same
    matrix: a bilinear form keeps the query on the left in both conventions) and
    W_OV^p = W_O^p W_V^p = W_O^T W_V^T = (W_V W_O)^T (a linear map is transposed).
    """
    return W_Q @ W_K.T, (W_V @ W_O).T


def _paper_inputs(g: torch.Generator) -> dict:
    d_model, d_head = _randint(8, 14, g), _randint(2, 5, g)
    return {name: torch.randn(*shape, generator=g)
            for name, shape in (("W_Q", (d_model, d_head)), ("W_K", (d_model, d_head)),
                                ("W_V", (d_model, d_head)), ("W_O", (d_head, d_model)))}


EX2 = PairExercise(
    id="ch08_ex2",
    title="the paper's W_QK and W_OV from TransformerLens weights",
    reference=to_paper_convention,
    make_inputs=_paper_inputs,
    names=("W_QK", "W_OV"),
    mistakes=[
        Mistake("transposed W_QK too", "The score x_q^T M x_k (columns) and x_q M x_k^T (rows) use the same M "
                "with the query on the left, so W_QK is the same matrix in both conventions. Only W_OV, a map "
                "from one vector to another, is transposed.",
                lambda W_Q, W_K, W_V, W_O: ((W_Q @ W_K.T).T, (W_V @ W_O).T)),
        Mistake("forgot to transpose W_OV", "The paper's W_OV acts on column vectors, W_OV^p x; ours acts on "
                "rows, x W_OV. The two matrices are transposes of each other.",
                lambda W_Q, W_K, W_V, W_O: (W_Q @ W_K.T, W_V @ W_O)),
        Mistake("transposed the wrong circuit", "It is W_OV that changes with the convention (transpose it), and "
                "W_QK that stays as it is.",
                lambda W_Q, W_K, W_V, W_O: ((W_Q @ W_K.T).T, W_V @ W_O)),
        Mistake("applied the paper's formulas to TransformerLens's matrices", "W_Q^T W_K and W_O W_V are the "
                "paper's formulas for its own [d_head, d_model] matrices; with TransformerLens's shapes they give "
                "d_head x d_head products. First form the paper's matrices (W_Q^p = W_Q^T, ...).",
                lambda W_Q, W_K, W_V, W_O: (W_Q.T @ W_K, W_O @ W_V)),
        Mistake("multiplied the OV factors in the wrong order", "With the paper's matrices W_V^p = W_V^T "
                "[d_head, d_model] and W_O^p = W_O^T [d_model, d_head], W_OV^p = W_O^p W_V^p: the value map acts "
                "first, so it stands on the right.",
                lambda W_Q, W_K, W_V, W_O: (W_Q @ W_K.T, W_V.T @ W_O.T)),
        Mistake("returned the pair in the wrong order", "Return (W_QK, W_OV).",
                lambda W_Q, W_K, W_V, W_O: ((W_V @ W_O).T, W_Q @ W_K.T)),
    ],
    hint="The paper's matrices act on column vectors, so each is the transpose of the row-vector matrix "
         "given here. Write the paper's four matrices first, then form W_QK and W_OV by the paper's "
         "definitions in chapter 8; with column vectors, maps compose right to left. Both are [d_model, "
         "d_model].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
