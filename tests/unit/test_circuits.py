"""circuitbook.circuits against dense float64 products, TransformerLens, and the real forward pass."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformer_lens import FactoredMatrix

from circuitbook import circuits
from conftest import build_model

CIRCUITS = ["qk_circuit", "ov_circuit", "full_qk_circuit", "full_ov_circuit", "pos_qk_circuit"]


def dense_reference(model, name: str, layer: int, head: int) -> torch.Tensor:
    """The circuit multiplied out explicitly from the model's parameters, one head."""
    a = model.blocks[layer].attn
    W_Q, W_K, W_V, W_O = a.W_Q[head], a.W_K[head], a.W_V[head], a.W_O[head]
    W_E, W_U, W_pos = model.W_E, model.W_U, model.W_pos
    return {
        "qk_circuit": lambda: W_Q @ W_K.T,
        "ov_circuit": lambda: W_V @ W_O,
        "full_qk_circuit": lambda: W_E @ W_Q @ W_K.T @ W_E.T,
        "full_ov_circuit": lambda: W_E @ W_V @ W_O @ W_U,
        "pos_qk_circuit": lambda: W_pos @ W_Q @ W_K.T @ W_pos.T,
    }[name]()


@pytest.mark.parametrize("name", CIRCUITS)
def test_each_head_matches_dense_product(name):
    model = build_model(2, d_model=12, n_heads=3, d_head=4, d_vocab=15, n_ctx=9)
    fn = getattr(circuits, name)
    for layer in range(2):
        stacked = fn(model, layer)
        assert isinstance(stacked, FactoredMatrix)
        assert stacked.mdim == 4  # kept factored through d_head, never widened
        for head in range(3):
            want = dense_reference(model, name, layer, head)
            torch.testing.assert_close(fn(model, layer, head).AB, want, rtol=1e-12, atol=1e-12)
            torch.testing.assert_close(stacked.AB[head], want, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    n_heads=st.integers(1, 3),
    d_head=st.integers(1, 6),
    d_model=st.integers(2, 10),
    d_vocab=st.integers(2, 12),
    n_ctx=st.integers(1, 8),
    seed=st.integers(0, 10_000),
    data=st.data(),
)
def test_circuits_match_dense_on_random_shapes(n_layers, n_heads, d_head, d_model, d_vocab, n_ctx, seed, data):
    model = build_model(
        n_layers, d_model=d_model, n_heads=n_heads, d_head=d_head, d_vocab=d_vocab, n_ctx=n_ctx, seed=seed
    )
    layer = data.draw(st.integers(0, n_layers - 1))
    head = data.draw(st.integers(0, n_heads - 1))
    name = data.draw(st.sampled_from(CIRCUITS))
    got = getattr(circuits, name)(model, layer, head)
    torch.testing.assert_close(got.AB, dense_reference(model, name, layer, head), rtol=1e-10, atol=1e-10)


def test_matches_transformer_lens_qk_and_ov():
    model = build_model(3, d_model=16, n_heads=4, d_head=3)
    for layer in range(3):
        torch.testing.assert_close(circuits.qk_circuit(model, layer).AB, model.QK[layer].AB)
        torch.testing.assert_close(circuits.ov_circuit(model, layer).AB, model.OV[layer].AB)


def test_direct_path_is_W_E_W_U_factored_through_d_model():
    model = build_model(1, d_model=6, d_vocab=30)
    path = circuits.direct_path(model)
    assert path.shape == (30, 30) and path.mdim == 6
    torch.testing.assert_close(path.AB, model.W_E @ model.W_U)


def test_full_circuits_stay_factored_and_allow_row_slices():
    model = build_model(1, d_model=8, n_heads=2, d_head=3, d_vocab=50)
    full = circuits.full_ov_circuit(model, 0)
    assert full.shape == (2, 50, 50) and full.A.shape == (2, 50, 3) and full.B.shape == (2, 3, 50)
    rows = full.A[:, [4, 7]] @ full.B  # two query tokens, every output token
    torch.testing.assert_close(rows, full.AB[:, [4, 7]])


def test_full_qk_circuit_is_the_real_layer0_attention_score():
    """With W_pos and the Q/K biases zeroed, layer-0 scores are token-token entries of W_E W_QK W_E^T."""
    model = build_model(1, d_model=10, n_heads=2, d_head=4, d_vocab=13, n_ctx=7)
    with torch.no_grad():
        model.W_pos.zero_()
        model.blocks[0].attn.b_Q.zero_()
        model.blocks[0].attn.b_K.zero_()
    tokens = torch.randint(0, 13, (3, 7), generator=torch.Generator().manual_seed(0))
    _, cache = model.run_with_cache(tokens)
    scores = cache["attn_scores", 0]  # [batch, head, q, k], causal-masked
    full = circuits.full_qk_circuit(model, 0).AB / math.sqrt(4)
    want = full[:, tokens[:, :, None], tokens[:, None, :]].permute(1, 0, 2, 3)  # [batch, head, q, k]
    mask = torch.ones(7, 7, dtype=torch.bool).tril()
    torch.testing.assert_close(scores[..., mask], want[..., mask])


def test_pos_qk_circuit_works_for_standard_positional_embeddings():
    model = build_model(1, positional="standard", n_ctx=5)
    got = circuits.pos_qk_circuit(model, 0, 1).AB
    torch.testing.assert_close(got, dense_reference(model, "pos_qk_circuit", 0, 1))


def test_circuits_keep_the_model_dtype():
    model = build_model(1, dtype=torch.float32)
    for name in CIRCUITS:
        assert getattr(circuits, name)(model, 0).AB.dtype == torch.float32


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CIRCUITS)
def test_layer_out_of_range_is_named(name):
    model = build_model(2)
    with pytest.raises(ValueError, match="layer 2 is out of range"):
        getattr(circuits, name)(model, 2)
    with pytest.raises(ValueError, match="head 5 is out of range"):
        getattr(circuits, name)(model, 0, 5)
    with pytest.raises(TypeError, match="layer must be an int"):
        getattr(circuits, name)(model, 0.5)


def test_pos_qk_circuit_without_W_pos_is_refused():
    import warnings

    from transformer_lens import HookedTransformer, HookedTransformerConfig

    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, d_head=8, d_vocab=10, n_ctx=8, attn_only=True,
        normalization_type=None, positional_embedding_type="rotary", rotary_dim=8, act_fn=None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = HookedTransformer(cfg)
    with pytest.raises(ValueError, match="rotary"):
        circuits.pos_qk_circuit(model, 0)
    assert circuits.qk_circuit(model, 0).shape == (2, 16, 16)  # the other circuits still work


@pytest.mark.parametrize("name", CIRCUITS + ["direct_path"])
def test_mismatched_dtypes_and_devices_are_named(name):
    args = () if name == "direct_path" else (0,)
    model = build_model(1, dtype=torch.float32)
    with torch.no_grad():
        model.embed.W_E.data = model.embed.W_E.data.double()
    with pytest.raises(TypeError, match=f"{name} needs every weight in one dtype: .* but embed.W_E has torch.float64"):
        getattr(circuits, name)(model, *args)
    model = build_model(1, dtype=torch.float32)
    with torch.no_grad():
        model.embed.W_E = torch.nn.Parameter(model.embed.W_E.detach().to("meta"))  # a 2nd device, no GPU
    with pytest.raises(ValueError, match="needs every weight on one device: .* is on cpu but embed.W_E is on meta"):
        getattr(circuits, name)(model, *args)
