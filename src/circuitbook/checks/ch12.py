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

import dataclasses
import math

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


def _xattn_tolerance(inputs: dict, dtype=torch.float32) -> torch.Tensor:
    """Per output entry [tgt, d_model], the rounding bound of cross-attention on these inputs,
    for two computations (the answer's and the reference's), in any order of summation, in
    ``dtype`` (Higham's gamma_n, as ``circuitbook.book.rounding_bound``).

    A score q.k / sqrt(d_head) is off by at most eps [(d_model + 1)((|x| |W_Q|).|k| +
    |q|.(|m| |W_K|)) + (d_head + 1) |q|.|k|] / sqrt(d_head); softmax turns an absolute error
    of a row's scores into a relative error of its pattern of up to twice the largest, and
    adds n_src + 3 roundings; the output sums p v W_O over source positions, d_head and the
    heads (n_src + d_head + n_heads) with values rounded in d_model + 1 steps."""
    eps = torch.finfo(dtype).eps
    x, m = inputs["x_dec"].double(), inputs["memory"].double()
    W_Q, W_K, W_V, W_O = (inputs[k].double() for k in ("W_Q", "W_K", "W_V", "W_O"))
    n_heads, d_model, d_head = W_Q.shape
    n_src = m.shape[0]
    q, k, v = (torch.einsum("pd,hde->hpe", a, W) for a, W in ((x, W_Q), (m, W_K), (m, W_V)))
    qa, ka, va = (torch.einsum("pd,hde->hpe", a.abs(), W.abs()) for a, W in ((x, W_Q), (m, W_K), (m, W_V)))
    delta = eps * ((d_model + 1) * (qa @ k.abs().transpose(-1, -2) + q.abs() @ ka.transpose(-1, -2))
                   + (d_head + 1) * (q.abs() @ k.abs().transpose(-1, -2))) / math.sqrt(d_head)
    allowed = inputs["src_mask"][None, None, :]
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d_head)).masked_fill(~allowed, float("-inf"))
    p = scores.softmax(-1)                                          # [h, tgt, src]
    rel = 2 * delta.masked_fill(~allowed, 0).amax(-1, keepdim=True) + (n_src + 3) * eps
    vo = torch.einsum("hse,hem->hsm", v.abs(), W_O.abs())
    vo_a = torch.einsum("hse,hem->hsm", va, W_O.abs())
    err = torch.einsum("hts,hsm->tm", p * rel, vo) + eps * torch.einsum(
        "hts,hsm->tm", p, (d_model + 1) * vo_a + (n_src + d_head + n_heads) * vo)
    return 2 * err


def _close_nan(a, b, tol: torch.Tensor) -> bool:
    """Every entry within its bound ``tol``, NaN == NaN (a softmax over a fully masked column
    gives NaN)."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
            and a.shape == b.shape):
        return False
    if a.shape != tol.shape:
        # a mistake whose output has another shape than the answer's (queries from memory):
        # diagnosing it, never passing an answer, at the largest per-entry bound
        tol = tol.max()
    a, b = a.detach().double(), b.double()
    return bool((((a - b).abs() <= tol) | (a.isnan() & b.isnan())).all())


class _CrossAttentionExercise(FunctionExercise):
    """Compares within the rounding bound of the computation on the trial's own inputs."""

    def _compare(self, got, expected, inputs):
        # an answer coarser than float32 is refused, not judged: at bfloat16's eps the bound
        # grows past the outputs themselves (a tensor of zeros would pass)
        if isinstance(got, torch.Tensor) and got.is_floating_point() \
                and torch.finfo(got.dtype).eps > torch.finfo(torch.float32).eps:
            return self._fail(f"your output is {got.dtype}, coarser than the float32 inputs: in that precision "
                              "the check cannot tell a right answer from a wrong one. Which step of yours "
                              "changes the dtype?", "lower precision than float32")
        tol = _xattn_tolerance(inputs, torch.float32)  # the reference is float32
        return FunctionExercise._compare(dataclasses.replace(self, compare=lambda a, b: _close_nan(a, b, tol)),
                                         got, expected, inputs)


