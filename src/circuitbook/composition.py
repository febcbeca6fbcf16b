"""Q-, K- and V-composition between heads, virtual weights, and their null baselines (ch. 16, 18).

A head B in a later layer *composes* with a head A in an earlier layer when B reads what A
wrote. Elhage et al. (2021) measure how much with the composition score

    score(A -> B) = ||W_A W_B||_F / (||W_A||_F ||W_B||_F)

where ``W_A = W_OV^A`` (what A writes) and ``W_B`` is the matrix through which B reads it
(row-vector convention, the same left/right matrices as TransformerLens's
``HookedTransformer.all_composition_scores``):

- Q-composition: ``W_B = W_QK^B = W_Q^B W_K^B^T`` (A's output feeds B's queries),
- K-composition: ``W_B = (W_QK^B)^T = W_K^B W_Q^B^T`` (A's output feeds B's keys),
- V-composition: ``W_B = W_OV^B = W_V^B W_O^B`` (A's output feeds B's values).

The kernel never forms a d_model x d_model matrix per *pair* of heads. Writing
``W_A = V_A O_A`` and ``W_B = P_B Q_B`` (d_head-rank factors),

    ||W_A W_B||_F^2 = tr(W_A^T W_A W_B W_B^T) = <G_A, H_B>_F,
    G_A = O_A^T (V_A^T V_A) O_A,   H_B = P_B (Q_B Q_B^T) P_B^T,

so each head needs one Gram matrix (through its d_head x d_head core) and each pair one inner
product. Both Grams are symmetric, so only the upper blocks are formed and off-diagonal blocks
count twice; blocks keep the working set small. (TransformerLens broadcasts every pair to
[L, H, L, H, d_head, d_model] instead: 8.3 GB peak measured at GPT-2-small shapes on CPU, against
about 0.2 GB here; see benchmarks/bench_kernels.py.)

Two nulls to compare a score with: :func:`random_baseline` (independent random heads of the
model's shapes; ``E[score^2] = 1/d_model`` exactly, :func:`expected_squared_score`) and
:func:`rotated_baseline` (the model's own heads with their outputs Haar-randomly rotated, which
keeps every head's singular values: the null for trained heads). Both go through d_head x d_head
Gram matrices, on the model's (or the given) device; see benchmarks/bench_baseline.py.

The *partner rule* of chapters 17 and 18 asks which writers stand out of a reader's crowd:
:func:`rotated_key_scores` (K-composition scores into chosen readers, the reader's key input
turned by random rotations), :func:`robust_z` (a writer's distance from its crowd's median in
MADs) and :func:`partner_rule` (the threshold those rotations set).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

import torch
from transformer_lens import FactoredMatrix

from circuitbook.devices import resolve_device
from circuitbook.neurons import haar_rotation
from circuitbook.validate import check_heads, check_layer_head, check_model_device_dtype

if TYPE_CHECKING:  # annotations only (they are postponed)
    from jaxtyping import Float, Int
    from transformer_lens import HookedTransformer

__all__ = [
    "composition_scores",
    "expected_squared_score",
    "partner_rule",
    "random_baseline",
    "random_scores",
    "robust_z",
    "rotated_baseline",
    "rotated_key_scores",
    "virtual_ov",
    "KINDS",
]

KINDS = ("Q", "K", "V")

# Width of the d_model blocks in which the Gram matrices are formed. 96 keeps one block
# of every head's Gram (n_heads * n_layers * BLOCK^2 floats) in cache at GPT-2 shapes.
_BLOCK = 96


def _check_kind(kind: str) -> str:
    if not isinstance(kind, str) or kind.upper() not in KINDS:
        raise ValueError(f"unknown composition kind {kind!r}: use 'Q', 'K' or 'V'")
    return kind.upper()


def _reader_factors(W_Q, W_K, W_V, W_O, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Tall factors ``(P, Q_T)``, both [..., d_model, d_head], of the reading matrix ``W_B = P Q_T^T``."""
    if kind == "Q":
        return W_Q, W_K  # W_QK = W_Q W_K^T
    if kind == "K":
        return W_K, W_Q  # W_QK^T = W_K W_Q^T
    return W_V, W_O.transpose(-2, -1)  # W_OV = W_V W_O


