"""Planted wrong answers for chapter 9's exercises, each with the diagnosis it must get."""



def qk_style(W_E, W_V, W_O, W_U):  # W_E W_V (W_E W_V)^T: a QK-like form of the values
    A = W_E @ W_V
    return A @ A.T


def mean_real(eigenvalues):  # Re(sum lambda) / n: normalised by the count, not a named mistake
    return eigenvalues.real.mean()


def count_right_half_plane(eigenvalues):  # the positive count spelled another way: still named
    return (eigenvalues.real >= 0).sum() / len(eigenvalues)


def vector_answer(eigenvalues):  # per-eigenvalue scores instead of one number
    return eigenvalues.real / eigenvalues.abs().sum()


MUTATIONS = {
    "ch09_ex1": [
        (qk_style, "wrong values"),
    ],
    "ch09_ex2": [
        (mean_real, "wrong values"),
        (count_right_half_plane, "counted the fraction of positive eigenvalues"),
        (vector_answer, "wrong type"),
    ],
}
