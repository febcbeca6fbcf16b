"""The next-token loss: the book's one definition, below everything that reads a loss.

Training (``circuitbook.train``), the patching metric (``circuitbook.patching.mean_loss``), the
in-context-learning score (``circuitbook.icl``) and the problem set's checks all call
:func:`per_token_loss`, so there is one place where "the loss of predicting token t + 1" is
defined and one place where its memory cost is handled.

TransformerLens has the same quantity (``transformer_lens.utils.lm_cross_entropy_loss(...,
per_token=True)``, which the unit tests compare with); ours adds what the book needs of it:
a subset of prediction positions (patching reads a few positions of long SmolLM2 contexts),
a log-softmax taken a few positions at a time in at least float32 (a [batch, pos, 49,152]
float32 copy of SmolLM2's logits would be gigabytes), and errors that name bad input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch

if TYPE_CHECKING:  # annotations only (they are postponed)
    from jaxtyping import Float, Int

__all__ = ["per_token_loss"]

# the log-softmax runs over at most this many logits at a time (16 MB in float32)
_LOG_SOFTMAX_ENTRIES = 2**22


def per_token_loss(logits: Float[torch.Tensor, "batch pos d_vocab"], tokens: Int[torch.Tensor, "batch pos"],
                   positions: Sequence[int] | None = None) -> Float[torch.Tensor, "batch n"]:
    """Next-token loss at each prediction position.

    Equation: ``loss[b, i] = -log softmax(logits[b, p_i])[tokens[b, p_i + 1]]``, where the
    positions ``p_i`` are ``positions`` (default: every position but the last, ``0..pos-2``, so
    that ``loss[b, t]`` is the loss of predicting token ``t + 1``).
    Shapes: ``logits`` [batch, pos, d_vocab] (floating), ``tokens`` [batch, pos] (integer ids,
    moved to the logits' device); returns [batch, len(positions)] (default [batch, pos - 1]) on
    the logits' device, in the logits' dtype promoted to at least float32, with gradients
    where the logits have them.

    Taught in chapter 14 (the zero-layer model's loss) and used in chapters 15-19.
    """
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3 or not logits.is_floating_point():
        raise ValueError(f"per_token_loss: logits must be a floating [batch, pos, d_vocab] tensor, got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)} {tuple(getattr(logits, 'shape', ()))}")
    if not isinstance(tokens, torch.Tensor) or tuple(tokens.shape) != tuple(logits.shape[:2]):
        raise ValueError(f"per_token_loss: tokens must be [batch, pos] = {tuple(logits.shape[:2])} like the "
                         f"logits, got {tuple(getattr(tokens, 'shape', ()))}")
    if tokens.dtype.is_floating_point or tokens.dtype.is_complex or tokens.dtype == torch.bool:
        raise TypeError(f"per_token_loss: tokens must be integer token ids, got dtype {tokens.dtype}")
    batch, pos, vocab = logits.shape
    at = _prediction_positions(positions, pos)
    targets = tokens.to(logits.device)
    # (a meta tensor has no values to check: shapes-only runs skip the range)
    if targets.numel() and not targets.is_meta and (int(targets.min()) < 0 or int(targets.max()) >= vocab):
        raise ValueError(f"per_token_loss: token ids must lie in 0..{vocab - 1} (d_vocab of the logits), got "
                         f"{int(targets.min())}..{int(targets.max())}")
    wide = torch.promote_types(logits.dtype, torch.float32)  # a log-softmax over a vocabulary needs the range
    step = max(1, _LOG_SOFTMAX_ENTRIES // max(1, batch * vocab))
    parts = []
    for a in range(0, len(at), step):
        chunk = at[a:a + step]
        index = torch.tensor(chunk, device=logits.device)
        logp = logits[:, index].to(wide).log_softmax(-1)  # [batch, chunk, d_vocab]
        parts.append(-logp.gather(-1, targets[:, index + 1, None]).squeeze(-1))
    return torch.cat(parts, dim=1)


def _prediction_positions(positions: Sequence[int] | None, pos: int) -> list[int]:
    """The positions as a list of ints in 0..pos-2 (each needs a next token), or a named error."""
    if positions is None:
        if pos < 2:
            raise ValueError(f"per_token_loss: a sequence of {pos} token(s) has no next token to predict")
        return list(range(pos - 1))
    if isinstance(positions, torch.Tensor):
        positions = positions.reshape(-1).tolist()
    try:
        at = [int(p) for p in positions]
    except (TypeError, ValueError):
        raise TypeError(f"per_token_loss: positions must be integers, got {positions!r}") from None
    if not at:
        raise ValueError("per_token_loss: positions is empty (a loss over no position is undefined)")
    bad = [p for p in at if not 0 <= p <= pos - 2]
    if bad:
        raise ValueError(f"per_token_loss: positions {bad[:3]} lie outside 0..{pos - 2}: position p predicts "
                         f"token p + 1, and the last of {pos} positions has none")
    return at
