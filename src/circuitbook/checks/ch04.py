"""Chapter 4 (embeddings): exercise checks and reference solutions.

Exercise 4.1 is the Annotated Transformer's ``Embeddings.forward`` as a function: look up
each token's row of the table ``lut`` [vocab, d_model] and multiply by sqrt(d_model).
Exercise 4.2 is a zero-layer model with Vaswani et al.'s weight tying: the same table
embeds (scaled by sqrt(d_model)) and unembeds (as ``lut^T``, unscaled, plus a bias).
Row-vector convention throughout: a token's vector is a row, ``x W``.
"""

from __future__ import annotations

import math

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
    make_inputs=_embed_inputs,
    mistakes=[
        Mistake("forgot the scale", "The Annotated Transformer's Embeddings multiplies the looked-up rows "
                "by sqrt(d_model).",
                lambda tokens, lut: lut[tokens]),
        Mistake("scaled by d_model instead of sqrt(d_model)", "The factor is sqrt(d_model), the square root "
                "of the embedding width.",
                lambda tokens, lut: lut[tokens] * lut.shape[-1]),
        Mistake("divided by sqrt(d_model)", "Multiply by sqrt(d_model); dividing is the attention scale of "
                "chapter 6, not the embedding's.",
                lambda tokens, lut: lut[tokens] / math.sqrt(lut.shape[-1])),
        Mistake("scaled by sqrt(vocab)", "The factor uses d_model (lut.shape[-1]), not the vocabulary size.",
                lambda tokens, lut: lut[tokens] * math.sqrt(lut.shape[0])),
        Mistake("indexed columns (transposed table)", "Row t of lut [vocab, d_model] embeds token t: index "
                "the first axis, lut[tokens], not lut.T[tokens].",
                lambda tokens, lut: lut.T[tokens] * math.sqrt(lut.shape[-1])),
        Mistake("off by one", "Token ids start at 0: token t is row t, not row t - 1.",
                lambda tokens, lut: lut[tokens - 1] * math.sqrt(lut.shape[-1])),
        Mistake("added the positional encoding", "Embeddings only looks up and scales; the positional "
                "encoding is a separate module (chapter 5) added afterwards.",
                lambda tokens, lut: lut[tokens] * math.sqrt(lut.shape[-1])
                + sinusoidal_table(tokens.shape[-1], lut.shape[-1])),
    ],
    hint="Indexing the [vocab, d_model] table with the [batch, pos] ids gives [batch, pos, d_model]. The "
         "Annotated Transformer then multiplies by a scale that depends only on d_model (the paper's "
         "section 3.4): which one?",
)


def tied_logits(tokens, lut, b_U):
    """tokens: [batch, pos]; lut: [vocab, d_model]; b_U: [vocab]
    -> logits [batch, pos, vocab] of the tied model described above."""
    W_E = math.sqrt(lut.shape[-1]) * lut
    W_U = lut.T
    return W_E[tokens] @ W_U + b_U


def _tied_inputs(g: torch.Generator) -> dict:
    # a square table (vocab = d_model), so forgetting the transpose runs and can be named
    n = 10 + int(torch.randint(0, 15, (1,), generator=g))
    pos = 4 + int(torch.randint(0, 5, (1,), generator=g))
    return {"tokens": torch.randint(0, n, (2, pos), generator=g),
            "lut": torch.randn(n, n, generator=g) / math.sqrt(n),
            "b_U": torch.randn(n, generator=g)}


def _scale(lut):
    return math.sqrt(lut.shape[-1])


EX2 = FunctionExercise(
    id="ch04_ex2",
    title="logits of a tied zero-layer model",
    reference=tied_logits,
    make_inputs=_tied_inputs,
    mistakes=[
        Mistake("forgot the embedding scale", "The embedding is sqrt(d_model) * lut[tokens].",
                lambda tokens, lut, b_U: lut[tokens] @ lut.T + b_U),
        Mistake("scaled the unembedding too", "Only the embedding is multiplied by sqrt(d_model); the "
                "pre-softmax layer uses the table itself, W_U = lut^T.",
                lambda tokens, lut, b_U: lut.shape[-1] * lut[tokens] @ lut.T + b_U),
        Mistake("forgot the bias", "Add b_U to every position's logits.",
                lambda tokens, lut, b_U: _scale(lut) * lut[tokens] @ lut.T),
        Mistake("used W_E instead of W_E^T for the unembedding", "Tying means W_U = lut^T [d_model, vocab]: "
                "logit j is the dot product of the stream with row j of the table.",
                lambda tokens, lut, b_U: _scale(lut) * lut[tokens] @ lut + b_U),
        Mistake("indexed columns (transposed table)", "Row t of lut embeds token t: lut[tokens], not "
                "lut.T[tokens].",
                lambda tokens, lut, b_U: _scale(lut) * lut.T[tokens] @ lut.T + b_U),
        Mistake("returned log-probabilities", "The Annotated Transformer's Generator applies log_softmax; "
                "this exercise asks for the logits before it.",
                lambda tokens, lut, b_U: tied_logits(tokens, lut, b_U).log_softmax(-1)),
        Mistake("returned probabilities", "Return the logits, before any softmax.",
                lambda tokens, lut, b_U: tied_logits(tokens, lut, b_U).softmax(-1)),
    ],
    hint="Tied weights: one table embeds (with the scale of exercise 4.1) and unembeds (unscaled, read the "
         "other way round, so that vocab is the output side). Embed the tokens, map the [batch, pos, "
         "d_model] stream to [batch, pos, vocab] with the unembedding, add the bias.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
