"""The partner rule of chapters 17 and 18 (circuitbook.composition.rotated_key_scores, robust_z,
partner_rule) against independent references: dense float64 products of every writer-reader
pair under the documented rotations, hand-computed medians and MADs, hand-built maxima."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from circuitbook.composition import (_haar_frame, _random_factor, composition_scores, partner_rule, robust_z,
                                    rotated_key_scores)
from conftest import build_model

EPS64 = torch.finfo(torch.float64).eps


def dense_rotated(model, l: int, h: int, frame: torch.Tensor) -> torch.Tensor:
    """K-composition of every earlier head into reader (l, h) with its keys ``W_K`` replaced by
    ``frame @ R`` (``W_K = Q_K R``), multiplied out as d_model x d_model matrices in float64,
    each norm computed from its own matrix."""
    W_Q, W_K, W_V, W_O = (w.detach().double() for w in (model.W_Q, model.W_K, model.W_V, model.W_O))
    _, R = torch.linalg.qr(W_K[l, h])
    W_B = (frame.double() @ R) @ W_Q[l, h].T  # (U W_K)^T-side reading matrix: U W_K W_Q^T
    out = []
    for l1 in range(l):
        for h1 in range(W_K.shape[1]):
            W_A = W_V[l1, h1] @ W_O[l1, h1]
            out.append((W_A @ W_B).norm() / (W_A.norm() * W_B.norm()))
    return torch.stack(out)


def frames(l: int, h: int, n_draws: int, d_model: int, d_head: int, seed: int = 0, dtype=torch.float64):
    """The documented frames of reader (l, h): sign-corrected Q factors (diag R > 0) of standard
    normal draws seeded ``seed + 1000 l + h``, written out here independently of the package."""
    gen = torch.Generator().manual_seed(seed + 1000 * l + h)
    Q, R = torch.linalg.qr(torch.randn(n_draws, d_model, d_head, generator=gen, dtype=dtype))
    return Q * torch.sign(R.diagonal(dim1=-2, dim2=-1))[..., None, :]


def test_unrotated_draw_is_composition_scores():
    model = build_model(3, d_model=12, n_heads=2, d_head=4, seed=3)
    readers = [(1, 0), (2, 1), (2, 0)]
    out = rotated_key_scores(model, readers, n_draws=3)
    K = composition_scores(model, "K")
    assert set(out) == set(readers)
    for l, h in readers:
        assert out[l, h].shape == (4, l * 2) and out[l, h].dtype == torch.float64
        torch.testing.assert_close(out[l, h][-1], K[:l, :, l, h].flatten(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 7])
def test_rotated_draws_match_dense_products_under_the_documented_frames(seed):
    d_model, d_head = 10, 3
    model = build_model(3, d_model=d_model, n_heads=2, d_head=d_head, seed=1)
    out = rotated_key_scores(model, [(2, 1), (1, 0)], n_draws=4, seed=seed)
    for l, h in [(2, 1), (1, 0)]:
        F = frames(l, h, 4, d_model, d_head, seed)
        for k in range(4):
            torch.testing.assert_close(out[l, h][k], dense_rotated(model, l, h, F[k]), rtol=1e-9, atol=1e-12)
    assert not torch.equal(out[2, 1][0], out[2, 1][1])  # each draw its own rotation
    again = rotated_key_scores(model, [(1, 0)], n_draws=4, seed=seed)  # one stream per reader
    assert torch.equal(again[1, 0], out[1, 0])


def test_rotations_are_orthogonal_and_keep_the_readers_norm():
    # The kernel divides every draw by the unrotated ||W_K W_Q^T||_F: right only because the
    # frames are orthonormal, so ||F R W_Q^T||_F = ||R W_Q^T||_F = ||W_K W_Q^T||_F.
    model = build_model(2, d_model=9, n_heads=2, d_head=3, seed=4)
    W_Q, W_K = model.W_Q.detach()[1, 0], model.W_K.detach()[1, 0]
    _, R = torch.linalg.qr(W_K)
    for F in frames(1, 0, 5, 9, 3):
        torch.testing.assert_close(F.T @ F, torch.eye(3, dtype=torch.float64), rtol=0, atol=20 * 9 * EPS64)
        torch.testing.assert_close((F @ R @ W_Q.T).norm(), (W_K @ W_Q.T).norm(), rtol=1e-12, atol=0)
    out = rotated_key_scores(model, [(1, 0)], n_draws=5)[1, 0]
    assert ((out >= 0) & (out <= 1 + 1e-12)).all()  # Cauchy-Schwarz: ||W_A W_B|| <= ||W_A|| ||W_B||


def test_frames_are_haar_not_tied_to_the_draw():
    # The frames are the QR with diag R > 0 (F^T G = R), the unique equivariant QR, hence Haar on
    # the Stiefel manifold. LAPACK's Householder QR without the correction gives Q[0, 0] < 0 for
    # every draw; under Haar, sign(F[i, j]) is a fair coin for each entry.
    g = torch.Generator().manual_seed(5)
    G = torch.randn(4000, 10, 3, generator=g, dtype=torch.float64)
    F = _haar_frame(G)
    Q, R = torch.linalg.qr(G)
    torch.testing.assert_close(F, Q * torch.sign(R.diagonal(dim1=-2, dim2=-1))[..., None, :], rtol=0, atol=0)
    FtG = F.mT @ G  # = R with a positive diagonal, to rounding
    assert (FtG.diagonal(dim1=-2, dim2=-1) > 0).all()
    torch.testing.assert_close(F.mT @ F, torch.eye(3, dtype=torch.float64).expand(4000, 3, 3),
                               rtol=0, atol=20 * 10 * EPS64)
    # Sign test, entry by entry: positives ~ Binomial(4000, 1/2) under Haar; 5 sd = 158 (a false
    # alarm per 30 entries about 1e-5); the uncorrected Q has 0 positives at [0, 0].
    positives = (F > 0).sum(0).double()
    assert ((positives - 2000).abs() < 5 * math.sqrt(4000) / 2).all(), positives
    # The orthogonal init of random_scores uses the same correction.
    g = torch.Generator().manual_seed(5)
    torch.testing.assert_close(_random_factor((4000, 10, 3), "orthogonal", g, torch.float64), F, rtol=0, atol=0)


def test_weights_object_without_cfg_and_float32():
    # A weights object (what chapter 17 passes: folded copies) needs no cfg; float32 stays float32.
    model = build_model(2, d_model=8, n_heads=2, d_head=3, seed=2, dtype=torch.float32)
    weights = SimpleNamespace(W_Q=model.W_Q.detach(), W_K=model.W_K.detach(), W_V=model.W_V.detach(),
                              W_O=model.W_O.detach())
    out = rotated_key_scores(weights, [(1, 1)], n_draws=5)[1, 1]
    assert out.dtype == torch.float32 and out.shape == (6, 2)
    torch.testing.assert_close(out, rotated_key_scores(model, [(1, 1)], n_draws=5)[1, 1], rtol=0, atol=0)
    torch.testing.assert_close(out[-1], composition_scores(model, "K")[0, :, 1, 1], rtol=1e-5, atol=1e-6)


def test_robust_z_hand_computed():
    # odd crowd: median 3, |s - 3| = 2, 1, 0, 1, 97 -> MAD 1
    s = torch.tensor([1.0, 2.0, 3.0, 4.0, 100.0], dtype=torch.float64)
    torch.testing.assert_close(robust_z(s), (s - 3) / 1.4826, rtol=1e-15, atol=0)
    # even crowd: torch.median's lower middle, 2 (not 2.5); |s - 2| = 1, 0, 1, 8 -> lower middle 1
    s = torch.tensor([1.0, 2.0, 3.0, 10.0], dtype=torch.float64)
    torch.testing.assert_close(robust_z(s), (s - 2) / 1.4826, rtol=1e-15, atol=0)
    # along the last dimension, row by row; the crowd's order does not matter
    rows = torch.tensor([[10.0, 1.0, 3.0, 2.0, 4.0], [0.0, -2.0, 2.0, 6.0, -1.0]], dtype=torch.float64)
    want = torch.stack([(rows[0] - 3) / 1.4826, (rows[1] - 0) / (2 * 1.4826)])  # MADs 1 and 2
    torch.testing.assert_close(robust_z(rows), want, rtol=1e-15, atol=0)


def test_partner_rule_hand_built():
    # Draw k's crowd is [-1, 0, 1, m_k]: median 0, MAD 1, so its largest z is m_k / 1.4826.
    m = torch.tensor([9.0, 2.0, 7.0, 12.0, 3.0, 5.0, 11.0, 4.0, 8.0, 6.0], dtype=torch.float64)
    rotated = torch.stack([torch.tensor([-1.0, 0.0, 1.0, float(x)], dtype=torch.float64) for x in m])
    rotated = rotated[:, torch.tensor([2, 0, 3, 1])]  # writers in any order
    observed = torch.tensor([0.0, 1.0, -1.0, 8.0], dtype=torch.float64)  # z = 8 / 1.4826 for writer 3
    z, null, z_star = partner_rule(observed, rotated)
    torch.testing.assert_close(null, m / 1.4826, rtol=1e-15, atol=0)
    # the maxima in order: 12, 11, 9, 8, 7, ...: the fifth largest is 7
    assert isinstance(z_star, float) and math.isclose(z_star, 7 / 1.4826, rel_tol=1e-15)
    torch.testing.assert_close(z, observed / 1.4826, rtol=1e-15, atol=0)
    assert (z > z_star).tolist() == [False, False, False, True]
    # exactly five draws is enough: z* is then their smallest maximum
    assert math.isclose(partner_rule(observed, rotated[:5])[2], 2 / 1.4826, rel_tol=1e-15)


def test_bad_input_named_errors():
    model = build_model(2, d_model=8, n_heads=2, d_head=3)
    with pytest.raises(ValueError, match="n_draws must be an int >= 1"):
        rotated_key_scores(model, [(1, 0)], n_draws=0)
    with pytest.raises(ValueError, match="layer 0 has no earlier heads"):
        rotated_key_scores(model, [(0, 1)])
    with pytest.raises(ValueError, match="head 2 is out of range"):
        rotated_key_scores(model, [(1, 2)])
    with pytest.raises(ValueError, match="layer 2 is out of range"):
        rotated_key_scores(model, [(2, 0)])
    with pytest.raises(ValueError, match="readers is empty"):
        rotated_key_scores(model, [])
    with pytest.raises(TypeError, match="W_Q, W_K, W_V and W_O"):
        rotated_key_scores(SimpleNamespace(W_Q=model.W_Q), [(1, 0)])
    bad = SimpleNamespace(W_Q=model.W_Q, W_K=model.W_K, W_V=model.W_V, W_O=model.W_O.mT)
    with pytest.raises(ValueError, match="W_O must have shape"):
        rotated_key_scores(bad, [(1, 0)])
    mixed = SimpleNamespace(W_Q=model.W_Q.float(), W_K=model.W_K, W_V=model.W_V, W_O=model.W_O)
    with pytest.raises(TypeError, match="one floating dtype"):
        rotated_key_scores(mixed, [(1, 0)])

    observed = torch.randn(4, dtype=torch.float64)
    with pytest.raises(ValueError, match="needs n_draws >= 5, got 4"):
        partner_rule(observed, torch.randn(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match="rotated must be \\[n_draws, n_writers\\] with n_writers = 4"):
        partner_rule(observed, torch.randn(10, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="rotated must be"):
        partner_rule(observed, torch.randn(10, dtype=torch.float64))
    with pytest.raises(ValueError, match="observed must be a 1-d tensor"):
        partner_rule(observed[None], torch.randn(10, 4, dtype=torch.float64))

    with pytest.raises(ValueError, match="MAD 0"):
        robust_z(torch.tensor([1.0, 1.0, 1.0, 5.0]))
    with pytest.raises(TypeError, match="floating tensor"):
        robust_z(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="crowd along the last dimension"):
        robust_z(torch.tensor(1.0))
