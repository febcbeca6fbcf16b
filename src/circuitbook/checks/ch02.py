"""Chapter 2 (architecture at a glance): exercise checks and reference solutions."""

from __future__ import annotations

import torch
from torch import nn

from circuitbook.checks.core import FunctionExercise, Mistake


def _flip(g: torch.Generator) -> bool:
    """True on even seeds. The checker seeds trial t with ``seed + t``, so consecutive trials
    alternate: every check sees both settings of a two-way switch (bias on/off, pre/post)."""
    return g.initial_seed() % 2 == 0


# --------------------------------------------------------------------------------------
# Exercise 2.1: parameters of one encoder layer
# --------------------------------------------------------------------------------------


def encoder_layer_params(d_model, h, d_ff, bias=True):
    """Parameters of one encoder layer: attention + FFN + two LayerNorms."""
    b = 1 if bias else 0
    attention = 4 * d_model * d_model + 4 * d_model * b
    ffn = 2 * d_model * d_ff + (d_ff + d_model) * b
    return attention + ffn + 2 * 2 * d_model


def _attention_one_head(d_model, h, bias):
    d_head, b = d_model // h, (1 if bias else 0)
    return 4 * d_model * d_head + (3 * d_head + d_model) * b


def _swap_attention(d_model, h, d_ff, bias, attention):
    b = 1 if bias else 0
    return encoder_layer_params(d_model, h, d_ff, bias) - (4 * d_model * d_model + 4 * d_model * b) + attention


def _params_inputs(g: torch.Generator) -> dict:
    h = [2, 3, 4, 6, 8, 12][int(torch.randint(0, 6, (1,), generator=g))]
    d_model = h * int(torch.randint(2, 65, (1,), generator=g))
    # any width except exactly 4 d_model, so "assumed d_ff = 4 d_model" is always visible
    d_ff = 4 * d_model
    while d_ff == 4 * d_model:
        d_ff = int(torch.randint(d_model, 8 * d_model + 1, (1,), generator=g))
    return {"d_model": d_model, "h": h, "d_ff": d_ff, "bias": _flip(g)}


def _distinct_params_inputs(g: torch.Generator) -> dict:
    """Inputs on which every mistake that applies gives its own count, so no wrong answer
    can be mistaken for another by an arithmetic coincidence."""
    while True:
        inputs = _params_inputs(g)
        right = encoder_layer_params(**inputs)
        wrong = [m.wrong(**inputs) for m in EX1.mistakes]
        applies = [w for w in wrong if w != right]
        if len(set(applies)) == len(applies):
            return inputs


def _same_int(a, b) -> bool:
    try:
        return float(a) == float(b) and int(a) == b
    except (TypeError, ValueError, RuntimeError, OverflowError):
        return False


