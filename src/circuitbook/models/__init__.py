"""Models of the book: the attention-only builder, the Annotated Transformer's
encoder-decoder, the shipped zoo and pretrained loaders.

``attn_only`` is imported eagerly (everything uses it); the rest load on first use.
"""

from __future__ import annotations

import importlib

from circuitbook.models.attn_only import attn_only

__all__ = ["attn_only", "load", "load_pretrained", "EncoderDecoder", "make_model"]

_LAZY = {
    "load": ("circuitbook.models.zoo", "load"),
    "load_pretrained": ("circuitbook.models.pretrained", "load_pretrained"),
    "EncoderDecoder": ("circuitbook.models.encoder_decoder", "EncoderDecoder"),
    "make_model": ("circuitbook.models.encoder_decoder", "make_model"),
}


def __getattr__(name: str):
    if name in _LAZY:
        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'circuitbook.models' has no attribute {name!r}")
