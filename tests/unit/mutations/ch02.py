"""Planted wrong answers for chapter 2's exercises, each with the diagnosis it must get."""

from circuitbook.checks.ch02 import encoder_layer_params, sublayer_connection


def no_biases(d_model, h, d_ff, bias=True):
    return 4 * d_model**2 + 2 * d_model * d_ff + 4 * d_model


def biases_always(d_model, h, d_ff, bias=True):
    return 4 * d_model**2 + 4 * d_model + 2 * d_model * d_ff + d_ff + d_model + 4 * d_model


def one_head(d_model, h, d_ff, bias=True):
    d_head, b = d_model // h, int(bias)
    attn = 3 * (d_model * d_head + d_head * b) + d_head * d_model + d_model * b
    return attn + 2 * d_model * d_ff + (d_ff + d_model) * b + 4 * d_model


def full_width_heads(d_model, h, d_ff, bias=True):
    b = int(bias)
    attn = h * 4 * d_model * d_model + 4 * d_model * b
    return attn + 2 * d_model * d_ff + (d_ff + d_model) * b + 4 * d_model


def paper_d_ff(d_model, h, d_ff, bias=True):
    return encoder_layer_params(d_model, h, 4 * d_model, bias)


def one_ffn_matrix(d_model, h, d_ff, bias=True):
    b = int(bias)
    return 4 * d_model**2 + 4 * d_model * b + d_model * d_ff + d_ff * b + 4 * d_model


def no_layernorm(d_model, h, d_ff, bias=True):
    return encoder_layer_params(d_model, h, d_ff, bias) - 4 * d_model


def one_layernorm(d_model, h, d_ff, bias=True):
    return encoder_layer_params(d_model, h, d_ff, bias) - 2 * d_model


def gain_only(d_model, h, d_ff, bias=True):  # two LayerNorms, gains only: the same count
    b = int(bias)
    return 4 * d_model**2 + 4 * d_model * b + 2 * d_model * d_ff + (d_ff + d_model) * b + 2 * d_model


def d_head_for_d_model(d_model, h, d_ff, bias=True):  # off in the attention and the FFN
    d_head = d_model // h
    return encoder_layer_params(d_head, 1, d_ff, bias)


def swapped(x, sublayer, norm, position):
    return sublayer_connection(x, sublayer, norm, "post" if position == "pre" else "pre")


def always_pre(x, sublayer, norm, position):  # ignores the switch: wrong on post inputs
    return x + sublayer(norm(x))


def no_residual(x, sublayer, norm, position):
    return sublayer(norm(x)) if position == "pre" else norm(sublayer(x))


def twice(x, sublayer, norm, position):
    return norm(x + sublayer(norm(x)))


def normed_residual(x, sublayer, norm, position):
    if position == "pre":
        return norm(x) + sublayer(norm(x))
    return norm(x + sublayer(x))


def normed_write(x, sublayer, norm, position):
    return x + norm(sublayer(x))


def no_norm(x, sublayer, norm, position):
    return x + sublayer(x)


def sublayer_twice(x, sublayer, norm, position):  # not a catalogued mistake
    if position == "pre":
        return x + sublayer(sublayer(norm(x)))
    return norm(x + sublayer(x))


MUTATIONS = {
    "ch02_ex1": [
        (no_biases, "forgot the biases"),
        (biases_always, "counted biases with bias=False"),
        (one_head, "counted one head only"),
        (full_width_heads, "gave every head full-width matrices"),
        (paper_d_ff, "assumed d_ff = 4 d_model"),
        (one_ffn_matrix, "forgot the feed-forward's second matrix"),
        (no_layernorm, "forgot the LayerNorms"),
        (one_layernorm, "counted half the LayerNorm parameters"),
        (gain_only, "counted half the LayerNorm parameters"),  # the same number
        (d_head_for_d_model, "wrong values"),
    ],
    "ch02_ex2": [
        (swapped, "pre and post swapped"),
        (always_pre, "pre and post swapped"),
        (no_residual, "forgot the residual"),
        (twice, "normalised twice"),
        (normed_residual, "added the normalised input"),
        (normed_write, "normalised the sublayer's output"),
        (no_norm, "forgot the LayerNorm"),
        (sublayer_twice, "wrong values"),
    ],
}
