"""Chapter 14 (zero-layer transformers): exercise checks and reference solutions.

Exercise 14.1 computes a zero-layer model's logits, ``W_E[t] W_U + b_U`` at every
position; exercise 14.2 the row-centred correlation used to compare ``W_E W_U`` with the
true log transition matrix (logits are defined only up to a constant per row).
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def zero_layer_logits(tokens, W_E, W_U, b_U):
    """tokens: [batch, pos] -> logits [batch, pos, d_vocab]."""
    return W_E[tokens] @ W_U + b_U


def _zl_inputs(g: torch.Generator) -> dict:
    # square (d_model == d_vocab, as in toy-0l) so that the order and transpose mistakes
    # have the right shape and are told apart by their values
    d = 10 + int(torch.randint(0, 8, (1,), generator=g))
    batch, pos = 2, 5 + int(torch.randint(0, 4, (1,), generator=g))
    return {"tokens": torch.randint(0, d, (batch, pos), generator=g),
            "W_E": torch.randn(d, d, generator=g),
            "W_U": torch.randn(d, d, generator=g),
            "b_U": 1.0 + torch.randn(d, generator=g)}


EX1 = FunctionExercise(
    id="ch14_ex1",
    title="zero-layer logits",
    reference=zero_layer_logits,
    make_inputs=_zl_inputs,
    mistakes=[
        Mistake("off by the same row at every position", "Your logits differ from the model's by the same "
                "row of d_vocab numbers at every position, whatever the token.",
                lambda tokens, W_E, W_U, b_U: W_E[tokens] @ W_U),
        Mistake("a product that fits only a square model",
                "The shape came out right only because d_model == d_vocab here. In the row-vector convention, "
                "which matrix does a token's row meet first, and what is the shape of each product?",
                lambda tokens, W_E, W_U, b_U: (W_U @ W_E)[tokens] + b_U),
        Mistake("used W_E^T as the unembedding",
                "That would be right for a model with tied embeddings. Does this one tie them?",
                lambda tokens, W_E, W_U, b_U: W_E[tokens] @ W_E.T + b_U),
        Mistake("wrong layout of the unembedding",
                "Your logits use W_U's numbers, but not as the model does (the check's W_U is square, so "
                "the shapes agree). What are W_U's two axes, and which one meets a residual row vector?",
                lambda tokens, W_E, W_U, b_U: W_E[tokens] @ W_U.T + b_U),
        Mistake("one position short",
                "Your logits have one position fewer than the tokens. Which token does position p's "
                "prediction depend on in a model with no layers, and does every position have one?",
                lambda tokens, W_E, W_U, b_U: W_E[tokens[:, 1:]] @ W_U + b_U),
        Mistake("logits of other positions' tokens",
                "Each of your positions holds logits that are right for some token of the sequence, but "
                "not for the one at that position. Which token does position p's prediction depend on in "
                "a model with no layers, and which token does yours use?",
                lambda tokens, W_E, W_U, b_U: W_E[tokens.roll(1, dims=1)] @ W_U + b_U),
        Mistake("returned probabilities", "Every row of yours sums to 1. Is that true of logits?",
                lambda tokens, W_E, W_U, b_U: (W_E[tokens] @ W_U + b_U).softmax(-1)),
        Mistake("returned log-probabilities",
                "Your answer makes the same predictions, but every row is shifted so that its exponentials "
                "sum to 1. Compute the same sums for the model's own output, model(tokens): do they match "
                "yours?",
                lambda tokens, W_E, W_U, b_U: (W_E[tokens] @ W_U + b_U).log_softmax(-1)),
    ],
    hint="With no layers, what is in the residual stream at position p, and which parameters turn a "
         "stream vector into logits? Follow the shapes: [batch, pos] tokens to [batch, pos, d_vocab].",
)


def row_centred_correlation(A, B):
    """A scalar tensor in [-1, 1]: one correlation over all
    entries, unchanged by a constant added to any row of A or of B, and by
    scaling A or B by a positive number, but changed by a constant added to a
    column."""
    a = A - A.mean(-1, keepdim=True)
    b = B - B.mean(-1, keepdim=True)
    return (a * b).sum() / (a.norm() * b.norm())


def _cos(a, b):
    return (a * b).sum() / (a.norm() * b.norm())


def _corr_inputs(g: torch.Generator) -> dict:
    rows, cols = 8 + int(torch.randint(0, 5, (1,), generator=g)), 12
    A = torch.randn(rows, cols, generator=g)
    B = A + 0.8 * torch.randn(rows, cols, generator=g)
    # offsets per row and per column, of different sizes in A and B: each mistake changes
    # the answer
    A = A + 3 * torch.randn(rows, 1, generator=g) + 1.5 * torch.randn(1, cols, generator=g)
    B = B - 2 * torch.randn(rows, 1, generator=g) + 2.5 * torch.randn(1, cols, generator=g) + 4
    return {"A": A, "B": B}


def _per_row(A, B):
    a = A - A.mean(-1, keepdim=True)
    b = B - B.mean(-1, keepdim=True)
    return ((a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))).mean()


def _double_centred(A, B):
    a = A - A.mean(-1, keepdim=True) - A.mean(0, keepdim=True) + A.mean()
    b = B - B.mean(-1, keepdim=True) - B.mean(0, keepdim=True) + B.mean()
    return _cos(a, b)


EX2 = FunctionExercise(
    id="ch14_ex2",
    title="row-centred correlation",
    reference=row_centred_correlation,
    make_inputs=_corr_inputs,
    mistakes=[
        Mistake("not centred", "Add a constant to one row of A: does your score change? A constant added to a row of "
                "logits changes no prediction, so the score should not.",
                lambda A, B: _cos(A, B)),
        Mistake("centred by the overall mean",
                "That is the ordinary correlation of all entries. Add a different constant to each row of "
                "A: does your score stay the same?",
                lambda A, B: _cos(A - A.mean(), B - B.mean())),
        Mistake("still sees a constant added to a row",
                "Add a constant to one row of A: does your score change? That changes no prediction, so it "
                "should not. Which constant does your centring remove, and from which entries?",
                lambda A, B: _cos(A - A.mean(0, keepdim=True), B - B.mean(0, keepdim=True))),
        Mistake("rows weighted otherwise",
                "Your score is close but not equal. Scale one row of both A and B up by 10: the score "
                "asked for moves towards that row's agreement, and yours does not move at all. Does your "
                "score weight a row of small spread as much as a row of large spread?",
                _per_row),
        Mistake("also blind to a constant added to a column",
                "Your score ignores a constant added to a row, as it should, but it also ignores a constant "
                "added to a column of A. Does that change the predictions? Remove only what the softmax "
                "ignores.",
                _double_centred),
        Mistake("not bounded by 1",
                "Your number can leave [-1, 1] and grows if A is doubled. Is a correlation allowed to?",
                lambda A, B: ((A - A.mean(-1, keepdim=True)) * (B - B.mean(-1, keepdim=True))).sum()),
        Mistake("changes when a row of B is shifted",
                "Add a constant to one row of B: does your score change? What about A?",
                lambda A, B: _cos(A - A.mean(-1, keepdim=True), B)),
    ],
    hint="Which changes to a row of logits leave every prediction the same, and how do you make the score "
         "blind to them? Then reread how the text above combines the rows into one score.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
