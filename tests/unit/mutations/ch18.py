"""Planted wrong answers for chapter 18's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch18 import composition_score

fro = torch.linalg.matrix_norm


def unnormalised(W_A, W_B):
    return fro(W_A @ W_B)


def spectral(W_A, W_B):
    n = lambda M: torch.linalg.matrix_norm(M, ord=2)  # noqa: E731
    return n(W_A @ W_B) / (n(W_A) * n(W_B))


def svd_spectral(W_A, W_B):  # the same mistake, written with singular values
    s = lambda M: torch.linalg.svdvals(M)[0]  # noqa: E731
    return s(W_A @ W_B) / (s(W_A) * s(W_B))


def nuclear(W_A, W_B):
    n = lambda M: torch.linalg.matrix_norm(M, ord="nuc")  # noqa: E731
    return n(W_A @ W_B) / (n(W_A) * n(W_B))


def reversed_order(W_A, W_B):
    return composition_score(W_B, W_A)


def squared(W_A, W_B):
    return (W_A @ W_B).pow(2).sum() / (W_A.pow(2).sum() * W_B.pow(2).sum())


def sum_of_norms(W_A, W_B):
    return fro(W_A @ W_B) / (fro(W_A) + fro(W_B))


def elementwise(W_A, W_B):
    return fro(W_A * W_B) / (fro(W_A) * fro(W_B))


def by_product_norm(W_A, W_B):  # normalised by the product's own norm: always 1
    return fro(W_A @ W_B) / fro(W_A @ W_B)


def q_comp(W_V, W_O, W_Q, W_K):
    return W_V @ W_O, W_Q @ W_K.T


def swapped(W_V, W_O, W_Q, W_K):
    return W_K @ W_Q.T, W_V @ W_O


def ov_transposed(W_V, W_O, W_Q, W_K):
    return (W_V @ W_O).T, W_K @ W_Q.T


def paper(W_V, W_O, W_Q, W_K):
    return (W_V @ W_O).T, (W_K @ W_Q.T).T


def keys_only(W_V, W_O, W_Q, W_K):
    return W_V @ W_O, W_K @ W_K.T


def one_matrix(W_V, W_O, W_Q, W_K):  # returned the product instead of the pair
    return W_V @ W_O @ W_K @ W_Q.T


def ov_wrong_inner(W_V, W_O, W_Q, W_K):  # W_O W_V: [d_head, d_head]
    return W_O @ W_V, W_K @ W_Q.T


MUTATIONS = {
    "ch18_ex1": [
        (unnormalised, "forgot to normalise"),
        (spectral, "used the spectral norm"),
        (svd_spectral, "used the spectral norm"),
        (nuclear, "used the nuclear norm"),
        (reversed_order, "order reversed"),
        (squared, "squared the score"),
        (sum_of_norms, "divided by the sum of the norms"),
        (elementwise, "multiplied elementwise"),
        (by_product_norm, "wrong values"),
    ],
    "ch18_ex2": [
        (q_comp, "used W_QK instead of W_QK^T (that is Q-composition)"),
        (swapped, "writer and reader swapped"),
        (ov_transposed, "transposed W_OV"),
        (paper, "both transposed (the paper's column-vector convention)"),
        (keys_only, "read the keys through W_K alone"),
        (one_matrix, "wrong type"),
        (ov_wrong_inner, "wrong values"),
    ],
}
