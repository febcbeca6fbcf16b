"""Recording a text model's training: loss by context position, ICL score, head scores (chapter 19).

``TextMetrics`` is a ``train_lm`` callback for the zoo's text models (``text-2l`` and its
variants). Every ``every`` steps it measures, on a fixed held-out set of plain text windows,
the mean loss at every context position; from those the held-out loss and Olsson et al.'s
in-context-learning score (:func:`circuitbook.train.phases.icl_score_from_positions`); and
every head's induction and previous-token score (``circuitbook.heads``), on repeated random
tokens (as for the toy models) and on held-out text repeated once (:func:`repeated_text`).
Text repeats common tokens within one copy, so an induction head's attention splits between
several earlier matches and its text score is lower than its random-token score. At the steps listed in
``checkpoints`` it keeps a float16 copy of the weights.

Chapter 19 (and the induction module's framework page) scores a model's checkpoints on every
held-out window (:func:`heldout_windows`): the losses by position (:func:`row_position_losses`)
give one ICL score per window (:func:`row_icl_scores`, bands from :func:`icl_bands`).
"""

from __future__ import annotations

import torch

from circuitbook.heads import induction_and_prev_token_scores, induction_scores, prev_token_scores
from circuitbook.icl import icl_score_from_losses
from circuitbook.loss import per_token_loss
from circuitbook.train.lm import HistoryRecorder
from circuitbook.train.phases import icl_score_from_positions


def heldout_windows(ids: torch.Tensor, seq_len: int, rows: int | None = None) -> torch.Tensor:
    """The first ``rows`` non-overlapping ``seq_len``-token windows of ``ids``: [rows, seq_len].

    ``rows=None``: every whole window, ``len(ids) // seq_len`` of them (chapter 19 scores a
    text model on all the windows of its held-out play).
    """
    if rows is None:
        rows = len(ids) // seq_len
    if rows * seq_len > len(ids):
        raise ValueError(f"{rows} windows of {seq_len} tokens need {rows * seq_len} ids, got {len(ids)}")
    return ids[: rows * seq_len].reshape(rows, seq_len).clone()


def repeated_text(heldout: torch.Tensor, length: int, rows: int) -> torch.Tensor:
    """``[w, w]`` for the first ``length`` tokens ``w`` of each of the first ``rows`` windows:
    [rows, 2 * length], the input of the text-based induction and previous-token scores."""
    w = heldout[:rows, :length]
    return torch.cat([w, w], dim=1)


def row_position_losses(model, tokens: torch.Tensor, *, chunk: int = 64) -> torch.Tensor:
    """Next-token loss at each position of each row, in float64 on the CPU: [rows, pos - 1].

    Entry ``[b, t]`` is ``-log p(tokens[b, t + 1] | tokens[b, :t + 1])`` (see ``per_token_loss``);
    rows are run ``chunk`` at a time. One row per document lets a bootstrap over documents put
    an interval on any statistic of the curve (chapter 19).
    """
    device = next(model.parameters()).device
    parts = []
    with torch.no_grad():
        for part in tokens.split(chunk):
            part = part.to(device)
            parts.append(per_token_loss(model(part, return_type="logits"), part).double().cpu())
    return torch.cat(parts)


def icl_bands(data: dict) -> dict[str, tuple[int, int]]:
    """A text recipe's two ICL bands, ``{"early": (lo, hi), "late": (lo, hi)}`` (tokens
    ``lo..hi-1``), from its ``data`` settings ``icl_early`` and ``icl_late``: the keyword
    arguments of :func:`row_icl_scores` and
    :func:`circuitbook.train.phases.icl_score_from_positions`."""
    return dict(early=tuple(data["icl_early"]), late=tuple(data["icl_late"]))


