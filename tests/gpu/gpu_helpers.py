"""Tolerances and comparisons of the GPU suite (``tests/gpu``): device results against CPU float64."""

from __future__ import annotations

import copy
import math

import torch

# Rounding errors of n independent terms add like a random walk: about sqrt(n) * eps relative
# to the largest term (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., sec.
# 3.6: the rule of thumb for the typical error of a sum). The constant covers the inputs' own
# rounding to the dtype (one eps each), a few chained products, and the spread of a random walk
# (8 standard deviations).
MARGIN = 8.0


def tolerance(dtype: torch.dtype, n: int) -> float:
    """Relative tolerance ``MARGIN * sqrt(n) * eps(dtype)`` for results built from length-``n`` sums."""
    return MARGIN * math.sqrt(n) * torch.finfo(dtype).eps


def on(model, device, dtype):
    """A copy of ``model`` on ``device`` in ``dtype`` (the reference stays untouched)."""
    moved = copy.deepcopy(model)
    if hasattr(moved, "cfg"):  # HookedTransformer: .to also updates cfg.device / cfg.dtype
        return moved.to(device, print_details=False).to(dtype, print_details=False)
    return moved.to(device=device, dtype=dtype)


def reference(model):
    """A float64 copy of ``model`` on the CPU."""
    return on(model, torch.device("cpu"), torch.float64)


def assert_close(got, want, *, dtype, n, what, scale=None):
    """``max |got - want| <= tolerance(dtype, n) * scale`` (``scale``: ``max |want|`` by default).

    ``got`` is moved to the CPU in float64 first; ``want`` is the float64 reference.
    """
    got = torch.as_tensor(got).detach().to("cpu", torch.float64)
    want = torch.as_tensor(want).detach().to("cpu", torch.float64)
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} vs reference {tuple(want.shape)}"
    scale = float(want.abs().max()) if scale is None else scale
    err, tol = float((got - want).abs().max()), tolerance(dtype, n) * scale
    assert err <= tol, (f"{what} in {dtype}: max error {err:.3g} exceeds {tol:.3g} "
                        f"(= {MARGIN} * sqrt({n}) * eps * scale {scale:.3g})")
    return err / scale if scale else 0.0


def device_of(model) -> torch.device:
    """The device of ``model``'s weights (with its index: ``cuda:0``, not ``cuda``)."""
    return next(model.parameters()).device


def assert_on(result, device: torch.device, what: str, dtype: torch.dtype | None = None) -> None:
    """Every tensor in ``result`` (nested tuples, lists, dicts, dataclasses) is on ``device``
    (full equality, index included) and, when ``dtype`` is given, every floating one in it."""
    if isinstance(result, torch.Tensor):
        assert result.device == device, f"{what} is on {result.device}, the model on {device}"
        if dtype is not None and result.is_floating_point():
            assert result.dtype == dtype, f"{what} is {result.dtype}, the model {dtype}"
    elif isinstance(result, dict):
        for k, v in result.items():
            assert_on(v, device, f"{what}[{k!r}]", dtype)
    elif isinstance(result, (list, tuple)):
        for i, v in enumerate(result):
            assert_on(v, device, f"{what}[{i}]", dtype)
    elif hasattr(result, "__dataclass_fields__"):
        for k, v in vars(result).items():
            assert_on(v, device, f"{what}.{k}", dtype)
