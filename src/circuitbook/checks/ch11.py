"""Chapter 11 (layer normalisation): exercise checks and reference solutions.

Exercise 11.1 writes LayerNorm in the convention of ``torch.nn.LayerNorm`` and
TransformerLens (biased variance, eps under the square root); exercise 11.2 folds a
LayerNorm's gain and bias into the weight matrix that reads its output, in the
row-vector convention (``x W + b`` with ``W`` of shape [d_model, d_out]).
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, allclose, tensor_difference

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
    # slip below (no centring, another divisor of the variance, eps elsewhere...) shows
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
    # "from scratch": torch's own LayerNorm (nn.LayerNorm calls it too) is the whole answer
    library_answers=("torch.nn.functional.layer_norm",),
    make_inputs=_ln_inputs,
    mistakes=[
        Mistake("a position's output not standardised", "Take one position of your output and undo gamma and beta: "
                "are its d numbers centred, with spread 1? Over which axis did you take the mean and the "
                "variance, and which numbers make up a single position's vector?",
                lambda x, gamma, beta, eps: (x - x.mean(-2, keepdim=True))
                / torch.sqrt(_var(x, -2) + eps) * gamma + beta),
        Mistake("output moves when x is shifted", "Add the same constant to every coordinate of x: your "
                "output changes, and LayerNorm's does not. Which step of the Plain language recipe makes it "
                "blind to such a shift? (Your function is a norm the chapter meets later.)",
                lambda x, gamma, beta, eps: x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma + beta),
        Mistake("output's size moves when x is shifted", "Your numerator is centred, but add the same constant to "
                "every coordinate of x and your output still changes size. Which quantity in your divisor still "
                "sees that constant? Compare it with the chapter's sigma^2.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
                * gamma + beta),
        Mistake("output slightly too small", "Undo gamma and beta: your output is a little too small at "
                "every position, most where the spread is large against eps. Count what your variance "
                "divides its sum of squares by, and what the chapter's sigma^2 divides by.",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x, unbiased=True) + eps) * gamma + beta),
        Mistake("off by an amount that depends on eps", "Your output is close but not equal, and how far off it is "
                "depends on each position's spread compared with eps (the check uses a large eps). Where does "
                "eps enter your formula, and where does it enter the chapter's?",
                lambda x, gamma, beta, eps: _centre(x) / (torch.sqrt(_var(x)) + eps) * gamma + beta),
        Mistake("the Annotated Transformer's convention", "Your output is what the Annotated Transformer's "
                "LayerNorm gives, and the exercise asks for nn.LayerNorm's convention. The chapter measured "
                "the two details in which they part: which are they, and which way does each go here?",
                lambda x, gamma, beta, eps: _centre(x) / (x.std(-1, keepdim=True) + eps) * gamma + beta),
        Mistake("off most where the spread is smallest", "Your output is off most at the positions whose "
                "spread is smallest (the check uses a large eps), and close where the spread is large. "
                "Where the spread is small, what keeps LayerNorm's divisor away from zero, and what keeps "
                "yours?",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x)) * gamma + beta),
        Mistake("output shrinks as x grows", "Take a row whose spread is large compared with eps and double it: "
                "LayerNorm's output hardly changes, but yours halves. For the size of x to cancel, how must "
                "your divisor grow with it?",
                lambda x, gamma, beta, eps: _centre(x) / (_var(x) + eps) * gamma + beta),
        Mistake("output off by a per-feature factor", "Subtract beta from your output and from the right one: "
                "they differ by a factor that is the same at every position and changes from feature to feature. "
                "Which step of the Plain language recipe rescales each feature, and what does it do in "
                "your code?",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) + beta),
        Mistake("output off by a per-feature offset", "Your output differs from the right one by a vector "
                "that is the same at every position and changes from feature to feature. Which step of the "
                "Plain language recipe shifts each feature, and what does it do in your code?",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) * gamma),
        Mistake("output independent of gamma and beta", "Your output is centred with spread 1 at every "
                "position, whatever gamma and beta are. What are those two arguments for?",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps)),
        Mistake("output's spread follows beta", "Your output uses both arguments, but its spread in each "
                "feature grows with beta, and with beta set to zero it no longer depends on x at all. "
                "Which of the two arguments should set each feature's spread, and which its offset, "
                "according to steps 3 and 4 of the Plain language section?",
                lambda x, gamma, beta, eps: _centre(x) / torch.sqrt(_var(x) + eps) * beta + gamma),
        Mistake("off by a per-feature amount where beta is not zero", "Your output is right where beta is "
                "zero, and off by a different amount in each coordinate where it is not: the amount grows "
                "with gamma. Is beta in your code scaled by something that the Plain language section does "
                "not scale it by?",
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
        Mistake("W_folded rescaled in the wrong pattern", "Your W_folded has W's shape, but gamma scales the "
                "wrong entries. In the product x_hat W, which entries of W does coordinate i of x_hat meet, and "
                "which coordinate of x_hat does gamma_i multiply?",
                lambda gamma, beta, W, b: (W * gamma[None, :], b + beta @ W)),
        Mistake("W_folded right only where gamma is 1 or -1", "Your W_folded would be right only where "
                "gamma is 1 (or -1). What does LayerNorm do with gamma, and does your fold do the same?",
                lambda gamma, beta, W, b: (W / gamma[:, None], b + beta @ W)),
        Mistake("wrong layout of W_folded", "Your W_folded holds the right numbers, arranged differently "
                "from what is asked (the check's W is square, so the shapes agree). Which axis of W reads "
                "the stream, and which axis of yours does?",
                lambda gamma, beta, W, b: (_Wf(gamma, W).T, b + beta @ W)),
        Mistake("W_folded is W unchanged", "Your W_folded is W unchanged: it would be right only if gamma were all "
                "ones. Where does the gain go once LayerNorm keeps only its division?",
                lambda gamma, beta, W, b: (W, b + beta @ W)),
        Mistake("b_folded is b unchanged", "Your b_folded is b unchanged: it would be right only if beta were "
                "zero. After folding, the LayerNorm adds no bias of its own; where does beta's effect on "
                "the output go?",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b)),
        Mistake("b_folded right only where gamma is 1", "Your b_folded would be right only if gamma were all "
                "ones. In LN(x) = x_hat * gamma + beta, which of the factors in your b_folded does LayerNorm's "
                "bias never meet?",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + beta @ _Wf(gamma, W))),
        Mistake("b_folded off by a vector of the stream", "Your b_folded mixes a vector of the stream's space with "
                "one of the output's (the check makes d_out = d_model, so the shapes agree). How does "
                "a vector added to what the sublayer reads reach its output?",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + beta)),
        Mistake("b_folded not what beta does downstream", "Your b_folded combines beta with W, but not as a "
                "stream vector meets W in the next layer (the check's W is square, so the shapes agree). In "
                "the row-vector convention, which axis of W does a stream vector meet, and which does your "
                "beta?",
                lambda gamma, beta, W, b: (_Wf(gamma, W), b + W @ beta)),
    ],
    hint="Write the LayerNorm's output as x_hat * gamma + beta and expand what the next layer does to it. "
         "Which part of the result still depends on x_hat, and which is the same for every input? The "
         "first can be written as x_hat times a new matrix, the second joins the bias. W_folded is "
         "[d_model, d_out], b_folded is [d_out].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
