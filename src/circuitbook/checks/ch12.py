"""Chapter 12 (encoder-decoder attention): exercise checks and reference solutions.

Exercise 12.1 writes cross-attention from TransformerLens-shaped weights (queries from the
decoder stream, keys and values from the encoder memory, a source padding mask and no
causal mask); exercise 12.2 reads a translation table off the full OV circuit
``W_E^src W_V^h W_O^h W_U^tgt`` summed over a layer's heads. Row-vector convention::

    x_dec [tgt, d_model]     memory [src, d_model]     src_mask [src] (True: real token)
    W_Q, W_K, W_V [n_heads, d_model, d_head]           W_O [n_heads, d_head, d_model]
    W_E [src_vocab, d_model]                           W_U [d_model, tgt_vocab]
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake

# --------------------------------------------------------------------------------------
# Exercise 12.1: cross-attention
# --------------------------------------------------------------------------------------


def _attend(q_in, kv_in, W_Q, W_K, W_V, W_O, allowed, *, scale=True, axis=-1, fill=float("-inf")):
    """sum_h softmax(mask(q k^T / sqrt(d_head))) v W_O with q from ``q_in``, k and v from
    ``kv_in``; ``allowed`` [n_q, n_k] bool (None: no mask)."""
    q = torch.einsum("pd,hde->hpe", q_in, W_Q)
    k = torch.einsum("pd,hde->hpe", kv_in, W_K)
    v = torch.einsum("pd,hde->hpe", kv_in, W_V)
    scores = q @ k.transpose(-1, -2)
    if scale:
        scores = scores / W_Q.shape[-1] ** 0.5
    if allowed is not None:
        scores = scores.masked_fill(~allowed, fill)
    pattern = scores.softmax(dim=axis)
    return torch.einsum("hqk,hke,hem->qm", pattern, v, W_O)


def cross_attention(x_dec, memory, W_Q, W_K, W_V, W_O, src_mask):
    """x_dec [tgt, d]; memory [src, d]; W_Q, W_K, W_V [h, d, d_head];
    W_O [h, d_head, d]; src_mask [src] bool -> [tgt, d]."""
    q = torch.einsum("td,hde->hte", x_dec, W_Q)
    k = torch.einsum("sd,hde->hse", memory, W_K)
    v = torch.einsum("sd,hde->hse", memory, W_V)
    s = q @ k.transpose(-1, -2) / W_Q.shape[-1] ** 0.5
    p = s.masked_fill(~src_mask, float("-inf")).softmax(-1)
    return torch.einsum("hts,hse,hem->tm", p, v, W_O)


def _xattn_inputs(g: torch.Generator) -> dict:
    d_model, n_heads, d_head = 24, 3, 8     # n_heads * d_head == d_model (see "forgot W_O")
    tgt = 4 + int(torch.randint(0, 3, (1,), generator=g))
    src = tgt + 2 + int(torch.randint(0, 3, (1,), generator=g))   # src != tgt: no accidental fits
    n_pad = 1 + int(torch.randint(0, 2, (1,), generator=g))
    src_mask = torch.ones(src, dtype=torch.bool)
    src_mask[src - n_pad:] = False

    def w(*shape):
        return 1.5 * torch.randn(*shape, generator=g) / d_model ** 0.5

    return {"x_dec": torch.randn(tgt, d_model, generator=g), "memory": torch.randn(src, d_model, generator=g),
            "W_Q": w(n_heads, d_model, d_head), "W_K": w(n_heads, d_model, d_head),
            "W_V": w(n_heads, d_model, d_head), "W_O": w(n_heads, d_head, d_model), "src_mask": src_mask}


def _pad(x_dec, src_mask):
    return src_mask[None, :].expand(x_dec.shape[0], -1)


def _close_nan(a, b) -> bool:
    """allclose that treats NaN == NaN (a softmax over a fully masked column gives NaN)."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and torch.allclose(a.detach().to(b.dtype), b, atol=1e-5, rtol=1e-4, equal_nan=True))


