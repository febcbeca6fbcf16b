"""Planted wrong answers for chapter 18's exercises, each with the diagnosis it must get."""

import torch


fro = torch.linalg.matrix_norm


def by_product_norm(W_A, W_B):  # normalised by the product's own norm: always 1
    return fro(W_A @ W_B) / fro(W_A @ W_B)


def one_matrix(W_V, W_O, W_Q, W_K):  # returned the product instead of the pair
    return W_V @ W_O @ W_K @ W_Q.T


def ov_wrong_inner(W_V, W_O, W_Q, W_K):  # W_O W_V: [d_head, d_head]
    return W_O @ W_V, W_K @ W_Q.T


def squared_by_hand(W_A, W_B):  # the ratio of squared norms: the score squared
    return float(fro(W_A @ W_B) ** 2 / (fro(W_A) ** 2 * fro(W_B) ** 2))


def reader_first(W_A, W_B):  # the product taken the other way round
    return float(fro(W_B @ W_A) / (fro(W_A) * fro(W_B)))


def q_composition_pair(W_V, W_O, W_Q, W_K):  # W_QK, not its transpose
    return W_V @ W_O, W_Q @ W_K.T


def writer_transposed(W_V, W_O, W_Q, W_K):  # (W_V W_O)^T
    return (W_V @ W_O).T, W_K @ W_Q.T


# The mistakes' names are shown to the student ("this looks like: <name>."), so for the
# two-way choices they say where to look, not which way is right.
MUTATIONS = {
    "ch18_ex1": [
        (by_product_norm, "wrong values"),
        (squared_by_hand, "a step after the norms"),
        (reader_first, "factor order"),
    ],
    "ch18_ex2": [
        (one_matrix, "wrong type"),
        (ov_wrong_inner, "wrong values"),
        (q_composition_pair, "which reader matrix"),
        (writer_transposed, "writer matrix"),
    ],
}
