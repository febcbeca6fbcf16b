"""Input validation shared by every kernel: clear errors instead of deep torch tracebacks.

Each function raises ``ValueError`` (or ``TypeError``) with a message that names the
problem and the expected value, so a student who passes the wrong thing learns what.
"""

from __future__ import annotations

import numbers

import torch


def check_layer_head(model, layer, head=None) -> tuple[int, int | None]:
    """The one layer/head index validator: ``(layer, head)`` as Python ints, or raise.

    Every public kernel that takes a layer or a head reads it here, so they all accept the
    same things: an int, a numpy integer or a 0-dim integer tensor (what ``argmax`` and
    ``torch.unravel_index`` give). ``head=None`` stays None (the caller means every head).
    A float, a bool or a tensor of several entries is a ``TypeError``; an index outside
    ``0..n_layers - 1`` (``0..n_heads - 1``) a ``ValueError`` that names the valid range.
    """
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    layer = _as_index(layer, "layer")
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer {layer} is out of range: this model has {n_layers} layer(s), "
                         f"valid layers are 0..{n_layers - 1}")
    if head is not None:
        head = _as_index(head, "head")
        if not 0 <= head < n_heads:
            raise ValueError(f"head {head} is out of range: layer {layer} has {n_heads} heads, "
                             f"valid heads are 0..{n_heads - 1}")
    return layer, head


def check_layers(model, layers) -> list[int]:
    """A non-empty sequence of layer indices (each as :func:`check_layer_head` takes it) as a
    list of Python ints, or raise."""
    if isinstance(layers, torch.Tensor):
        layers = layers.reshape(-1).tolist() if layers.ndim == 1 else [layers]
    if isinstance(layers, (str, bytes, dict)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"layers must be a layer index or a sequence of them, got {type(layers).__name__}")
    out = [check_layer_head(model, layer)[0] for layer in layers]
    if not out:
        raise ValueError("layers is empty: give at least one layer index "
                         f"(0..{model.cfg.n_layers - 1})")
    return out


def _as_index(x, what: str) -> int:
    """``x`` as a Python int if it is an integer scalar (int, numpy integer, 0-dim integer tensor)."""
    if isinstance(x, torch.Tensor) and x.ndim == 0 and not x.dtype.is_floating_point \
            and not x.dtype.is_complex and x.dtype != torch.bool:
        return int(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return int(x)
    raise TypeError(f"{what} must be an integer (an int or a 0-dim integer tensor), got {x!r}")


def _is_index(x) -> bool:
    try:
        _as_index(x, "")
        return True
    except TypeError:
        return False


def check_heads(model, heads) -> list[tuple[int, int]]:
    """Validate ``(layer, head)`` pairs and return them as a list of tuples of Python ints.

    Accepts what TransformerLens users pass: one pair given bare (``(1, 4)``, ``[1, 4]``), a list
    of pairs (tuples, lists or 2-element tensors), a [n, 2] integer tensor, or the
    ``(layers, heads)`` pair of index tensors that ``torch.unravel_index(flat, (n_layers,
    n_heads))`` returns. Entries may be ints, numpy integers or 0-dim integer tensors. An empty
    list gives ``[]`` (the caller says whether that is allowed). The one head-pair validator:
    ``heads.ablate`` and ``patching.path_patch`` both read their heads here.
    """
    if isinstance(heads, tuple) and len(heads) == 2 and all(isinstance(t, torch.Tensor) and t.ndim == 1 for t in heads):
        if heads[0].shape != heads[1].shape:
            raise ValueError(f"the (layers, heads) index tensors differ in length: {tuple(heads[0].shape)} vs "
                             f"{tuple(heads[1].shape)}")
        heads = list(zip(heads[0], heads[1]))  # torch.unravel_index's output
    elif isinstance(heads, torch.Tensor):
        if heads.ndim == 1 and heads.shape[0] == 2:
            heads = [heads]
        elif heads.ndim == 2 and heads.shape[1] == 2:
            heads = list(heads)
        else:
            raise ValueError(f"a tensor of heads must have shape [2] or [n, 2] (layer, head), got {tuple(heads.shape)}")
    elif isinstance(heads, (tuple, list)) and len(heads) == 2 and all(_is_index(x) for x in heads):
        heads = [heads]  # one (layer, head) pair given bare
    elif isinstance(heads, (str, bytes, dict)) or not hasattr(heads, "__iter__"):
        raise TypeError(f"heads must be (layer, head) pairs (one pair, a list of pairs or an [n, 2] tensor), "
                        f"got {type(heads).__name__} {heads!r}")
    out = []
    for item in heads:
        if isinstance(item, torch.Tensor) and item.ndim == 1:
            item = tuple(item)
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"heads must be (layer, head) pairs, got {item!r}")
        out.append(check_layer_head(model, item[0], item[1]))
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
