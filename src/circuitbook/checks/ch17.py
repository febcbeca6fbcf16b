"""Chapter 17 (induction heads): exercise checks and reference solutions.

17.1 the induction score of every head from attention patterns on a repeated sequence;
17.2 the previous-token score of every head.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def induction_score(pattern: torch.Tensor, seq_len: int) -> torch.Tensor:
    """Mean attention from each token of the second copy to the token after its first copy.

    pattern: [batch, head, 2 * seq_len, 2 * seq_len] (rows: queries) on sequences
    [r_0 .. r_{n-1}, r_0 .. r_{n-1}] with n = seq_len. Query n + i (the second r_i) should
    attend to key i + 1 (what followed r_i last time), i = 0 .. n - 1: the diagonal at
    offset -(n - 1). Returns [head], averaged over the batch and the n queries.
    """
    n = seq_len
    stripe = pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)  # (q, q - n + 1), q = n-1 .. 2n-1
    return stripe[..., 1:].mean(dim=(0, 2))


def _stripe(pattern, offset, first_query):
    """Mean of pattern[..., q, q - offset] over the batch and q >= first_query: [head]."""
    d = pattern.diagonal(offset=-offset, dim1=-2, dim2=-1)
    return d[..., first_query - offset:].mean(dim=(0, 2))


def _repeat_pattern_inputs(g: torch.Generator) -> dict:
    n = 5 + int(torch.randint(0, 5, (1,), generator=g))
    batch, heads, size = 2, 3, 2 * n
    scores = torch.randn(batch, heads, size, size, generator=g)
    # heads that partly attend to the induction target, to the previous token and to the
    # same token: every stripe carries a different, nonzero weight
    q = torch.arange(size)[:, None]
    k = torch.arange(size)[None, :]
    strength = 3 * torch.rand(3, heads, 1, 1, generator=g)
    scores = scores + strength[0] * ((q - k == n - 1) & (q >= n)) + strength[1] * (q - k == 1) \
        + strength[2] * (q - k == n)
    scores = scores.masked_fill(k > q, float("-inf"))
    return {"pattern": scores.softmax(-1), "seq_len": n}


EX1 = FunctionExercise(
    id="ch17_ex1",
    title="the induction score",
    reference=induction_score,
    make_inputs=_repeat_pattern_inputs,
    mistakes=[
        Mistake("off by one: attended to the earlier copy of the same token", "Offset seq_len (key i for "
                "query n + i) measures attention to the *same* token's earlier occurrence, a duplicate-token "
                "head. Induction looks one further: key i + 1, offset seq_len - 1.",
                lambda pattern, seq_len: _stripe(pattern, seq_len, seq_len)),
        Mistake("off by one the other way", "Offset seq_len - 2 reaches key i + 2, one token too far. The "
                "induction target of query n + i is key i + 1.",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 2, seq_len)),
        Mistake("included the query at position n - 1", "The diagonal at offset -(n - 1) starts at query "
                "n - 1, a token of the first copy (its entry is attention to position 0). Only the n queries "
                "of the second copy, n .. 2n - 1, have an earlier occurrence to look back to.",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 1, seq_len - 1)),
        Mistake("averaged over the whole pattern", "The score reads one stripe: query n + i to key i + 1. "
                "Averaging every entry measures nothing about induction.",
                lambda pattern, seq_len: pattern.mean(dim=(0, 2, 3))),
        Mistake("transposed", "Rows are queries and columns keys: the stripe lies below the diagonal "
                "(keys earlier than queries). Above it a causal pattern is zero.",
                lambda pattern, seq_len: _stripe(pattern.transpose(-1, -2), seq_len - 1, seq_len)),
        Mistake("summed instead of averaged", "Average over the batch and the n queries, so that 1 means "
                "perfect induction.",
                lambda pattern, seq_len: _stripe(pattern, seq_len - 1, seq_len) * pattern.shape[0] * seq_len),
        Mistake("kept the batch axis", "Average over the batch too: return one number per head, [head].",
                lambda pattern, seq_len: pattern.diagonal(offset=-(seq_len - 1), dim1=-2, dim2=-1)[..., 1:]
                .mean(-1)),
    ],
    hint="In the second copy, query n + i sees the same token as position i, and an induction head attends "
         "to the token after it, key i + 1. Those (query, key) pairs lie on one diagonal of each [2n, 2n] "
         "pattern, a fixed distance below the main one. Keep only the queries in the second copy and "
         "average over the batch and the queries: one score per head, [head].",
)


def prev_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """Mean attention from each position to the one before it.

    pattern: [batch, head, pos, pos] (rows: queries). Averages pattern[b, h, p, p - 1] over
    the batch and every position p >= 1 (position 0 has no predecessor). Returns [head].
    """
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def _prev_inputs(g: torch.Generator) -> dict:
    size = 6 + int(torch.randint(0, 6, (1,), generator=g))
    batch, heads = 2, 3
    scores = torch.randn(batch, heads, size, size, generator=g)
    q = torch.arange(size)[:, None]
    k = torch.arange(size)[None, :]
    strength = 3 * torch.rand(3, heads, 1, 1, generator=g)
    scores = scores + strength[0] * (q - k == 1) + strength[1] * (q == k) + strength[2] * (q - k == 2)
    scores = scores.masked_fill(k > q, float("-inf"))
    return {"pattern": scores.softmax(-1)}


def _diag(pattern, offset):
    return pattern.diagonal(offset=offset, dim1=-2, dim2=-1)


EX2 = FunctionExercise(
    id="ch17_ex2",
    title="the previous-token score",
    reference=prev_token_score,
    make_inputs=_prev_inputs,
    mistakes=[
        Mistake("read the main diagonal", "pattern[p, p] is attention to the token itself. The previous "
                "token is key p - 1: the diagonal at offset -1.",
                lambda pattern: _diag(pattern, 0).mean(dim=(0, 2))),
        Mistake("read the main diagonal", "pattern[p, p] is attention to the token itself. The previous "
                "token is key p - 1: the diagonal at offset -1.",
                lambda pattern: _diag(pattern, 0)[..., 1:].mean(dim=(0, 2))),
        Mistake("looked at the next token (offset +1) or transposed", "Key p + 1 is in the future of query p, "
                "which a causal pattern never attends to (those entries are 0); reading the transposed "
                "pattern gives the same. The previous token is below the diagonal, offset -1.",
                lambda pattern: _diag(pattern, 1).mean(dim=(0, 2))),
        Mistake("counted position 0", "Position 0 has no previous token. Averaging pattern[p, p - 1] over "
                "all positions (e.g. with torch.roll, where position 0 wraps to a masked future key) divides "
                "by pos instead of pos - 1.",
                lambda pattern: _diag(pattern, -1).sum(-1).mean(0) / pattern.shape[-1]),
        Mistake("two tokens back", "Offset -2 is the token before the previous one.",
                lambda pattern: _diag(pattern, -2).mean(dim=(0, 2))),
        Mistake("summed instead of averaged", "Average over the batch and positions, so that 1 means the head "
                "always attends to the previous token.",
                lambda pattern: _diag(pattern, -1).sum(dim=(0, 2))),
        Mistake("kept the batch axis", "Average over the batch too: return one number per head, [head].",
                lambda pattern: _diag(pattern, -1).mean(-1)),
    ],
    hint="The attention from each position p to p - 1 lies on one diagonal of the [pos, pos] pattern, just "
         "below the main one. Average those entries over the batch and over p = 1 .. pos - 1: one score "
         "per head, [head].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
