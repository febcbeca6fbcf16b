"""circuitbook.book's three kinds of statement.

identity_close: a rounding bound derived from the computation, tested against float64
references under more than one thread count, so that it is not tuned to this CPU. finding:
the statistic against hand-computed permutation and bootstrap p-values, and the
refusals (no null, a null too small to reach the level, a null that contradicts the
statement)."""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.book import (Null, finding, identity, identity_close, null_test, observation, rounding_bound,
                              student_t_cdf, student_t_quantile)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n", [16, 256, 4096])
def test_float32_products_stay_inside_the_bound(n, threads):
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(n)
        a = torch.randn(64, n, generator=g, dtype=torch.float64)
        b = torch.randn(n, 32, generator=g, dtype=torch.float64)
        exact = a @ b
        got = a.float() @ b.float()
        # inputs rounded to float32 (1 rounding each) and n products summed: n + 2 roundings,
        # each of size at most max|a| max|b| per term
        scale = float(a.abs().max() * b.abs().max())
        identity_close("float32 matmul equals the float64 one", got, exact, terms=n + 2, scale=scale)
        err = float((got.double() - exact).abs().max())
        assert 0 < err <= rounding_bound(n + 2, scale)
    finally:
        torch.set_num_threads(old)


def test_an_error_above_the_bound_fails():
    want = torch.linspace(-1, 1, 101)
    bound = rounding_bound(8, 1.0)
    with pytest.raises(AssertionError, match="identity failed: off by 3 bounds"):
        identity_close("off by 3 bounds", want + 3 * bound, want, terms=8)
    identity_close("off by half a bound", want + 0.5 * bound, want, terms=8)


def test_a_cancelling_difference_needs_the_inputs_scale():
    """x + y - y should be x; with x tiny and y large the error is about eps * |y|, so the
    default scale (the size of the result) is too strict and the inputs' scale is right."""
    x = torch.full((10,), 1e-3)
    y = torch.full((10,), 1e3)
    got = (x + y) - y
    with pytest.raises(AssertionError):
        identity_close("x + y - y = x, result scale", got, x, terms=2)
    identity_close("x + y - y = x, inputs' scale", got, x, terms=2, scale=1e3)


def test_float64_is_held_to_float64_precision():
    want = torch.ones(4, dtype=torch.float64)
    with pytest.raises(AssertionError):
        identity_close("1e-10 is far above float64 rounding", want + 1e-10, want, terms=100)
    # one float32 operand lowers the precision the claim is held to
    identity_close("same error, float32 operand", (want + 1e-10).float(), want, terms=100)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"shapes differ, \(3,\) vs \(4,\)"):
        identity_close("mismatch", torch.zeros(3), torch.zeros(4), terms=1)
    with pytest.raises(ValueError, match="terms must be a positive count"):
        rounding_bound(0, 1.0)


def test_each_kind_prints_its_name(capsys):
    identity("a + b = b + a", 0.0, 0.0 == 0.0)
    observation("a loss", 3.25)
    finding("two is more than the draws", 2.0, null=Null.draws("draws near zero", [0.1 * i for i in range(20)]))
    out = capsys.readouterr().out
    assert "identity: a + b = b + a  [0]" in out
    assert "observation: a loss  [3.25]" in out
    assert "finding: two is more than the draws" in out and "rank 1 of 21" in out
    with pytest.raises(AssertionError, match="identity failed: one is more than two"):
        identity("one is more than two", 1, 1 > 2)


def test_a_finding_without_a_null_is_refused():
    with pytest.raises(ValueError, match="has no null"):
        finding("the score is high", 0.9)


def test_a_null_too_small_to_reach_the_level_is_refused():
    # 19 draws: the smallest permutation p is 1/20 = 0.05, which is not below 0.05
    with pytest.raises(ValueError, match="cannot show p < 0.05.*draw at least 20"):
        finding("above 19 draws", 100.0, null=Null.draws("19 draws", list(range(19))))
    finding("above 20 draws", 100.0, null=Null.draws("20 draws", list(range(20))))
    finding("above 19 draws at a stated 0.1", 100.0, null=Null.draws("19 draws", list(range(19))), alpha=0.1)
    # two-sided, the floor is 2/(n + 1): 39 draws can never reject, so "no effect" would be vacuous
    with pytest.raises(ValueError, match="two-sided permutation p is 2/40.*draw at least 40"):
        finding("no different from 39 draws", 19.0, null=Null.draws("39 draws", list(range(39))),
                alternative="two-sided", expect="no effect")
    finding("beyond 40 draws, either way", 100.0, null=Null.draws("40 draws", list(range(40))),
            alternative="two-sided")


