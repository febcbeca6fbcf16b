"""circuitbook.composition against TransformerLens, dense float64 products and a hand-built model."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitbook import composition
from circuitbook.composition import composition_scores, random_baseline, virtual_ov
from conftest import build_induction_model, build_model


def dense_scores(model, kind: str) -> torch.Tensor:
    """Every pair multiplied out as d_model x d_model matrices, in float64, with explicit loops."""
    L, n = model.cfg.n_layers, model.cfg.n_heads
    W_Q, W_K, W_V, W_O = (w.detach().double() for w in (model.W_Q, model.W_K, model.W_V, model.W_O))
    out = torch.zeros(L, n, L, n, dtype=torch.float64)
    for l1 in range(L):
        for h1 in range(n):
            W_A = W_V[l1, h1] @ W_O[l1, h1]
            for l2 in range(l1 + 1, L):
                for h2 in range(n):
                    W_QK = W_Q[l2, h2] @ W_K[l2, h2].T
                    W_B = {"Q": W_QK, "K": W_QK.T, "V": W_V[l2, h2] @ W_O[l2, h2]}[kind]
                    out[l1, h1, l2, h2] = (W_A @ W_B).norm() / (W_A.norm() * W_B.norm())
    return out


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
@pytest.mark.parametrize("d_model", [12, 70])  # one Gram block (composition._BLOCK = 96), full or partial
def test_matches_transformer_lens_all_composition_scores(kind, d_model):
    model = build_model(3, d_model=d_model, n_heads=2, d_head=5, dtype=torch.float64)
    torch.testing.assert_close(composition_scores(model, kind), model.all_composition_scores(kind), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
@pytest.mark.parametrize("d_model", [200, 768])
def test_off_diagonal_gram_blocks_match_transformer_lens_and_dense(kind, d_model):
    # d_model > composition._BLOCK (96): the Gram matrices are split into blocks and each
    # off-diagonal block (i < j) counts twice (G and H are symmetric). 200 = 96 + 96 + 8 has a
    # partial last block; 768 (GPT-2 small) has 8 full blocks.
    assert d_model > composition._BLOCK
    model = build_model(2, d_model=d_model, n_heads=2, d_head=8, d_vocab=10, dtype=torch.float64)
    got = composition_scores(model, kind)
    torch.testing.assert_close(got, model.all_composition_scores(kind), rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(got, dense_scores(model, kind), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_many_layers_match_transformer_lens(kind):
    # 9 layers: the upper triangle is computed in several rectangles of writer layers.
    model = build_model(9, d_model=10, n_heads=2, d_head=3, dtype=torch.float64)
    torch.testing.assert_close(composition_scores(model, kind), model.all_composition_scores(kind), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_float32_matches_transformer_lens_within_1e_5_relative(kind):
    model = build_model(3, d_model=80, n_heads=2, d_head=16, dtype=torch.float32, scale=0.0)
    got, want = composition_scores(model, kind), model.all_composition_scores(kind)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    n_heads=st.integers(1, 3),
    d_head=st.integers(1, 5),
    d_model=st.integers(2, 70),
    seed=st.integers(0, 10_000),
    kind=st.sampled_from("QKV"),
)
def test_matches_dense_reference_on_random_shapes(n_layers, n_heads, d_head, d_model, seed, kind):
    model = build_model(n_layers, d_model=d_model, n_heads=n_heads, d_head=d_head, seed=seed)
    torch.testing.assert_close(composition_scores(model, kind), dense_scores(model, kind), rtol=1e-9, atol=1e-12)


def test_zero_unless_first_head_is_in_an_earlier_layer():
    model = build_model(3, n_heads=2)
    scores = composition_scores(model, "K")
    assert scores.shape == (3, 2, 3, 2)
    for l1 in range(3):
        for l2 in range(3):
            block = scores[l1, :, l2, :]
            assert (block > 0).all() if l1 < l2 else (block == 0).all()


def test_one_layer_model_has_nothing_to_compose():
    scores = composition_scores(build_model(1, n_heads=3), "V")
    assert scores.shape == (1, 3, 1, 3) and not scores.any()


def test_all_zero_head_scores_zero_not_nan():
    model = build_model(2)
    with torch.no_grad():
        model.blocks[0].attn.W_O[1].zero_()
    scores = composition_scores(model, "V")
    assert not scores.isnan().any()
    assert (scores[0, 1] == 0).all() and (scores[0, 0, 1] > 0).all()


def test_hand_built_induction_circuit_is_the_top_k_composition():
    model = build_induction_model()
    k = composition_scores(model, "K")
    top = torch.unravel_index(k.argmax(), k.shape)
    assert tuple(int(i) for i in top) == (0, 0, 1, 0)  # previous-token head -> induction head
    # The heads live in orthogonal subspaces: 0.0 writes only where 1.0's keys read.
    assert composition_scores(model, "Q")[0, 0, 1, 0] < 1e-12
    assert composition_scores(model, "V")[0, 0, 1, 0] < 1e-12
    # Rank-32 identity maps compose with score 1/sqrt(32), well above random heads of this size.
    assert k[0, 0, 1, 0] == pytest.approx(1 / math.sqrt(32), rel=1e-6)
    assert k[0, 0, 1, 0] > 1.5 * random_baseline(model.cfg.d_model, model.cfg.d_head, n_samples=128)


# --- random baseline --------------------------------------------------------------------------


@pytest.mark.parametrize("kind, init", [("Q", "gaussian"), ("K", "orthogonal"), ("V", "uniform")])
def test_random_baseline_is_near_one_over_sqrt_d_model(kind, init):
    # For rotation-invariant heads E[score^2] = 1/d_model exactly; the mean sits just below.
    got = random_baseline(256, 16, n_samples=96, kind=kind, init=init)
    assert got == pytest.approx(1 / math.sqrt(256), rel=0.03)


def test_random_baseline_is_seeded_and_matches_a_dense_measurement():
    a = random_baseline(40, 4, n_samples=64, seed=3)
    assert a == random_baseline(40, 4, n_samples=64, seed=3)
    assert a != random_baseline(40, 4, n_samples=64, seed=4)
    # The same mean measured through dense random heads of a model of that shape.
    dense = []
    for seed in range(40):
        model = build_model(2, d_model=40, n_heads=1, d_head=4, seed=seed, scale=0.0)
        dense.append(float(dense_scores(model, "K")[0, 0, 1, 0]))
    assert a == pytest.approx(sum(dense) / len(dense), rel=0.1)


def test_random_baseline_bad_arguments():
    with pytest.raises(ValueError, match="unknown init 'xavier'"):
        random_baseline(64, 8, init="xavier")
    with pytest.raises(ValueError, match="unknown composition kind 'O'"):
        random_baseline(64, 8, kind="O")
    with pytest.raises(ValueError, match="must be >= 1"):
        random_baseline(0, 8)


# --- virtual OV -------------------------------------------------------------------------------


def test_virtual_ov_is_the_product_of_two_ov_circuits_earlier_first():
    model = build_model(3, d_model=12, n_heads=2, d_head=3)
    v = virtual_ov(model, (0, 1), (2, 0))
    want = model.W_V[0, 1] @ model.W_O[0, 1] @ model.W_V[2, 0] @ model.W_O[2, 0]
    assert v.shape == (12, 12) and v.mdim == 3
    torch.testing.assert_close(v.AB, want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(v.AB, (model.OV[0, 1] @ model.OV[2, 0]).AB)


def test_virtual_ov_needs_the_first_head_earlier():
    model = build_model(2)
    with pytest.raises(ValueError, match="earlier layer"):
        virtual_ov(model, (1, 0), (0, 1))
    with pytest.raises(ValueError, match="earlier layer"):
        virtual_ov(model, (1, 0), (1, 1))
    with pytest.raises(ValueError, match="layer 4 is out of range"):
        virtual_ov(model, (0, 0), (4, 0))
    with pytest.raises(TypeError, match=r"first must be a \(layer, head\) pair"):
        virtual_ov(model, 0, (1, 0))


def test_unknown_kind_is_named():
    model = build_model(2)
    with pytest.raises(ValueError, match="unknown composition kind 'X'"):
        composition_scores(model, "X")
    assert torch.equal(composition_scores(model, "k"), composition_scores(model, "K"))  # case-insensitive


def test_mismatched_dtypes_are_named():
    model = build_model(2, dtype=torch.float32)
    with torch.no_grad():
        model.blocks[1].attn.W_K.data = model.blocks[1].attn.W_K.data.double()
    with pytest.raises(TypeError, match="blocks.1.attn.W_K has torch.float64 but embed.W_E has torch.float32"):
        composition_scores(model, "K")
    with pytest.raises(TypeError, match="virtual_ov needs every weight in one dtype"):
        virtual_ov(model, (0, 0), (1, 0))


def test_module_lists_kinds():
    assert composition.KINDS == ("Q", "K", "V")
