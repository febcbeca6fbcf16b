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
    library_answers=("circuitbook.models.encoder_decoder.tl_weights",),
    make_inputs=_split_inputs,
    mistakes=[
        Mistake("split the wrong axis", "Your heads are cut along the wrong axis of the weight. nn.Linear "
                "stores its weight as [out, in]: what does its forward pass multiply a row vector x by, and "
                "which axis of that matrix holds the heads' features?",
                lambda weight, n_heads: weight.reshape(weight.shape[0], n_heads, -1).permute(1, 0, 2)),
        Mistake("heads in the wrong order", "Your head 0 does not get the module's first d_k output features. "
                "In the Annotated Transformer's .view(batch, pos, h, d_k), which of the two sizes varies "
                "fastest along the feature axis, and in which order did you split that axis?",
                lambda weight, n_heads: weight.T.reshape(weight.shape[1], -1, n_heads).permute(2, 0, 1)),
        Mistake("reshaped straight to the final shape", "The shape is right but the heads hold the wrong "
                "numbers. Does a reshape ever move an axis, or does it only regroup the numbers in memory "
                "order? Which numbers of the matrix end up in your head 0?",
                lambda weight, n_heads: weight.T.reshape(n_heads, weight.shape[1], -1)),
        Mistake("per-head blocks of another shape", "Each of your heads has the right numbers but in "
                "a [d_head, d_model] layout. Which side of W_Q^h does TransformerLens multiply the row vector "
                "x on, and what shape must each head's matrix have for x @ W_Q^h to work?",
                lambda weight, n_heads: weight.reshape(n_heads, -1, weight.shape[1])),
        Mistake("did not split into heads", "Your result has no head axis. What shape does the docstring "
                "ask for?",
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
        Mistake("missing a bias", "Your output is off by the same vector at every position. Which of the "
                "layer's parameters have you not used?",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V).sum(0)),
        Mistake("a bias counted too often", "Your output is off by the same vector at every position, "
                "a multiple of one of the biases. Which bias is it? How many times does your code add it, and "
                "how many times does the layer add it?",
                lambda x, pattern, W_V, W_O, b_V, b_O: (_per_head(x, pattern, W_V, W_O, b_V) + b_O).sum(0)),
        Mistake("missing a per-head bias", "Your output is off by the same vector at every position. Which "
                "of each head's parameters have you not used, and what happens to a constant added to every "
                "value when a pattern row that sums to 1 mixes the values?",
                lambda x, pattern, W_V, W_O, b_V, b_O: mha_as_sum(x, pattern, W_V, W_O, 0 * b_V, b_O)),
        Mistake("the pattern's axes", "pattern[h, i, j] is how much query i reads from key j: check which of "
                "its indices your product sums over.",
                lambda x, pattern, W_V, W_O, b_V, b_O: mha_as_sum(x, pattern.transpose(-1, -2), W_V, W_O, b_V,
                                                                  b_O)),
        Mistake("combined the heads the wrong way", "Your output is the right shape but its heads' share is "
                "too small. In Elhage et al.'s reading at the start of the chapter, how are the heads' writes "
                "combined?",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V).mean(0) + b_O),
        Mistake("used one head only", "Your output agrees with what one head writes. How many heads does "
                "the layer have, and how does Elhage et al.'s reading combine them?",
                lambda x, pattern, W_V, W_O, b_V, b_O: _per_head(x, pattern, W_V, W_O, b_V)[0] + b_O),
    ],
    hint="Elhage et al.'s reading at the start of the chapter is the shape of the answer. Ask where "
         "each bias enters the layer, and which axis of the pattern is the query's.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