def test_permutation_p_counts_the_draws_at_least_as_extreme():
    draws = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
    # by hand: 7.5 is beaten or tied by 8 and 9, so p = (1 + 2) / 11, rank 3
    t = null_test(7.5, Null.draws("ten", draws))
    assert (t.rank, t.n) == (3, 10) and t.p == pytest.approx(3 / 11)
    # a tie counts against the effect: 9 ties the largest draw, p = (1 + 1) / 11
    assert null_test(9.0, Null.draws("ten", draws)).p == pytest.approx(2 / 11)
    # the other tail, and both: 1.5 is at or above 0 and 1 only
    assert null_test(1.5, Null.draws("ten", draws), alternative="less").p == pytest.approx(3 / 11)
    assert null_test(1.5, Null.draws("ten", draws), alternative="two-sided").p == pytest.approx(6 / 11)
    # z against the draws' mean 4.5 and sample sd sqrt(110 / 12) = 3.0277
    assert t.z == pytest.approx((7.5 - 4.5) / math.sqrt(82.5 / 9))


def test_bootstrap_interval_and_p():
    reps = [i / 1000 - 0.2 for i in range(1001)]  # uniform on [-0.2, 0.8]
    t = null_test(0.3, Null.point("no change", 0.0), boot=reps)
    assert (t.lo, t.hi) == (pytest.approx(-0.175), pytest.approx(0.775))
    # 201 replicates at or below 0 of 1001: p = 202 / 1002
    assert t.p == pytest.approx(202 / 1002)
    with pytest.raises(ValueError, match="needs the effect's bootstrap replicates"):
        null_test(0.3, Null.point("no change", 0.0))


def test_a_finding_raises_when_the_data_contradict_it():
    draws = Null.draws("fifty draws", [float(i) for i in range(50)])
    with pytest.raises(AssertionError, match="finding failed: in the middle.*expected 'effect'"):
        finding("in the middle", 25.0, null=draws)
    finding("in the middle, as stated", 25.0, null=draws, expect="no effect")
    with pytest.raises(AssertionError, match="expected 'no effect'"):
        finding("no effect, said wrongly", 80.0, null=draws, expect="no effect")
    # the direction matters: far below the draws is not "greater"
    with pytest.raises(AssertionError):
        finding("far below, called greater", -10.0, null=draws)
    finding("far below", -10.0, null=draws, alternative="less")


def test_bad_null_input_is_named():
    with pytest.raises(ValueError, match="at least 2 draws"):
        Null.draws("one", [1.0])
    with pytest.raises(ValueError, match="finite"):
        Null.draws("nan", [1.0, float("nan")])
    with pytest.raises(ValueError, match="alternative must be one of"):
        null_test(1.0, DRAWS, alternative="bigger")
    with pytest.raises(TypeError, match="must be a circuitbook.book.Null"):
        null_test(1.0, [0.0, 1.0])
    with pytest.raises(ValueError, match="one number"):
        finding("a vector", torch.ones(3), null=DRAWS)


# --- every null kind against every alternative, by hand -----------------------------------------
# Small inputs whose p-values are counted or looked up by hand, each asymmetric, so that swapping
# any two tails (greater for less, a one-sided p for the two-sided one) changes the number.

# ten draws 0..9. For 7.5: at least as large, 8 and 9 (2 draws); at most as large, 0..7 (8 draws).
DRAWS = Null.draws("ten draws 0..9", [float(i) for i in range(10)])


