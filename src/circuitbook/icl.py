"""The in-context-learning score of Olsson et al. (2022): how much better a model predicts a
late token of its context than an early one (chapters 17 and 19, the induction module's
problem 6).

- :func:`icl_score`: their score as they define it, loss on token 500 minus loss on token 50,
  averaged over a batch;
- :func:`icl_scores`: the book's windowed form, one score per sequence, from logits;
- :func:`icl_score_from_losses`: the one kernel both use, from per-token losses (training's
  recorded loss curves go through it too, ``circuitbook.train.phases``).

The losses are :func:`circuitbook.loss.per_token_loss`'s: the book has one next-token loss.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Sequence

import torch

from circuitbook.loss import per_token_loss
from circuitbook.validate import check_model_device_dtype, check_tokens

if TYPE_CHECKING:  # annotations only (they are postponed): importing TransformerLens costs seconds
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer

__all__ = ["icl_score", "icl_scores", "icl_score_from_losses"]


def icl_score(model: HookedTransformer, tokens: Int[torch.Tensor, "batch pos"], *, early: int = 50,
              late: int = 500) -> float:
    """In-context-learning score: loss on token ``late`` minus loss on token ``early``.

    Equation (Olsson et al. 2022): ``mean_b [-log p(t_late | t_<late) + log p(t_early | t_<early)]``,
    the loss of predicting the token at index ``late`` minus that at index ``early``, averaged over
    the batch: :func:`icl_scores` of ``model(tokens)`` with one-token windows, averaged. Negative
    means the model predicts better with more context, i.e. it learns in context. Needs
    ``1 <= early < late < pos``.
    Shapes: ``tokens`` [batch, pos]; returns a Python float.

    Taught in chapter 17 (Induction heads).
    """
    check_model_device_dtype(model, "icl_score")
    tokens = check_tokens(model, tokens)
    pos = tokens.shape[1]
    if not 1 <= early < late:
        raise ValueError(f"icl_score needs 1 <= early < late, got early={early}, late={late}")
    if late >= pos:
        raise ValueError(
            f"sequence too short for icl_score: token index late={late} needs at least {late + 1} "
            f"tokens, got {pos}; pass smaller early/late for short contexts"
        )
    with torch.no_grad():
        return float(icl_scores(model(tokens), tokens, early, late).mean())


def icl_scores(logits: Float[torch.Tensor, "batch pos d_vocab"], tokens: Int[torch.Tensor, "batch pos"],
               early: int | range | tuple[int, int], late: int | range | tuple[int, int]) -> Float[torch.Tensor, "batch"]:
    """Olsson et al.'s in-context-learning score of each sequence, over windows of tokens.

    Equation: ``score_b = mean_{t in late} loss_b(t) - mean_{t in early} loss_b(t)`` with
    ``loss_b(t) = -log softmax(logits[b, t - 1])[tokens[b, t]]``: the logits at position
    ``t - 1`` predict token ``t`` (:func:`icl_score_from_losses` of these losses). A window is
    one token index ``t``, a ``range`` of them, or ``(lo, hi)`` for tokens ``lo..hi-1``; every
    index lies in ``1..pos-1``. Windows (rather than Olsson et al.'s single tokens 50 and 500)
    average out single tokens' noise; one score per sequence lets a bootstrap over sequences
    put an interval on the mean. The losses are :func:`circuitbook.loss.per_token_loss`'s, which
    takes the log-softmax a few positions at a time, so no second [batch, pos, d_vocab] tensor
    is held.
    Shapes: ``logits`` [batch, pos, d_vocab], ``tokens`` [batch, pos] (moved to the logits'
    device); returns [batch] on the logits' device.

    Taught in chapter 17 (Induction heads) and the induction module's problem 6.
    """
    return icl_score_from_losses(per_token_loss(logits, tokens), early, late)


def icl_score_from_losses(losses: Float[torch.Tensor, "... n"] | Sequence[float], early: int | range | tuple[int, int],
                          late: int | range | tuple[int, int]) -> Float[torch.Tensor, "..."]:
    """The in-context-learning score from per-token losses: the book's one ICL kernel.

    Equation: ``mean_{t in late} losses[..., t - 1] - mean_{t in early} losses[..., t - 1]``,
    where ``losses[..., t - 1]`` is the loss of predicting token ``t`` from tokens ``0..t-1``
    (the layout of ``circuitbook.train.per_token_loss``; a training run's mean loss at each
    position, ``circuitbook.train.phases.icl_score_from_positions``, is one such curve).
    Windows as in :func:`icl_scores`: an index ``t``, a ``range``, or ``(lo, hi)`` for
    ``lo..hi-1``; each index in ``1..n`` for ``n`` losses. Negative: later tokens are
    predicted better, the model uses its context.
    Shapes: ``losses`` [..., n] (a tensor or a sequence of floats); returns [...] (0-dim for
    one curve), in the losses' dtype (float64 for a sequence) on their device.

    Taught in chapters 17 (Induction heads) and 19 (the score over training).
    """
    if not isinstance(losses, torch.Tensor):
        losses = torch.as_tensor(losses, dtype=torch.float64, device="cpu")
    if losses.ndim < 1 or not losses.is_floating_point():
        raise ValueError(f"losses must be a floating [..., n] curve, got {losses.dtype} {tuple(losses.shape)}")
    n = losses.shape[-1]
    windows = [_icl_window(w, n, name) for name, w in (("early", early), ("late", late))]
    at = [torch.tensor(w, device=losses.device) - 1 for w in windows]
    return losses[..., at[1]].mean(-1) - losses[..., at[0]].mean(-1)


def _icl_window(window, n: int, name: str) -> list[int]:
    """``window`` (an index, a range, or (lo, hi) for lo..hi-1) as a list of token indices in 1..n."""
    if isinstance(window, range):
        tokens = list(window)
    elif isinstance(window, tuple) and len(window) == 2 and all(_is_int(x) for x in window):
        tokens = list(range(int(window[0]), int(window[1])))
    elif _is_int(window):
        tokens = [int(window)]
    else:
        raise TypeError(f"the {name} window must be a token index, a range or a (lo, hi) pair, got {window!r}")
    if not tokens:
        raise ValueError(f"the {name} window {window!r} holds no token")
    bad = [t for t in tokens if not 1 <= t <= n]
    if bad:
        raise ValueError(f"the {name} window {window!r} reaches token(s) {bad[:3]} outside 1..{n}: token t is "
                         f"predicted from position t - 1, so token 0 has no loss and {n} losses cover 1..{n}")
    return tokens


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)
