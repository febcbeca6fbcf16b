"""Planted wrong answers for chapter 15's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch15 import one_layer_logits


def first_head_only(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return one_layer_logits(tokens, patterns[:1], W_E, W_V[:1], W_O[:1], b_V[:1], b_O, W_U, b_U)


def argmin(full_qk, full_ov, current):
    src = full_qk[current].argmin(-1)
    return torch.stack([src, full_ov[src].argmin(-1)], -1)


def transposed_patterns(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    # patterns[h, i, j] read as "j reads i": the feedback names the symptom (later tokens
    # leak into earlier positions), not the axis to swap
    return one_layer_logits(tokens, patterns.transpose(1, 2), W_E, W_V, W_O, b_V, b_O, W_U, b_U)


def heads_averaged(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    # the heads' term divided by the number of heads, written another way
    n = patterns.shape[0]
    return one_layer_logits(tokens, patterns / n, W_E, W_V, W_O, b_V, b_O, W_U, b_U)


def no_biases(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    # every bias dropped, written another way: the message names the symptom (a constant
    # row), not how many biases or which ones
    zero = torch.zeros_like
    return one_layer_logits(tokens, patterns, W_E, W_V, W_O, zero(b_V), zero(b_O), W_U, zero(b_U))


def qk_columns(full_qk, full_ov, current):
    src = full_qk.T[current].argmax(-1)
    return torch.stack([src, full_ov[src].argmax(-1)], -1)


def source_only(full_qk, full_ov, current):
    return full_qk[current].argmax(-1)


def heads_only(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    # the direct path taken out again, written another way: the message asks what the model
    # still outputs with every W_O at zero, not which term to add
    full = one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U)
    return full - W_E[tokens] @ W_U


def ov_row_of_current(full_qk, full_ov, current):
    # the right sources, but C read from the current token's own OV row: the message asks
    # whether the outputs follow the sources, not which row to read
    src = full_qk.index_select(0, current).argmax(1)
    return torch.stack([src, full_ov.index_select(0, current).argmax(1)], 1)


def sources_from_ov(full_qk, full_ov, current):
    # sources taken from the OV table: the message asks where they came from
    src = full_ov.index_select(0, current).argmax(1)
    return torch.stack([src, full_ov.index_select(0, src).argmax(1)], 1)


MUTATIONS = {
    "ch15_ex1": [
        (first_head_only, "wrong values"),
        (transposed_patterns, "a position's logits depend on later tokens"),
        (heads_averaged, "the heads' term has the wrong size"),
        (heads_only, "a path is missing"),
        (no_biases, "several biases are left out"),
    ],
    "ch15_ex2": [
        (argmin, "wrong values"),
        (source_only, "wrong shape"),
        (qk_columns, "source is not the key the current token scores highest"),
        (ov_row_of_current, "output read from another token's OV row"),
        (sources_from_ov, "sources do not follow the key scores"),
    ],
}
