"""Planted wrong answers for chapter 10's exercises, each with the diagnosis it must get."""

import torch.nn.functional as F


def gelu(x, W1, b1, W2, b2):
    return F.gelu(F.linear(x, W1, b1)) @ W2.T + b2


def transposed(x, W1, b1, W2, b2):  # reads [out, in] storage as [in, out]: a shape error
    return (x @ W1 + b1).relu() @ W2 + b2


def transposed_second(x, W1, b1, W2, b2):
    return (x @ W1.T + b1).relu() @ W2 + b2


def leaky(x, W1, b1, W2, b2):  # unrecognised: a leaky ReLU
    return F.leaky_relu(x @ W1.T + b1, 0.1) @ W2.T + b2


MUTATIONS = {
    "ch10_ex1": [
        (transposed, "transposed weights"),
        (transposed_second, "transposed weights"),
        (leaky, "wrong values"),
    ],
    "ch10_ex2": [
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in).relu() @ W_out, None),  # summed the neurons
        (lambda x, W_in, b_in, W_out: (x @ W_in + b_in).relu(), None),  # the activations only
        ],
}
