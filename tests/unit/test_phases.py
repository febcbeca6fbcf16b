"""circuitbook.train.phases on hand-built curves whose answers are known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from circuitbook.train.phases import (
    bump_margin,
    bump_rates,
    bump_window,
    half_rise_step,
    icl_score_from_positions,
    log_position_slope,
    rise_steps,
    sliding_slope,
    window_margins,
    window_slope,
)


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
