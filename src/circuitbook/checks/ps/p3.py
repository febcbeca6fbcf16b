"""Problem 3: design an induction head in a scaffold, then break it.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, ValueExercise, as_number, recognised
from circuitbook.loss import per_token_loss


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
    scaffold with context length ``n_ctx`` (W_QK, W_OV: [2 P3_VOCAB + n_ctx] square), on 8
    sequences of n = n_ctx // 2 random tokens repeated once (``scaffold_tokens(seed=seed)``).
    ``prev_into``: the subspace into which head 0.0 writes the previous token, "S_prev" (the
    working scaffold) or "S_tok"."""
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


def prefixed_tokens(batch: int = 8, seed: int = 1, n_ctx: int = P3_CTX, device=None) -> tuple[torch.Tensor, list]:
    """[batch, L] sequences whose repeated segment follows a prefix of random tokens whose length
    varies from sequence to sequence, and the prefix lengths: sequence b is k_b prefix tokens, then
    m_b tokens, then the same m_b tokens again (k_b + 2 m_b = L), every token of the prefix and the
    first copy distinct (k_b + m_b <= P3_VOCAB), so each query of the second copy has one earlier
    occurrence. L = min(n_ctx, 3 P3_VOCAB // 2) (even) and k_b is even, drawn from 2 .. min(2 P3_VOCAB
    - L, L - 8): the repeat's offset m_b differs from n_ctx // 2 in every sequence, so a head that
    picks its key by position alone cannot find the match in all of them."""
    g = torch.Generator().manual_seed(seed)
    L = min(n_ctx, 3 * P3_VOCAB // 2) // 2 * 2
    k_max = min(2 * P3_VOCAB - L, L - 8) // 2
    rows, prefixes = [], []
    for _ in range(batch):
        k = 2 * int(torch.randint(1, k_max + 1, (1,), generator=g))
        m = (L - k) // 2
        ids = torch.randperm(P3_VOCAB, generator=g)[: k + m]
        rows.append(torch.cat([ids, ids[k:]]))
        prefixes.append(k)
    return torch.stack(rows).to(device or "cpu"), prefixes


def _behaviour_prefixed(W_QK, W_OV, *, prev_into: str = "S_prev", seed: int = 1, n_ctx: int = P3_CTX) -> dict:
    """scaffold_behaviour's two numbers on ``prefixed_tokens``: the mean attention from each query
    k + m + i of the second copy to key k + i + 1 (i = 0 .. m - 1), and the mean loss on the second
    copy's tokens k + m + 1 .. k + 2m - 1."""
    from circuitbook.models.handbuilt import induction_scaffold
    from circuitbook.validate import model_device

    model = induction_scaffold(W_QK, W_OV, d_vocab=P3_VOCAB, n_ctx=n_ctx, prev_into=prev_into)
    tokens, prefixes = prefixed_tokens(seed=seed, n_ctx=n_ctx, device=model_device(model))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter="blocks.1.attn.hook_pattern")
        loss = per_token_loss(logits, tokens)  # [batch, pos - 1]: entry t - 1 is token t's
    pattern = cache["pattern", 1][:, 0]  # [batch, q, k]
    scores, losses = [], []
    for b, k in enumerate(prefixes):
        m = (tokens.shape[1] - k) // 2
        i = torch.arange(m)
        scores.append(pattern[b, k + m + i, k + i + 1].mean())
        losses.append(loss[b, k + m: k + 2 * m - 1].mean())
    return {"induction_score": float(torch.stack(scores).mean()),
            "loss_second_copy": float(torch.stack(losses).mean())}


def _does_induction(behaviour: dict) -> bool:
    return behaviour["induction_score"] > P3_MIN_SCORE and behaviour["loss_second_copy"] < P3_MAX_LOSS


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


def _p3_space(n_ctx: int = P3_CTX) -> dict:
    from circuitbook.models.handbuilt import subspaces

    return subspaces(P3_VOCAB, n_ctx)


def _same_direction(a, b) -> bool:
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    if a.shape != b.shape or b.norm() == 0 or a.norm() == 0:
        return False
    return float((a * b).sum() / (a.norm() * b.norm())) > 0.999  # same direction, any positive scale


def _same_directions(got, wrong) -> bool:
    """Both matrices of ``got`` point where those of ``wrong`` do, at any positive scale."""
    return isinstance(got, (tuple, list)) and len(got) == 2 and all(_same_direction(g, w) for g, w in zip(got, wrong))


def _p3_inputs(g: torch.Generator) -> dict:
    """The page's row bases: the same every time, since a design is judged by what it does."""
    space = _p3_space()
    return {"S_tok": space["S_tok"], "S_prev": space["S_prev"]}


