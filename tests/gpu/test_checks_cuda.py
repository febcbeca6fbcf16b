"""The problem set's checks (problems 1-5) on the GPU: with the models on CUDA (the default
there, as on Colab), each reference passes its own check, every tensor a check makes sits on
exactly the model's device (type and index), and the values equal the CPU's.

Skipped visibly without a CUDA GPU (tests/gpu/conftest.py); ``CIRCUITBOOK_GPU_SUITE_DEVICE=cpu``
dry-runs it on the CPU. tests/unit/test_check_devices.py catches CPU-made tensors without a GPU.
"""

from __future__ import annotations

import pytest
import torch

from circuitbook import checks
from circuitbook.checks import ps
from circuitbook.heads import ablate
from circuitbook.validate import model_device

from gpu_helpers import assert_close

SEED = 1234


def full(device: torch.device) -> torch.device:
    """``cuda`` as the device tensors report (``cuda:0``): compared whole, index included."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


@pytest.fixture
def on_device(device, monkeypatch):
    """Models built by the checks (models.load, attn_only) land on the suite's device."""
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", str(full(device)))
    return full(device)


@pytest.mark.parametrize("ex_id", ["ps_p1a", "ps_p1b", "ps_p2", "ps_p3", "ps_p3b", "ps_p4", "ps_p5", "ps_p5b"])
def test_each_reference_passes_its_check_on_the_device(on_device, ex_id):
    ex = checks.get(ex_id)
    if ex_id == "ps_p1a":
        result = ex.check(ps.p1_reference())
    elif ex_id == "ps_p3b":
        result = ex.check(ps.p3b_reference())
    elif hasattr(ex, "make_inputs"):
        result = ex.check(ex.reference, seed=SEED)
    else:
        result = ex.check(ex.reference)
    assert result.passed, str(result)


@pytest.mark.parametrize("ex", [ps.P4, ps.P5, ps.P5B], ids=lambda ex: ex.id)
def test_the_inputs_sit_on_exactly_the_models_device(on_device, ex):
    inputs = ex.make_inputs(torch.Generator().manual_seed(SEED))
    assert model_device(inputs["model"]) == on_device
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            assert value.device == on_device, (name, value.device, on_device)


def test_the_scaffold_and_its_tokens_follow_the_device(on_device):
    assert ps.scaffold_tokens(device=on_device).device == on_device
    space = ps.p3._p3_space()
    got = ps.scaffold_behaviour(*ps.design_induction_head(space["S_tok"], space["S_prev"]))
    assert got["induction_score"] > 0.9 and got["loss_second_copy"] < 0.5, got


def test_the_values_equal_the_cpus(device, monkeypatch):
    """Problem 5's measurement with the model on the device and on the CPU (both float32)."""
    results = []
    for where in ("cpu", str(full(device))):
        monkeypatch.setenv("CIRCUITBOOK_DEVICE", where)
        inputs = ps.P5.make_inputs(torch.Generator().manual_seed(SEED))
        results.append(ps.ablation_effect(**inputs))
    cpu, dev = results
    n = inputs["tokens"].shape[1]
    for what, a, b in (("induction score", dev[0], cpu[0]), ("loss", dev[1], cpu[1])):
        assert_close(torch.tensor(a), torch.tensor(b), dtype=torch.float32, n=inputs["model"].cfg.d_model * n,
                     what=what, scale=max(1.0, abs(b)))


def test_a_named_mistake_is_still_named_on_the_device(on_device):
    def with_token_n(model, head, reader, tokens):
        score, _ = ps.ablation_effect(model, head, reader, tokens)
        n = tokens.shape[1] // 2
        with torch.no_grad(), ablate(model, [head]):
            logits = model(tokens)
        logp = logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
        return score, float(-logp[:, n - 1:].mean())

    result = ps.P5.check(with_token_n, seed=SEED)
    assert result.mistake == "loss window includes token n", str(result)
