"""The analysis helpers on a GPU: patching, path patching, attribution, neurons, the hand-built
scaffold and SmolLM2's loader, each against CPU float64 (tolerances in conftest.py), and every
result on the model's device (full ``torch.device`` equality) in its dtype."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from gpu_helpers import assert_close, assert_on, device_of, on, reference

from circuitbook import attribution, heads, icl, neurons, patching
from circuitbook.models import handbuilt
from circuitbook.models.attn_only import attn_only

D_MODEL, N_HEADS, D_HEAD, D_VOCAB, N_CTX = 32, 2, 8, 40, 12


@pytest.fixture(scope="module")
def three_layers():
    """A random 3-layer attention-only model in float64 on the CPU, every bias nonzero."""
    model = attn_only(3, d_model=D_MODEL, n_heads=N_HEADS, d_head=D_HEAD, d_vocab=D_VOCAB, n_ctx=N_CTX,
                      seed=0, device="cpu", dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


@pytest.fixture(scope="module")
def gated():
    """A random gated-MLP, RMSNorm, rotary model (SmolLM2's architecture) in float64 on the CPU."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=2, d_model=24, n_heads=3, d_head=8, d_mlp=48, d_vocab=D_VOCAB,
                                  n_ctx=N_CTX, act_fn="silu", gated_mlp=True, normalization_type="RMS",
                                  positional_embedding_type="rotary", final_rms=True, seed=0, device="cpu",
                                  dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model.eval()


def tokens_pair():
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, D_VOCAB, (4, N_CTX), generator=g), torch.randint(0, D_VOCAB, (4, N_CTX), generator=g)


def _run(model, clean, corrupted):
    # the logit of token 3 at the last position, minus that of token 7 at position 5 (CPU
    # tokens: patching moves them to the model's device)
    return patching.patching_run(model, clean, corrupted, lambda lg: lg[:, -1, 3].mean() - lg[:, 5, 7].mean())


def test_patching(device, dtype, three_layers):
    model, ref = on(three_layers, device, dtype), reference(three_layers)
    clean, corrupted = tokens_pair()
    run, want_run = _run(model, clean, corrupted), _run(ref, clean, corrupted)
    # A normalised effect divides a metric's rounding (of logits of size up to m) by the gap
    # between the clean and corrupted metrics: that ratio is the scale.
    logits = ref(clean).abs().max()
    scale = float(logits) / abs(want_run.clean_value - want_run.corrupted_value)
    n = 3 * (D_MODEL + N_CTX)  # three layers, each reducing over d_model and the positions
    calls = {
        "patch_heads": lambda r: patching.patch_heads(r),
        "patch_resid": lambda r: patching.patch_resid(r, positions=[2, 7]),
        "path_patch into two receiver layers": lambda r: torch.tensor(
            patching.path_patch(r, (0, 1), [(1, 0), (2, 1)], into="k")),
        "path_patch from two sender layers": lambda r: torch.tensor(
            patching.path_patch(r, [(0, 0), (1, 1)], [(2, 0)], into="v", positions=[3, 9])),
        "path_patch into the logits": lambda r: torch.tensor(patching.path_patch(r, [(1, 0)], into="logits")),
    }
    for what, call in calls.items():
        got = call(run)
        if what.startswith("patch_"):  # tensors of effects, on the model's device in its dtype
            assert_on(got, device_of(model), what, dtype)
        assert_close(got, call(want_run), dtype=dtype, n=n, what=what, scale=scale)


def test_direct_logit_attribution(device, dtype, gated):
    model, ref = on(gated, device, dtype), reference(gated)
    tokens, _ = tokens_pair()
    answer, wrong = tokens[:, -1], [5, 6, 7, 8]  # CPU ids, moved to the model's device
    got = attribution.direct_logit_attribution(model, model.run_with_cache(tokens.to(device))[1], answer, wrong)
    want = attribution.direct_logit_attribution(ref, ref.run_with_cache(tokens)[1], answer, wrong)
    assert_on(got, device, "direct_logit_attribution", dtype)
    # every part is read through the frozen norm scale: its size is want.abs_size
    n = 2 * (D_MODEL + 48) + D_MODEL
    scale = float(want.abs_size.max())
    for field in ("heads", "mlps", "embed", "bias", "unembed_bias"):
        assert_close(getattr(got, field), getattr(want, field), dtype=dtype, n=n, what=f"DLA {field}", scale=scale)
    assert_close(got.total(), want.total(), dtype=dtype, n=n, what="DLA total", scale=scale)


