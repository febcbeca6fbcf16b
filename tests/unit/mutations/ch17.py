"""Planted wrong answers for chapter 17's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch17 import phase_change, prev_token_score


def first_half_queries(pattern, seq_len):  # queries of the first copy, keys one ahead
    n = seq_len
    return torch.stack([pattern[:, :, i + 1, i] for i in range(n - 1)], -1).mean((0, 2))


def heads_averaged(pattern):
    return prev_token_score(pattern).mean()


def rolled_prev(pattern):  # torch.roll wraps query 0 to the last key, a masked 0, and averages it in
    prev_key = torch.roll(torch.eye(pattern.shape[-1]), 1, dims=0)    # [q, k]: 1 at k = q - 1 (mod pos)
    return (pattern * prev_key).sum(-1).mean(dim=(0, 2))


def transposed_prev(pattern):  # keys read as rows: the stripe above the diagonal, all 0
    return pattern.transpose(-1, -2).diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


def self_attention(pattern):  # the main diagonal, written as a mask of the pattern
    return (pattern * torch.eye(pattern.shape[-1])).sum(-1).mean(dim=(0, 2))


def untouched_z(z, head):
    return z.clone()


def last_below(steps, second_copy, chance):
    level = (chance + min(second_copy)) / 2
    return [s for s, v in zip(steps, second_copy) if v < level][-1]


MUTATIONS = {
    "ch17_ex1": [
        (first_half_queries, "wrong values"),
    ],
    "ch17_ex2": [
        (heads_averaged, "wrong shape"),
        (rolled_prev, "counted position 0"),
        (transposed_prev, "looked at the next token (offset +1) or transposed"),
        (self_attention, "read the main diagonal"),
    ],
    "ch17_ex3": [
        (untouched_z, "wrong values"),
    ],
    "ch17_ex4": [
        (last_below, None),
        (lambda steps, second_copy, chance: float(phase_change(steps, second_copy, chance) + 1), None),
    ],
}
