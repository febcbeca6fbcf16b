"""Chapter 3 (the residual stream): exercise checks and reference solutions.

Exercise 3.1 rotates every read and write of an attention-only transformer by an
orthogonal R; exercise 3.2 builds the rotation in one plane of the residual stream.
Weights use TransformerLens's names and shapes (row-vector convention)::

    W_E [d_vocab, d_model]    W_pos [n_ctx, d_model]
    W_Q, W_K, W_V [n_layers, n_heads, d_model, d_head]   b_Q, b_K, b_V [n_layers, n_heads, d_head]
    W_O [n_layers, n_heads, d_head, d_model]              b_O [n_layers, d_model]
    W_U [d_model, d_vocab]    b_U [d_vocab]
"""

from __future__ import annotations

import math

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, _describe

WRITES = ("W_E", "W_pos", "W_O", "b_O")      # put vectors into the stream: W -> W R
READS = ("W_Q", "W_K", "W_V", "W_U")         # read vectors out of it: W -> R^T W
UNTOUCHED = ("b_Q", "b_K", "b_V", "b_U")     # live in head or vocabulary space
KEYS = WRITES + READS + UNTOUCHED


def _rotate(weights: dict, R: torch.Tensor, *, write=None, read=None, skip=()) -> dict:
    """The rotation with configurable pieces, so that mistakes can be recomputed.

    ``write(W, R)`` and ``read(W, R)`` default to ``W @ R`` and ``R.T @ W``; names in
    ``skip`` are copied unchanged.
    """
    write = write or (lambda W, R: W @ R)
    read = read or (lambda W, R: R.T @ W)
    out = {}
    for name, W in weights.items():
        if name in skip:
            out[name] = W.clone()
        elif name in WRITES:
            out[name] = write(W, R)
        elif name in READS:
            out[name] = read(W, R)
        else:
            out[name] = W.clone()
    return out


def rotate_model_weights(weights, R):
    """weights: dict of TransformerLens-shaped tensors; R: [d_model, d_model]
    orthogonal. Returns the weights of the same model with stream x -> x R."""
    writes = ("W_E", "W_pos", "W_O", "b_O")
    reads = ("W_Q", "W_K", "W_V", "W_U")
    out = {}
    for name, W in weights.items():
        if name in writes:
            out[name] = W @ R          # [..., d_model] @ [d_model, d_model]
        elif name in reads:
            out[name] = R.T @ W        # broadcasts over layers and heads
        else:
            out[name] = W.clone()
    return out


def logits_from_weights(weights: dict, tokens: torch.Tensor) -> torch.Tensor:
    """An attention-only, LayerNorm-free transformer with standard (added) positions,
    run from a weight dict: tokens [batch, pos] -> logits [batch, pos, d_vocab]."""
    n = tokens.shape[-1]
    x = weights["W_E"][tokens] + weights["W_pos"][:n]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for layer in range(weights["W_Q"].shape[0]):
        q = torch.einsum("bpd,hde->bhpe", x, weights["W_Q"][layer]) + weights["b_Q"][layer][:, None]
        k = torch.einsum("bpd,hde->bhpe", x, weights["W_K"][layer]) + weights["b_K"][layer][:, None]
        v = torch.einsum("bpd,hde->bhpe", x, weights["W_V"][layer]) + weights["b_V"][layer][:, None]
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        pattern = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        z = pattern @ v
        x = x + torch.einsum("bhpe,hem->bpm", z, weights["W_O"][layer]) + weights["b_O"][layer]
    return x @ weights["W_U"] + weights["b_U"]


def random_orthogonal(d: int, g: torch.Generator) -> torch.Tensor:
    Q, r = torch.linalg.qr(torch.randn(d, d, generator=g))
    return Q * torch.sign(torch.diagonal(r))


def _weights_inputs(g: torch.Generator) -> dict:
    n_layers, n_heads, d_model, d_head, d_vocab, n_ctx = 2, 2, 6, 3, 11, 7

    def rnd(*shape):
        return torch.randn(*shape, generator=g)

    weights = {
        "W_E": rnd(d_vocab, d_model), "W_pos": rnd(n_ctx, d_model),
        "W_Q": rnd(n_layers, n_heads, d_model, d_head) / 2, "W_K": rnd(n_layers, n_heads, d_model, d_head) / 2,
        "W_V": rnd(n_layers, n_heads, d_model, d_head) / 2, "W_O": rnd(n_layers, n_heads, d_head, d_model) / 2,
        "b_Q": rnd(n_layers, n_heads, d_head), "b_K": rnd(n_layers, n_heads, d_head),
        "b_V": rnd(n_layers, n_heads, d_head), "b_O": rnd(n_layers, d_model),
        "W_U": rnd(d_model, d_vocab), "b_U": rnd(d_vocab),
    }
    return {"weights": weights, "R": random_orthogonal(d_model, g)}


