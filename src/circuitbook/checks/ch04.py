"""Chapter 4 (embeddings): exercise checks and reference solutions.

Exercise 4.1 is the Annotated Transformer's ``Embeddings.forward`` as a function: look up
each token's row of the table ``lut`` [vocab, d_model] and multiply by sqrt(d_model).
Exercise 4.2 is a zero-layer model with Vaswani et al.'s weight tying: the same table
embeds (scaled by sqrt(d_model)) and unembeds (as ``lut^T``, unscaled, plus a bias).
Row-vector convention throughout: a token's vector is a row, ``x W``.
"""

from __future__ import annotations

import math
import secrets

import torch

from circuitbook.checks.core import FunctionExercise, Mistake
from circuitbook.models.encoder_decoder import sinusoidal_table


def embed(tokens, lut):
    """tokens: [batch, pos] ids; lut: [vocab, d_model]
    -> [batch, pos, d_model], the Annotated Transformer's scaled embedding."""
    return lut[tokens] * math.sqrt(lut.shape[-1])


def _embed_inputs(g: torch.Generator) -> dict:
    # vocab < d_model, so indexing the columns (lut.T[tokens]) runs and can be named
    vocab = 8 + int(torch.randint(0, 9, (1,), generator=g))
    d_model = 2 * (12 + int(torch.randint(0, 13, (1,), generator=g)))  # even, for the PE mistake
    pos = 5 + int(torch.randint(0, 6, (1,), generator=g))
    return {"tokens": torch.randint(0, vocab, (3, pos), generator=g),
            "lut": torch.randn(vocab, d_model, generator=g)}


EX1 = FunctionExercise(
    id="ch04_ex1",
    title="the scaled embedding lookup",
    reference=embed,
    library_answers=("circuitbook.models.encoder_decoder.Embeddings.forward",),
    make_inputs=_embed_inputs,
    mistakes=[
        Mistake("rows equal the table's rows", "Your rows are the table's rows as they are. Reread the Annotated "
                "Transformer's Embeddings.forward: does it return lut(x) unchanged?",
                lambda tokens, lut: lut[tokens]),
        Mistake("scale factor too large", "Your scale factor is too large. Which power of "
                "d_model does Embeddings.forward use?",
                lambda tokens, lut: lut[tokens] * lut.shape[-1]),
        Mistake("rows shrunk", "Your rows come out shorter than the table's rows. Reread the line "
                "of Embeddings.forward that returns them: what operation joins lut(x) and the scale?",
                lambda tokens, lut: lut[tokens] / math.sqrt(lut.shape[-1])),
        Mistake("scale from lut.shape[0]", "Your scale factor comes from lut.shape[0]. What does "
                "that size count, and what quantity does Embeddings.forward take the root of?",
                lambda tokens, lut: lut[tokens] * math.sqrt(lut.shape[0])),
        Mistake("indexed the wrong axis", "Which axis of lut [vocab, d_model] runs over the "
                "tokens, and which axis did you index?",
                lambda tokens, lut: lut.T[tokens] * math.sqrt(lut.shape[-1])),
        Mistake("off by one", "Compare your row for token 0 with the table: which row did you return?",
                lambda tokens, lut: lut[tokens - 1] * math.sqrt(lut.shape[-1])),
        Mistake("position added", "Your output depends on the position as well as the "
                "token. Which module adds position, and is it part of Embeddings?",
                lambda tokens, lut: lut[tokens] * math.sqrt(lut.shape[-1])
                + sinusoidal_table(tokens.shape[-1], lut.shape[-1])),
    ],
    hint="What shape does indexing the [vocab, d_model] table with the [batch, pos] ids give? Then "
         "reread Embeddings.forward: what does it do to the looked-up rows before returning them, and "
         "which of the model's sizes does that use?",
)


def tied_logits(tokens, lut, b_U):
    """tokens: [batch, pos]; lut: [vocab, d_model]; b_U: [vocab]
    -> logits [batch, pos, vocab] of the tied model described above."""
    W_E = math.sqrt(lut.shape[-1]) * lut
    W_U = lut.T
    return W_E[tokens] @ W_U + b_U