def _pairwise_scores(V, O_T, P, Q_T, pairs=None) -> torch.Tensor:
    """Scores ``||W_a W_b||_F / (||W_a||_F ||W_b||_F)`` with ``W_a = V_a O_T_a^T``, ``W_b = P_b Q_T_b^T``.

    Shapes: every factor is a tall [n, d_model, r] matrix (writers a: ``V, O_T``; readers b:
    ``P, Q_T``); returns [nA, nB]. ``pairs`` lists the (row slice, column slice) rectangles to
    compute (default: everything); entries outside them stay 0.
    """
    n_a, d_model, _ = V.shape
    n_b = P.shape[0]
    if pairs is None:
        pairs = [(slice(None), slice(None))]
    # G_a = O_T (V^T V) O_T^T and H_b = P (Q_T^T Q_T) P^T through their r x r cores; with
    # X_T = O_T (V^T V) and Y = P (Q_T^T Q_T), a block of G is O_T[i] X_T[j]^T, of H is Y[i] P[j]^T.
    X_T = O_T @ (V.transpose(-2, -1) @ V)  # [nA, d_model, r]
    Y = P @ (Q_T.transpose(-2, -1) @ Q_T)  # [nB, d_model, r]
    # ||W||_F^2 = tr(G) = sum(O_T * X_T): the norms come free from the same factors.
    norm_a = (O_T * X_T).sum((-2, -1))
    norm_b = (P * Y).sum((-2, -1))

    inner = torch.zeros(n_a, n_b, device=V.device, dtype=V.dtype)
    starts = range(0, d_model, _BLOCK)
    for i in starts:
        for j in starts:
            if j < i:
                continue  # G and H are symmetric: block (j, i) is block (i, j) transposed
            G = (O_T[:, i : i + _BLOCK] @ X_T[:, j : j + _BLOCK].transpose(-2, -1)).reshape(n_a, -1)
            H = (Y[:, i : i + _BLOCK] @ P[:, j : j + _BLOCK].transpose(-2, -1)).reshape(n_b, -1)
            for rows, cols in pairs:
                inner[rows, cols].addmm_(G[rows], H[cols].T, alpha=1.0 if i == j else 2.0)
    # Rounding can leave a tiny negative inner product where the true value is ~0. A head with
    # all-zero weights writes or reads nothing: score 0 (TransformerLens gives NaN there).
    den = (norm_a[:, None] * norm_b[None, :]).sqrt()
    return torch.where(den > 0, inner.clamp_min(0).sqrt() / den, torch.zeros_like(den))


def _scores(W_Q, W_K, W_V, W_O, kind: str) -> torch.Tensor:
    """Composition scores [L, n, L, n] of the heads with these weights (TransformerLens shapes
    [L, n, d_model, d_head], ``W_O`` [L, n, d_head, d_model]); zero unless ``l1 < l2``."""
    L, n, d_model, r = W_V.shape
    scores = torch.zeros(L, n, L, n, device=W_V.device, dtype=W_V.dtype)
    if L < 2:
        return scores  # no head has an earlier layer to read from
    P, Q_T = _reader_factors(W_Q, W_K, W_V, W_O, kind)
    tall = lambda w: w.reshape(-1, d_model, r)  # noqa: E731  [layers * heads, d_model, r]
    # Writers are layers 0..L-2 (row a = layer), readers layers 1..L-1 (column b = layer - 1),
    # and a writer composes into a reader iff a <= b: compute that upper triangle in
    # rectangles of a few writer layers each, not the whole square.
    step = 4
    pairs = [(slice(a * n, min(a + step, L - 1) * n), slice(a * n, None)) for a in range(0, L - 1, step)]
    pair = _pairwise_scores(
        tall(W_V[:-1]), tall(W_O[:-1].transpose(-2, -1)), tall(P[1:]), tall(Q_T[1:]), pairs
    ).view(L - 1, n, L - 1, n)
    scores[:-1, :, 1:, :] = pair
    layer = torch.arange(L, device=scores.device)
    earlier = layer[:, None, None, None] < layer[None, None, :, None]
    return scores * earlier


