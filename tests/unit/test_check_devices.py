"""The problem set's checks (problems 1-7) make every tensor on the model's device.

No GPU is lent here, so the model goes on PyTorch's ``meta`` device (shapes, no data) and a
recorder watches every operation of a check: one that meets a tensor on the meta device with a
tensor on the CPU (other than a 0-d scalar, which CUDA also accepts) is what raises "Expected
all tensors to be on the same device" on a GPU, e.g. ``gather`` of the logits with indices left
on the CPU. Meta kernels do not check devices themselves (``gather``, ``matmul`` of meta and
CPU tensors pass), hence the recorder. Meta tensors hold no numbers: where a check reads one
(``float()``, ``.item()``, ``torch.equal``) or copies one to the CPU, the recorder hands back a placeholder, so
the check runs to its end; its verdict is meaningless and not looked at, only the devices are. Successive
placeholder numbers differ, so that code which refuses two equal numbers (a patching run whose clean and
corrupted metrics agree) still runs on.

What an operation reports is where the innermost frame of ``circuitbook`` was: the check's own
lines (``checks/ps/``, ``checks/core.py``) must report nothing. tests/gpu/test_checks_cuda.py
runs the same checks on a real GPU where one is lent.
"""

from __future__ import annotations

import traceback
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from circuitbook import checks
from circuitbook.checks import ps

aten = torch.ops.aten
# operations that accept CPU operands beside a CUDA tensor: copies across devices, and
# indexing with CPU indices (moved to the tensor's device by torch itself)
CROSSING = {aten.copy_.default, aten._to_copy.default, aten.index.Tensor, aten.index_put_.default,
            aten.index_put.default, aten._index_put_impl_.default}
OURS = ("circuitbook/checks/ps/", "circuitbook/checks/core.py")


class DeviceRecorder(TorchDispatchMode):
    """Records every operation that mixes meta and CPU tensors, by the innermost circuitbook frame."""

    def __init__(self):
        super().__init__()
        self.mixed: list[tuple[str, str]] = []
        self.numbers = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        devices = {t.device.type for t in tensors if t.dim() > 0 or t.device.type == "meta"}
        if {"meta", "cpu"} <= devices and func not in CROSSING:
            frames = [f for f in traceback.extract_stack() if "/circuitbook/" in f.filename]
            where = f"{frames[-1].filename.split('src/')[-1]}:{frames[-1].lineno}" if frames else "?"
            self.mixed.append((str(func), where))
        if func is aten.equal.default and "meta" in devices:
            return True  # a placeholder: meta tensors hold no values to compare
        if func is aten._local_scalar_dense.default and tensors[0].device.type == "meta":
            if not tensors[0].is_floating_point():
                return 1  # a placeholder for the missing number
            self.numbers += 1  # in (0, 1) and never twice the same in a row
            return 0.25 + (self.numbers % 97) / 200
        if (func is aten._to_copy.default and tensors[0].device.type == "meta"
                and torch.device(kwargs.get("device") or "meta").type == "cpu"):
            return torch.zeros(tensors[0].shape, dtype=kwargs.get("dtype") or tensors[0].dtype)
        return func(*args, **kwargs)


def run_on_meta(monkeypatch, ex_id: str):
    """Run the check of ``ex_id`` on its reference with every model on the meta device."""
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", "meta")  # models.load and attn_only follow it
    ex = checks.get(ex_id)
    recorder = DeviceRecorder()
    with warnings.catch_warnings(), recorder:
        warnings.simplefilter("ignore")
        if ex_id == "ps_p1a":
            ex.check(ex.expected())
        elif ex_id == "ps_p3b":
            ex.check(0.035)
        elif hasattr(ex, "make_inputs"):
            ex.check(ex.reference, seed=0)
        else:
            ex.check(ex.reference)
    return recorder.mixed


@pytest.mark.parametrize("ex_id", ["ps_p1a", "ps_p1b", "ps_p2", "ps_p3", "ps_p3b", "ps_p4", "ps_p5", "ps_p5b",
                                   "ps_p6", "ps_p6b", "ps_p7"])
def test_the_checks_own_tensors_follow_the_model(monkeypatch, ex_id):
    mixed = run_on_meta(monkeypatch, ex_id)
    ours = [m for m in mixed if m[1].startswith(OURS)]
    others = sorted(set(mixed) - set(ours))
    if others:  # the analysis modules' own device handling is another part of issue 29
        print(f"{ex_id}: mixed devices outside the checks: {others}")
    assert not ours, f"{ex_id} mixes CPU tensors with the model's: {sorted(set(ours))}"


def test_the_inputs_a_check_makes_are_on_the_models_device(monkeypatch):
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", "meta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for ex in (ps.P4, ps.P5):
            inputs = ex.make_inputs(torch.Generator().manual_seed(0))
            assert inputs["tokens"].device == inputs["model"].W_E.device == torch.device("meta")
        inputs = ps.P7.make_inputs(torch.Generator().manual_seed(0))
        assert (inputs["clean"].device == inputs["corrupted"].device
                == inputs["model"].W_E.device == torch.device("meta"))
        assert ps.scaffold_tokens(device="meta").device == torch.device("meta")


def test_the_recorder_catches_a_cpu_tensor_meeting_the_model():
    # the bug this file is about, planted: gather of meta logits with CPU indices
    recorder = DeviceRecorder()
    with recorder:
        logits = torch.zeros(2, 5, 7, device="meta")
        logits.log_softmax(-1).gather(-1, torch.zeros(2, 5, 1, dtype=torch.long))
    assert [m[0] for m in recorder.mixed] == ["aten.gather.default"]
