"""The induction module's problem set: checks and reference solutions for problems 1-7.

Ids ``ps_p1a`` ... ``ps_p7b``. Pencil problems take values or formulas; code problems take a
function that the check runs on fresh inputs (any correct method passes: the check compares
results, never code). The reference solutions here are the ones the book shows. Every input a
check makes for a model lives on that model's device (tokens, indices), so the checks run
wherever the model does (tests/unit/test_check_devices.py, tests/gpu/test_checks_cuda.py).
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass, field

import torch

from circuitbook.checks.core import (SESSION, FunctionExercise, Mistake, ReferenceCalled, Result, ValueExercise,
                                     _untouched, as_number, call_answer, raised, REFERENCE_MESSAGE)
from circuitbook.loss import per_token_loss

# --- problem 1: shapes and ranks of one head of a model the book ships --------------------------

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
    if "full_rank" in value and "full_rank" not in answer and any(k in answer for k in P1_SPLIT):
        value = {**{k: x for k, x in value.items() if k != "full_rank"}, **{k: value["full_rank"] for k in P1_SPLIT}}
    return answer, value


def _p1_with(model: str = "gpt2-small", **changes) -> dict:
    return {**p1_reference(model), **changes}


def _p1_mistakes(model: str = "gpt2-small") -> list:
    d, r, v = (P1_MODELS[model][k] for k in ("d_model", "d_head", "d_vocab"))
    return [
        (_p1_with(model, W_QK_shape=(r, r), W_OV_shape=(r, r)), "head-space shapes",
         f"W_QK = W_Q W_K^T multiplies [{d}, {r}] by [{r}, {d}]: it maps the residual stream to itself."),
        (_p1_with(model, W_QK_rank=d, W_OV_rank=d, full_rank=d), "full rank",
         f"A product through a {r}-dimensional head has rank at most d_head = {r}."),
        (_p1_with(model, full_rank=d), "rank of the full circuits",
         f"W_E W_OV W_U still passes through the head's {r} dimensions: rank <= {r}, not d_model."),
        (_p1_with(model, full_rank=v), "full circuits of full rank",
         f"A {v} x {v} table need not have rank {v}: it is a product through narrower spaces."),
        (_p1_with(model, full_QK_shape=(d, d), full_OV_shape=(d, d)), "full circuits in residual space",
         "The full circuits put W_E (and W_U) on both sides: they are vocab x vocab."),
    ]


P1A = ValueExercise(
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
        Mistake("used G^T instead of G^{-T}", "(W_Q G)(W_K G^T)^T = W_Q G G^T W_K^T changes the product "
                "unless G is orthogonal; use the inverse transpose.",
                lambda W_Q, W_K, G: (W_Q @ G, W_K @ G.T)),
        Mistake("used G^{-1} instead of G^{-T}", "(W_K G^{-1})^T = G^{-T} W_K^T: the product becomes "
                "W_Q G G^{-T} W_K^T. Transpose the inverse.",
                lambda W_Q, W_K, G: (W_Q @ G, W_K @ torch.linalg.inv(G))),
        Mistake("transformed only W_Q", "Compensate in W_K, or the product changes.",
                lambda W_Q, W_K, G: (W_Q @ G, W_K)),
    ],
    hint="The product W_Q W_K^T does not change if something and its inverse are slipped in between the "
         "two factors. Let W_Q absorb G; W_K must absorb the inverse, in the form that cancels once W_K is "
         "transposed in the product. Both keep their shapes, [d_model, d_head].",
)

# --- problem 2: counting paths -----------------------------------------------------------------


def path_counts(n_layers, n_heads):
    """-> {"direct": ..., "single": ..., "virtual": ..., "total": ...}"""
    total = (1 + n_heads) ** n_layers
    single = n_layers * n_heads
    return {"direct": 1, "single": single, "virtual": total - 1 - single,
            "total": total}


def _p2_inputs(g: torch.Generator) -> dict:
    return {"n_layers": int(torch.randint(2, 6, (1,), generator=g)), "n_heads": int(torch.randint(2, 13, (1,), generator=g))}


P2 = FunctionExercise(
    id="ps_p2", title="counting paths", reference=path_counts, make_inputs=_p2_inputs, n_trials=8,
    mistakes=[
        Mistake("n^L virtual paths", "Two-layer virtual heads number n^2, but with more layers a path may "
                "skip layers: count subsets of layers, one head each.",
                lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads, "virtual": n_heads ** n_layers,
                                           "total": 1 + n_layers * n_heads + n_heads ** n_layers}),
        Mistake("forgot the direct path", "The embedding-to-unembedding path, through no head, is a term too.",
                lambda n_layers, n_heads: {"direct": 0, "single": n_layers * n_heads,
                                           "virtual": (1 + n_heads) ** n_layers - 1 - n_layers * n_heads,
                                           "total": (1 + n_heads) ** n_layers - 1}),
        Mistake("2^L paths", "Each layer offers n heads or none: (1 + n) choices per layer, not 2.",
                lambda n_layers, n_heads: {"direct": 1, "single": n_layers * n_heads,
                                           "virtual": 2 ** n_layers - 1 - n_layers * n_heads, "total": 2 ** n_layers}),
        Mistake("one head per layer counted once", "Each of the L layers has n heads: L n single-head paths.",
                lambda n_layers, n_heads: {"direct": 1, "single": n_heads,
                                           "virtual": (1 + n_heads) ** n_layers - 1 - n_heads,
                                           "total": (1 + n_heads) ** n_layers}),
    ],
    hint="A path chooses, in each layer independently, one of its heads or none. Count all the paths "
         "first, then sort them by how many heads they go through: none (the direct path), exactly one, or "
         "two or more (virtual heads).",
)

# --- problem 3: design the induction head -------------------------------------------------------

P3_VOCAB, P3_CTX = 32, 40
# the context lengths problem 3's parameter cell may set (per-student variants draw among them):
# even, and at most 2 P3_VOCAB, so that each copy of a sequence has no repeated token
P3_CONTEXTS = tuple(range(16, 2 * P3_VOCAB + 1, 2))
# "does induction", as the page says before the check: a clear induction score and a loss on
# the second copy far below chance (ln 32 = 3.47 nats); tests/unit/test_ps_references.py places
# designs on each side of both
P3_MIN_SCORE, P3_MAX_LOSS = 0.9, 0.5
# problem 3b's answer may be off by this fraction (rounding, a float32 re-implementation):
# the scores of the context lengths of P3_CONTEXTS lie at least 3% apart (tested there)
P3B_TOLERANCE = 0.01


def design_induction_head(S_tok, S_prev):
    """S_tok, S_prev: [V, d_model] row bases
    -> (W_QK, W_OV), each [d_model, d_model]."""
    W_QK = 30 * S_tok.T @ S_prev  # query's token against key's previous token
    W_OV = 10 * S_tok.T @ S_tok   # copy the attended token where W_U reads
    return W_QK, W_OV


def scaffold_tokens(batch: int = 8, seed: int = 0, n_ctx: int = P3_CTX, device=None) -> torch.Tensor:
    """[batch, 2 n] repeated sequences whose first copy has no repeated token (n = n_ctx // 2),
    on ``device`` (default: the CPU).

    Without repeats inside a copy, each query in the second copy has exactly one earlier
    occurrence, so a perfect induction head scores 1.
    """
    g = torch.Generator().manual_seed(seed)
    half = torch.stack([torch.randperm(P3_VOCAB, generator=g)[: n_ctx // 2] for _ in range(batch)])
    return torch.cat([half, half], dim=1).to(device or "cpu")


def scaffold_behaviour(W_QK, W_OV, *, prev_into: str = "S_prev", seed: int = 0, n_ctx: int = P3_CTX) -> dict:
    """Induction score of head 1.0 and mean loss on the second copy (tokens n+1 .. 2n-1) of the
    scaffold with context length ``n_ctx`` (W_QK, W_OV: [2 P3_VOCAB + n_ctx] square)."""
    from circuitbook.heads import induction_scores
    from circuitbook.models.handbuilt import induction_scaffold
    from circuitbook.validate import model_device

    model = induction_scaffold(W_QK, W_OV, d_vocab=P3_VOCAB, n_ctx=n_ctx, prev_into=prev_into)
    tokens = scaffold_tokens(seed=seed, n_ctx=n_ctx, device=model_device(model))
    n = tokens.shape[1] // 2
    score = float(induction_scores(model, tokens=tokens)[1, 0])
    with torch.no_grad():
        loss = per_token_loss(model(tokens), tokens)  # [batch, pos - 1]: entry t - 1 is token t's
    return {"induction_score": score, "loss_second_copy": float(loss[:, n:].mean())}


def _p3_matrices(got, d: int):
    """The answer as two float64 [d, d] matrices on the CPU, or (None, (message, mistake)) saying
    what is wrong with its form: checked here, so that an error inside the scaffold is never
    taken for a verdict on the answer."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return None, ("return the pair (W_QK, W_OV)", "wrong type")
    out = []
    for name, W in zip(("W_QK", "W_OV"), got):
        try:
            W = torch.as_tensor(W.detach() if isinstance(W, torch.Tensor) else W).to("cpu", torch.float64)
        except (TypeError, ValueError, RuntimeError):
            return None, (f"{name} is not a matrix of numbers (got a {type(W).__name__})", "wrong type")
        if tuple(W.shape) != (d, d):
            return None, (f"{name} has shape {tuple(W.shape)}; it must be [d_model, d_model] = {[d, d]}", "wrong shape")
        if not torch.isfinite(W).all():
            return None, (f"{name} contains NaN or inf", "NaN")
        out.append(W)
    return out, None


@dataclass
class DesignExercise:
    """Problem 3: the reader's (W_QK, W_OV) must make the scaffold do induction."""

    id: str = "ps_p3"
    title: str = "design the induction head"
    hint: str = (("Query side: which subspace holds the current token? Key side: which holds the previous token? "
                  "W_QK should match the query's token against the key's previous token, large enough that the "
                  "softmax picks the match; W_OV should read the attended token and write it where W_U reads, "
                  "strongly enough to beat the direct path. Both are [d_model, d_model]."))
    reference: object = design_induction_head
    mistakes: list = field(default_factory=lambda: [
        ("query and key sides swapped", lambda t, p: (p.T @ t, t.T @ t),
         "W_QK = S_prev^T S_tok compares the query's previous token with the key's token: that finds the "
         "earlier occurrence of the previous token, one position too early."),
        ("copies the previous token", lambda t, p: (t.T @ p, p.T @ t),
         "W_OV = S_prev^T S_tok copies what the attended position's left neighbour was, not the token "
         "found there."),
        ("anti-copying OV", lambda t, p: (t.T @ p, -t.T @ t),
         "A negative OV circuit suppresses the attended token; the copying eigenvalues must be positive."),
    ])

    def __call__(self, answer) -> Result:
        return SESSION.record(self.check(answer))

    def check(self, answer) -> Result:
        space = _p3_space()
        if not callable(answer):
            return Result(self.id, False, f"expected your function, got a {type(answer).__name__}", None, self.hint)
        d = space["S_tok"].shape[-1]
        first_run = Result(self.id, False, f"not attempted yet: replace `raise NotImplementedError` (or `...`) with "
                           f"your code ({self.title}). Given the row bases S_tok and S_prev "
                           f"{tuple(space['S_tok'].shape)}, return the pair (W_QK, W_OV), each a tensor of shape "
                           f"{(d, d)}.", None, self.hint)
        try:
            got = call_answer(answer, space["S_tok"], space["S_prev"])
        except NotImplementedError:
            return first_run
        except ReferenceCalled:
            return Result(self.id, False, REFERENCE_MESSAGE, "reference solution", self.hint)
        except Exception as exc:  # noqa: BLE001 - the reader's bug, reported as feedback
            message, detail = raised(exc)
            return Result(self.id, False, message, None, self.hint, detail)
        if got is None and _untouched(answer):
            return first_run
        if got is None or got is Ellipsis:
            return Result(self.id, False, f"your function returned {got}: return the pair (W_QK, W_OV)",
                          "returned None" if got is None else "returned Ellipsis", self.hint)
        pair, wrong = _p3_matrices(got, d)
        if wrong:
            return Result(self.id, False, wrong[0], wrong[1], self.hint)
        behaviour = scaffold_behaviour(*pair)  # the answer's form is checked: any error here is ours
        score, loss = behaviour["induction_score"], behaviour["loss_second_copy"]
        if score > P3_MIN_SCORE and loss < P3_MAX_LOSS:
            return Result(self.id, True, f"your head does induction: score {score:.2f}, "
                          f"loss on the second copy {loss:.2f} nats")
        for name, wrong_fn, explanation in self.mistakes:
            W = wrong_fn(space["S_tok"], space["S_prev"])
            if all(_same_direction(g, w) for g, w in zip(pair, W)):
                return Result(self.id, False, f"this looks like: {name}. {explanation}", name, self.hint)
        right = design_induction_head(space["S_tok"], space["S_prev"])
        if all(_same_direction(g, w) for g, w in zip(pair, right)):
            return Result(self.id, False, "right directions, too weak: with a small W_QK the softmax barely prefers "
                          "the match, and a small W_OV cannot outvote the direct path. Scale both up: a score gap "
                          "of g gives the match odds of about e^g against each other key, and the copied token must "
                          f"outweigh the current token's own embedding. Now: induction score {score:.2f}, loss "
                          f"{loss:.2f} nats.", "too weak", self.hint)
        return Result(self.id, False, f"the scaffold does not do induction with your head: induction score "
                      f"{score:.2f} (want > {P3_MIN_SCORE}), loss on the second copy {loss:.2f} nats "
                      f"(want < {P3_MAX_LOSS})", "wrong values", self.hint)


def _p3_space(n_ctx: int = P3_CTX) -> dict:
    from circuitbook.models.handbuilt import subspaces

    return subspaces(P3_VOCAB, n_ctx)


def _same_direction(a, b) -> bool:
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape or b.norm() == 0 or a.norm() == 0:
        return False
    return float((a * b).sum() / (a.norm() * b.norm())) > 0.999  # same direction, any positive scale


P3 = DesignExercise()


def _designed(n_ctx: int, prev_into: str) -> float:
    """The page's design's induction score in the scaffold (built on the default device)."""
    from circuitbook.devices import default_device

    return _designed_on(n_ctx, prev_into, str(default_device()))


@functools.lru_cache(maxsize=None)  # deterministic (float64, fixed tokens): measured once per length and device
def _designed_on(n_ctx: int, prev_into: str, device: str) -> float:
    space = _p3_space(n_ctx)
    return scaffold_behaviour(*design_induction_head(space["S_tok"], space["S_prev"]), prev_into=prev_into,
                              n_ctx=n_ctx)["induction_score"]


def p3b_reference(n_ctx: int = P3_CTX) -> float:
    """Induction score when head 0.0 writes the previous token into S_tok (the broken scaffold)."""
    return _designed(n_ctx, "S_tok")


def _p3b_mistakes(n_ctx: int = P3_CTX) -> list:
    out = [(_designed(n_ctx, "S_prev"), "the unbroken scaffold's score",
            "Build the scaffold with prev_into='S_tok' and measure again.")]
    if n_ctx != P3_CTX:
        out.append((p3b_reference(P3_CTX), "the book's context length",
                    f"Your parameter cell sets P3_CTX = {n_ctx}: pass it as the scaffold's n_ctx."))
    return out


def _p3b_compare(a, b) -> bool:
    x = as_number(a)
    return x is not None and abs(x - b) <= P3B_TOLERANCE * abs(b)


P3B = ValueExercise(
    id="ps_p3b", title="what breaks when the subspaces collide", expected=p3b_reference,
    mistakes=_p3b_mistakes,
    hint="Measure your design again on the broken scaffold, in which head 0.0 writes the previous token "
         "into the token subspace: scaffold_behaviour takes that subspace and the context length as "
         "arguments (see help(scaffold_behaviour)). The answer is an induction score: a number (a float, "
         "a NumPy number or a one-element tensor).",
    # the score is deterministic (float64): 1% tells apart every context length of P3_CONTEXTS and
    # forgives rounding and float32 re-implementations
    compare=_p3b_compare,
)

# --- problem 4: find the induction heads ---------------------------------------------------------


def head_scores(model, tokens):
    """tokens: [batch, 2n], the second half repeating the first
    -> (induction, prev), [L, H] each."""
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(
        tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, q, k]
        # query n + i looks at key i + 1: the diagonal n - 1 below the main one
        ind.append(pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)
                   [..., 1:].mean((0, 2)))
        prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1)
                    .mean((0, 2)))
    return torch.stack(ind), torch.stack(prev)


