"""circuitbook on a GPU: every kernel, the training loop, the zoo's metrics, the encoder-decoder
and chapter 17's calls, each against CPU float64 (see conftest.py for the tolerances)."""

from __future__ import annotations

import math

import pytest
import torch
from gpu_helpers import assert_close, on, reference, tolerance

from circuitbook import circuits, composition, heads, icl, paths
from circuitbook.data import induction_tokens, repeated_random_tokens
from circuitbook.data import translation as T
from circuitbook.models import encoder_decoder as ed
from circuitbook.models import load, zoo
from circuitbook.train.metrics import evaluate
from circuitbook.models.attn_only import attn_only
from circuitbook.neurons import haar_rotation
from circuitbook.train import lm_loss, per_token_loss, repeat_losses, train_lm, translation_metrics

D_MODEL, N_HEADS, D_HEAD, D_VOCAB, N_CTX = 64, 4, 16, 100, 32


@pytest.fixture(scope="module")
def random_model():
    """A random 2-layer attention-only model in float64 on the CPU, every bias nonzero."""
    model = attn_only(2, d_model=D_MODEL, n_heads=N_HEADS, d_head=D_HEAD, d_vocab=D_VOCAB, n_ctx=N_CTX,
                      seed=0, device="cpu", dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.fixture(scope="module")
def toy_2l():
    return load("toy-2l", device="cpu")


# --- kernels ----------------------------------------------------------------------------------


CIRCUITS = ("qk_circuit", "ov_circuit", "full_qk_circuit", "full_ov_circuit", "pos_qk_circuit")


@pytest.mark.parametrize("name", CIRCUITS)
def test_circuits(device, dtype, name, random_model):
    model, ref = on(random_model, device, dtype), reference(random_model)
    for layer in range(2):
        got = getattr(circuits, name)(model, layer)
        assert got.A.device == device and got.A.dtype == dtype
        # AB chains products whose reductions run over d_model, then d_head.
        assert_close(got.AB, getattr(circuits, name)(ref, layer).AB, dtype=dtype, n=D_MODEL + D_HEAD,
                     what=f"{name}(layer {layer}).AB")
    assert_close(circuits.direct_path(model).AB, circuits.direct_path(ref).AB, dtype=dtype, n=D_MODEL,
                 what="direct_path.AB")


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_composition_scores(device, dtype, kind, random_model):
    got = composition.composition_scores(on(random_model, device, dtype), kind)
    assert got.device == device and got.dtype == dtype
    # Scores lie in [0, 1]: compare on that scale. The Gram matrices reduce over d_model.
    assert_close(got, composition.composition_scores(reference(random_model), kind), dtype=dtype, n=D_MODEL,
                 what=f"composition_scores({kind})", scale=1.0)


def test_virtual_ov(device, dtype, random_model):
    got = composition.virtual_ov(on(random_model, device, dtype), (0, 1), (1, 2)).AB
    want = composition.virtual_ov(reference(random_model), (0, 1), (1, 2)).AB
    assert_close(got, want, dtype=dtype, n=2 * D_MODEL + 2 * D_HEAD, what="virtual_ov.AB")


def test_random_baseline_on_the_device(device):
    # float64 whatever the models' dtype; another generator draws other samples, so compare
    # with the exact E[score^2] = 1/d_model it estimates, within 5 standard errors (CLT:
    # probability 6e-7 of a false failure), and the mean score with its Jensen bound.
    s = composition.random_scores(256, 32, n_samples=2048, device=device)
    assert s.device == device and s.dtype == torch.float64
    se = float(s.square().std()) / math.sqrt(s.numel())
    assert abs(float(s.square().mean()) - composition.expected_squared_score(256)) <= 5 * se
    assert float(s.mean()) <= 1 / math.sqrt(256) + 5 * float(s.std()) / math.sqrt(s.numel())
    assert composition.random_baseline(256, 32, n_samples=2048, device=device) == float(s.mean().cpu())


def test_rotated_baseline_on_the_device(device, dtype, random_model):
    # The same rotations, drawn by a generator on the device (rotated_baseline's own order),
    # applied on the CPU in float64 to the reference weights: the null is the composition
    # score of the rotated model, computed in the model's dtype promoted to float32.
    model = on(random_model, device, dtype)
    got = composition.rotated_baseline(model, "K", n_samples=3, seed=4)
    work = torch.promote_types(dtype, torch.float32)
    assert got.shape == (3, 2, N_HEADS, 2, N_HEADS) and got.device == device and got.dtype == work
    g = torch.Generator(device=device).manual_seed(4)
    ref = reference(random_model)
    W = [w.detach() for w in (ref.W_Q, ref.W_K, ref.W_V, ref.W_O)]
    for s in range(3):
        U = haar_rotation(D_MODEL, g, work).to("cpu", torch.float64)
        want = composition._scores(W[0], W[1], W[2], W[3] @ U, "K")
        # The weights are rounded to dtype, U to the working dtype; the Grams reduce over d_model.
        assert_close(got[s], want, dtype=dtype, n=2 * D_MODEL, what=f"rotated_baseline sample {s}", scale=1.0)


def test_copying_scores(device, dtype, random_model):
    got = heads.copying_scores(on(random_model, device, dtype))
    assert got.device == device and got.dtype == dtype
    # Scores lie in [-1, 1]; the small matrix W_O (W_U W_E) W_V reduces over d_vocab and d_model.
    assert_close(got, heads.copying_scores(reference(random_model)), dtype=dtype, n=D_VOCAB + 2 * D_MODEL,
                 what="copying_scores", scale=1.0)


def test_logit_attribution(device, dtype, random_model):
    tokens = repeated_random_tokens(2, 8, D_VOCAB, seed=3)
    got = paths.logit_attribution(on(random_model, device, dtype), tokens)
    want = paths.logit_attribution(reference(random_model), tokens)
    scale = float(want.total().abs().max())
    # Every part is a chain of at most 3 head maps, each reducing over d_model and pos.
    n = 3 * (D_MODEL + 2 * 8)
    for (label, g), (_, w) in zip(got.parts(), want.parts()):
        assert g.device == device
        assert_close(g, w, dtype=dtype, n=n, what=f"logit_attribution part {label}", scale=scale)
    assert_close(got.total(), want.total(), dtype=dtype, n=n, what="logit_attribution.total()", scale=scale)


def test_attention_scores_and_ablation(device, dtype, toy_2l):
    model, ref = on(toy_2l, device, dtype), reference(toy_2l)
    # Attention probabilities are in [0, 1]; each comes from a softmax over scores of size
    # up to s = max |score|, whose rounding error is about s * eps: scale = 1 + s.
    scores_max = 1.0 + _max_attention_score(ref)
    n = toy_2l.cfg.d_model
    for fn in (heads.induction_scores, heads.prev_token_scores):
        got = fn(model)
        assert got.device == device
        assert_close(got, fn(ref), dtype=dtype, n=n, what=fn.__name__, scale=scores_max)
    tokens = repeated_random_tokens(4, 16, toy_2l.cfg.d_vocab, seed=5)
    with torch.no_grad(), heads.ablate(model, [(1, 0)], reference_tokens=tokens):
        got = lm_loss(model, tokens)
    with torch.no_grad(), heads.ablate(ref, [(1, 0)], reference_tokens=tokens):
        want = lm_loss(ref, tokens)
    # A loss is a mean of log-softmaxes over d_vocab, of logits summed over d_model.
    assert_close(got, want, dtype=dtype, n=n + toy_2l.cfg.d_vocab, what="ablated loss", scale=scores_max * float(want))


def _max_attention_score(model) -> float:
    tokens = repeated_random_tokens(8, 25, model.cfg.d_vocab)
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("attn_scores"))
    return max(float(v.masked_fill(v < -1e4, 0).abs().max()) for v in cache.values())


