"""Planted wrong answers for chapter 12's exercises, each with the diagnosis it must get."""

import torch


def _heads(x, W):
    return torch.einsum("pd,hde->hpe", x, W)


def mask_after_softmax(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):  # rows no longer sum to 1
    q, k, v = _heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V)
    p = (q @ k.mT / q.shape[-1] ** 0.5).softmax(-1) * src_mask
    return torch.einsum("hqk,hke,hem->qm", p, v, W_O)


MUTATIONS = {
    "ch12_ex1": [
        (mask_after_softmax, "wrong values"),
    ],
    "ch12_ex2": [
    ],
}
