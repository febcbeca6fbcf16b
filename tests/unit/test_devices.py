"""Device handling that can be checked without a GPU.

Two tricks make device bugs fail on a CPU-only machine:

- **ambient meta**: under ``with torch.device("meta")`` every tensor created without an
  explicit ``device=`` lands on the data-less meta device. Running a function on a CPU model
  there fails (or changes its result) exactly when it creates a tensor that does not follow its
  inputs' device, the bug that mixes CPU indices with CUDA logits on a GPU.
- **meta model**: a model on the meta device computes shapes without data; a CPU tensor mixed
  into its computation raises, as a CPU tensor mixed into a CUDA computation would.
- **a recorder** (:class:`Implicit`, a ``TorchFunctionMode``) runs under the ambient meta device
  and an ambient float64 default dtype with float32 models, and names every line of
  ``circuitbook`` that makes a tensor on the ambient device, or a floating tensor in the
  ambient dtype without asking for a dtype, so a failure says where the tensor came from.

The GPU suite (``tests/gpu``) checks the same functions against CPU float64 on a real GPU.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import os
import sys

from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from circuitbook import attribution, circuits, composition, heads, icl, neurons, patching, paths
from circuitbook.models import handbuilt
from circuitbook.models import pretrained as P
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
    return {**{name: load(name, device="cpu") for name in zoo.NAMES}, "rms": _rms_model(), "llama": _tiny_llama()}


def fresh_model():
    """A small untrained model on the CPU, for the calls that change their model (training)."""
    return attn_only(1, d_model=16, n_heads=2, d_vocab=32, n_ctx=16, seed=0, device="cpu")


def same(a, b) -> bool:
    """Equal results, recursively (tensors exactly, floats exactly: the same CPU arithmetic)."""
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.device == b.device and a.dtype == b.dtype
                and torch.equal(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "__dataclass_fields__"):
        return same(vars(a), vars(b))
    if hasattr(a, "AB"):  # FactoredMatrix
        return same(a.A, b.A) and same(a.B, b.B)
    if isinstance(a, torch.nn.Module):
        return same(a.state_dict(), b.state_dict())
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
    "icl_score": lambda m: icl.icl_score(m["toy-2l"], induction_tokens(4, 64, 64, seed=1), early=5, late=60),
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
    "rotated_baseline": lambda m: composition.rotated_baseline(m["toy-2l"], "K", n_samples=2),
    "icl_scores": lambda m: icl.icl_scores(m["toy-2l"](TOKENS), TOKENS, (2, 6), range(10, 16)),
    "uniform_causal_pattern": lambda m: heads.uniform_causal_pattern(6, device="cpu"),
    "duplicate_token_pattern_score": lambda m: _duplicate_score(m["toy-2l"]),
    "patch_heads": lambda m: patching.patch_heads(_patching(m["toy-2l"])),
    "patch_resid": lambda m: patching.patch_resid(_patching(m["toy-2l"]), positions=[3, 9]),
    "patch one head at positions": lambda m: patching.patch(_patching(m["toy-2l"]), "z", 0, head=1, positions=[4]),
    "path_patch": lambda m: patching.path_patch(_patching(m["toy-2l"]), (0, 1), [(1, 0), (1, 2)], into="k"),
    "path_patch into the logits": lambda m: patching.path_patch(_patching(m["toy-2l"]), [(0, 0), (1, 3)],
                                                                into="logits", positions=[5]),
    "direct_logit_attribution": lambda m: _dla(m["rms"]),
    "mlp_activations": lambda m: neurons.mlp_activations(m["rms"], TOKENS[:, :8] % 17, [0, 1]),
    "haar_rotation": lambda m: neurons.haar_rotation(6, torch.Generator().manual_seed(1)),
    "neuron statistics": lambda m: _neuron_statistics(m["rms"]),
    "induction_scaffold": lambda m: _scaffold(),
    "hooked_from_hf_llama": lambda m: P.hooked_from_hf_llama(m["llama"], None, _llama_config()),
}

TOKENS = repeated_random_tokens(2, 8, 64, seed=4)
SCAFFOLD_TOKENS = torch.tensor([[0, 3, 1, 5, 0, 3, 1, 5]])

# The analysis kernels also run under a float64 default dtype (models float32), so that a tensor
# made in the default dtype shows. The rest are left out: the data generators (circuitbook.data)
# draw with torch.rand in the default dtype, which picks tokens rather than a result's dtype,
# and TransformerLens's constructor makes its attention mask's IGNORE buffer in it.
FOLLOW_DTYPE = {
    "qk_circuit", "full_ov_circuit", "pos_qk_circuit", "direct_path", "composition_scores", "virtual_ov",
    "rotated_baseline", "logit_attribution", "induction_scores", "prev_token_scores", "copying_scores",
    "icl_scores", "ablate", "uniform_causal_pattern", "duplicate_token_pattern_score",
    "patch_heads", "patch_resid", "patch one head at positions", "path_patch", "path_patch into the logits",
    "direct_logit_attribution", "mlp_activations", "haar_rotation", "neuron statistics",
}


def _patching(model):
    clean = TOKENS
    corrupted = torch.cat([clean[:, :1], (clean[:, 1:] + 7) % 64], dim=1)
    return patching.patching_run(model, clean, corrupted,
                                 lambda logits: patching.mean_loss(logits, clean, list(range(8, 15))))


def _duplicate_score(model):
    _, cache = model.run_with_cache(TOKENS, names_filter=lambda name: name.endswith("hook_pattern"))
    uniform = heads.uniform_causal_pattern(16, device=cache["pattern", 0].device)[None, None]
    return (heads.duplicate_token_pattern_score(cache["pattern", 1], TOKENS),
            heads.duplicate_token_pattern_score(uniform, TOKENS), heads.prev_token_pattern_score(cache["pattern", 0]))


def _dla(model):
    tokens = TOKENS[:, :8] % 17
    _, cache = model.run_with_cache(tokens)
    return attribution.direct_logit_attribution(model, cache, tokens[:, -1], wrong=[3, 4])


def _neuron_statistics(model):
    post = neurons.mlp_activations(model, TOKENS[:, :8] % 17, 1)["post"]
    flat = post.reshape(-1, post.shape[-1])
    return (neurons.kurtosis(flat), neurons.top_k_mass(flat, 3), neurons.top_activations(post[..., 0], 4),
            neurons.value_logits(model.blocks[1].mlp.W_out, model.ln_final.w, model.W_U))


def _scaffold():
    S = handbuilt.subspaces(6, 8)
    model = handbuilt.induction_scaffold(30 * S["S_tok"].T @ S["S_prev"], 10 * S["S_tok"].T @ S["S_tok"],
                                         d_vocab=6, n_ctx=8)
    return model, heads.induction_scores(model, tokens=SCAFFOLD_TOKENS)


def _rms_model():
    """A tiny gated-MLP, RMSNorm, rotary model (SmolLM2's architecture), float32 on the CPU."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=2, d_model=12, n_heads=3, d_head=4, d_mlp=20, d_vocab=17,
                                  n_ctx=9, act_fn="silu", gated_mlp=True, normalization_type="RMS",
                                  positional_embedding_type="rotary", final_rms=True, seed=0, device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model.eval()


def _llama_config():
    from transformer_lens import HookedTransformerConfig

    return HookedTransformerConfig(
        n_layers=2, d_model=16, n_heads=4, d_head=4, n_key_value_heads=2, d_mlp=24, d_vocab=32, n_ctx=16,
        act_fn="silu", eps=1e-5, normalization_type="RMS", positional_embedding_type="rotary", rotary_dim=4,
        rotary_base=10000.0, rotary_adjacent_pairs=False, gated_mlp=True, final_rms=True,
        original_architecture="LlamaForCausalLM", tie_word_embeddings=True, init_weights=False,
        default_prepend_bos=False, device="cpu")


def _tiny_llama():
    """A random 2-layer Llama (transformers), the architecture pretrained.hooked_from_hf_llama converts."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
                                        tie_word_embeddings=True, rms_norm_eps=1e-5)).eval()


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


SRC = os.path.dirname(os.path.abspath(circuits.__file__))
# The analysis kernels, whose floating tensors must take the model's (or input's) dtype.
KERNELS = ("attribution.py", "circuits.py", "composition.py", "heads.py", "neurons.py", "patching.py", "paths.py",
           os.path.join("models", "handbuilt.py"))
FACTORIES = {torch.tensor, torch.as_tensor, torch.zeros, torch.ones, torch.empty, torch.full, torch.eye,
             torch.arange, torch.linspace, torch.rand, torch.randn, torch.randint, torch.randperm}


class Implicit(TorchFunctionMode):
    """Records each line of circuitbook that makes a tensor on the ambient device (a result on
    meta from inputs that are not), or a floating tensor by a factory (torch.tensor, zeros, ...)
    without a dtype, which the ambient default dtype then decides. Enter it inside
    ``torch.device("meta")``, so that it sees each call before the device is filled in."""

    def __init__(self, dtypes: bool):
        super().__init__()
        self.dtypes = dtypes
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
            on_meta = out.device.type == "meta" and not any(t.device.type == "meta" for t in inputs)
            no_dtype = self.dtypes and func in FACTORIES and "dtype" not in kwargs and out.is_floating_point() \
                and not any(t.is_floating_point() for t in inputs)
            if on_meta or no_dtype:
                where = _caller()
                if where and (on_meta or where.startswith(KERNELS)):
                    what = "on the ambient device" if on_meta else f"in the default dtype {out.dtype}"
                    self.found.append(f"{where}: {getattr(func, '__name__', func)} made a tensor {what}")
        return out


def _caller() -> str | None:
    """``file:line`` of the innermost frame outside torch, if it is circuitbook's."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if os.sep + "torch" + os.sep not in name and name != __file__:
            return f"{os.path.relpath(name, SRC)}:{frame.f_lineno}" if name.startswith(SRC) else None
        frame = frame.f_back
    return None


@pytest.mark.parametrize("what", sorted(CALLS))
def test_no_tensor_is_created_on_an_implicit_device(what, cpu_models):
    expected = CALLS[what](dict(cpu_models, fresh=fresh_model()))
    models = dict(cpu_models, fresh=fresh_model())  # built before the default device changes
    default = torch.get_default_dtype()
    if what in FOLLOW_DTYPE:  # the models are float32: a tensor in float64 did not follow them
        torch.set_default_dtype(torch.float64)
    try:
        with torch.device("meta"), Implicit(dtypes=what in FOLLOW_DTYPE) as made:
            got = CALLS[what](models)
    finally:
        torch.set_default_dtype(default)
    assert not made.found, "\n".join(made.found)
    assert same(got, expected), f"{what} gives a different result when the default device is meta"


def test_the_recorder_names_the_line_that_made_a_cpu_tensor(monkeypatch):
    # Power of the check above: patching's old torch.tensor(values), which followed the ambient
    # device and dtype instead of the model's, is caught and named.
    model = load("toy-2l", device="cpu")
    run = _patching(model)
    monkeypatch.setattr(patching, "_on_model", lambda values, model: torch.tensor(values))
    torch.set_default_dtype(torch.float64)
    try:
        with torch.device("meta"), Implicit(dtypes=True) as made:
            patching.patch_heads(run)
    finally:
        torch.set_default_dtype(torch.float32)
    assert made.found and all("made a tensor on the ambient device" in f for f in made.found), made.found


# --- meta model: tensors follow the model's device ----------------------------------------------


@pytest.fixture(scope="module")
def meta_models():
    return {**{name: load(name, device="meta") for name in ("toy-2l", "toy-translation")},
            "rms": _rms_model().to("meta")}


FOLLOW = {
    "composition_scores": lambda m: composition.composition_scores(m["toy-2l"], "Q"),
    "copying_scores": lambda m: heads.copying_scores(m["toy-2l"], 1),
    "induction_scores": lambda m: heads.induction_scores(m["toy-2l"]),
    "prev_token_scores with CPU tokens": lambda m: heads.prev_token_scores(m["toy-2l"], tokens=repeated_random_tokens(2, 8, 64)),
    "logit_attribution with CPU tokens": lambda m: paths.logit_attribution(m["toy-2l"], repeated_random_tokens(2, 8, 64)).total(),
    "lm_loss with CPU tokens": lambda m: lm_loss(m["toy-2l"], repeated_random_tokens(2, 8, 64)),
    "greedy_decode": lambda m: _decoded_on(m["toy-translation"]),
    "icl_scores of meta logits with CPU tokens": lambda m: icl.icl_scores(m["toy-2l"](TOKENS), TOKENS, 3, (9, 14)),
    "mlp_activations with CPU tokens": lambda m: neurons.mlp_activations(m["rms"], TOKENS[:, :8] % 17, 1)["post"],
    "direct_logit_attribution with CPU answers": lambda m: _dla(m["rms"]).total(),
    "induction_scaffold of meta matrices": lambda m: next(handbuilt.induction_scaffold(
        torch.zeros(20, 20, device="meta"), torch.zeros(20, 20, device="meta"), d_vocab=6, n_ctx=8).parameters()),
}


def _decoded_on(model):
    src, _ = T.to_tensors(T.make_split(10, 2)[1])
    src = src.to("meta")
    return ed.greedy_decode(model, src, (src != T.PAD).unsqueeze(-2), 5, T.BOS)


@pytest.mark.parametrize("what", sorted(FOLLOW))
def test_results_follow_the_models_device(what, meta_models):
    assert FOLLOW[what](meta_models).device == torch.device("meta")


def test_per_token_loss_moves_cpu_tokens_to_the_logits_device():
    logits = torch.empty(2, 5, 7, device="meta")
    assert per_token_loss(logits, torch.zeros(2, 5, dtype=torch.long)).device.type == "meta"
