"""Chapter 10 (position-wise feed-forward networks): exercise checks and reference solutions.

Exercise 10.1 computes FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 from weights stored the way
``nn.Linear`` stores them (``weight`` is [out, in]); exercise 10.2 counts its parameters.
"""

from __future__ import annotations

import copy

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result


def ffn(x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """FFN(x) = max(0, x W1^T + b1) W2^T + b2, with W1 [d_ff, d_model] and W2 [d_model, d_ff]
    as ``nn.Linear`` stores them (``PositionwiseFeedForward.w_1.weight`` / ``w_2.weight``).
    x: [..., d_model] -> [..., d_model]."""
    return (x @ W1.T + b1).relu() @ W2.T + b2


def _ffn_inputs(g: torch.Generator) -> dict:
    d_model = 6 + int(torch.randint(0, 6, (1,), generator=g))
    d_ff = 4 * d_model + int(torch.randint(1, 4, (1,), generator=g))  # never square
    # biases of the same size as the pre-activations, so that forgetting one shows
    return {"x": torch.randn(2, 5, d_model, generator=g),
            "W1": torch.randn(d_ff, d_model, generator=g) / d_model ** 0.5,
            "b1": 0.5 * torch.randn(d_ff, generator=g),
            "W2": torch.randn(d_model, d_ff, generator=g) / d_ff ** 0.5,
            "b2": 0.5 * torch.randn(d_model, generator=g)}


class FFNExercise(FunctionExercise):
    """Like FunctionExercise, but an answer that crashes is retried with the weights
    transposed: if it then gives the right output, the reader read nn.Linear's [out, in]
    storage as [in, out] (which, with d_ff != d_model, fails on a shape error)."""

    def check(self, answer, *, seed=None) -> Result:
        result = super().check(answer, seed=seed)
        if result.passed or not result.message.startswith("your function raised"):
            return result
        g = torch.Generator().manual_seed(0 if seed is None else seed)
        inputs = self.make_inputs(g)
        expected = self.reference(**copy.deepcopy(inputs))
        for flip in (("W1", "W2"), ("W1",), ("W2",)):
            trial = copy.deepcopy(inputs)
            for name in flip:
                trial[name] = trial[name].T.contiguous()
            try:
                got = answer(**trial)
            except Exception:  # noqa: BLE001 - still crashing: keep the original report
                continue
            if self.compare(got, expected):
                which = " and ".join(flip) + (" are" if len(flip) == 2 else " is")
                return self._fail(
                    f"your function raised an error; this looks like: transposed weights. It works if {which} "
                    "given as [in, out], but nn.Linear stores weight as [out, in] and computes "
                    "x @ weight.T + bias.", "transposed weights")
        return result


def _pre(x, W1, b1):
    return x @ W1.T + b1


EX1 = FFNExercise(
    id="ch10_ex1",
    title="the position-wise feed-forward network",
    reference=ffn,
    make_inputs=_ffn_inputs,
    mistakes=[
        Mistake("forgot the ReLU", "Without max(0, .) the two layers collapse into one affine map.",
                lambda x, W1, b1, W2, b2: _pre(x, W1, b1) @ W2.T + b2),
        Mistake("ReLU after the second layer too", "The output of w_2 is added to the residual stream "
                "as it is; only the hidden layer goes through max(0, .).",
                lambda x, W1, b1, W2, b2: ffn(x, W1, b1, W2, b2).relu()),
        Mistake("forgot b1", "Add b1 to x W1^T before the ReLU.",
                lambda x, W1, b1, W2, b2: (x @ W1.T).relu() @ W2.T + b2),
        Mistake("forgot b2", "Add b2 after the second matrix.",
                lambda x, W1, b1, W2, b2: _pre(x, W1, b1).relu() @ W2.T),
        Mistake("forgot both biases", "Both layers have a bias: x W1^T + b1, then ... W2^T + b2.",
                lambda x, W1, b1, W2, b2: (x @ W1.T).relu() @ W2.T),
        Mistake("added b1 after the ReLU", "The bias shifts the pre-activation: max(0, x W1^T + b1), "
                "not max(0, x W1^T) + b1.",
                lambda x, W1, b1, W2, b2: ((x @ W1.T).relu() + b1) @ W2.T + b2),
        Mistake("used GELU", "GPT-2 uses GELU, but the paper's FFN (and the Annotated Transformer's) uses "
                "ReLU: max(0, .).",
                lambda x, W1, b1, W2, b2: torch.nn.functional.gelu(_pre(x, W1, b1)) @ W2.T + b2),
        Mistake("ReLU on the input", "The ReLU acts on the hidden layer, x W1^T + b1, not on x.",
                lambda x, W1, b1, W2, b2: (x.relu() @ W1.T + b1) @ W2.T + b2),
    ],
    hint="nn.Linear stores its weight as [out, in] and computes the input times the transposed weight, "
         "plus the bias. The FFN is two of them with a ReLU between: d_model -> d_ff (the neurons, [..., "
         "d_ff]) -> d_model.",
)


def ffn_param_count(d_model: int, d_ff: int) -> int:
    """Parameters of PositionwiseFeedForward(d_model, d_ff): two weight matrices and two
    biases, 2 d_model d_ff + d_ff + d_model."""
    return 2 * d_model * d_ff + d_ff + d_model


def _count_inputs(g: torch.Generator) -> dict:
    d_model = int(torch.randint(8, 400, (1,), generator=g))
    ratio = [2, 3, 5, 8][int(torch.randint(0, 4, (1,), generator=g))]  # never the usual 4
    return {"d_model": d_model, "d_ff": ratio * d_model + int(torch.randint(1, 9, (1,), generator=g))}


EX2 = FunctionExercise(
    id="ch10_ex2",
    title="parameters of the feed-forward network",
    reference=ffn_param_count,
    make_inputs=_count_inputs,
    compare=lambda a, b: isinstance(a, (int, float, torch.Tensor)) and not isinstance(a, bool)
    and float(a) == float(b),
    mistakes=[
        Mistake("forgot the biases", "Each nn.Linear has a bias as long as its output: d_ff for w_1 and "
                "d_model for w_2.", lambda d_model, d_ff: 2 * d_model * d_ff),
        Mistake("forgot b2", "w_2 has a bias too, of length d_model.",
                lambda d_model, d_ff: 2 * d_model * d_ff + d_ff),
        Mistake("forgot b1", "w_1 has a bias too, of length d_ff.",
                lambda d_model, d_ff: 2 * d_model * d_ff + d_model),
        Mistake("biases the wrong size", "w_1's bias has d_ff entries (its output) and w_2's has d_model.",
                lambda d_model, d_ff: 2 * d_model * d_ff + 2 * d_model),
        Mistake("biases the wrong size", "w_1's bias has d_ff entries (its output) and w_2's has d_model.",
                lambda d_model, d_ff: 2 * d_model * d_ff + 2 * d_ff),
        Mistake("counted one matrix", "There are two weight matrices, d_model x d_ff and d_ff x d_model.",
                lambda d_model, d_ff: d_model * d_ff + d_ff + d_model),
        Mistake("assumed d_ff = 4 d_model", "Use the d_ff you are given; 4 d_model is only the paper's "
                "choice.", lambda d_model, d_ff: 8 * d_model ** 2 + 5 * d_model),
        Mistake("counted d_model^2 weights", "The matrices are d_model x d_ff, not square.",
                lambda d_model, d_ff: 2 * d_model ** 2 + d_ff + d_model),
    ],
    hint="PositionwiseFeedForward is two nn.Linear layers, d_model -> d_ff and d_ff -> d_model, each with "
         "a weight matrix and a bias; the ReLU and dropout have no parameters.",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
