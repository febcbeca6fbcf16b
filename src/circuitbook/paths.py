"""Path expansion: the logits of an attention-only model as a sum over paths (chapter 13).

With no MLPs and no LayerNorm, and with each head's attention pattern ``A`` held at the value
it takes in the real forward pass, every head is a linear map of the residual stream,
``x -> A x W_V W_O`` (plus a constant from its value bias). Multiplying out the residual
stream then writes the logits as an exact sum of *paths*: a source vector (the token
embedding, or an output bias) followed by a chain of heads in strictly increasing layers,
read by the unembedding.

Where every term goes (``LogitAttribution`` fields):

- ``direct``: the embedding straight to the unembedding, ``e W_U + b_U``, where
  ``e = W_E[t]`` (plus ``W_pos[p]`` for ``standard`` positional embeddings; a shortformer model
  adds ``W_pos`` only inside Q and K, so it reaches the logits only through the patterns).
  The unembedding bias ``b_U`` is counted here, once.
- ``heads[l, h]``: first-order paths, embedding -> head (l, h) -> unembedding:
  ``(A e W_V W_O + rowsum(A) b_V W_O) W_U``. The value bias ``b_V W_O`` is the head's own
  output (written whatever it attends to), so it belongs to the head's direct contribution.
- ``virtual[((l1, h1), (l2, h2), ...)]``: paths through two or more heads, each head reading
  the previous one's output through V (K and Q only shape the fixed patterns), e.g.
  ``A2 ((A1 e W_V1 + rowsum(A1) b_V1) W_O1) W_V2 W_O2 W_U``.
- ``bias[l]``: every path that starts at the output bias ``b_O`` of layer l (shared by its
  heads, so no single head owns it): ``b_O W_U`` plus ``b_O`` read by later heads.

The parts sum to ``model(tokens)`` to float rounding. TransformerLens 3.9's
``ActivationCache.decompose_resid`` lists a ``pos_embed`` part even for shortformer models,
whose residual stream never contains it; this expansion does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from circuitbook.validate import check_model_device_dtype, check_tokens, require_attn_only

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer

__all__ = ["LogitAttribution", "logit_attribution", "count_paths", "count_score_terms"]

# The expansion keeps one [batch, pos, d_vocab] tensor per path; refuse to exceed this.
_MAX_BYTES = 2 * 1024**3

Path = tuple[tuple[int, int], ...]


@dataclass
class LogitAttribution:
    """The logits split into paths; see the module docstring for what each field holds.

    Shapes: ``direct`` [batch, pos, d_vocab]; ``heads`` [n_layers, n_heads, batch, pos, d_vocab];
    ``virtual`` maps a path ``((l1, h1), (l2, h2), ...)`` (increasing layers, two or more heads)
    to [batch, pos, d_vocab]; ``bias`` [n_layers, batch, pos, d_vocab].

    Taught in chapter 13 (Path expansion).
    """

    direct: Float[torch.Tensor, "batch pos d_vocab"]
    heads: Float[torch.Tensor, "n_layers n_heads batch pos d_vocab"]
    virtual: dict[Path, Float[torch.Tensor, "batch pos d_vocab"]] = field(default_factory=dict)
    bias: Float[torch.Tensor, "n_layers batch pos d_vocab"] | None = None

    def total(self) -> Float[torch.Tensor, "batch pos d_vocab"]:
        """The sum of every part: equals ``model(tokens)`` [batch, pos, d_vocab]."""
        out = self.direct + self.heads.sum(dim=(0, 1))
        for term in self.virtual.values():
            out = out + term
        if self.bias is not None:
            out = out + self.bias.sum(0)
        return out

    def parts(self) -> list[tuple[str, Float[torch.Tensor, "batch pos d_vocab"]]]:
        """Every part with a label: ``"direct"``, ``"L0H1"``, ``"L0H1->L1H2"``, ``"b_O L0"``."""
        out = [("direct", self.direct)]
        n_layers, n_heads = self.heads.shape[:2]
        out += [(f"L{l}H{h}", self.heads[l, h]) for l in range(n_layers) for h in range(n_heads)]
        out += [("->".join(f"L{l}H{h}" for l, h in path), t) for path, t in self.virtual.items()]
        if self.bias is not None:
            out += [(f"b_O L{l}", self.bias[l]) for l in range(self.bias.shape[0])]
        return out


def _patterns(model, tokens: torch.Tensor) -> list[torch.Tensor]:
    """Attention patterns [batch, head, q, k] of every layer, from one forward pass."""
    patterns: list[torch.Tensor] = [None] * model.cfg.n_layers  # type: ignore[list-item]

    def keep(pattern: torch.Tensor, hook) -> None:
        patterns[hook.layer()] = pattern

    hooks = [(f"blocks.{layer}.attn.hook_pattern", keep) for layer in range(model.cfg.n_layers)]
    with model.hooks(fwd_hooks=hooks):
        model(tokens, return_type=None)
    return patterns


def _n_streams(n_layers: int, n_heads: int) -> int:
    """Paths from the embedding, (1 + n)^L, plus paths from each layer's b_O."""
    return (1 + n_heads) ** n_layers + sum((1 + n_heads) ** (n_layers - 1 - l) for l in range(n_layers))


