"""Planted wrong answers for chapter 17's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch17 import induction_score, prev_token_score


def offset_seq_len(pattern, seq_len):
    n = seq_len
    return torch.stack([pattern[:, :, n + i, i] for i in range(n)], -1).mean((0, 2))


def offset_too_far(pattern, seq_len):
    n = seq_len
    return torch.stack([pattern[:, :, n + i, i + 2] for i in range(n)], -1).mean((0, 2))


def whole_diagonal(pattern, seq_len):
    return pattern.diagonal(offset=-(seq_len - 1), dim1=-2, dim2=-1).mean((0, 2))


def everything(pattern, seq_len):
    return pattern.mean((0, 2, 3))


def transposed(pattern, seq_len):
    return induction_score(pattern.mT, seq_len)


def summed(pattern, seq_len):
    n = seq_len
    return torch.stack([pattern[:, :, n + i, i + 1] for i in range(n)], -1).sum((0, 2))


def per_batch(pattern, seq_len):
    n = seq_len
    return torch.stack([pattern[:, :, n + i, i + 1] for i in range(n)], -1).mean(-1)


def first_half_queries(pattern, seq_len):  # queries of the first copy, keys one ahead
    n = seq_len
    return torch.stack([pattern[:, :, i + 1, i] for i in range(n - 1)], -1).mean((0, 2))


def main_diag(pattern):
    return pattern.diagonal(dim1=-2, dim2=-1).mean((0, 2))


def future(pattern):
    return pattern.diagonal(offset=1, dim1=-2, dim2=-1).mean((0, 2))


def rolled(pattern):
    n = pattern.shape[-1]
    idx = (torch.arange(n) - 1) % n
    return pattern[..., torch.arange(n), idx].mean((0, 2))


def two_back(pattern):
    return pattern.diagonal(offset=-2, dim1=-2, dim2=-1).mean((0, 2))


def summed_prev(pattern):
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).sum((0, 2))


def per_batch_prev(pattern):
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1)


def heads_averaged(pattern):
    return prev_token_score(pattern).mean()


MUTATIONS = {
    "ch17_ex1": [
        (offset_seq_len, "off by one: attended to the earlier copy of the same token"),
        (offset_too_far, "off by one the other way"),
        (whole_diagonal, "included the query at position n - 1"),
        (everything, "averaged over the whole pattern"),
        (transposed, "transposed"),
        (summed, "summed instead of averaged"),
        (per_batch, "kept the batch axis"),
        (first_half_queries, "wrong values"),
    ],
    "ch17_ex2": [
        (main_diag, "read the main diagonal"),
        (future, "looked at the next token (offset +1) or transposed"),
        (rolled, "counted position 0"),
        (two_back, "two tokens back"),
        (summed_prev, "summed instead of averaged"),
        (per_batch_prev, "kept the batch axis"),
        (heads_averaged, "wrong shape"),
    ],
}
