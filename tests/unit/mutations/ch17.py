"""Planted wrong answers for chapter 17's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch17 import phase_change, prev_token_score


def first_half_queries(pattern, seq_len):  # queries of the first copy, keys one ahead
    n = seq_len
    return torch.stack([pattern[:, :, i + 1, i] for i in range(n - 1)], -1).mean((0, 2))


def heads_averaged(pattern):
    return prev_token_score(pattern).mean()


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
    ],
    "ch17_ex3": [
        (untouched_z, "wrong values"),
    ],
    "ch17_ex4": [
        (last_below, None),
        (lambda steps, second_copy, chance: float(phase_change(steps, second_copy, chance) + 1), None),
    ],
}
