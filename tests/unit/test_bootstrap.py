"""circuitbook.book.bootstrap_means: the bootstrap replicates of a mean that chapters 13, 15,
16, 17 and 19 and the induction module's framework page and toy lab put intervals on.

Each replicate is the mean of N values drawn with replacement from the N units on the first
axis; the tests check that against properties a reader can derive by hand (a constant has one
mean, two units give the means 0, 1/2, 1 with binomial frequencies, the replicates' mean and
spread against the standard errors) and against the indices drawn as the pages drew them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from circuitbook.book import bootstrap_means


def test_replicates_are_the_means_of_the_drawn_units():
    values = torch.tensor([0.5, -1.0, 2.0, 4.0, 3.25], dtype=torch.float64)
    boot = bootstrap_means(values, n_boot=50, seed=3)
    # the indices the pages drew: randint(0, N, (n_boot, N)) from a generator seeded with seed
    idx = torch.randint(0, 5, (50, 5), generator=torch.Generator().manual_seed(3))
    for b in range(50):
        want = math.fsum(values[i].item() for i in idx[b]) / 5
        assert boot[b].item() == pytest.approx(want, rel=1e-15, abs=1e-15)
    assert boot.shape == (50,) and boot.dtype == torch.float64
    # each replicate is a mean of the values, so it lies within their range
    assert boot.min() >= values.min() and boot.max() <= values.max()


def test_a_constant_has_every_replicate_equal_to_it():
    assert torch.equal(bootstrap_means(torch.full((8,), 0.25)), torch.full((2000,), 0.25))
    # 0.1 is not exact in binary: equal up to the rounding of a sum of 7 terms
    boot = bootstrap_means(torch.full((7,), 0.1, dtype=torch.float64), n_boot=100)
    assert torch.allclose(boot, torch.full((100,), 0.1, dtype=torch.float64), rtol=8 * 2 ** -52, atol=0)


def test_two_dimensional_values_average_over_the_first_axis_only():
    v = torch.randn(30, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    values = torch.stack([v, 2 * v, torch.ones(30, dtype=torch.float64)], 1)     # [30, 3]
    boot = bootstrap_means(values, n_boot=500, seed=7)
    assert boot.shape == (500, 3)
    # the same units for every column: doubling is exact, a constant column stays constant
    assert torch.allclose(boot[:, 1], 2 * boot[:, 0], rtol=1e-14, atol=1e-14)
    assert torch.allclose(boot[:, 2], torch.ones(500, dtype=torch.float64), rtol=1e-14, atol=0)
    # and each column is the bootstrap of that column alone, with the same seed
    assert torch.allclose(boot[:, 0], bootstrap_means(v, n_boot=500, seed=7), rtol=1e-14, atol=1e-14)
    # trailing axes are kept: [N, 2, 4] -> [n_boot, 2, 4]
    assert bootstrap_means(torch.zeros(6, 2, 4), n_boot=10).shape == (10, 2, 4)


def test_the_seed_fixes_the_replicates():
    values = torch.randn(40, generator=torch.Generator().manual_seed(2))
    assert torch.equal(bootstrap_means(values, seed=5), bootstrap_means(values, seed=5))
    assert not torch.equal(bootstrap_means(values, seed=5), bootstrap_means(values, seed=6))
    assert torch.equal(bootstrap_means(values), bootstrap_means(values, 2000, 0))   # the defaults


def test_two_units_give_binomial_means():
    # N = 2 units 0 and 1: a replicate is (number of 1s drawn) / 2, Binomial(2, 1/2) / 2,
    # so 0, 1/2 and 1 with probabilities 1/4, 1/2, 1/4
    n_boot = 40_000
    boot = bootstrap_means(torch.tensor([0.0, 1.0]), n_boot=n_boot, seed=11)
    assert set(boot.tolist()) == {0.0, 0.5, 1.0}
    for level, prob in ((0.0, 0.25), (0.5, 0.5), (1.0, 0.25)):
        share = (boot == level).double().mean().item()
        assert abs(share - prob) < 5 * math.sqrt(prob * (1 - prob) / n_boot)   # 5 standard errors


def test_replicates_centre_on_the_mean_with_the_standard_error_as_spread():
    values = torch.tensor(np.random.default_rng(0).exponential(size=50))   # skewed on purpose
    n, n_boot = len(values), 20_000
    boot = bootstrap_means(values, n_boot=n_boot, seed=0)
    # a replicate has mean x_bar and variance s^2 / N, s^2 the values' variance with 1 / N
    # (resampling draws from the empirical distribution), so the replicates' mean is within
    # 5 of its standard errors, s / sqrt(N n_boot), of x_bar
    s = values.std(unbiased=False).item()
    assert abs(boot.mean().item() - values.mean().item()) < 5 * s / math.sqrt(n * n_boot)
    # and their standard deviation is s / sqrt(N), to a relative error of about
    # sqrt((kurtosis - 1) / (4 n_boot)) for a sample sd; 5 of those, with the replicates'
    # kurtosis near 3 (a mean of 50): 5 sqrt(2 / (4 n_boot)) = 0.025
    assert boot.std().item() == pytest.approx(s / math.sqrt(n), rel=5 * math.sqrt(2 / (4 * n_boot)))


@pytest.mark.parametrize("values, n_boot, error, match", [
    (torch.tensor([]), 2000, ValueError, "at least one unit"),
    (torch.tensor(1.0), 2000, ValueError, "at least one unit"),
    ([1.0, 2.0], 2000, TypeError, "torch.Tensor"),
    (np.array([1.0, 2.0]), 2000, TypeError, "torch.Tensor"),
    (torch.tensor([1, 2, 3]), 2000, TypeError, "floating point"),
    (torch.tensor([1.0, 2.0]), 0, ValueError, "n_boot must be an int >= 1"),
    (torch.tensor([1.0, 2.0]), -5, ValueError, "n_boot must be an int >= 1"),
    (torch.tensor([1.0, 2.0]), 2.5, ValueError, "n_boot must be an int >= 1"),
    (torch.tensor([1.0, 2.0]), True, ValueError, "n_boot must be an int >= 1"),
])
def test_bad_input_is_refused_with_a_clear_error(values, n_boot, error, match):
    with pytest.raises(error, match=match):
        bootstrap_means(values, n_boot=n_boot)


def test_complex_values_resample_real_and_imaginary_parts_together():
    # a unit is one complex number: its two parts are drawn together, so each replicate's real
    # part is the bootstrap of the real parts with the same indices, and the same for the imaginary
    values = torch.tensor([1 + 2j, -3 + 0.5j, 0.25 - 1j, 2 + 2j], dtype=torch.complex128)
    boot = bootstrap_means(values, n_boot=300, seed=7)
    assert boot.dtype == torch.complex128 and boot.shape == (300,)
    # a mean of 4 float64 numbers of size <= 3, summed in any order: 4 roundings of eps * 3
    tol = 4 * torch.finfo(torch.float64).eps * values.abs().max().item()
    for part in ("real", "imag"):
        alone = bootstrap_means(getattr(values, part).contiguous(), n_boot=300, seed=7)
        assert (getattr(boot, part) - alone).abs().max() <= tol, part
