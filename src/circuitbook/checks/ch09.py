"""Chapter 9 (full circuits): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake
from circuitbook.checks.core import random_int as _randint


# --- Exercise 9.1: the full OV circuit as a dense matrix -----------------------------------


def full_ov(W_E, W_V, W_O, W_U):
    """W_E: [d_vocab, d_model]; W_V: [d_model, d_head]; W_O: [d_head, d_model];
    W_U: [d_model, d_vocab] -> [d_vocab, d_vocab]."""
    A = W_E @ W_V          # [d_vocab, d_head]: token -> value
    B = W_O @ W_U          # [d_head, d_vocab]: head output -> logits
    return A @ B


def _full_ov_inputs(g: torch.Generator) -> dict:
    d_vocab, d_model, d_head = _randint(15, 25, g), _randint(8, 12, g), _randint(2, 4, g)
    return {"W_E": torch.randn(d_vocab, d_model, generator=g),
            "W_V": torch.randn(d_model, d_head, generator=g),
            "W_O": torch.randn(d_head, d_model, generator=g),
            "W_U": torch.randn(d_model, d_vocab, generator=g)}


EX1 = FunctionExercise(
    id="ch09_ex1",
    title="the full OV circuit",
    reference=full_ov,
    library_answers=("circuitbook.circuits.full_ov_circuit",),
    make_inputs=_full_ov_inputs,
    mistakes=[
        Mistake("transposed", "What indexes the rows of your table, and what the columns? This book "
                "follows the row-vector convention of chapter 8: a vector sits to the left of the matrix "
                "it passes through. Where does a token enter your product, and what then indexes the rows?",
                lambda W_E, W_V, W_O, W_U: (W_E @ W_V @ W_O @ W_U).T),
        Mistake("used the transposed W_OV", "Look at the middle of your product. Follow one row vector "
                "from the residual stream through the head: which matrix does it pass through first, and "
                "does your middle factor apply the two in that order?",
                lambda W_E, W_V, W_O, W_U: W_E @ (W_V @ W_O).T @ W_U),
        Mistake("put W_E on both sides", "Your product has the shape of the full QK circuit, which compares "
                "two tokens. What reads the OV circuit's output, if its columns are logits?",
                lambda W_E, W_V, W_O, W_U: W_E @ W_V @ W_O @ W_E.T),
        Mistake("left out the head", "Your table is the direct path, the model with no attention at all. "
                "Where in the product does the head itself act?",
                lambda W_E, W_V, W_O, W_U: W_E @ W_U),
        Mistake("forgot W_E", "Your rows are residual directions, not tokens. What turns a token "
                "into a residual vector?",
                lambda W_E, W_V, W_O, W_U: W_V @ W_O @ W_U),
        Mistake("forgot W_U", "Your columns are residual directions, not logits. What turns a "
                "residual vector into logits?",
                lambda W_E, W_V, W_O, W_U: W_E @ W_V @ W_O),
    ],
    hint="Which maps does a token pass through on its way from the input, through this head, to the "
         "logits, and in which order? With row vectors, on which side of a matrix does a vector sit? Do "
         "your shapes chain from [d_vocab, ...] to [..., d_vocab]? Which grouping of the product avoids a "
         "large intermediate?",
)


# --- Exercise 9.2: the copying score from eigenvalues -------------------------------------


def copying_score(eigenvalues):
    """eigenvalues: complex [n] -> the copying score defined above,
    a float in [-1, 1]."""
    return (eigenvalues.sum().real / eigenvalues.abs().sum()).item()


def _eig_inputs(g: torch.Generator) -> dict:
    """The nonzero eigenvalues of a small real matrix, mixed with rounding-sized ones."""
    n_real, n_pairs, n_tiny = _randint(3, 6, g), _randint(2, 4, g), _randint(3, 8, g)
    real = torch.randn(n_real, generator=g) * 3 + 1           # mostly positive, some negative
    real[0] = -0.5 - real[0].abs()                            # at least one clearly negative
    centre = torch.randn(n_pairs, generator=g) * 2 + 0.5
    spread = 1 + 2 * torch.rand(n_pairs, generator=g)
    pairs = torch.cat([torch.complex(centre, spread), torch.complex(centre, -spread)])
    tiny = torch.complex(torch.randn(n_tiny, generator=g), torch.zeros(n_tiny)) * 1e-7
    eig = torch.cat([torch.complex(real, torch.zeros(n_real)), pairs, tiny])
    order = torch.randperm(len(eig), generator=g)
    return {"eigenvalues": eig[order].to(torch.complex64)}


def _as_scalar(x):
    """A one-element tensor or a number -> a Python float or complex; else None."""
    if isinstance(x, torch.Tensor):
        if x.numel() != 1:
            return None
        x = x.detach().cpu().reshape(()).item()
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float, complex)):
        return x
    return None


def _score_equal(got, expected) -> bool:
    a, b = _as_scalar(got), _as_scalar(expected)
    if a is None or b is None:
        return False
    if isinstance(a, complex) or isinstance(b, complex):  # a complex score is a different answer
        return isinstance(a, complex) and isinstance(b, complex) and abs(a - b) <= 1e-5 + 1e-4 * abs(b)
    return abs(a - b) <= 1e-5 + 1e-4 * abs(b)


EX2 = FunctionExercise(
    id="ch09_ex2",
    title="the copying score",
    reference=copying_score,
    make_inputs=_eig_inputs,
    compare=_score_equal,
    mistakes=[
        Mistake("used |lambda| in the numerator", "Your score is 1 for every head. Can a score built only from "
                "the eigenvalues' sizes ever tell a copying head from a suppressing one?",
                lambda eigenvalues: 1.0),
        Mistake("forgot the real part", "You returned a complex number. The score lies in [-1, 1]: "
                "which part of a complex sum can be compared with that range?",
                lambda eigenvalues: (eigenvalues.sum() / eigenvalues.abs().sum()).item()),
        Mistake("forgot to normalise", "Your score grows with the head's weights. What would make it "
                "stay in [-1, 1] whatever the head's scale?",
                lambda eigenvalues: eigenvalues.sum().real.item()),
        Mistake("counted the fraction of positive eigenvalues", "Your score counts eigenvalues. Does an "
                "eigenvalue of size 1e-7, which is rounding, move it as much as the largest one does? "
                "Should it?",
                lambda eigenvalues: (eigenvalues.real > 0).float().mean().item()),
        Mistake("normalised by |Re lambda|", "Your denominator ignores the imaginary parts. How big is a "
                "complex eigenvalue whose real part is near 0?",
                lambda eigenvalues: (eigenvalues.real.sum() / eigenvalues.real.abs().sum()).item()),
        Mistake("averaged Re(lambda) / |lambda|", "Averaging each eigenvalue's own ratio gives every eigenvalue, "
                "however small, the same vote. Should a rounding-sized eigenvalue count as much as the largest?",
                lambda eigenvalues: (eigenvalues.real / eigenvalues.abs()).mean().item()),
    ],
    hint="Which part of the eigenvalues' sum can say whether the head raises or lowers what it attends "
         "to, and what must it be divided by to stay in [-1, 1] whatever the head's scale? What should "
         "your score be when every eigenvalue is a positive real, and when every one is a negative real? "
         "Does your function return a Python float or a tensor?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
