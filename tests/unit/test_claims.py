"""circuitbook.book.claim_close: a rounding bound derived from the computation, tested against
float64 references under more than one thread count, so that it is not tuned to this CPU."""

from __future__ import annotations

import pytest
import torch

from circuitbook.book import claim, claim_close, rounding_bound


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
        err = claim_close("float32 matmul equals the float64 one", got, exact, terms=n + 2, scale=scale)
        assert 0 < err <= rounding_bound(n + 2, scale)
    finally:
        torch.set_num_threads(old)


def test_an_error_above_the_bound_fails():
    want = torch.linspace(-1, 1, 101)
    bound = rounding_bound(8, 1.0)
    with pytest.raises(AssertionError, match="claim failed: off by 3 bounds"):
        claim_close("off by 3 bounds", want + 3 * bound, want, terms=8)
    claim_close("off by half a bound", want + 0.5 * bound, want, terms=8)


def test_a_cancelling_difference_needs_the_inputs_scale():
    """x + y - y should be x; with x tiny and y large the error is about eps * |y|, so the
    default scale (the size of the result) is too strict and the inputs' scale is right."""
    x = torch.full((10,), 1e-3)
    y = torch.full((10,), 1e3)
    got = (x + y) - y
    with pytest.raises(AssertionError):
        claim_close("x + y - y = x, result scale", got, x, terms=2)
    claim_close("x + y - y = x, inputs' scale", got, x, terms=2, scale=1e3)


def test_float64_is_held_to_float64_precision():
    want = torch.ones(4, dtype=torch.float64)
    with pytest.raises(AssertionError):
        claim_close("1e-10 is far above float64 rounding", want + 1e-10, want, terms=100)
    # one float32 operand lowers the precision the claim is held to
    claim_close("same error, float32 operand", (want + 1e-10).float(), want, terms=100)


def test_bad_input_is_named():
    with pytest.raises(ValueError, match=r"shapes differ, \(3,\) vs \(4,\)"):
        claim_close("mismatch", torch.zeros(3), torch.zeros(4), terms=1)
    with pytest.raises(ValueError, match="terms must be a positive count"):
        rounding_bound(0, 1.0)


def test_claims_record_their_kind(capsys):
    claim("two is more than one", 2, 2 > 1)
    claim("a + b = b + a", 0.0, 0.0 == 0.0, identity=True)
    out = capsys.readouterr().out
    assert "checked finding: two is more than one" in out
    assert "checked identity: a + b = b + a" in out
    with pytest.raises(AssertionError, match="claim failed: one is more than two"):
        claim("one is more than two", 1, 1 > 2)
