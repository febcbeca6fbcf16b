"""Planted wrong answers for chapter 7's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch07 import mha_as_sum


def no_transpose(weight, n_heads):
    d_model = weight.shape[0]
    return weight.reshape(d_model, n_heads, d_model // n_heads).permute(1, 0, 2)


def split_rows_of_w(weight, n_heads):  # split W's input axis: the same map as no transpose
    W = weight.T
    return torch.stack(W.chunk(n_heads, dim=0)).transpose(1, 2)


def interleaved(weight, n_heads):
    W = weight.T
    return torch.stack([W[:, h::n_heads] for h in range(n_heads)])


def no_permute(weight, n_heads):
    W = weight.T
    return W.reshape(n_heads, W.shape[0], -1)


def linear_layout(weight, n_heads):
    return torch.stack(weight.chunk(n_heads, dim=0))


def unsplit(weight, n_heads):
    return weight.T.clone()


def one_head_repeated(weight, n_heads):
    W = weight.T
    d_head = W.shape[1] // n_heads
    return W[:, :d_head].expand(n_heads, -1, -1)


def _heads(x, pattern, W_V, W_O, b_V):
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]
    return torch.einsum("hqe,hem->hqm", pattern @ v, W_O)


def no_b_O(x, pattern, W_V, W_O, b_V, b_O):
    return _heads(x, pattern, W_V, W_O, b_V).sum(0)


def b_O_per_head(x, pattern, W_V, W_O, b_V, b_O):
    return sum(_heads(x, pattern, W_V, W_O, b_V)[h] + b_O for h in range(W_V.shape[0]))


def no_b_V(x, pattern, W_V, W_O, b_V, b_O):
    return _heads(x, pattern, W_V, W_O, torch.zeros_like(b_V)).sum(0) + b_O


def transposed_pattern(x, pattern, W_V, W_O, b_V, b_O):
    return _heads(x, pattern.mT, W_V, W_O, b_V).sum(0) + b_O


def mean_heads(x, pattern, W_V, W_O, b_V, b_O):
    return _heads(x, pattern, W_V, W_O, b_V).mean(0) + b_O


def first_head(x, pattern, W_V, W_O, b_V, b_O):
    return _heads(x, pattern, W_V, W_O, b_V)[0] + b_O


def b_V_unmixed_each_head_pos0(x, pattern, W_V, W_O, b_V, b_O):  # values of position 0 only
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]
    z = v[:, :1].expand(-1, x.shape[0], -1)
    return torch.einsum("hqe,hem->qm", z, W_O) + b_O


MUTATIONS = {
    "ch07_ex1": [
        (no_transpose, "forgot the transpose"),
        (split_rows_of_w, "forgot the transpose"),  # the same map
        (interleaved, "heads interleaved"),
        (no_permute, "reshaped without moving the head axis"),
        (linear_layout, "kept nn.Linear's layout per head"),
        (unsplit, "did not split into heads"),
        (one_head_repeated, "wrong values"),
    ],
    "ch07_ex2": [
        (no_b_O, "forgot b_O"),
        (b_O_per_head, "added b_O once per head"),
        (no_b_V, "forgot b_V"),
        (transposed_pattern, "pattern transposed"),
        (mean_heads, "averaged the heads"),
        (first_head, "used the first head only"),
        (b_V_unmixed_each_head_pos0, "wrong values"),
    ],
}

