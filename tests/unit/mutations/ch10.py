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


def count_no_bias(d_model, d_ff):
    return 2 * d_model * d_ff


def count_no_b2(d_model, d_ff):
    return 2 * d_model * d_ff + d_ff


def count_no_b1(d_model, d_ff):
    return d_model * d_ff * 2 + d_model


def count_one_matrix(d_model, d_ff):
    return d_model * d_ff + d_ff + d_model


def count_assumes_4x(d_model, d_ff):
    return 2 * d_model * (4 * d_model) + 4 * d_model + d_model


def count_square(d_model, d_ff):
    return 2 * d_model * d_model + d_ff + d_model


def count_biases_dff(d_model, d_ff):
    return 2 * d_model * d_ff + 2 * d_ff


def count_w1_twice(d_model, d_ff):  # counts nn.Linear(d_model, d_ff) for both layers
    return sum(p.numel() for p in torch.nn.Linear(d_model, d_ff).parameters()) * 2


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
        (count_no_bias, "forgot the biases"),
        (count_no_b2, "forgot b2"),
        (count_no_b1, "forgot b1"),
        (count_one_matrix, "counted one matrix"),
        (count_assumes_4x, "assumed d_ff = 4 d_model"),
        (count_square, "counted d_model^2 weights"),
        (count_biases_dff, "biases the wrong size"),
        (count_w1_twice, "biases the wrong size"),
    ],
}
