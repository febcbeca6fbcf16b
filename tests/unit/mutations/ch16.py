"""Planted wrong answers for chapter 16's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch16 import virtual_pattern


def _ov(W_V, W_O, layer, head):
    return W_V[layer, head] @ W_O[layer, head]


def reversed_order(W_V, W_O, first, second):
    return _ov(W_V, W_O, *second) @ _ov(W_V, W_O, *first)


def column_convention(W_V, W_O, first, second):
    # the paper's W_OV is the transpose of ours; its chain reads right to left
    paper1, paper2 = _ov(W_V, W_O, *first).T, _ov(W_V, W_O, *second).T
    return paper2 @ paper1


def head_layer_swapped(W_V, W_O, first, second):
    (l1, h1), (l2, h2) = first, second
    return _ov(W_V, W_O, h1, l1) @ _ov(W_V, W_O, h2, l2)


def summed(W_V, W_O, first, second):
    return _ov(W_V, W_O, *first) + _ov(W_V, W_O, *second)


def elementwise(W_V, W_O, first, second):
    return _ov(W_V, W_O, *first) * _ov(W_V, W_O, *second)


def first_only(W_V, W_O, first, second):
    return _ov(W_V, W_O, *first)


def ov_inner_order(W_V, W_O, first, second):  # W_O W_V: [d_head, d_head] per head
    (l1, h1), (l2, h2) = first, second
    return W_O[l1, h1] @ W_V[l1, h1] @ W_O[l2, h2] @ W_V[l2, h2]


def pattern_reversed(A_first, A_second):
    return torch.bmm(A_first, A_second)


def pattern_transposed(A_first, A_second):
    return virtual_pattern(A_first, A_second).mT


def pattern_elementwise(A_first, A_second):
    return A_first * A_second


def pattern_sum(A_first, A_second):
    return A_first + A_second


def pattern_renormalised(A_first, A_second):
    p = A_first * A_second
    return p / p.sum(-1, keepdim=True)


def pattern_one_sample(A_first, A_second):  # forgot the batch: only the first sequence
    return A_second[0] @ A_first[0]


def pattern_einsum_wrong_index(A_first, A_second):  # sums over the wrong position
    return torch.einsum("bij,bik->bjk", A_second, A_first)


MUTATIONS = {
    "ch16_ex1": [
        (reversed_order, "heads in the wrong order"),
        (column_convention, "transposed (the paper's column-vector convention)"),
        (head_layer_swapped, "indexed [head, layer]"),
        (summed, "added the two OV circuits"),
        (elementwise, "multiplied elementwise"),
        (first_only, "only one head"),
        (ov_inner_order, "wrong shape"),
    ],
    "ch16_ex2": [
        (pattern_reversed, "patterns in the wrong order"),
        (pattern_transposed, "transposed"),
        (pattern_elementwise, "multiplied elementwise"),
        (pattern_sum, "added the patterns"),
        (pattern_renormalised, "renormalised an elementwise product"),
        (pattern_one_sample, "wrong shape"),
        (pattern_einsum_wrong_index, None),
    ],
}
