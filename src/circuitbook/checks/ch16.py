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
    make_inputs=_virtual_inputs,
    mistakes=[
        Mistake("both OV circuits, but not the virtual one", "Your matrix is a product of the two heads' OV "
                "circuits, yet it is not what a vector moved by the first head and then by the second comes "
                "out as. Follow a row vector x through your product: which head's matrices does it meet "
                "first, and is that the head that acts first?",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, second) @ _ov(W_V, W_O, first)),
        Mistake("rows and columns exchanged", "Your matrix holds the right numbers, but entry (a, b) of "
                "yours is entry (b, a) of the virtual circuit. Take a residual vector x: does your product "
                "act on it the way a TransformerLens head acts on the stream?",
                lambda W_V, W_O, first, second: (_ov(W_V, W_O, first) @ _ov(W_V, W_O, second)).T),
        Mistake("indexed [head, layer]", "The weights are stacked [n_layers, n_heads, ...]: head (l, h) is "
                "W_V[l, h].",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first[::-1]) @ _ov(W_V, W_O, second[::-1])),
        Mistake("added the two OV circuits", "Heads in series compose by matrix product; a sum is what two "
                "heads side by side in one layer write.",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first) + _ov(W_V, W_O, second)),
        Mistake("multiplied elementwise", "Use the matrix product (@), not *.",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first) * _ov(W_V, W_O, second)),
        Mistake("only one head", "The virtual circuit needs both heads' OV matrices.",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, second)),
        Mistake("only one head", "The virtual circuit needs both heads' OV matrices.",
                lambda W_V, W_O, first, second: _ov(W_V, W_O, first)),
    ],
    hint="A virtual head applies one head's OV circuit and then the other's. Each head's OV circuit is its "
         "value map followed by its output map ([d_model, d_head] then [d_head, d_model]). In the "
         "row-vector convention, on which side of the matrices does the vector stand?",
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
        Mistake("both patterns, but not the virtual one", "Your result is a product of the two patterns, yet "
                "its entry (i, k) does not follow the path that information takes from key k to query i. "
                "Write out entry (i, k) of your product as a sum over j: which head's weight connects the "
                "query i to j in yours, and which head moves information last?",
                lambda A_first, A_second: A_first @ A_second),
        Mistake("transposed", "Rows are queries: yours is the transpose of the virtual pattern, with keys as "
                "rows and columns that do not sum to one.",
                lambda A_first, A_second: (A_second @ A_first).transpose(-1, -2)),
        Mistake("multiplied elementwise", "Composing two mixings of positions is a matrix product over the "
                "intermediate position j, not an elementwise product.",
                lambda A_first, A_second: A_first * A_second),
        Mistake("added the patterns", "Heads in series compose by product; a sum (or average) of patterns "
                "describes nothing here.",
                lambda A_first, A_second: A_first + A_second),
        Mistake("renormalised an elementwise product", "The product of two patterns is already a pattern "
                "(rows sum to 1) when it is a matrix product; an elementwise product renormalised is "
                "something else.",
                lambda A_first, A_second: (A_first * A_second) / (A_first * A_second).sum(-1, keepdim=True)),
    ],
    hint="Follow information back from a query i: the second head moves it to i from some position j, "
         "where the first head had gathered it from a key k. Write entry (i, k) of the virtual pattern as a "
         "sum over the intermediate position j.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
