"""circuitbook.composition against TransformerLens, dense float64 products and a hand-built model."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from circuitbook import composition
from circuitbook.composition import composition_scores, random_baseline, virtual_ov
from circuitbook.neurons import haar_rotation
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

EPS64 = torch.finfo(torch.float64).eps
# A seeded Monte-Carlo mean is compared with its exact value within Z standard errors (the
# sample standard deviation over sqrt(n)); by the CLT a correct estimator lands outside with
# probability 2 * Phi(-5) = 6e-7, and the seeds are fixed, so the test is deterministic.
Z = 5.0


def dense_factor_scores(V, O, P, Q) -> torch.Tensor:
    """The old random_baseline's computation: every pair multiplied out as d_model x d_model."""
    W_A, W_B = V @ O, P @ Q.mT  # [n, d_model, d_model]
    return (W_A @ W_B).norm(dim=(-2, -1)) / (W_A.norm(dim=(-2, -1)) * W_B.norm(dim=(-2, -1)))


def assert_mean_within_z_standard_errors(samples: torch.Tensor, exact: float):
    mean, se = float(samples.mean()), float(samples.std()) / math.sqrt(samples.numel())
    assert abs(mean - exact) <= Z * se, f"mean {mean:.6g} vs exact {exact:.6g}: off by more than {Z} SE ({se:.3g})"
    return mean, se


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
@pytest.mark.parametrize("init", ["gaussian", "uniform", "orthogonal"])
def test_random_scores_match_dense_float64_on_the_same_samples(kind, init, monkeypatch):
    # Force several chunks (4, 4, 2 samples) so the chunking is exercised too.
    d_model, d_head, n = 24, 3, 10
    monkeypatch.setattr(composition, "_CHUNK_ENTRIES", 4 * d_model * d_head)
    got = composition.random_scores(d_model, d_head, n_samples=n, kind=kind, init=init, seed=7, device="cpu")
    g = torch.Generator().manual_seed(7)
    chunks = list(composition._random_heads(d_model, d_head, n, init, kind, g))
    assert [c[0].shape[0] for c in chunks] == [4, 4, 2]
    want = torch.cat([dense_factor_scores(*c) for c in chunks])
    # float64 sums over d_model and d_head, chained a few times: (d_model + 2 d_head) * eps per
    # product, 4 products, halved again by the square root; 4x margin.
    torch.testing.assert_close(got, want, rtol=16 * (d_model + 2 * d_head) * EPS64, atol=0)
    assert got.dtype == torch.float64 and got.shape == (n,)


def test_random_baseline_is_the_mean_of_random_scores_and_seeded():
    a = random_baseline(40, 4, n_samples=64, seed=3, device="cpu")
    assert a == float(composition.random_scores(40, 4, n_samples=64, seed=3, device="cpu").mean())
    assert a == random_baseline(40, 4, n_samples=64, seed=3, device="cpu")
    assert a != random_baseline(40, 4, n_samples=64, seed=4, device="cpu")


def test_gram_route_matches_the_old_dense_baseline_at_gpt2_width():
    # d_model 768, where the old code built [n, 768, 768] tensors: at 8 samples it still could.
    g = torch.Generator().manual_seed(0)
    ((V, O, P, Q),) = composition._random_heads(768, 64, 8, "gaussian", "K", g)
    torch.testing.assert_close(composition._factor_scores(V, O, P, Q), dense_factor_scores(V, O, P, Q),
                               rtol=16 * (768 + 2 * 64) * EPS64, atol=0)


@pytest.mark.parametrize("kind, init, d_model, d_head", [
    ("Q", "gaussian", 32, 4), ("K", "orthogonal", 32, 4), ("V", "gaussian", 8, 1), ("K", "gaussian", 16, 16),
])
def test_monte_carlo_mean_square_is_the_exact_one_over_d_model(kind, init, d_model, d_head):
    s = composition.random_scores(d_model, d_head, n_samples=4000, kind=kind, init=init, seed=11, device="cpu")
    exact = composition.expected_squared_score(d_model)
    assert exact == 1 / d_model
    mean, se = assert_mean_within_z_standard_errors(s.square(), exact)
    # The test has power: the same bound rejects 1/(d_model + 2), a 6-20% smaller value.
    assert abs(mean - 1 / (d_model + 2)) > Z * se
    # Jensen: the mean score is below sqrt(E score^2) = 1/sqrt(d_model), within its own error.
    assert float(s.mean()) <= 1 / math.sqrt(d_model) + Z * float(s.std()) / math.sqrt(s.numel())


@pytest.mark.parametrize("kind, init", [("Q", "gaussian"), ("K", "orthogonal"), ("V", "uniform")])
def test_random_baseline_is_below_its_jensen_bound_within_its_error(kind, init):
    s = composition.random_scores(256, 16, n_samples=96, kind=kind, init=init, device="cpu")
    se = float(s.std()) / math.sqrt(s.numel())
    assert float(s.mean()) <= 1 / math.sqrt(256) + Z * se
    assert random_baseline(256, 16, n_samples=96, kind=kind, init=init, device="cpu") == float(s.mean())


