"""Planted wrong answers for chapter 20's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch20 import linear_to_tl


def first_head_only(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, which)[:1]


def ov_ref_parts(w_v, w_o, n_heads):
    return linear_to_tl(w_v, n_heads, "v"), linear_to_tl(w_o, n_heads, "o")


def ov_qk_style(w_v, w_o, n_heads):  # W_V W_O^T, as if W_O were a key matrix
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return V @ V.transpose(-1, -2)


def ov_einsum_wrong_axis(w_v, w_o, n_heads):  # contracts d_model instead of d_head
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return torch.einsum("hme,hen->hmn", V, O).transpose(-1, -2).flip(0)


MUTATIONS = {
    "ch20_ex1": [
        # the next three are right for one kind of matrix and wrong for the other;
        # every check sees both kinds, so they always fail, with the named mistake
        (first_head_only, "wrong shape"),
    ],
    "ch20_ex2": [
        (ov_qk_style, "wrong values"),
        (ov_einsum_wrong_axis, None),
    ],
}
