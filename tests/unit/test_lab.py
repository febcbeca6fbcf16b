"""The induction lab's export (circuitbook.widgets.lab_export) and its widget's Python side.

- every exported tensor decodes to the zoo checkpoint's float32 bytes, read here with
  ``safetensors`` (not through the model the export used);
- ``z_mean`` is each head's mean ``z`` over the reference run, recomputed here with a plain
  hook, and is what ``heads.ablate`` substitutes;
- the site script registers the record under its name and holds nothing but it;
- the widget sends the same record when its front end asks, and only then.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch

from circuitbook.models import load
from circuitbook.widgets.explainers import induction_stepper, stepper_data
from circuitbook.widgets.lab import answer_weights, induction_lab
from circuitbook.widgets.lab_export import export, reference_tokens, site_script


def _decode(entry) -> np.ndarray:
    shape, b64 = entry
    return np.frombuffer(base64.b64decode(b64), dtype="<f4").reshape(shape)


@pytest.fixture(scope="module")
def record():
    return export("toy-2l")


def test_weights_are_the_checkpoints_bytes(record):
    from safetensors.numpy import load_file

    from circuitbook.models.zoo import paths

    saved = load_file(str(paths("toy-2l")[0]))
    # the checkpoint stores TransformerLens's state dict: per-block tensors
    assert np.array_equal(_decode(record["tensors"]["W_E"]), saved["embed.W_E"])
    assert np.array_equal(_decode(record["tensors"]["W_pos"]), saved["pos_embed.W_pos"])
    assert np.array_equal(_decode(record["tensors"]["W_U"]), saved["unembed.W_U"])
    for layer in range(2):
        for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V"):
            assert np.array_equal(_decode(record["tensors"][name])[layer], saved[f"blocks.{layer}.attn.{name}"]), name
        assert np.array_equal(_decode(record["tensors"]["b_O"])[layer], saved[f"blocks.{layer}.attn.b_O"])
    assert record["config"] == {"n_layers": 2, "d_model": 64, "n_heads": 4, "d_head": 16, "d_vocab": 64,
                                "n_ctx": 64, "positional": "shortformer"}


def test_z_mean_is_the_reference_runs_mean_z(record):
    model = load("toy-2l", device="cpu")
    seen = {}

    def keep(z, hook):
        seen[hook.layer()] = z.mean(dim=(0, 1))  # [head, d_head]

    hooks = [(f"blocks.{layer}.attn.hook_z", keep) for layer in range(2)]
    with torch.no_grad(), model.hooks(fwd_hooks=hooks):
        model(reference_tokens(model), return_type=None)
    want = torch.stack([seen[0], seen[1]]).numpy()
    got = _decode(record["tensors"]["z_mean"])
    assert got.shape == (2, 4, 16)
    # float32 means of the same numbers: the rounding of a mean over batch * pos values
    n = reference_tokens(model).numel()
    assert np.abs(got - want).max() <= n * np.finfo(np.float32).eps * np.abs(want).max()
    assert np.abs(want).max() > 0.1  # the heads do write something


def test_site_script_registers_the_record(record):
    text = site_script(record)
    prefix = '(window.cbLabModels = window.cbLabModels || {})["toy-2l"] = '
    assert text.startswith(prefix) and text.endswith(";\n") and "define(" not in text
    assert json.loads(text[len(prefix):-2]) == record


def test_widget_sends_the_record_when_asked(record):
    lab = induction_lab("toy-2l")
    assert lab.weights == "" and len(lab.tokens) == 48 and lab.tokens[:24] == lab.tokens[24:]
    answer_weights(lab, {"ask": "something else"}, [])
    assert lab.weights == ""
    answer_weights(lab, {"ask": "weights"}, [])
    assert json.loads(lab.weights) == record
    with pytest.raises(ValueError, match="toy-1l, toy-2l"):
        induction_lab("toy-0l")


def test_live_stepper_carries_sequences_not_numbers(record):
    model = load("toy-2l")
    stepper = induction_stepper(model, live="toy-2l")
    data = stepper_data(model)
    assert set(stepper.data) == {"steps", "prev_head", "induction_head"}  # the page computes the rest
    assert stepper.tokens == {mode: seq["ids"] for mode, seq in data["sequences"].items()}
    text = data["sequences"]["text"]
    assert [stepper.words[str(i)] for i in text["ids"]] == text["tokens"]
    answer_weights(stepper, {"ask": "weights"}, [])
    assert json.loads(stepper.weights) == record
    with pytest.raises(ValueError, match="toy-1l, toy-2l"):
        induction_stepper(model, live="smollm2")
