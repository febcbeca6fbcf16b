"""Planted wrong answers for chapter 9's exercises, each with the diagnosis it must get."""

import torch


def transposed(W_E, W_V, W_O, W_U):
    return W_U.T @ (W_V @ W_O).T @ W_E.T  # the column-vector orientation


def paper_ov_inside(W_E, W_V, W_O, W_U):
    return W_E @ W_O.T @ W_V.T @ W_U


def embed_both_sides(W_E, W_V, W_O, W_U):
    return (W_E @ W_V) @ (W_O @ W_E.T)


def direct_path(W_E, W_V, W_O, W_U):
    return W_E @ W_U


def no_embed(W_E, W_V, W_O, W_U):
    return W_V @ W_O @ W_U


def no_unembed(W_E, W_V, W_O, W_U):
    return W_E @ W_V @ W_O


def qk_style(W_E, W_V, W_O, W_U):  # W_E W_V (W_E W_V)^T: a QK-like form of the values
    A = W_E @ W_V
    return A @ A.T


def abs_numerator(eigenvalues):
    return eigenvalues.abs().sum() / eigenvalues.abs().sum()


def complex_score(eigenvalues):
    return eigenvalues.sum() / eigenvalues.abs().sum()


def unnormalised(eigenvalues):
    return eigenvalues.real.sum()


def fraction_positive(eigenvalues):
    return (eigenvalues.real > 0).sum() / len(eigenvalues)


def real_denominator(eigenvalues):
    r = eigenvalues.real
    return (r.sum() / r.abs().sum()).item()


def mean_cosine(eigenvalues):
    return torch.mean(eigenvalues.real / eigenvalues.abs())


def mean_real(eigenvalues):  # Re(sum lambda) / n: normalised by the count, not a named mistake
    return eigenvalues.real.mean()


def vector_answer(eigenvalues):  # per-eigenvalue scores instead of one number
    return eigenvalues.real / eigenvalues.abs().sum()


MUTATIONS = {
    "ch09_ex1": [
        (transposed, "transposed"),
        (paper_ov_inside, "used the transposed W_OV"),
        (embed_both_sides, "put W_E on both sides"),
        (direct_path, "left out the head"),
        (no_embed, "forgot W_E"),
        (no_unembed, "forgot W_U"),
        (qk_style, "wrong values"),
    ],
    "ch09_ex2": [
        (abs_numerator, "used |lambda| in the numerator"),
        (complex_score, "forgot the real part"),
        (unnormalised, "forgot to normalise"),
        (fraction_positive, "counted the fraction of positive eigenvalues"),
        (real_denominator, "normalised by |Re lambda|"),
        (mean_cosine, "averaged Re(lambda) / |lambda|"),
        (mean_real, "wrong values"),
        (vector_answer, "wrong type"),
    ],
}