def composition_scores(model: HookedTransformer, kind: str) -> Float[torch.Tensor, "n_layers n_heads n_layers n_heads"]:
    """Composition scores of every earlier head into every later head, for one kind.

    Equation (row vectors): ``score[l1, h1, l2, h2] = ||W_OV^A W_B||_F / (||W_OV^A||_F ||W_B||_F)``
    with ``A = (l1, h1)``, ``B = (l2, h2)`` and ``W_B = W_QK^B`` (``kind="Q"``), ``(W_QK^B)^T``
    (``"K"``) or ``W_OV^B`` (``"V"``); zero unless ``l1 < l2``. Matches
    ``model.all_composition_scores(kind)`` to float rounding, without its [L, H, L, H, d_head,
    d_model] broadcast. Biases are ignored (as in the framework). A head whose weights are all
    zero scores 0 (TransformerLens returns NaN).
    Shapes: returns [n_layers, n_heads, n_layers, n_heads] on the model's device and dtype.

    Taught in chapter 18 (Composition scores).
    """
    kind = _check_kind(kind)
    check_model_device_dtype(model, "composition_scores")
    with torch.no_grad():
        return _scores(model.W_Q, model.W_K, model.W_V, model.W_O, kind)


# --- null distributions -----------------------------------------------------------------------


def expected_squared_score(d_model: int) -> float:
    """The exact mean squared composition score of two heads in uniformly random orientation.

    Equation: ``E[score^2] = 1/d_model``, for any two heads ``W_A``, ``W_B`` of which one (or
    both) is rotated by a Haar-random orthogonal ``U`` of the residual stream:
    ``E_U ||W_A U W_B||_F^2 = E_U tr(G_A U H_B U^T) = tr G_A tr H_B / d_model`` with
    ``G_A = W_A^T W_A``, ``H_B = W_B W_B^T``, because ``E_U U X U^T = (tr X / d_model) I``.
    It holds whatever the heads' ranks and singular values, so it is exact both for
    :func:`random_baseline` with ``init="gaussian"`` or ``"orthogonal"`` and for
    :func:`rotated_baseline` (for ``"uniform"`` it is only close). The mean *score* is then at
    most ``1/sqrt(d_model)`` (Jensen: ``E sqrt(X) <= sqrt(E X)``), and concentrates to that
    bound as the heads spread over more directions (larger d_head, flatter spectra).
    Shapes: returns a Python float.

    Taught in chapter 18 (Composition scores).
    """
    if d_model < 1:
        raise ValueError(f"d_model must be >= 1, got {d_model}")
    return 1.0 / d_model


def _factor_scores(V, O, P, Q) -> torch.Tensor:
    """Scores ``||V O P Q^T||_F / (||V O||_F ||P Q^T||_F)`` of writer ``W_A = V O`` paired with
    reader ``W_B = P Q^T``, sample by sample, through d_head x d_head Gram matrices only.

    Equation: ``||V O P Q^T||_F^2 = tr(V^T V M Q^T Q M^T)`` with ``M = O P`` (r x r), and
    ``||V O||_F^2 = <V^T V, O O^T>_F``, ``||P Q^T||_F^2 = <P^T P, Q^T Q>_F``.
    Shapes: ``V, P, Q`` [n, d_model, r], ``O`` [n, r, d_model]; returns [n]. No d_model x d_model
    matrix is formed: the largest intermediate is the inputs' own size.
    """
    G_v, G_q = V.mT @ V, Q.mT @ Q  # [n, r, r]
    M = O @ P  # [n, r, r]
    num = ((G_v @ M) * (M @ G_q)).sum((-2, -1))  # tr(G_v M G_q M^T), G_q symmetric
    norm_a = (G_v * (O @ O.mT)).sum((-2, -1))
    norm_b = ((P.mT @ P) * G_q).sum((-2, -1))
    return (num.clamp_min(0) / (norm_a * norm_b)).sqrt()


