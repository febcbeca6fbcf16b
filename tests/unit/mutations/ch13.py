"""Planted wrong answers for chapter 13's exercises, each with the diagnosis it must get."""

import torch



def loop_but_last_kept(head_out, W_U, b_U, tokens):  # scores pos positions: wrong shape
    nxt = torch.cat([tokens[1:], tokens[:1]])
    return (head_out * W_U[:, nxt].T).sum(-1)


def softmaxed(head_out, W_U, b_U, tokens):
    probs = (head_out[:, :-1] @ W_U).softmax(-1)
    return probs.gather(-1, tokens[1:].expand(head_out.shape[0], -1)[..., None])[..., 0]


def first_and_last_order(n_layers, n_heads):  # direct + order 1 + order L only
    return 1 + n_layers * n_heads + n_heads ** n_layers


MUTATIONS = {
    "ch13_ex1": [
        (first_and_last_order, "wrong values"),
    ],
    "ch13_ex2": [
        (loop_but_last_kept, "wrong shape"),
        (softmaxed, "wrong values"),
    ],
}