def logit_attribution(model: HookedTransformer, tokens: Int[torch.Tensor, "batch pos"]) -> LogitAttribution:
    """Split the logits of an attention-only, LayerNorm-free model into a sum over paths.

    Equation (row vectors, patterns ``A^{l,h}`` from the real forward pass): with
    ``e = W_E[t] (+ W_pos)`` and head maps ``h_{l,h}(x) = A^{l,h} x W_V^{l,h} W_O^{l,h}``,
    ``logits = e W_U + b_U + sum_paths h_{lk,hk}(...h_{l1,h1}(s)...) W_U``, summed over every
    source ``s`` (``e``, the value-bias output ``rowsum(A) b_V W_O`` of the first head, or a
    layer's ``b_O``) and every chain of heads in increasing layers. The expansion is exact
    given the patterns; they are the only nonlinear part, and they are not expanded.
    See the module docstring for where each bias goes.
    Shapes: ``tokens`` [batch, pos] (or [pos]); returns a :class:`LogitAttribution` whose parts are
    [batch, pos, d_vocab]; ``len(virtual)`` is ``count_paths(L, n)["total"] - 1 - L * n``.

    Taught in chapter 13 (Path expansion).
    """
    require_attn_only(model, "logit_attribution")
    check_model_device_dtype(model, "logit_attribution")
    cfg = model.cfg
    if getattr(cfg, "output_logits_soft_cap", 0) and cfg.output_logits_soft_cap > 0:
        raise ValueError("logit_attribution cannot expand a model with output_logits_soft_cap (a tanh on the logits)")
    tokens = check_tokens(model, tokens)
    L, H = cfg.n_layers, cfg.n_heads
    batch, pos = tokens.shape
    W_E, W_U = model.W_E, model.W_U
    need = _n_streams(L, H) * batch * pos * (cfg.d_vocab + cfg.d_model) * W_E.element_size()
    if need > _MAX_BYTES:
        raise ValueError(
            f"logit_attribution would hold {_n_streams(L, H)} paths of [{batch}, {pos}, {cfg.d_vocab}] "
            f"(about {need / 1024**3:.1f} GiB); use fewer tokens or a smaller model"
        )

    with torch.no_grad():
        patterns = _patterns(model, tokens)
        e = W_E[tokens]  # [batch, pos, d_model]
        if cfg.positional_embedding_type == "standard":
            e = e + model.W_pos[:pos]
        # Every stream is one path's contribution to the residual stream, keyed by
        # (source, heads): source "embed" or the layer whose b_O starts it.
        keys: list[tuple[object, Path]] = [("embed", ())]
        streams = e[None]  # [n_streams, batch, pos, d_model]
        for layer in range(L):
            attn = model.blocks[layer].attn
            A = patterns[layer].to(streams.dtype)  # [batch, H, q, k]
            v = torch.einsum("sbkm,hmd->sbhkd", streams, attn.W_V)
            z = A[None] @ v  # [n_streams, batch, H, q, d_head]
            out = torch.einsum("sbhqd,hdm->shbqm", z, attn.W_O)  # [n_streams, H, batch, q, d_model]
            # The value bias reaches the output as sum_k A[q, k] b_V W_O whatever the input:
            # it is part of the head's own first-order term (stream 0 is the bare embedding).
            value_bias = torch.einsum("bhq,hd,hdm->hbqm", A.sum(-1), attn.b_V, attn.W_O)
            out[0] += value_bias
            new_keys = [(src, path + ((layer, h),)) for src, path in keys for h in range(H)]
            b_O = attn.b_O.expand(1, batch, pos, -1)
            keys = keys + new_keys + [(layer, ())]
            streams = torch.cat([streams, out.reshape(-1, batch, pos, cfg.d_model), b_O])

        logits = streams @ W_U  # [n_streams, batch, pos, d_vocab]
        direct = logits[0] + model.b_U
        heads = torch.zeros(L, H, batch, pos, cfg.d_vocab, device=logits.device, dtype=logits.dtype)
        bias = torch.zeros(L, batch, pos, cfg.d_vocab, device=logits.device, dtype=logits.dtype)
        virtual: dict[Path, torch.Tensor] = {}
        for (src, path), term in zip(keys[1:], logits[1:]):
            if src != "embed":
                bias[src] += term
            elif len(path) == 1:
                heads[path[0]] = term
            else:
                virtual[path] = term
    return LogitAttribution(direct=direct, heads=heads, virtual=virtual, bias=bias)


