"""Planted wrong answers for chapter 6's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch06 import attention_pattern, qk_scores


def _tril(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def _masked(s, causal):
    return s.masked_fill(~_tril(s.shape[-1]), float("-inf")) if causal else s


def no_scale(q, k, causal=True):
    return _masked(q @ k.transpose(-1, -2), causal).softmax(-1)


def over_dk(q, k, causal=True):
    return _masked(q @ k.transpose(-1, -2) / q.shape[-1], causal).softmax(-1)


def no_mask(q, k, causal=True):
    return (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)


def ignores_flag(q, k, causal=True):  # always masks: right for causal=True only
    return _masked(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, True).softmax(-1)


def flag_inverted(q, k, causal=True):  # masks exactly when it should not
    return _masked(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, not causal).softmax(-1)


def triu_mask(q, k, causal=True):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if not causal:
        return s.softmax(-1)
    return s.masked_fill(torch.tril(torch.ones(q.shape[-2], q.shape[-2]), -1).bool(), float("-inf")).softmax(-1)


def softmax_queries(q, k, causal=True):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return _masked(s, causal).softmax(dim=-2)


def mask_after(q, k, causal=True):
    p = (q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5).softmax(-1)
    return p * _tril(q.shape[-2]) if causal else p


def transposed(q, k, causal=True):
    return attention_pattern(q, k, causal).mT


def exp_only(q, k, causal=True):
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    return torch.exp(_masked(s, causal))


def off_by_one_mask(q, k, causal=True):  # also hides the diagonal: a query may not see itself
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if not causal:
        return s.softmax(-1)
    m = torch.tril(torch.ones(q.shape[-2], q.shape[-2]), -1).bool()
    m[0, 0] = True
    return s.masked_fill(~m, float("-inf")).softmax(-1)


def no_scale_qk(x, W_Q, W_K):
    return torch.einsum("pd,hde->hpe", x, W_Q) @ torch.einsum("pd,hde->hpe", x, W_K).mT


def sqrt_dmodel(x, W_Q, W_K):
    return no_scale_qk(x, W_Q, W_K) / x.shape[-1] ** 0.5


def swapped(x, W_Q, W_K):
    return qk_scores(x, W_K, W_Q)


def transposed_qk(x, W_Q, W_K):
    return qk_scores(x, W_Q, W_K).mT


def only_wq(x, W_Q, W_K):
    return qk_scores(x, W_Q, W_Q)


def softmaxed(x, W_Q, W_K):
    return qk_scores(x, W_Q, W_K).softmax(-1)


def first_head_only(x, W_Q, W_K):
    return qk_scores(x, W_Q[:1], W_K[:1])


MUTATIONS = {
    "ch06_ex1": [
        (no_scale, "forgot the scale"),
        (over_dk, "scaled by d_k instead of sqrt(d_k)"),
        (no_mask, "forgot the causal mask"),
        (ignores_flag, "masked although causal=False"),
        (flag_inverted, "forgot the causal mask"),  # the first trial is causal at this seed
        (triu_mask, "mask points the wrong way"),
        (softmax_queries, "softmax over the wrong axis"),
        (mask_after, "masked after the softmax"),
        (transposed, "transposed"),
        (exp_only, "unnormalised"),
        (off_by_one_mask, "wrong values"),
    ],
    "ch06_ex2": [
        (no_scale_qk, "forgot the scale"),
        (sqrt_dmodel, "scaled by sqrt(d_model)"),
        (swapped, "queries and keys swapped"),
        (transposed_qk, "queries and keys swapped"),  # the same map as swapping
        (only_wq, "used W_Q for the keys too"),
        (softmaxed, "applied a softmax"),
        (first_head_only, "wrong shape"),
    ],
}
