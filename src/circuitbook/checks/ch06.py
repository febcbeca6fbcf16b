"""Chapter 6 (scaled dot-product attention): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, allclose


def _causal(n: int) -> torch.Tensor:
    """[n, n] bool, True where query i may attend to key j (j <= i)."""
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def attention_pattern(q, k, key_mask):
    """q, k: [batch, n, d_k]; key_mask: [batch, n] bool, True at real tokens
    -> attention pattern [batch, n, n] (rows: queries): causal, no weight on
    padding keys, and the row of a padding query all 0."""
    n = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    causal = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
    allowed = causal & key_mask[:, None, :] & key_mask[:, :, None]  # [b, q, k]
    pattern = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
    return pattern.masked_fill(~allowed.any(-1, keepdim=True), 0.0)


def _pattern_inputs(g: torch.Generator) -> dict:
    n, d_k = 5 + int(torch.randint(0, 4, (1,), generator=g)), 16 + int(torch.randint(0, 49, (1,), generator=g))
    # Three sequences, each with some padding and at least one real token: padded on the right,
    # padded on the left (its query 0 is padding, and a mask of padding keys alone leaves that
    # row with no key to read), and padded at scattered positions. The scores are scaled so the
    # softmax is neither uniform nor one-hot: every mistake below changes the answer.
    lengths = 1 + torch.randint(0, n - 1, (2,), generator=g)  # 1 .. n-1 real tokens
    pos = torch.arange(n)
    scattered = torch.rand(n, generator=g) < 0.6
    two = torch.randperm(n, generator=g)[:2]
    scattered[two[0]], scattered[two[1]] = True, False
    key_mask = torch.stack([pos < lengths[0], pos >= n - lengths[1], scattered])
    return {"q": 2 * torch.randn(3, n, d_k, generator=g), "k": 2 * torch.randn(3, n, d_k, generator=g),
            "key_mask": key_mask}


def _variant(q, k, key_mask, *, divisor=None, causal=True, upper=False, diagonal=0, keys=True,
             queries=True, fill=float("-inf"), zero_rows=True, after=False, times_queries=False):
    """The pattern with one step changed: the divisor of the scores, which of the three masks
    are applied (``upper``: the causal mask pointing the wrong way; ``diagonal=-1``: a query
    may not read itself), the fill value, whether the rows with no allowed key are set to 0,
    whether the mask comes after the softmax, and (``times_queries``) whether the padding
    queries' rows are zeroed by multiplying the pattern by the mask, which leaves a NaN a NaN."""
    n = q.shape[-2]
    scores = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5 if divisor is None else divisor)
    allowed = torch.ones(key_mask.shape[0], n, n, dtype=torch.bool)
    if causal:
        allowed = allowed & (_causal(n).T if upper else torch.ones(n, n, dtype=torch.bool).tril(diagonal))
    if keys:
        allowed = allowed & key_mask[:, None, :]
    if times_queries:  # keys masked before the softmax, queries by a product after it
        return scores.masked_fill(~allowed, fill).softmax(-1) * key_mask[:, :, None]
    if queries:
        allowed = allowed & key_mask[:, :, None]
    if after:
        return scores.softmax(-1) * allowed
    pattern = scores.masked_fill(~allowed, fill).softmax(-1)
    return pattern.masked_fill(~allowed.any(-1, keepdim=True), 0.0) if zero_rows else pattern