def _haar_frame(m: torch.Tensor) -> torch.Tensor:
    """Haar-uniform orthonormal frames from standard normal ``m`` [..., n, k], n >= k.

    Equation: ``m = Q R`` (torch.linalg.qr), then ``F = Q diag(sign(diag R))`` (a zero diagonal
    entry, probability 0, counts as +), i.e. the QR with ``diag R > 0``, which is unique and
    equivariant (``U m = (U F) R``), so ``F`` is uniform on the Stiefel manifold. Without the sign
    correction LAPACK's Householder QR ties each column's sign to the draw (its ``Q[0, 0]`` is never
    positive) and ``F`` is uniform only up to its span. This is torch.nn.init.orthogonal_'s correction.
    Shapes: returns ``m``'s shape, with ``F^T m = R`` having a positive diagonal.
    """
    q, r = torch.linalg.qr(m)
    sign = torch.where(r.diagonal(dim1=-2, dim2=-1) < 0, -1.0, 1.0).to(q.dtype)
    return q * sign[..., None, :]


def _random_factor(shape: tuple[int, ...], init: str, g: torch.Generator, dtype) -> torch.Tensor:
    """i.i.d. factor of ``shape`` on the generator's device."""
    if init == "gaussian":
        return torch.randn(shape, generator=g, dtype=dtype, device=g.device)
    if init == "uniform":
        return torch.rand(shape, generator=g, dtype=dtype, device=g.device) * 2 - 1
    # "orthogonal": Haar-uniform orthonormal columns along the longer side, as
    # torch.nn.init.orthogonal_ gives (sign-corrected QR, _haar_frame).
    tall = shape[-2] >= shape[-1]
    m = torch.randn(shape if tall else shape[:-2] + (shape[-1], shape[-2]), generator=g, dtype=dtype, device=g.device)
    q = _haar_frame(m)
    return q if tall else q.transpose(-2, -1)


# Samples are drawn and scored in chunks of at most this many factor entries (d_model * d_head
# per sample per factor): 2**21 float64 = 16 MB a factor, whatever n_samples.
_CHUNK_ENTRIES = 2**21


