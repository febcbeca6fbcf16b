"""Planted wrong answers for chapter 18's exercises, each with the diagnosis it must get."""

import torch


fro = torch.linalg.matrix_norm


def by_product_norm(W_A, W_B):  # normalised by the product's own norm: always 1
    return fro(W_A @ W_B) / fro(W_A @ W_B)


def one_matrix(W_V, W_O, W_Q, W_K):  # returned the product instead of the pair
    return W_V @ W_O @ W_K @ W_Q.T


def ov_wrong_inner(W_V, W_O, W_Q, W_K):  # W_O W_V: [d_head, d_head]
    return W_O @ W_V, W_K @ W_Q.T


MUTATIONS = {
    "ch18_ex1": [
        (by_product_norm, "wrong values"),
    ],
    "ch18_ex2": [
        (one_matrix, "wrong type"),
        (ov_wrong_inner, "wrong values"),
    ],
}
