"""The default device, chosen as TransformerLens chooses it (``transformer_lens.utils.get_device``).

``default_device()`` is CUDA when a CUDA GPU is available, else Apple's MPS only when
``TRANSFORMERLENS_ALLOW_MPS=1`` is set (TransformerLens's opt-in: MPS has known correctness
issues), else the CPU. ``CIRCUITBOOK_DEVICE=cpu`` (or any torch device) overrides the choice,
e.g. to run the unit tests on the CPU of a GPU machine. Loaders and builders (``models.load``, ``models.attn_only``,
``models.pretrained``) use it when no ``device`` is given. Used from chapter 14 on.
"""

from __future__ import annotations

import os

import torch


def default_device() -> torch.device:
    """``$CIRCUITBOOK_DEVICE`` if set; else ``cuda`` if available; ``mps`` if available and
    ``TRANSFORMERLENS_ALLOW_MPS=1``; else ``cpu``."""
    chosen = os.environ.get("CIRCUITBOOK_DEVICE", "")
    if chosen:
        try:
            return torch.device(chosen)
        except (RuntimeError, TypeError):
            raise ValueError(f"CIRCUITBOOK_DEVICE={chosen!r} is not a torch device (use e.g. 'cpu', 'cuda')") from None
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available() and os.environ.get("TRANSFORMERLENS_ALLOW_MPS", "") == "1":
        return torch.device("mps")
    return torch.device("cpu")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device``; ``None`` means :func:`default_device`.

    Raises a ValueError naming the device when it is not a device string torch knows.
    """
    if device is None:
        return default_device()
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"device={device!r} is not a torch device (use e.g. 'cpu', 'cuda', 'cuda:0'): {e}") from None
