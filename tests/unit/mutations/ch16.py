"""Planted wrong answers for chapter 16's exercises, each with the diagnosis it must get."""

import torch



def ov_inner_order(W_V, W_O, first, second):  # W_O W_V: [d_head, d_head] per head
    (l1, h1), (l2, h2) = first, second
    return W_O[l1, h1] @ W_V[l1, h1] @ W_O[l2, h2] @ W_V[l2, h2]


def pattern_one_sample(A_first, A_second):  # forgot the batch: only the first sequence
    return A_second[0] @ A_first[0]


def pattern_einsum_wrong_index(A_first, A_second):  # sums over the wrong position
    return torch.einsum("bij,bik->bjk", A_second, A_first)


def ov_added_in_a_loop(W_V, W_O, first, second):  # the two heads side by side, not in series
    return sum(W_V[l, h] @ W_O[l, h] for l, h in (second, first))


def pattern_added_with_torch_add(A_first, A_second):  # either head's link counted, not both in turn
    return torch.add(A_second, A_first)


MUTATIONS = {
    "ch16_ex1": [
        (ov_inner_order, "wrong shape"),
        (ov_added_in_a_loop, "the two heads' effects added"),
    ],
    "ch16_ex2": [
        (pattern_one_sample, "wrong shape"),
        (pattern_einsum_wrong_index, None),
        (pattern_added_with_torch_add, "the two patterns added"),
    ],
}
