"""Device handling that can be checked without a GPU.

Two tricks make device bugs fail on a CPU-only machine:

- **ambient meta**: under ``with torch.device("meta")`` every tensor created without an
  explicit ``device=`` lands on the data-less meta device. Running a function on a CPU model
  there fails (or changes its result) exactly when it creates a tensor that does not follow its
  inputs' device, the bug that mixes CPU indices with CUDA logits on a GPU.
- **meta model**: a model on the meta device computes shapes without data; a CPU tensor mixed
  into its computation raises, as a CPU tensor mixed into a CUDA computation would.

The GPU suite (``tests/gpu``) checks the same functions against CPU float64 on a real GPU.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from circuitbook import circuits, composition, heads, paths
from circuitbook.data import induction_tokens, repeated_random_tokens
from circuitbook.data import translation as T
from circuitbook.devices import default_device, resolve_device
from circuitbook.models import encoder_decoder as ed
from circuitbook.models import load, zoo
from circuitbook.models.attn_only import attn_only
from circuitbook.train import InductionMetrics, lm_loss, per_token_loss, repeat_losses, train_lm, translation_metrics
from circuitbook.train.metrics import evaluate

warnings.filterwarnings("ignore", message="HookedTransformer is deprecated")
# Loading onto meta copies nothing, by design here; torch says so once per tensor.
pytestmark = pytest.mark.filterwarnings("ignore:for .*copying from a non-meta parameter")


def params_and_buffers(model):
    return [*model.parameters(), *model.buffers()]


# --- the default device and zoo.load(device=...) ------------------------------------------------


def test_default_device_follows_cuda_availability_and_the_override(monkeypatch):
    monkeypatch.delenv("CIRCUITBOOK_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert default_device() == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert default_device() == torch.device("cpu")  # MPS only on TransformerLens's opt-in
    monkeypatch.setenv("TRANSFORMERLENS_ALLOW_MPS", "1")
    assert default_device() == torch.device("mps")
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", "cpu")
    assert default_device() == torch.device("cpu")


def test_bad_devices_are_named(monkeypatch):
    with pytest.raises(ValueError, match="device='gpu0' is not a torch device"):
        resolve_device("gpu0")
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", "nonsense")
    with pytest.raises(ValueError, match="CIRCUITBOOK_DEVICE='nonsense'"):
        default_device()


@pytest.mark.parametrize("name", zoo.NAMES)
def test_zoo_load_puts_every_weight_on_the_requested_device(name):
    # safetensors' load_model copies into the model's existing tensors: a model built on the
    # CPU stays there whatever device load_model is given. Meta stands in for CUDA here.
    model = load(name, device="meta")
    assert {t.device.type for t in params_and_buffers(model)} == {"meta"}
    if name != "toy-translation":
        assert torch.device(model.cfg.device).type == "meta"


def test_zoo_load_defaults_to_the_default_device(monkeypatch):
    monkeypatch.setenv("CIRCUITBOOK_DEVICE", "meta")
    assert {t.device.type for t in params_and_buffers(load("toy-1l"))} == {"meta"}


# --- ambient meta: nothing is created on an implicit device -------------------------------------


@pytest.fixture(scope="module")
def cpu_models():
    return {name: load(name, device="cpu") for name in zoo.NAMES}


def fresh_model():
    """A small untrained model on the CPU, for the calls that change their model (training)."""
    return attn_only(1, d_model=16, n_heads=2, d_vocab=32, n_ctx=16, seed=0, device="cpu")


def same(a, b) -> bool:
    """Equal results, recursively (tensors exactly, floats exactly: the same CPU arithmetic)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.device == b.device and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return same(vars(a), vars(b))
    if hasattr(a, "AB"):  # FactoredMatrix
        return same(a.A, b.A) and same(a.B, b.B)
    return a == b


