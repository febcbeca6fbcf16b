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
        Mistake("forgot the scale", "Your scores are plain dot products. The chapter's variance argument "
                "says how the size of q . k grows with d_k: what does the paper do about it before the "
                "softmax?",
                lambda q, k, causal: _mask(_scores(q, k), causal).softmax(-1)),
        Mistake("scale with the wrong power", "Your scale is not the paper's: with it the scores' "
                "variance shrinks as d_k grows. Which divisor keeps the variance of q . k at 1 for "
                "unit-variance entries?",
                lambda q, k, causal: _mask(_scores(q, k) / q.shape[-1], causal).softmax(-1)),
        Mistake("forgot the causal mask", "With causal=True your queries still give weight to keys that come "
                "after them. Which keys may a language model's query i read, and what score makes a key's "
                "weight exactly zero after a softmax?",
                lambda q, k, causal: _scaled(q, k).softmax(-1)),
        Mistake("masked although causal=False", "Look at what your function returns when causal=False: is "
                "that an encoder's self-attention? Reread what the flag is for.",
                lambda q, k, causal: _mask(_scaled(q, k), True).softmax(-1)),
        Mistake("mask points the wrong way", "Your mask hides the wrong keys. Rows are queries and columns are "
                "keys: for query i, which keys j are the past, and on which side of the diagonal do they "
                "lie?",
                lambda q, k, causal: _mask(_scaled(q, k), causal, upper=True).softmax(-1)),
        Mistake("softmax over the wrong axis", "Sum your pattern along each axis: which one comes to 1? Each "
                "query's weights are a distribution over the keys, and the docstring says which axis "
                "holds the keys.",
                lambda q, k, causal: _mask(_scaled(q, k), causal).softmax(-2)),
        Mistake("masked after the softmax", "Sum a row of your causal pattern: does it come to 1? Think about "
                "where in the computation a forbidden key has to be removed for the remaining weights "
                "to stay a distribution.",
                lambda q, k, causal: _scaled(q, k).softmax(-1).masked_fill(~_causal(q.shape[-2]), 0.0)
                if causal else _scaled(q, k).softmax(-1)),
        Mistake("transposed", "Your pattern is laid out differently from the docstring's. Check on your output "
                "which axis a single query's distribution runs along, and compare with the axes the "
                "docstring names.",
                lambda q, k, causal: attention_pattern(q, k, causal).transpose(-1, -2)),
        Mistake("unnormalised", "Your weights are positive, but does a row sum to 1? The pattern is a "
                "probability distribution per query: which step turns scores into one?",
                lambda q, k, causal: _mask(_scaled(q, k), causal).exp()),
    ],
    hint="Go step by step, with one question at each. Score every query against every key: in your "
         "[batch, n, n] table, which axis holds the queries? Scale the scores as the paper does: by what, "
         "so that their spread does not grow with the width? When `causal` is true, hide some keys: which "
         "ones, for query i, and at which step must they go for the remaining weights to stay a "
         "distribution? Last, turn each query's scores into a distribution. The check tries both values "
         "of `causal`.",
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
        Mistake("forgot the scale", "Your scores are plain dot products. What does the paper do to q . k "
                "before the softmax, and with which length?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * W_Q.shape[-1] ** 0.5),
        Mistake("scale from the wrong length", "Your scale uses the wrong length. The scale comes from the "
                "variance of a dot product: which vectors are dotted here, and how long are they?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * (W_Q.shape[-1] / W_Q.shape[-2]) ** 0.5),
        Mistake("queries and keys swapped", "Your scores[h, i, j] pairs the two positions the other way from "
                "the docstring's [n_heads, pos_q, pos_k]. Take one entry of yours and trace which "
                "position's query and which position's key it was made from.",
                lambda x, W_Q, W_K: qk_scores(x, W_K, W_Q)),
        Mistake("used W_Q for the keys too", "Your queries and keys come from the same weights. Which of the "
                "head's matrices makes its keys?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_Q)),
        Mistake("applied a softmax", "This exercise asks for the scores, before any softmax or mask.",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K).softmax(-1)),
    ],
    hint="Project the stream into each head's query space and key space ([n_heads, pos, d_head] each) "
         "and score every query position against every key position. The paper then scales the scores: "
         "by what, worked out from the length of which vectors? No softmax: these are scores, "
         "[n_heads, pos_q, pos_k].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