@pytest.mark.parametrize("value,alternative,p,rank", [
    (7.5, "greater", 3 / 11, 3),     # (1 + 2) / 11
    (7.5, "less", 9 / 11, 9),        # (1 + 8) / 11
    (7.5, "two-sided", 6 / 11, 3),   # 2 min(3, 9) / 11
    (-1.0, "greater", 11 / 11, 11),  # every draw is at least as large
    (-1.0, "less", 1 / 11, 1),       # none is at most as large: the floor 1 / (N + 1)
    (-1.0, "two-sided", 2 / 11, 1),
    (9.0, "greater", 2 / 11, 2),     # a tie counts against the effect, in either tail
    (9.0, "less", 11 / 11, 11),
    (9.0, "two-sided", 4 / 11, 2),
    (4.5, "two-sided", 1.0, 6),      # 2 * 6 / 11 > 1: capped at 1
])
def test_permutation_p_in_every_tail(value, alternative, p, rank):
    t = null_test(value, DRAWS, alternative=alternative)
    assert (t.p, t.rank, t.n) == (pytest.approx(p), rank, 10)
    assert t.z == pytest.approx((value - 4.5) / math.sqrt(82.5 / 9))  # the same z in every tail


# 100 bootstrap replicates against the null value 0: 10 at -0.5, 5 at 0 (ties) and 85 at 1.
# At or below 0: 15, so (1 + 15) / 101; at or above 0: 90, so (1 + 90) / 101.
UP_REPS = [-0.5] * 10 + [0.0] * 5 + [1.0] * 85
DOWN_REPS = [-r for r in UP_REPS]  # the mirror image: the tails trade places


@pytest.mark.parametrize("reps,alternative,p", [
    (UP_REPS, "greater", 16 / 101),
    (UP_REPS, "less", 91 / 101),
    (UP_REPS, "two-sided", 32 / 101),
    (DOWN_REPS, "greater", 91 / 101),
    (DOWN_REPS, "less", 16 / 101),
    (DOWN_REPS, "two-sided", 32 / 101),
    ([0.0] * 100, "two-sided", 1.0),  # every replicate ties the null: capped at 1
])
def test_bootstrap_p_in_every_tail(reps, alternative, p):
    value = sum(reps) / len(reps)
    t = null_test(value, Null.point("no change", 0.0), alternative=alternative, boot=reps)
    assert t.p == pytest.approx(p)
    # the interval does not depend on the tail: the 2.5% and 97.5% quantiles (positions 2.475
    # and 96.525 of the 100 sorted replicates)
    lo, hi = (-0.5, 1.0) if reps is UP_REPS else (-1.0, 0.5) if reps is DOWN_REPS else (0.0, 0.0)
    assert (t.lo, t.hi, t.level) == (pytest.approx(lo), pytest.approx(hi), pytest.approx(0.95))


def test_the_bootstrap_null_value_is_where_the_tails_are_counted():
    """Shifting the null value moves replicates from one tail to the other: against 0.5, the
    replicates at or below it number 10 + 5 = 15 (the -0.5s and 0s), at or above 85 (the 1s)."""
    t = null_test(0.8, Null.point("a half", 0.5), alternative="greater", boot=UP_REPS)
    assert t.p == pytest.approx((1 + 15) / 101)
    t = null_test(0.8, Null.point("a half", 0.5), alternative="less", boot=UP_REPS)
    assert t.p == pytest.approx((1 + 85) / 101)


def test_a_bootstrap_finding_tests_its_own_tail_at_its_own_level():
    # UP_REPS: p = 16/101 = 0.158 for "greater", 91/101 for "less"
    finding("up, at 0.05", 0.5, null=Null.point("zero", 0.0), boot=UP_REPS, expect="no effect")
    finding("up, at a stated 0.2", 0.5, null=Null.point("zero", 0.0), boot=UP_REPS, alpha=0.2)
    finding("up, called less, at 0.2", 0.5, null=Null.point("zero", 0.0), boot=UP_REPS, alpha=0.2,
            alternative="less", expect="no effect")
    finding("down, less, at 0.2", -0.5, null=Null.point("zero", 0.0), boot=DOWN_REPS, alpha=0.2,
            alternative="less")
    with pytest.raises(AssertionError):
        finding("down, called greater, at 0.2", -0.5, null=Null.point("zero", 0.0), boot=DOWN_REPS,
                alpha=0.2)


