"""Planted wrong answers for chapter 12's exercises, each with the diagnosis it must get."""

import torch


def _heads(x, W):
    return torch.einsum("pd,hde->hpe", x, W)


def _run(q, k, v, W_O, mask=None, scale=True, dim=-1):
    s = q @ k.mT
    if scale:
        s = s / q.shape[-1] ** 0.5
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.einsum("hqk,hke,hem->qm", s.softmax(dim), v, W_O)


def queries_from_memory(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(memory, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O, src_mask)


def self_attention(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q), _heads(x_dec, W_K), _heads(x_dec, W_V), W_O)


def causal(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    tri = torch.ones(x_dec.shape[0], memory.shape[0], dtype=torch.bool).tril()
    return _run(_heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O, tri & src_mask)


def no_padding_mask(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O)


def inverted_mask(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O, ~src_mask)


def no_scale(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O, src_mask, scale=False)


def softmax_over_queries(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V), W_O, src_mask, dim=-2)


def softmax_over_queries_1e9(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    q, k, v = _heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V)
    s = (q @ k.mT / q.shape[-1] ** 0.5).masked_fill(src_mask == 0, -1e9)
    return torch.einsum("hqk,hke,hem->qm", s.softmax(-2), v, W_O)


def swapped_qk(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_K), _heads(memory, W_Q), _heads(memory, W_V), W_O, src_mask)


def no_W_O(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    q, k, v = _heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V)
    s = (q @ k.mT / q.shape[-1] ** 0.5).masked_fill(~src_mask, float("-inf"))
    z = s.softmax(-1) @ v                       # [h, tgt, d_head]
    return torch.cat(list(z), dim=-1)           # concatenated heads, never mapped back


def first_head(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    return _run(_heads(x_dec, W_Q[:1]), _heads(memory, W_K[:1]), _heads(memory, W_V[:1]), W_O[:1], src_mask)


def mask_after_softmax(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):  # rows no longer sum to 1
    q, k, v = _heads(x_dec, W_Q), _heads(memory, W_K), _heads(memory, W_V)
    p = (q @ k.mT / q.shape[-1] ** 0.5).softmax(-1) * src_mask
    return torch.einsum("hqk,hke,hem->qm", p, v, W_O)


def _ov(W_E, W_V, W_O, W_U):
    return torch.stack([W_E @ W_V[h] @ W_O[h] @ W_U for h in range(W_V.shape[0])])


def ov_wrong_axis(W_E, W_V, W_O, W_U):
    return _ov(W_E, W_V, W_O, W_U).sum(0).T.argmax(-1)


def ov_scores(W_E, W_V, W_O, W_U):
    return _ov(W_E, W_V, W_O, W_U).sum(0)


def ov_argmin(W_E, W_V, W_O, W_U):
    return (-_ov(W_E, W_V, W_O, W_U).sum(0)).argmax(-1)


def ov_first_head(W_E, W_V, W_O, W_U):
    return (W_E @ W_V[0] @ W_O[0] @ W_U).argmax(-1)


def ov_best_head(W_E, W_V, W_O, W_U):
    return _ov(W_E, W_V, W_O, W_U).amax(0).argmax(-1)


def ov_no_unembed(W_E, W_V, W_O, W_U):
    return sum(W_E @ W_V[h] @ W_O[h] for h in range(W_V.shape[0])).argmax(-1)


def ov_no_embed(W_E, W_V, W_O, W_U):
    return sum(W_V[h] @ W_O[h] @ W_U for h in range(W_V.shape[0])).argmax(-1)


def ov_paper_order_transposed(W_E, W_V, W_O, W_U):  # U^T (W_O W_V)^T ... read as columns
    return (W_U.T @ sum(W_O[h].T @ W_V[h].T for h in range(W_V.shape[0])) @ W_E.T).argmax(0)


MUTATIONS = {
    "ch12_ex1": [
        (queries_from_memory, "queries from the memory"),
        (self_attention, "keys and values from the decoder"),
        (causal, "applied a causal mask"),
        (no_padding_mask, "forgot the source padding mask"),
        (inverted_mask, "mask inverted"),
        (no_scale, "forgot the scale"),
        (softmax_over_queries, "softmax over the wrong axis"),
        (softmax_over_queries_1e9, "softmax over the wrong axis"),
        (swapped_qk, "W_Q and W_K swapped"),
        (no_W_O, "forgot W_O"),
        (first_head, "used only the first head"),
        (mask_after_softmax, "wrong values"),
    ],
    "ch12_ex2": [
        (ov_wrong_axis, "argmax over the source axis"),
        (ov_scores, "returned the scores"),
        (ov_argmin, "took the argmin"),
        (ov_first_head, "used only the first head"),
        (ov_best_head, "took the best head per token instead of the sum"),
        (ov_no_unembed, "forgot W_U"),
        (ov_no_embed, "forgot the embedding"),
    ],
}
