"""Planted wrong answers for chapter 8's exercises, each with the diagnosis it must get."""

import torch


def transposed_pattern(x, pattern, W_V, W_O, b_V):
    v = x @ W_V + b_V
    return torch.einsum("qk,qe->ke", pattern, v) @ W_O  # sums over queries, not keys


def no_bias(x, pattern, W_V, W_O, b_V):
    return pattern @ x @ (W_V @ W_O)


def paper_ov(x, pattern, W_V, W_O, b_V):
    W_OV = W_O.T @ W_V.T  # the column-vector matrix, used on rows
    return pattern @ x @ W_OV + b_V @ W_O


def no_pattern(x, pattern, W_V, W_O, b_V):
    return x @ W_V @ W_O + b_V @ W_O


def only_z(x, pattern, W_V, W_O, b_V):
    return pattern @ (x @ W_V + b_V)


def scaled(x, pattern, W_V, W_O, b_V):
    return pattern @ (x @ W_V + b_V) @ W_O / (W_O.shape[0] ** 0.5)


def bias_outside_w_o(x, pattern, W_V, W_O, b_V):
    # b_V added after W_O, broadcast into the first d_head coordinates: not a named mistake
    out = pattern @ x @ W_V @ W_O
    out[:, : b_V.shape[0]] += b_V
    return out


def forgot_return(x, pattern, W_V, W_O, b_V):
    pattern @ (x @ W_V + b_V) @ W_O


def qk_both_transposed(W_Q, W_K, W_V, W_O):
    return W_K @ W_Q.T, W_O.T @ W_V.T


def ov_not_transposed(W_Q, W_K, W_V, W_O):
    return W_Q @ W_K.T, W_V @ W_O


def wrong_one_transposed(W_Q, W_K, W_V, W_O):
    return (W_Q @ W_K.T).T, W_V @ W_O


def paper_formula_on_tl(W_Q, W_K, W_V, W_O):
    return W_Q.T @ W_K, W_O @ W_V


def ov_order(W_Q, W_K, W_V, W_O):
    W_Vp, W_Op = W_V.T, W_O.T
    return W_Q @ W_K.T, W_Vp @ W_Op


def swapped_pair(W_Q, W_K, W_V, W_O):
    return W_O.T @ W_V.T, W_Q @ W_K.T


def only_qk(W_Q, W_K, W_V, W_O):
    return W_Q @ W_K.T


def qk_wrong_product(W_Q, W_K, W_V, W_O):  # W_Q W_Q^T: right shape, not a named mistake
    return W_Q @ W_Q.T, (W_V @ W_O).T


MUTATIONS = {
    "ch08_ex1": [
        (transposed_pattern, "pattern transposed"),
        (no_bias, "forgot b_V"),
        (paper_ov, "used the transposed W_OV"),
        (no_pattern, "left out the pattern"),
        (only_z, "stopped before W_O"),
        (scaled, "divided by sqrt(d_head)"),
        (bias_outside_w_o, "wrong values"),
        (forgot_return, "returned None"),
    ],
    "ch08_ex2": [
        (qk_both_transposed, "transposed W_QK too"),
        (ov_not_transposed, "forgot to transpose W_OV"),
        (wrong_one_transposed, "transposed the wrong circuit"),
        (paper_formula_on_tl, "applied the paper's formulas to TransformerLens's matrices"),
        (ov_order, "multiplied the OV factors in the wrong order"),
        (swapped_pair, "returned the pair in the wrong order"),
        (only_qk, "wrong type"),
        (qk_wrong_product, "wrong values"),
    ],
}
