"""Planted wrong answers for chapter 6's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch06 import qk_scores


def _scaled(q, k):
    return q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5


def _masked(scores, allowed):
    """softmax over the allowed keys; a row with none is 0 (as the statement asks)."""
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1).nan_to_num(0.0)


def off_by_one_mask(q, k, key_mask):  # also hides the diagonal: a query may not see itself
    n = q.shape[-2]
    allowed = torch.tril(torch.ones(n, n), -1).bool() & key_mask[:, None, :] & key_mask[:, :, None]
    return _masked(_scaled(q, k), allowed)


def first_sequence_mask_for_all(q, k, key_mask):  # the first sequence's padding used for every one
    n = q.shape[-2]
    shared = key_mask[:1].expand_as(key_mask)
    allowed = torch.tril(torch.ones(n, n)).bool() & shared[:, None, :] & shared[:, :, None]
    return _masked(_scaled(q, k), allowed)


def mask_read_inverted(q, k, key_mask):  # True taken as padding: the real tokens are hidden
    n = q.shape[-2]
    pad = ~key_mask
    allowed = torch.tril(torch.ones(n, n)).bool() & pad[:, None, :] & pad[:, :, None]
    return _masked(_scaled(q, k), allowed)


def mask_added_to_scores(q, k, key_mask):  # the bool mask added as a score bonus, not a filter
    n = q.shape[-2]
    causal = torch.tril(torch.ones(n, n)).bool()
    scores = _scaled(q, k) + key_mask[:, None, :].float()
    return scores.masked_fill(~causal, float("-inf")).softmax(-1) * key_mask[:, :, None]


def padding_rows_zeroed_by_a_product(q, k, key_mask):  # -inf on keys, then x the query mask: NaN * 0 = NaN
    n = q.shape[-2]
    allowed = torch.tril(torch.ones(n, n)).bool() & key_mask[:, None, :]
    return _scaled(q, k).masked_fill(~allowed, float("-inf")).softmax(-1) * key_mask[:, :, None]


def masked_after_softmax_renormalised(q, k, key_mask):  # right rows for real queries, 0/0 for padding ones
    n = q.shape[-2]
    allowed = torch.tril(torch.ones(n, n)).bool() & key_mask[:, None, :] & key_mask[:, :, None]
    p = _scaled(q, k).softmax(-1) * allowed
    return p / p.sum(-1, keepdim=True)


def first_head_only(x, W_Q, W_K):
    return qk_scores(x, W_Q[:1], W_K[:1])


MUTATIONS = {
    "ch06_ex1": [
        (off_by_one_mask, "queries give themselves no weight"),
        (padding_rows_zeroed_by_a_product, "rows of padding queries before any real token are NaN"),
        (masked_after_softmax_renormalised, "rows of padding queries are NaN"),
        (first_sequence_mask_for_all, "wrong values"),
        (mask_read_inverted, "wrong values"),
        (mask_added_to_scores, "wrong values"),
    ],
    "ch06_ex2": [
        (first_head_only, "wrong shape"),
    ],
}