def _tied_inputs(g: torch.Generator) -> dict:
    # Two trials in three use a square table (vocab = d_model), so forgetting the transpose runs
    # and can be named; the third (seed = 2 mod 3, the last trial of every check: see _TiedExercise)
    # has vocab < d_model, so a scale taken from the wrong axis of the table fails.
    n = 10 + int(torch.randint(0, 15, (1,), generator=g))
    d_model = n + (3 + int(torch.randint(0, 6, (1,), generator=g)) if g.initial_seed() % 3 == 2 else 0)
    pos = 4 + int(torch.randint(0, 5, (1,), generator=g))
    return {"tokens": torch.randint(0, n, (2, pos), generator=g),
            "lut": torch.randn(n, d_model, generator=g) / math.sqrt(d_model),
            "b_U": torch.randn(n, generator=g)}


class _TiedExercise(FunctionExercise):
    """Checked on seeds s, s + 1, s + 2 with s a multiple of 3: the two square tables come first,
    so a mistake that runs only on a square table is named before the non-square trial raises."""

    @staticmethod
    def first_seed(seed: int) -> int:
        """The seed of the first trial when the check is given ``seed``."""
        return seed - seed % 3

    def check(self, answer, *, seed: int | None = None):
        seed = secrets.randbits(31) if seed is None else seed
        return super().check(answer, seed=self.first_seed(seed))


def _scale(lut):
    return math.sqrt(lut.shape[-1])


EX2 = _TiedExercise(
    id="ch04_ex2",
    title="logits of a tied zero-layer model",
    reference=tied_logits,
    make_inputs=_tied_inputs,
    mistakes=[
        Mistake("forgot the embedding scale", "Your embedding is missing something exercise 4.1 "
                "put there: what does Embeddings.forward do after the lookup?",
                lambda tokens, lut, b_U: lut[tokens] @ lut.T + b_U),
        Mistake("an extra scale", "Your logits are too large by a constant factor. Reread the "
                "exercise's two ends: how many times does the scale of exercise 4.1 enter the logits?",
                lambda tokens, lut, b_U: lut.shape[-1] * lut[tokens] @ lut.T + b_U),
        Mistake("scale from lut.shape[0]", "Your scale factor comes from lut.shape[0]. What does "
                "that size count, and what quantity does Embeddings.forward take the root of?",
                lambda tokens, lut, b_U: math.sqrt(lut.shape[0]) * lut[tokens] @ lut.T + b_U),
        Mistake("missing a parameter", "Your logits are off by the same vector at every "
                "position. Which parameter have you not used?",
                lambda tokens, lut, b_U: _scale(lut) * lut[tokens] @ lut.T),
        Mistake("logits from the table's other axis", "Your logits have the right shape but the wrong "
                "values. Which axis of the [batch, pos, vocab] logits must the table's vocab axis "
                "become, and what shape must W_U have for that?",
                lambda tokens, lut, b_U: _scale(lut) * lut[tokens] @ lut + b_U),
        Mistake("indexed the wrong axis", "Which axis of lut [vocab, d_model] runs over the "
                "tokens, and which axis did you index?",
                lambda tokens, lut, b_U: _scale(lut) * lut.T[tokens] @ lut.T + b_U),
        Mistake("returned log-probabilities", "Your rows exponentiate to sum to 1. What does the "
                "exercise ask for: the Generator's output, or what goes into its last step?",
                lambda tokens, lut, b_U: tied_logits(tokens, lut, b_U).log_softmax(-1)),
        Mistake("returned probabilities", "Your rows sum to 1. Is that what the exercise asks "
                "for?",
                lambda tokens, lut, b_U: tied_logits(tokens, lut, b_U).softmax(-1)),
    ],
    hint="Tied weights: one table serves both ends. How many times does the scale of exercise 4.1 enter "
         "the logits? To unembed, the [batch, pos, d_model] stream must become [batch, pos, vocab]: which "
         "way round must the table be read for that? And have you used every input?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
