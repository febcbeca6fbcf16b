"""Chapter 20 (the notation Rosetta stone): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


# --------------------------------------------------------------------------------------
# Exercise 20.1: nn.Linear weights -> TransformerLens per-head weights
# --------------------------------------------------------------------------------------


def linear_to_tl(weight, n_heads, which):
    """nn.Linear weight [out, in] -> per-head TransformerLens tensor."""
    W = weight.T                                   # the row-vector matrix
    d_in, d_out = W.shape
    if which == "o":                               # heads are blocks of rows
        return W.reshape(n_heads, d_in // n_heads, d_out)
    # heads are blocks of columns: [d_model, h, d_head] -> [h, d_model, d_head]
    return W.reshape(d_in, n_heads, d_out // n_heads).permute(1, 0, 2)


def _linear_inputs(g: torch.Generator) -> dict:
    n_heads = int(torch.randint(2, 5, (1,), generator=g))
    d_head = int(torch.randint(3, 7, (1,), generator=g))
    d_model = n_heads * d_head
    # Consecutive trials of a check use consecutive seeds, so the parity of the seed
    # alternates: every check sees both an output matrix and a query/key/value matrix.
    if g.initial_seed() % 2:
        which = "o"
    else:
        which = "qkv"[int(torch.randint(0, 3, (1,), generator=g))]
    return {"weight": torch.randn(d_model, d_model, generator=g), "n_heads": n_heads, "which": which}


def _interleaved(weight, n_heads, which):
    W = weight.T
    d_in, d_out = W.shape
    if which == "o":
        return W.reshape(d_in // n_heads, n_heads, d_out).permute(1, 0, 2)
    return W.reshape(d_in, d_out // n_heads, n_heads).permute(2, 0, 1)


# Each mistake below is about one kind of matrix; on the other kinds it answers as the
# reference does, as a reader's function with that one mistake would.


def _no_permute(weight, n_heads, which):
    if which == "o":
        return linear_to_tl(weight, n_heads, which)
    W = weight.T
    return W.reshape(n_heads, W.shape[0], W.shape[1] // n_heads)


def _o_like_q(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, "q")


def _q_like_o(weight, n_heads, which):
    return linear_to_tl(weight, n_heads, "o")


EX1 = FunctionExercise(
    id="ch20_ex1",
    title="nn.Linear weights to TransformerLens per-head weights",
    reference=linear_to_tl,
    library_answers=("circuitbook.models.encoder_decoder.tl_weights",),
    make_inputs=_linear_inputs,
    mistakes=[
        Mistake("right shapes, but no head holds TransformerLens's entries",
                "Your heads have the asked-for shapes, but the numbers in them are not "
                "TransformerLens's. What does nn.Linear compute from a row vector x and the tensor it "
                "stores as [out, in], and which matrix does that make its row-vector map?",
                lambda weight, n_heads, which: linear_to_tl(weight.T, n_heads, which)),
        Mistake("each head's layout",
                "Your heads hold the right numbers, but not where the exercise asks for them. Take one "
                "head and one entry W[h][i, j]: which vector's coordinate should i index, and which j? "
                "Check that against the shapes the exercise gives.",
                lambda weight, n_heads, which: linear_to_tl(weight, n_heads, which).transpose(-1, -2)),
        Mistake("heads interleaved",
                "Look at the entries of the concatenated heads that ended up in your head 0: are they "
                "the one contiguous block the exercise gives it? Think about the order in which a "
                "reshape fills the axes it makes.",
                _interleaved),
        Mistake("entries of different heads mixed",
                "For a query, key or value matrix your heads have the asked-for shape, but each holds "
                "entries that belong to several heads. On which axis of the row-vector matrix do the "
                "concatenated heads lie, and can a reshape alone move an axis?",
                _no_permute),
        Mistake("output heads of shape [d_model, d_head]",
                "Your output heads have the shape of a query head, not the [d_head, d_model] the "
                "exercise asks for. Does W_O produce the concatenated heads or read them, and which "
                "side of a row-vector matrix is the one it reads?",
                _o_like_q),
        Mistake("query/key/value heads of shape [d_head, d_model]",
                "Your query, key or value heads have the shape of an output head, not the "
                "[d_model, d_head] the exercise asks for. Do these matrices read the concatenated heads "
                "or produce them, and which side of a row-vector matrix is the one it produces?",
                _q_like_o),
    ],
    hint="Two questions settle it. What does nn.Linear compute from a row vector x and its stored "
         "[out, in] weight, so which matrix is its map in TransformerLens's convention? And for each "
         "kind of matrix, are the concatenated heads on the side it reads or on the side it writes? "
         "Then mind the order in which a reshape fills its axes. The check tries an output matrix and "
         "the other kinds.",
)


# --------------------------------------------------------------------------------------
# Exercise 20.2: the OV circuits of every head, straight from nn.Linear weights
# --------------------------------------------------------------------------------------


def ov_from_linears(w_v, w_o, n_heads):
    """nn.Linear weights of W^V and W^O -> W_OV per head [n_heads, d, d]."""
    return linear_to_tl(w_v, n_heads, "v") @ linear_to_tl(w_o, n_heads, "o")


def _ov_inputs(g: torch.Generator) -> dict:
    n_heads = int(torch.randint(2, 5, (1,), generator=g))
    d_model = n_heads * int(torch.randint(3, 7, (1,), generator=g))
    return {"w_v": torch.randn(d_model, d_model, generator=g),
            "w_o": torch.randn(d_model, d_model, generator=g), "n_heads": n_heads}


EX2 = FunctionExercise(
    id="ch20_ex2",
    title="OV circuits from nn.Linear weights",
    reference=ov_from_linears,
    make_inputs=_ov_inputs,
    mistakes=[
        Mistake("each head's layout",
                "Each of your heads holds the right numbers, but not laid out as TransformerLens lays "
                "out its circuits. On which side of a matrix does a TransformerLens stream vector "
                "stand, and which of the head's two maps meets it first?",
                lambda w_v, w_o, n_heads: ov_from_linears(w_v, w_o, n_heads).transpose(-1, -2)),
        Mistake("right shape, but no head holds TransformerLens's W_OV",
                "Each of your heads is a [d_model, d_model] matrix, but its numbers are not those of "
                "TransformerLens's W_OV, in any layout. What form of the weights does your linear_to_tl "
                "from exercise 20.1 expect, and what form did it get?",
                lambda w_v, w_o, n_heads: linear_to_tl(w_v.T, n_heads, "v") @ linear_to_tl(w_o.T, n_heads, "o")),
        Mistake("heads interleaved",
                "Each of your heads mixes coordinates that belong to several heads: every n_heads-th "
                "coordinate of the concatenated heads instead of one block. Which coordinates does "
                "exercise 20.1 give to head h?",
                lambda w_v, w_o, n_heads: _interleaved(w_v, n_heads, "v") @ _interleaved(w_o, n_heads, "o")),
        Mistake("one matrix for the whole layer",
                "You returned a single [d_model, d_model] matrix, which is no circuit of any one head. "
                "Compare your result's shape with the docstring's: where does your computation lose an "
                "axis?",
                lambda w_v, w_o, n_heads: w_v.T @ w_o.T),
        Mistake("each head is [d_head, d_head]",
                "Your heads are [d_head, d_head], not maps from the stream to the stream. Which axis "
                "does your matrix product contract, and which one should it?",
                lambda w_v, w_o, n_heads: linear_to_tl(w_o, n_heads, "o") @ linear_to_tl(w_v, n_heads, "v")),
    ],
    hint="Follow one row vector x of the attended stream through one head: which of the head's maps "
         "meets it first, and which one produces what the head writes? Exercise 20.1 turns the stored "
         "weights into per-head maps in TransformerLens's convention. The answer has one "
         "[d_model, d_model] matrix per head.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
