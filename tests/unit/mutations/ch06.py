"""Planted wrong answers for chapter 6's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch06 import qk_scores


def off_by_one_mask(q, k, causal=True):  # also hides the diagonal: a query may not see itself
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if not causal:
        return s.softmax(-1)
    m = torch.tril(torch.ones(q.shape[-2], q.shape[-2]), -1).bool()
    m[0, 0] = True
    return s.masked_fill(~m, float("-inf")).softmax(-1)


def first_head_only(x, W_Q, W_K):
    return qk_scores(x, W_Q[:1], W_K[:1])


MUTATIONS = {
    "ch06_ex1": [
        (off_by_one_mask, "wrong values"),
    ],
    "ch06_ex2": [
        (first_head_only, "wrong shape"),
    ],
}
