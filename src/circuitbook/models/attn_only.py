"""The attention-only transformer of the framework's toy models (chapters 14-17).

Elhage et al. (2021) study transformers with no MLPs and no LayerNorm, whose positional
embedding is added only where queries and keys are read ("shortformer", Press et al. 2021),
so the residual stream carries token information alone and every path through the model
is a product of fixed matrices. We build them as TransformerLens ``HookedTransformer``s so
that hooks, caches and ``FactoredMatrix`` come for free.

``smeared_keys=True`` adds Olsson et al.'s (2022) architecture perturbation (chapter 19):
each head's key at position j becomes a learned mixture of the keys at j and j - 1, so a
single layer can match on the previous token, and induction no longer needs a
previous-token head in an earlier layer.
"""

from __future__ import annotations

import warnings

import torch
from transformer_lens.hook_points import HookPoint

from circuitbook.devices import resolve_device


def attn_only(
    n_layers: int,
    *,
    d_model: int = 64,
    n_heads: int = 4,
    d_head: int | None = None,
    d_vocab: int = 64,
    n_ctx: int = 64,
    positional: str = "shortformer",
    seed: int | None = 0,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
    smeared_keys: bool = False,
):
    """Build an attention-only ``HookedTransformer`` with no LayerNorm.

    ``positional="shortformer"`` adds ``W_pos`` to the input of Q and K only (the framework's
    toy-model convention); ``"standard"`` adds it to the residual stream as in Vaswani et al.
    ``n_layers=0`` gives the zero-layer model, logits = W_E W_U (plus biases).
    ``device=None`` picks ``circuitbook.devices.default_device()`` (CUDA when available).

    Weights follow TransformerLens's names and shapes: ``W_Q, W_K, W_V`` are
    [n_layers, n_heads, d_model, d_head], ``W_O`` is [n_layers, n_heads, d_head, d_model].

    ``smeared_keys=True`` replaces every layer's ``attn.hook_k`` by a :class:`SmearedKeys`
    hook point with one learned parameter per head (``blocks.{l}.attn.hook_k.alpha``); the
    default (``False``) is the plain TransformerLens model, unchanged.
    """
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    device = resolve_device(device)
    if positional not in ("shortformer", "standard"):
        raise ValueError(f"positional must be 'shortformer' or 'standard', got {positional!r}")
    if n_layers < 0:
        raise ValueError(f"n_layers must be >= 0, got {n_layers}")
    if d_head is None:
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}; pass d_head explicitly")
        d_head = d_model // n_heads
    cfg = HookedTransformerConfig(
        n_layers=n_layers,
        d_model=d_model,
        n_heads=n_heads,
        d_head=d_head,
        d_vocab=d_vocab,
        n_ctx=n_ctx,
        attn_only=True,
        normalization_type=None,
        positional_embedding_type=positional,
        act_fn=None,
        seed=seed,
        device=str(device),
        dtype=dtype,
        default_prepend_bos=False,
    )
    # Built on the CPU whatever the ambient default device (torch.device(...) as a context), so
    # one seed gives the same weights on every device; then moved.
    with warnings.catch_warnings(), torch.device("cpu"):
        warnings.simplefilter("ignore", DeprecationWarning)
        model = HookedTransformer(cfg, move_to_device=False)
        if smeared_keys:
            for block in model.blocks:
                block.attn.add_module("hook_k", SmearedKeys(n_heads, dtype=dtype))  # replaces the plain hook point
            model.setup()  # re-index the hook points, so run_with_cache and hooks see the new ones
    return model.to(device, print_details=False)


class SmearedKeys(HookPoint):
    """Olsson et al.'s smeared keys, as the hook point ``attn.hook_k`` (chapter 19).

    For keys ``k`` [batch, pos, n_heads, d_head] and a learned ``alpha`` [n_heads],
    ``k'[b, j, h] = s_h k[b, j, h] + (1 - s_h) k[b, j - 1, h]`` with ``s_h = sigmoid(alpha_h)``;
    the first position has no predecessor and keeps its own key, ``k'[b, 0] = k[b, 0]``.
    ``alpha`` starts at 0 (an even mixture). Hooks added to this point see ``k'``, and so does
    the attention score ``q . k'``. Values are not smeared.
    """

    def __init__(self, n_heads: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.zeros(n_heads, dtype=dtype))

    def forward(self, k: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.alpha)[:, None]  # [n_heads, 1], broadcast over d_head
        previous = torch.cat([k[:, :1], k[:, :-1]], dim=1)
        return s * k + (1 - s) * previous
