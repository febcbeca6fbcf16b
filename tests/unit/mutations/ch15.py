"""Planted wrong answers for chapter 15's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch15 import one_layer_logits


def first_head_only(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return one_layer_logits(tokens, patterns[:1], W_E, W_V[:1], W_O[:1], b_V[:1], b_O, W_U, b_U)


def argmin(full_qk, full_ov, current):
    src = full_qk[current].argmin(-1)
    return torch.stack([src, full_ov[src].argmin(-1)], -1)


def source_only(full_qk, full_ov, current):
    return full_qk[current].argmax(-1)


MUTATIONS = {
    "ch15_ex1": [
        (first_head_only, "wrong values"),
    ],
    "ch15_ex2": [
        (argmin, "wrong values"),
        (source_only, "wrong shape"),
    ],
}
