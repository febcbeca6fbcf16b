"""Planted wrong answers for chapter 20's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch20 import linear_to_tl


def no_transpose(weight, n_heads, which):
    d = weight.shape[0]
    if which == "o":
        return weight.reshape(n_heads, d // n_heads, d)
    return weight.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)


def paper_matrices(weight, n_heads, which):
    d = weight.shape[0]
    if which == "o":  # Elhage's W_O^h = weight[:, h*d_head:(h+1)*d_head], [d_model, d_head]
        return weight.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)
    return weight.reshape(n_heads, d // n_heads, d)  # Elhage's W_Q^h, [d_head, d_model]


def interleaved(weight, n_heads, which):
    d = weight.shape[0]
    W = weight.T
    if which == "o":
        return torch.stack([W[h::n_heads] for h in range(n_heads)])
    return torch.stack([W[:, h::n_heads] for h in range(n_heads)])


def plain_reshape(weight, n_heads, which):
    d = weight.shape[0]
    W = weight.T
    if which == "o":
        return W.reshape(n_heads, d // n_heads, d)
    return W.reshape(n_heads, d, d // n_heads)


def one_recipe_for_all(weight, n_heads, which):  # treats W_O like W_Q
    d = weight.shape[0]
    return weight.T.reshape(d, n_heads, d // n_heads).permute(1, 0, 2)


def rows_for_all(weight, n_heads, which):  # treats W_Q like W_O
    d = weight.shape[0]
    return weight.T.reshape(n_heads, d // n_heads, d)


def first_head_only(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, which)[:1]


def ov_ref_parts(w_v, w_o, n_heads):
    return linear_to_tl(w_v, n_heads, "v"), linear_to_tl(w_o, n_heads, "o")


def ov_paper(w_v, w_o, n_heads):
    d_head = w_v.shape[0] // n_heads
    return torch.stack([w_o[:, h * d_head:(h + 1) * d_head] @ w_v[h * d_head:(h + 1) * d_head]
                        for h in range(n_heads)])


def ov_no_transpose(w_v, w_o, n_heads):
    d_head = w_v.shape[0] // n_heads
    return torch.stack([w_v[:, h * d_head:(h + 1) * d_head] @ w_o[h * d_head:(h + 1) * d_head]
                        for h in range(n_heads)])


def ov_interleaved(w_v, w_o, n_heads):
    V, O = w_v.T, w_o.T
    return torch.stack([V[:, h::n_heads] @ O[h::n_heads] for h in range(n_heads)])


def ov_summed(w_v, w_o, n_heads):
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return (V @ O).sum(0)


def ov_wrong_order(w_v, w_o, n_heads):
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return O @ V


def ov_qk_style(w_v, w_o, n_heads):  # W_V W_O^T, as if W_O were a key matrix
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return V @ V.transpose(-1, -2)


def ov_einsum_wrong_axis(w_v, w_o, n_heads):  # contracts d_model instead of d_head
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return torch.einsum("hme,hen->hmn", V, O).transpose(-1, -2).flip(0)


MUTATIONS = {
    "ch20_ex1": [
        (no_transpose, "forgot nn.Linear's transpose"),
        (paper_matrices, "returned the column-convention (paper) matrices"),
        (interleaved, "heads interleaved"),
        # the next three are right for one kind of matrix and wrong for the other;
        # every check sees both kinds, so they always fail, with the named mistake
        (plain_reshape, "reshaped without moving the head axis"),
        (one_recipe_for_all, "split W_O like W_Q"),
        (rows_for_all, "split W_Q like W_O"),
        (first_head_only, "wrong shape"),
    ],
    "ch20_ex2": [
        (ov_paper, "column convention (the paper's W_OV)"),
        (ov_no_transpose, "forgot nn.Linear's transpose"),
        (ov_interleaved, "heads interleaved"),
        (ov_summed, "summed over heads"),
        (ov_wrong_order, "multiplied in the wrong order (W_O W_V)"),
        (ov_qk_style, "wrong values"),
        (ov_einsum_wrong_axis, None),
    ],
}
