"""Planted wrong answers for chapter 14's exercises, each with the diagnosis it must get."""



def first_position_only(tokens, W_E, W_U, b_U):
    return W_E[tokens[:, :1]] @ W_U + b_U


def squared(A, B):  # r^2 instead of r
    a, b = A - A.mean(-1, keepdim=True), B - B.mean(-1, keepdim=True)
    return ((a * b).sum() / (a.norm() * b.norm())) ** 2


MUTATIONS = {
    "ch14_ex1": [
        (first_position_only, "wrong shape"),
    ],
    "ch14_ex2": [
        (squared, "wrong values"),
    ],
}
