"""Synthetic data and corpora for the book's toy models (chapters 14-17).

Every generator takes a ``seed`` and returns the same tensors for the same seed.
"""

from __future__ import annotations

import torch


def repeated_random_tokens(
    batch: int,
    seq_len: int,
    d_vocab: int,
    *,
    seed: int = 0,
    prefix: torch.Tensor | None = None,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Uniform random tokens repeated once: ``[r_0 .. r_{n-1}, r_0 .. r_{n-1}]``.

    Returns a LongTensor [batch, 2 * seq_len] (plus ``prefix`` columns at the start when
    given, e.g. a BOS token). On the second copy a model that does induction predicts
    token ``i + 1`` by attending from position ``n + i`` back to position ``i + 1``; a
    model without in-context learning can only guess (loss about ln d_vocab).
    Used by ``circuitbook.heads`` (chapter 17) and the training metrics (chapter 19).
    """
    if batch < 1 or seq_len < 1:
        raise ValueError(f"batch and seq_len must be >= 1, got batch={batch}, seq_len={seq_len}")
    if d_vocab < 2:
        raise ValueError(f"d_vocab must be >= 2, got {d_vocab}")
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(0, d_vocab, (batch, seq_len), generator=g, device="cpu")
    tokens = torch.cat([half, half], dim=1)
    if prefix is not None:
        prefix = torch.as_tensor(prefix, dtype=torch.long, device="cpu").reshape(1, -1).expand(batch, -1)
        tokens = torch.cat([prefix, tokens], dim=1)
    return tokens.to(device)