def _random_heads(d_model: int, d_head: int, n_samples: int, init: str, kind: str, g: torch.Generator):
    """Chunks ``(V, O, P, Q)`` of independent random writer (``V O``) and reader (``P Q^T``)
    factors, float64 on the generator's device, in the order :func:`random_scores` scores them."""
    dt = torch.float64  # a measurement, not a model: use the accurate dtype
    chunk = max(1, _CHUNK_ENTRIES // (d_model * d_head))
    for start in range(0, n_samples, chunk):
        c = min(chunk, n_samples - start)
        W_V, W_Q, W_K, W_V2 = (_random_factor((c, d_model, d_head), init, g, dt) for _ in range(4))
        W_O, W_O2 = (_random_factor((c, d_head, d_model), init, g, dt) for _ in range(2))
        P, Q_T = _reader_factors(W_Q, W_K, W_V2, W_O2, kind)
        yield W_V, W_O, P, Q_T


def random_scores(
    d_model: int,
    d_head: int,
    *,
    n_samples: int = 512,
    seed: int = 0,
    kind: str = "K",
    init: str = "gaussian",
    device: str | torch.device | None = None,
) -> Float[torch.Tensor, "n_samples"]:
    """Composition scores of ``n_samples`` independent pairs of random heads of these shapes.

    Equation: sample i scores ``||W_OV^A W_B||_F / (||W_OV^A||_F ||W_B||_F)`` for a writer
    ``W_OV^A = W_V W_O`` and a reader ``W_B`` of ``kind`` (as in :func:`composition_scores`),
    every factor (``W_V, W_O, W_Q, W_K``) drawn i.i.d. ``init`` = ``"gaussian"`` (normal
    entries; TransformerLens's default init, since the score ignores scale), ``"uniform"``
    (uniform entries, like Xavier/Kaiming-uniform) or ``"orthogonal"`` (orthonormal
    columns/rows). Computed through d_head x d_head Gram matrices (``_factor_scores``), in
    chunks, so memory stays a few tens of MB whatever ``n_samples`` and d_model.
    Shapes: returns [n_samples], float64, on ``device`` (None: ``devices.default_device()``;
    another device's generator draws other samples).

    Taught in chapter 18 (Composition scores).
    """
    kind = _check_kind(kind)
    if init not in ("gaussian", "uniform", "orthogonal"):
        raise ValueError(f"unknown init {init!r}: use 'gaussian', 'uniform' or 'orthogonal'")
    if d_model < 1 or d_head < 1 or n_samples < 1:
        raise ValueError(
            f"d_model, d_head and n_samples must be >= 1, got {d_model}, {d_head}, {n_samples}"
        )
    g = torch.Generator(device=resolve_device(device)).manual_seed(seed)
    return torch.cat([_factor_scores(*heads) for heads in _random_heads(d_model, d_head, n_samples, init, kind, g)])


def random_baseline(d_model: int, d_head: int, **options) -> float:
    """The mean composition score between independent random heads of these shapes.

    Equation: the mean of ``random_scores(d_model, d_head, **options)``, whose keyword
    arguments (``n_samples``, ``seed``, ``kind``, ``init``, ``device``) and defaults it takes
    as they are, so the two cannot drift apart; a Monte-Carlo estimate of
    ``E[score]``. What it estimates exactly is known for the squared score: for gaussian or
    orthogonal factors the heads' orientations are uniformly random, so
    ``E[score^2] = 1/d_model`` exactly (:func:`expected_squared_score`), and
    ``1/sqrt(d_model)`` is the Jensen upper bound on the mean score, which the mean concentrates
    to as d_model and d_head grow. Measured on the CPU (seed 0, 512 samples, ``kind="K"``,
    gaussian): d_model 768, d_head 64 gives 0.03607 against 1/sqrt(768) = 0.03608 (chapter 18's
    "about 0.036"); d_model 64 gives 0.1246 for d_head 16 and 0.1226 for d_head 4 (1/sqrt(64) =
    0.125): the fewer directions a head spans, the further below the bound.
    A score well above the baseline is evidence of composition; for trained heads, whose
    spectra are far from random, compare with :func:`rotated_baseline` instead.
    Shapes: ``d_model``, ``d_head`` as in the model; returns a Python float. Computed in float64 on
    ``device`` (None: ``devices.default_device()``) through d_head x d_head Gram matrices.

    Taught in chapter 18 (Composition scores).
    """
    return float(random_scores(d_model, d_head, **options).mean())


def rotated_baseline(model: HookedTransformer, kind: str, n_samples: int = 16, seed: int = 0
                     ) -> Float[torch.Tensor, "n_samples n_layers n_heads n_layers n_heads"]:
    """Null composition scores of the model's own heads, with their outputs randomly rotated.

    Equation: sample s draws a Haar-random orthogonal ``U_s`` [d_model, d_model] and replaces
    every head's ``W_O`` by ``W_O U_s`` (so ``W_OV -> W_OV U_s``), then scores as
    :func:`composition_scores`: ``null[s, l1, h1, l2, h2] = ||W_OV^A U_s W_B||_F /
    (||W_OV^A||_F ||W_B||_F)`` (a reader's own ``U_s`` on its output side leaves the Frobenius
    norms unchanged). Every head keeps its singular values (its rank, its spectrum); only the
    alignment between what A writes and what B reads is randomised. This is the null for trained
    heads, whose spectra are far from i.i.d.: a pair is composing when its score stands out
    from ``null[:, l1, h1, l2, h2]``, e.g. ``(score - null.mean(0)) / null.std(0)``. For every
    pair ``E[null^2] = 1/d_model`` exactly (:func:`expected_squared_score`); the mean and the
    spread depend on the two heads' spectra (low-rank heads spread more).
    Shapes: returns [n_samples, n_layers, n_heads, n_layers, n_heads] on the model's device,
    in the model's dtype promoted to at least float32; zero unless ``l1 < l2``. One sample
    costs one d_model x d_model QR (:func:`circuitbook.neurons.haar_rotation`, drawn in
    float64 by a generator on the model's device) and one :func:`composition_scores`.

    Taught in chapter 18 (Composition scores).
    """
    kind = _check_kind(kind)
    check_model_device_dtype(model, "rotated_baseline")
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}")
    device, d_model = model.W_E.device, model.cfg.d_model
    dt = torch.promote_types(model.W_E.dtype, torch.float32)
    g = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        W_Q, W_K, W_V, W_O = (w.to(dt) for w in (model.W_Q, model.W_K, model.W_V, model.W_O))
        null = []
        for _ in range(n_samples):
            U = haar_rotation(d_model, g, dt)
            null.append(_scores(W_Q, W_K, W_V, W_O @ U, kind))
        return torch.stack(null)