EX1 = FunctionExercise(
    id="ch02_ex1",
    title="parameters of one encoder layer",
    reference=encoder_layer_params,
    make_inputs=lambda g: _distinct_params_inputs(g),
    compare=_same_int,
    mistakes=[
        Mistake("forgot the biases", "Your count is too small for this call, which had bias=True. List the "
                "parameters each of the layer's linear maps owns in this call: have you counted them all?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, False)),
        Mistake("counted biases with bias=False", "Your count is too large for this call, which had "
                "bias=False. List the parameters each of the layer's linear maps owns in this call: does "
                "it own everything you counted?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, True)),
        Mistake("counted one head only", "Your attention count is what a single head owns. How many heads "
                "share W^Q, W^K, W^V and W^O?",
                lambda d_model, h, d_ff, bias: _swap_attention(d_model, h, d_ff, bias,
                                                               _attention_one_head(d_model, h, bias))),
        Mistake("gave every head full-width matrices", "Your attention count grows in proportion to h. Write "
                "down the shape of one head's slice of W^Q, then the shape of the whole W^Q: how are "
                "they related?",
                lambda d_model, h, d_ff, bias: _swap_attention(
                    d_model, h, d_ff, bias, 4 * h * d_model * d_model + 4 * d_model * (1 if bias else 0))),
        Mistake("assumed d_ff = 4 d_model", "Your count stays the same when d_ff changes and d_model does "
                "not. Where does the feed-forward width enter your formula?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, 4 * d_model, bias)),
        Mistake("forgot the feed-forward's second matrix", "Your feed-forward count is short. Follow one vector through "
                "the FFN from d_model entries back to d_model: which weights does it pass?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias)
                - d_ff * d_model - (d_model if bias else 0)),
        Mistake("forgot the LayerNorms", "Your count is short by an amount that grows with d_model but "
                "not with d_ff or h. Which of the layer's parameters are vectors of d_model entries?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias) - 4 * d_model),
        Mistake("counted half the LayerNorm parameters", "Your LayerNorm count is short. How many LayerNorms "
                "does an encoder layer have, and how many learned vectors does each one hold?",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias) - 2 * d_model),
    ],
    hint="Add up three parts: the attention sublayer, the feed-forward network and the LayerNorms. For "
         "each part, list its weight matrices and vectors with their shapes. Which of those shapes, if "
         "any, depend on h?",
)


# --------------------------------------------------------------------------------------
# Exercise 2.2: the residual connection, pre-norm and post-norm
# --------------------------------------------------------------------------------------


def sublayer_connection(x, sublayer, norm, position):
    """x: [..., d_model]; sublayer, norm: [..., d_model] -> [..., d_model];
    position: "pre" or "post", where the LayerNorm sits.
    Returns [..., d_model]."""
    if position == "pre":
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


def _connection_inputs(g: torch.Generator) -> dict:
    d = 6 + int(torch.randint(0, 7, (1,), generator=g))
    pos = 3 + int(torch.randint(0, 4, (1,), generator=g))
    lin = nn.Linear(d, d)
    norm = nn.LayerNorm(d)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(d, d, generator=g) / d**0.5)
        lin.bias.copy_(torch.randn(d, generator=g))
        norm.weight.copy_(1 + 0.5 * torch.randn(d, generator=g))
        norm.bias.copy_(torch.randn(d, generator=g))
    # a stream with a large mean and spread, so norm(x) is far from x
    x = 3 * torch.randn(2, pos, d, generator=g) + 2
    return {"x": x, "sublayer": nn.Sequential(lin, nn.Tanh()), "norm": norm,
            "position": "pre" if _flip(g) else "post"}


def _by_position(pre_fn, post_fn):
    """A mistake that differs by position: ``pre_fn`` on pre-norm inputs, ``post_fn`` on post."""
    def wrong(x, sublayer, norm, position):
        return (pre_fn if position == "pre" else post_fn)(x, sublayer, norm)
    return wrong


def _only_at(setting):
    """The other arrangement, returned only where ``position == setting`` (elsewhere the right one,
    which a wrong answer never equals): the message then names the setting that failed."""
    def wrong(x, sublayer, norm, position):
        if position == setting:
            return sublayer_connection(x, sublayer, norm, "post" if position == "pre" else "pre")
        return sublayer_connection(x, sublayer, norm, position)
    return wrong


EX2 = FunctionExercise(
    id="ch02_ex2",
    title="pre-norm and post-norm residual connections",
    reference=sublayer_connection,
    library_answers=("circuitbook.models.encoder_decoder.SublayerConnection.forward",),
    make_inputs=_connection_inputs,
    mistakes=[
        Mistake("wrong arrangement for position='pre'", "With position=\"pre\" your function returns a "
                "residual connection, but not the pre-norm one. In pre-norm, what does `norm` see, and "
                "what is added to x?", _only_at("pre")),
        Mistake("wrong arrangement for position='post'", "With position=\"post\" your function returns a "
                "residual connection, but not the post-norm one. In post-norm, what does `norm` see, and "
                "what becomes of its output?", _only_at("post")),
        Mistake("output replaces the stream", "Your output no longer contains the stream that came in: the "
                "sublayer's result takes its place. In a residual connection, what becomes of x?",
                _by_position(lambda x, s, n: s(n(x)), lambda x, s, n: n(s(x)))),
        Mistake("normalised twice", "Your function calls `norm` twice in one arrangement. Each arrangement normalises "
                "exactly one tensor per sublayer: which one is it, for each setting?",
                lambda x, sublayer, norm, position: norm(x + sublayer(norm(x)))),
        Mistake("added the normalised input", "In one arrangement your residual path changes the stream that is "
                "passed along. Chapter 1 called the pre-norm stream a plain sum of writes: what must "
                "the residual path carry for that to be true?",
                _by_position(lambda x, s, n: n(x) + s(n(x)), lambda x, s, n: n(x + s(x)))),
        Mistake("normalised the sublayer's output", "Your function normalises the sublayer's output on its own, which "
                "neither arrangement does. Reread where each one puts the LayerNorm relative to the "
                "residual addition.",
                lambda x, sublayer, norm, position: x + norm(sublayer(x))),
        Mistake("norm never called", "Your function never calls `norm`. What do the names pre-norm and "
                "post-norm say about it?",
                lambda x, sublayer, norm, position: x + sublayer(x)),
    ],
    hint="Draw one sublayer with its residual connection: where does the stream that comes in go, and "
         "where does the LayerNorm sit relative to the addition in each arrangement? The answer has x's "
         "shape [..., d_model].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