EX1 = FunctionExercise(
    id="ch06_ex1",
    title="the causal pattern of a padded batch",
    reference=attention_pattern,
    make_inputs=_pattern_inputs,
    compare=allclose(equal_nan=True),  # the NaN-row mistakes below are recognised by recomputing them
    mistakes=[
        # names are what the student sees in an autograder's report: each says the symptom
        Mistake("rows of padding queries are NaN", "Some rows of your pattern are NaN: the rows of padding "
                "queries, which may read no key at all. Follow one such row through your computation: what "
                "does it give on a row with no allowed key (the cell on -1e9 and -inf above shows one way "
                "to get NaN), and what does the statement ask such a row to hold?",
                lambda q, k, key_mask: _variant(q, k, key_mask, zero_rows=False)),
        Mistake("rows of padding queries before any real token are NaN", "Your pattern is NaN on the rows of "
                "padding queries that come before every real token of their sequence. Those queries may "
                "read no key at all: what does your row hold for them before your last step (the cell on "
                "-1e9 and -inf above), and what does NaN times 0 give?",
                lambda q, k, key_mask: _variant(q, k, key_mask, times_queries=True)),
        Mistake("rows of padding queries are uniform", "The rows of your padding queries spread their weight "
                "evenly over every key, future and padding keys included. Such a query may read no key: "
                "what does the statement ask its row to hold, and which step of your computation could "
                "produce that row?",
                lambda q, k, key_mask: _variant(q, k, key_mask, fill=-1e9, zero_rows=False)),
        Mistake("padding queries give weight to real tokens", "Look at the row of a padding query in your "
                "pattern: it puts weight on real tokens. Reread what the statement says a padding position "
                "reads.",
                lambda q, k, key_mask: _variant(q, k, key_mask, queries=False)),
        Mistake("padding queries give weight to real tokens, or are NaN", "Look at the rows of padding "
                "queries in your pattern: where real tokens come before them they put weight on those, "
                "and where none do the row is NaN. Reread what the statement says a padding position reads, "
                "and what its row should hold.",
                lambda q, k, key_mask: _variant(q, k, key_mask, queries=False, zero_rows=False)),
        Mistake("padding keys receive weight", "In your pattern real queries still give weight to padding "
                "keys. Which part of your mask says, for each sequence, which keys are real, and along which "
                "axis of the [batch, query, key] table must it act?",
                lambda q, k, key_mask: _variant(q, k, key_mask, keys=False)),
        Mistake("future keys receive weight", "Your queries give weight to keys that come after them. Which "
                "keys may query i of a language model read, and what score makes a key's weight exactly "
                "zero after a softmax?",
                lambda q, k, key_mask: _variant(q, k, key_mask, causal=False)),
        Mistake("later keys receive weight and earlier ones none", "Your mask hides the wrong keys. Rows are "
                "queries and columns are keys: for query i, which keys j are the past, and on which side of "
                "the diagonal do they lie?",
                lambda q, k, key_mask: _variant(q, k, key_mask, upper=True)),
        Mistake("queries give themselves no weight", "Look at the diagonal of your pattern, where query i "
                "meets key i: it holds no weight anywhere. Which keys does the causal rule let query i read?",
                lambda q, k, key_mask: _variant(q, k, key_mask, diagonal=-1)),
        Mistake("pattern sharper than the paper's", "Your scores are plain dot products. The chapter's "
                "variance argument says how the size of q . k grows with d_k: what does the paper do about "
                "it before the softmax?",
                lambda q, k, key_mask: _variant(q, k, key_mask, divisor=1.0)),
        Mistake("pattern flatter than the paper's", "Your scale is not the paper's: with it the scores' "
                "variance shrinks as d_k grows. Divided by which number does q . k keep a variance of 1 "
                "for unit-variance entries?",
                lambda q, k, key_mask: _variant(q, k, key_mask, divisor=q.shape[-1])),
        Mistake("rows of real queries do not sum to 1", "Sum a row of your pattern for a real query: does it "
                "come to 1? Think about where in the computation a forbidden key has to be removed for the "
                "remaining weights to stay a distribution.",
                lambda q, k, key_mask: _variant(q, k, key_mask, after=True)),
        Mistake("weights laid out key by query", "Your pattern is laid out differently from the docstring's. "
                "Check on your output which axis a single query's distribution runs along, and compare with "
                "the axes the docstring names.",
                lambda q, k, key_mask: attention_pattern(q, k, key_mask).transpose(-1, -2)),
    ],
    hint="Go step by step, with one question at each. Score every query against every key and scale the "
         "scores as the paper does. Then build one True/False table, [batch, query, key], of the pairs "
         "that may meet: what must hold of the key's position, of the key, and of the query? Where must a "
         "forbidden pair be removed for the remaining weights to stay a distribution? Last, look at a row "
         "that has no allowed pair: what does your computation give there, and what does the statement ask "
         "for? The check runs on sequences padded on the right, on the left and in between.",
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
        # names are what the instructor's and the autograder's reports show: each says the symptom
        Mistake("scores too large by a constant factor", "Your scores are plain dot products. What does the "
                "paper do to q . k before the softmax, and with which length?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * W_Q.shape[-1] ** 0.5),
        Mistake("scores too small by a constant factor", "Your scale uses the wrong length. The scale comes "
                "from the variance of a dot product: which vectors are dotted here, and how long are they?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K) * (W_Q.shape[-1] / W_Q.shape[-2]) ** 0.5),
        Mistake("scores laid out key by query", "Your scores[h, i, j] pairs the two positions the other way "
                "from the docstring's [n_heads, pos_q, pos_k]. Take one entry of yours and trace which "
                "position's query and which position's key it was made from.",
                lambda x, W_Q, W_K: qk_scores(x, W_K, W_Q)),
        Mistake("scores symmetric in query and key", "Your scores are symmetric: score(i, j) equals score(j, i) "
                "for every pair. What, in the head, makes a query differ from a key?",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_Q)),
        Mistake("rows of the scores sum to 1", "Sum a row of your output: what does it come to, and which "
                "step made that so? Compare with what the exercise asks for.",
                lambda x, W_Q, W_K: qk_scores(x, W_Q, W_K).softmax(-1)),
    ],
    hint="Project the stream into each head's query space and key space ([n_heads, pos, d_head] each) "
         "and score every query position against every key position. The paper then scales the scores: "
         "by what, worked out from the length of which vectors? No softmax: these are scores, "
         "[n_heads, pos_q, pos_k].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
