"""Planted wrong answers for chapter 17's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch17 import induction_score, phase_change, prev_token_score


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


def zeroed(z, head):
    out = z.clone()
    out[:, :, head] = 0
    return out


def batch_mean_only(z, head):
    out = z.clone()
    out[:, :, head] = z[:, :, head].mean(0)
    return out


def position_mean_only(z, head):
    out = z.clone()
    for b in range(z.shape[0]):
        out[b, :, head] = z[b, :, head].mean(0)
    return out


def scalar_mean(z, head):
    out = z.clone()
    out[:, :, head] = z[:, :, head].mean()
    return out


def every_head(z, head):
    return z.mean((0, 1), keepdim=True).repeat(z.shape[0], z.shape[1], 1, 1)


def only_the_head(z, head):
    return z[:, :, head].mean((0, 1)).expand(z.shape[0], z.shape[1], -1)


def untouched_z(z, head):
    return z.clone()


def to_final(steps, second_copy, chance):
    level = (chance + second_copy[-1]) / 2
    return [s for s, v in zip(steps, second_copy) if v < level][0]


def index_not_step(steps, second_copy, chance):
    level = (chance + min(second_copy)) / 2
    return next(i for i, v in enumerate(second_copy) if v < level)


def one_early(steps, second_copy, chance):
    level = (chance + min(second_copy)) / 2
    i = next(i for i, v in enumerate(second_copy) if v < level)
    return steps[i - 1]


def below_chance(steps, second_copy, chance):
    return next(s for s, v in zip(steps, second_copy) if v < chance)


def from_first(steps, second_copy, chance):
    level = (second_copy[0] + min(second_copy)) / 2
    return next(s for s, v in zip(steps, second_copy) if v < level)


def last_below(steps, second_copy, chance):
    level = (chance + min(second_copy)) / 2
    return [s for s, v in zip(steps, second_copy) if v < level][-1]


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
    "ch17_ex3": [
        (zeroed, "zero-ablated"),
        (batch_mean_only, "averaged over the batch only"),
        (position_mean_only, "averaged over the positions only"),
        (scalar_mean, "averaged over d_head too"),
        (every_head, "ablated every head"),
        (only_the_head, "returned only the ablated head"),
        (untouched_z, "wrong values"),
    ],
    "ch17_ex4": [
        (to_final, "halfway to the final value"),
        (index_not_step, "returned the index, not the step"),
        (one_early, "the last step above the midpoint"),
        (below_chance, "first step below chance"),
        (from_first, "halfway from the first value"),
        (last_below, None),
        (lambda steps, second_copy, chance: float(phase_change(steps, second_copy, chance) + 1), None),
    ],
}
