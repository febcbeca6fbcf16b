"""Planted wrong answers for chapter 20's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch20 import linear_to_tl


def first_head_only(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, which)[:1]


def no_transpose(weight, n_heads, which):  # the stored [out, in] tensor read as the row-vector map
    d_out, d_in = weight.shape
    if which == "o":
        return torch.stack([weight[h * (d_out // n_heads):(h + 1) * (d_out // n_heads)]
                            for h in range(n_heads)])
    return torch.stack([weight[:, h * (d_in // n_heads):(h + 1) * (d_in // n_heads)]
                        for h in range(n_heads)])


def column_blocks_always(weight, n_heads, which):  # every kind cut into blocks of columns of weight.T
    W = weight.T
    d = W.shape[1] // n_heads
    return torch.stack([W[:, h * d:(h + 1) * d] for h in range(n_heads)])


def ov_o_first(w_v, w_o, n_heads):  # the two maps multiplied the other way round
    V, O = ov_ref_parts(w_v, w_o, n_heads)
    return torch.einsum("hem,hmf->hef", O, V)


def ov_stored_tensors(w_v, w_o, n_heads):  # the stored tensors sliced as if they were row-vector maps
    d = w_v.shape[0] // n_heads
    return torch.stack([w_v[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d] for h in range(n_heads)])


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
        (first_head_only, "wrong shape"),
        # written differently from the declared mistakes, diagnosed by their symptom's name
        (no_transpose, "right shapes, but no head holds TransformerLens's entries"),
        # right for a query, key or value matrix and wrong for an output matrix; every
        # check sees both kinds, so it always fails, with the named mistake
        (column_blocks_always, "output heads of shape [d_model, d_head]"),
    ],
    "ch20_ex2": [
        (ov_qk_style, "wrong values"),
        (ov_einsum_wrong_axis, None),
        (ov_o_first, "each head is [d_head, d_head]"),
        (ov_stored_tensors, "right shape, but no head holds TransformerLens's W_OV"),
    ],
}