# --- the partner rule (chapters 17 and 18) ----------------------------------------------------

# z* is this largest of the rotated maxima: the 95th percentile of the chapters' 100 draws.
_PARTNER_RANK = 5
# Robust z: the MAD times this estimates the standard deviation of normal data (1 / Phi^-1(3/4)).
_MAD_TO_SD = 1.4826


def rotated_key_scores(model, readers, n_draws: int = 100, seed: int = 0
                       ) -> dict[tuple[int, int], Float[torch.Tensor, "n_draws_plus_1 n_writers"]]:
    """K-composition scores of every earlier head into each reader, the reader's key input
    turned by random rotations: the null of the partner rule (:func:`partner_rule`).

    Equation (row vectors): draw k of reader ``B = (l, h)`` scores writer ``A`` (every head of
    layers ``0..l-1``) as ``||W_OV^A U_k W_K^B W_Q^B^T||_F / (||W_OV^A||_F ||W_K^B W_Q^B^T||_F)``,
    K-composition (:func:`composition_scores`, ``kind="K"``) with the reader's key input
    rotated by an orthogonal ``U_k`` [d_model, d_model]; the norms are unchanged by ``U_k``.
    Only ``U_k W_K = F_k R`` is needed, with ``W_K = Q_K R`` (QR) and ``F_k = U_k Q_K`` a random
    orthonormal frame [d_model, d_head]: ``F_k`` is the sign-corrected Q factor (``Q
    diag(sign(diag R))``, :func:`_haar_frame`) of the k-th standard normal [d_model, d_head]
    matrix drawn by a CPU generator seeded ``seed + 1000 l + h`` (in the compute dtype), so
    ``F_k`` is Haar-uniform on the Stiefel manifold, as ``U_k Q_K`` is for a Haar ``U_k`` (the
    score depends on ``F C C^T F^T``, not only on ``F``'s span, so the signs matter), and a
    reader gets the same frames on every page and device. With ``G_A = W_OV^A^T W_OV^A`` (through the Cholesky
    factor of ``W_V^A^T W_V^A``) and ``C = R chol(W_Q^T W_Q)``, the squared numerator is
    ``<G_A, F C C^T F^T>_F`` and the reader's squared norm ``||C||_F^2``: one inner product per
    writer and draw, no d_model x d_model product per pair. The last draw uses ``F = Q_K``
    (no rotation) and gives back ``composition_scores(model, "K")[:l, :, l, h]`` to rounding.
    ``model``: a HookedTransformer or any object with its ``W_Q``, ``W_K``, ``W_V``, ``W_O``
    (e.g. a copy with each layer's RMSNorm gain folded into ``W_Q``, ``W_K``, ``W_V``, as both
    chapters score SmolLM2); grouped-query models pass the expanded per-head ``W_K``, ``W_V``.
    Every ``W_V`` and ``W_Q`` of the heads used must have full column rank (Cholesky).
    Shapes: ``W_Q, W_K, W_V`` [n_layers, n_heads, d_model, d_head], ``W_O`` [n_layers, n_heads,
    d_head, d_model]; ``readers`` (layer, head) pairs with layer >= 1 (as
    :func:`circuitbook.validate.check_heads` takes them). Returns {(l, h): [n_draws + 1,
    l * n_heads]}, writer ``(l1, h1)`` in column ``l1 * n_heads + h1``, draws ``0..n_draws-1``
    rotated and the last unrotated, on the weights' device in their dtype promoted to at least
    float32.

    Taught in chapters 17 (its second part, the senders of the induction heads) and 18
    (Composition scores, the partner rule).
    """
    weights = [getattr(model, name, None) for name in ("W_Q", "W_K", "W_V", "W_O")]
    if not all(isinstance(w, torch.Tensor) for w in weights):
        raise TypeError("rotated_key_scores needs a model (or weights object) with tensors W_Q, W_K, W_V and W_O, "
                        f"got {type(model).__name__}")
    W_Q, W_K, W_V, W_O = weights
    if W_K.ndim != 4:
        raise ValueError(f"W_K must be [n_layers, n_heads, d_model, d_head], got {tuple(W_K.shape)}")
    L, n_heads, d, r = W_K.shape
    want = {"W_Q": (L, n_heads, d, r), "W_V": (L, n_heads, d, r), "W_O": (L, n_heads, r, d)}
    for name, w in zip(("W_Q", "W_V", "W_O"), (W_Q, W_V, W_O)):
        if tuple(w.shape) != want[name]:
            raise ValueError(f"{name} must have shape {list(want[name])} to match W_K {list(W_K.shape)}, "
                             f"got {list(w.shape)}")
    if any(w.device != W_K.device or w.dtype != W_K.dtype for w in weights) or not W_K.is_floating_point():
        raise TypeError("rotated_key_scores needs W_Q, W_K, W_V, W_O on one device in one floating dtype, got "
                        + ", ".join(f"{w.dtype} on {w.device}" for w in weights))
    if isinstance(n_draws, bool) or not isinstance(n_draws, int) or n_draws < 1:
        raise ValueError(f"n_draws must be an int >= 1, got {n_draws!r}")
    # the one head validator, reading the sizes from the weights (a weights object has no cfg)
    readers = check_heads(SimpleNamespace(cfg=SimpleNamespace(n_layers=L, n_heads=n_heads)), readers)
    if not readers:
        raise ValueError("readers is empty: give at least one (layer, head) pair")
    if any(l == 0 for l, _ in readers):
        raise ValueError(f"a reader in layer 0 has no earlier heads to read from: {readers}")
    dt = torch.promote_types(W_K.dtype, torch.float32)
    last = max(l for l, _ in readers)
    out = {}
    with torch.no_grad():
        W_Q, W_K, W_V, W_O = (w.to(dt) for w in weights)
        W_ov = torch.linalg.cholesky(  # ||W_OV x|| = ||L^T W_O x||, L L^T = W_V^T W_V
            (W_V[:last].mT @ W_V[:last]).double()).to(dt).mT @ W_O[:last]
        G = (W_ov.mT @ W_ov).reshape(-1, d * d)  # writer Grams G_A, flat
        norm_a = G.view(-1, d, d).diagonal(dim1=-2, dim2=-1).sum(-1)  # ||W_OV^A||_F^2
        for l, h in readers:
            gen = torch.Generator().manual_seed(seed + 1000 * l + h)  # one stream per reader
            Q_K, R = torch.linalg.qr(W_K[l, h])
            C = R @ torch.linalg.cholesky((W_Q[l, h].mT @ W_Q[l, h]).double()).to(dt)
            F = _haar_frame(torch.randn(n_draws, d, r, generator=gen, dtype=dt)).to(W_K.device)
            FC = torch.cat([F, Q_K[None]]) @ C  # [n_draws + 1, d, r]
            Z = (FC @ FC.mT).reshape(n_draws + 1, -1)
            n = l * n_heads  # the earlier heads
            out[l, h] = (G[:n] @ Z.T / (norm_a[:n, None] * C.pow(2).sum())).clamp_min(0).sqrt().T
    return out


