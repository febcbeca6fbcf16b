"""Planted wrong answers for chapter 7's exercises, each with the diagnosis it must get."""

import torch



def one_head_repeated(weight, n_heads):
    W = weight.T
    d_head = W.shape[1] // n_heads
    return W[:, :d_head].expand(n_heads, -1, -1)


def b_V_unmixed_each_head_pos0(x, pattern, W_V, W_O, b_V, b_O):  # values of position 0 only
    v = torch.einsum("kd,hde->hke", x, W_V) + b_V[:, None, :]
    z = v[:, :1].expand(-1, x.shape[0], -1)
    return torch.einsum("hqe,hem->qm", z, W_O) + b_O


def b_O_added_in_each_head(x, pattern, W_V, W_O, b_V, b_O):  # a loop over heads, b_O inside it
    out = torch.zeros(x.shape[0], W_O.shape[-1])
    for h in range(W_V.shape[0]):
        v = x @ W_V[h] + b_V[h]
        out = out + pattern[h] @ v @ W_O[h] + b_O
    return out


MUTATIONS = {
    "ch07_ex1": [
        (one_head_repeated, "wrong values"),
    ],
    "ch07_ex2": [
        (b_V_unmixed_each_head_pos0, "wrong values"),
        (b_O_added_in_each_head, "a bias counted too often"),
    ],
}