def _same_weights(a, b, atol=1e-4, rtol=1e-4) -> bool:
    if not isinstance(a, dict) or not isinstance(b, dict) or set(a) != set(b):
        return False
    for name in b:
        x, y = a[name], b[name]
        if not isinstance(x, torch.Tensor) or x.shape != y.shape:
            return False
        if not torch.allclose(x.detach().to(y.dtype), y, atol=atol, rtol=rtol):
            return False
    return True


class RotationExercise(FunctionExercise):
    """A FunctionExercise whose answer is a dict of weights. Besides naming known mistakes,
    an unrecognised answer is run as a model, to say which entries are off and whether the
    logits survived."""

    def _explain(self, got, expected, inputs) -> Result:
        if not isinstance(got, dict):
            return self._fail(f"expected a dict of weights, got {_describe(got)}", "wrong type")
        missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
        if missing or extra:
            return self._fail(f"the dict's keys differ: missing {missing}, unexpected {extra}. Return every "
                              "weight, rotated or not.", "wrong keys")
        for name in expected:
            if not isinstance(got[name], torch.Tensor) or got[name].shape != expected[name].shape:
                return self._fail(f"{name}: expected {_describe(expected[name])}, got {_describe(got[name])}",
                                  "wrong shape")
        off = [n for n in expected if not torch.allclose(got[n].detach().float(), expected[n], atol=1e-4,
                                                          rtol=1e-4)]
        tokens = torch.arange(inputs["weights"]["W_pos"].shape[0]).remainder(
            inputs["weights"]["W_E"].shape[0])[None]
        with torch.no_grad():
            drift = (logits_from_weights({k: v.detach().float() for k, v in got.items()}, tokens)
                     - logits_from_weights(inputs["weights"], tokens)).abs().max().item()
        if drift < 1e-3:
            verdict = ("the logits are unchanged, so yours is a consistent change of basis, but not the one by "
                       "R (x -> x R)")
        else:
            verdict = f"with your weights the logits change by up to {drift:.3g}; they should not change at all"
        return self._fail(f"{verdict}. Entries that differ from the rotation by R: {', '.join(off)}",
                          "wrong values")


def _inconsistent(write, read):
    return lambda weights, R: _rotate(weights, R, write=write, read=read)


def _skipping(*names):
    return lambda weights, R: _rotate(weights, R, skip=names)


EX1 = RotationExercise(
    id="ch03_ex1",
    title="rotate every read and write of the residual stream",
    reference=rotate_model_weights,
    make_inputs=_weights_inputs,
    compare=_same_weights,
    mistakes=[
        Mistake("rotated the writes but not the reads",
                "The stream is now written in the new basis, but the heads and the unembedding still read "
                "it as if it were in the old one. Every weight with d_model on its input side has to change "
                "too, so that it reads from x R what it used to read from x.", _skipping(*READS)),
        Mistake("rotated the reads but not the writes",
                "The reads expect a stream in the new basis, but nothing writes one: every weight or bias "
                "with d_model on its output side has to change too.", _skipping(*WRITES)),
        Mistake("reads do not undo the writes",
                "Your reads and writes change by the same matrix. A read of the new stream, x R times the "
                "new read matrix, must equal the old read x W: which matrix cancels R?",
                _inconsistent(lambda W, R: W @ R, lambda W, R: R @ W)),
        Mistake("reads do not undo the writes",
                "Your reads and writes change by the same matrix. A read of the new stream, x R times the "
                "new read matrix, must equal the old read x W: which matrix cancels R?",
                _inconsistent(lambda W, R: W @ R.T, lambda W, R: R.T @ W)),
        Mistake("a consistent change of basis, but not x -> x R",
                "Your model is consistent (its logits do not change), but its stream is not the old stream "
                "times R. Work out what your new W_E gives for one token and compare it with that token's old stream times R.",
                _inconsistent(lambda W, R: W @ R.T, lambda W, R: R @ W)),
        Mistake("forgot W_U", "One matrix that touches the stream is left as it was. The logits are computed "
                "from the final stream: does the matrix that computes them read the stream or write it, and "
                "what does your function do with the others of its kind?", _skipping("W_U")),
        Mistake("forgot W_pos", "One matrix that touches the stream is left as it was. Which matrix carries the "
                "positions, what does it do to the stream, and what does your function do with the matrices "
                "that do the same?", _skipping("W_pos")),
        Mistake("forgot W_E", "One matrix that touches the stream is left as it was. Where does the stream "
                "start, and which matrix puts it there?", _skipping("W_E")),
        Mistake("forgot b_O", "The output bias is left as it was. What does the output bias do to the "
                "stream, and what did you do with the matrices that do the same?",
                _skipping("b_O")),
        Mistake("forgot W_O", "One of each head's matrices is left as it was. Through which of them does a "
                "head's output reach the stream?",
                _skipping("W_O")),
        Mistake("forgot W_V", "One of each head's matrices is left as it was. What does the value map take "
                "as its input, and what did you do with the other matrices that take the same input?",
                _skipping("W_V")),
        Mistake("forgot W_Q and W_K", "Two of each head's matrices are left as they were. What are queries and "
                "keys computed from, and does that make their matrices reads or writes?",
                _skipping("W_Q", "W_K")),
    ],
    hint="Changing the stream's basis (x -> x R) must leave the logits unchanged. For each entry, ask "
         "what it does with the stream, and what it must become so that the model computes the same "
         "function on the rotated stream. Return all the entries, shapes unchanged.",
)