def robust_z(scores: Float[torch.Tensor, "... crowd"]) -> Float[torch.Tensor, "... crowd"]:
    """Each score's distance from its crowd's median, in robust standard deviations.

    Equation: ``z = (s - median) / (1.4826 MAD)``, ``MAD = median |s - median|``, both over the
    last dimension (the crowd); 1.4826 makes ``1.4826 MAD`` the standard deviation for normal
    data. The few outliers the partner rule looks for barely move the median and the MAD, as
    they would move a mean and a standard deviation. Medians are ``torch.median``'s: for an
    even crowd the lower of the two middle values, not their mean. A crowd whose MAD is 0 (more
    than half its scores equal) has no robust z and is refused.
    Shapes: ``scores`` [..., crowd]; returns the same shape.

    Taught in chapters 17 (its second part, the senders of the induction heads) and 18
    (Composition scores, the partner rule).
    """
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point():
        raise TypeError(f"robust_z needs a floating tensor, got {getattr(scores, 'dtype', type(scores).__name__)}")
    if scores.ndim == 0 or scores.shape[-1] < 1:
        raise ValueError(f"robust_z needs a crowd along the last dimension, got shape {tuple(scores.shape)}")
    med = scores.median(-1, keepdim=True).values
    mad = (scores - med).abs().median(-1, keepdim=True).values
    if (mad == 0).any():
        raise ValueError("a crowd has MAD 0 (more than half its scores equal its median): no robust z")
    return (scores - med) / (_MAD_TO_SD * mad)


