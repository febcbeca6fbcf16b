"""The QK and OV circuits of attention heads, alone and through the embeddings (chapters 8-9).

Elhage et al. (2021) split every attention head into two independent low-rank bilinear maps
(row-vector convention, as in TransformerLens: a residual vector ``x`` is a row, ``x W``):

- the **QK circuit** ``W_QK = W_Q W_K^T`` [d_model, d_model]: the attention score of a query
  residual ``x_q`` on a key residual ``x_k`` is ``x_q W_QK x_k^T / sqrt(d_head)`` (plus bias terms);
- the **OV circuit** ``W_OV = W_V W_O`` [d_model, d_model]: what the head writes to the query
  position when it attends fully to ``x_k`` is ``x_k W_OV`` (plus ``b_V W_O``).

Both have rank <= d_head, so we return them as TransformerLens ``FactoredMatrix`` objects
(``A @ B`` kept as its two factors). The *full* circuits put the embeddings on either side;
they are vocab x vocab (2.5e9 entries for GPT-2) and stay factored here: ask for ``.AB`` or a
row slice (``circuit.A[tokens] @ circuit.B``) only for what you need.

For a model with rotary position embeddings (RoPE; SmolLM2 and every Llama-style model), the
score is not one bilinear form but one per offset: ``x_i W_Q R_{i-j} W_K^T x_j^T``, where
``R_Delta`` rotates each of the head's rotary planes by ``Delta`` times its frequency
(:func:`rotary_rotation`, :func:`rotary_qk`). ``qk_circuit`` is then the offset-0 slice only.

Every function takes a ``HookedTransformer`` on any device and returns factors on that device,
in the model's dtype, still attached to autograd (so an exercise may train through them).
Biases (``b_Q, b_K, b_V, b_O, b_U``) are not part of these bilinear forms and are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch
from transformer_lens import FactoredMatrix

from circuitbook.validate import check_layer_head, check_model_device_dtype

if TYPE_CHECKING:  # annotations only (they are postponed)
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer, HookedTransformerConfig

__all__ = [
    "qk_circuit",
    "ov_circuit",
    "full_qk_circuit",
    "full_ov_circuit",
    "pos_qk_circuit",
    "direct_path",
    "rotary_rotation",
    "rotary_qk",
]


def _head_weights(model, what: str, layer: int, head: int | None, *names: str) -> list[torch.Tensor]:
    """The named per-head weights of one layer, [n_heads, ...] or [...] for one head."""
    check_model_device_dtype(model, what)
    layer, head = check_layer_head(model, layer, head)
    attn = model.blocks[layer].attn
    # The block's own properties (not model.W_Q, which stacks every layer) so that asking for
    # one layer costs one layer; grouped-query models expand their shared K/V heads here.
    weights = [getattr(attn, name) for name in names]
    if head is not None:
        weights = [w[head] for w in weights]
    return weights


def _T(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-2, -1)


def qk_circuit(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""] | None = None) -> FactoredMatrix:
    """The QK circuit ``W_QK = W_Q W_K^T`` of one head, or of every head in ``layer``.

    Equation (row vectors): ``score(x_q, x_k) = x_q W_Q W_K^T x_k^T / sqrt(d_head)``.
    Shapes: ``W_Q, W_K`` [n_heads, d_model, d_head]; returns a ``FactoredMatrix``
    [n_heads, d_model, d_model] (or [d_model, d_model] when ``head`` is given), rank <= d_head,
    with factors ``A = W_Q``, ``B = W_K^T``.

    Taught in chapter 8 (The OV and QK circuits).
    """
    W_Q, W_K = _head_weights(model, "qk_circuit", layer, head, "W_Q", "W_K")
    return FactoredMatrix(W_Q, _T(W_K))


def ov_circuit(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""] | None = None) -> FactoredMatrix:
    """The OV circuit ``W_OV = W_V W_O`` of one head, or of every head in ``layer``.

    Equation (row vectors): a head attending fully to key ``x_k`` writes ``x_k W_V W_O``.
    Shapes: ``W_V`` [n_heads, d_model, d_head], ``W_O`` [n_heads, d_head, d_model]; returns a
    ``FactoredMatrix`` [n_heads, d_model, d_model] (or [d_model, d_model]), rank <= d_head.

    Taught in chapter 8 (The OV and QK circuits).
    """
    W_V, W_O = _head_weights(model, "ov_circuit", layer, head, "W_V", "W_O")
    return FactoredMatrix(W_V, W_O)


def full_qk_circuit(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""] | None = None) -> FactoredMatrix:
    """The full QK circuit ``W_E W_QK W_E^T``: the token-token term of the attention scores.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_Q W_K^T W_E^T e_j^T``, the part of the
    score (before the 1/sqrt(d_head) scale) that a query *token* i gives a key *token* j through
    their two embeddings alone. It is not the score: the query and key biases add terms that
    depend on one token or on neither, shortformer models' ``W_pos`` adds cross terms and the
    position-position term (:func:`pos_qk_circuit`), a norm rescales each side, and above layer 0
    the stream also holds what earlier layers wrote (this is then the circuit of the *direct*
    path into the head). In a rotary model (SmolLM2) the score is ``x_i W_Q R_(i-j) W_K^T x_j^T``,
    one token table per offset: this matrix is the offset-0 member only.
    Shapes: returns a ``FactoredMatrix`` [n_heads, d_vocab, d_vocab] (or [d_vocab, d_vocab]),
    factors ``A = W_E W_Q`` [.., d_vocab, d_head] and ``B = W_K^T W_E^T`` [.., d_head, d_vocab].

    Taught in chapter 9 (Full circuits).
    """
    W_Q, W_K = _head_weights(model, "full_qk_circuit", layer, head, "W_Q", "W_K")
    W_E = model.W_E
    return FactoredMatrix(W_E @ W_Q, _T(W_K) @ _T(W_E))


def full_ov_circuit(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""] | None = None) -> FactoredMatrix:
    """The full OV circuit ``W_E W_OV W_U``: the token route of how attending changes each logit.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_V W_O W_U e_j^T``, the direct effect
    on logit j of the head attending fully to a position that holds only token i's embedding.
    It is the token part of the head's write: added positions, a norm's scales (which also
    change the eigenvalues) and, above layer 0, what earlier layers wrote are left out. Its
    eigenvalues give the copying score (:func:`circuitbook.heads.copying_scores`).
    Shapes: returns a ``FactoredMatrix`` [n_heads, d_vocab, d_vocab] (or [d_vocab, d_vocab]),
    factors ``A = W_E W_V`` [.., d_vocab, d_head] and ``B = W_O W_U`` [.., d_head, d_vocab].

    Taught in chapter 9 (Full circuits).
    """
    W_V, W_O = _head_weights(model, "full_ov_circuit", layer, head, "W_V", "W_O")
    W_E, W_U = model.W_E, model.W_U
    return FactoredMatrix(W_E @ W_V, W_O @ W_U)


def pos_qk_circuit(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""] | None = None) -> FactoredMatrix:
    """The positional QK circuit ``W_pos W_QK W_pos^T``: the position-position term of the scores.

    Equation (row vectors): entry ``[p, q]`` is ``W_pos[p] W_Q W_K^T W_pos[q]^T``, the
    position-position term of the score a query at position p gives a key at position q (the
    biases, the tokens and their cross terms with the positions add the rest). A previous-token
    head has a large band at ``q = p - 1``. Needs a learned ``W_pos`` (``standard`` or
    ``shortformer`` positional embeddings).
    Shapes: returns a ``FactoredMatrix`` [n_heads, n_ctx, n_ctx] (or [n_ctx, n_ctx]).

    Taught in chapter 9 (Full circuits).
    """
    kind = model.cfg.positional_embedding_type
    if kind not in ("standard", "shortformer"):
        raise ValueError(
            f"pos_qk_circuit needs a learned positional embedding W_pos; this model uses "
            f"positional_embedding_type={kind!r}, which has none"
        )
    W_Q, W_K = _head_weights(model, "pos_qk_circuit", layer, head, "W_Q", "W_K")
    W_pos = model.W_pos
    return FactoredMatrix(W_pos @ W_Q, _T(W_K) @ _T(W_pos))


def direct_path(model: HookedTransformer) -> FactoredMatrix:
    """The direct path ``W_E W_U``: the zero-layer model's bigram logits.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_U e_j^T``, the logit of token j
    read straight off the embedding of token i (add ``b_U`` for the full zero-layer logits).
    Shapes: ``W_E`` [d_vocab, d_model], ``W_U`` [d_model, d_vocab]; returns a
    ``FactoredMatrix`` [d_vocab, d_vocab] of rank <= d_model.

    Taught in chapter 9 (Full circuits).
    """
    check_model_device_dtype(model, "direct_path")
    return FactoredMatrix(model.W_E, model.W_U)


def rotary_rotation(model: HookedTransformer | HookedTransformerConfig, offsets: int | Sequence[int], *,
                    dtype: torch.dtype | None = None
                    ) -> Float[torch.Tensor, "n_offsets d_head d_head"] | Float[torch.Tensor, "d_head d_head"]:
    """``R_Delta``: the rotation RoPE puts between a query and a key ``Delta`` positions apart.

    RoPE (Su et al. 2021) rotates the query and key of every head by their position before the
    dot product: ``q~_i = q_i R(i)``, ``k~_j = k_j R(j)`` (row vectors), where ``R(p)`` is
    block-diagonal over ``rotary_dim / 2`` planes. Plane ``m`` turns by the angle ``p theta_m``,
    ``theta_m = base^(-2m / rotary_dim)``, as ``[[cos, sin], [-sin, cos]]`` acting on the pair of
    coordinates (m, m + rotary_dim/2) (split halves, GPT-NeoX and Llama) or (2m, 2m + 1)
    (adjacent pairs, GPT-J), as ``cfg.rotary_adjacent_pairs`` says; coordinates past
    ``rotary_dim`` are not rotated. Written as complex numbers, plane m of a row is
    ``a + ib`` and the rotation multiplies it by ``e^{i p theta_m}``. Rotations of one plane
    commute and ``R(j)^T = R(-j)``, so ``q~_i k~_j^T = q_i R(i - j) k_j^T``: the score depends
    on the positions only through the offset ``Delta = i - j``.

    ``model``: a rotary ``HookedTransformer``, or its ``HookedTransformerConfig`` (for a
    rotation with no model, as chapter 5 compares it with the sinusoidal shift).
    ``offsets``: an int or a sequence of ints. Returns ``[n_offsets, d_head, d_head]`` (or
    ``[d_head, d_head]`` for one int) on the model's device (the CPU for a config), in
    ``dtype`` (default: the model's, or the config's). The angles are computed in float64,
    so in float64 this is the exact rotation to float64 rounding; TransformerLens computes
    its angles ``p theta_m`` in float32, which differ from these by up to about ``p * eps32``
    radians at position ``p`` (its relative error is one float32 rounding or two).

    Taught in chapter 5 (Positional encoding), used in chapters 6-8 and 18.
    """
    cfg = getattr(model, "cfg", model)
    _require_plain_rotary(cfg, "rotary_rotation")
    if hasattr(model, "cfg"):
        weight = model.embed.W_E  # one tensor, for the model's device and dtype
        device, default = weight.device, weight.dtype
    else:
        device, default = torch.device("cpu"), cfg.dtype
    one = isinstance(offsets, int) and not isinstance(offsets, bool)
    try:
        delta = torch.as_tensor([offsets] if one else list(offsets), dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        delta = None
    if delta is None or delta.ndim != 1 or delta.numel() == 0 or (delta != delta.round()).any():
        raise ValueError("rotary_rotation: offsets must be an int or a non-empty sequence of "
                         f"ints, got {offsets!r}")
    r, half = cfg.rotary_dim, cfg.rotary_dim // 2
    theta = cfg.rotary_base ** (-torch.arange(half, dtype=torch.float64) * 2 / r)  # [half]
    angle = delta[:, None] * theta[None, :]  # [n_offsets, half]
    cos, sin = torch.cos(angle), torch.sin(angle)
    first = torch.arange(half) * 2 if cfg.rotary_adjacent_pairs else torch.arange(half)
    second = first + 1 if cfg.rotary_adjacent_pairs else first + half
    R = torch.eye(cfg.d_head, dtype=torch.float64).repeat(len(delta), 1, 1)
    R[:, first, first], R[:, second, second] = cos, cos
    R[:, first, second], R[:, second, first] = sin, -sin
    R = R.to(device=device, dtype=dtype or default)
    return R[0] if one else R


def rotary_qk(model: HookedTransformer, layer: int | Int[torch.Tensor, ""], head: int | Int[torch.Tensor, ""], offsets: int | Sequence[int]) -> FactoredMatrix:
    """The QK circuit of a rotary head at each offset: ``W_QK(Delta) = W_Q R_Delta W_K^T``.

    Equation (row vectors): a query residual ``x_i`` scores a key residual ``x_j`` at
    ``x_i W_Q R_{i-j} W_K^T x_j^T / sqrt(d_head)`` (biases left out, as everywhere in this
    module; Llama-style models have none). One bilinear form per offset, each of rank <=
    d_head; offset 0 is :func:`qk_circuit`. Under grouped-query attention ``W_K`` is the key
    head the query head shares with its group (``head // (n_heads / n_key_value_heads)``).
    Shapes: ``offsets`` an int or a sequence of n ints; returns a ``FactoredMatrix``
    ``[n, d_model, d_model]`` (``[d_model, d_model]`` for one int) with factors
    ``A = W_Q R_Delta`` [n, d_model, d_head] and ``B = W_K^T`` [n, d_head, d_model].

    Taught in chapter 5 (Positional encoding) and chapter 6 (Attention).
    """
    _require_plain_rotary(model.cfg, "rotary_qk")
    if head is None:
        raise ValueError("rotary_qk: give one head (an int); the circuit differs for every offset")
    W_Q, W_K = _head_weights(model, "rotary_qk", layer, head, "W_Q", "W_K")
    R = rotary_rotation(model, offsets)
    if R.ndim == 2:
        return FactoredMatrix(W_Q @ R, _T(W_K))
    return FactoredMatrix(W_Q @ R, _T(W_K).expand(R.shape[0], -1, -1))


def _require_plain_rotary(cfg, what: str) -> None:
    if cfg.positional_embedding_type != "rotary":
        raise ValueError(f"{what} needs a rotary model; this one has positional_embedding_type="
                         f"{cfg.positional_embedding_type!r}")
    variants = [name for name in ("use_NTK_by_parts_rope", "use_yarn_rope", "use_dynamic_ntk_rope")
                if getattr(cfg, name, False)]
    if variants or getattr(cfg, "rotary_scaling_factor", 1.0) != 1.0:
        raise NotImplementedError(f"{what}: rescaled RoPE ({variants or 'rotary_scaling_factor'}) "
                                  "changes the angles; only plain RoPE (SmolLM2, Llama 2) is supported")
    if cfg.rotary_dim is None or cfg.rotary_dim % 2 or cfg.rotary_dim > cfg.d_head:
        raise ValueError(f"{what}: rotary_dim must be even and at most d_head, got {cfg.rotary_dim}")
