"""The book's head scores against TransformerLens's ``head_detector.detect_head``.

``detect_head`` (error_measure "mul") scores a head by the attention that falls on a 0/1
detection pattern, summed over every query and divided by the total attention, which is the
number of positions P (each row of a pattern sums to 1). The book averages over the queries
the score is about instead. So, on one sequence of P tokens, by the two definitions:

- previous token: TL = sum_{p=1}^{P-1} A[p, p-1] / P = ours * (P - 1) / P;
- duplicate token: TL = sum_{q in D} sum_{k<q, t_k = t_q} A[q, k] / P = ours * |D| / P, D the
  queries whose token occurred earlier;
- induction, on two copies of n distinct tokens (P = 2n): TL marks (n + i, i + 1) for each i,
  so TL = sum_i A[n + i, i + 1] / (2n) = ours / 2.

The toy models have no tokenizer, so ``to_tokens`` is given the tokens; everything that scores
is TransformerLens's.
"""

from __future__ import annotations

import torch
from transformer_lens.head_detector import detect_head

from circuitbook.heads import duplicate_token_pattern_score, induction_scores, prev_token_pattern_score
from conftest import build_model, no_repeat_tokens

N = 7  # tokens per copy; two copies, 14 positions, below n_ctx as detect_head requires


def _tl(model, tokens, name):
    model.to_tokens = lambda seq, **kw: tokens  # no tokenizer: hand TL the tokens
    try:
        return detect_head(model, "unused", name).double()
    finally:
        del model.to_tokens


def _patterns(model, tokens):
    _, cache = model.run_with_cache(tokens)
    return torch.stack([cache["pattern", layer] for layer in range(model.cfg.n_layers)])  # [L, 1, H, P, P]


def test_previous_token_score():
    model = build_model(2, n_ctx=16, seed=3)
    tokens = no_repeat_tokens(1, N, model.cfg.d_vocab, seed=1)
    ours = torch.stack([prev_token_pattern_score(p) for p in _patterns(model, tokens)])
    P = tokens.shape[1]
    torch.testing.assert_close(_tl(model, tokens, "previous_token_head"), ours * (P - 1) / P)


def test_duplicate_token_score():
    model = build_model(2, n_ctx=16, seed=3)
    # a sequence with repeats at irregular places, some tokens three times
    tokens = torch.tensor([[1, 4, 1, 7, 4, 9, 1, 2, 7, 3, 3, 5]])
    ours = torch.stack([duplicate_token_pattern_score(p, tokens) for p in _patterns(model, tokens)])
    D = sum(int((tokens[0, :q] == tokens[0, q]).any()) for q in range(tokens.shape[1]))
    assert D == 5  # positions 2, 4, 6, 8, 10
    torch.testing.assert_close(_tl(model, tokens, "duplicate_token_head"), ours * D / tokens.shape[1])


def test_induction_score():
    model = build_model(2, n_ctx=16, seed=3)
    tokens = no_repeat_tokens(1, N, model.cfg.d_vocab, seed=2)
    ours = induction_scores(model, tokens=tokens)
    torch.testing.assert_close(_tl(model, tokens, "induction_head"), ours.double() / 2)
