"""Planted wrong answers for chapter 13's exercises, each with the diagnosis it must get."""

import torch

from circuitbook.checks.ch13 import direct_logit_attribution


def same_position(head_out, W_U, b_U, tokens):
    return torch.stack([head_out[h, :-1] @ W_U[:, tokens[:-1]]
                        for h in range(head_out.shape[0])]).diagonal(dim1=-2, dim2=-1)


def shifted_outputs(head_out, W_U, b_U, tokens):
    return (head_out[:, 1:] * W_U[:, tokens[1:]].T).sum(-1)


def transposed(head_out, W_U, b_U, tokens):
    return (head_out[:, :-1] * W_U[tokens[1:]]).sum(-1)


def with_bias(head_out, W_U, b_U, tokens):
    return (head_out[:, :-1] @ W_U + b_U).gather(
        -1, tokens[1:].expand(head_out.shape[0], -1)[..., None])[..., 0]


def summed(head_out, W_U, b_U, tokens):
    return direct_logit_attribution(head_out, W_U, b_U, tokens).sum(0)


def full_logits(head_out, W_U, b_U, tokens):
    return head_out[:, :-1] @ W_U


def loop_but_last_kept(head_out, W_U, b_U, tokens):  # scores pos positions: wrong shape
    nxt = torch.cat([tokens[1:], tokens[:1]])
    return (head_out * W_U[:, nxt].T).sum(-1)


def softmaxed(head_out, W_U, b_U, tokens):
    probs = (head_out[:, :-1] @ W_U).softmax(-1)
    return probs.gather(-1, tokens[1:].expand(head_out.shape[0], -1)[..., None])[..., 0]


def no_direct(n_layers, n_heads):
    return (n_heads + 1) ** n_layers - 1


def first_order(n_layers, n_heads):
    return 1 + n_layers * n_heads


def every_layer(n_layers, n_heads):
    return n_heads ** n_layers


def two_power(n_layers, n_heads):
    return 2 ** n_layers


def swapped(n_layers, n_heads):
    return (n_layers + 1) ** n_heads


def subsets_of_heads(n_layers, n_heads):
    return 2 ** (n_layers * n_heads)


def first_and_last_order(n_layers, n_heads):  # direct + order 1 + order L only
    return 1 + n_layers * n_heads + n_heads ** n_layers


MUTATIONS = {
    "ch13_ex1": [
        (no_direct, "forgot the direct path"),
        (first_order, "counted only paths through one head"),
        (every_layer, "counted only paths through every layer"),
        (two_power, "counted subsets of layers, not heads"),
        (swapped, "swapped layers and heads"),
        (subsets_of_heads, "let a path use several heads of one layer"),
        (first_and_last_order, "wrong values"),
    ],
    "ch13_ex2": [
        (same_position, "scored the current token, not the next one"),
        (shifted_outputs, "shifted the head outputs instead of the tokens"),
        (transposed, "read W_U by rows (transposed)"),
        (with_bias, "added b_U to every head"),
        (summed, "summed over heads"),
        (full_logits, "returned the whole logit vector"),
        (loop_but_last_kept, "wrong shape"),
        (softmaxed, "wrong values"),
    ],
}