def _zoo_model_and_tokens(g: torch.Generator, batch: int, n: int) -> dict:
    """toy-2l (on the default device) and repeated random tokens [batch, 2 n] on its device."""
    from circuitbook.data import repeated_random_tokens
    from circuitbook.models import load
    from circuitbook.validate import model_device

    seed = int(torch.randint(0, 10_000, (1,), generator=g))
    model = load("toy-2l")
    return {"model": model, "tokens": repeated_random_tokens(batch, n, model.cfg.d_vocab, seed=seed,
                                                              device=model_device(model))}


def _p4_inputs(g: torch.Generator) -> dict:
    n = int(torch.randint(12, 30, (1,), generator=g))
    return _zoo_model_and_tokens(g, 4, n)


def _p4_variant(tokens, model, ind_offset=None, ind_from=1, ind_first_half=False, prev_offset=-1, swap=False):
    n = tokens.shape[1] // 2
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind, prev = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]
        off = -(n - 1) if ind_offset is None else ind_offset
        stripe = pattern.diagonal(offset=off, dim1=-2, dim2=-1)
        stripe = stripe[..., : n - 1] if ind_first_half else stripe[..., ind_from:]
        ind.append(stripe.mean(dim=(0, 2)))
        prev.append(pattern.diagonal(offset=prev_offset, dim1=-2, dim2=-1).mean(dim=(0, 2)))
    return (torch.stack(prev), torch.stack(ind)) if swap else (torch.stack(ind), torch.stack(prev))


