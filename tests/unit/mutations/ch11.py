"""Planted wrong answers for chapter 11's exercises, each with the diagnosis it must get."""

import torch


def _norm(x, eps, *, dim=-1, centre=True, unbiased=False, eps_inside=True):
    c = x - x.mean(dim, keepdim=True) if centre else x
    var = c.var(dim, keepdim=True, unbiased=unbiased) if centre else c.pow(2).mean(dim, keepdim=True)
    return c / torch.sqrt(var + eps) if eps_inside else c / (var.sqrt() + eps)


def wrong_axis(x, gamma, beta, eps=1e-5):
    return _norm(x, eps, dim=-2) * gamma + beta


def rms_instead(x, gamma, beta, eps=1e-5):
    return _norm(x, eps, centre=False) * gamma + beta


def unbiased(x, gamma, beta, eps=1e-5):
    return _norm(x, eps, unbiased=True) * gamma + beta


def eps_outside(x, gamma, beta, eps=1e-5):
    return _norm(x, eps, eps_inside=False) * gamma + beta


def annotated(x, gamma, beta, eps=1e-5):
    mean, std = x.mean(-1, keepdim=True), x.std(-1, keepdim=True)
    return gamma * (x - mean) / (std + eps) + beta


def no_eps(x, gamma, beta, eps=1e-5):
    return _norm(x, 0.0) * gamma + beta


def by_variance(x, gamma, beta, eps=1e-5):
    c = x - x.mean(-1, keepdim=True)
    return c / (c.pow(2).mean(-1, keepdim=True) + eps) * gamma + beta


def no_gamma(x, gamma, beta, eps=1e-5):
    return _norm(x, eps) + beta


def no_beta(x, gamma, beta, eps=1e-5):
    return _norm(x, eps) * gamma


def no_affine(x, gamma, beta, eps=1e-5):
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=eps)


def swapped(x, gamma, beta, eps=1e-5):
    return _norm(x, eps) * beta + gamma


def shift_then_scale(x, gamma, beta, eps=1e-5):
    return (_norm(x, eps) + beta) * gamma


def half_eps(x, gamma, beta, eps=1e-5):  # a slip no catalogue entry names
    return _norm(x, eps / 2) * gamma + beta


def fold_columns(gamma, beta, W, b):
    return W * gamma, b + beta @ W


def fold_divided(gamma, beta, W, b):
    return W / gamma.unsqueeze(1), b + beta @ W


def fold_transposed(gamma, beta, W, b):
    return (torch.diag(gamma) @ W).T, b + beta @ W


def fold_no_gamma(gamma, beta, W, b):
    return W.clone(), b + beta @ W


def fold_no_beta(gamma, beta, W, b):
    return torch.diag(gamma) @ W, b.clone()


def fold_beta_through_folded(gamma, beta, W, b):
    Wf = torch.diag(gamma) @ W
    return Wf, b + beta @ Wf


def fold_beta_direct(gamma, beta, W, b):
    return torch.diag(gamma) @ W, b + beta


def fold_beta_wrong_side(gamma, beta, W, b):
    return torch.diag(gamma) @ W, b + W @ beta


def fold_swapped_outputs(gamma, beta, W, b):
    return b + beta @ W, torch.diag(gamma) @ W


def fold_only_weight(gamma, beta, W, b):
    return torch.diag(gamma) @ W


MUTATIONS = {
    "ch11_ex1": [
        (wrong_axis, "normalised over the wrong axis"),
        (rms_instead, "forgot to centre"),
        (unbiased, "used the unbiased variance"),
        (eps_outside, "eps outside the square root"),
        (annotated, "wrote the Annotated Transformer's LayerNorm"),
        (no_eps, "forgot eps"),
        (by_variance, "divided by the variance"),
        (no_gamma, "forgot gamma"),
        (no_beta, "forgot beta"),
        (no_affine, "forgot gamma and beta"),
        (swapped, "gamma and beta swapped"),
        (shift_then_scale, "added beta before multiplying by gamma"),
        (half_eps, "wrong values"),
    ],
    "ch11_ex2": [
        (fold_columns, "scaled the columns instead of the rows"),
        (fold_divided, "divided by gamma"),
        (fold_transposed, "transposed the weight"),
        (fold_no_gamma, "forgot gamma"),
        (fold_no_beta, "forgot to fold beta"),
        (fold_beta_through_folded, "sent beta through the folded weight"),
        (fold_beta_direct, "added beta to the bias directly"),
        (fold_beta_wrong_side, "multiplied beta on the wrong side"),
        (fold_swapped_outputs, "wrong shape"),
        (fold_only_weight, "wrong type"),
    ],
}
