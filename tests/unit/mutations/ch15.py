"""Planted wrong answers for chapter 15's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch15 import one_layer_logits, top_skip_trigram


def _heads(tokens, patterns, W_E, W_V, W_O, b_V, transpose=False, b_v=True):
    e = W_E[tokens]
    out = 0
    for h in range(patterns.shape[0]):
        A = patterns[h].T if transpose else patterns[h]
        v = e @ W_V[h] + (b_V[h] if b_v else 0)
        out = out + A @ v @ W_O[h]
    return out


def no_direct(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return (_heads(tokens, patterns, W_E, W_V, W_O, b_V) + b_O) @ W_U + b_U


def transposed(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    x = W_E[tokens] + _heads(tokens, patterns, W_E, W_V, W_O, b_V, transpose=True)
    return (x + b_O) @ W_U + b_U


def no_b_V(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    x = W_E[tokens] + _heads(tokens, patterns, W_E, W_V, W_O, b_V, b_v=False)
    return (x + b_O) @ W_U + b_U


def no_b_O(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, 0 * b_O, W_U, b_U)


def no_b_U(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, 0 * b_U)


def no_biases(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return (W_E[tokens] + _heads(tokens, patterns, W_E, W_V, W_O, b_V, b_v=False)) @ W_U


def summed_then_multiplied(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    e = W_E[tokens]
    v = torch.einsum("pm,hmd->hpd", e, W_V) + b_V[:, None]
    A = patterns.sum(0)
    heads = sum(A @ v[h] @ W_O[h] for h in range(W_V.shape[0]))
    return (e + heads + b_O) @ W_U + b_U


def mean_of_heads(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    x = W_E[tokens] + _heads(tokens, patterns, W_E, W_V, W_O, b_V) / W_V.shape[0]
    return (x + b_O) @ W_U + b_U


def first_head_only(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    return one_layer_logits(tokens, patterns[:1], W_E, W_V[:1], W_O[:1], b_V[:1], b_O, W_U, b_U)


def qk_by_columns(full_qk, full_ov, current):
    src = full_qk.T[current].argmax(-1)
    return torch.stack([src, full_ov[src].argmax(-1)], -1)


def ov_by_columns(full_qk, full_ov, current):
    src = full_qk[current].argmax(-1)
    return torch.stack([src, full_ov.T[src].argmax(-1)], -1)


def ov_of_current(full_qk, full_ov, current):
    return torch.stack([full_qk[current].argmax(-1), full_ov[current].argmax(-1)], -1)


def ov_for_source(full_qk, full_ov, current):
    src = full_ov[current].argmax(-1)
    return torch.stack([src, full_ov[src].argmax(-1)], -1)


def swapped_circuits(full_qk, full_ov, current):
    return top_skip_trigram(full_ov, full_qk, current)


def reversed_columns(full_qk, full_ov, current):
    pair = top_skip_trigram(full_qk, full_ov, current)
    return pair[:, [1, 0]]


def argmin(full_qk, full_ov, current):
    src = full_qk[current].argmin(-1)
    return torch.stack([src, full_ov[src].argmin(-1)], -1)


def source_only(full_qk, full_ov, current):
    return full_qk[current].argmax(-1)


MUTATIONS = {
    "ch15_ex1": [
        (no_direct, "forgot the direct path"),
        (transposed, "pattern transposed"),
        (no_b_V, "forgot b_V"),
        (no_b_O, "forgot b_O"),
        (no_b_U, "forgot b_U"),
        (no_biases, "forgot every bias"),
        (summed_then_multiplied, "paired each pattern with every head's OV circuit"),
        (mean_of_heads, "averaged the heads instead of adding them"),
        (first_head_only, "wrong values"),
    ],
    "ch15_ex2": [
        (qk_by_columns, "read the QK circuit by columns"),
        (ov_by_columns, "read the OV circuit by columns"),
        (ov_of_current, "took the output from the current token's OV row"),
        (ov_for_source, "used the OV circuit to choose the source"),
        (swapped_circuits, "swapped the QK and OV circuits"),
        (reversed_columns, "returned (output, source)"),
        (argmin, "wrong values"),
        (source_only, "wrong shape"),
    ],
}
