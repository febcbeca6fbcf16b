"""Problem 1: shapes and ranks of one head of a model the book ships, and a reparametrisation that leaves the head unchanged.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import math

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, ValueExercise


# The models problem 1 can ask about (its parameter cell names one; GPT-2 small in the book), with
# the dimensions the answers depend on. A course's per-student variants draw among these
# (scripts/variants.py); tests/grading/test_variants.py checks them against the shipped configs.
# Each has d_head < d_model < d_vocab: where two of them are equal (the zoo's toy models have
# d_model = d_vocab = 64) a named mistake gives the right answer and can never be named, so
# tests/unit/test_checks.py checks that every mistake stays detectable for every model here.
P1_MODELS = {
    "gpt2-small": {"d_model": 768, "n_heads": 12, "d_head": 64, "d_vocab": 50257},
    "smollm2-135m": {"d_model": 576, "n_heads": 9, "d_head": 64, "d_vocab": 49152},
    "text-2l": {"d_model": 64, "n_heads": 4, "d_head": 16, "d_vocab": 512},
}
# The answer's keys, as the page names them; ``full_rank`` (both full circuits' rank) may also be
# given as the two keys of the split spelling, and any key in any case.
P1_KEYS = ("W_QK_shape", "W_QK_rank", "W_OV_shape", "W_OV_rank", "full_QK_shape", "full_OV_shape", "full_rank")
P1_SPLIT = ("full_QK_rank", "full_OV_rank")


def p1_reference(model: str = "gpt2-small") -> dict:
    dims = P1_MODELS[model]
    d, r, v = dims["d_model"], dims["d_head"], dims["d_vocab"]
    return {"W_QK_shape": (d, d), "W_QK_rank": r, "W_OV_shape": (d, d), "W_OV_rank": r,
            "full_QK_shape": (v, v), "full_OV_shape": (v, v), "full_rank": r}


def _p1_spelling(answer, value):
    """(answer, value) in one spelling: the answer's keys as P1_KEYS writes them (any case), and
    the value's ``full_rank`` split into ``full_QK_rank`` and ``full_OV_rank`` where the answer
    uses those."""
    if not (isinstance(answer, dict) and isinstance(value, dict)):
        return answer, value
    canonical = {k.lower(): k for k in (*P1_KEYS, *P1_SPLIT)}
    answer = {canonical.get(k.lower(), k) if isinstance(k, str) else k: v for k, v in answer.items()}
    if "full_rank" in value and any(k in answer for k in P1_SPLIT):
        # the split spelling, alone or beside full_rank: each key given is held to the one rank
        keep = {k: x for k, x in value.items() if k != "full_rank" or "full_rank" in answer}
        value = {**keep, **{k: value["full_rank"] for k in P1_SPLIT}}
    return answer, value


def _p1_with(model: str = "gpt2-small", **changes) -> dict:
    return {**p1_reference(model), **changes}


def _p1_mistakes(model: str = "gpt2-small") -> list:
    # the explanations point at the step that went wrong with a question, never with the dimension
    # or the shape that answers it (the referee's item: feedback must not give the answer away)
    d, r, v = (P1_MODELS[model][k] for k in ("d_model", "d_head", "d_vocab"))
    return [
        (_p1_with(model, W_QK_shape=(r, r), W_OV_shape=(r, r)), "head-space shapes",
         "Write W_QK as the product W_Q W_K^T: what are the shapes of its two factors, and so which space "
         "does the product map from and to?"),
        (_p1_with(model, W_QK_rank=d, W_OV_rank=d, full_rank=d), "full rank",
         "A product's rank is at most the dimension of the narrowest space it passes through: which space "
         "is that inside W_Q W_K^T?"),
        (_p1_with(model, full_rank=d), "rank of the full circuits",
         "The full circuits contain W_QK and W_OV: can a product have a larger rank than one of its factors?"),
        (_p1_with(model, full_rank=v), "full circuits of full rank",
         "A square table need not have full rank: through which spaces does the product pass?"),
        (_p1_with(model, full_QK_shape=(d, d), full_OV_shape=(d, d)), "full circuits in residual space",
         "Which matrices stand at the two outer ends of each full circuit, and which spaces do they map "
         "from and to?"),
    ]


class _PencilExercise(ValueExercise):
    """Problem 1a's answers are integers and shapes worked out on paper: a wrong one that matches no
    named mistake is told which keys are wrong, never its value's direction or the right value, so
    that the integers cannot be found by trying larger and smaller ones."""

    def check(self, answer, **inputs):
        result = super().check(answer, **inputs)
        if result.passed or result.mistake != "wrong values":
            return result
        got, value = (self.normalise or (lambda a, v: (a, v)))(answer, self.expected(**inputs))
        wrong = [k for k in value if k in got and not self.compare(got[k], value[k])]
        keys = ", ".join(map(str, wrong)) or "some keys"
        verb = "is" if len(wrong) == 1 else "are"
        result.message = f"not quite: {keys} {verb} not right; work each out again from the product it names"
        return result


P1A = _PencilExercise(
    id="ps_p1a", title="shapes and ranks of one head's circuits",
    expected=p1_reference,
    mistakes=_p1_mistakes,
    normalise=_p1_spelling,
    hint="Write each circuit as a product of the weights and read its shape off the outer factors; its "
         "rank is at most the narrowest dimension the product passes through. Which spaces does W_QK map "
         "between, and what is the narrowest space inside it? The keys are named above the answer cell.",
)


def reparametrize(W_Q, W_K, G):
    """W_Q, W_K: [d_model, d_head]; G: invertible [d_head, d_head]
    -> a new (W_Q, W_K)."""
    return W_Q @ G, W_K @ torch.linalg.inv(G).T


def _p1b_inputs(g: torch.Generator) -> dict:
    d_model, d_head = 12, 4
    G = torch.randn(d_head, d_head, generator=g, dtype=torch.float64) + 3 * torch.eye(d_head, dtype=torch.float64)
    return {"W_Q": torch.randn(d_model, d_head, generator=g, dtype=torch.float64),
            "W_K": torch.randn(d_model, d_head, generator=g, dtype=torch.float64), "G": G}


def _same_head(got, inputs) -> bool:
    """Any pair that changes W_Q but keeps W_Q W_K^T passes, not only ours, in any float dtype:
    the product is compared in float64 within the rounding of computing it in the answer's
    dtype (W_Q G, inverting G, then the product: Higham's bound, scaled by the condition of G)."""
    from circuitbook.book import rounding_bound

    if not (isinstance(got, (tuple, list)) and len(got) == 2
            and all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in got)):
        return False
    W_Q, W_K, G = inputs["W_Q"], inputs["W_K"], inputs["G"]
    if got[0].shape != W_Q.shape or got[1].shape != W_K.shape:
        return False
    q, k = (t.detach().to(W_Q.device, torch.float64) for t in got)
    dtype = max((t.dtype for t in got), key=lambda dt: torch.finfo(dt).eps)  # the coarser one
    d_head = G.shape[0]
    scale = float((W_Q.abs() @ G.abs() @ torch.linalg.inv(G).abs() @ W_K.abs().T).max())
    terms = 3 * d_head + math.ceil(float(torch.linalg.cond(G)) * d_head) + 4
    tol = rounding_bound(terms, scale, dtype)
    kept = float((q @ k.T - W_Q @ W_K.T).abs().max()) <= tol
    changed = float((q - W_Q).abs().max()) > 100 * rounding_bound(1, float(W_Q.abs().max()), dtype)
    return kept and changed


