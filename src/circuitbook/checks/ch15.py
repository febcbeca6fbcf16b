"""Chapter 15 (one-layer transformers): exercise checks and reference solutions.

Exercise 15.1 rebuilds a one-layer attention-only model's logits from the path formula,
given the attention patterns; exercise 15.2 reads the most likely skip-trigram for a
current token off the full QK and OV circuits. Row-vector convention (TransformerLens):
``full_qk[b, a]`` is the score a query token b gives a key token a, and
``full_ov[a, c]`` the change in logit c when the head attends fully to token a.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def one_layer_logits(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U):
    """The logits of a one-layer attention-only model, given its patterns."""
    e = W_E[tokens]                                       # [pos, d_model]
    v = torch.einsum("pm,hmd->hpd", e, W_V) + b_V[:, None]
    heads = torch.einsum("hqk,hkd,hdm->qm", patterns, v, W_O)
    return (e + heads + b_O) @ W_U + b_U


def _variant(tokens, patterns, W_E, W_V, W_O, b_V, b_O, W_U, b_U, *, direct=True, transpose=False,
             use_b_V=True, use_b_O=True, use_b_U=True, mix_heads=False, mean_heads=False):
    e = W_E[tokens]
    A = patterns.mT if transpose else patterns
    v = torch.einsum("pm,hmd->hpd", e, W_V) + (b_V[:, None] if use_b_V else 0)
    if mix_heads:
        heads = torch.einsum("hqk,gkd,gdm->qm", A, v, W_O)
    else:
        heads = torch.einsum("hqk,hkd,hdm->qm", A, v, W_O)
    if mean_heads:
        heads = heads / patterns.shape[0]
    x = (e if direct else 0) + heads + (b_O if use_b_O else 0)
    return x @ W_U + (b_U if use_b_U else 0)


def _one_layer_inputs(g: torch.Generator) -> dict:
    d_vocab, d_model, d_head, n_heads = 20, 16, 4, 3
    pos = 6 + int(torch.randint(0, 4, (1,), generator=g))
    scores = 2 * torch.randn(n_heads, pos, pos, generator=g)
    causal = torch.tril(torch.ones(pos, pos, dtype=torch.bool))
    return {"tokens": torch.randint(0, d_vocab, (pos,), generator=g),
            "patterns": scores.masked_fill(~causal, float("-inf")).softmax(-1),
            "W_E": torch.randn(d_vocab, d_model, generator=g),
            "W_V": torch.randn(n_heads, d_model, d_head, generator=g),
            "W_O": torch.randn(n_heads, d_head, d_model, generator=g),
            "b_V": torch.randn(n_heads, d_head, generator=g),
            "b_O": torch.randn(d_model, generator=g),
            "W_U": torch.randn(d_model, d_vocab, generator=g),
            "b_U": torch.randn(d_vocab, generator=g)}


def _m(**flags):
    return lambda **inputs: _variant(**inputs, **flags)


EX1 = FunctionExercise(
    id="ch15_ex1",
    title="one-layer logits from the path formula",
    reference=one_layer_logits,
    make_inputs=_one_layer_inputs,
    mistakes=[
        Mistake("a path is missing",
                "Your logits are not the model's. Set every W_O to zero: what does the model still "
                "output, and what does your function output?",
                _m(direct=False)),
        Mistake("a position's logits depend on later tokens",
                "Your logits at an early position change when a later token changes, although the model "
                "is causal. Work out one head's term at the first position by hand: which positions' "
                "values can it mix?",
                _m(transpose=True)),
        # one message for each bias left out: naming the bias would name the fix
        *[Mistake("a constant row is missing",
                  "Your logits are off by the same row at every position: which parameters add a row that "
                  "does not depend on the tokens, and does your function use each of them?",
                  _m(**{left_out: False})) for left_out in ("use_b_V", "use_b_O", "use_b_U")],
        Mistake("several biases are left out",
                "Your logits are off by the same row at every position, whatever the tokens. Which "
                "parameters add a row that does not depend on the tokens, and where does each enter "
                "the model's computation?",
                _m(use_b_V=False, use_b_O=False, use_b_U=False)),
        Mistake("heads' patterns and values crossed",
                "Zero one head's W_O: in your answer that head's pattern still changes the logits. "
                "Whose values does a head's pattern mix, and whose W_O writes them?",
                _m(mix_heads=True)),
        Mistake("the heads' term has the wrong size",
                "Your heads' term points the right way at every position, but its size is not the "
                "model's. Follow one position through the layer by hand: what exactly does the layer "
                "add to the stream?",
                _m(mean_heads=True)),
    ],
    hint="Follow one position's residual stream from the embedding to the logits: which terms are added to "
         "it on the way, and which of the arguments does each one use? For a single head, which matrices "
         "make its values, which axis of its pattern runs over the positions it reads, and which matrix "
         "writes the result? Stream [pos, d_model], logits [pos, d_vocab].",
)


def top_skip_trigram(full_qk, full_ov, current):
    """full_qk [B, A], full_ov [A, C] (vocab x vocab); current [n] ->
    LongTensor [n, 2] of (source A, output C)."""
    source = full_qk[current].argmax(-1)
    output = full_ov[source].argmax(-1)
    return torch.stack([source, output], dim=-1)


def _skip_inputs(g: torch.Generator) -> dict:
    d_vocab = 24 + int(torch.randint(0, 8, (1,), generator=g))
    return {"full_qk": torch.randn(d_vocab, d_vocab, generator=g),
            "full_ov": torch.randn(d_vocab, d_vocab, generator=g),
            "current": torch.randperm(d_vocab, generator=g)[:6]}


def _pair(src, out):
    return torch.stack([src, out], dim=-1)


EX2 = FunctionExercise(
    id="ch15_ex2",
    title="the top skip-trigram of a current token",
    reference=top_skip_trigram,
    make_inputs=_skip_inputs,
    mistakes=[
        Mistake("source is not the key the current token scores highest",
                "Your source for a current token b is not the key that b's scores favour. Take one "
                "current token and find by hand the key it scores highest: is that your source?",
                lambda full_qk, full_ov, current: _pair(
                    s := full_qk[:, current].argmax(0), full_ov[s].argmax(-1))),
        Mistake("output is not the logit the source raises most",
                "Your sources are right, but your output C is not the logit that attending to your source "
                "raises most. Take one source and list by hand the logits it raises: is your C on top?",
                lambda full_qk, full_ov, current: _pair(
                    s := full_qk[current].argmax(-1), full_ov[:, s].argmax(0))),
        Mistake("output read from another token's OV row",
                "Your sources are right, but your outputs are not. Change full_qk so that your sources "
                "change, and see whether your outputs follow them: what should decide C once the head has "
                "picked its source?",
                lambda full_qk, full_ov, current: _pair(
                    full_qk[current].argmax(-1), full_ov[current].argmax(-1))),
        Mistake("sources do not follow the key scores",
                "Your sources are not the keys the current tokens score highest, and they stay the same "
                "when those scores change. Trace one current token's source back to the numbers it was "
                "chosen from: which numbers are they?",
                lambda full_qk, full_ov, current: _pair(
                    s := full_ov[current].argmax(-1), full_ov[s].argmax(-1))),
        Mistake("neither sources nor outputs match",
                "Neither your sources nor your outputs match the reference. Work one current token "
                "through by hand: which key do its scores favour, and what does attending to that key "
                "raise most?",
                lambda full_qk, full_ov, current: _pair(
                    s := full_ov[current].argmax(-1), full_qk[s].argmax(-1))),
        Mistake("the result does not follow the docstring's layout",
                "Your result differs from the reference entry by entry. Work out one current token's "
                "source and output by hand and compare them with your row for it.",
                lambda full_qk, full_ov, current: top_skip_trigram(full_qk, full_ov, current).flip(-1)),
    ],
    hint="Start from the shapes: full_qk is [B, A] and full_ov is [A, C], so a row of each belongs to one "
         "token. What does the second table need from the first before you can read it, and what "
         "does each entry of the result stand for? The result is integers, [n, 2].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
