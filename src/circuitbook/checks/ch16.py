"""Chapter 16 (two-layer transformers): exercise checks and reference solutions.

16.1 the virtual OV circuit of two heads in series, from stacked TransformerLens weights;
16.2 the attention pattern of a virtual head, from the two heads' patterns.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def virtual_ov(W_V, W_O, first, second):
    """The OV circuit of the virtual head first -> second.
    Returns [d_model, d_model]."""
    (l1, h1), (l2, h2) = first, second
    return W_V[l1, h1] @ W_O[l1, h1] @ W_V[l2, h2] @ W_O[l2, h2]


def _ov(W_V, W_O, head):
    layer, h = head
    return W_V[layer, h] @ W_O[layer, h]


def _virtual_inputs(g: torch.Generator) -> dict:
    n_layers, n_heads, d_model, d_head = 3, 3, 12, 3

    def pick(lo, hi):
        return int(torch.randint(lo, hi, (1,), generator=g))

    while True:
        l1 = pick(0, n_layers - 1)
        l2 = pick(l1 + 1, n_layers)
        h1, h2 = pick(0, n_heads), pick(0, n_heads)
        # (layer, head) read as (head, layer) must name other heads, or that mistake is invisible,
        # and not the same two heads in the other order, or it looks like that mistake
        swapped = [(h1, l1), (h2, l2)]
        if swapped not in ([(l1, h1), (l2, h2)], [(l2, h2), (l1, h1)]):
            break
    return {"W_V": torch.randn(n_layers, n_heads, d_model, d_head, generator=g),
            "W_O": torch.randn(n_layers, n_heads, d_head, d_model, generator=g),
            "first": (l1, h1), "second": (l2, h2)}


EX1 = FunctionExercise(
    id="ch16_ex1",
    title="the virtual OV circuit",
    reference=virtual_ov,
    library_answers=("circuitbook.composition.virtual_ov",),
    make_inputs=_virtual_inputs,
    mistakes=[
        Mistake("both OV circuits, but not the virtual one", "Your matrix is not what a vector moved by the "
                "first head and then by the second comes out as. Take an x that the first head's OV "
                "circuit sends to zero: what should the virtual circuit send it to, and what does yours? "
                "Follow a row vector x through your product and write down, step by step, which head's "
                "matrices it meets.",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, second) @ _ov(W_V, W_O, first)),
        Mistake("wrong layout", "Your matrix does not send a residual vector where the two heads do (the "
                "check's matrices are square, so the shapes agree). In TransformerLens a residual "
                "vector x is a row that stands to the left of a head's weights: which axis of your matrix "
                "does x meet, and is it the axis of the heads' weights that x meets?",
                lambda W_V, W_O, first, second: (_ov(W_V, W_O, first) @ _ov(W_V, W_O, second)).T),
        Mistake("the circuit of two other heads", "Your matrix is a virtual circuit, but of two heads other "
                "than the ones asked for. Look at the shapes of W_V and W_O: what does each of their first "
                "two axes count, and which one did your code use for the layer?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first[::-1]) @ _ov(W_V, W_O, second[::-1])),
        Mistake("the two heads' effects added", "Your matrix is what the two heads write together when "
                "each reads the same stream. Take a vector x that the first head's OV circuit sends to zero: "
                "what should the virtual head, which starts with the first head, write for x, and what does "
                "your matrix write?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first) + _ov(W_V, W_O, second)),
        Mistake("each entry from one entry of each circuit", "Entry (a, b) of yours depends only on entry "
                "(a, b) of each head's OV circuit. When a vector passes through one linear map and then "
                "another, does one output coordinate depend on only one coordinate of the vector in "
                "between?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first) * _ov(W_V, W_O, second)),
        Mistake("only one head's circuit", "Your matrix is the OV circuit of one of the two heads alone. How "
                "many heads does a vector pass through on the virtual head's path?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, second)),
        Mistake("only one head's circuit", "Your matrix is the OV circuit of one of the two heads alone. How "
                "many heads does a vector pass through on the virtual head's path?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first)),
    ],
    hint="Follow one residual vector x, written as a row, through the first head and then through the "
         "second. Which of each head's weights does it meet, in which order, and what is its shape after "
         "each step?",
)


def virtual_pattern(A_first, A_second):
    """The pattern of the virtual head first -> second.
    Returns [batch, pos, pos]."""
    return A_second @ A_first


def _causal_pattern(g: torch.Generator, batch: int, n: int) -> torch.Tensor:
    scores = 2.5 * torch.randn(batch, n, n, generator=g)
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    return scores.masked_fill(mask, float("-inf")).softmax(-1)


def _pattern_inputs(g: torch.Generator) -> dict:
    n = 5 + int(torch.randint(0, 4, (1,), generator=g))
    return {"A_first": _causal_pattern(g, 2, n), "A_second": _causal_pattern(g, 2, n)}


EX2 = FunctionExercise(
    id="ch16_ex2",
    title="the pattern of a virtual head",
    reference=virtual_pattern,
    make_inputs=_pattern_inputs,
    mistakes=[
        Mistake("both patterns, but not the virtual one", "Your result's entry (i, k) does not follow the "
                "path that information takes from key k to query i. "
                "Write out entry (i, k) of your product as a sum over j and read each factor: which "
                "pattern does each one come from, and what move of information does it stand for?",
                lambda A_first, A_second: A_first @ A_second),
        Mistake("wrong layout", "The rows of your result do not sum to 1 as the rows of a causal "
                "pattern do. Which axis of a pattern indexes the queries, "
                "and is it the same axis in yours?",
                lambda A_first, A_second: (A_second @ A_first).transpose(-1, -2)),
        Mistake("each entry from one entry of each pattern", "Entry (i, k) of yours uses only entry (i, k) "
                "of each pattern. Information that reaches query i from key k through both heads stops at "
                "some position on the way: which positions can that be, and does your entry count them?",
                lambda A_first, A_second: A_first * A_second),
        Mistake("the two patterns added", "Your rows sum to 2, but a row of a pattern, the weights one query "
                "spreads over the keys, sums to 1. Take a key k that no query of the first head attends to, "
                "while the second head's query i does: what of k can reach i on the virtual head's path, "
                "and what does your entry (i, k) say?",
                lambda A_first, A_second: A_first + A_second),
        Mistake("each entry from one entry of each pattern, renormalised", "Your rows sum to 1, but entry "
                "(i, k) still depends only on entry (i, k) of each pattern (and on its row's sum). "
                "Information that reaches i from k through both heads stops at some position on the way: "
                "does your entry count the paths through those positions?",
                lambda A_first, A_second: (A_first * A_second) / (A_first * A_second).sum(-1, keepdim=True)),
    ],
    hint="Follow information from key k to query i through both heads: through which positions can it "
         "pass on the way?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