_KEY_I = ("The induction head attends to the token *after* the earlier occurrence: query n + i looks at key "
          "i + 1. Yours reads key i, the earlier occurrence itself (the diagonal n below the main one instead of "
          "n - 1).")

P4 = FunctionExercise(
    id="ps_p4", title="induction and previous-token scores", reference=head_scores, make_inputs=_p4_inputs,
    n_trials=2,
    mistakes=[
        # key i for every query of the second copy: the whole diagonal n below the main one
        Mistake("off-by-one diagonal", _KEY_I,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2), ind_from=0)),
        Mistake("off-by-one diagonal", _KEY_I,
                lambda model, tokens: _p4_variant(tokens, model, ind_offset=-(tokens.shape[1] // 2))),
        Mistake("scores from the first half of the sequence", "Only queries in the second copy can look back at "
                "an earlier occurrence; average over those.",
                lambda model, tokens: _p4_variant(tokens, model, ind_first_half=True)),
        Mistake("previous-token score on the main diagonal", "The previous token is key p - 1: offset -1.",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=0)),
        Mistake("previous-token score above the diagonal", "Key p + 1 lies in the future, where the causal mask "
                "puts no attention: the previous token is key p - 1, below the diagonal.",
                lambda model, tokens: _p4_variant(tokens, model, prev_offset=1)),
        Mistake("included a query of the first copy", "The diagonal n - 1 below the main one starts at query "
                "n - 1, the last token of the first copy, which has no earlier occurrence to look back at. Average "
                "over the second copy's queries only, n .. 2n - 1.",
                lambda model, tokens: _p4_variant(tokens, model, ind_from=0)),
        Mistake("the two scores swapped", "Return (induction, previous-token), in that order.",
                lambda model, tokens: _p4_variant(tokens, model, swap=True)),
    ],
    hint="Each layer's cached pattern is [batch, head, q, k]. The previous-token score averages the "
         "attention from p to p - 1; the induction score averages the attention from query n + i to key i "
         "+ 1 over every query of the second copy (i = 0 .. n - 1), and over nothing else. Each lies on "
         "one diagonal of the pattern. Stack the layers: two [L, H] tensors.",
)