EX1 = FunctionExercise(
    id="ch12_ex1",
    title="cross-attention",
    reference=cross_attention,
    make_inputs=_xattn_inputs,
    compare=_close_nan,
    mistakes=[
        Mistake("queries from the memory", "Queries come from the decoder stream x_dec (one row per target "
                "position); only keys and values come from the encoder memory.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(memory, memory, W_Q, W_K, W_V, W_O, src_mask[None, :].expand(memory.shape[0], -1))),
        Mistake("keys and values from the decoder", "That is the decoder's self-attention. In cross-attention "
                "keys and values come from the encoder memory.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, x_dec, W_Q, W_K, W_V, W_O, None)),
        Mistake("applied a causal mask", "Cross-attention has no causal mask: the whole source sentence is "
                "known before decoding starts, and a target word may translate a source word further right.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O,
                        _pad(x_dec, src_mask) & torch.ones(x_dec.shape[0], memory.shape[0]).tril().bool())),
        Mistake("forgot the source padding mask", "Padding positions of the source (src_mask False) must get "
                "zero attention: set their scores to -inf before the softmax.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, None)),
        Mistake("mask inverted", "src_mask is True for real source tokens; mask the positions where it is "
                "False.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, ~_pad(x_dec, src_mask))),
        Mistake("forgot the scale", "Divide the scores by sqrt(d_head).",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, _pad(x_dec, src_mask), scale=False)),
        *[Mistake("softmax over the wrong axis", "Normalise over the source positions (the keys, last "
                  "axis): each target position's weights must sum to 1.",
                  lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask, fill=fill:
                  _attend(x_dec, memory, W_Q, W_K, W_V, W_O, _pad(x_dec, src_mask), axis=-2, fill=fill))
          for fill in (float("-inf"), -1e9)],  # a column of -inf gives NaN; -1e9 (the AT's) does not
        Mistake("W_Q and W_K swapped", "Queries use W_Q, keys use W_K.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_K, W_Q, W_V, W_O, _pad(x_dec, src_mask))),
        Mistake("forgot W_O", "Each head's result z_h = A_h v_h lives in head space; map it back with W_O[h] "
                "and add the heads.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V,
                        torch.eye(W_O.shape[0] * W_O.shape[1]).reshape(W_O.shape[0], W_O.shape[1], -1),
                        _pad(x_dec, src_mask))),
        Mistake("used only the first head", "Add the outputs of all heads.",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q[:1], W_K[:1], W_V[:1], W_O[:1], _pad(x_dec, src_mask))),
    ],
    hint="Like self-attention, except that the queries come from the decoder (x_dec) and the keys and "
         "values from the encoder's memory, so each head's pattern is [tgt, src]. Scale as usual; give the "
         "source positions that src_mask marks False zero weight (no causal mask: the whole source is "
         "visible); softmax over the source; each head writes with W_O[h] and the heads add up to [tgt, "
         "d].",
)

# --------------------------------------------------------------------------------------
# Exercise 12.2: a translation table from the full OV circuit
# --------------------------------------------------------------------------------------


def _full_ov(W_E, W_V, W_O, W_U):
    """[n_heads, src_vocab, tgt_vocab]: W_E W_V[h] W_O[h] W_U for every head."""
    return torch.einsum("sd,hde,hem,mt->hst", W_E, W_V, W_O, W_U)


def ov_readout(W_E, W_V, W_O, W_U):
    """W_E [src_vocab, d]; W_V [h, d, d_head]; W_O [h, d_head, d];
    W_U [d, tgt_vocab] -> LongTensor [src_vocab] of target ids."""
    scores = torch.einsum("sd,hde,hem,mt->st", W_E, W_V, W_O, W_U)
    return scores.argmax(-1)


def _ov_inputs(g: torch.Generator) -> dict:
    d_model, n_heads, d_head = 16, 3, 4
    src_vocab = 10 + int(torch.randint(0, 4, (1,), generator=g))
    tgt_vocab = src_vocab + 2 + int(torch.randint(0, 3, (1,), generator=g))
    return {"W_E": torch.randn(src_vocab, d_model, generator=g),
            "W_V": torch.randn(n_heads, d_model, d_head, generator=g),
            "W_O": torch.randn(n_heads, d_head, d_model, generator=g),
            "W_U": torch.randn(d_model, tgt_vocab, generator=g)}


EX2 = FunctionExercise(
    id="ch12_ex2",
    title="a translation table from the full OV circuit",
    reference=ov_readout,
    make_inputs=_ov_inputs,
    mistakes=[
        Mistake("argmax over the source axis", "Rows are source tokens and columns target tokens: for each "
                "source token take the argmax over its row (the last axis).",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0).argmax(0)),
        Mistake("returned the scores", "Return the argmax of each row (a LongTensor of target ids), not the "
                "[src_vocab, tgt_vocab] matrix itself.",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0)),
        Mistake("took the argmin", "The translation is the target token whose logit the circuit raises the "
                "most: argmax, not argmin.",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0).argmin(-1)),
        Mistake("used only the first head", "Add the full OV circuits of all heads before the argmax.",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V[:1], W_O[:1], W_U).sum(0).argmax(-1)),
        Mistake("took the best head per token instead of the sum", "The heads' outputs add in the residual "
                "stream, so add their circuits; a max over heads is not what the layer computes.",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).max(0).values.argmax(-1)),
        Mistake("forgot W_U", "End with the unembedding W_U so the columns are target tokens, not residual "
                "stream dimensions.",
                lambda W_E, W_V, W_O, W_U: torch.einsum("sd,hde,hem->sm", W_E, W_V, W_O).argmax(-1)),
        Mistake("forgot the embedding", "Start from W_E: its rows are the source tokens.",
                lambda W_E, W_V, W_O, W_U: torch.einsum("hde,hem,mt->dt", W_V, W_O, W_U).argmax(-1)),
    ],
    hint="Build each source token's full OV circuit summed over the heads, a [src_vocab, tgt_vocab] table "
         "(embedding, value map, output map, unembedding), and for each source token pick the target token "
         "its row raises most. The answer holds integer ids, [src_vocab].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