EX1 = _CrossAttentionExercise(
    id="ch12_ex1",
    title="cross-attention",
    reference=cross_attention,
    make_inputs=_xattn_inputs,
    mistakes=[
        Mistake("queries from the wrong stream", "Your output has one row per source position, not one per "
                "target position. Which stream asks the questions in cross-attention, and how many rows "
                "does it have?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(memory, memory, W_Q, W_K, W_V, W_O, src_mask[None, :].expand(memory.shape[0], -1))),
        Mistake("keys and values from the wrong stream", "Your output is unchanged when memory changes. Trace "
                "each of q, k and v in your code back to the argument it is computed from: is that the "
                "layer the exercise describes?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, x_dec, W_Q, W_K, W_V, W_O, None)),
        Mistake("masked more than the padding", "In your output, early target positions give no weight to "
                "source positions further right. What would a causal mask protect against here?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O,
                        _pad(x_dec, src_mask) & torch.ones(x_dec.shape[0], memory.shape[0]).tril().bool())),
        Mistake("padding attended to", "Your patterns give weight to the source positions that src_mask "
                "marks as padding. What weight should a position that holds no word get, and how does a "
                "softmax give exactly that?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, None)),
        Mistake("mask applied to the real tokens", "Your patterns put all their weight on the padding and "
                "none on the real source tokens. What does True mean in src_mask?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, ~_pad(x_dec, src_mask))),
        Mistake("patterns too sharp", "Your patterns rank the source positions as the reference does but "
                "are more peaked. What sets how peaked a softmax's output is, and does every step of your "
                "scores follow the attention formula of the paper?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V, W_O, _pad(x_dec, src_mask), scale=False)),
        *[Mistake("weights that do not sum to 1 per target position", "In your patterns a target position's "
                  "weights over the source do not sum to 1. Which positions should each query's weights "
                  "be shared among, and along which axis of your scores are they?",
                  lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask, fill=fill:
                  _attend(x_dec, memory, W_Q, W_K, W_V, W_O, _pad(x_dec, src_mask), axis=-2, fill=fill))
          for fill in (float("-inf"), -1e9)],  # a column of -inf gives NaN; -1e9 (the AT's) does not
        Mistake("projections mixed up", "Your scores use a weight matrix on the wrong stream. For each of "
                "W_Q, W_K and W_V, which stream does it read in cross-attention, and why?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_K, W_Q, W_V, W_O, _pad(x_dec, src_mask))),
        Mistake("output left in head space", "Your output looks like the heads' results z_h = A_h v_h laid "
                "side by side. Which of the weights have you not used, and what does it map from and to?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q, W_K, W_V,
                        torch.eye(W_O.shape[0] * W_O.shape[1]).reshape(W_O.shape[0], W_O.shape[1], -1),
                        _pad(x_dec, src_mask))),
        Mistake("used one head only", "Your output agrees with what one head writes. How many heads does "
                "the layer have, and how do their writes combine in the stream?",
                lambda x_dec, memory, W_Q, W_K, W_V, W_O, src_mask:
                _attend(x_dec, memory, W_Q[:1], W_K[:1], W_V[:1], W_O[:1], _pad(x_dec, src_mask))),
    ],
    hint="Start from ordinary multi-head self-attention. Which of its inputs come from x_dec and "
         "which from memory, and what shape does each head's pattern then have? Which positions must get "
         "no weight, and what would a causal mask protect against here?",
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
        Mistake("one answer per target token", "Your result has an entry per target token (or picks source "
                "ids), not a target id per source token. Which axis of your table runs over the target "
                "vocabulary?",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0).argmax(0)),
        Mistake("returned the scores", "Your result is the whole [src_vocab, tgt_vocab] table. What does the "
                "docstring ask for, one per source token?",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0)),
        Mistake("picked the least promoted word", "Your ids differ from the reference's for almost every "
                "source token, although each is a target id. What does a large entry in a row of the "
                "circuit do to that target word's logit, and which entry of the row does your code "
                "select?",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).sum(0).argmin(-1)),
        Mistake("used one head only", "Your table agrees with one head's circuit. What does the layer as a "
                "whole write when its heads attend to the word?",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V[:1], W_O[:1], W_U).sum(0).argmax(-1)),
        Mistake("combined the heads the wrong way", "Your table takes each entry from a single head. How do the "
                "heads' outputs combine in the residual stream?",
                lambda W_E, W_V, W_O, W_U: _full_ov(W_E, W_V, W_O, W_U).max(0).values.argmax(-1)),
        Mistake("columns are not target tokens", "Your ids run over residual-stream dimensions, not over the "
                "target vocabulary. Which matrix turns the stream into target logits?",
                lambda W_E, W_V, W_O, W_U: torch.einsum("sd,hde,hem->sm", W_E, W_V, W_O).argmax(-1)),
        Mistake("rows are not source tokens", "Your result has one entry per residual-stream dimension, not "
                "per source token. Where does a source token enter the circuit?",
                lambda W_E, W_V, W_O, W_U: torch.einsum("hde,hem,mt->dt", W_V, W_O, W_U).argmax(-1)),
    ],
    hint="Follow one source token from its embedding to the target logits through this layer, as the "
         "full OV circuit above does. Which matrices does it pass, what does the layer do with its "
         "heads, and which entry of the resulting row names the translation?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