# --- training ---------------------------------------------------------------------------------


def test_training_loop(device, dtype):
    if dtype is not torch.float32:
        pytest.skip("train_lm trains in float32: half-precision training needs loss scaling, which it does not do")
    steps = 5
    batches = lambda step: induction_tokens(8, 32, 64, seed=step)  # noqa: E731  CPU tokens, every device
    start = attn_only(1, d_model=32, n_heads=2, d_vocab=64, n_ctx=32, seed=0, device="cpu", dtype=torch.float64)
    got = train_lm(on(start, device, dtype), batches, steps=steps, lr=0.1, optimizer="sgd", progress=False)
    want = train_lm(reference(start), batches, steps=steps, lr=0.1, optimizer="sgd", progress=False)
    # SGD is Lipschitz in the weights: each step adds at most one loss's rounding (over d_model
    # and d_vocab) to the weights, so the error grows at most linearly in the steps.
    assert_close(torch.tensor(got), torch.tensor(want), dtype=dtype, n=steps**2 * (32 + 64), what="SGD losses")
    tokens = induction_tokens(4, 32, 64, seed=99)
    logits = on(start, device, dtype)(tokens.to(device))
    assert_close(per_token_loss(logits, tokens), per_token_loss(reference(start)(tokens), tokens), dtype=dtype,
                 n=32 + 64, what="per_token_loss with CPU tokens")


# --- the zoo's metrics ------------------------------------------------------------------------


