"""Planted wrong answers for chapter 8's exercises, each with the diagnosis it must get."""

import torch


def _ext(W, b):
    return torch.cat([W, b[None]], dim=0)


def unextended(W_Q, b_Q, W_K, b_K):  # the plain W_QK: wrong shape
    return W_Q @ W_K.T


def bias_outer_added(W_Q, b_Q, W_K, b_K):  # a bias product spread over every entry: unrecognised
    return _ext(W_Q, 0 * b_Q) @ _ext(W_K, 0 * b_K).T + b_Q @ b_K


def only_qk(W_Q, W_K, W_V, W_O):
    return W_Q @ W_K.T


def qk_wrong_product(W_Q, W_K, W_V, W_O):  # W_Q W_Q^T: right shape, not a named mistake
    return W_Q @ W_Q.T, (W_V @ W_O).T


def qk_wrong_product_ov_row_convention(W_Q, W_K, W_V, W_O):  # W_OV not judged for orientation: "wrong values"
    return W_Q @ W_Q.T, W_V @ W_O


def swapped_in_row_convention(W_Q, W_K, W_V, W_O):  # the wrong order, whatever the orientation
    return W_V @ W_O, W_Q @ W_K.T


MUTATIONS = {
    "ch08_ex1": [
        (unextended, None),
        (bias_outer_added, None),
    ],
    "ch08_ex2": [
        (only_qk, "wrong type"),
        (qk_wrong_product, "wrong values"),
        (qk_wrong_product_ov_row_convention, "wrong values"),
        (swapped_in_row_convention, "returned the pair in the wrong order"),
    ],
}
