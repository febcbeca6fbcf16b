"""Measuring the induction bump in a training history (chapter 19).

Olsson et al. (2022) saw, in models trained on text, a short window in which the loss
falls faster than the trend around it, the window in which induction heads form. These
functions turn that description into numbers read from a recorded history (``steps`` and
one value per recorded step), so the coincidence can be measured and fail:

- :func:`half_rise_step`: when a score first reaches half its highest value;
- :func:`rise_steps`: the steps it takes to go from one fraction of that value to another;
- :func:`window_slope` / :func:`bump_rates`: the least-squares slope of the loss (nats
  per step) in a window centred on that step and in the windows of equal length just
  before and just after;
- :func:`sliding_slope`: the same slope in a window sliding along the whole history, the
  smoothed derivative of the loss that chapter 19 plots;
- :func:`icl_score_from_positions`: Olsson et al.'s in-context-learning score read from
  the mean loss at each context position;
- :func:`bump_margin` / :func:`window_margins`: by how much a window is steeper than both
  neighbours, at the window picked and at every other centre (the criterion's base rate);
- :func:`induction_bump`: all of that for one recorded history, the bump test of chapter 19
  (the induction window's margin beside the margins of the centres near it);
- :func:`checkpoints_around`: the last checkpoint before a window and the first after it;
- :func:`log_position_slope`: the slope of the loss against the log of the token index.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def _pairs(steps: Sequence[float], values: Sequence[float]) -> list[tuple[float, float]]:
    if len(steps) != len(values):
        raise ValueError(f"steps ({len(steps)}) and values ({len(values)}) differ in length")
    return [(float(s), float(v)) for s, v in zip(steps, values) if v is not None and math.isfinite(v)]


def half_rise_step(steps: Sequence[float], values: Sequence[float], *, fraction: float = 0.5) -> float | None:
    """The first recorded step at which ``values`` reaches ``fraction`` of its highest value.

    ``top = max(values)``; returns the first ``steps[i]`` with ``values[i] >= fraction * top``
    (``None`` if ``top <= 0``). For a score that rises to a plateau, ``top`` is its final
    value; for one that rises and falls back, its peak. For the best induction score of a
    training run, ``fraction=0.5`` is the step at which induction heads are half formed.
    """
    pts = _pairs(steps, values)
    top = max((v for _, v in pts), default=0.0)
    if top <= 0:
        return None
    level = fraction * top
    return next(s for s, v in pts if v >= level)


def rise_steps(steps: Sequence[float], values: Sequence[float], low: float = 0.2, high: float = 0.8) -> float | None:
    """``half_rise_step(.., fraction=high) - half_rise_step(.., fraction=low)``: how long the
    score takes to climb from ``low`` to ``high`` of its highest value (``None`` if that is
    not positive)."""
    a = half_rise_step(steps, values, fraction=low)
    b = half_rise_step(steps, values, fraction=high)
    return None if a is None or b is None else b - a


def window_slope(steps: Sequence[float], values: Sequence[float], start: float, end: float) -> float:
    """Least-squares slope of ``values`` against ``steps`` over records with ``start <= step <= end``.

    ``slope = sum (s - s_mean)(v - v_mean) / sum (s - s_mean)^2``, in units of value per step
    (nats per step for a loss). Needs at least two records in the window.
    """
    pts = [(s, v) for s, v in _pairs(steps, values) if start <= s <= end]
    if len(pts) < 2:
        raise ValueError(f"the window [{start}, {end}] holds {len(pts)} records; a slope needs 2")
    ms = sum(s for s, _ in pts) / len(pts)
    mv = sum(v for _, v in pts) / len(pts)
    den = sum((s - ms) ** 2 for s, _ in pts)
    return sum((s - ms) * (v - mv) for s, v in pts) / den


def bump_rates(steps: Sequence[float], loss: Sequence[float], centre: float, width: float) -> dict[str, float]:
    """The loss's slope in three adjacent windows of length ``width``.

    ``during`` is centred on ``centre`` (``[centre - width/2, centre + width/2]``), ``before``
    and ``after`` are the windows of the same length that end where it starts and start where
    it ends. A bump in Olsson et al.'s sense is ``during < before`` and ``during < after``: the
    loss falls faster (a more negative slope) in the window than on either side of it.
    """
    half = width / 2
    return {
        "before": window_slope(steps, loss, centre - 3 * half, centre - half),
        "during": window_slope(steps, loss, centre - half, centre + half),
        "after": window_slope(steps, loss, centre + half, centre + 3 * half),
    }


def sliding_slope(steps: Sequence[float], values: Sequence[float], width: float) -> tuple[list[float], list[float]]:
    """The smoothed derivative: :func:`window_slope` over ``[s - width/2, s + width/2]`` at each
    recorded step ``s`` whose window lies inside the history. Returns ``(centres, slopes)``."""
    pts = _pairs(steps, values)
    if not pts:
        return [], []
    first, last = pts[0][0], pts[-1][0]
    xs = [s for s, _ in pts if s - width / 2 >= first and s + width / 2 <= last]
    ss, vs = [s for s, _ in pts], [v for _, v in pts]
    return xs, [window_slope(ss, vs, x - width / 2, x + width / 2) for x in xs]


def icl_score_from_positions(
    position_loss: Sequence[float], *, early: tuple[int, int], late: tuple[int, int]
) -> float:
    """Olsson et al.'s in-context-learning score from the mean loss at each position.

    ``position_loss[t - 1]`` is the mean loss of predicting token ``t`` from tokens ``0..t-1``
    (as :func:`circuitbook.train.per_token_loss` lays it out). Olsson et al. take the loss on
    token 500 minus the loss on token 50; for a short context we average over bands of tokens:
    ``mean_{t in [late)} position_loss[t - 1] - mean_{t in [early)} position_loss[t - 1]``, where
    ``early = (lo, hi)`` means tokens ``lo..hi-1``. Negative: later tokens are predicted better,
    the model uses its context. Needs ``1 <= lo < hi <= len(position_loss) + 1`` for both bands.
    Computed by the book's one ICL kernel, :func:`circuitbook.icl.icl_score_from_losses`.
    """
    from circuitbook.icl import icl_score_from_losses

    for name, band in (("early", early), ("late", late)):
        if not (isinstance(band, (tuple, list)) and len(band) == 2):
            raise ValueError(f"{name} must be a band (lo, hi), got {band!r}")
    try:
        return float(icl_score_from_losses([float(v) for v in position_loss], tuple(early), tuple(late)))
    except ValueError as err:
        raise ValueError(f"a band (lo, hi) needs 1 <= lo < hi <= {len(position_loss) + 1}: {err}") from None


def bump_window(steps: Sequence[float], score: Sequence[float], *, min_width: float) -> tuple[float, float] | None:
    """``(centre, width)`` of the window in which a head score forms (chapter 19).

    ``centre = half_rise_step(steps, score)``; ``width = max(rise_steps(steps, score, 0.2, 0.8),
    min_width)``, the time the score takes from 20 % to 80 % of its highest value, but never less
    than ``min_width`` (a slope needs a few records). ``None`` if the score never rises.
    """
    centre, rise = half_rise_step(steps, score), rise_steps(steps, score)
    if centre is None or rise is None:
        return None
    return centre, max(rise, min_width)


def bump_margin(rates: dict[str, float]) -> float:
    """How much faster the loss falls inside the window than in the faster of its neighbours.

    ``margin = min(before, after) - during`` for the slopes of :func:`bump_rates` (nats per
    step). The bump criterion, ``during < before`` and ``during < after``, holds exactly when
    ``margin > 0``; the margin also says by how much, so windows can be ranked (chapter 19).
    """
    return min(rates["before"], rates["after"]) - rates["during"]


def window_margins(steps: Sequence[float], loss: Sequence[float], width: float) -> tuple[list[float], list[float]]:
    """The bump margin at every possible window centre: the criterion's base rate (chapter 19).

    For each recorded step ``c`` whose three windows ``[c - 3 width/2, c + 3 width/2]`` lie
    inside the history, ``bump_margin(bump_rates(steps, loss, c, width))``. Returns
    ``(centres, margins)``. A window picked for a reason (the one in which induction heads
    form) is then read against all windows of the same width: the fraction with ``margin > 0``
    is how often the criterion holds by chance, and the picked window's rank among the
    margins is the stronger statement.
    """
    pts = _pairs(steps, loss)
    if not pts:
        return [], []
    first, last = pts[0][0], pts[-1][0]
    ss, vs = [s for s, _ in pts], [v for _, v in pts]
    centres = [s for s in ss if s - 1.5 * width >= first and s + 1.5 * width <= last]
    return centres, [bump_margin(bump_rates(ss, vs, c, width)) for c in centres]


@dataclass(frozen=True)
class InductionBump:
    """The bump test of one training history (taught in chapter 19): see :func:`induction_bump`.

    ``centre``, ``width``: the induction window (:func:`bump_window`); ``rates``: the loss's
    slopes before, during and after it (:func:`bump_rates`); ``margin``: its bump margin
    (:func:`bump_margin`); ``all_centres``, ``all_margins``: the margin at every centre of the
    history (:func:`window_margins`); ``first``: the index of the first centre whose margin is
    positive, where the early descent ends.
    """

    centre: float
    width: float
    rates: dict[str, float]
    margin: float
    all_centres: list[float]
    all_margins: list[float]
    first: int

    @property
    def centres(self) -> list[float]:
        """The window centres after the early descent: ``all_centres[first:]``."""
        return self.all_centres[self.first:]

    @property
    def margins(self) -> list[float]:
        """Their bump margins: ``all_margins[first:]``."""
        return self.all_margins[self.first:]

    def others(self, near: float) -> list[float]:
        """The margins at the centres after the early descent, other than the induction
        window's own, that lie within ``near`` widths of it (``|x - centre| <= near * width``;
        ``near = math.inf`` keeps them all), in step order: the null the margin is ranked in."""
        reach = near * self.width
        return [m for x, m in zip(self.centres, self.margins) if x != self.centre and abs(x - self.centre) <= reach]


def induction_bump(history: Mapping[str, Sequence[float]], *, every: float) -> InductionBump:
    """The bump test of chapter 19 read from one recorded training history.

    ``history`` holds ``"step"``, ``"loss"`` (the training loss; the first record, step 0,
    has none and is skipped) and ``"induction_best"`` (the best head's induction score), one
    value per record, ``every`` steps apart, as the zoo's text models record them. The
    induction window is ``bump_window(step, induction_best, min_width=4 * every)`` (a slope
    needs a few records), and its bump margin ``min(before, after) - during`` is set beside
    the margins at every other centre of the same width (:func:`window_margins`).

    The loss flattens early in training, and the criterion fails at every centre there, as a
    flattening curve makes it; so the centres are kept from the first at which the margin is
    positive (a rule that reads the margins, not the window picked). The margins shrink as
    the loss flattens, so the centres far from the window are not exchangeable with it:
    :meth:`InductionBump.others` keeps those within a reach of it (chapter 19 uses 3 widths,
    where the three windows of two centres stop overlapping, and prints other reaches).
    Raises ``ValueError`` if the score never rises or no margin is positive.
    """
    steps = history["step"]
    window = bump_window(steps, history["induction_best"], min_width=4 * every)
    if window is None:
        raise ValueError("the induction score never rises: no induction window")
    centre, width = window
    s, loss = steps[1:], history["loss"][1:]       # step 0 has no training loss
    rates = bump_rates(s, loss, centre, width)
    all_centres, all_margins = window_margins(s, loss, width)
    first = next((i for i, m in enumerate(all_margins) if m > 0), None)
    if first is None:
        raise ValueError(f"no window of width {width} has a positive bump margin")
    return InductionBump(centre, width, rates, bump_margin(rates), all_centres, all_margins, first)


def checkpoints_around(steps: Sequence[int], centre: float, width: float) -> tuple[int, int]:
    """``(before, after)``: the last of ``steps`` at or before the window
    ``[centre - width/2, centre + width/2]`` starts, and the first at or after it ends
    (chapter 19 compares a model's checkpoints on either side of its induction window)."""
    before = [s for s in steps if s <= centre - width / 2]
    after = [s for s in steps if s >= centre + width / 2]
    if not before or not after:
        raise ValueError(f"no checkpoint on both sides of the window {centre - width / 2}..{centre + width / 2}: "
                         f"{list(steps)}")
    return max(before), min(after)


def log_position_slope(position_loss: Sequence[float], lo: int, hi: int) -> float:
    """Least-squares slope of the loss against ``ln t`` over tokens ``t = lo .. hi - 1``.

    ``position_loss[t - 1]`` is the mean loss on token ``t`` (as for
    :func:`icl_score_from_positions`). The slope is in nats per e-fold of context: negative
    when later tokens are predicted better, zero for a flat curve. Olsson et al. (2022) plot
    the loss against the log of the token index; a straight line there has this slope.
    Needs ``1 <= lo``, ``hi - lo >= 2`` and ``hi <= len(position_loss) + 1``.
    """
    n = len(position_loss)
    if not (1 <= lo and hi - lo >= 2 and hi <= n + 1):
        raise ValueError(f"tokens lo..hi-1 need 1 <= lo, hi - lo >= 2 and hi <= {n + 1}, got {lo}, {hi}")
    xs = [math.log(t) for t in range(lo, hi)]
    return window_slope(xs, [position_loss[t - 1] for t in range(lo, hi)], xs[0], xs[-1])
