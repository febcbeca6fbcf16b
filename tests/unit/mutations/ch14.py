"""Planted wrong answers for chapter 14's exercises, each with the diagnosis it must get."""



def first_position_only(tokens, W_E, W_U, b_U):
    return W_E[tokens[:, :1]] @ W_U + b_U


def squared(A, B):  # r^2 instead of r
    a, b = A - A.mean(-1, keepdim=True), B - B.mean(-1, keepdim=True)
    return ((a * b).sum() / (a.norm() * b.norm())) ** 2


def unnormalised_mean(A, B):  # the centred covariance, not the correlation
    a, b = A - A.mean(-1, keepdim=True), B - B.mean(-1, keepdim=True)
    return (a * b).mean()


def centred_a_only_normalised_by_b(A, B):  # B left uncentred, in the product and the norm
    a = A - A.mean(-1, keepdim=True)
    return (a * B).sum() / (a.norm() * B.norm())


def direct_path_only(tokens, W_E, W_U, b_U):  # the product written as einsum, no bias
    import torch
    return torch.einsum("bpd,dv->bpv", W_E[tokens], W_U)


def log_probs_by_hand(tokens, W_E, W_U, b_U):  # log-softmax written out
    logits = W_E[tokens] @ W_U + b_U
    return logits - logits.exp().sum(-1, keepdim=True).log()


def centred_both_axes(A, B):  # rows and columns centred, one after the other
    a = A - A.mean(-1, keepdim=True)
    a = a - a.mean(0, keepdim=True)
    b = B - B.mean(-1, keepdim=True)
    b = b - b.mean(0, keepdim=True)
    return (a * b).sum() / (a.norm() * b.norm())


MUTATIONS = {
    "ch14_ex1": [
        (first_position_only, "wrong shape"),
        (log_probs_by_hand, "returned log-probabilities"),
        (direct_path_only, "off by the same row at every position"),
    ],
    "ch14_ex2": [
        (squared, "wrong values"),
        (unnormalised_mean, None),
        (centred_a_only_normalised_by_b, "changes when a row of B is shifted"),
        (centred_both_axes, "also blind to a constant added to a column"),
    ],
}