@dataclass
class DesignExercise(FunctionExercise):
    """Problem 3: the answer (W_QK, W_OV) is judged by its consequence, the scaffold doing
    induction (score above P3_MIN_SCORE, loss on the second copy below P3_MAX_LOSS), not by
    equality with the reference, so any design and any scale that works passes. The answer is
    called, and its errors reported, as for every function exercise (FunctionExercise.check);
    only the verdict differs. A named mistake is recognised by its directions at any scale."""

    n_trials: int = 1  # the inputs are the page's fixed subspaces

    def _compare(self, got, expected, inputs) -> Result | None:
        if got is None or got is Ellipsis:
            return self._fail(f"your function returned {got}: return the pair (W_QK, W_OV)",
                              "returned None" if got is None else "returned Ellipsis")
        pair, wrong = _p3_matrices(got, expected[0].shape[-1])
        if wrong:
            return self._fail(*wrong)
        behaviour = scaffold_behaviour(*pair)  # the answer's form is checked: any error here is ours
        score, loss = behaviour["induction_score"], behaviour["loss_second_copy"]
        now = f"Now: induction score {score:.2f}, loss on the second copy {loss:.2f} nats."
        if _does_induction(behaviour):
            shifted = _behaviour_prefixed(*pair)
            s2, l2 = shifted["induction_score"], shifted["loss_second_copy"]
            if _does_induction(shifted):
                return Result(self.id, True, f"your head does induction: score {min(score, s2):.2f}, loss on "
                              f"the second copy {max(loss, l2):.2f} nats (the worse of the two test batches)")
            return self._fail(
                "not quite: on the sequences that repeat after exactly "
                f"n_ctx / 2 tokens your head scores {score:.2f} (loss {loss:.2f} nats), but where a prefix of "
                f"random length comes before the repeated segment it scores {s2:.2f} (loss {l2:.2f} nats, want "
                f"a score > {P3_MIN_SCORE} and a loss < {P3_MAX_LOSS}). What in your W_QK changes when the "
                "repeat starts somewhere else, and what in a key tells the query that this is the match?",
                "finds the match by position")
        for mistake in self.mistakes:
            if mistake.matches(pair, inputs, _same_directions):
                return self._fail(recognised(mistake.explanation), mistake.name)
        if _same_directions(pair, expected):
            if score > P3_MIN_SCORE:  # the attention is right: only the copy falls short
                return self._fail(
                    f"right directions, and W_QK is strong enough: the head attends to the match. The copy is "
                    f"too weak: the loss on the second copy must be below {P3_MAX_LOSS} nats, and the copied "
                    f"token's logit has to outweigh every other token's, the current token's own direct-path "
                    f"logit included, by a margin. {now}", "too weak")
            return self._fail(
                "right directions, too weak: with a small W_QK the softmax barely prefers the match. A score "
                "gap of g gives the match odds of about e^g against each other key; the induction score must "
                f"exceed {P3_MIN_SCORE}. {now}", "too weak")
        return self._fail(f"the scaffold does not do induction with your head: induction score {score:.2f} "
                          f"(want > {P3_MIN_SCORE}), loss on the second copy {loss:.2f} nats "
                          f"(want < {P3_MAX_LOSS})", "wrong values")


P3 = DesignExercise(
    id="ps_p3", title="design the induction head", reference=design_induction_head, make_inputs=_p3_inputs,
    mistakes=[
        Mistake("attends two positions early",
                "Your head attends, from the query n + i, to key i - 1: two positions before the key that "
                "followed the earlier occurrence. For each of the query and the key, which token does your "
                "W_QK read, and which two must be equal at the key you want?",
                lambda S_tok, S_prev: (S_prev.T @ S_tok, S_tok.T @ S_tok)),
        Mistake("copies another token",
                "The head attends where it should, but what it writes into S_tok is not the token at the "
                "attended position. Which subspace of that position does your W_OV read?",
                lambda S_tok, S_prev: (S_tok.T @ S_prev, S_prev.T @ S_tok)),
        Mistake("anti-copying OV",
                "The head attends where it should, but its output lowers the logit of the token it attends to. "
                "What does that say about your W_OV?",
                lambda S_tok, S_prev: (S_tok.T @ S_prev, -S_tok.T @ S_tok)),
    ],
    hint="Which subspace of the query holds what the head looks with, and which subspace of the key holds "
         "what it must match? How large must the score gap be for the softmax to pick the match? Which "
         "subspace must W_OV read, where does W_U read, and what must the copy outvote? Both matrices are "
         "[d_model, d_model].",
)


def _designed(n_ctx: int, prev_into: str) -> float:
    """The page's design's induction score in the scaffold (built on the default device)."""
    from circuitbook.devices import default_device

    return _designed_on(n_ctx, prev_into, str(default_device()))