def _compare_metrics(got, want, tol, path="metrics"):
    """Floats within ``tol`` (relative, with the same absolute floor); everything else equal."""
    if isinstance(want, dict):
        assert set(got) == set(want), path
        for k in want:
            _compare_metrics(got[k], want[k], tol, f"{path}.{k}")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _compare_metrics(g, w, tol, f"{path}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=tol, abs_tol=tol), f"{path}: {got} on the device, {want} in float64"
    else:
        assert got == want, f"{path}: {got!r} on the device, {want!r} in float64"


@pytest.mark.parametrize("name", [n for n in zoo.NAMES if n != "toy-translation"])
def test_zoo_metrics(device, dtype, name):
    if dtype is not torch.float32:
        pytest.skip("the zoo's metrics are recorded in float32, the dtype the zoo was trained in")
    cpu = load(name, device="cpu")
    got = evaluate(name, load(name, device=device))
    # Losses and probabilities come from logits summed over d_model and log-softmaxes over
    # d_vocab, on n_ctx positions; argmax heads and accuracies must agree exactly.
    n = cpu.cfg.d_model + cpu.cfg.d_vocab + cpu.cfg.n_ctx
    _compare_metrics(got, evaluate(name, reference(cpu)), tolerance(dtype, n))


# --- the encoder-decoder ----------------------------------------------------------------------


def test_encoder_decoder(device, dtype):
    if dtype is not torch.float32:
        pytest.skip("the toy translation model is trained and evaluated in float32")
    cpu = load("toy-translation", device="cpu")
    model, ref = load("toy-translation", device=device), reference(cpu)
    sentences = T.make_split(10, 40, seed=7)[1]
    src, _ = T.to_tensors(sentences)
    mask = (src != T.PAD).unsqueeze(-2)
    for decode in (
        lambda m, s, k: ed.greedy_decode(m, s, k, T.MAX_LEN, T.BOS),
        lambda m, s, k: ed.beam_search(m, s, k, T.MAX_LEN, T.BOS, T.EOS, beam_size=3),
    ):
        got = decode(model, src.to(device), mask.to(device))
        assert got.device == device
        # A trained model's top choices are separated by far more than float32 rounding.
        assert torch.equal(got.cpu(), decode(ref, src, mask)), "decoded tokens differ from float64"
    n = cpu.src_embed[0].lut.embedding_dim + len(T.TGT_VOCAB)
    tol = tolerance(dtype, n)
    _compare_metrics(translation_metrics(model, sentences, n_beam=10), translation_metrics(ref, sentences, n_beam=10),
                     tol)
    got = ed.cross_attention_alignment(model, sentences)
    assert got.device == device
    assert torch.equal(got.cpu(), ed.cross_attention_alignment(ref, sentences)), "argmax alignment differs"


# --- a chapter's worth of calls (chapter 17, induction heads) ---------------------------------


def test_chapter_17(device, dtype, toy_2l):
    model, ref = on(toy_2l, device, dtype), reference(toy_2l)
    cfg = toy_2l.cfg
    scale = 1.0 + _max_attention_score(ref)
    n = cfg.d_model + cfg.d_vocab
    ind = heads.induction_scores(model)
    assert_close(ind, heads.induction_scores(ref), dtype=dtype, n=n, what="induction_scores", scale=scale)
    assert_close(heads.prev_token_scores(model), heads.prev_token_scores(ref), dtype=dtype, n=n,
                 what="prev_token_scores", scale=scale)
    # The reference's best induction head; toy-2l has two close ones, so low precision may rank
    # them the other way round: its score must be within tolerance of the device's best.
    want_ind = heads.induction_scores(ref)
    best = divmod(int(want_ind.argmax()), cfg.n_heads)
    assert float(ind.max() - ind[best]) <= tolerance(dtype, n) * scale, "the best induction head scores too low"
    assert_close(heads.copying_scores(model, *best), heads.copying_scores(ref, *best), dtype=dtype,
                 n=cfg.d_vocab + 2 * cfg.d_model, what="copying score of the induction head", scale=1.0)
    assert_close(composition.composition_scores(model, "K"), composition.composition_scores(ref, "K"), dtype=dtype,
                 n=cfg.d_model, what="K-composition", scale=1.0)
    first, second = repeat_losses(model)
    want_first, want_second = repeat_losses(ref)
    assert_close(torch.tensor([first, second]), torch.tensor([want_first, want_second]), dtype=dtype, n=n,
                 what="repeat_losses", scale=scale * want_first)
    tokens = induction_tokens(8, cfg.n_ctx, cfg.d_vocab, seed=2)
    assert_close(icl.icl_score(model, tokens, early=5, late=60), icl.icl_score(ref, tokens, early=5, late=60),
                 dtype=dtype, n=n, what="icl_score", scale=scale * want_first)
