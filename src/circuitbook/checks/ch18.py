"""Chapter 18 (composition scores): exercise checks and reference solutions.

18.1 the composition score of two matrices; 18.2 the two matrices whose composition
score measures K-composition between a writer head and a reader head.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, PairExercise


def composition_score(W_A, W_B):
    """W_A, W_B: [d_model, d_model], writer then reader -> the composition
    score defined above, a float."""
    norm = torch.linalg.matrix_norm           # Frobenius by default
    return float(norm(W_A @ W_B) / (norm(W_A) * norm(W_B)))


def _low_rank(g: torch.Generator, d_model: int, rank: int) -> torch.Tensor:
    return torch.randn(d_model, rank, generator=g) @ torch.randn(rank, d_model, generator=g)


def _score_inputs(g: torch.Generator) -> dict:
    d_model = 10 + int(torch.randint(0, 8, (1,), generator=g))
    rank = 2 + int(torch.randint(0, 3, (1,), generator=g))
    W_A = _low_rank(g, d_model, rank)
    # a reader partly aligned with the writer, so the score is well above the random level
    W_B = _low_rank(g, d_model, rank) + 0.5 * W_A.T
    return {"W_A": W_A, "W_B": W_B}


def _ratio(num, a, b, ord="fro"):
    n = lambda M: torch.linalg.matrix_norm(M, ord=ord)  # noqa: E731
    return float(n(num) / (n(a) * n(b)))


EX1 = FunctionExercise(
    id="ch18_ex1",
    title="the composition score",
    reference=composition_score,
    library_answers=("circuitbook.composition.composition_scores",
                     "circuitbook.composition.rotated_key_scores",
                     "circuitbook.composition._pairwise_scores",
                     "circuitbook.composition._factor_scores"),
    make_inputs=_score_inputs,
    mistakes=[
        Mistake("forgot to normalise", "The raw norm of the product grows with the size of "
                "the weights. The score is normalised so that it does not, and lies between 0 and 1: see "
                "the definition above.",
                lambda W_A, W_B: float(torch.linalg.matrix_norm(W_A @ W_B))),
        Mistake("norm of the best direction only", "Your ratio matches one whose norms measure only the "
                "single most amplified input direction. Which directions does the norm of the definition take "
                "into account (the section on it says what it averages over), and which norm does your call "
                "compute?",
                lambda W_A, W_B: _ratio(W_A @ W_B, W_A, W_B, ord=2)),
        Mistake("norm built from the singular values' sum", "Your ratio matches one whose norms add up the "
                "singular values. How is the definition's norm computed from a matrix's entries, and is that "
                "what your call computes?",
                lambda W_A, W_B: _ratio(W_A @ W_B, W_A, W_B, ord="nuc")),
        Mistake("factor order", "Check the order of the factors in your product. A row vector x "
                "passes through the writer and then through the reader: which matrix does it meet first, where "
                "does that matrix stand in x W_A W_B, and does the order of the factors change the norm?",
                lambda W_A, W_B: _ratio(W_B @ W_A, W_A, W_B)),
        Mistake("a step after the norms", "Your value does not match the definition in how the norms are "
                "taken. Write the Frobenius norm out from a matrix's entries, step by step, and compare each "
                "step with what your code computes, including what it does with the result.",
                lambda W_A, W_B: _ratio(W_A @ W_B, W_A, W_B) ** 2),
        Mistake("divided by the sum of the norms", "With a sum in the denominator the score changes "
                "when one matrix is scaled, and the bound by 1 that the chapter proves no longer applies.",
                lambda W_A, W_B: float(torch.linalg.matrix_norm(W_A @ W_B)
                                       / (torch.linalg.matrix_norm(W_A) + torch.linalg.matrix_norm(W_B)))),
        Mistake("multiplied elementwise", "Your product multiplies the two matrices entry by entry. Which "
                "product gives the map that sends x through W_A and then W_B?",
                lambda W_A, W_B: _ratio(W_A * W_B, W_A, W_B)),
    ],
    hint="The definition above is a ratio of three norms. Of which matrices, and which norm is it? What "
         "does the norm function you call compute when you give it no further argument?",
)


def k_composition_matrices(W_V, W_O, W_Q, W_K):
    """(W_A, W_B), both [d_model, d_model], for K-composition."""
    W_OV = W_V @ W_O                 # what the writer puts in the stream
    W_QK_T = W_K @ W_Q.T             # how the reader's keys read the stream
    return W_OV, W_QK_T


def _kcomp_inputs(g: torch.Generator) -> dict:
    d_model, d_head = 12 + int(torch.randint(0, 5, (1,), generator=g)), 4
    return {"W_V": torch.randn(d_model, d_head, generator=g), "W_O": torch.randn(d_head, d_model, generator=g),
            "W_Q": torch.randn(d_model, d_head, generator=g), "W_K": torch.randn(d_model, d_head, generator=g)}


EX2 = PairExercise(
    id="ch18_ex2",
    title="the K-composition matrices",
    reference=k_composition_matrices,
    make_inputs=_kcomp_inputs,
    names=("W_A", "W_B"),
    mistakes=[
        Mistake("which reader matrix", "Your W_A is the one asked for, but your W_B "
                "is not. Which of the reader's inputs does K-composition change, and where "
                "does that input appear in the reader's score x_q W_Q (x_k W_K)^T? Rearrange the score so that "
                "the writer's output is multiplied on the right by a single [d_model, d_model] matrix.",
                lambda W_V, W_O, W_Q, W_K: (W_V @ W_O, W_Q @ W_K.T)),
        Mistake("first matrix built from the reader's weights", "Your W_A is built from W_Q and W_K. A row "
                "vector passes through one head and then the other: which head does it meet first, and in which "
                "place of the pair does the exercise ask for that head's matrix?",
                lambda W_V, W_O, W_Q, W_K: (W_K @ W_Q.T, W_V @ W_O)),
        Mistake("writer matrix", "Your W_B is the one asked for, but your W_A is not "
                "what the writer does to a row vector. Follow a row vector x through the writer head step by "
                "step and check the shape of each intermediate result.",
                lambda W_V, W_O, W_Q, W_K: (W_O.T @ W_V.T, W_K @ W_Q.T)),
        Mistake("both matrices", "Neither matrix of your pair is the one the exercise "
                "asks for. Follow a row vector x through the writer step by step, checking the shape of each "
                "intermediate result; then write the reader's score x_q W_Q (x_k W_K)^T and ask which "
                "[d_model, d_model] matrix the writer's output is multiplied by when it enters on the key side.",
                lambda W_V, W_O, W_Q, W_K: (W_O.T @ W_V.T, W_Q @ W_K.T)),
        Mistake("reader matrix built from one side only", "An attention score compares a query with a key, so "
                "the reader's matrix involves the weights of both sides of that comparison; yours is built from "
                "one.",
                lambda W_V, W_O, W_Q, W_K: (W_V @ W_O, W_K @ W_K.T)),
    ],
    hint="Follow a row vector x: what does the writer add to the stream? Where in the reader's score "
         "x_q W_QK x_k^T does that output enter for K-composition, and can the score be rearranged so that the "
         "output is multiplied on the right by a single [d_model, d_model] matrix?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