def plane_rotation(d, i, j, theta):
    """[d, d] rotation by theta (radians) in the plane of coordinates i, j,
    for row vectors: x -> x @ R."""
    R = torch.eye(d)
    c, s = math.cos(theta), math.sin(theta)
    R[i, i], R[i, j] = c, s      # row i is the image of e_i
    R[j, i], R[j, j] = -s, c     # row j is the image of e_j
    return R


def _plane_inputs(g: torch.Generator) -> dict:
    d = 5 + int(torch.randint(0, 6, (1,), generator=g))
    i, j = torch.randperm(d, generator=g)[:2].tolist()
    theta = 0.3 + 2.2 * torch.rand(1, generator=g).item()  # 0.3 .. 2.5 rad: away from 0, pi/4, pi/2
    # keep away from angles where two mistakes coincide (sin = +-cos, cos = 0)
    while any(abs(theta - a) < 0.1 for a in (math.pi / 4, math.pi / 2, 3 * math.pi / 4)):
        theta += 0.2
    return {"d": d, "i": i, "j": j, "theta": theta}


def _with_block(d, i, j, block, diag=1.0):
    R = torch.eye(d) * diag
    (a, b), (c, e) = block
    R[i, i], R[i, j], R[j, i], R[j, j] = a, b, c, e
    return R


EX2 = FunctionExercise(
    id="ch03_ex2",
    title="a rotation in one plane of the residual stream",
    reference=plane_rotation,
    make_inputs=_plane_inputs,
    mistakes=[
        Mistake("column-vector convention",
                "Your matrix is a rotation by the right amount, but is it in the right direction? Most "
                "textbooks write this matrix for column vectors (R x). Work out e_i R with your matrix for a "
                "small theta: does e_i move towards e_j?",
                lambda d, i, j, theta: plane_rotation(d, i, j, theta).T),
        Mistake("cos and sin swapped", "Your matrix is a rotation, but by the wrong angle: it turns e_i by "
                "90 degrees minus theta. What should a small theta do to e_i?",
                lambda d, i, j, theta: _with_block(d, i, j, ((math.sin(theta), math.cos(theta)),
                                                             (-math.cos(theta), math.sin(theta))))),
        Mistake("cos and sin swapped", "Your matrix is a rotation, but by the wrong angle: it turns e_i by "
                "theta minus 90 degrees. What should a small theta do to e_i?",
                lambda d, i, j, theta: _with_block(d, i, j, ((math.sin(theta), -math.cos(theta)),
                                                             (math.cos(theta), math.sin(theta))))),
        Mistake("zeros off the plane", "Your matrix sends every coordinate outside the i, j plane to zero; "
                "a rotation in that plane must leave them as they are.",
                lambda d, i, j, theta: _with_block(d, i, j, ((math.cos(theta), math.sin(theta)),
                                                             (-math.sin(theta), math.cos(theta))), diag=0.0)),
        Mistake("left ones on the diagonal", "Your matrix is not a rotation: it makes e_i longer (length "
                "sqrt(1 + sin(theta)^2)). A rotation keeps every length: how long is e_i R with your matrix?",
                lambda d, i, j, theta: _with_block(d, i, j, ((1.0, math.sin(theta)), (-math.sin(theta), 1.0)))),
        Mistake("a reflection, not a rotation", "Your matrix has determinant -1: it reflects the plane "
                "instead of turning it. Check the signs of your four entries against where e_i and e_j "
                "must go.",
                lambda d, i, j, theta: _with_block(d, i, j, ((math.cos(theta), math.sin(theta)),
                                                             (math.sin(theta), -math.cos(theta))))),
        Mistake("theta read as degrees", "Your matrix turns the plane by a much smaller angle, theta read as "
                "degrees. In what unit is theta given?",
                lambda d, i, j, theta: plane_rotation(d, i, j, math.radians(theta))),
    ],
    hint="Only the four entries where rows and columns i and j cross differ from the identity. With row "
         "vectors, which part of R is e_i R? Where must e_i end up when the plane turns by theta from e_i "
         "towards e_j?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
