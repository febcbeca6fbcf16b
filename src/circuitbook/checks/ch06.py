"""Chapter 6 (scaled dot-product attention): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def _causal(n: int) -> torch.Tensor:
    """[n, n] bool, True where query i may attend to key j (j <= i)."""
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def attention_pattern(q, k, causal=True):
    """q, k: [batch, n, d_k] -> attention pattern [batch, n, n] (rows:
    queries), causally masked when causal is true."""
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[-2]
        future = torch.ones(n, n).triu(1).bool()
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1)


def _pattern_inputs(g: torch.Generator) -> dict:
    n, d_k = 4 + int(torch.randint(0, 5, (1,), generator=g)), 16 + int(torch.randint(0, 49, (1,), generator=g))
    # scaled so the softmax is neither uniform nor one-hot: every mistake changes the answer.
    # Consecutive trials run on consecutive seeds, so alternating the flag by the seed's parity
    # exercises both values of `causal` in every check (a function that ignores it fails).
    return {"q": 2 * torch.randn(2, n, d_k, generator=g), "k": 2 * torch.randn(2, n, d_k, generator=g),
            "causal": g.initial_seed() % 2 == 0}


def _scores(q, k):
    return q @ k.transpose(-1, -2)


def _mask(scores: torch.Tensor, causal: bool, *, upper: bool = False) -> torch.Tensor:
    """The causal mask when ``causal`` (``upper``: the mask pointing the wrong way)."""
    if not causal:
        return scores
    allowed = _causal(scores.shape[-1])
    return scores.masked_fill(~(allowed.T if upper else allowed), float("-inf"))


def _scaled(q, k):
    return _scores(q, k) / q.shape[-1] ** 0.5


EX1 = FunctionExercise(
    id="ch06_ex1",
    title="the attention pattern, causal or not",
    reference=attention_pattern,
    make_inputs=_pattern_inputs,
    mistakes=[
        Mistake("forgot the scale", "Divide the scores by sqrt(d_k) before the softmax.",
                lambda q, k, causal: _mask(_scores(q, k), causal).softmax(-1)),
        Mistake("scaled by d_k instead of sqrt(d_k)", "The scale is 1/sqrt(d_k), not 1/d_k.",
                lambda q, k, causal: _mask(_scores(q, k) / q.shape[-1], causal).softmax(-1)),
        Mistake("forgot the causal mask", "With causal=True, set the scores of future keys (j > i) to -inf "
                "before the softmax.",
                lambda q, k, causal: _scaled(q, k).softmax(-1)),
        Mistake("masked although causal=False", "The mask is applied only when `causal` is true; with "
                "causal=False every query sees every key (an encoder's self-attention).",
                lambda q, k, causal: _mask(_scaled(q, k), True).softmax(-1)),
        Mistake("mask points the wrong way", "Query i may see keys j <= i (a lower-triangular pattern), "
                "not j >= i.",
                lambda q, k, causal: _mask(_scaled(q, k), causal, upper=True).softmax(-1)),
        Mistake("softmax over the wrong axis", "Normalise over keys (the last axis): each query's row must sum "
                "to 1.",
                lambda q, k, causal: _mask(_scaled(q, k), causal).softmax(-2)),
        Mistake("masked after the softmax", "Mask before the softmax; zeroing weights afterwards leaves rows that "
                "no longer sum to 1.",
                lambda q, k, causal: _scaled(q, k).softmax(-1).masked_fill(~_causal(q.shape[-2]), 0.0)
                if causal else _scaled(q, k).softmax(-1)),
        Mistake("transposed", "Rows are queries and columns are keys: pattern[i, j] is how much query i attends "
                "to key j.",
                lambda q, k, causal: attention_pattern(q, k, causal).transpose(-1, -2)),
        Mistake("unnormalised", "Apply a softmax over the keys: the pattern is a probability distribution per "
                "query.",
                lambda q, k, causal: _mask(_scaled(q, k), causal).exp()),
    ],
    hint="Score every query against every key (a [batch, n, n] table, rows are queries), scale by the key "
         "width as the paper does, and, only when `causal` is true, hide the keys that come after each "
         "query before the softmax, so that they get exactly zero weight. Then normalise each row into a "
         "distribution. The check tries both values of `causal`.",
)


def qk_scores(x, W_Q, W_K):
    """x: [pos, d_model]; W_Q, W_K: [n_heads, d_model, d_head]
    -> scores [n_heads, pos_q, pos_k]."""
    q = torch.einsum("pd,hde->hpe", x, W_Q)
    k = torch.einsum("pd,hde->hpe", x, W_K)
    return q @ k.transpose(-1, -2) / W_Q.shape[-1] ** 0.5


def _qk_inputs(g: torch.Generator) -> dict:
    d_model, d_head, n_heads = 24, 6, 3
    pos = 5 + int(torch.randint(0, 4, (1,), generator=g))
    return {"x": torch.randn(pos, d_model, generator=g),
            "W_Q": torch.randn(n_heads, d_model, d_head, generator=g),
            "W_K": torch.randn(n_heads, d_model, d_head, generator=g)}


EX2 = FunctionExercise(
    id="ch06_ex2",
    title="scores from the residual stream",
    reference=qk_scores,
    make_inputs=_qk_inputs,
    mistakes=[
        Mistake("forgot the scale", "Divide by sqrt(d_head).",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * W_Q.shape[-1] ** 0.5),
        Mistake("scaled by sqrt(d_model)", "The scale uses the head dimension d_head, the length of q and k, "
                "not d_model.",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * (W_Q.shape[-1] / W_Q.shape[-2]) ** 0.5),
        Mistake("queries and keys swapped", "scores[h, i, j] pairs the query of position i with the key of "
                "position j. Swapping W_Q and W_K, or transposing the last two axes, gives the same wrong "
                "answer: x_j W_QK x_i^T instead of x_i W_QK x_j^T.",
                lambda x, W_Q, W_K: qk_scores(x, W_K, W_Q)),
        Mistake("used W_Q for the keys too", "Keys come from W_K.",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_Q)),
        Mistake("applied a softmax", "This exercise asks for the scores, before any softmax or mask.",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K).softmax(-1)),
    ],
    hint="Project the stream into each head's query space and key space ([n_heads, pos, d_head] each), "
         "score every query position against every key position, and scale by the head width as the paper "
         "does. No softmax: these are scores, [n_heads, pos_q, pos_k].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
