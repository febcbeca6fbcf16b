"""Problem 2: counting the paths of an attention-only transformer.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


def path_counts(n_layers, n_heads):
    """-> {"direct": ..., "single": ..., "virtual": ..., "total": ...}"""
    total = (1 + n_heads) ** n_layers
    single = n_layers * n_heads
    return {"direct": 1, "single": single, "virtual": total - 1 - single,
            "total": total}


def _p2_inputs(g: torch.Generator) -> dict:
    return {"n_layers": int(torch.randint(2, 6, (1,), generator=g)), "n_heads": int(torch.randint(2, 13, (1,), generator=g))}


class _FormulaExercise(FunctionExercise):
    """Pencil formulas, evaluated at random (L, n): a wrong count that matches no named mistake is
    told which counts are wrong and where, never which way they are off nor by how much, so that
    the formulas cannot be fitted to the feedback."""

    def _explain(self, got, expected, inputs):
        if not (isinstance(got, dict) and set(got) == set(expected)):
            return super()._explain(got, expected, inputs)
        wrong = [k for k in expected if not self.compare(got[k], expected[k])]
        return self._fail(f"at n_layers={inputs['n_layers']}, n_heads={inputs['n_heads']} your "
                          f"{', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not right", "wrong values")


P2 = _FormulaExercise(
    id="ps_p2", title="counting paths", reference=path_counts, make_inputs=_p2_inputs, n_trials=8,
    library_answers=("circuitbook.paths.count_paths",),
    mistakes=[
        Mistake("virtual paths that use every layer", "Your virtual count is right for two layers and too "
                "small beyond. With three layers, list a path of two heads: must it use every layer?",
                lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads, "virtual": n_heads ** n_layers,
                                           "total": 1 + n_layers * n_heads + n_heads ** n_layers}),
        Mistake("forgot the direct path", "Your total is one short of the sum of the model's terms. Which term "
                "of the expansion goes through no head at all?",
                lambda n_layers, n_heads: {"direct": 0, "single": n_layers * n_heads,
                                           "virtual": (1 + n_heads) ** n_layers - 1 - n_layers * n_heads,
                                           "total": (1 + n_heads) ** n_layers - 1}),
        Mistake("2^L paths", "Your total does not grow with the number of heads per layer. What must a path "
                "decide at each layer, and how many ways can it decide it?",
                lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads,
                                           "virtual": 2 ** n_layers - 1 - n_layers * n_heads, "total": 2 ** n_layers}),
        Mistake("one head per layer counted once", "Your count of single-head paths does not grow with "
                "the number of layers. Which heads can a path that goes through exactly one head choose from?",
                lambda n_layers, n_heads: {"direct": 1, "single": n_heads,
                                           "virtual": (1 + n_heads) ** n_layers - 1 - n_heads,
                                           "total": (1 + n_heads) ** n_layers}),
    ],
    hint="A path is fixed by what it does at each layer, taken in order. What can it do at one layer, and "
         "how many ways are there to make all L of those choices? Count all the paths first, then sort them "
         "by how many heads they go through.",
)
