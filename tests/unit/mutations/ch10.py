"""Planted wrong answers for chapter 10's exercises, each with the diagnosis it must get."""

import torch
import torch.nn.functional as F


def no_relu(x, W1, b1, W2, b2):
    return (x @ W1.T + b1) @ W2.T + b2


def relu_twice(x, W1, b1, W2, b2):
    return ((x @ W1.T + b1).relu() @ W2.T + b2).relu()


def no_b1(x, W1, b1, W2, b2):
    return (x @ W1.T).relu() @ W2.T + b2


def no_b2(x, W1, b1, W2, b2):
    return F.linear((x @ W1.T + b1).clamp(min=0), W2)


def no_biases(x, W1, b1, W2, b2):
    return F.linear(F.linear(x, W1).relu(), W2)


def bias_after_relu(x, W1, b1, W2, b2):
    return ((x @ W1.T).relu() + b1) @ W2.T + b2


def gelu(x, W1, b1, W2, b2):
    return F.gelu(F.linear(x, W1, b1)) @ W2.T + b2


def transposed(x, W1, b1, W2, b2):  # reads [out, in] storage as [in, out]: a shape error
    return (x @ W1 + b1).relu() @ W2 + b2


def transposed_second(x, W1, b1, W2, b2):
    return (x @ W1.T + b1).relu() @ W2 + b2


def relu_on_input(x, W1, b1, W2, b2):
    return F.linear(F.linear(x.relu(), W1, b1), W2, b2)


def leaky(x, W1, b1, W2, b2):  # unrecognised: a leaky ReLU
    return F.leaky_relu(x @ W1.T + b1, 0.1) @ W2.T + b2


MUTATIONS = {
    "ch10_ex1": [
        (no_relu, "forgot the ReLU"),
        (relu_twice, "ReLU after the second layer too"),
        (no_b1, "forgot b1"),
        (no_b2, "forgot b2"),
        (no_biases, "forgot both biases"),
        (bias_after_relu, "added b1 after the ReLU"),
        (gelu, "used GELU"),
        (transposed, "transposed weights"),
        (transposed_second, "transposed weights"),
        (relu_on_input, "ReLU on the input"),
        (leaky, "wrong values"),
    ],
    "ch10_ex2": [
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in)[..., None] * W_out, "forgot the ReLU"),
        (lambda x, W_in, b_in, W_out: (x @ W_in).clamp(min=0)[..., None] * W_out, "forgot b_in"),
        (lambda x, W_in, b_in, W_out: ((x @ W_in + b_in)[..., None] * W_out).clamp(min=0),
         "applied the ReLU to the write"),
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in > 0).float()[..., None] * W_out, "wrote only the on/off gate"),
        (lambda x, W_in, b_in, W_out: F.gelu(x @ W_in + b_in)[..., None] * W_out, "used GELU"),
        (lambda x, W_in, b_in, W_out: ((x @ W_in).relu() + b_in)[..., None] * W_out, "added the bias after the ReLU"),
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in).relu() @ W_out, None),  # summed the neurons
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in).relu(), None),  # the activations only
        ],
}
