"""Chapter 13 (the path expansion): exercise checks and reference solutions.

Exercise 13.1 counts the paths from the embedding to the logits of an attention-only
model. Exercise 13.2 computes the direct logit attribution of each head: what its output
at position p adds to the logit of the token that actually comes next, at p + 1.
Row-vector convention (TransformerLens): a head's output at a position is a row vector
in the residual stream, read by the unembedding as ``out @ W_U``.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def direct_logit_attribution(head_out, W_U, b_U, tokens):
    """head_out: [n_heads, pos, d_model]; W_U: [d_model, d_vocab];
    b_U: [d_vocab]; tokens: [pos] -> [n_heads, pos - 1]."""
    columns = W_U[:, tokens[1:]]          # unembedding of each next token
    return torch.einsum("hpd,dp->hp", head_out[:, :-1], columns)


def _dla(head_out, W_U, tokens_from, shift_out=False):
    out = head_out[:, 1:] if shift_out else head_out[:, :-1]
    return torch.einsum("hpd,dp->hp", out, W_U[:, tokens_from])


def _dla_inputs(g: torch.Generator) -> dict:
    # d_model == d_vocab, as in the book's toy models: a transposed W_U has the right
    # shape, so only the values can reveal it.
    d = 12 + int(torch.randint(0, 8, (1,), generator=g))
    n_heads = 3 + int(torch.randint(0, 3, (1,), generator=g))
    pos = 6 + int(torch.randint(0, 5, (1,), generator=g))
    return {"head_out": torch.randn(n_heads, pos, d, generator=g),
            "W_U": torch.randn(d, d, generator=g),
            "b_U": 1.0 + torch.rand(d, generator=g),
            "tokens": torch.randint(0, d, (pos,), generator=g)}


DLA = FunctionExercise(
    id="ch13_ex2",
    title="direct logit attribution per head",
    reference=direct_logit_attribution,
    make_inputs=_dla_inputs,
    mistakes=[
        Mistake("scored the current token, not the next one",
                "You paired the output at each position with the token at that same position. "
                "Which token do the logits at position p predict?",
                lambda head_out, W_U, b_U, tokens: _dla(head_out, W_U, tokens[:-1])),
        Mistake("shifted the head outputs instead of the tokens",
                "You dropped the first position's output and paired every other output with the token "
                "at its own position. Which token does the output at position p predict, and which "
                "position has no next token to predict?",
                lambda head_out, W_U, b_U, tokens: _dla(head_out, W_U, tokens[1:], shift_out=True)),
        Mistake("read W_U by rows (transposed)",
                "Here d_model == d_vocab, so reading W_U along the wrong axis gives the right shape "
                "and the wrong values. W_U is [d_model, d_vocab] and the logits are x @ W_U: along "
                "which axis of W_U does one token's unembedding direction lie?",
                lambda head_out, W_U, b_U, tokens: _dla(head_out, W_U.T, tokens[1:])),
        Mistake("added b_U to every head",
                "b_U is part of the direct path and counted there once; if every head added it, the "
                "parts would no longer sum to the logits.",
                lambda head_out, W_U, b_U, tokens: _dla(head_out, W_U, tokens[1:]) + b_U[tokens[1:]]),
        Mistake("summed over heads",
                "Return one row per head, [n_heads, pos - 1]; the sum over heads is the layer's "
                "attribution.",
                lambda head_out, W_U, b_U, tokens: _dla(head_out, W_U, tokens[1:]).sum(0)),
        Mistake("returned the whole logit vector",
                "You returned a logit for every token of the vocabulary, [n_heads, pos - 1, d_vocab]. "
                "The attribution is one number per head and position: the logit of which token?",
                lambda head_out, W_U, b_U, tokens: head_out[:, :-1] @ W_U),
    ],
    hint="Ask two questions for one head at one position p: which token's logit does the output there "
         "predict, and which slice of W_U turns a residual vector into that one logit? Then do it for every "
         "head and position at once. Mind the last position, and what b_U belongs to.",
)


def n_paths(n_layers, n_heads):
    """Number of embedding-to-unembedding paths (the direct path included)."""
    return (1 + n_heads) ** n_layers


def _count_inputs(g: torch.Generator) -> dict:
    # L >= 3 and n >= 2: below that, some wrong formulas coincide with the right one
    # (for L = 2, "direct + first order + n^L" is already every path)
    return {"n_layers": 3 + int(torch.randint(0, 4, (1,), generator=g)),
            "n_heads": 3 + int(torch.randint(0, 10, (1,), generator=g))}  # n = 2 would make n^L and 2^L one mistake


PATHS = FunctionExercise(
    id="ch13_ex1",
    title="the number of paths",
    reference=n_paths,
    library_answers=("circuitbook.paths.count_paths",),
    make_inputs=_count_inputs,
    mistakes=[
        Mistake("forgot the direct path",
                "Does your count include the path that skips every layer, from the embedding straight "
                "to the unembedding?",
                lambda n_layers, n_heads: (1 + n_heads) ** n_layers - 1),
        Mistake("counted only paths through one head",
                "Your count has the direct path and the paths through a single head. Can a path pass "
                "through heads in two different layers (a virtual head)? Count the paths of a model "
                "with two layers of two heads by hand.",
                lambda n_layers, n_heads: n_layers * n_heads + 1),
        Mistake("counted only paths through every layer",
                "Your count has only the paths that pass through a head in every layer. What else can "
                "a path do at a layer, besides entering one of its heads? (Think of the residual "
                "connection.)",
                lambda n_layers, n_heads: n_heads ** n_layers),
        Mistake("counted subsets of layers, not heads",
                "Your count decides only which layers a path passes through. At a layer it does pass "
                "through, in how many ways can it do so?",
                lambda n_layers, n_heads: 2 ** n_layers),
        Mistake("counted the wrong thing per step",
                "Check your formula on one layer of n heads, where you can list the paths by hand, and "
                "then on two layers of one head; which of the two arguments counts the steps of a path?",
                lambda n_layers, n_heads: (1 + n_layers) ** n_heads),
        Mistake("let a path use several heads of one layer",
                "Heads of one layer read the same stream in parallel; none reads another's output, "
                "so a path passes through at most one head per layer.",
                lambda n_layers, n_heads: 2 ** (n_layers * n_heads)),
    ],
    hint="List the paths of a one-layer model by hand, then of a two-layer model. What does adding a "
         "layer do to the count, and does what a path did in one layer limit what it can do in the next?",
)

EXERCISES = {ex.id: ex for ex in (PATHS, DLA)}