class _ReparametrizeExercise(FunctionExercise):
    """Compares behaviour (same product, different factor), then diagnoses as usual."""

    def _compare(self, got, expected, inputs):
        return None if _same_head(got, inputs) else super()._compare(got, expected, inputs)


P1B = _ReparametrizeExercise(
    id="ps_p1b", title="W_Q and W_K are not identifiable",
    reference=reparametrize, make_inputs=_p1b_inputs,
    mistakes=[
        Mistake("returned the original weights", "Return a *different* pair with the same product.",
                lambda W_Q, W_K, G: (W_Q, W_K)),
        Mistake("W_K times G^T", "Your W_K' is W_K G^T. Write the product W_Q' W_K'^T out as a "
                "product of single factors, transposes taken: what stands next to G in the middle, "
                "and does it cancel G?",
                lambda W_Q, W_K, G: (W_Q @ G, W_K @ G.T)),
        Mistake("W_K times G^-1", "Your W_K' is W_K G^-1, and the product uses its transpose, "
                "(W_K G^-1)^T. Write that transpose out as a product of two factors: what then "
                "stands between W_Q G and W_K^T, and does it cancel G?",
                lambda W_Q, W_K, G: (W_Q @ G, W_K @ torch.linalg.inv(G))),
        Mistake("transformed only W_Q", "Your W_K is the one you were given. What does the product "
                "W_Q' W_K'^T become then?",
                lambda W_Q, W_K, G: (W_Q @ G, W_K)),
    ],
    hint="The product W_Q W_K^T does not change if something and its inverse are slipped in between the "
         "two factors. Let W_Q absorb G: what must W_K absorb so that G cancels in the product, remembering "
         "that W_K stands transposed there? Both keep their shapes, [d_model, d_head].",
)
