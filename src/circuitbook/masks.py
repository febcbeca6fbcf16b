"""Attention masks of the encoder-decoder: the causal mask and the target mask (chapter 6).

Both live here, below ``data`` and ``models``, so that the toy-translation ``Batch``
(``circuitbook.data.translation``) and the model (``circuitbook.models.encoder_decoder``)
build their masks from one definition without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:  # annotations only (they are postponed)
    from jaxtyping import Bool, Int


def subsequent_mask(size: int, *, device: str | torch.device | None = None) -> Bool[torch.Tensor, "1 size size"]:
    """Causal mask [1, size, size] (bool): entry (i, j) is True iff j <= i.

    Query position i may attend to key positions 0..i only, so the decoder cannot read the
    token it is asked to predict. The mask is created on ``device`` (CPU by default).
    Taught in chapter 6.
    """
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int, got {size!r}")
    return torch.tril(torch.ones(1, size, size, dtype=torch.bool, device=device))


def make_std_mask(tgt: Int[torch.Tensor, "batch tgt"], pad: int) -> Bool[torch.Tensor, "batch tgt tgt"]:
    """Target mask [batch, tgt, tgt]: key is not padding AND key position <= query position.

    Equation: ``mask[b, i, j] = (tgt[b, j] != pad) and (j <= i)``, built on ``tgt``'s device.
    Shapes: ``tgt`` [batch, tgt] token ids. Taught in chapter 6.
    """
    if not isinstance(tgt, torch.Tensor) or tgt.ndim != 2:
        raise ValueError(f"tgt must be a [batch, tgt] tensor of token ids, got {getattr(tgt, 'shape', type(tgt))}")
    return (tgt != pad).unsqueeze(-2) & subsequent_mask(tgt.size(-1), device=tgt.device)
