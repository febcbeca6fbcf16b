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
        Mistake("forgot the biases", "With bias=True each nn.Linear also has a bias: d_model for each of W^Q, "
                "W^K, W^V, W^O and for W_2, d_ff for W_1.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, False)),
        Mistake("counted biases with bias=False", "bias=False removes the biases of the linear maps; the "
                "LayerNorms keep their gain and bias.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, True)),
        Mistake("counted one head only", "W^Q, W^K, W^V and W^O hold all h heads: h x 4 d_model d_head = "
                "4 d_model^2 weights in total.",
                lambda d_model, h, d_ff, bias: _swap_attention(d_model, h, d_ff, bias,
                                                               _attention_one_head(d_model, h, bias))),
        Mistake("gave every head full-width matrices", "A head's W^Q is d_model x d_head, not d_model x "
                "d_model: the heads split d_model between them, so the count does not grow with h.",
                lambda d_model, h, d_ff, bias: _swap_attention(
                    d_model, h, d_ff, bias, 4 * h * d_model * d_model + 4 * d_model * (1 if bias else 0))),
        Mistake("assumed d_ff = 4 d_model", "Use the d_ff you are given; 4 d_model is only the paper's choice.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, 4 * d_model, bias)),
        Mistake("forgot the feed-forward's second matrix", "The FFN has two linear maps: W_1 (d_model -> d_ff) "
                "and W_2 (d_ff -> d_model), each with its bias.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias)
                - d_ff * d_model - (d_model if bias else 0)),
        Mistake("forgot the LayerNorms", "Each of the two sublayers has its own LayerNorm with a gain and a bias "
                "of d_model entries: 4 d_model in all.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias) - 4 * d_model),
        Mistake("counted half the LayerNorm parameters", "There are two LayerNorms per encoder layer (one per "
                "sublayer), and each has a gain AND a bias: 2 x 2 x d_model.",
                lambda d_model, h, d_ff, bias: encoder_layer_params(d_model, h, d_ff, bias) - 2 * d_model),
    ],
    hint="Add up three parts: the attention sublayer's four projections, the feed-forward's two linear "
         "maps, and the LayerNorms (one per sublayer, each with a gain and a bias). A linear map from a "
         "inputs to b outputs has a x b weights and, with a bias, b more. Does splitting d_model into h "
         "heads change the size of W^Q?",
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


EX2 = FunctionExercise(
    id="ch02_ex2",
    title="pre-norm and post-norm residual connections",
    reference=sublayer_connection,
    make_inputs=_connection_inputs,
    mistakes=[
        Mistake("arrangement does not follow `position`", "Each setting returns a residual connection, but "
                "not the one its name asks for. Check what each setting applies `norm` to against the "
                "paper's formula and the Annotated Transformer's code.",
                lambda x, sublayer, norm, position: sublayer_connection(
                    x, sublayer, norm, "post" if position == "pre" else "pre")),
        Mistake("forgot the residual", "The input x must be added back: the sublayer's output is an update to "
                "the stream, not a replacement.",
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
        Mistake("forgot the LayerNorm", "Your function never calls `norm`, and both arrangements use it "
                "once per sublayer.",
                lambda x, sublayer, norm, position: x + sublayer(x)),
    ],
    hint="Both versions add the sublayer's output back onto x and differ only in what `norm` is applied "
         "to. The names say where the LayerNorm sits relative to the residual addition. The answer has "
         "x's shape [..., d_model].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