def test_rank_one_heads_mean_score_is_the_exact_mean_absolute_cosine():
    # With d_head 1 the score is |cos| of two independent uniform directions (W_O^A row and
    # the reader's W_Q column), whose mean is Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) exactly:
    # about sqrt(2 / (pi d)), so 20% below the Jensen bound 1/sqrt(d), which it does not reach.
    d = 64
    s = composition.random_scores(d, 1, n_samples=4000, kind="Q", seed=5, device="cpu")
    exact = math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)
    mean, se = assert_mean_within_z_standard_errors(s, exact)
    assert mean < 1 / math.sqrt(d) - Z * se


def test_random_baseline_never_forms_a_d_model_squared_tensor():
    # Record every tensor torch creates while the baseline runs (a dispatch mode sees each op's
    # output). The old code made [n, d_model, d_model] tensors (16.7 M entries here); the Gram
    # route's largest is one chunk of one factor.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Largest(TorchDispatchMode):
        numel = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    Largest.numel = max(Largest.numel, t.numel())
            return out

    n, d_model, d_head = 256, 256, 16
    with Largest():
        composition.random_scores(d_model, d_head, n_samples=n, device="cpu")
    assert 0 < Largest.numel <= composition._CHUNK_ENTRIES
    assert Largest.numel <= n * d_model * d_head == n * d_model * d_model // 16


def test_random_baseline_bad_arguments():
    with pytest.raises(ValueError, match="unknown init 'xavier'"):
        random_baseline(64, 8, init="xavier")
    with pytest.raises(ValueError, match="unknown composition kind 'O'"):
        random_baseline(64, 8, kind="O")
    with pytest.raises(ValueError, match="must be >= 1"):
        random_baseline(0, 8)
    with pytest.raises(ValueError, match="d_model must be >= 1"):
        composition.expected_squared_score(0)


# --- rotated baseline -------------------------------------------------------------------------


def rotated_copy(model, U):
    """A float64 copy of ``model`` whose every W_O is replaced by W_O U."""
    import copy

    rotated = copy.deepcopy(model)
    with torch.no_grad():
        for block in rotated.blocks:
            block.attn.W_O.copy_(block.attn.W_O @ U)
    return rotated


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_rotated_baseline_is_composition_of_the_rotated_model_and_keeps_singular_values(kind):
    model = build_model(3, d_model=12, n_heads=2, d_head=4, seed=5)
    null = composition.rotated_baseline(model, kind, n_samples=3, seed=2)
    assert null.shape == (3, 3, 2, 3, 2) and null.dtype == torch.float64
    g = torch.Generator().manual_seed(2)
    for s in range(3):
        U = haar_rotation(12, g, torch.float64)
        torch.testing.assert_close(U.T @ U, torch.eye(12, dtype=torch.float64), rtol=0, atol=24 * 12 * EPS64)
        rotated = rotated_copy(model, U)
        # Every head keeps its spectrum: the singular values of W_OV and W_QK are unchanged.
        for attr in ("OV", "QK"):
            torch.testing.assert_close(torch.linalg.svdvals(getattr(rotated, attr).AB),
                                       torch.linalg.svdvals(getattr(model, attr).AB), rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(null[s], dense_scores(rotated, kind), rtol=1e-9, atol=1e-12)
    assert not torch.equal(null[0], null[1])  # each sample draws its own rotation


def test_rotated_null_mean_square_is_exactly_one_over_d_model_per_pair():
    # Exact for every pair whatever its spectrum, so pool pairs of one model: the writer-reader
    # pairs (0, h1) -> (1, h2) of a model with low-rank (d_head 2) heads.
    model = build_model(2, d_model=16, n_heads=2, d_head=2, seed=1)
    null = composition.rotated_baseline(model, "K", n_samples=300, seed=0)
    for h1 in range(2):
        for h2 in range(2):
            assert_mean_within_z_standard_errors(null[:, 0, h1, 1, h2].square(), 1 / 16)
    assert (null[:, 1] == 0).all() and (null[:, :, :, 0] == 0).all()  # zero unless l1 < l2


def test_the_null_check_fails_for_a_rotation_that_is_not_haar(monkeypatch):
    # Power of the check above: rotations that leave half the residual stream fixed (where the
    # hand-built heads compose) are orthogonal but not Haar, and the check rejects them.
    def half_rotation(d, g, dt):
        U = torch.eye(d, dtype=dt)
        U[: d // 2, : d // 2] = haar_rotation(d // 2, g, dt)
        return U

    monkeypatch.setattr(composition, "haar_rotation", half_rotation)
    model = build_induction_model()
    null = composition.rotated_baseline(model, "K", n_samples=50, seed=0)[:, 0, 0, 1, 0]
    with pytest.raises(AssertionError, match="SE"):
        assert_mean_within_z_standard_errors(null.square(), 1 / model.cfg.d_model)


def test_trained_heads_stand_out_from_their_rotated_null():
    # The hand-built previous-token -> induction K-composition is far above its own null.
    model = build_induction_model()
    score = composition_scores(model, "K")[0, 0, 1, 0]
    null = composition.rotated_baseline(model, "K", n_samples=32, seed=0)[:, 0, 0, 1, 0]
    assert score > null.mean() + 10 * null.std()


def test_rotated_baseline_bad_arguments():
    model = build_model(2)
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        composition.rotated_baseline(model, "K", n_samples=0)
    with pytest.raises(ValueError, match="unknown composition kind 'O'"):
        composition.rotated_baseline(model, "O")


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
