"""Planted wrong answers for chapter 4's exercises, each with the diagnosis it must get."""

import math

import torch


def no_scale(tokens, lut):
    return lut[tokens]


def times_d_model(tokens, lut):
    return lut[tokens] * lut.shape[1]


def over_sqrt(tokens, lut):
    return lut[tokens] / math.sqrt(lut.shape[1])


def sqrt_vocab(tokens, lut):
    return lut[tokens] * math.sqrt(lut.shape[0])


def columns(tokens, lut):
    return lut.T[tokens] * math.sqrt(lut.shape[1])


def one_based(tokens, lut):
    return lut[tokens - 1] * math.sqrt(lut.shape[1])


def with_positions(tokens, lut):
    n, d = tokens.shape[-1], lut.shape[-1]
    pe = torch.zeros(n, d)
    pos = torch.arange(n)[:, None].float()
    freq = torch.exp(torch.arange(0, d, 2).float() * -(math.log(10000.0) / d))
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return lut[tokens] * math.sqrt(d) + pe


def one_hot_no_scale(tokens, lut):  # the one-hot route, same mistake as no_scale
    return torch.nn.functional.one_hot(tokens, lut.shape[0]).float() @ lut


def first_row_only(tokens, lut):  # broadcasting slip: every token gets row 0
    return lut[0].expand(*tokens.shape, -1) * math.sqrt(lut.shape[1])


def tied_no_scale(tokens, lut, b_U):
    return lut[tokens] @ lut.T + b_U


def tied_both_scaled(tokens, lut, b_U):
    W_E = math.sqrt(lut.shape[1]) * lut
    return W_E[tokens] @ W_E.T + b_U


def tied_no_bias(tokens, lut, b_U):
    return math.sqrt(lut.shape[1]) * lut[tokens] @ lut.T


def tied_no_transpose(tokens, lut, b_U):
    return math.sqrt(lut.shape[1]) * lut[tokens] @ lut + b_U


def tied_columns(tokens, lut, b_U):
    return math.sqrt(lut.shape[1]) * lut.T[tokens] @ lut.T + b_U


def tied_log_probs(tokens, lut, b_U):
    return (math.sqrt(lut.shape[1]) * lut[tokens] @ lut.T + b_U).log_softmax(-1)


def tied_probs(tokens, lut, b_U):
    return (math.sqrt(lut.shape[1]) * lut[tokens] @ lut.T + b_U).softmax(-1)


def tied_bias_on_stream(tokens, lut, b_U):  # b_U added before unembedding (vocab = d_model here)
    return (math.sqrt(lut.shape[1]) * lut[tokens] + b_U) @ lut.T


def tied_last_position(tokens, lut, b_U):
    return (math.sqrt(lut.shape[1]) * lut[tokens] @ lut.T + b_U)[:, -1]


MUTATIONS = {
    "ch04_ex1": [
        (no_scale, "forgot the scale"),
        (one_hot_no_scale, "forgot the scale"),
        (times_d_model, "scaled by d_model instead of sqrt(d_model)"),
        (over_sqrt, "divided by sqrt(d_model)"),
        (sqrt_vocab, "scaled by sqrt(vocab)"),
        (columns, "indexed columns (transposed table)"),
        (one_based, "off by one"),
        (with_positions, "added the positional encoding"),
        (first_row_only, "wrong values"),
    ],
    "ch04_ex2": [
        (tied_no_scale, "forgot the embedding scale"),
        (tied_both_scaled, "scaled the unembedding too"),
        (tied_no_bias, "forgot the bias"),
        (tied_no_transpose, "used W_E instead of W_E^T for the unembedding"),
        (tied_columns, "indexed columns (transposed table)"),
        (tied_log_probs, "returned log-probabilities"),
        (tied_probs, "returned probabilities"),
        (tied_bias_on_stream, "wrong values"),
        (tied_last_position, "wrong shape"),
    ],
}