@functools.lru_cache(maxsize=None)  # deterministic (float64, fixed tokens): measured once per length and device
def _designed_on(n_ctx: int, prev_into: str, device: str) -> float:
    space = _p3_space(n_ctx)
    return scaffold_behaviour(*design_induction_head(space["S_tok"], space["S_prev"]), prev_into=prev_into,
                              n_ctx=n_ctx)["induction_score"]


def _student_design(design, n_ctx: int):
    """The student's (W_QK, W_OV) for context length ``n_ctx``: ``design`` is their design function
    (called on that length's subspaces) or the pair itself. Raises ValueError, with a message for
    the student, when it does not give two [d_model, d_model] matrices."""
    if callable(design):
        space = _p3_space(n_ctx)
        try:
            design = design(space["S_tok"], space["S_prev"])
        except Exception as exc:  # noqa: BLE001 - the student's bug, reported as feedback
            raise ValueError(f"your design_induction_head raised {type(exc).__name__}: fix problem 3's "
                             "design first") from exc
    d = 2 * P3_VOCAB + n_ctx
    pair, wrong = _p3_matrices(design, d)
    if wrong:
        raise ValueError(f"your design is not a pair of [d_model, d_model] matrices ({wrong[0]}): fix "
                         "problem 3's design first")
    return pair


def _score(n_ctx: int, prev_into: str, design=None) -> float:
    """The induction score of ``design`` (the page's reference design when None) in the scaffold
    with context length ``n_ctx`` and the previous token written into ``prev_into``."""
    if design is None:
        return _designed(n_ctx, prev_into)
    return scaffold_behaviour(*_student_design(design, n_ctx), prev_into=prev_into,
                              n_ctx=n_ctx)["induction_score"]


def p3b_reference(n_ctx: int = P3_CTX, design=None) -> float:
    """Induction score when head 0.0 writes the previous token into S_tok (the broken scaffold), of
    the student's own design when the page passes it (``design``: their design function or their
    pair (W_QK, W_OV)), else of the page's reference design. The page asks for the score of *your*
    head: a design that passes problem 3 may score anything here, so the check measures the
    design it is given (tests/unit/test_student_feedback.py)."""
    return _score(n_ctx, "S_tok", design)


def _p3b_mistakes(n_ctx: int = P3_CTX, design=None) -> list:
    out = [(_score(n_ctx, "S_prev", design), "the unbroken scaffold's score",
            "Which argument of scaffold_behaviour chooses where head 0.0 writes the previous token, and "
            "what did you pass it? (help(scaffold_behaviour) lists them.)")]
    if n_ctx != P3_CTX:
        out.append((p3b_reference(P3_CTX, design), "the book's context length",
                    f"Your parameter cell sets P3_CTX = {n_ctx}: pass it as the scaffold's n_ctx."))
    return out


def _p3b_compare(a, b) -> bool:
    x = as_number(a)
    return x is not None and abs(x - b) <= P3B_TOLERANCE * abs(b)


@dataclass
class BrokenScoreExercise(ValueExercise):
    """Problem 3b: the broken scaffold's score of the student's own design (``design=``), judged
    against that design's score; a design that cannot be built is reported, not crashed on."""

    def check(self, answer, **inputs) -> Result:
        try:
            design = inputs.get("design")
            if design is not None:
                # the broken scaffold's score is a lesson only about a head that does induction in the
                # working one: a design that problem 3's check rejects (one that finds the match by
                # position, say) is sent back there first
                n_ctx = inputs.get("n_ctx", P3_CTX)
                pair = _student_design(design, n_ctx)
                if not (_does_induction(scaffold_behaviour(*pair, n_ctx=n_ctx))
                        and _does_induction(_behaviour_prefixed(*pair, n_ctx=n_ctx))):
                    raise ValueError("your design does not do induction in the working scaffold (problem 3's "
                                     "check, at this context length): fix problem 3's design first")
            return super().check(answer, **inputs)
        except ValueError as exc:
            if "fix problem 3's design first" not in str(exc):
                raise
            return Result(self.id, False, f"not yet: {exc}", "design does not build", self.hint or None)


P3B = BrokenScoreExercise(
    id="ps_p3b", title="what breaks when the subspaces collide", expected=p3b_reference,
    mistakes=_p3b_mistakes,
    hint="Measure your design again on the broken scaffold, in which head 0.0 writes the previous token "
         "into the token subspace: scaffold_behaviour takes that subspace and the context length as "
         "arguments (see help(scaffold_behaviour)). The answer is an induction score: a number (a float, "
         "a NumPy number or a one-element tensor).",
    # the score is deterministic (float64): 1% forgives rounding and float32 re-implementations and
    # tells apart every context length of P3_CONTEXTS for the reference design
    compare=_p3b_compare,
    # within 1% of a score in [0, 1], "too large" / "too small" would find it in about 11 tries
    tells_direction=False,
)
