"""Planted wrong answers for chapter 11's exercises, each with the diagnosis it must get."""

import torch


def _norm(x, eps, *, dim=-1, centre=True, unbiased=False, eps_inside=True):
    c = x - x.mean(dim, keepdim=True) if centre else x
    var = c.var(dim, keepdim=True, unbiased=unbiased) if centre else c.pow(2).mean(dim, keepdim=True)
    return c / torch.sqrt(var + eps) if eps_inside else c / (var.sqrt() + eps)


def unbiased(x, gamma, beta, eps=1e-5):
    return _norm(x, eps, unbiased=True) * gamma + beta


def half_eps(x, gamma, beta, eps=1e-5):  # a slip no catalogue entry names
    return _norm(x, eps / 2) * gamma + beta


def fold_swapped_outputs(gamma, beta, W, b):
    return b + beta @ W, torch.diag(gamma) @ W


def fold_only_weight(gamma, beta, W, b):
    return torch.diag(gamma) @ W


def fold_bias_through_gain(gamma, beta, W, b):  # beta scaled by gamma before it meets W
    W_folded = torch.diag(gamma) @ W
    return W_folded, b + (gamma * beta) @ W


MUTATIONS = {
    "ch11_ex1": [
        (half_eps, "wrong values"),
    ],
    "ch11_ex2": [
        (fold_swapped_outputs, "wrong shape"),
        (fold_only_weight, "wrong type"),
        (fold_bias_through_gain, "b_folded right only where gamma is 1"),
    ],
}
