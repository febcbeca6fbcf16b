"""Chapter 11 (layer normalisation): exercise checks and reference solutions.

Exercise 11.1 writes LayerNorm in the convention of ``torch.nn.LayerNorm`` and
TransformerLens (biased variance, eps under the square root); exercise 11.2 folds a
LayerNorm's gain and bias into the weight matrix that reads its output, in the
row-vector convention (``x W + b`` with ``W`` of shape [d_model, d_out]).
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, allclose, tensor_difference

# --------------------------------------------------------------------------------------
# Exercise 11.1: LayerNorm from scratch
# --------------------------------------------------------------------------------------


def layer_norm(x, gamma, beta, eps=1e-5):
    """x: [..., d]; gamma, beta: [d] -> [..., d]: each vector normalised
    over the last axis, in nn.LayerNorm's convention, then given the gain
    and bias."""
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * gamma + beta


def _ln_inputs(g: torch.Generator) -> dict:
    batch, pos = 2, 3 + int(torch.randint(0, 4, (1,), generator=g))
    d = 8 + int(torch.randint(0, 17, (1,), generator=g))
    # rows with clearly non-zero means and spreads from 0.3 to 3, and a large eps: every
    # slip below (forgot to centre, unbiased variance, eps outside the root...) shows
    spread = 0.3 + 2.7 * torch.rand(batch, pos, 1, generator=g)
    offset = 2 * torch.randn(batch, pos, 1, generator=g)
    x = spread * torch.randn(batch, pos, d, generator=g) + offset
    return {"x": x, "gamma": 1 + 0.5 * torch.randn(d, generator=g), "beta": torch.randn(d, generator=g),
            "eps": 0.05 + 0.45 * float(torch.rand(1, generator=g))}


def _centre(x):
    return x - x.mean(-1, keepdim=True)


def _var(x, dim=-1, unbiased=False):
    return x.var(dim, keepdim=True, unbiased=unbiased)


EX1 = FunctionExercise(
    id="ch11_ex1",
    title="LayerNorm from scratch",
    reference=layer_norm,
    make_inputs=_ln_inputs,
    mistakes=[
        Mistake("normalised over the wrong axis", "Take the mean and variance over the last axis (the "
                "d_model features of one position), not over positions or the batch.",
                lambda x, gamma, beta, eps: (x - x.mean(-2, keepdim=True))
                / torch.sqrt(_var(x, -2) + eps) * gamma + beta),
        Mistake("forgot to centre", "Subtract the mean before dividing: what you wrote is RMSNorm "
                "(x / sqrt(mean(x^2) + eps)).",
                lambda x, gamma, beta, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma + beta),
        Mistake("centred, but divided by the uncentred rms", "The variance is the mean of (x - mean)^2, "
                "not the mean of x^2.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                * gamma + beta),
        Mistake("used the unbiased variance", "nn.LayerNorm divides by d, not d - 1: use "
                "var(unbiased=False) or mean((x - mean)^2).",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x, unbiased=True) + eps) * gamma + beta),
        Mistake("eps outside the square root", "Add eps to the variance, under the square root: "
                "sqrt(var + eps), not sqrt(var) + eps.",
                lambda x, gamma, beta, eps: _centre(x) / (torch.sqrt(_var(x)) + eps) * gamma + beta),
        Mistake("wrote the Annotated Transformer's LayerNorm", "That version uses the unbiased std and "
                "adds eps to it; this exercise asks for nn.LayerNorm's convention: biased variance, eps "
                "under the square root.",
                lambda x, gamma, beta, eps: _centre(x) / (x.std(-1, keepdim=True) + eps) * gamma + beta),
        Mistake("forgot eps", "Add eps to the variance before the square root.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x)) * gamma + beta),
        Mistake("divided by the variance", "Divide by the standard deviation sqrt(var + eps), not by "
                "the variance.",
                lambda x, gamma, beta, eps: _centre(x) / (_var(x) + eps) * gamma + beta),
        Mistake("forgot gamma", "Multiply the normalised vector by gamma before adding beta.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) + beta),
        Mistake("forgot beta", "Add beta after multiplying by gamma.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) * gamma),
        Mistake("forgot gamma and beta", "Finish with * gamma + beta.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps)),
        Mistake("gamma and beta swapped", "gamma multiplies, beta is added.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) * beta + gamma),
        Mistake("added beta before multiplying by gamma", "Scale first, then shift: x_hat * gamma + beta.",
                lambda x, gamma, beta, eps: (_centre(x) / torch.sqrt(_var(x) + eps) + beta) * gamma),
    ],
    hint="Work per vector, over the last axis, following the formula of the chapter's Plain language "
         "section. The two details in which the Annotated Transformer's version differs (which spread, "
         "where eps goes) are the ones to get right. The shape does not change.",
)

# --------------------------------------------------------------------------------------
# Exercise 11.2: fold LayerNorm's gain and bias into the next weights
# --------------------------------------------------------------------------------------


def fold_ln(gamma, beta, W, b):
    """gamma, beta: [d_model]; W: [d_model, d_out]; b: [d_out]
    -> (W_folded [d_model, d_out], b_folded [d_out])."""
    return gamma[:, None] * W, b + beta @ W


def _fold_inputs(g: torch.Generator) -> dict:
    d = 6 + int(torch.randint(0, 11, (1,), generator=g))
    # square W (d_out = d_model), so that a factor on the wrong axis or a transpose gives a
    # wrong value rather than a shape error, and can be named
    return {"gamma": 1 + 0.5 * torch.randn(d, generator=g), "beta": torch.randn(d, generator=g),
            "W": torch.randn(d, d, generator=g), "b": torch.randn(d, generator=g)}


def _same_pair(a, b) -> bool:
    """Both are (W, b) pairs of tensors with matching shapes and values."""
    close = allclose(atol=1e-4, rtol=1e-4)
    if not isinstance(a, (tuple, list)) or len(a) != 2 or not isinstance(b, (tuple, list)):
        return False
    return all(close(x, y) for x, y in zip(a, b))


class _FoldExercise(FunctionExercise):
    """Adds pair-specific messages (not a pair, wrong shapes, which half is wrong)."""

    def _explain(self, got, expected, inputs) -> Result:
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            return self._fail("return a pair (W_folded, b_folded)", "wrong type")
        close = allclose(atol=1e-4, rtol=1e-4)
        parts = []
        for name, x, y in zip(("W_folded", "b_folded"), got, expected):
            if not isinstance(x, torch.Tensor) or x.shape != y.shape:
                shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                return self._fail(f"{name} should have shape {tuple(y.shape)}, got {shape}", "wrong shape")
            if not close(x, y):
                parts.append(f"{name}: {tensor_difference(x, y)[0]}")
        return self._fail("; ".join(parts), "wrong values")


def _Wf(gamma, W):
    return gamma[:, None] * W


EX2 = _FoldExercise(
    id="ch11_ex2",
    title="fold LayerNorm into the next layer",
    reference=fold_ln,
    make_inputs=_fold_inputs,
    compare=_same_pair,
    mistakes=[
        Mistake("scaled the columns instead of the rows", "gamma_i multiplies coordinate i of x_hat, "
                "which meets row i of W (x W = sum_i x_i W[i, :]): gamma rescales the rows of W, not its "
                "columns.",
                lambda gamma, beta, W, b: (W * gamma[None, :], b + beta @ W)),
        Mistake("divided by gamma", "LayerNorm multiplies by gamma, so the folded weight does too.",
                lambda gamma, beta, W, b: (W / gamma[:, None], b + beta @ W)),
        Mistake("transposed the weight", "Keep TransformerLens's reading shape [d_model, d_out]: "
                "W_folded has W's shape, not its transpose's.",
                lambda gamma, beta, W, b: (_Wf(gamma, W).T, b + beta @ W)),
        Mistake("forgot gamma", "The gain must end up in the weight: W_folded is W with gamma folded into it.",
                lambda gamma, beta, W, b: (W, b + beta @ W)),
        Mistake("forgot to fold beta", "beta passes through W too, and what comes out joins b in b_folded.",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b)),
        Mistake("sent beta through the folded weight", "beta is added after the gain, so it meets the "
                "original W, not the folded one.",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + beta @ _Wf(gamma, W))),
        Mistake("added beta to the bias directly", "beta lives in d_model space; it reaches the output "
                "only through W.",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + beta)),
        Mistake("multiplied beta on the wrong side", "Row-vector convention: beta is a row vector, so W "
                "acts on it from the right.",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + W @ beta)),
    ],
    hint="Write the LayerNorm's output as x_hat * gamma + beta and expand what the next layer does to it. "
         "The gamma part can move into the matrix (it rescales one axis of W: which axis has length "
         "d_model?) and the beta part becomes a constant that joins the bias. W_folded is [d_model, "
         "d_out], b_folded is [d_out].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