def partner_rule(observed: Float[torch.Tensor, "n_writers"], rotated: Float[torch.Tensor, "n_draws n_writers"]
                 ) -> tuple[Float[torch.Tensor, "n_writers"], Float[torch.Tensor, "n_draws"], float]:
    """The partner rule: which writers stand out of one reader's crowd more than rotations allow.

    Equation: ``z = robust_z(observed)`` (:func:`robust_z`) for each writer; for each draw k,
    ``null[k] = max_A robust_z(rotated[k])[A]`` (the maximum over writers and the crowd's own
    normalisation both inside the null); ``z*`` is the fifth largest of ``null``
    (the 95th percentile at the chapters' 100 draws). Writer A is a
    K-partner of the reader when ``z[A] > z*``. ``rotated`` is one reader's
    :func:`rotated_key_scores` without its last (unrotated) draw.
    Shapes: ``observed`` [n_writers] (every head of earlier layers into the reader), ``rotated``
    [n_draws, n_writers] with ``n_draws >= 5``; returns ``(z [n_writers], null [n_draws], z*``
    as a Python float).

    Taught in chapters 17 (its second part, the senders of the induction heads) and 18
    (Composition scores, the partner rule).
    """
    if not isinstance(observed, torch.Tensor) or observed.ndim != 1:
        raise ValueError(f"observed must be a 1-d tensor [n_writers], got {getattr(observed, 'shape', observed)!r}")
    if not isinstance(rotated, torch.Tensor) or rotated.ndim != 2 or rotated.shape[1] != observed.shape[0]:
        raise ValueError(f"rotated must be [n_draws, n_writers] with n_writers = {observed.shape[0]} (observed's), "
                         f"got {getattr(rotated, 'shape', rotated)!r}")
    if rotated.shape[0] < _PARTNER_RANK:
        raise ValueError(f"the partner rule's z* is the {_PARTNER_RANK}th largest rotated maximum: it needs "
                         f"n_draws >= {_PARTNER_RANK}, got {rotated.shape[0]}")
    z = robust_z(observed)
    null = robust_z(rotated).max(-1).values
    z_star = null.sort(descending=True).values[_PARTNER_RANK - 1].item()
    return z, null, z_star


def virtual_ov(model: HookedTransformer, first: tuple[int | Int[torch.Tensor, ""], int | Int[torch.Tensor, ""]],
               second: tuple[int | Int[torch.Tensor, ""], int | Int[torch.Tensor, ""]]) -> FactoredMatrix:
    """The virtual OV circuit of two heads in series: ``W_OV^{l1.h1} W_OV^{l2.h2}``.

    Equation (row vectors): a residual vector ``x`` read by head ``first`` and its output read by
    head ``second`` (through V, attending fully) becomes ``x W_V^1 W_O^1 W_V^2 W_O^2``; the earlier
    head comes first. Requires ``l1 < l2``.
    Shapes: returns a ``FactoredMatrix`` [d_model, d_model] of rank <= d_head, factors
    ``A = W_V^1`` [d_model, d_head] and ``B = W_O^1 W_V^2 W_O^2`` [d_head, d_model].

    Taught in chapter 16 (Two-layer models).
    """
    pairs = []
    for name, item in (("first", first), ("second", second)):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"{name} must be a (layer, head) pair, got {item!r}")
        pairs.append(check_layer_head(model, *item))
    check_model_device_dtype(model, "virtual_ov")
    (l1, h1), (l2, h2) = pairs
    if not l1 < l2:
        raise ValueError(
            f"virtual_ov needs the first head in an earlier layer than the second: got layers "
            f"{l1} and {l2}; a head can only read heads of earlier layers"
        )
    a1, a2 = model.blocks[l1].attn, model.blocks[l2].attn
    W_V1, W_O1, W_V2, W_O2 = a1.W_V[h1], a1.W_O[h1], a2.W_V[h2], a2.W_O[h2]
    return FactoredMatrix(W_V1, W_O1 @ W_V2 @ W_O2)

