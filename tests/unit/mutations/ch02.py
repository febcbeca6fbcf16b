"""Planted wrong answers for chapter 2's exercises, each with the diagnosis it must get."""

from circuitbook.checks.ch02 import encoder_layer_params


def d_head_for_d_model(d_model, h, d_ff, bias=True):  # off in the attention and the FFN
    d_head = d_model // h
    return encoder_layer_params(d_head, 1, d_ff, bias)


def sublayer_twice(x, sublayer, norm, position):  # not a catalogued mistake
    if position == "pre":
        return x + sublayer(sublayer(norm(x)))
    return norm(x + sublayer(x))


MUTATIONS = {
    "ch02_ex1": [
        (d_head_for_d_model, "wrong values"),
    ],
    "ch02_ex2": [
        (sublayer_twice, "wrong values"),
    ],
}