def test_a_bootstrap_finding_reads_its_own_tail():
    """Chapters 17 and 19 state effects with alternative="less" on bootstrap replicates: a loss
    that drops. 1000 replicates, 3 at or above 0: p = 4 / 1001 in the lower tail, and the
    upper tail's (1 + 1000) / 1001 = 1 cannot be an effect."""
    reps = [-1.0 - i / 1000 for i in range(997)] + [0.0, 0.5, 1.0]
    finding("the loss drops", -1.5, null=Null.point("no change", 0.0), boot=reps, alternative="less")
    assert null_test(-1.5, Null.point("no change", 0.0), boot=reps, alternative="less").p == pytest.approx(4 / 1001)
    with pytest.raises(AssertionError, match="expected 'effect'"):
        finding("the loss rises", -1.5, null=Null.point("no change", 0.0), boot=reps, alternative="greater")
    finding("the loss changes", -1.5, null=Null.point("no change", 0.0), boot=reps, alternative="two-sided")
    # and the mirror image for "greater"
    up = [-r for r in reps]
    finding("the score rises", 1.5, null=Null.point("no change", 0.0), boot=up, alternative="greater")
    with pytest.raises(AssertionError, match="expected 'effect'"):
        finding("the score falls", 1.5, null=Null.point("no change", 0.0), boot=up, alternative="less")


def test_draws_that_are_all_equal_give_an_undefined_z_only_at_their_value():
    flat = Null.draws("constant", [2.0, 2.0, 2.0])
    assert null_test(3.0, flat).z == math.inf and null_test(1.0, flat).z == -math.inf
    assert math.isnan(null_test(2.0, flat).z)
    # the one line the page and the ledger print has no "z = inf": the draws give no scale
    assert "z = " not in null_test(3.0, flat).summary() and "no z" in null_test(3.0, flat).summary()
    assert "z = 0.7" in null_test(3.0, Null.draws("spread", [1.0, 3.0])).summary()  # (3 - 2) / sqrt(2)


def test_the_one_line_summary_writes_p_with_one_relation():
    # p below the printed resolution reads "p < 0.0001", never "p = < 0.0001"
    tiny = null_test(100.0, Null.draws("many", [float(i % 7) for i in range(20000)]))
    assert "p < 0.0001" in tiny.summary() and "p = <" not in tiny.summary()
    some = null_test(3.0, Null.draws("few", [0.0, 1.0, 2.0, 4.0]))  # one draw at or above: p = 2/5
    assert "p = 0.4," in some.summary()
    boot = null_test(1.0, Null.point("zero", 0.0), boot=torch.full((999,), 1.0))
    assert "p = <" not in boot.summary()


def test_a_verdict_of_many_bools_is_refused_with_how_to_reduce_it():
    a = torch.arange(4.0)
    with pytest.raises(ValueError, match=r"one bool, got 4 of them \(shape \(4,\)\).*\.all\(\)"):
        identity("A = B", 0, a == a)
    identity("A = B", 0, (a == a).all())
    identity("one entry", 0, a[:1] == a[:1])  # a one-element tensor is one verdict
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match="one bool, got 2"):
        identity("numpy", 0, np.array([True, True]))


def test_student_t_against_the_cauchy_closed_form_and_the_printed_table():
    # df = 1 is the Cauchy distribution: P(T <= x) = 1/2 + atan(x) / pi exactly
    for x in (-30.0, -2.0, -0.3, 0.0, 0.7, 5.0):
        assert abs(student_t_cdf(x, 1) - (0.5 + math.atan(x) / math.pi)) < 1e-9
    # 97.5th percentiles as printed in standard t tables (4 decimals)
    for df, t in [(1, 12.7062), (7, 2.3646), (15, 2.1314), (33, 2.0345)]:
        assert abs(student_t_quantile(0.975, df) - t) < 5e-5
    assert abs(student_t_quantile(0.025, 7) + 2.3646) < 5e-5  # symmetric
    with pytest.raises(ValueError, match="df"):
        student_t_cdf(1.0, 0)
    with pytest.raises(ValueError, match="q"):
        student_t_quantile(1.0, 7)
