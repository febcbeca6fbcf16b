"""Input validation shared by every kernel: clear errors instead of deep torch tracebacks.

Each function raises ``ValueError`` (or ``TypeError``) with a message that names the
problem and the expected value, so a student who passes the wrong thing learns what.
"""

from __future__ import annotations

from typing import Iterable

import torch


def check_layer_head(model, layer: int, head: int | None = None) -> None:
    """Raise if ``layer`` (and ``head``, when given) is out of range for ``model``."""
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    if not isinstance(layer, int) or isinstance(layer, bool):
        raise TypeError(f"layer must be an int, got {type(layer).__name__}")
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer} is out of range: this model has {n_layers} layer(s), 0..{n_layers - 1}")
    if head is not None:
        if not isinstance(head, int) or isinstance(head, bool):
            raise TypeError(f"head must be an int or None, got {type(head).__name__}")
        if not 0 <= head < n_heads:
            raise ValueError(f"head {head} is out of range: layer {layer} has {n_heads} heads, 0..{n_heads - 1}")


def check_heads(model, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Validate a list of ``(layer, head)`` pairs and return it as a list."""
    out = []
    for item in heads:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"heads must be (layer, head) pairs, got {item!r}")
        check_layer_head(model, *item)
        out.append(item)
    return out


def require_attn_only(model, what: str) -> None:
    """Raise if ``model`` has MLPs or normalisation, which ``what`` cannot handle exactly."""
    cfg = model.cfg
    if not cfg.attn_only:
        raise ValueError(
            f"{what} needs an attention-only model (cfg.attn_only=True); this model has MLPs, "
            "whose nonlinearity breaks the exact path expansion. Use circuitbook.models.attn_only(...) "
            "or a zoo model such as load('toy-2l')."
        )
    if cfg.normalization_type not in (None,):
        raise ValueError(
            f"{what} needs a model without LayerNorm (cfg.normalization_type=None); this model has "
            f"normalization_type={cfg.normalization_type!r}. LayerNorm divides by a data-dependent "
            "scale, so the path expansion is no longer a sum of fixed linear maps."
        )


def check_tokens(model, tokens: torch.Tensor) -> torch.Tensor:
    """Return ``tokens`` as a [batch, pos] long tensor on the model's device, or raise."""
    if not isinstance(tokens, torch.Tensor):
        raise TypeError(f"tokens must be a torch.Tensor of token ids, got {type(tokens).__name__}")
    if tokens.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8):
        raise TypeError(f"tokens must be integer token ids, got dtype {tokens.dtype}")
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2:
        raise ValueError(f"tokens must have shape [batch, pos] or [pos], got {tuple(tokens.shape)}")
    n_ctx, d_vocab = model.cfg.n_ctx, model.cfg.d_vocab
    if tokens.shape[1] > n_ctx:
        raise ValueError(f"sequence length {tokens.shape[1]} is longer than the model's n_ctx={n_ctx}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= d_vocab):
        raise ValueError(
            f"token ids must lie in 0..{d_vocab - 1} (d_vocab={d_vocab}); got min {int(tokens.min())}, "
            f"max {int(tokens.max())}"
        )
    device = model_device(model)
    return tokens.to(device=device, dtype=torch.long)


def model_device(model) -> torch.device:
    return next(model.parameters()).device


def check_model_device_dtype(model, what: str) -> None:
    """Raise if ``model``'s weights are not all on one device with one floating dtype.

    Kernels stack weights across layers (``model.W_Q`` etc.), which would otherwise fail with
    a deep torch error for a half-moved or half-cast model.
    """
    params = [(name, p) for name, p in model.named_parameters() if p.is_floating_point()]
    if not params:
        return
    name0, p0 = params[0]
    for name, p in params[1:]:
        if p.device != p0.device:
            raise ValueError(
                f"{what} needs every weight on one device: {name} is on {p.device} but {name0} is on "
                f"{p0.device}; move the model with model.to(device)"
            )
        if p.dtype != p0.dtype:
            raise TypeError(
                f"{what} needs every weight in one dtype: {name} has {p.dtype} but {name0} has "
                f"{p0.dtype}; cast the model with model.to(dtype)"
            )