# --- problem 5: verify K-composition, then break it ---------------------------------------------


def _score_and_loss(model, reader: tuple[int, int], tokens: torch.Tensor, context, *, best=False, ind_offset=None,
                    loss_from=None, shift=1):
    """(the reader's induction score, mean loss on the second copy) of one run inside
    ``context`` (an ablation, or nothing). Loss on the second copy: predictions of tokens
    n+1 .. 2n-1. The keywords make the mistakes: ``best=True`` takes the best score over all
    heads; ``ind_offset`` reads another diagonal (all of it); ``loss_from`` starts the loss's
    window at another prediction; ``shift=0`` scores each position's own token."""
    n = tokens.shape[1] // 2
    with torch.no_grad(), context:
        logits, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    diagonals = [cache["pattern", layer].diagonal(offset=-(n - 1) if ind_offset is None else ind_offset,
                                                  dim1=-2, dim2=-1) for layer in range(model.cfg.n_layers)]
    ind = torch.stack([d[..., 1:] if ind_offset is None else d for d in diagonals]).mean(dim=(1, 3))
    logp = logits.log_softmax(-1)
    if shift:
        logp = logp[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]  # [batch, pos-1]: token t read at t - 1
    else:
        logp = logp.gather(-1, tokens[..., None])[..., 0][:, 1:]  # token t read at t itself
    score = ind.max() if best else ind[reader]
    return float(score), float(-logp[:, n if loss_from is None else loss_from:].mean())


