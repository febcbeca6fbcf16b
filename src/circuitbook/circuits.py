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

Every function takes a ``HookedTransformer`` on any device and returns factors on that device,
in the model's dtype, still attached to autograd (so an exercise may train through them).
Biases (``b_Q, b_K, b_V, b_O, b_U``) are not part of these bilinear forms and are left out.
"""

from __future__ import annotations

import torch
from transformer_lens import FactoredMatrix

from circuitbook.validate import check_layer_head, check_model_device_dtype

__all__ = [
    "qk_circuit",
    "ov_circuit",
    "full_qk_circuit",
    "full_ov_circuit",
    "pos_qk_circuit",
    "direct_path",
]


def _head_weights(model, what: str, layer: int, head: int | None, *names: str) -> list[torch.Tensor]:
    """The named per-head weights of one layer, [n_heads, ...] or [...] for one head."""
    check_model_device_dtype(model, what)
    check_layer_head(model, layer, head)
    attn = model.blocks[layer].attn
    # The block's own properties (not model.W_Q, which stacks every layer) so that asking for
    # one layer costs one layer; grouped-query models expand their shared K/V heads here.
    weights = [getattr(attn, name) for name in names]
    if head is not None:
        weights = [w[head] for w in weights]
    return weights


def _T(x: torch.Tensor) -> torch.Tensor:
    return x.transpose(-2, -1)


def qk_circuit(model, layer: int, head: int | None = None) -> FactoredMatrix:
    """The QK circuit ``W_QK = W_Q W_K^T`` of one head, or of every head in ``layer``.

    Equation (row vectors): ``score(x_q, x_k) = x_q W_Q W_K^T x_k^T / sqrt(d_head)``.
    Shapes: ``W_Q, W_K`` [n_heads, d_model, d_head]; returns a ``FactoredMatrix``
    [n_heads, d_model, d_model] (or [d_model, d_model] when ``head`` is given), rank <= d_head,
    with factors ``A = W_Q``, ``B = W_K^T``.

    Taught in chapter 8 (The OV and QK circuits).
    """
    W_Q, W_K = _head_weights(model, "qk_circuit", layer, head, "W_Q", "W_K")
    return FactoredMatrix(W_Q, _T(W_K))


def ov_circuit(model, layer: int, head: int | None = None) -> FactoredMatrix:
    """The OV circuit ``W_OV = W_V W_O`` of one head, or of every head in ``layer``.

    Equation (row vectors): a head attending fully to key ``x_k`` writes ``x_k W_V W_O``.
    Shapes: ``W_V`` [n_heads, d_model, d_head], ``W_O`` [n_heads, d_head, d_model]; returns a
    ``FactoredMatrix`` [n_heads, d_model, d_model] (or [d_model, d_model]), rank <= d_head.

    Taught in chapter 8 (The OV and QK circuits).
    """
    W_V, W_O = _head_weights(model, "ov_circuit", layer, head, "W_V", "W_O")
    return FactoredMatrix(W_V, W_O)


def full_qk_circuit(model, layer: int, head: int | None = None) -> FactoredMatrix:
    """The full QK circuit ``W_E W_QK W_E^T``: token-on-token attention scores.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_Q W_K^T W_E^T e_j^T``, the score a
    query *token* i gives a key *token* j (before the 1/sqrt(d_head) scale). For shortformer
    models queries and keys also see ``W_pos`` (the score then gains the cross terms with
    ``W_pos``; see :func:`pos_qk_circuit` for the pure positional part), but the token-to-token
    circuit is still ``W_E W_QK W_E^T``. Only layer 0 reads the raw embedding; for later layers
    this is the circuit of the *direct* path into the head.
    Shapes: returns a ``FactoredMatrix`` [n_heads, d_vocab, d_vocab] (or [d_vocab, d_vocab]),
    factors ``A = W_E W_Q`` [.., d_vocab, d_head] and ``B = W_K^T W_E^T`` [.., d_head, d_vocab].

    Taught in chapter 9 (Full circuits).
    """
    W_Q, W_K = _head_weights(model, "full_qk_circuit", layer, head, "W_Q", "W_K")
    W_E = model.W_E
    return FactoredMatrix(W_E @ W_Q, _T(W_K) @ _T(W_E))


def full_ov_circuit(model, layer: int, head: int | None = None) -> FactoredMatrix:
    """The full OV circuit ``W_E W_OV W_U``: how attending to a token changes each logit.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_V W_O W_U e_j^T``, the direct effect
    on logit j of the head attending fully to token i. Its eigenvalues measure copying
    (:func:`circuitbook.heads.copying_scores`).
    Shapes: returns a ``FactoredMatrix`` [n_heads, d_vocab, d_vocab] (or [d_vocab, d_vocab]),
    factors ``A = W_E W_V`` [.., d_vocab, d_head] and ``B = W_O W_U`` [.., d_head, d_vocab].

    Taught in chapter 9 (Full circuits).
    """
    W_V, W_O = _head_weights(model, "full_ov_circuit", layer, head, "W_V", "W_O")
    W_E, W_U = model.W_E, model.W_U
    return FactoredMatrix(W_E @ W_V, W_O @ W_U)


def pos_qk_circuit(model, layer: int, head: int | None = None) -> FactoredMatrix:
    """The positional QK circuit ``W_pos W_QK W_pos^T``: position-on-position attention scores.

    Equation (row vectors): entry ``[p, q]`` is ``W_pos[p] W_Q W_K^T W_pos[q]^T``, the score a
    query at position p gives a key at position q from positions alone. A previous-token head
    has a large band at ``q = p - 1``. Needs a learned ``W_pos`` (``standard`` or
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


def direct_path(model) -> FactoredMatrix:
    """The direct path ``W_E W_U``: the zero-layer model's bigram logits.

    Equation (row vectors): entry ``[i, j]`` is ``e_i W_E W_U e_j^T``, the logit of token j
    read straight off the embedding of token i (add ``b_U`` for the full zero-layer logits).
    Shapes: ``W_E`` [d_vocab, d_model], ``W_U`` [d_model, d_vocab]; returns a
    ``FactoredMatrix`` [d_vocab, d_vocab] of rank <= d_model.

    Taught in chapter 9 (Full circuits).
    """
    check_model_device_dtype(model, "direct_path")
    return FactoredMatrix(model.W_E, model.W_U)