def row_icl_scores(losses: torch.Tensor, *, early: tuple[int, int], late: tuple[int, int]) -> torch.Tensor:
    """The ICL score of each row, from its losses by position: [rows], float64.

    ``losses`` is [rows, pos - 1] as :func:`row_position_losses` returns it; row ``b``'s score
    is ``icl_score_from_positions(losses[b], early=early, late=late)``: its mean loss on the
    late band minus on the early band (negative: a gain from context). One score per held-out
    window, so a bootstrap over the windows (``circuitbook.book.bootstrap_means``) puts an
    interval on the mean score or on its change between two checkpoints (chapter 19).
    """
    if losses.ndim != 2:
        raise ValueError(f"losses must be [rows, positions], got shape {tuple(losses.shape)}")
    # the ICL kernel takes the whole batch at once: each row's score is the one
    # icl_score_from_positions gives it, without a Python loop over the rows
    return icl_score_from_losses(losses.double(), early, late)


def position_loss(model, tokens: torch.Tensor, *, chunk: int = 64) -> torch.Tensor:
    """Mean next-token loss at each position, averaged over rows: [pos - 1].

    Entry ``t`` is ``mean_b -log p(tokens[b, t + 1] | tokens[b, :t + 1])``, the row mean of
    :func:`row_position_losses`.
    """
    return row_position_losses(model, tokens, chunk=chunk).mean(0)


class TextMetrics(HistoryRecorder):
    """A ``train_lm`` callback recording the history chapter 19 plots (a dict of lists).

    Per record: ``step``; ``loss`` (mean training loss since the last record);
    ``heldout_loss`` (mean over every position of ``heldout``); ``icl`` (the ICL score with
    bands ``early`` and ``late``); ``position_loss`` (the [pos - 1] curve); ``induction`` and
    ``prev_token`` ([n_layers, n_heads] on ``repeat_batch`` rows of ``repeat_len`` random tokens
    repeated once, seed ``repeat_seed``) and their maxima ``induction_best`` /
    ``prev_token_best``; ``induction_text`` / ``prev_token_text`` and ``induction_text_best`` /
    ``prev_token_text_best``, the same on ``repeated_text(heldout, repeat_len, repeat_batch)``.
    ``self.checkpoints`` maps each step in ``checkpoints`` to a float16 state dict.
    """

    KEYS = ("step", "loss", "heldout_loss", "icl", "induction_best", "prev_token_best",
            "induction", "prev_token", "position_loss",
            "induction_text_best", "prev_token_text_best", "induction_text", "prev_token_text")

    def __init__(self, heldout: torch.Tensor, *, every: int, early: tuple[int, int], late: tuple[int, int],
                 repeat_len: int = 32, repeat_batch: int = 16, repeat_seed: int = 0, checkpoints=()):
        super().__init__(every)
        self.heldout, self.early, self.late = heldout, early, late
        self.repeat = dict(seq_len=repeat_len, batch=repeat_batch, seed=repeat_seed)
        self.repeated = repeated_text(heldout, repeat_len, repeat_batch)
        self.checkpoint_steps = set(checkpoints)
        self.checkpoints: dict[int, dict[str, torch.Tensor]] = {}

    def evaluate(self, model) -> dict:
        """One record (without ``step`` and ``loss``) for ``model`` as it is now."""
        curve = position_loss(model, self.heldout)
        ind, prev = induction_and_prev_token_scores(model, **self.repeat)
        tokens = self.repeated.to(next(model.parameters()).device)
        text_ind, text_prev = induction_scores(model, tokens=tokens), prev_token_scores(model, tokens=tokens)
        return {
            "induction_text": text_ind.tolist(), "prev_token_text": text_prev.tolist(),
            "induction_text_best": float(text_ind.max()), "prev_token_text_best": float(text_prev.max()),
            "heldout_loss": float(curve.mean()),
            "icl": icl_score_from_positions(curve.tolist(), early=self.early, late=self.late),
            "position_loss": curve.tolist(),
            "induction": ind.tolist(), "prev_token": prev.tolist(),
            "induction_best": float(ind.max()), "prev_token_best": float(prev.max()),
        }

    def __call__(self, step: int, model, loss: float | None) -> bool:
        if step in self.checkpoint_steps:
            self.checkpoints[step] = {k: v.detach().to("cpu", torch.float16).clone()
                                      for k, v in model.state_dict().items()}
        return super().__call__(step, model, loss)