def ablation_effect(model, head, reader, tokens):
    """head, reader: (layer, head) pairs; tokens [batch, 2n] repeated
    -> (reader's induction score, mean loss on the second copy) with
    `head` mean-ablated."""
    from circuitbook.heads import ablate

    n = tokens.shape[1] // 2
    with torch.no_grad(), ablate(model, [head], how="mean"):
        logits, cache = model.run_with_cache(
            tokens, names_filter=lambda name: name.endswith("hook_pattern"))
    ind = torch.stack([
        cache["pattern", layer].diagonal(offset=-(n - 1), dim1=-2, dim2=-1)
        [..., 1:].mean((0, 2))
        for layer in range(model.cfg.n_layers)])
    logp = (logits.log_softmax(-1)[:, :-1]
            .gather(-1, tokens[:, 1:, None])[..., 0])
    return float(ind[reader]), float(-logp[:, n:].mean())


def _p5_inputs(g: torch.Generator) -> dict:
    inputs = _zoo_model_and_tokens(g, 8, 24)
    head = (0, int(torch.randint(0, 4, (1,), generator=g)))
    reader = (1, int(torch.randint(0, 4, (1,), generator=g)))
    return {"model": inputs["model"], "head": head, "reader": reader, "tokens": inputs["tokens"]}


def _p5_ablated(model, head, reader, tokens, how="mean", **mistake):
    from circuitbook.heads import ablate

    return _score_and_loss(model, reader, tokens, ablate(model, [head], how=how), **mistake)


def _p5_zero(model, head, reader, tokens):
    return _p5_ablated(model, head, reader, tokens, how="zero")


def _p5_best_head(model, head, reader, tokens):
    return _p5_ablated(model, head, reader, tokens, best=True)


def _p5_no_ablation(model, head, reader, tokens):
    return _score_and_loss(model, reader, tokens, contextlib.nullcontext())


def _p5_all_positions(model, head, reader, tokens):
    from circuitbook.heads import ablate

    score, _ = ablation_effect(model, head, reader, tokens)
    with torch.no_grad(), ablate(model, [head], how="mean"):
        logits = model(tokens)
    return score, float(per_token_loss(logits, tokens).mean())


def _p5_compare(a, b) -> bool:
    """Two numbers in any form (floats, NumPy numbers, one-element tensors), each within 1e-4."""
    if not (isinstance(a, (tuple, list)) and len(a) == 2):
        return False
    x = [as_number(v) for v in a]
    return None not in x and abs(x[0] - b[0]) < 1e-4 and abs(x[1] - b[1]) < 1e-4


