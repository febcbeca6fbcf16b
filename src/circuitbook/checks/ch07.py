"""Chapter 7 (multi-head attention): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake

# --------------------------------------------------------------------------------------
# Exercise 7.1: from nn.Linear's weight to TransformerLens's per-head weights
# --------------------------------------------------------------------------------------


def split_heads(weight, n_heads):
    """nn.Linear weight [n_heads*d_head, d_model]
    -> W [n_heads, d_model, d_head]."""
    W = weight.T  # acts on row vectors: [d_model, n_heads * d_head]
    return W.reshape(W.shape[0], n_heads, -1).permute(1, 0, 2)


def _split_inputs(g: torch.Generator) -> dict:
    n_heads = [2, 3, 4, 6][int(torch.randint(0, 4, (1,), generator=g))]
    d_head = int(torch.randint(2, 9, (1,), generator=g))
    d_model = n_heads * d_head
    return {"weight": torch.randn(d_model, d_model, generator=g), "n_heads": n_heads}


EX1 = FunctionExercise(
    id="ch07_ex1",
    title="nn.Linear weight to per-head W [n_heads, d_model, d_head]",
    reference=split_heads,
    make_inputs=_split_inputs,
    mistakes=[
        Mistake("forgot the transpose", "nn.Linear stores [out, in] and computes x @ weight.T, so the matrix "
                "that acts on row vectors is weight.T. Without the transpose you split the input axis into "
                "heads instead of the output axis.",
                lambda weight, n_heads: weight.reshape(weight.shape[0], n_heads, -1).permute(1, 0, 2)),
        Mistake("heads interleaved", "Head h owns a contiguous block of d_head columns, h*d_head to "
                "(h+1)*d_head (the Annotated Transformer's .view(batch, pos, h, d_k)), not every n_heads-th "
                "column: check the order of the two sizes you split that axis into.",
                lambda weight, n_heads: weight.T.reshape(weight.shape[1], -1, n_heads).permute(2, 0, 1)),
        Mistake("reshaped without moving the head axis", "A single reshape to [n_heads, d_model, d_head] "
                "reinterprets the numbers in memory order, so a 'head' gets consecutive numbers of the matrix, "
                "not its block of columns: a reshape regroups numbers, it never moves an axis.",
                lambda weight, n_heads: weight.T.reshape(n_heads, weight.shape[1], -1)),
        Mistake("kept nn.Linear's layout per head", "This is [n_heads, d_head, d_model], each head's block of "
                "weight's rows; TransformerLens wants [n_heads, d_model, d_head], the transpose of each block.",
                lambda weight, n_heads: weight.reshape(n_heads, -1, weight.shape[1])),
        Mistake("did not split into heads", "Return one [d_model, d_head] matrix per head, stacked: shape "
                "[n_heads, d_model, d_head].",
                lambda weight, n_heads: weight.T),
    ],
    hint="Two things decide the answer. nn.Linear stores its weight the other way round from the "
         "row-vector form TransformerLens uses: which of its axes is the output side? And the Annotated "
         "Transformer's .view(batch, pos, h, d_k) says how the heads lie along that output side. Try it on "
         "a small case: head 0's queries must be the module's first d_k query features.",
)


# --------------------------------------------------------------------------------------
# Exercise 7.2: the attention output as a sum over heads
# --------------------------------------------------------------------------------------


def _per_head(x, pattern, W_V, W_O, b_V):
    """[n_heads, pos_q, d_model]: A^h (x W_V^h + b_V^h) W_O^h for each head h."""
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]
    return torch.einsum("hqe,hem->hqm", pattern @ v, W_O)


def mha_as_sum(x, pattern, W_V, W_O, b_V, b_O):
    """x [pos, d_model], pattern [n_heads, pos_q, pos_k], TransformerLens
    weights -> the attention layer's output [pos_q, d_model], head by head."""
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]  # [h, k, d_head]
    z = pattern @ v                                            # [h, q, d_head]
    return torch.einsum("hqe,hem->qm", z, W_O) + b_O


def _sum_inputs(g: torch.Generator) -> dict:
    n_heads = 2 + int(torch.randint(0, 3, (1,), generator=g))
    d_head = 3 + int(torch.randint(0, 4, (1,), generator=g))
    d_model = 8 + int(torch.randint(0, 9, (1,), generator=g))
    pos = 4 + int(torch.randint(0, 4, (1,), generator=g))
    return {
        "x": torch.randn(pos, d_model, generator=g),
        "pattern": (2 * torch.randn(n_heads, pos, pos, generator=g)).softmax(-1),
        "W_V": torch.randn(n_heads, d_model, d_head, generator=g) / d_model**0.5,
        "W_O": torch.randn(n_heads, d_head, d_model, generator=g) / d_head**0.5,
        "b_V": torch.randn(n_heads, d_head, generator=g),
        "b_O": torch.randn(d_model, generator=g),
    }


EX2 = FunctionExercise(
    id="ch07_ex2",
    title="multi-head attention as a sum over heads",
    reference=mha_as_sum,
    make_inputs=_sum_inputs,
    mistakes=[
        Mistake("forgot b_O", "The output map has one bias, b_O, added once after the heads are summed.",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V).sum(0)),
        Mistake("added b_O once per head", "b_O belongs to the single W^O of the layer, not to each head: add "
                "it once, after the sum.",
                lambda x, pattern, W_V, W_O, b_V, b_O: (_per_head(x, pattern, W_V, W_O, b_V) + b_O).sum(0)),
        Mistake("forgot b_V", "Each head's values are x W_V^h + b_V^h. (Since every row of the pattern sums to "
                "1, b_V^h passes through it unchanged and adds the constant b_V^h W_O^h.)",
                lambda x, pattern, W_V, W_O, b_V, b_O: mha_as_sum(x, pattern, W_V, W_O, 0 * b_V, b_O)),
        Mistake("pattern transposed", "pattern[h, i, j] is how much query i reads from key j: check which of "
                "its indices your product sums over.",
                lambda x, pattern, W_V, W_O, b_V, b_O: mha_as_sum(x, pattern.transpose(-1, -2), W_V, W_O, b_V,
                                                                  b_O)),
        Mistake("averaged the heads", "Heads add: the layer's output is the sum of the heads' writes, not their "
                "mean.",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V).mean(0) + b_O),
        Mistake("used the first head only", "Sum the writes of all n_heads heads.",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V)[0] + b_O),
    ],
    hint="The identity derived above the exercise is the shape of the answer: the layer is what each "
         "head writes on its own, added up, plus what belongs to the layer as a whole. Ask of each bias "
         "whether it belongs to one head or to the layer, and which axis of the pattern is the query's.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
