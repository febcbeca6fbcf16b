"""circuitbook.train.phases on hand-built curves whose answers are known in closed form, and the
held-out ICL scores of circuitbook.train.text (chapter 19) on hand-built losses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from circuitbook.train.phases import (
    bump_margin,
    bump_rates,
    bump_window,
    checkpoints_around,
    half_rise_step,
    icl_score_from_positions,
    induction_bump,
    log_position_slope,
    rise_steps,
    sliding_slope,
    window_margins,
    window_slope,
)
from circuitbook.train.text import heldout_windows, icl_bands, row_icl_scores


def test_half_rise_step_of_a_logistic_is_its_midpoint():
    steps = list(range(0, 101))
    values = [1 / (1 + math.exp(-(s - 40) / 3)) for s in steps]
    # final value 1 - 2e-9: half of it is reached first at s = 40, where the logistic is 1/2
    assert half_rise_step(steps, values) == 40
    # 1/(1 + e^{-x}) = f  <=>  x = ln(f / (1 - f)): 20 % at 40 - 3 ln 4 = 35.8, 80 % at 44.2
    assert half_rise_step(steps, values, fraction=0.2) == 36
    assert half_rise_step(steps, values, fraction=0.8) == 45
    assert rise_steps(steps, values) == 45 - 36
    assert half_rise_step(steps, [0.0] * 101) is None
    # a score that peaks and falls back: half of the peak (1.0 at step 3), not of the end
    assert half_rise_step([0, 1, 2, 3, 4, 5], [0.0, 0.2, 0.6, 1.0, 0.4, 0.1]) == 2


def test_window_slope_matches_numpy_polyfit():
    rng = np.random.default_rng(0)
    steps = np.arange(0, 200, 5.0)
    values = 3 - 0.01 * steps + rng.normal(0, 0.05, len(steps))
    keep = (steps >= 50) & (steps <= 150)
    want = np.polyfit(steps[keep], values[keep], 1)[0]
    assert window_slope(steps.tolist(), values.tolist(), 50, 150) == pytest.approx(want, rel=1e-9)
    with pytest.raises(ValueError, match="a slope needs 2"):
        window_slope(steps.tolist(), values.tolist(), 51, 54)


def test_bump_rates_of_a_piecewise_linear_loss():
    # slope -0.01 up to step 40, -0.05 from 40 to 60, -0.01 again afterwards
    steps = list(range(0, 101))

    def loss(s):
        return 5 - 0.01 * min(s, 40) - 0.05 * (min(max(s, 40), 60) - 40) - 0.01 * max(s - 60, 0)

    rates = bump_rates(steps, [loss(s) for s in steps], centre=50, width=20)
    assert rates["before"] == pytest.approx(-0.01, abs=1e-12)
    assert rates["during"] == pytest.approx(-0.05, abs=1e-12)
    assert rates["after"] == pytest.approx(-0.01, abs=1e-12)


def test_sliding_slope_of_a_parabola_is_its_derivative():
    # least squares over points symmetric about x fits the slope 2x of s^2 exactly
    steps = list(range(0, 51))
    xs, slopes = sliding_slope(steps, [s * s for s in steps], width=10)
    assert xs == list(range(5, 46))
    assert slopes == pytest.approx([2 * x for x in xs], abs=1e-9)


def test_icl_score_from_positions_by_hand():
    # position_loss[t - 1] is the loss on token t: tokens 1..6 have losses 6, 5, 4, 3, 2, 1
    curve = [6, 5, 4, 3, 2, 1]
    assert icl_score_from_positions(curve, early=(2, 4), late=(5, 7)) == pytest.approx((2 + 1) / 2 - (5 + 4) / 2)
    with pytest.raises(ValueError, match="band"):
        icl_score_from_positions(curve, early=(0, 2), late=(5, 7))


def test_bump_window_is_the_half_rise_and_the_20_80_rise_time():
    steps = list(range(0, 201))
    values = [1 / (1 + math.exp(-(s - 100) / 10)) for s in steps]
    # 20 % at 100 - 10 ln 4 = 86.1 -> step 87; 80 % at 113.9 -> step 114
    assert bump_window(steps, values, min_width=5) == (100, 114 - 87)
    assert bump_window(steps, values, min_width=40) == (100, 40)
    assert bump_window(steps, [0.0] * 201, min_width=5) is None


def test_bump_margin_is_the_gap_to_the_steeper_neighbour():
    # during -3 is steeper than both neighbours (-1, -2): by 1 against the steeper one
    assert bump_margin({"before": -1.0, "during": -3.0, "after": -2.0}) == pytest.approx(1.0)
    # a window that is steeper than one neighbour only fails the criterion: margin < 0
    assert bump_margin({"before": -1.0, "during": -2.0, "after": -3.0}) == pytest.approx(-1.0)


def test_window_margins_of_a_piecewise_linear_loss():
    # slope -0.01 up to step 40, -0.05 from 40 to 60, -0.01 afterwards; windows of 20 steps
    steps = list(range(0, 101))

    def loss(s):
        return 5 - 0.01 * min(s, 40) - 0.05 * (min(max(s, 40), 60) - 40) - 0.01 * max(s - 60, 0)

    centres, margins = window_margins(steps, [loss(s) for s in steps], width=20)
    # the three windows span 60 steps: centres 30 .. 70 fit inside 0 .. 100
    assert centres == list(range(30, 71))
    by_centre = dict(zip(centres, margins))
    # centred on the steep stretch: -0.01 on both sides against -0.05 inside
    assert by_centre[50] == pytest.approx(0.04, abs=1e-12)
    assert max(margins) == pytest.approx(0.04, abs=1e-12) and centres[margins.index(max(margins))] == 50
    # at 30 the steep stretch is the window after: during -0.01, after -0.05; at 70 it is before
    assert by_centre[30] == pytest.approx(-0.04, abs=1e-12)
    assert by_centre[70] == pytest.approx(-0.04, abs=1e-12)
    assert window_margins([], [], width=20) == ([], [])


def test_log_position_slope_of_a_logarithmic_curve():
    # loss(t) = 4 - 0.3 ln t is a straight line of slope -0.3 against ln t
    curve = [4 - 0.3 * math.log(t) for t in range(1, 129)]
    assert log_position_slope(curve, 8, 128) == pytest.approx(-0.3, abs=1e-12)
    # only tokens lo .. hi - 1 count: a curve that is flat there and wild elsewhere has slope 0
    flat = [9.0] * 7 + [2.0] * 100 + [0.0] * 21
    assert log_position_slope(flat, 8, 108) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="tokens lo..hi-1"):
        log_position_slope(curve, 0, 10)
    with pytest.raises(ValueError, match="tokens lo..hi-1"):
        log_position_slope(curve, 8, 130)


# ---------------------------------------------------------------------------------------
# The bump test of one history (induction_bump), shared by chapter 19 and the induction
# module's framework page, on a history whose margins are known in closed form.
#
# For a loss f(s) = (k/3)(s - m)^3 + d s recorded at every integer step, the least-squares
# slope over a window of w + 1 integer points centred on x is f'(x) + k R / 3 = k (x - m)^2
# + d + k R / 3, where R = E[u^4] / E[u^2] over the offsets u = -w/2 .. w/2 (the cubic term's
# projection on u; the u^2 term is even and drops out). R is the same for every window, so
# the margin min(slope(x - w), slope(x + w)) - slope(x) = k [(|e| - w)^2 - e^2] with
# e = x - m, which is k w (w - 2 |x - m|): positive only within w / 2 of m.

K, D, M_BUMP, EVERY = 1.0, -5.0, 50.25, 1   # m a quarter-step off the grid: no ties, no zeros
WIDTH = 4 * EVERY                          # the score jumps in one record: min_width wins


def closed_margin(x):
    return K * WIDTH * (WIDTH - 2 * abs(x - M_BUMP))


def cubic_history(jump=52):
    steps = list(range(0, 101))
    loss = [math.nan] + [K / 3 * (s - M_BUMP) ** 3 + D * s for s in steps[1:]]   # step 0: none
    return {"step": steps, "loss": loss, "induction_best": [0.0] * jump + [1.0] * (101 - jump)}


def test_induction_bump_of_a_cubic_loss_by_hand():
    bump = induction_bump(cubic_history(), every=EVERY)
    assert (bump.centre, bump.width) == (52, 4)
    # every centre whose three windows [x - 6, x + 6] lie inside steps 1..100
    assert bump.all_centres == list(range(7, 95))
    assert bump.all_margins == pytest.approx([closed_margin(x) for x in range(7, 95)], abs=1e-6)
    # margins 4 (4 - 2 |x - 50.25|): 48 -> -2, 49 -> 6, 50 -> 14, 51 -> 10, 52 -> 2, 53 -> -6
    assert [round(closed_margin(x)) for x in range(48, 54)] == [-2, 6, 14, 10, 2, -6]
    # the early descent ends at 49, the first centre with a positive margin
    assert bump.all_centres[bump.first] == 49 and bump.centres == list(range(49, 95))
    assert bump.margins == bump.all_margins[42:]
    assert bump.margin == pytest.approx(2.0, abs=1e-6)
    # R = (16 + 1 + 0 + 1 + 16) / (4 + 1 + 0 + 1 + 4) = 3.4; slope at 52 = 1.75^2 + 3.4 / 3 - 5
    assert bump.rates["during"] == pytest.approx(1.75 ** 2 + 3.4 / 3 - 5, abs=1e-6)
    assert bump.rates["before"] == pytest.approx(2.25 ** 2 + 3.4 / 3 - 5, abs=1e-6)   # at 48
    # within 1 width (|x - 52| <= 4): 49..56 but 52 itself, in step order
    assert bump.others(1) == pytest.approx([6, 14, 10, -6, -14, -22, -30], abs=1e-6)
    # within 3 widths: 49..64 (none before 49 survive the early descent), 15 others
    assert len(bump.others(3)) == 15 and len(bump.others(math.inf)) == len(bump.centres) - 1


def test_induction_bump_ranks_by_hand():
    """The ranks the pages compute from it (chapter 19's null_test, alternative "greater")."""
    from circuitbook.book import Null, null_test

    bump = induction_bump(cubic_history(), every=EVERY)
    # own margin 2 against [6, 14, 10, -6, -14, -22, -30]: 3 above, rank 4 of 8
    near = null_test(bump.margin, Null.draws("within 1 width", bump.others(1)))
    assert (near.rank, near.n + 1, near.p) == (4, 8, 0.5)
    # within 3 widths the 3 above it are the same: rank 4 of 16
    wide = null_test(bump.margin, Null.draws("within 3 widths", bump.others(3)))
    assert (wide.rank, wide.n + 1, wide.p) == (4, 16, 0.25)
    # the window on the bump itself (the score rises at 50) is the largest margin: rank 1
    top = induction_bump(cubic_history(jump=50), every=EVERY)
    assert top.centre == 50 and top.margin == pytest.approx(14.0, abs=1e-6)
    assert null_test(top.margin, Null.draws("near", top.others(3))).rank == 1


def test_induction_bump_refuses_a_history_without_a_window_or_a_bump():
    flat_score = cubic_history()
    flat_score["induction_best"] = [0.0] * 101
    with pytest.raises(ValueError, match="never rises"):
        induction_bump(flat_score, every=EVERY)
    # a convex loss falls ever more slowly: the margin is -2 a w < 0 at every centre
    convex = cubic_history()
    convex["loss"] = [math.nan] + [0.01 * (s - 200) ** 2 for s in range(1, 101)]
    with pytest.raises(ValueError, match="positive bump margin"):
        induction_bump(convex, every=EVERY)


def test_checkpoints_around_a_window():
    # the window [1000, 1200]: a checkpoint on its edge counts as outside it
    assert checkpoints_around([500, 1000, 1500, 2000], 1100, 200) == (1000, 1500)
    assert checkpoints_around([500, 1000, 1500, 2000], 1250, 100) == (1000, 1500)
    assert checkpoints_around([500, 1000, 1200, 2000], 1100, 200) == (1000, 1200)  # both edges
    with pytest.raises(ValueError, match="no checkpoint on both sides"):
        checkpoints_around([500, 1000], 1100, 200)


# ---------------------------------------------------------------------------------------
# The held-out ICL scores (circuitbook.train.text), chapter 19 and the framework page


def test_heldout_windows_all_of_them():
    ids = torch.arange(11)
    assert heldout_windows(ids, 3).tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert heldout_windows(ids, 3, 2).tolist() == [[0, 1, 2], [3, 4, 5]]


def test_row_icl_scores_by_hand():
    losses = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]],
                          dtype=torch.float64)
    # tokens 1-2 are entries 0-1, tokens 5-6 entries 4-5: 5.5 - 1.5 and 1.5 - 5.5
    scores = row_icl_scores(losses, early=(1, 3), late=(5, 7))
    assert scores.dtype == torch.float64 and scores.tolist() == [4.0, -4.0]
    assert icl_bands({"icl_early": [8, 16], "icl_late": [96, 128]}) == {"early": (8, 16), "late": (96, 128)}
    with pytest.raises(ValueError, match="rows, positions"):
        row_icl_scores(losses[0], early=(1, 3), late=(5, 7))