def count_paths(n_layers: int, n_heads: int) -> dict[str, int]:
    """Count the paths from the embedding to the logits, by order (number of heads passed).

    Equation: a path picks at most one head in each layer, in increasing layer order, so the
    paths through k heads number ``C(L, k) n^k`` and all paths ``sum_k C(L, k) n^k = (1 + n)^L``
    (binomial theorem). For two layers of n heads: 1 direct + 2n single-head + n^2 virtual.
    Paths that start at an output bias ``b_O`` are not counted (see :func:`logit_attribution`).
    Shapes: returns ``{"direct": 1, "order_1": L n, ..., "order_L": n^L, "total": (1 + n)^L}``;
    the virtual heads (two or more heads) number ``total - direct - order_1``. This is the
    book's one path count (the problem set's ``path_counts`` and the composition builder's
    scaling table read it).

    Taught in chapter 13 (Path expansion).
    """
    _check_shape(n_layers, n_heads)
    counts = {"direct": 1}
    for k in range(1, n_layers + 1):
        counts[f"order_{k}"] = math.comb(n_layers, k) * n_heads**k
    counts["total"] = sum(counts.values())
    return counts



def count_score_terms(n_layers: int, n_heads: int) -> int:
    """Count the terms of every head's attention score when both sides are path-expanded.

    Equation: a head in layer ``l`` scores ``q . k`` with its query input and its key input
    each the sum of the ``(1 + n)^l`` paths that end before layer ``l``
    (:func:`count_paths` of ``l`` layers), so its score splits into ``(1 + n)^(2 l)``
    (query path, key path) terms, and all heads together into ``n sum_{l<L} (1 + n)^(2 l)``.
    Shapes: returns an int.

    Taught in the induction module (the composition builder's scaling table, beside
    :func:`count_paths`).
    """
    _check_shape(n_layers, n_heads)
    return n_heads * sum(count_paths(layer, n_heads)["total"] ** 2 for layer in range(n_layers))


def _check_shape(n_layers, n_heads) -> None:
    for name, value in (("n_layers", n_layers), ("n_heads", n_heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