P5 = FunctionExercise(
    id="ps_p5", title="mean-ablate a head and re-measure", reference=ablation_effect, make_inputs=_p5_inputs,
    n_trials=3, compare=_p5_compare,
    mistakes=[
        Mistake("ablation not applied", "Run the model *inside* the ablation's `with` block.",
                _p5_no_ablation),
        Mistake("zero- instead of mean-ablation", "Mean-ablation keeps the head's average output; zeroing also "
                "removes that constant.", _p5_zero),
        Mistake("best induction score over all heads", "The question is what happens to *this* reader: report "
                "the induction score of the head `reader`, not the best one in the model (another induction head "
                "may not depend on the ablated head).", _p5_best_head),
        Mistake("off-by-one diagonal", _KEY_I, lambda model, head, reader, tokens: _p5_ablated(
            model, head, reader, tokens, ind_offset=-(tokens.shape[1] // 2))),
        Mistake("loss over the whole sequence", "Measure the loss on the second copy only (predictions of tokens "
                "n+1 .. 2n-1), where induction can help.", _p5_all_positions),
        Mistake("loss window includes token n", "Token n, the first of the second copy, follows r_{n-1}, which "
                "occurs only once before: nothing in the context predicts it. Start the window one token later, "
                "at token n + 1.", lambda model, head, reader, tokens: _p5_ablated(
                    model, head, reader, tokens, loss_from=tokens.shape[1] // 2 - 1)),
        Mistake("predicted the current token", "The logits at position t - 1 predict token t: shift the targets "
                "by one against the logits.", lambda model, head, reader, tokens: _p5_ablated(
                    model, head, reader, tokens, shift=0)),
    ],
    hint="Run the model once inside the ablation (see help(circuitbook.heads.ablate)), caching the "
         "patterns. From the patterns take the reader's induction score, measured as in problem 4; from "
         "the logits, the mean loss on the second copy's tokens that induction can predict (n + 1 .. "
         "2n - 1). Two floats.",
)


def k_composition(model, writer, reader):
    """writer, reader: (layer, head) pairs, writer in an earlier layer
    -> score (a float)."""
    (l0, h0), (l1, h1) = writer, reader
    with torch.no_grad():
        W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
        W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
        return float((W_OV @ W_QK.T).norm() / (W_OV.norm() * W_QK.norm()))


def _p5b_inputs(g: torch.Generator) -> dict:
    from circuitbook.models import load

    return {"model": load("toy-2l"), "writer": (0, int(torch.randint(0, 4, (1,), generator=g))),
            "reader": (1, int(torch.randint(0, 4, (1,), generator=g)))}


@torch.no_grad()
def _kc_variant(model, writer, reader, *, kind="K", normalise=True, swap=False):
    (l0, h0), (l1, h1) = (reader, writer) if swap else (writer, reader)
    W_OV = model.W_V[l0, h0] @ model.W_O[l0, h0]
    W_QK = model.W_Q[l1, h1] @ model.W_K[l1, h1].T
    right = {"K": W_QK.T, "Q": W_QK, "V": model.W_V[l1, h1] @ model.W_O[l1, h1]}[kind]
    value = (W_OV @ right).norm()
    return float(value / (W_OV.norm() * right.norm())) if normalise else float(value)


P5B = FunctionExercise(
    id="ps_p5b", title="the K-composition score", reference=k_composition, make_inputs=_p5b_inputs, n_trials=3,
    mistakes=[
        Mistake("Q-composition instead", "K-composition multiplies by W_QK^T (the key side reads the writer).",
                lambda model, writer, reader: _kc_variant(model, writer, reader, kind="Q")),
        Mistake("V-composition instead", "Use the reader's QK circuit, transposed, not its OV circuit.",
                lambda model, writer, reader: _kc_variant(model, writer, reader, kind="V")),
        Mistake("unnormalised", "Divide by ||W_OV^w||_F ||W_QK^r||_F.",
                lambda model, writer, reader: _kc_variant(model, writer, reader, normalise=False)),
        Mistake("writer and reader swapped", "The writer is the earlier (layer-0) head: its OV circuit comes first.",
                lambda model, writer, reader: _kc_variant(model, writer, reader, swap=True)),
    ],
    hint="Build the writer's OV circuit and the reader's QK circuit from the model's per-head weights, "
         "each [d_model, d_model]. K-composition asks how much of what the writer writes the reader's keys "
         "read: multiply the writer's circuit by the reader's, oriented so that the key side faces the "
         "writer, and normalise by the product of the two Frobenius norms.",
)

# --- problem 6: in-context learning, measured directly ------------------------------------------


def icl_scores(logits, tokens, early, late):
    """logits [batch, pos, vocab]; tokens [batch, pos]; early, late:
    ranges of token indices -> [batch], each document's late-window loss
    minus its early-window loss."""
    logp = logits.log_softmax(-1)

    def window_loss(window):
        t = torch.tensor(list(window))
        return -logp[:, t - 1].gather(-1, tokens[:, t, None])[..., 0].mean(-1)

    return window_loss(late) - window_loss(early)


def _p6_inputs(g: torch.Generator) -> dict:
    pos, vocab, batch = 160 + int(torch.randint(0, 40, (1,), generator=g)), 50, 3 + int(torch.randint(0, 3, (1,), generator=g))
    tokens = torch.randint(0, vocab, (batch, pos), generator=g)
    logits = 2 * torch.randn(batch, pos, vocab, generator=g, dtype=torch.float64)
    a, w1 = 10 + int(torch.randint(0, 20, (1,), generator=g)), 5 + int(torch.randint(0, 15, (1,), generator=g))
    w2 = 5 + int(torch.randint(0, 15, (1,), generator=g))
    b = pos - w2 - int(torch.randint(0, 20, (1,), generator=g))
    return {"logits": logits, "tokens": tokens, "early": range(a, a + w1), "late": range(b, b + w2)}


def _icl_variant(logits, tokens, early, late, *, shift=1, sign=1, log=True, single=False, docs=False):
    logp = logits.log_softmax(-1) if log else logits

    def loss(window):
        t = torch.tensor([window.start] if single else list(window))
        return -logp[:, t - shift].gather(-1, tokens[:, t, None])[..., 0].mean(-1)

    score = sign * (loss(late) - loss(early))
    return score.mean() if docs else score


P6 = FunctionExercise(
    id="ps_p6", title="the in-context-learning score of each document", reference=icl_scores,
    make_inputs=_p6_inputs,
    mistakes=[
        Mistake("off by one position", "The logits at position t - 1 predict token t; you read position t.",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, shift=0)),
        Mistake("wrong sign", "Late minus early: a model that learns in context has a negative score.",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, sign=-1)),
        Mistake("used raw logits", "The loss is minus the log-probability: normalise the logits first.",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, log=False)),
        Mistake("single tokens instead of windows", "Average the loss over every token of each window, not "
                "only its first: one token's loss is too noisy to compare.",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, single=True)),
        Mistake("averaged over documents", "Return one score per document, [batch]: the bootstrap that puts "
                "an interval on the mean resamples documents.",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, docs=True)),
    ],
    hint="The loss on token t is minus the log-probability the model gave tokens[:, t], and that "
         "prediction sits at position t - 1. Turn the logits into log-probabilities first, average each "
         "document's losses over the tokens of a window, and subtract: the late window's mean minus the "
         "early one's, one number per document, a [batch] tensor.",
)


def matched_controls(targets, norms, excluded):
    """targets: (layer, head) pairs; norms: [n_layers, n_heads] head sizes;
    excluded: [n_layers, n_heads] bool -> a list with one control
    (layer, head) per target."""
    chosen = []
    for layer, head in targets:
        pool = [h for h in range(norms.shape[1])
                if not excluded[layer, h] and (layer, h) not in chosen]
        best = min(pool, key=lambda h: abs(float(norms[layer, h]
                                                 - norms[layer, head])))
        chosen.append((layer, best))
    return chosen


def _p6b_inputs(g: torch.Generator) -> dict:
    """Random head sizes; targets in a few layers, two of them in one layer and of one size (so
    that they compete for the same control); besides the targets, excluded heads whose sizes
    lie close to the targets' (as composing heads might), so that ignoring the exclusions picks
    them."""
    n_layers, n_heads = 6 + int(torch.randint(0, 4, (1,), generator=g)), 8 + int(torch.randint(0, 3, (1,), generator=g))
    norms = torch.rand(n_layers, n_heads, generator=g, dtype=torch.float64) * 3 + 0.5
    excluded = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    layers = torch.randperm(n_layers, generator=g)[:3].tolist()
    targets = []
    for i, layer in enumerate(layers):
        heads = torch.randperm(n_heads, generator=g)[: 2 if i == 0 else 1].tolist()
        for h in heads:
            targets.append((layer, h))
            excluded[layer, h] = True
        if len(heads) == 2:  # two targets of one size in one layer: both closest to the same head
            norms[layer, heads[1]] = norms[layer, heads[0]] + 0.02
        decoy = next(h for h in torch.randperm(n_heads, generator=g).tolist() if not excluded[layer, h])
        norms[layer, decoy] = norms[layer, heads[0]] + 0.01
        excluded[layer, decoy] = True
    order = torch.randperm(len(targets), generator=g).tolist()
    return {"targets": [targets[i] for i in order], "norms": norms, "excluded": excluded}


