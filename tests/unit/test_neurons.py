"""circuitbook.neurons against dense float64 hand computations on a tiny hand-built SwiGLU
model (TransformerLens, gated MLP, RMSNorm) and against hand-derived statistics."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from circuitbook.neurons import (haar_rotation, kurtosis, mlp_activations, top_activations,
                                 top_k_mass, value_logits)

EPS64 = torch.finfo(torch.float64).eps


def tiny_swiglu(n_layers=2, seed=0):
    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(n_layers=n_layers, d_model=12, n_heads=3, d_head=4, d_mlp=20,
                                  d_vocab=17, n_ctx=9, act_fn="silu", gated_mlp=True,
                                  normalization_type="RMS", positional_embedding_type="rotary",
                                  final_rms=True, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():  # nonzero biases and gains, so that each one is tested
            p.copy_(torch.randn(p.shape, generator=g) * 0.5 + (1.0 if p.ndim == 1 else 0.0))
    return model.eval()


def test_mlp_activations_match_a_float64_swiglu_by_hand():
    model = tiny_swiglu()
    tokens = torch.randint(0, 17, (3, 9), generator=torch.Generator().manual_seed(1))
    both = mlp_activations(model, tokens, [0, 1])
    assert sorted(both) == [0, 1]
    for layer in range(2):
        got = mlp_activations(model, tokens, layer)
        for key in got:
            assert torch.equal(got[key], both[layer][key])
        mlp = model.blocks[layer].mlp
        # the MLP's input by hand from the residual stream: x / rms(x) * w
        _, cache = model.run_with_cache(tokens)
        r = cache[f"blocks.{layer}.hook_resid_mid"].double()
        w = model.blocks[layer].ln2.w.double()
        x = r / torch.sqrt(r.pow(2).mean(-1, keepdim=True) + model.cfg.eps) * w
        gate = x @ mlp.W_gate.double()
        up = x @ mlp.W_in.double()
        post = gate / (1 + torch.exp(-gate)) * up + mlp.b_in.double()
        out = post @ mlp.W_out.double() + mlp.b_out.double()
        for key, want in [("x", x), ("gate", gate), ("up", up), ("post", post), ("out", out)]:
            assert got[key].shape == want.shape
            scale = float(want.detach().abs().max())
            assert float((got[key].double() - want).abs().max()) < 1e-5 * max(scale, 1.0), key


def test_mlp_activations_refuse_a_wrong_layer_and_an_ungated_mlp():
    model = tiny_swiglu(n_layers=1)
    with pytest.raises(ValueError, match="layer"):
        mlp_activations(model, torch.zeros(1, 3, dtype=torch.long), 1)
    model.cfg.gated_mlp = False
    with pytest.raises(ValueError, match="gated"):
        mlp_activations(model, torch.zeros(1, 3, dtype=torch.long), 0)


def ks_distance(samples: torch.Tensor, cdf) -> float:
    """Kolmogorov-Smirnov distance sup |F_n - F| of ``samples`` [n] from the law with ``cdf``."""
    x, _ = samples.to(torch.float64).sort()
    n = x.numel()
    F = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(i / n - F, F - (i - 1) / n).max())


# Kolmogorov's limit law: P(sqrt(n) D_n > 1.95) = 0.001. The draws are seeded, so each check is
# deterministic; the level says how unlikely a pass was had the law been wrong by chance.
KS_999 = 1.95


def haar_samples(sampler, count=4000, n=3):
    g = torch.Generator().manual_seed(0)
    return torch.stack([sampler(n, g) for _ in range(count)])


def haar_law_distances(Q: torch.Tensor) -> dict[str, float]:
    """Distances of 3 x 3 samples [count, 3, 3] from the Haar law on O(3), in units of the KS
    critical value at level 0.001 (below 1: consistent with Haar):

    - each diagonal entry is the first coordinate of a uniform point on the sphere S^2, which
      is uniform on [-1, 1] (Archimedes): CDF (x + 1) / 2;
    - det Q = +-1 with probability 1/2 each (the two cosets of SO(3)), a binomial count;
    - R = det(Q) Q is Haar on SO(3), whose rotation angle theta (tr R = 1 + 2 cos theta) has
      density (1 - cos theta) / pi on [0, pi]: CDF (theta - sin theta) / pi.
    """
    count = Q.shape[0]
    crit = KS_999 / count**0.5
    out = {f"diagonal {i}": ks_distance(Q[:, i, i], lambda x: (x + 1) / 2) / crit for i in range(3)}
    det = torch.linalg.det(Q)
    # binomial: |#(+1) - count/2| / (sqrt(count)/2) is ~N(0, 1); 3.29 is its two-sided 0.001 level
    out["det balance"] = abs(float((det > 0).sum()) - count / 2) / (count**0.5 / 2) / 3.29
    R = det[:, None, None] * Q
    theta = torch.arccos(((R.diagonal(dim1=-2, dim2=-1).sum(-1) - 1) / 2).clamp(-1, 1))
    out["rotation angle"] = ks_distance(theta, lambda t: (t - torch.sin(t)) / math.pi) / crit
    return out


def test_haar_rotation_is_orthogonal():
    g = torch.Generator().manual_seed(0)
    q = haar_rotation(30, g, dtype=torch.float64)
    # QR's Householder reflections are backward stable: orthogonal to a few n eps
    assert float((q @ q.T - torch.eye(30, dtype=torch.float64)).abs().max()) < 30 * 30 * EPS64
    assert haar_rotation(30, torch.Generator().manual_seed(0)).dtype == torch.float32


def test_haar_rotation_follows_the_haar_law():
    far = {k: v for k, v in haar_law_distances(haar_samples(lambda n, g: haar_rotation(n, g, torch.float64))).items()
           if v >= 1}
    assert not far, f"not Haar (distance / critical value at level 0.001): {far}"


def test_the_haar_check_catches_a_missing_sign_fix():
    # Power of the check above: plain QR of a Gaussian, without Q diag(sign(diag R)), is the
    # classic wrong sampler (LAPACK leaves Q[0, 0] <= 0 always).
    def qr_only(n, g):
        return torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64)).Q

    far = haar_law_distances(haar_samples(qr_only))
    assert far["diagonal 0"] > 10 and far["rotation angle"] > 1, far


def test_haar_rotation_devices_and_seeds():
    # One seed, one matrix, wherever it is returned: drawn on the generator's device.
    a = haar_rotation(5, torch.Generator().manual_seed(3), torch.float64)
    b = haar_rotation(5, torch.Generator().manual_seed(3), torch.float64, device="meta")
    assert b.device == torch.device("meta") and b.dtype == torch.float64 and b.shape == (5, 5)
    assert haar_rotation(4, device="meta").device == torch.device("meta")  # no generator: drawn there
    with torch.device("meta"):  # nothing follows an ambient default device
        c = haar_rotation(5, torch.Generator().manual_seed(3), torch.float64)
    assert c.device == torch.device("cpu") and torch.equal(a, c)
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        haar_rotation(0)
    with pytest.raises(TypeError, match="floating"):
        haar_rotation(3, dtype=torch.int64)
    with pytest.raises(TypeError, match="generator"):
        haar_rotation(3, 7)
    with pytest.raises(ValueError, match="not a torch device"):
        haar_rotation(3, device="gpu")


def test_kurtosis_by_hand():
    coin = torch.tensor([1.0, -1.0] * 50)
    assert float(kurtosis(coin)) == pytest.approx(1.0)
    # one spike among n - 1 zeros: mean 1/n, fourth and second central moments by hand
    n = 10
    spike = torch.zeros(n)
    spike[3] = 1.0
    m2 = ((1 - 1 / n) ** 2 + (n - 1) / n**2) / n
    m4 = ((1 - 1 / n) ** 4 + (n - 1) / n**4) / n
    assert float(kurtosis(spike)) == pytest.approx(m4 / m2**2)
    gauss = torch.randn(200_000, 2, generator=torch.Generator().manual_seed(0))
    k = kurtosis(gauss, dim=0)
    assert k.shape == (2,) and torch.allclose(k, torch.full((2,), 3.0, dtype=torch.float64), atol=0.05)


def test_top_k_mass_by_hand():
    x = torch.tensor([[3.0, -4.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    assert top_k_mass(x, 1).tolist() == pytest.approx([16 / 26, 0.25])
    assert top_k_mass(x, 2).tolist() == pytest.approx([25 / 26, 0.5])
    assert top_k_mass(x, 4).tolist() == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError):
        top_k_mass(x, 5)


def test_top_activations_against_a_sorted_list():
    acts = torch.randn(4, 7, generator=torch.Generator().manual_seed(2))
    values, where = top_activations(acts, 5)
    listed = sorted(((float(acts[b, p]), b, p) for b in range(4) for p in range(7)), reverse=True)[:5]
    assert values.tolist() == pytest.approx([v for v, _, _ in listed])
    assert where.tolist() == [[b, p] for _, b, p in listed]


def test_value_logits_dense_float64():
    g = torch.Generator().manual_seed(3)
    W_out, w, W_U = torch.randn(5, 6, generator=g), torch.randn(6, generator=g), torch.randn(6, 11, generator=g)
    got = value_logits(W_out, w, W_U)
    want = torch.tensor([[math.fsum(float(W_out[n, m]) * float(w[m]) * float(W_U[m, t]) for m in range(6))
                          for t in range(11)] for n in range(5)])
    assert float((got.double() - want.double()).abs().max()) < 1e-5
    assert torch.allclose(value_logits(W_out, None, W_U), W_out @ W_U)


def test_bad_input_is_named():
    """Each of these once failed deep in TransformerLens or torch, or returned NaN silently."""
    model = tiny_swiglu(n_layers=2)
    tokens = torch.zeros(1, 3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"token ids must lie in 0\.\.16 \(d_vocab=17\); got min 0, max 17"):
        mlp_activations(model, torch.tensor([[0, 17, 2]]), 0)
    with pytest.raises(ValueError, match=r"layers is empty: give at least one layer index \(0\.\.1\)"):
        mlp_activations(model, tokens, [])
    with pytest.raises(ValueError, match=r"layer 2 is out of range: .*valid layers are 0\.\.1"):
        mlp_activations(model, tokens, [0, 2])
    with pytest.raises(TypeError, match="layer must be an integer"):
        mlp_activations(model, tokens, 1.0)
    # a 0-dim tensor is one layer, as an int is; a 1-dim tensor a sequence of layers
    one = mlp_activations(model, tokens, torch.tensor(1))
    assert set(one) == {"x", "gate", "up", "post", "out"}
    assert sorted(mlp_activations(model, tokens, torch.tensor([1, 0]))) == [0, 1]

    acts = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 6\] \(acts \(2, 3\) holds 6 entries\), got 7"):
        top_activations(acts, 7)
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 6\]"):
        top_activations(acts, 0)

    W_out, W_U = torch.randn(5, 6), torch.randn(6, 11)
    with pytest.raises(ValueError, match=r"W_U must be \[d_model, d_vocab\] with d_model = 6.*did you pass W_U\.T\?"):
        value_logits(W_out, None, W_U.T)
    with pytest.raises(ValueError, match=r"final_norm_w must be the final norm's gain \[d_model\] = \[6\]"):
        value_logits(W_out, torch.ones(11), W_U)

    # a constant coordinate has no kurtosis (0 / 0): refused, not NaN
    x = torch.randn(50, 3, generator=torch.Generator().manual_seed(1))
    x[:, 1] = 2.5
    with pytest.raises(ValueError, match=r"undefined \(0 / 0\) for a constant coordinate: 1 of 3 .*flat index 1"):
        kurtosis(x, dim=0)
    with pytest.raises(ValueError, match="at least 2 values"):
        kurtosis(torch.ones(1, 4), dim=0)
