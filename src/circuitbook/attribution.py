"""Direct logit attribution of a full model with a final norm (chapter 13).

The residual stream that reaches the unembedding is a sum of the parts every layer wrote:
``resid = embed (+ pos_embed) + sum_{l,h} head_{l,h} + sum_l mlp_l + bias`` (``bias`` collects
the attention output biases ``b_O``, which no single head owns; each MLP's ``b_out`` is part of
its output). The final norm is not linear in the stream, but at one
position it is ``x -> x / s * w`` with one positive number ``s`` (``ln_final.hook_scale``: the
RMS, or for LayerNorm the standard deviation after centring). Freezing ``s`` at its value on the
run makes the logit of token ``t`` (or a difference of two logits) an exact sum of parts:

    logit[t] = sum_parts (part / s * w) W_U[:, t] + b_U[t].

Each term is the *direct* effect of one part: what it writes to the stream and the unembedding
reads at once, without passing through a later layer (the first-order terms of chapter 13's
path expansion, with the later layers' inputs left as they were). Freezing ``s`` is a choice:
a part's share of the logit is what it contributes *given* everyone else's norm; removing the
part would also change ``s``.

TransformerLens's ``ActivationCache.get_full_resid_decomposition(apply_ln=True)`` divides by
``s`` (``apply_ln_to_stack``) but does not multiply by the norm's gain ``w``, and
``tokens_to_residual_directions`` is a bare column of ``W_U``: both assume ``w`` has been
folded into ``W_U``. :func:`direct_logit_attribution` multiplies by ``w`` itself, so it is right
for a model loaded without folding (SmolLM2 in this book).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from circuitbook.validate import check_model_device_dtype

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Float, Int
    from transformer_lens import ActivationCache, HookedTransformer

__all__ = ["DirectLogitAttribution", "direct_logit_attribution"]


@dataclass
class DirectLogitAttribution:
    """One logit (or logit difference) split into the direct effects of every part.

    Shapes (``batch`` as in the cache): ``heads`` [n_layers, n_heads, batch]; ``mlps``
    [n_layers, batch]; ``embed``, ``pos_embed`` (zeros for a rotary model, whose stream holds no
    positional embedding), ``bias`` (the attention output biases ``b_O``) and ``unembed_bias``
    (``b_U``, plus a LayerNorm's own bias read by ``W_U``: constants) [batch]. ``abs_size``
    [batch] is ``sum_parts (|part| / s) . |d|``, the size of the numbers the sum accumulates
    (the ``scale`` of a rounding bound, chapter 13).

    Taught in chapter 13 (Path expansion).
    """

    heads: Float[torch.Tensor, "n_layers n_heads batch"]
    mlps: Float[torch.Tensor, "n_layers batch"]
    embed: Float[torch.Tensor, "batch"]
    pos_embed: Float[torch.Tensor, "batch"]
    bias: Float[torch.Tensor, "batch"]
    unembed_bias: Float[torch.Tensor, "batch"]
    abs_size: Float[torch.Tensor, "batch"]

    def total(self) -> Float[torch.Tensor, "batch"]:
        """The sum of every part [batch]: the logit (difference) of the run."""
        return (self.heads.sum((0, 1)) + self.mlps.sum(0) + self.embed + self.pos_embed
                + self.bias + self.unembed_bias)

    def by_layer(self) -> Float[torch.Tensor, "n_layers 2 batch"]:
        """[n_layers, 2, batch]: each layer's attention (its heads summed) and MLP."""
        return torch.stack([self.heads.sum(1), self.mlps], dim=1)


def direct_logit_attribution(model: HookedTransformer, cache: ActivationCache,
                             answer: int | Int[torch.Tensor, "batch"], wrong: int | Int[torch.Tensor, "batch"] | None = None,
                             pos: int = -1) -> DirectLogitAttribution:
    """Split the logit of ``answer`` (minus that of ``wrong``) at position ``pos`` into parts.

    Equation: ``d = w * (W_U[:, answer] - W_U[:, wrong])`` (``w`` the final norm's gain, if it
    has one), and for each part ``p`` of the stream at ``pos``: ``(p / s) . d``, with ``s``
    the final norm's scale on the run (frozen); plus ``b_U[answer] - b_U[wrong]``. The parts
    sum to ``logits[:, pos, answer] - logits[:, pos, wrong]`` up to rounding (module docstring).
    Shapes: ``cache`` from ``model.run_with_cache(tokens)`` with tokens [batch, n_pos];
    ``answer``, ``wrong`` [batch] token ids. Returns a :class:`DirectLogitAttribution`.

    Taught in chapter 13 (Path expansion).
    """
    cfg = model.cfg
    if cfg.positional_embedding_type == "shortformer":
        # TransformerLens 3.9 lists a pos_embed part that a shortformer stream never holds
        raise ValueError("direct_logit_attribution: shortformer models are not supported "
                         "(use circuitbook.paths.logit_attribution)")
    check_model_device_dtype(model, "direct_logit_attribution")
    device = model.W_U.device
    scale = cache["ln_final.hook_scale"] if "ln_final.hook_scale" in cache.cache_dict else None
    if scale is None:
        raise ValueError("direct_logit_attribution needs the final norm's scale in the cache "
                         "(ln_final.hook_scale): run model.run_with_cache(tokens) without a names_filter that drops it")
    if scale.device != device:
        raise ValueError(f"the cache is on {scale.device} but the model on {device}: run run_with_cache on the "
                         "model's device (without device=...), or move the model")
    batch, n_pos = scale.shape[:2]
    if not isinstance(pos, int) or isinstance(pos, bool) or not -n_pos <= pos < n_pos:
        raise ValueError(f"pos must be an int position in [-{n_pos}, {n_pos}), got {pos!r}")
    answer = _token_ids(answer, "answer", batch, model.cfg.d_vocab, device)
    direction = model.W_U[:, answer]  # [d_model, batch]
    unembed_bias = model.b_U[answer]
    if wrong is not None:
        wrong = _token_ids(wrong, "wrong", batch, model.cfg.d_vocab, device)
        direction = direction - model.W_U[:, wrong]
        unembed_bias = unembed_bias - model.b_U[wrong]
    norm = getattr(model, "ln_final", None)
    w, b = getattr(norm, "w", None), getattr(norm, "b", None)
    if b is not None:  # LayerNorm's bias is read by W_U whatever the input: a constant
        unembed_bias = unembed_bias + b @ direction
    if w is not None:
        direction = direction * w[:, None]
    with torch.no_grad():
        stack, labels = cache.get_full_resid_decomposition(
            expand_neurons=False, apply_ln=True, pos_slice=pos, return_labels=True)
        # stack [parts, batch, d_model] (the position sliced away); one number per part and row.
        # TransformerLens makes some parts in the default dtype: read them in the model's.
        stack = stack.to(direction.dtype)
        parts = torch.einsum("pbm,mb->pb", stack, direction)
        abs_size = torch.einsum("pbm,mb->b", stack.abs(), direction.abs())
    index = {label: i for i, label in enumerate(labels)}
    L, H = cfg.n_layers, cfg.n_heads
    heads = torch.stack([torch.stack([parts[index[f"L{l}H{h}"]] for h in range(H)]) for l in range(L)])
    zero = torch.zeros_like(parts[0])
    mlps = (torch.stack([parts[index[f"{l}_mlp_out"]] for l in range(L)]) if not cfg.attn_only
            else torch.zeros(L, *zero.shape, dtype=zero.dtype, device=zero.device))
    return DirectLogitAttribution(
        heads=heads,
        mlps=mlps,
        embed=parts[index["embed"]] if "embed" in index else zero,
        pos_embed=parts[index["pos_embed"]] if "pos_embed" in index else zero,
        bias=parts[index["bias"]] if "bias" in index else zero,
        unembed_bias=unembed_bias.to(parts.dtype),
        abs_size=abs_size,
    )


def _token_ids(ids, name: str, batch: int, d_vocab: int, device: torch.device) -> torch.Tensor:
    """``ids`` (a token id, a list or a tensor) as a [batch] long tensor on ``device``, or raise."""
    ids = ids if isinstance(ids, torch.Tensor) else torch.as_tensor(ids, device="cpu")
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer token ids, got dtype {ids.dtype}")
    ids = ids.reshape(-1)
    if ids.numel() == 1 and batch > 1:
        ids = ids.expand(batch)  # one token for every row
    if ids.numel() != batch:
        raise ValueError(f"{name} must give one token id per row of the cache's batch ({batch}), got {ids.numel()}")
    if int(ids.min()) < 0 or int(ids.max()) >= d_vocab:
        raise ValueError(f"{name} token ids must lie in 0..{d_vocab - 1}, got {ids.tolist()}")
    return ids.to(device=device, dtype=torch.long)
