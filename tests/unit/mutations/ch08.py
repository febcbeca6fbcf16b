"""Planted wrong answers for chapter 8's exercises, each with the diagnosis it must get."""

import torch


def _ext(W, b):
    return torch.cat([W, b[None]], dim=0)


def key_left(W_Q, b_Q, W_K, b_K):
    return _ext(W_K, b_K) @ _ext(W_Q, b_Q).T


def no_biases(W_Q, b_Q, W_K, b_K):
    return _ext(W_Q, 0 * b_Q) @ _ext(W_K, 0 * b_K).T


def query_bias_only(W_Q, b_Q, W_K, b_K):
    return _ext(W_Q, b_Q) @ _ext(W_K, torch.zeros_like(b_K)).T


def key_bias_only(W_Q, b_Q, W_K, b_K):
    return _ext(W_Q, torch.zeros_like(b_Q)) @ _ext(W_K, b_K).T


def no_corner(W_Q, b_Q, W_K, b_K):
    M = _ext(W_Q, b_Q) @ _ext(W_K, b_K).T
    M[-1, -1] = 0
    return M


def swapped_cross(W_Q, b_Q, W_K, b_K):
    M = _ext(W_Q, b_Q) @ _ext(W_K, b_K).T
    top, left = (b_Q @ W_K.T).clone(), (W_Q @ b_K).clone()
    M[:-1, -1], M[-1, :-1] = top, left
    return M


def unextended(W_Q, b_Q, W_K, b_K):  # the plain W_QK: wrong shape
    return W_Q @ W_K.T


def bias_outer_added(W_Q, b_Q, W_K, b_K):  # a bias product spread over every entry: unrecognised
    return _ext(W_Q, 0 * b_Q) @ _ext(W_K, 0 * b_K).T + b_Q @ b_K










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
        (key_left, "key on the left"),
        (no_biases, "left out the biases"),
        (query_bias_only, "only the query bias"),
        (key_bias_only, "only the key bias"),
        (no_corner, "dropped the bias-bias corner"),
        (swapped_cross, "swapped the cross terms"),
        (unextended, None),
        (bias_outer_added, None),
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
