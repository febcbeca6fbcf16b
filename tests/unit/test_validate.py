"""circuitbook.validate: one layer/head index validator, read by every public kernel that takes a
layer or a head (circuits, heads, composition, patching, neurons), so that they all accept the
same indices (ints, numpy integers, 0-dim integer tensors) and refuse the same ones with an
error that names the valid range."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import build_model

from circuitbook import circuits
from circuitbook.composition import virtual_ov
from circuitbook.heads import ablate, copying_scores
from circuitbook.patching import patch, patching_run
from circuitbook.validate import check_heads, check_layer_head, check_layers

MODEL = build_model(2, n_heads=3)  # layers 0..1, heads 0..2


def _patch(model, layer, head):
    g = torch.Generator().manual_seed(0)
    clean, corrupted = (torch.randint(0, model.cfg.d_vocab, (2, 6), generator=g) for _ in range(2))
    run = patching_run(model, clean, corrupted, lambda logits: logits[:, -1, 3].mean())
    return patch(run, "z", layer, head=head)


# Every public kernel that takes a (layer, head), called with one.
KERNELS = {
    "qk_circuit": circuits.qk_circuit,
    "ov_circuit": circuits.ov_circuit,
    "full_qk_circuit": circuits.full_qk_circuit,
    "full_ov_circuit": circuits.full_ov_circuit,
    "pos_qk_circuit": circuits.pos_qk_circuit,
    "copying_scores": copying_scores,
    "ablate": lambda model, layer, head: ablate(model, [(layer, head)]),
    "virtual_ov": lambda model, layer, head: virtual_ov(model, (0, 0), (layer, head)) if layer != 0
    else virtual_ov(model, (layer, head), (1, 0)),
    "patch": _patch,
}


def test_check_layer_head_returns_python_ints():
    for layer, head in [(1, 2), (torch.tensor(1), torch.tensor(2)), (np.int64(1), np.int32(2)),
                        (torch.tensor(1, dtype=torch.int32), 2)]:
        got = check_layer_head(MODEL, layer, head)
        assert got == (1, 2) and all(type(x) is int for x in got)
    assert check_layer_head(MODEL, torch.tensor(0)) == (0, None)


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_takes_a_0d_tensor_index_as_an_int(kernel):
    """qk_circuit once refused the 0-dim tensor head index that ablate accepted (what argmax gives)."""
    fn = KERNELS[kernel]
    by_int = fn(MODEL, 1, 2)
    by_tensor = fn(MODEL, torch.tensor(1), torch.tensor(2))
    if isinstance(by_int, float):
        assert by_tensor == by_int
    elif hasattr(by_int, "AB"):
        assert torch.equal(by_tensor.AB, by_int.AB)
    elif isinstance(by_int, torch.Tensor):
        assert torch.equal(by_tensor, by_int)
    else:
        assert by_tensor.by_layer == by_int.by_layer


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_kernel_names_the_valid_range(kernel):
    fn = KERNELS[kernel]
    with pytest.raises(ValueError, match=r"layer 2 is out of range: .*valid layers are 0\.\.1"):
        fn(MODEL, 2, 0)
    with pytest.raises(ValueError, match=r"head 3 is out of range: .*valid heads are 0\.\.2"):
        fn(MODEL, 1, torch.tensor(3))
    with pytest.raises(ValueError, match=r"head -1 is out of range"):
        fn(MODEL, 1, -1)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("bad", [1.0, True, torch.tensor([1]), torch.tensor(1.0), "1"])
def test_every_kernel_refuses_a_non_integer_index(kernel, bad):
    with pytest.raises(TypeError, match="must be an integer \\(an int or a 0-dim integer tensor\\)"):
        KERNELS[kernel](MODEL, 1, bad)


def test_check_layers():
    assert check_layers(MODEL, range(2)) == [0, 1]
    assert check_layers(MODEL, torch.tensor([1, 0])) == [1, 0]
    with pytest.raises(ValueError, match=r"layers is empty: give at least one layer index \(0\.\.1\)"):
        check_layers(MODEL, [])
    with pytest.raises(ValueError, match=r"layer 5 is out of range"):
        check_layers(MODEL, [0, 5])
    with pytest.raises(TypeError, match="sequence"):
        check_layers(MODEL, "01")


def test_check_heads_reads_each_pair_with_the_same_validator():
    assert check_heads(MODEL, (torch.tensor(1), torch.tensor(2))) == [(1, 2)]
    with pytest.raises(ValueError, match=r"valid heads are 0\.\.2"):
        check_heads(MODEL, [(0, 1), (1, 3)])
