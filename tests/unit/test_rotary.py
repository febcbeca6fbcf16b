"""circuitbook.circuits.rotary_rotation and rotary_qk (chapter 5): the offset-resolved QK circuit.

Checked against two independent references: TransformerLens's own attention scores on small
random rotary models (split halves and adjacent pairs, a partial rotary_dim, grouped-query
attention), and a float64 rotation written as complex multiplication, z -> z e^{i p theta}.
"""

from __future__ import annotations

import math

import pytest
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig

from circuitbook.book import rounding_bound
from circuitbook.circuits import qk_circuit, rotary_qk, rotary_rotation


def rotary_model(*, adjacent: bool, rotary_dim: int = 8, n_kv: int | None = None, seed: int = 0):
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=32, n_heads=4, d_head=8, n_ctx=64, d_vocab=50, attn_only=True,
        normalization_type=None, positional_embedding_type="rotary", rotary_dim=rotary_dim,
        rotary_base=10000, rotary_adjacent_pairs=adjacent, n_key_value_heads=n_kv, seed=seed)
    model = HookedTransformer(cfg)
    model.eval()
    return model


def complex_rotation(x: torch.Tensor, p: float, cfg) -> torch.Tensor:
    """Rotate the row vectors ``x`` [..., d_head] as RoPE does at position ``p``, in float64,
    written independently of the library: each rotary plane as one complex number."""
    r, half = cfg.rotary_dim, cfg.rotary_dim // 2
    idx = torch.arange(half)
    a, b = (2 * idx, 2 * idx + 1) if cfg.rotary_adjacent_pairs else (idx, idx + half)
    theta = torch.tensor([cfg.rotary_base ** (-2 * m / r) for m in range(half)], dtype=torch.float64)
    z = torch.complex(x[..., a].double(), x[..., b].double()) * torch.exp(1j * p * theta)
    out = x.double().clone()
    out[..., a], out[..., b] = z.real, z.imag
    return out


@pytest.mark.parametrize("adjacent", [False, True])
@pytest.mark.parametrize("rotary_dim", [8, 4])
def test_rotation_is_the_complex_rotation(adjacent, rotary_dim):
    model = rotary_model(adjacent=adjacent, rotary_dim=rotary_dim)
    x = torch.randn(5, model.cfg.d_head, dtype=torch.float64)
    for delta in (0, 1, 7, 300):
        R = rotary_rotation(model, delta).double()
        want = complex_rotation(x, delta, model.cfg)
        # float32 R: each entry cos/sin rounded once, d_head products summed
        assert (x @ R - want).abs().max() <= rounding_bound(model.cfg.d_head + 1, float(x.abs().max()))


def test_rotations_compose_and_are_orthogonal():
    model = rotary_model(adjacent=False)
    R = rotary_rotation(model, [3, 4, 7, -3]).double()
    eye = torch.eye(model.cfg.d_head, dtype=torch.float64)
    assert torch.allclose(R[0] @ R[1], R[2], atol=rounding_bound(2 * model.cfg.d_head, 1.0))
    assert torch.allclose(R[0] @ R[0].T, eye, atol=rounding_bound(2 * model.cfg.d_head, 1.0))
    assert torch.allclose(R[0].T, R[3], atol=rounding_bound(2, 1.0))


@pytest.mark.parametrize("adjacent", [False, True])
@pytest.mark.parametrize("n_kv", [None, 2])
def test_rotary_qk_gives_transformerlens_scores(adjacent, n_kv):
    model = rotary_model(adjacent=adjacent, n_kv=n_kv, seed=1)
    cfg = model.cfg
    torch.manual_seed(0)
    tokens = torch.randint(0, cfg.d_vocab, (2, 24))
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
        x = cache["resid_pre", 0]  # no LayerNorm: the attention input is the residual stream
        n = tokens.shape[1]
        scores = cache["attn_scores", 0]  # [batch, head, query i, key j], already / sqrt(d_head)
        offsets = list(range(n))
        for head in range(cfg.n_heads):
            W = rotary_qk(model, 0, head, offsets).AB  # [n, d_model, d_model]
            got = torch.full_like(scores[:, head], float("nan"))
            for i in range(n):
                for j in range(i + 1):
                    got[:, i, j] = torch.einsum("bd,de,be->b", x[:, i], W[i - j], x[:, j])
            got = got / math.sqrt(cfg.d_head)
            causal = torch.ones(n, n, dtype=torch.bool).tril()
            err = (got[:, causal] - scores[:, head][:, causal]).abs().max()
            # the products (d_model + d_head on each side) and TransformerLens's float32 angles,
            # off by up to eps32 * p radians at position p < n, on scores of size |q| |k|
            size = float(cache["q", 0].abs().max() * cache["k", 0].abs().max() * cfg.d_head)
            bound = rounding_bound(2 * (2 * cfg.d_model + cfg.d_head) + 2 * n, size)
            assert err <= bound, (head, float(err), bound)


def test_grouped_query_heads_share_their_key_head():
    model = rotary_model(adjacent=False, n_kv=2)  # 4 query heads, 2 key heads: heads 0, 1 share
    a, b, c = (rotary_qk(model, 0, h, [0, 2]) for h in (0, 1, 2))
    assert torch.equal(a.B, b.B) and not torch.equal(a.B, c.B)
    assert torch.allclose(rotary_qk(model, 0, 3, 0).AB, qk_circuit(model, 0, 3).AB, atol=1e-6)


def test_a_config_gives_the_models_rotation_in_the_asked_dtype():
    model = rotary_model(adjacent=True)
    from_cfg = rotary_rotation(model.cfg, [0, 5, -2], dtype=torch.float64)
    assert from_cfg.dtype == torch.float64 and from_cfg.device.type == "cpu"
    assert rotary_rotation(model.cfg, 5).dtype == model.cfg.dtype
    from_model = rotary_rotation(model, [0, 5, -2])
    assert from_model.dtype == model.W_E.dtype
    # the same float64 angles, rounded once to float32 on the model's side
    assert (from_cfg - from_model.double()).abs().max() <= rounding_bound(1, 1.0)
    x = torch.randn(3, model.cfg.d_head, dtype=torch.float64)
    want = complex_rotation(x, -2, model.cfg)
    # float64 on both sides: the angle, cos/sin, and d_head products, at |x|
    bound = rounding_bound(model.cfg.d_head + 4, float(x.abs().max()), torch.float64)
    assert (x @ from_cfg[2] - want).abs().max() <= bound


def test_bad_input_is_named():
    shortformer = HookedTransformer(HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_head=8, n_ctx=8, d_vocab=10, attn_only=True,
        positional_embedding_type="shortformer"))
    with pytest.raises(ValueError, match="needs a rotary model.*shortformer"):
        rotary_qk(shortformer, 0, 0, [1])
    model = rotary_model(adjacent=False)
    with pytest.raises(ValueError, match="give one head"):
        rotary_qk(model, 0, None, [1])
    with pytest.raises(ValueError, match="non-empty sequence"):
        rotary_rotation(model, [])
    with pytest.raises(ValueError, match="sequence of ints"):
        rotary_rotation(model, [1.5])
    with pytest.raises(ValueError, match="head 9 is out of range"):
        rotary_qk(model, 0, 9, [1])