def test_neurons(device, dtype, gated):
    model, ref = on(gated, device, dtype), reference(gated)
    tokens, _ = tokens_pair()
    got = neurons.mlp_activations(model, tokens, [0, 1])
    want = neurons.mlp_activations(ref, tokens, [0, 1])
    assert_on(got, device, "mlp_activations", dtype)
    n = 2 * (D_MODEL + 48)
    for layer in (0, 1):
        for key in ("x", "gate", "up", "post", "out"):
            assert_close(got[layer][key], want[layer][key], dtype=dtype, n=n, what=f"layer {layer} {key}")
    # statistics in float64 on the device, from the device's activations
    post = got[1]["post"].reshape(-1, 48)
    for stat, fn in (("kurtosis", lambda x: neurons.kurtosis(x)), ("top_k_mass", lambda x: neurons.top_k_mass(x, 4))):
        value = fn(post)
        assert value.device == device and value.dtype == torch.float64
        assert_close(value, fn(post.to("cpu", torch.float64)), dtype=torch.float64, n=post.shape[0], what=stat)
    values = neurons.value_logits(model.blocks[1].mlp.W_out, model.ln_final.w, model.W_U)
    assert values.device == device and values.dtype == dtype
    assert_close(values, neurons.value_logits(ref.blocks[1].mlp.W_out, ref.ln_final.w, ref.W_U), dtype=dtype,
                 n=D_MODEL, what="value_logits")


def test_haar_rotation_on_the_device(device, dtype):
    # A CPU generator draws the same matrix whatever the device it is returned on ...
    got = neurons.haar_rotation(64, torch.Generator().manual_seed(5), dtype, device=device)
    assert got.device == device and got.dtype == dtype
    want = neurons.haar_rotation(64, torch.Generator().manual_seed(5), torch.float64)
    assert_close(got, want, dtype=dtype, n=1, what="haar_rotation returned on the device", scale=1.0)
    # ... and a generator on the device draws (and factors) there: orthogonal to QR's rounding
    U = neurons.haar_rotation(64, torch.Generator(device=device).manual_seed(5), torch.float64)
    assert U.device == device
    err = float((U.T @ U - torch.eye(64, dtype=torch.float64, device=device)).abs().max())
    assert err <= 64 * 64 * torch.finfo(torch.float64).eps, err


def test_uniform_pattern_and_icl_scores(device, dtype, three_layers):
    model = on(three_layers, device, dtype)
    uniform = heads.uniform_causal_pattern(N_CTX, dtype=dtype, device=device)
    assert uniform.device == device and uniform.dtype == dtype
    tokens, _ = tokens_pair()
    score = heads.duplicate_token_pattern_score(uniform[None, None], tokens)  # CPU tokens
    assert score.device == device
    got = icl.icl_scores(model(tokens.to(device)), tokens, (1, 4), range(8, 12))
    want = icl.icl_scores(reference(three_layers)(tokens), tokens, (1, 4), range(8, 12))
    assert got.device == device and got.dtype == torch.promote_types(dtype, torch.float32)
    # a loss is a log-softmax over d_vocab of logits summed over d_model, three layers deep
    n = 3 * (D_MODEL + N_CTX) + D_VOCAB
    assert_close(got, want, dtype=dtype, n=n, what="icl_scores", scale=float(want.abs().max()) + math.log(D_VOCAB))


def test_handbuilt_scaffold_follows_its_matrices(device):
    S = handbuilt.subspaces(6, 8, device=device)
    W_QK, W_OV = 30 * S["S_tok"].T @ S["S_prev"], 10 * S["S_tok"].T @ S["S_tok"]
    model = handbuilt.induction_scaffold(W_QK, W_OV, d_vocab=6, n_ctx=8)
    assert {p.device for p in model.parameters()} | {b.device for b in model.buffers()} == {device}
    cpu = handbuilt.induction_scaffold(W_QK.cpu(), W_OV.cpu(), d_vocab=6, n_ctx=8)
    tokens = torch.tensor([[0, 3, 1, 5, 0, 3, 1, 5], [2, 4, 0, 1, 2, 4, 0, 1]])
    got, want = heads.induction_scores(model, tokens=tokens), heads.induction_scores(cpu, tokens=tokens)
    assert got.device == device
    assert_close(got, want, dtype=torch.float64, n=6 * 2 + 8, what="scaffold induction scores", scale=1.0)


def test_smollm2_on_the_device(device, dtype):
    from circuitbook.models import pretrained as P

    try:
        P.smollm2_gguf_path()
    except RuntimeError as err:
        pytest.skip(f"SmolLM2 is not installed here: {err}")
    model, tok = P.load_smollm2(device=device, dtype=dtype, progress=False)
    placed = {t.device for t in (*model.parameters(), *model.buffers())}
    assert placed == {device}, placed
    assert {p.dtype for p in model.parameters()} == {dtype}
    ids = tok("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        got = model(ids.to(device))
    assert got.device == device and bool(torch.isfinite(got).all())
    if dtype is not torch.float32:
        return  # 30 layers in half precision: placement and finiteness only
    cpu, _ = P.load_smollm2(device="cpu", progress=False)
    with torch.no_grad():
        want = reference(cpu)(ids)
    # 30 layers, each reducing over d_model and d_mlp: a loose random-walk bound
    cfg = cpu.cfg
    assert_close(got, want, dtype=dtype, n=cfg.n_layers * (cfg.d_model + cfg.d_mlp), what="SmolLM2 logits",
                 scale=float(want.abs().max()))
