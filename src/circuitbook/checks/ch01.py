"""Chapter 1 (background: the residual stream is a sum): exercise checks and reference solutions.

Exercise 1.1 rebuilds the residual stream that enters a block of a pre-norm transformer from
the pieces written before it. Exercise 1.2 counts the terms of the finest split of GPT-2
medium's final residual stream. Row-vector convention throughout: a position's stream is a
row of ``d_model`` numbers.
"""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, ValueExercise

# --- Exercise 1.1: the stream entering a block ----------------------------------------------


def stream_before(embed, pos_embed, attn_out, mlp_out, layer):
    """embed, pos_embed: [pos, d_model];
    attn_out, mlp_out: [n_layers, pos, d_model]; 0 <= layer < n_layers
    -> the stream entering block `layer`, [pos, d_model]."""
    before = attn_out[:layer].sum(0) + mlp_out[:layer].sum(0)
    return embed + pos_embed + before


def _stream_inputs(g: torch.Generator) -> dict:
    # 6-8 blocks: `layer` takes 3-5 values, so an answer that ignores it (a fixed number of
    # blocks) matches the layer of all five trials about once in 800 tries
    n_layers = 6 + int(torch.randint(0, 3, (1,), generator=g))
    pos, d_model = 3 + int(torch.randint(0, 4, (1,), generator=g)), 6 + int(torch.randint(0, 6, (1,), generator=g))
    # 2 <= layer <= n_layers - 2: a block before it, one after it, and off-by-one both ways differ
    layer = 2 + int(torch.randint(0, n_layers - 3, (1,), generator=g))

    def randn(*shape):
        return torch.randn(*shape, generator=g)

    return {"embed": randn(pos, d_model), "pos_embed": randn(pos, d_model),
            "attn_out": randn(n_layers, pos, d_model), "mlp_out": randn(n_layers, pos, d_model),
            "layer": layer}


EX1 = FunctionExercise(
    id="ch01_ex1",
    title="the residual stream entering a block",
    reference=stream_before,
    make_inputs=_stream_inputs,
    n_trials=5,
    mistakes=[
        Mistake("included block `layer` itself", "Block `layer` reads the stream before it writes: its own "
                "attention and MLP outputs are not in the stream that enters it.",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                stream_before(embed, pos_embed, attn_out, mlp_out, layer + 1)),
        Mistake("stopped one block early", "Your sum leaves out a block that writes before block `layer` "
                "reads. Which is the last block whose writes are in the stream that block `layer` reads?",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                stream_before(embed, pos_embed, attn_out, mlp_out, layer - 1)),
        Mistake("added block `layer`'s attention output", "Your stream is the one halfway through block "
                "`layer` (TransformerLens's resid_mid). Which blocks have written to the stream by the time "
                "block `layer` reads it?",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                stream_before(embed, pos_embed, attn_out, mlp_out, layer) + attn_out[layer]),
        Mistake("forgot the positional embedding", "What does the stream hold before block 0 writes "
                "anything, in this model with standard (added) positions? Does any of it ever leave?",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                stream_before(embed, pos_embed, attn_out, mlp_out, layer) - pos_embed),
        Mistake("left out the MLPs", "MLPs are sublayers too: each adds its output to the stream, as "
                "attention does.",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                embed + pos_embed + attn_out[:layer].sum(0)),
        Mistake("kept only the last write", "Nothing overwrites the stream in a pre-norm model: each "
                "write is added to everything written before it.",
                lambda embed, pos_embed, attn_out, mlp_out, layer: mlp_out[layer - 1]),
        Mistake("averaged the writes", "The stream is the sum of the writes, not their mean: each sublayer "
                "adds its whole output.",
                lambda embed, pos_embed, attn_out, mlp_out, layer:
                embed + pos_embed + attn_out[:layer].mean(0) + mlp_out[:layer].mean(0)),
    ],
    hint="In a pre-norm model the stream only accumulates, and a block reads it before it writes. "
         "List what has been added to the stream by the time block `layer` reads it, in the order the "
         "model adds it. The stacked tensors are indexed by block first; the answer is [pos, d_model].",
)


# --- Exercise 1.2: how many terms ----------------------------------------------------------------

GPT2_MEDIUM = {"n_layers": 24, "n_heads": 16}


def n_terms_reference() -> int:
    """Terms of GPT-2 medium's final stream, split as finely as chapter 1 splits its model:
    token and positional embedding (2), one per head (n_layers n_heads), one output bias
    per attention layer (n_layers) and one output per MLP (n_layers)."""
    n_layers, n_heads = GPT2_MEDIUM["n_layers"], GPT2_MEDIUM["n_heads"]
    return 2 + n_layers * n_heads + 2 * n_layers


_L, _H = GPT2_MEDIUM["n_layers"], GPT2_MEDIUM["n_heads"]

EX2 = ValueExercise(
    id="ch01_ex2",
    title="the number of terms in GPT-2 medium's final residual stream",
    expected=n_terms_reference,
    mistakes=[
        (2 + _L * _H + _L, "missed one kind of per-layer term",
         "Your count leaves out a kind of term that every block writes. Go through the per-head cell's "
         "list of terms again, one block at a time: what does a block add to the stream besides its "
         "heads' outputs?"),
        (2 + 2 * _L, "counted attention layers, not heads",
         "Your count has one attention term per layer; the per-head split goes one level finer. How "
         "many terms does it give one attention layer?"),
        (1 + _L * _H + 2 * _L, "missed a term written before the first block",
         "Look again at what the stream holds before block 0 writes anything: chapter 1's model and "
         "GPT-2 build that starting point the same way."),
        (_L * _H + 2 * _L, "forgot the embeddings", "The stream does not start empty: what is in it before "
         "block 0 writes are terms of the sum too."),
        (2 + _H + 2 * _L, "counted one layer's heads", "Your count has one layer's worth of heads. Which "
         "layers have heads of their own?"),
        (_L * _H, "counted only the heads", "The heads are not the only writers. Follow the stream from before "
         "block 0 to after the last block and note everything that is added to it, not only by attention."),
    ],
    hint="Reread the list of terms in the per-head cell (the one that uses hook_result). Which of them "
         "are in the stream before the first block, which does each block add, and how many blocks "
         "does GPT-2 medium have? The answer is a whole number.",
    compare=lambda a, b: isinstance(a, (int, float)) and not isinstance(a, bool) and a == b,
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
