"""The SmolLM2 lab's export (circuitbook.widgets.smollm2_export) and its widget's Python side.

- The committed kernels (``smollm2_kernels.js``) are ``smollm2_kernels.c`` compiled with the
  pinned zig: rebuilt here and compared byte for byte.
- The row order of ``W_Q`` / ``W_K`` is transformers' own: ``_unpermute_rows`` against
  transformers' ``_reverse_permute_weights`` on random rows.
- The weights: every dequantised block of SmolLM2's GGUF file equals the TransformerLens
  model's weight (``check_weights``), and a single changed bit is caught.
- The widget: its tokens follow the text (and ``repeat``) through SmolLM2's own tokenizer;
  ``answer`` sends the manifest and each file in chunks that reassemble to the file.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from circuitbook.widgets import smollm2_export as se
from circuitbook.widgets import smollm2_lab as sl


def test_committed_kernels_are_the_source_compiled():
    assert se.KERNELS_JS.read_text() == se.kernels_module(se.compile_kernels()), (
        "smollm2_kernels.js is stale: run python -m circuitbook.widgets.smollm2_export --kernels")


@pytest.mark.parametrize("n_head, rows", [(9, 576), (3, 192)])
def test_row_order_is_transformers(n_head, rows):
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    raw = np.random.default_rng(0).integers(0, 256, (rows, 360), dtype=np.uint8)
    want = LlamaTensorProcessor()._reverse_permute_weights(raw, n_head, n_head)
    assert np.array_equal(se._unpermute_rows(raw, n_head), want)
    assert not np.array_equal(raw, want)


@pytest.fixture(scope="module")
def smollm2():
    from circuitbook.models.pretrained import load_smollm2

    return load_smollm2("cpu", progress=False)


@pytest.fixture(scope="module")
def tensors():
    return se.gguf_tensors()


def test_every_weight_is_the_models_bit_for_bit(smollm2, tensors):
    model = smollm2[0]
    n = se.check_weights(model, tensors)
    assert n == sum(p.numel() for name, p in model.named_parameters() if name != "unembed.W_U") - sum(
        p.numel() for name, p in model.named_parameters() if name.endswith(("b_Q", "b_K", "b_V", "b_O", "b_in",
                                                                            "b_out", "b_gate", "b_U")))


def test_a_changed_bit_is_caught(smollm2, tensors):
    kind, shape, raw = tensors["blk.17.attn_q.weight"]
    bad = raw.copy()
    bad[5, 7] ^= 1  # one bit of one nibble of one block
    with pytest.raises(AssertionError, match="L17 W_Q"):
        se.check_weights(smollm2[0], {**tensors, "blk.17.attn_q.weight": (kind, shape, bad)})


def test_lab_tokens_repeat_and_cap():
    ids = list(range(200))
    assert sl.lab_tokens(ids, False) == ids[: se.MAX_TOKENS]
    twice = sl.lab_tokens(ids, True)
    assert len(twice) == se.MAX_TOKENS and twice[: se.MAX_TOKENS // 2] == twice[se.MAX_TOKENS // 2:]
    assert sl.lab_tokens([5, 6], True) == [5, 6, 5, 6]


def test_widget_tokens_follow_the_text(smollm2):
    tokenizer = smollm2[1]
    lab = sl.smollm2_lab("The cat sat.")
    assert lab.tokens == tokenizer("The cat sat.")["input_ids"]
    lab.repeat = True
    assert lab.tokens == tokenizer("The cat sat.")["input_ids"] * 2
    lab.text = ""
    assert lab.tokens == []
    assert "a name that recurs" in lab.examples


class _Widget:
    def __init__(self):
        self.sent = []

    def send(self, content, buffers=None):
        self.sent.append((content, [bytes(b) for b in buffers or []]))


def test_answer_sends_the_files_in_chunks(tmp_path, monkeypatch):
    data = np.random.default_rng(1).integers(0, 256, 2 * sl.CHUNK + 123, dtype=np.uint8).tobytes()
    (tmp_path / "layer-00.bin").write_bytes(data)
    manifest = {"files": [{"name": "layer-00.bin", "bytes": len(data)}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(se, "cached_files", lambda: tmp_path)
    w = _Widget()
    sl.answer(w, {"ask": "something else"}, [])
    assert w.sent == []
    sl.answer(w, {"ask": "manifest"}, [])
    assert w.sent.pop() == ({"manifest": manifest}, [])
    sl.answer(w, {"ask": "file", "name": "layer-00.bin"}, [])
    assert [c["offset"] for c, _ in w.sent] == [0, sl.CHUNK, 2 * sl.CHUNK]
    assert [c["last"] for c, _ in w.sent] == [False, False, True]
    assert b"".join(b[0] for _, b in w.sent) == data
    w.sent.clear()
    sl.answer(w, {"ask": "file", "name": "../secret"}, [])
    assert "error" in w.sent[0][0] and not w.sent[0][1]

