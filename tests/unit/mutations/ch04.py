"""Planted wrong answers for chapter 4's exercises, each with the diagnosis it must get."""

import math



def first_row_only(tokens, lut):  # broadcasting slip: every token gets row 0
    return lut[0].expand(*tokens.shape, -1) * math.sqrt(lut.shape[1])


def tied_bias_on_stream(tokens, lut, b_U):  # b_U added before unembedding (vocab = d_model here)
    return (math.sqrt(lut.shape[1]) * lut[tokens] + b_U) @ lut.T


def tied_last_position(tokens, lut, b_U):
    return (math.sqrt(lut.shape[1]) * lut[tokens] @ lut.T + b_U)[:, -1]


MUTATIONS = {
    "ch04_ex1": [
        (first_row_only, "wrong values"),
    ],
    "ch04_ex2": [
        (tied_bias_on_stream, "wrong values"),
        (tied_last_position, "wrong shape"),
    ],
}
