"""Chapter 8 (the OV and QK circuits): exercise checks and reference solutions."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, PairExercise, Result, tensor_difference
from circuitbook.checks.core import random_int as _randint


# --- Exercise 8.1: the QK circuit with biases, as one bilinear form -------------------------


def extended_qk(W_Q, b_Q, W_K, b_K):
    """W_Q, W_K: [d_model, d_head]; b_Q, b_K: [d_head] -> [d_model + 1,
    d_model + 1], the QK circuit acting on residual rows with a 1 appended
    (query side on the left)."""
    Q_ext = torch.cat([W_Q, b_Q[None]], dim=0)   # [d_model + 1, d_head]
    K_ext = torch.cat([W_K, b_K[None]], dim=0)
    return Q_ext @ K_ext.T


def _ext_inputs(g: torch.Generator) -> dict:
    d_model, d_head = 6 + int(torch.randint(0, 5, (1,), generator=g)), 2 + int(torch.randint(0, 3, (1,), generator=g))
    return {"W_Q": torch.randn(d_model, d_head, generator=g), "b_Q": 1 + torch.rand(d_head, generator=g),
            "W_K": torch.randn(d_model, d_head, generator=g), "b_K": 1 + torch.rand(d_head, generator=g)}


def _blocks(tl, tr, bl, br):
    return torch.cat([torch.cat([tl, tr], dim=1), torch.cat([bl, br], dim=1)], dim=0)


def _zero_bias_like(b):
    return torch.zeros_like(b)


# One name and one message for every answer with the right blocks on the wrong sides of M (all of M,
# or only the two cross terms): a name or message per case would say what to swap, which is the
# answer. The message says which index reads which vector and leaves the rest to the reader.
SIDES = "the right terms, read by the wrong sides of M"
SIDES_MESSAGE = (
    "Your matrix holds the right numbers, but some of them are multiplied by the wrong vector. In "
    "[x_i, 1] M [x_j, 1]^T = sum over a, b of [x_i, 1][a] M[a, b] [x_j, 1][b], the row index a of M is "
    "summed against the query's row and the column index b against the key's. For each part of your M "
    "(the d_model x d_model block, the last row, the last column, the corner), ask which weights its row "
    "index comes from and which its column index, and whether that fits.")

EX1 = FunctionExercise(
    id="ch08_ex1",
    title="the QK circuit with biases as one bilinear form",
    reference=extended_qk,
    make_inputs=_ext_inputs,
    mistakes=[
        Mistake(SIDES, SIDES_MESSAGE, lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, b_Q, W_K, b_K).T),
        Mistake("left out the biases", "Expand (x_i W_Q + b_Q)(x_j W_K + b_K)^T: it has four terms, and your "
                "matrix gives only the one without a bias. Which entries of [x_i, 1] M [x_j, 1]^T are "
                "multiplied by an appended 1, and which terms could they carry?",
                lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, _zero_bias_like(b_Q), W_K, _zero_bias_like(b_K))),
        Mistake("only the query bias", "Your matrix accounts for one of the two biases but not the other. "
                "Expand the score and list the terms that contain b_K: which parts of [x_i, 1] and [x_j, 1] "
                "does each one multiply?",
                lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, b_Q, W_K, _zero_bias_like(b_K))),
        Mistake("only the key bias", "Your matrix accounts for one of the two biases but not the other. "
                "Expand the score and list the terms that contain b_Q: which parts of [x_i, 1] and [x_j, 1] "
                "does each one multiply?",
                lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, _zero_bias_like(b_Q), W_K, b_K)),
        Mistake("dropped the bias-bias corner", "Expand the score into its four terms and find the one that "
                "depends on neither x_i nor x_j. Is it anywhere in your matrix?",
                lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, b_Q, W_K, b_K)
                - _blocks(torch.zeros(W_Q.shape[0], W_Q.shape[0]), torch.zeros(W_Q.shape[0], 1),
                          torch.zeros(1, W_Q.shape[0]), (b_Q @ b_K)[None, None])),
        Mistake(SIDES, SIDES_MESSAGE,
                lambda W_Q, b_Q, W_K, b_K: _blocks(W_Q @ W_K.T, (b_Q @ W_K.T)[:, None], (W_Q @ b_K)[None],
                                                   (b_Q @ b_K)[None, None])),
    ],
    hint="The query x_i W_Q + b_Q is a row of length d_head. Which row of length d_model + 1, times which "
         "matrix, gives it?",
)


# --- Exercise 8.2: from TransformerLens's convention to the paper's ------------------------


def to_paper_convention(W_Q, W_K, W_V, W_O):
    """W_Q, W_K, W_V: [d_model, d_head]; W_O: [d_head, d_model] (row vectors)
    -> (W_QK, W_OV) of the paper (column vectors), each [d_model, d_model]."""
    W_Qp, W_Kp, W_Vp, W_Op = W_Q.T, W_K.T, W_V.T, W_O.T   # paper's matrices
    return W_Qp.T @ W_Kp, W_Op @ W_Vp


def _paper_inputs(g: torch.Generator) -> dict:
    d_model, d_head = _randint(8, 14, g), _randint(2, 5, g)
    return {name: torch.randn(*shape, generator=g)
            for name, shape in (("W_Q", (d_model, d_head)), ("W_K", (d_model, d_head)),
                                ("W_V", (d_model, d_head)), ("W_O", (d_head, d_model)))}


# One name and one message for every wrong orientation (either circuit, or both): a message per
# case would say which circuits to transpose, which is the exercise (issue 39). The message says
# what to compare and which index is which, and leaves the comparison to the reader.
ORIENTATION = "orientation of the circuits"
ORIENTATION_MESSAGE = (
    "Your two matrices are the right products up to orientation, but the pair is not oriented as the "
    "paper's. A matrix and its transpose hold the same numbers, so settle each circuit by its indices, not "
    "its entries. In the paper's score x_i^T W_QK x_j (x_i the query position's residual column, x_j the "
    "key's), the row index of W_QK is summed against the query and the column index against the key. In "
    "the paper's head output W_OV x_j, the column index of W_OV reads the source position's residual "
    "vector and the row index is the component written. Write each circuit with the paper's own matrices "
    "(W_Q^p = W_Q^T, ...), then ask of each of yours which index does what. Decide each circuit on its own.")


def _orientations(W_Q, W_K, W_V, W_O):
    """The three pairs of the right products with a wrong orientation (the first, the second, both)."""
    qk, ov = to_paper_convention(W_Q, W_K, W_V, W_O)
    return [(qk.T, ov), (qk, ov.T), (qk.T, ov.T)]


@dataclass
class _ConventionExercise(PairExercise):
    """Exercise 8.2: where a half is wrong in some other way, a half that is the right product up
    to orientation is not called right (nor transposed): said either way, it would tell which
    circuit needs a transpose. A pair in the wrong order is named whatever its orientation."""

    def _explain(self, got, expected, inputs) -> Result:
        if not (isinstance(got, (tuple, list)) and len(got) == 2
                and all(isinstance(a, torch.Tensor) and a.shape == b.shape for a, b in zip(got, expected))):
            return super()._explain(got, expected, inputs)

        def up_to_orientation(a, b):
            return a.ndim == 2 and (self.compare(a, b) or self.compare(a.T, b))

        if all(up_to_orientation(a, b) for a, b in zip(got, reversed(expected))):
            return self._fail("not quite: your two matrices are each the right product, up to orientation, in the other order. "
                              "Return (W_QK, W_OV).",
                              "returned the pair in the wrong order")
        notes = [f"{name}: {tensor_difference(a, b)[0]}" for name, a, b in zip(self.names, got, expected)
                 if not up_to_orientation(a, b)]
        unjudged = [name for name, a, b in zip(self.names, got, expected) if up_to_orientation(a, b)]
        notes += [f"{name} is the right product up to its orientation, which is judged once both are"
                  for name in unjudged]
        return self._fail("; ".join(notes), "wrong values")


EX2 = _ConventionExercise(
    id="ch08_ex2",
    title="the paper's W_QK and W_OV from TransformerLens weights",
    reference=to_paper_convention,
    make_inputs=_paper_inputs,
    names=("W_QK", "W_OV"),
    mistakes=[
        *[Mistake(ORIENTATION, ORIENTATION_MESSAGE,
                  lambda W_Q, W_K, W_V, W_O, k=k: _orientations(W_Q, W_K, W_V, W_O)[k]) for k in range(3)],
        Mistake("d_head x d_head products", "Both circuits are [d_model, d_model], and your products are "
                "d_head x d_head. Look at the shapes of the matrices you multiplied: are they the paper's "
                "matrices, or the ones the function was given?",
                lambda W_Q, W_K, W_V, W_O: (W_Q.T @ W_K, W_O @ W_V)),
        Mistake("multiplied the OV factors in the wrong order", "Your W_OV is not a [d_model, d_model] map in "
                "the paper's sense: with column vectors, the map that acts first stands on the right. Which of "
                "the paper's two matrices reads the residual vector?",
                lambda W_Q, W_K, W_V, W_O: (W_Q @ W_K.T, W_V.T @ W_O.T)),
        Mistake("returned the pair in the wrong order", "Return (W_QK, W_OV).",
                lambda W_Q, W_K, W_V, W_O: ((W_V @ W_O).T, W_Q @ W_K.T)),
    ],
    hint="The paper's matrices act on column vectors, so each is the transpose of the row-vector matrix "
         "given here (W_Q^p = W_Q^T, and the same for the other three). Write the paper's four matrices "
         "first. Then write, with them, the score q_i^T k_j of query x_i on key x_j, and the vector the head "
         "writes for a source x_j; W_QK is the matrix between x_i^T and x_j, W_OV the matrix in front of "
         "x_j. With column vectors, maps compose right to left. Both are [d_model, d_model].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
