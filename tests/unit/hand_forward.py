"""An attention-only transformer's forward pass written out by hand in float64, from the weights.

The independent reference of the problem set's checks (tests/unit/test_ps_references.py): it
shares no code with ``circuitbook.checks.ps`` or with TransformerLens's forward pass (only the
weight tensors are read off the model), loops over heads one at a time, and says in its own
words what the measurements are. ``forward`` reproduces a TransformerLens ``HookedTransformer``
with ``attn_only=True``, no LayerNorm and ``standard`` or ``shortformer`` positions (the zoo's
models and problem 3's scaffold): test_ps_references.py checks it against the model's logits.
"""

from __future__ import annotations

import math

import torch

F64 = torch.float64


def weights(model) -> dict[str, torch.Tensor]:
    """The model's weights as float64 CPU tensors (TransformerLens's names and shapes)."""
    names = ("W_E", "W_pos", "W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_U", "b_U")
    return {n: getattr(model, n).detach().to("cpu", F64) for n in names}


def forward(model, tokens: torch.Tensor, *, mean_ablate: tuple[int, int] | None = None):
    """(logits [batch, pos, vocab], patterns [layer][batch, head, q, k], scale) in float64.

    ``scale`` is the largest sum of absolute values that a score or a logit accumulates
    (|q| |k|^T / sqrt(d_head), |x| |W_U|): the size that rounding errors scale with, for
    ``circuitbook.book.rounding_bound``.

    Each head: q = (x + p) W_Q + b_Q and k = (x + p) W_K + b_K (p the positions, added to the
    stream instead for ``standard`` positions), v = x W_V + b_V, scores q k^T / sqrt(d_head)
    with the future masked, z = softmax(scores) v, the head writes z W_O; the layer adds b_O.
    ``mean_ablate=(layer, head)`` replaces that head's z by its mean over batch and positions.
    """
    cfg = model.cfg
    assert cfg.attn_only and cfg.normalization_type is None, "a forward pass for attention-only models only"
    w = weights(model)
    tokens = tokens.to("cpu")
    n = tokens.shape[1]
    x = w["W_E"][tokens]
    positions = w["W_pos"][:n]
    if cfg.positional_embedding_type == "standard":
        x, qk_extra = x + positions, 0
    else:
        assert cfg.positional_embedding_type == "shortformer", cfg.positional_embedding_type
        qk_extra = positions
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    patterns, scale = [], 0.0
    for layer in range(cfg.n_layers):
        out = torch.zeros_like(x)
        pattern_l = []
        for head in range(cfg.n_heads):
            q = (x + qk_extra) @ w["W_Q"][layer, head] + w["b_Q"][layer, head]
            k = (x + qk_extra) @ w["W_K"][layer, head] + w["b_K"][layer, head]
            v = x @ w["W_V"][layer, head] + w["b_V"][layer, head]
            scores = (q @ k.transpose(-1, -2) / math.sqrt(cfg.d_head)).masked_fill(future, -math.inf)
            scale = max(scale, float((q.abs() @ k.abs().transpose(-1, -2)).max()) / math.sqrt(cfg.d_head))
            pattern = scores.softmax(-1)
            z = pattern @ v
            if mean_ablate == (layer, head):
                z = z.mean(dim=(0, 1)).expand_as(z)
            out = out + z @ w["W_O"][layer, head]
            pattern_l.append(pattern)
        x = x + out + w["b_O"][layer]
        patterns.append(torch.stack(pattern_l, dim=1))
    scale = max(scale, float((x.abs() @ w["W_U"].abs()).max()) + float(w["b_U"].abs().max()))
    return x @ w["W_U"] + w["b_U"], patterns, scale


def induction_score(pattern: torch.Tensor, n: int) -> torch.Tensor:
    """Per head [head]: the mean over the batch and over i = 0 .. n - 1 of the attention from
    query n + i (the second copy's i-th token) to key i + 1 (the token that followed its
    earlier occurrence), entry by entry."""
    batch, heads = pattern.shape[:2]
    total = torch.zeros(heads, dtype=F64)
    for b in range(batch):
        for i in range(n):
            total += pattern[b, :, n + i, i + 1]
    return total / (batch * n)


def prev_token_score(pattern: torch.Tensor) -> torch.Tensor:
    """Per head [head]: the mean attention from each position p >= 1 to p - 1."""
    batch, heads, pos = pattern.shape[:3]
    total = torch.zeros(heads, dtype=F64)
    for b in range(batch):
        for p in range(1, pos):
            total += pattern[b, :, p, p - 1]
    return total / (batch * (pos - 1))


def second_copy_loss(logits: torch.Tensor, tokens: torch.Tensor) -> float:
    """The mean over the batch and over t = n + 1 .. 2n - 1 of -log p(token t), the probability
    read from the logits at t - 1: the tokens of the second copy that induction can predict."""
    n = tokens.shape[1] // 2
    logp = logits.log_softmax(-1)
    terms = [-logp[b, t - 1, tokens[b, t]] for b in range(tokens.shape[0]) for t in range(n + 1, 2 * n)]
    return float(torch.stack(terms).mean())