CALLS = {
    "qk_circuit": lambda m: circuits.qk_circuit(m["toy-2l"], 1, 0),
    "full_ov_circuit": lambda m: circuits.full_ov_circuit(m["toy-2l"], 1),
    "pos_qk_circuit": lambda m: circuits.pos_qk_circuit(m["toy-2l"], 0, 1),
    "direct_path": lambda m: circuits.direct_path(m["toy-0l"]),
    "composition_scores": lambda m: composition.composition_scores(m["toy-2l"], "K"),
    "virtual_ov": lambda m: composition.virtual_ov(m["toy-2l"], (0, 1), (1, 2)),
    "random_baseline": lambda m: composition.random_baseline(32, 8, n_samples=16),
    "logit_attribution": lambda m: paths.logit_attribution(m["toy-2l"], repeated_random_tokens(2, 8, 64)),
    "induction_scores": lambda m: heads.induction_scores(m["toy-2l"]),
    "prev_token_scores": lambda m: heads.prev_token_scores(m["toy-2l"]),
    "copying_scores": lambda m: heads.copying_scores(m["toy-2l"]),
    "icl_score": lambda m: heads.icl_score(m["toy-2l"], induction_tokens(4, 64, 64, seed=1), early=5, late=60),
    "ablate": lambda m: _ablated_loss(m["toy-2l"]),
    "lm_loss": lambda m: lm_loss(m["toy-1l"], induction_tokens(4, 32, 64)),
    "repeat_losses": lambda m: repeat_losses(m["toy-2l"]),
    "InductionMetrics": lambda m: InductionMetrics(seq_len=16).evaluate(m["toy-2l"]),
    "train_lm": lambda m: train_lm(m["fresh"], lambda step: induction_tokens(4, 16, 32, seed=step), steps=3, progress=False),
    **{f"evaluate({n})": (lambda m, n=n: evaluate(n, m[n])) for n in zoo.NAMES},
    "greedy_decode": lambda m: _decoded(m["toy-translation"], beam=False),
    "beam_search": lambda m: _decoded(m["toy-translation"], beam=True),
    "cross_attention_alignment": lambda m: ed.cross_attention_alignment(m["toy-translation"], T.make_split(10, 10)[1]),
    "translation_metrics": lambda m: translation_metrics(m["toy-translation"], T.make_split(10, 10)[1], n_beam=3),
}


def _ablated_loss(model):
    tokens = repeated_random_tokens(2, 16, 64)
    with heads.ablate(model, [(1, 0), (0, 1)], reference_tokens=tokens):
        return lm_loss(model, tokens)


def _decoded(model, beam: bool):
    src, _ = T.to_tensors(T.make_split(10, 4)[1])
    src_mask = (src != T.PAD).unsqueeze(-2)
    if beam:
        return ed.beam_search(model, src, src_mask, T.MAX_LEN, T.BOS, T.EOS, beam_size=2)
    return ed.greedy_decode(model, src, src_mask, T.MAX_LEN, T.BOS)


@pytest.mark.parametrize("what", sorted(CALLS))
def test_no_tensor_is_created_on_an_implicit_device(what, cpu_models):
    expected = CALLS[what](dict(cpu_models, fresh=fresh_model()))
    models = dict(cpu_models, fresh=fresh_model())  # built before the default device changes
    with torch.device("meta"):
        got = CALLS[what](models)
    assert same(got, expected), f"{what} gives a different result when the default device is meta"


# --- meta model: tensors follow the model's device ----------------------------------------------


@pytest.fixture(scope="module")
def meta_models():
    return {name: load(name, device="meta") for name in ("toy-2l", "toy-translation")}


FOLLOW = {
    "composition_scores": lambda m: composition.composition_scores(m["toy-2l"], "Q"),
    "copying_scores": lambda m: heads.copying_scores(m["toy-2l"], 1),
    "induction_scores": lambda m: heads.induction_scores(m["toy-2l"]),
    "prev_token_scores with CPU tokens": lambda m: heads.prev_token_scores(m["toy-2l"], tokens=repeated_random_tokens(2, 8, 64)),
    "logit_attribution with CPU tokens": lambda m: paths.logit_attribution(m["toy-2l"], repeated_random_tokens(2, 8, 64)).total(),
    "lm_loss with CPU tokens": lambda m: lm_loss(m["toy-2l"], repeated_random_tokens(2, 8, 64)),
    "greedy_decode": lambda m: _decoded_on(m["toy-translation"]),
}


def _decoded_on(model):
    src, _ = T.to_tensors(T.make_split(10, 2)[1])
    src = src.to("meta")
    return ed.greedy_decode(model, src, (src != T.PAD).unsqueeze(-2), 5, T.BOS)


@pytest.mark.parametrize("what", sorted(FOLLOW))
def test_results_follow_the_models_device(what, meta_models):
    assert FOLLOW[what](meta_models).device.type == "meta"


def test_per_token_loss_moves_cpu_tokens_to_the_logits_device():
    logits = torch.empty(2, 5, 7, device="meta")
    assert per_token_loss(logits, torch.zeros(2, 5, dtype=torch.long)).device.type == "meta"