def _p6b_variant(targets, norms, excluded, *, ignore=False, only_targets=False, any_layer=False, repeat=False,
                 first=False):
    chosen = []
    target_set = set(targets)
    for layer, head in targets:
        layers = range(norms.shape[0]) if any_layer else [layer]
        pool = [(l, h) for l in layers for h in range(norms.shape[1])
                if (ignore or (only_targets and (l, h) not in target_set) or (not only_targets and not excluded[l, h]))
                and (repeat or (l, h) not in chosen)]
        pick = pool[0] if first else min(pool, key=lambda lh: abs(float(norms[lh] - norms[layer, head])))
        chosen.append(pick)
    return chosen


def _same_heads(got, expected) -> bool:
    try:
        return [tuple(int(x) for x in pair) for pair in got] == [tuple(pair) for pair in expected]
    except (TypeError, ValueError):
        return False


P6B = FunctionExercise(
    id="ps_p6b", title="matched control heads", reference=matched_controls, make_inputs=_p6b_inputs,
    compare=_same_heads,
    mistakes=[
        Mistake("ignored the exclusions", "Nothing stopped the target itself from being chosen: the closest "
                "head in size to an induction head is that head. The excluded heads may not be controls.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, ignore=True)),
        Mistake("excluded only the targets", "The heads that compose with the induction heads are excluded "
                "too: ablating a head that writes their keys, or reads their output, would test the circuit, "
                "not a control.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, only_targets=True)),
        Mistake("matched across layers", "A control stands in for its target in the same layer: heads of "
                "other layers sit at other depths of the computation, whatever their size.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, any_layer=True)),
        Mistake("chose the same control twice", "Two targets in one layer need two different controls; "
                "skip heads you have already chosen.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, repeat=True)),
        Mistake("took the first free head of the layer", "Match the size too: among the allowed heads of the "
                "layer, take the one whose norm is closest to the target's.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, first=True)),
    ],
    hint="Go through the targets in order. For each, look only at heads of its own layer that are neither "
         "excluded nor already chosen, and take the one whose size differs least from the target's. Return "
         "a list of (layer, head) pairs, one per target.",
)


# --- problem 7: patching, which path carries induction -----------------------------------------


def patching_shares(model, clean, corrupted, positions):
    """clean, corrupted: [batch, pos] tokens; positions: prediction positions
    -> {"heads": [n_layers, n_heads] effects, "sender": (0, head), "paths":
    {"K", "Q", "V", "direct": the sender's effect through each}}, all
    normalised (0: as corrupted, 1: as clean)."""
    from circuitbook.patching import (mean_loss, patch_heads, path_patch,
                                      patching_run)

    run = patching_run(model, clean, corrupted,
                       lambda lg: mean_loss(lg, clean, positions))
    heads = patch_heads(run)
    sender = (0, int(heads[0].argmax()))
    readers = [(1, h) for h in range(model.cfg.n_heads)]
    paths = {x.upper(): path_patch(run, sender, readers, into=x)
             for x in "kqv"}
    paths["direct"] = path_patch(run, sender, into="logits")
    return {"heads": heads, "sender": sender, "paths": paths}


def _p7_inputs(g: torch.Generator) -> dict:
    """toy-2l on fresh repeated random tokens (on the model's device), corrupted on the key side
    (even positions of the first copy) or the query side (even positions of the second copy):
    consecutive trials alternate, so that an answer must get both right."""
    n = 16 + 2 * int(torch.randint(0, 5, (1,), generator=g))
    inputs = _zoo_model_and_tokens(g, 4, n)
    clean, model = inputs["tokens"], inputs["model"]
    corrupted = clean.clone()
    key_side = g.initial_seed() % 2 == 0
    start = 0 if key_side else n
    fresh = torch.randint(0, model.cfg.d_vocab, (4, (n + 1) // 2), generator=g)
    corrupted[:, start:start + n:2] = fresh.to(clean.device)
    positions = [n + j - 1 for j in range(1, n, 2)] if key_side else [n + j for j in range(1, n - 1, 2)]
    return {"model": model, "clean": clean, "corrupted": corrupted, "positions": positions}


def _p7_variant(model, clean, corrupted, positions, *, noising=False, invert=False, one_reader=False,
                everywhere=False, corrupted_targets=False):
    from circuitbook.patching import mean_loss, patch_heads, path_patch, patching_run

    n = clean.shape[1] // 2
    at = list(range(n, 2 * n - 1)) if everywhere else positions
    target = corrupted if corrupted_targets else clean
    first, second = (corrupted, clean) if noising else (clean, corrupted)
    run = patching_run(model, first, second, lambda lg: mean_loss(lg, target, at))
    flip = (lambda x: 1 - x) if invert else (lambda x: x)
    heads = flip(patch_heads(run))
    sender = (0, int(heads[0].argmax()))
    readers = ([(1, int(heads[1].argmax()))] if one_reader else [(1, h) for h in range(model.cfg.n_heads)])
    paths = {x.upper(): flip(path_patch(run, sender, readers, into=x)) for x in "kqv"}
    paths["direct"] = flip(path_patch(run, sender, into="logits"))
    return {"heads": heads, "sender": sender, "paths": paths}


def _p7_same(got, expected) -> bool:
    """The answer in any numeric form (heads as a tensor, an array or nested lists; the sender
    as a tuple, list or tensor; each path's effect as a number or a one-element tensor or
    array) against ``expected``, to the tolerance of the default comparison."""
    from circuitbook.checks.core import allclose

    if not isinstance(got, dict) or set(got) != {"heads", "sender", "paths"}:
        return False
    try:
        heads = torch.as_tensor(got["heads"].detach().cpu() if isinstance(got["heads"], torch.Tensor)
                                else got["heads"], dtype=torch.float64)
        sender = tuple(int(x) for x in (got["sender"].tolist() if hasattr(got["sender"], "tolist")
                                        else got["sender"]))
    except (TypeError, ValueError, RuntimeError):
        return False
    paths = got["paths"]
    if not isinstance(paths, dict):
        return False
    paths = {k: as_number(v) for k, v in paths.items()}
    return allclose()({"heads": heads, "sender": sender, "paths": paths}, expected)


def _p7_wrong(**flags):
    return lambda model, clean, corrupted, positions: _p7_variant(model, clean, corrupted, positions, **flags)


P7 = FunctionExercise(
    id="ps_p7", title="patching: the head, then the path", reference=patching_shares, make_inputs=_p7_inputs,
    n_trials=2, compare=_p7_same,
    mistakes=[
        Mistake("patched the wrong direction (noising)", "You put the corrupted run's activations into the "
                "clean run. That asks what the behaviour cannot do without (necessity); this problem asks "
                "what restores it (sufficiency): clean activations into the corrupted run. The two differ "
                "where heads share the work.", _p7_wrong(noising=True)),
        Mistake("one minus the effect", "The normalisation already maps the corrupted run to 0 and the clean "
                "run to 1; subtracting from 1 turns 'restored' into 'still missing'.", _p7_wrong(invert=True)),
        Mistake("patched the path into one reader only", "The sender's output reaches every layer-1 head; "
                "patching it into the keys (or queries, values) of only one of them measures that head's "
                "share, not the path's.", _p7_wrong(one_reader=True)),
        Mistake("read the loss on the whole second copy", "The corruption spoils some predictions and leaves "
                "the others; averaging over all of them dilutes the gap. Read the metric at `positions`.",
                _p7_wrong(everywhere=True)),
        Mistake("scored against the corrupted tokens", "The metric asks how well each run predicts the "
                "clean sequence; where the corruption changed a target, the corrupted tokens are not what "
                "a restored circuit should predict.", _p7_wrong(corrupted_targets=True)),
    ],
    hint="Make one PatchingRun with the clean tokens first and the metric read at `positions` against the "
         "clean tokens. Patch every head's output to find the layer-0 head that matters, then patch only "
         "that head's output into each input of all the layer-1 heads, and into the logits. Return the "
         "dict the docstring describes; each effect is already normalised.",
)


def _reading(answer) -> str:
    return answer.strip().upper() if isinstance(answer, str) else answer


P7B = ValueExercise(
    id="ps_p7b", title="reading the layer-1 heads' patching result", expected=lambda: "A",
    compare=lambda got, want: _reading(got) == want,
    mistakes=[
        ("B", "reading a denoising result as a noising one", "Your measurement put one clean head into an "
         "otherwise corrupted run; B is a claim about the model running without a head. Whether a head is "
         "necessary is a different experiment (noising, or ablation), and with heads that share the work "
         "the two experiments can disagree."),
        ("C", "adding effects as if they were shares", "Effects of separate patches are not parts of one "
         "total: each is measured with everything else corrupted, and heads that do the same job each "
         "restore part of the gap on their own. Their sum can exceed 1 without anything being wrong."),
        ("D", "reading a partial effect as no effect", "Each layer-1 head restores a sizeable part of the gap, "
         "and a head that hardly mattered would restore almost none of it."),
    ],
    hint="Before choosing, write down for one of these numbers which activations of the run that measured "
         "it came from the clean input and which from the corrupted one. Then read each statement and ask "
         "which run it is about, and whether a run of that kind was made here.",
)

EXERCISES = {ex.id: ex for ex in (P1A, P1B, P2, P3, P3B, P4, P5, P5B, P6, P6B, P7, P7B)}

# The checks of each problem: a problem is done when every one of them has passed.
PROBLEMS = {"1": ["ps_p1a", "ps_p1b"], "2": ["ps_p2"], "3": ["ps_p3", "ps_p3b"], "4": ["ps_p4"],
            "5": ["ps_p5b", "ps_p5"], "6": ["ps_p6", "ps_p6b"], "7": ["ps_p7", "ps_p7b"]}


@dataclass
class Progress:
    """The problem set's progress in this notebook, from the checks that have passed (not
    from clicks): ``done`` lists the problems whose checks all passed, ``open`` maps every
    other problem to its checks that have not passed yet."""

    done: list[str]
    open: dict[str, list[str]]

    def __str__(self) -> str:
        text = f"{len(self.done)} of {len(PROBLEMS)} done"
        if self.open:
            text += "; still open: " + "; ".join(f"problem {p} ({', '.join(ids)})" for p, ids in self.open.items())
        return text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        import html

        return f'<div class="circuitbook-progress-report">{html.escape(str(self))}</div>'


def progress(session=SESSION) -> Progress:
    """Which problems of the set are done in this notebook, and which checks are still open."""
    done, still_open = [], {}
    for problem, ids in PROBLEMS.items():
        missing = [i for i in ids if not session.passed(i)]
        if missing:
            still_open[problem] = missing
        else:
            done.append(problem)
    return Progress(done, still_open)
