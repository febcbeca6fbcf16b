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
        Mistake("forgot the direct path",
                "The embedding also reaches the unembedding without passing through any head "
                "(the residual connection): add W_E[tokens] @ W_U.",
                _m(direct=False)),
        Mistake("pattern transposed",
                "patterns[h, i, j] is how much query position i reads key position j, so the output "
                "at i is sum_j A[i, j] v_j: A @ v, not A^T @ v.",
                _m(transpose=True)),
        Mistake("forgot b_V", "Values are e W_V + b_V; the value bias reaches the output as b_V W_O "
                "(each row of A sums to one).", _m(use_b_V=False)),
        Mistake("forgot b_O", "The layer adds its output bias b_O to the stream once, whatever the heads "
                "do.", _m(use_b_O=False)),
        Mistake("forgot b_U", "The unembedding adds b_U.", _m(use_b_U=False)),
        Mistake("forgot every bias", "Add b_V (inside the values), b_O (to the stream) and b_U (to the "
                "logits).", _m(use_b_V=False, use_b_O=False, use_b_U=False)),
        Mistake("paired each pattern with every head's OV circuit",
                "Head h's pattern moves head h's values only: sum over h of A^h (e W_V^h + b_V^h) W_O^h, "
                "not (sum of patterns) times (sum of OV circuits).",
                _m(mix_heads=True)),
        Mistake("averaged the heads instead of adding them",
                "The layer's output is the sum of its heads' outputs.", _m(mean_heads=True)),
    ],
    hint="The logits are the unembedding of the final stream (plus its bias), and in a one-layer "
         "attention-only model that stream is the token embedding plus every head's output plus the output "
         "bias. A head's output: its values (the embedding read through W_V[h], plus b_V[h]) mixed by its "
         "pattern, written by W_O[h]. Stream [pos, d_model], logits [pos, d_vocab].",
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
        Mistake("read the QK circuit by columns",
                "Row b of full_qk holds the scores query token b gives every key: take full_qk[B] and "
                "argmax over the last axis. Column b says which queries attend to b.",
                lambda full_qk, full_ov, current: _pair(
                    s := full_qk[:, current].argmax(0), full_ov[s].argmax(-1))),
        Mistake("read the OV circuit by columns",
                "Row a of full_ov is what attending to a does to every logit: argmax over full_ov[A].",
                lambda full_qk, full_ov, current: _pair(
                    s := full_qk[current].argmax(-1), full_ov[:, s].argmax(0))),
        Mistake("took the output from the current token's OV row",
                "The head copies from the token it attends to: the output comes from full_ov[A], where A "
                "is the source, not from full_ov[B].",
                lambda full_qk, full_ov, current: _pair(
                    full_qk[current].argmax(-1), full_ov[current].argmax(-1))),
        Mistake("used the OV circuit to choose the source",
                "Where a head attends is set by the QK circuit; the OV circuit says what it writes.",
                lambda full_qk, full_ov, current: _pair(
                    s := full_ov[current].argmax(-1), full_ov[s].argmax(-1))),
        Mistake("swapped the QK and OV circuits",
                "The QK circuit picks the source A; the OV circuit of A picks the output C.",
                lambda full_qk, full_ov, current: _pair(
                    s := full_ov[current].argmax(-1), full_qk[s].argmax(-1))),
        Mistake("returned (output, source)", "Return the columns in the order (source A, output C).",
                lambda full_qk, full_ov, current: top_skip_trigram(full_qk, full_ov, current).flip(-1)),
    ],
    hint="Start from the shapes: full_qk is [B, A] and full_ov is [A, C], so a row of each belongs to one "
         "token, and indexing with a LongTensor picks many rows at once. You want token ids, not scores: "
         "which reduction over a row returns a position instead of a value? The answer of your first step "
         "is what the second step needs to index with. The result is integers, [n, 2].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
