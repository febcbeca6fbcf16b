"""The model and tokens the problem set's code checks run on (problems 4, 5 and 7)."""

from __future__ import annotations

import torch


def zoo_model_and_tokens(g: torch.Generator, batch: int, n: int) -> dict:
    """toy-2l (on the default device) and repeated random tokens [batch, 2 n] on its device."""
    from circuitbook.data import repeated_random_tokens
    from circuitbook.models import load
    from circuitbook.validate import model_device

    seed = int(torch.randint(0, 10_000, (1,), generator=g))
    model = load("toy-2l")
    return {"model": model, "tokens": repeated_random_tokens(batch, n, model.cfg.d_vocab, seed=seed,
                                                              device=model_device(model))}
