"""Planted wrong answers for chapter 14's exercises, each with the diagnosis it must get."""

import torch


def no_bias(tokens, W_E, W_U, b_U):
    return W_E[tokens] @ W_U


def wrong_order(tokens, W_E, W_U, b_U):
    return (W_U @ W_E)[tokens] + b_U


def tied(tokens, W_E, W_U, b_U):
    return torch.einsum("bpd,vd->bpv", W_E[tokens], W_E) + b_U


def transposed_unembed(tokens, W_E, W_U, b_U):
    return W_E[tokens] @ W_U.mT + b_U


def aligned_with_targets(tokens, W_E, W_U, b_U):
    return W_E[tokens[:, 1:]] @ W_U + b_U


def previous_token(tokens, W_E, W_U, b_U):
    prev = torch.cat([tokens[:, -1:], tokens[:, :-1]], dim=1)
    return W_E[prev] @ W_U + b_U


def probabilities(tokens, W_E, W_U, b_U):
    return torch.softmax(W_E[tokens] @ W_U + b_U, dim=-1)


def log_probs(tokens, W_E, W_U, b_U):
    logits = W_E[tokens] @ W_U + b_U
    return logits - logits.logsumexp(-1, keepdim=True)


def one_hot_no_bias(tokens, W_E, W_U, b_U):  # the same map as forgetting b_U
    x = torch.nn.functional.one_hot(tokens, W_E.shape[0]).float()
    return x @ W_E @ W_U


def first_position_only(tokens, W_E, W_U, b_U):
    return W_E[tokens[:, :1]] @ W_U + b_U


def cosine(A, B):
    return (A * B).sum() / (A.norm() * B.norm())


def pearson_all(A, B):
    return torch.corrcoef(torch.stack([A.flatten(), B.flatten()]))[0, 1]


def column_centred(A, B):
    a, b = A - A.mean(0), B - B.mean(0)
    return (a * b).sum() / (a.norm() * b.norm())


def per_row_mean(A, B):
    return torch.stack([torch.corrcoef(torch.stack([A[i], B[i]]))[0, 1]
                        for i in range(A.shape[0])]).mean()


def unnormalised(A, B):
    return ((A - A.mean(1, keepdim=True)) * (B - B.mean(1, keepdim=True))).sum()


def only_a_centred(A, B):
    a = A - A.mean(-1, keepdim=True)
    return (a * B).sum() / (a.norm() * B.norm())


def squared(A, B):  # r^2 instead of r
    a, b = A - A.mean(-1, keepdim=True), B - B.mean(-1, keepdim=True)
    return ((a * b).sum() / (a.norm() * b.norm())) ** 2


MUTATIONS = {
    "ch14_ex1": [
        (no_bias, "forgot b_U"),
        (wrong_order, "multiplied W_U W_E (wrong order)"),
        (tied, "used W_E^T as the unembedding"),
        (transposed_unembed, "used W_U transposed"),
        (aligned_with_targets, "shifted by one position"),
        (previous_token, "predicted from the previous token"),
        (probabilities, "returned probabilities"),
        (log_probs, "returned log-probabilities"),
        (one_hot_no_bias, "forgot b_U"),
        (first_position_only, "wrong shape"),
    ],
    "ch14_ex2": [
        (cosine, "not centred"),
        (pearson_all, "centred by the overall mean"),
        (column_centred, "centred the columns"),
        (per_row_mean, "averaged the correlations of single rows"),
        (unnormalised, "forgot to normalise"),
        (only_a_centred, "centred only one matrix"),
        (squared, "wrong values"),
    ],
}
