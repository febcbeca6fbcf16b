"""Chapter 10 (position-wise feed-forward networks): exercise checks and reference solutions.

Exercise 10.1 computes FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 from weights stored the way
``nn.Linear`` stores them (``weight`` is [out, in]); exercise 10.2 splits it into what each
neuron writes, in TransformerLens's names (``W_in`` [d_model, d_mlp], ``W_out`` [d_mlp, d_model]).
"""

from __future__ import annotations

import copy

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result


def ffn(x, W1, b1, W2, b2):
    """Position-wise FFN with nn.Linear-stored weights:
    W1 [d_ff, d_model], b1 [d_ff], W2 [d_model, d_ff], b2 [d_model]."""
    hidden = (x @ W1.T + b1).relu()     # [..., d_ff]: the neurons
    return hidden @ W2.T + b2           # [..., d_model]: written to the stream


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
                return self._fail(
                    f"your function raised an error on these inputs. Print the shapes of "
                    "x, W1 and W2: which of each matrix's axes has to line up with the vector it acts on?",
                    "transposed weights")
        return result


def _pre(x, W1, b1):
    return x @ W1.T + b1


EX1 = FFNExercise(
    id="ch10_ex1",
    title="the position-wise feed-forward network",
    reference=ffn,
    library_answers=("circuitbook.models.encoder_decoder.PositionwiseFeedForward.forward",),
    make_inputs=_ffn_inputs,
    mistakes=[
        Mistake("forgot the ReLU", "Your output is an affine function of x. What keeps two linear "
                "layers from collapsing into one?",
                lambda x, W1, b1, W2, b2: _pre(x, W1, b1) @ W2.T + b2),
        Mistake("ReLU after the second layer too", "Your output is never negative. At which step of "
                "equation (2) of the paper is the nonlinearity applied?",
                lambda x, W1, b1, W2, b2: ffn(x, W1, b1, W2, b2).relu()),
        Mistake("forgot b1", "Your output is unchanged when b1 changes. Where in equation (2) of "
                "the paper does b1 enter?",
                lambda x, W1, b1, W2, b2: (x @ W1.T).relu() @ W2.T + b2),
        Mistake("forgot b2", "Your output is unchanged when b2 changes. Where in equation (2) of "
                "the paper does b2 enter?",
                lambda x, W1, b1, W2, b2: _pre(x, W1, b1).relu() @ W2.T),
        Mistake("forgot both biases", "Your output is unchanged when b1 or b2 changes. Where in "
                "equation (2) of the paper does each argument enter?",
                lambda x, W1, b1, W2, b2: (x @ W1.T).relu() @ W2.T),
        Mistake("added b1 after the ReLU", "Your first bias is not added where the reference adds "
                "it. Follow one neuron through equation (2) of the paper: at which step is b1 added, "
                "relative to the nonlinearity?",
                lambda x, W1, b1, W2, b2: ((x @ W1.T).relu() + b1) @ W2.T + b2),
        Mistake("a smooth nonlinearity", "Your nonlinearity is smooth near zero. Which nonlinearity does "
                "the paper's FFN (and the Annotated Transformer's) use?",
                lambda x, W1, b1, W2, b2: torch.nn.functional.gelu(_pre(x, W1, b1)) @ W2.T + b2),
        Mistake("ReLU on the input", "Your nonlinearity acts on the input. Which vector of the FFN is "
                "the hidden layer?",
                lambda x, W1, b1, W2, b2: (x.relu() @ W1.T + b1) @ W2.T + b2),
    ],
    hint="Look up how nn.Linear stores its weight and what it computes with it: which of W1's axes has "
         "d_model entries, and which has d_ff? Then follow one position's vector through the FFN of "
         "equation (2) of the paper: what size is it after each step?",
)


def neuron_writes(x, W_in, b_in, W_out):
    """x: [pos, d_model]; W_in: [d_model, d_mlp]; b_in: [d_mlp];
    W_out: [d_mlp, d_model] -> [pos, d_mlp, d_model], the write of each
    neuron at each position."""
    acts = (x @ W_in + b_in).relu()     # [pos, d_mlp]: one number per neuron
    return acts[..., None] * W_out      # each scales its own output direction


def _neuron_inputs(g: torch.Generator) -> dict:
    d_model = 5 + int(torch.randint(0, 5, (1,), generator=g))
    d_mlp = 2 * d_model + int(torch.randint(1, 4, (1,), generator=g))  # never square
    return {"x": torch.randn(4, d_model, generator=g),
            "W_in": torch.randn(d_model, d_mlp, generator=g) / d_model ** 0.5,
            "b_in": 0.5 * torch.randn(d_mlp, generator=g),  # as large as a read, so leaving it out shows
            "W_out": torch.randn(d_mlp, d_model, generator=g)}


def _pre_act(x, W_in, b_in):
    return x @ W_in + b_in


EX2 = FunctionExercise(
    id="ch10_ex2",
    title="each neuron's write into the stream",
    reference=neuron_writes,
    make_inputs=_neuron_inputs,
    mistakes=[
        Mistake("forgot the ReLU", "Your writes are linear in x. What happens to a neuron's "
                "activation before it scales the neuron's output direction?",
                lambda x, W_in, b_in, W_out: _pre_act(x, W_in, b_in)[..., None] * W_out),
        Mistake("forgot b_in", "Your writes are unchanged when b_in changes. At which step of a "
                "neuron's computation does b_in enter?",
                lambda x, W_in, b_in, W_out: (x @ W_in).relu()[..., None] * W_out),
        Mistake("writes never negative", "None of your writes has a negative entry, although W_out has "
                "negative entries. Follow one neuron from what it reads to what it writes: what exactly does "
                "the nonlinearity act on?",
                lambda x, W_in, b_in, W_out: (_pre_act(x, W_in, b_in)[..., None] * W_out).relu()),
        Mistake("writes of fixed length", "Each of your writes is either zero or the neuron's whole row of "
                "W_out. How should the size of a neuron's write depend on the number it reads?",
                lambda x, W_in, b_in, W_out: (_pre_act(x, W_in, b_in) > 0).to(x.dtype)[..., None] * W_out),
        Mistake("a smooth nonlinearity", "Your activations are not exactly zero where a neuron reads a "
                "negative number. Which nonlinearity does this chapter's FFN use, and what does it give for "
                "a negative input?",
                lambda x, W_in, b_in, W_out: torch.nn.functional.gelu(_pre_act(x, W_in, b_in))[..., None] * W_out),
        Mistake("bias in the wrong place", "Your neurons' biases change the writes, but not in the way the "
                "reference's do. Follow one neuron: at which step is its bias added, relative to the "
                "nonlinearity?",
                lambda x, W_in, b_in, W_out: ((x @ W_in).relu() + b_in)[..., None] * W_out),
    ],
    hint="Write down the shape of every argument and of the answer, [pos, d_mlp, d_model]. How many "
         "numbers does one neuron produce at one position, and how many entries has the direction it "
         "writes along? Which tensors of shape [pos, d_mlp] and [d_mlp, d_model] can you build, and how "
         "can two such tensors give a [pos, d_mlp, d_model] one without a loop and without summing over "
         "d_mlp?",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
