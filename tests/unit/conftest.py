"""Small attention-only models shared by the circuit-algebra tests (circuits, composition,
paths, heads). Every builder is seeded and takes milliseconds.

The unit tests run on the CPU on every machine: their references (the zoo's recorded metrics,
hand-derived values) are CPU results, so ``CIRCUITBOOK_DEVICE=cpu`` keeps ``circuitbook``'s
CUDA-if-available default (``circuitbook.devices.default_device``) off here. The GPU suite
(``tests/gpu``) passes its devices explicitly.
"""

from __future__ import annotations

import math
import os
import warnings

os.environ.setdefault("CIRCUITBOOK_DEVICE", "cpu")

import pytest
import torch

from circuitbook.models.attn_only import attn_only


def build_model(
    n_layers: int,
    *,
    d_model: int = 16,
    n_heads: int = 2,
    d_head: int | None = 5,
    d_vocab: int = 20,
    n_ctx: int = 16,
    positional: str = "shortformer",
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    scale: float = 0.3,
):
    """A random attention-only model whose every parameter, biases included, is nonzero.

    TransformerLens initialises biases to zero, which would hide any bias bookkeeping error;
    we add ``scale`` * N(0, 1) to every parameter.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = attn_only(
            n_layers, d_model=d_model, n_heads=n_heads, d_head=d_head, d_vocab=d_vocab,
            n_ctx=n_ctx, positional=positional, seed=seed, dtype=dtype,
        )
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def build_induction_model(d_vocab: int = 32, n_ctx: int = 24, strength: float = 30.0, seed: int = 0):
    """A hand-built 2-layer model: head 0.0 attends to the previous token, head 1.0 does induction.

    The residual stream has three orthogonal subspaces: token one-hots [0, V), position one-hots
    [V, V+N) (seen only by Q and K, shortformer) and a "previous token" space [V+N, 2V+N).
    Head 0.0: its query at position p points at position p-1 (W_pos QK band) and its OV copies
    the attended token into the previous-token space. Head 1.0: its query is the current token,
    its key the previous-token space (K-composition with 0.0), and its OV copies the attended
    token into the token space, which W_U reads. Position 0 has no previous token (head 0.0 can
    only attend to itself there), so one extra QK dimension, driven by the query bias b_Q (which
    is not part of W_QK, so the composition scores do not see it), keeps head 1.0 off key 0.
    Other heads get tiny random weights.
    """
    V, N = d_vocab, n_ctx
    d_model, d_head = 2 * V + N, max(V, N) + 1
    model = build_model(2, d_model=d_model, n_heads=2, d_head=d_head, d_vocab=V, n_ctx=N, seed=seed, scale=0.0)
    g = torch.Generator().manual_seed(seed)
    s = strength * math.sqrt(d_head)  # TransformerLens divides scores by sqrt(d_head)
    prev = slice(V + N, 2 * V + N)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(0.01 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        for b in ("b_Q", "b_K", "b_V", "b_O"):
            for blk in model.blocks:
                getattr(blk.attn, b).zero_()
        model.unembed.b_U.zero_()
        eye_v = torch.eye(V, dtype=model.W_E.dtype)
        model.embed.W_E.zero_()
        model.embed.W_E[:, :V] = eye_v
        model.pos_embed.W_pos.zero_()
        model.pos_embed.W_pos[:, V : V + N] = torch.eye(N, dtype=model.W_E.dtype)
        model.unembed.W_U.zero_()
        model.unembed.W_U[:V] = eye_v

        a0 = model.blocks[0].attn
        for w in (a0.W_Q, a0.W_K, a0.W_V, a0.W_O):
            w[0].zero_()
        for p in range(1, N):
            a0.W_Q[0, V + p, p - 1] = s  # query at position p looks for key position p - 1
        for k in range(N):
            a0.W_K[0, V + k, k] = 1.0
        a0.W_V[0, :V, :V] = eye_v  # read the attended token ...
        a0.W_O[0, :V, prev] = eye_v  # ... and write it to the previous-token space

        a1 = model.blocks[1].attn
        for w in (a1.W_Q, a1.W_K, a1.W_V, a1.W_O):
            w[0].zero_()
        a1.W_Q[0, :V, :V] = s * eye_v  # query: the current token
        a1.W_K[0, prev, :V] = eye_v  # key: the token before the key position
        a1.b_Q[0, d_head - 1] = s  # every query ...
        a1.W_K[0, V, d_head - 1] = -1.0  # ... avoids key position 0
        a1.W_V[0, :V, :V] = eye_v  # copy the attended token to the logits
        a1.W_O[0, :V, :V] = eye_v
    return model


def build_copying_model(sign: float = 1.0, d_vocab: int = 40, d_model: int = 12, d_head: int = 4, seed: int = 0):
    """A 1-layer model whose head 0.0 has a positive (sign=+1) or negative definite full OV circuit.

    With ``W_U = W_E^T`` and ``W_O = sign * W_V^T``, ``W_E W_V W_O W_U = sign * (W_E W_V)(W_E W_V)^T``:
    its nonzero eigenvalues all have the sign of ``sign``, so the copying score is exactly ``sign``.
    """
    model = build_model(1, d_model=d_model, n_heads=2, d_head=d_head, d_vocab=d_vocab, n_ctx=8, seed=seed)
    with torch.no_grad():
        model.unembed.W_U.copy_(model.embed.W_E.T)
        attn = model.blocks[0].attn
        attn.W_O[0] = sign * attn.W_V[0].T
    return model


@pytest.fixture(scope="session")
def induction_model():
    return build_induction_model()


def no_repeat_tokens(batch, seq_len, d_vocab, seed=0):
    """Repeated sequences without a repeated token inside one copy: one earlier occurrence only."""
    g = torch.Generator().manual_seed(seed)
    half = torch.stack([torch.randperm(d_vocab, generator=g)[:seq_len] for _ in range(batch)])
    return torch.cat([half, half], 1)
