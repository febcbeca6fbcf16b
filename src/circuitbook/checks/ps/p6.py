"""Problem 6: in-context learning measured directly, the design that decides how many documents,
and matched control heads.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, as_number


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
    """Random head sizes (on a grid of 1/1024, so that equal differences are exactly equal);
    targets in three layers, two of them in one layer and of one size (so that they compete for
    the same control); besides the targets, excluded heads whose sizes lie close to the targets'
    (as composing heads might), so that ignoring the exclusions picks them. In the second layer
    two allowed heads lie at exactly the same distance from the target, one above and one below
    (a tie: the lower index wins), in the third the closest head by difference is not the
    closest by ratio (the other heads of that layer lie far away)."""
    n_layers, n_heads = 6 + int(torch.randint(0, 4, (1,), generator=g)), 8 + int(torch.randint(0, 3, (1,), generator=g))
    norms = torch.round((torch.rand(n_layers, n_heads, generator=g, dtype=torch.float64) * 3 + 0.5) * 1024) / 1024
    excluded = torch.zeros(n_layers, n_heads, dtype=torch.bool)
    layers = torch.randperm(n_layers, generator=g)[:3].tolist()
    targets = []
    for i, layer in enumerate(layers):
        heads = torch.randperm(n_heads, generator=g)[: 2 if i == 0 else 1].tolist()
        for h in heads:
            targets.append((layer, h))
            excluded[layer, h] = True
        t = float(norms[layer, heads[0]])
        if len(heads) == 2:  # two targets of one size in one layer: both closest to the same head
            norms[layer, heads[1]] = t + 0.02
        decoy = next(h for h in torch.randperm(n_heads, generator=g).tolist() if not excluded[layer, h])
        norms[layer, decoy] = t + 0.01
        excluded[layer, decoy] = True
        free = sorted(h for h in torch.randperm(n_heads, generator=g).tolist() if not excluded[layer, h])
        if i == 1:  # a tie: the lower index lies below the target, the higher above (ratio prefers it)
            low, high = free[:2]
            norms[layer, low], norms[layer, high] = t - 2 / 1024, t + 2 / 1024
        if i == 2:  # below by 0.30 t, above by 0.32 t: closest by difference below, by ratio above
            below, above, *rest = torch.randperm(len(free), generator=g).tolist()
            norms[layer, free[below]] = t - round(0.30 * t * 1024) / 1024
            norms[layer, free[above]] = t + round(0.32 * t * 1024) / 1024
            for r in rest:
                norms[layer, free[r]] = t + 2 + float(torch.rand(1, generator=g))
    order = torch.randperm(len(targets), generator=g).tolist()
    return {"targets": [targets[i] for i in order], "norms": norms, "excluded": excluded}


def _p6b_variant(targets, norms, excluded, *, ignore=False, only_targets=False, any_layer=False, repeat=False,
                 first=False, ratio=False, last_on_tie=False):
    chosen = []
    target_set = set(targets)
    for layer, head in targets:
        layers = range(norms.shape[0]) if any_layer else [layer]
        pool = [(l, h) for l in layers for h in range(norms.shape[1])
                if (ignore or (only_targets and (l, h) not in target_set) or (not only_targets and not excluded[l, h]))
                and (repeat or (l, h) not in chosen)]
        if last_on_tie:
            pool = pool[::-1]
        if ratio:
            def distance(lh):
                return abs(math.log(float(norms[lh]) / float(norms[layer, head])))
        else:
            def distance(lh):
                return abs(float(norms[lh] - norms[layer, head]))
        chosen.append(pool[0] if first else min(pool, key=distance))
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
        Mistake("matched by ratio", "The statement measures closeness as the difference of the two sizes, "
                "|size - target's size|; a ratio favours heads larger than the target.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, ratio=True)),
        Mistake("broke a tie the other way", "Two heads can lie at the same distance from the target, one "
                "above and one below; the statement says which one to take.",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, last_on_tie=True)),
    ],
    hint="Go through the targets in order. For each, look only at heads of its own layer that are neither "
         "excluded nor already chosen, and take the one whose size differs least from the target's (the "
         "absolute difference; on a tie, as the statement says). Return a list of (layer, head) pairs, one "
         "per target.",
)


# --- the design: which estimand, how many documents (issues 37, 39) -------------------------------


def plan_documents(sigma, effect, alpha, power):
    """sigma: {estimand: (estimate, upper)}, the pilot's sd of each
    estimand's per-document values and that sd's upper confidence limit,
    nats; effect: the smallest mean to resolve, nats; alpha: the two-sided
    level; power: the probability of excluding 0 when the mean is `effect`
    -> (estimand, N): the estimand that needs the fewest documents, and N."""
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    need = {name: math.ceil((z * upper / effect) ** 2)
            for name, (_, upper) in sigma.items()}
    best = min(need, key=need.get)
    return best, need[best]


# The check judges a design by its consequence, with the rules problem 6 states before its cell:
# the chosen estimand with N documents, planned with the upper end of its pilot sd, reaches
# ``power`` against ``effect`` (design_power); and N is at most P6C_SLACK times the fewest
# documents any estimand needs, plus P6C_EXTRA.
P6C_SLACK, P6C_EXTRA = 1.2, 2


def design_power(sd, effect, alpha, n) -> float:
    """The power of the two-sided level-alpha z-test of a mean, both tails, with n documents of
    standard deviation sd when the true mean is ``effect``:
    Phi(effect sqrt(n) / sd - z) + Phi(-effect sqrt(n) / sd - z), z = Phi^-1(1 - alpha / 2)."""
    z, shift = NormalDist().inv_cdf(1 - alpha / 2), abs(effect) * math.sqrt(n) / sd
    return NormalDist().cdf(shift - z) + NormalDist().cdf(-shift - z)


def _p6c_inputs(g: torch.Generator) -> dict:
    """2-3 estimands with random names; their planning sds (upper limits) at least 1.5 times apart,
    so that choosing a costlier one always costs more than the slack allows; each upper limit 1.3
    to 1.8 times its estimate, as a pilot of 5 to 12 documents gives; an effect that keeps the
    cheapest N at 10 or more (so that every named mistake changes N by more than rounding); a
    level and a power drawn among the usual ones."""
    k = 2 + int(torch.randint(0, 2, (1,), generator=g))
    names = [f"estimand_{chr(97 + i)}" for i in torch.randperm(26, generator=g)[:k].tolist()]
    sd = 0.2 + 0.3 * float(torch.rand(1, generator=g))
    uppers = [sd * 1.5 ** i * (1 + 0.2 * float(torch.rand(1, generator=g))) for i in range(k)]
    order = torch.randperm(k, generator=g).tolist()
    sigma = {}
    for i, name in enumerate(names):
        upper = uppers[order[i]]
        sigma[name] = (upper / (1.3 + 0.5 * float(torch.rand(1, generator=g))), upper)
    alpha = [0.05, 0.01, 0.1][int(torch.randint(0, 3, (1,), generator=g))]
    power = [0.8, 0.9][int(torch.randint(0, 2, (1,), generator=g))]
    effect = sd / (1.3 + 1.5 * float(torch.rand(1, generator=g)))
    return {"sigma": sigma, "effect": effect, "alpha": alpha, "power": power}


def _p6c_variant(sigma, effect, alpha, power, *, tails=2, power_term=True, square=True,
                 rounding=math.ceil, worst=False, which=1):
    z = NormalDist().inv_cdf(1 - alpha / tails) + (NormalDist().inv_cdf(power) if power_term else 0)
    need = {name: max(1, int(rounding((z * s[which] / effect) ** (2 if square else 1))))
            for name, s in sigma.items()}
    pick = (max if worst else min)(need, key=need.get)
    return pick, need[pick]


def _p6c_design(got):
    """(estimand, N) from an answer, or None when it is not a pair of a name and a whole number."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        return None
    name, n = got
    n = as_number(n)
    if not isinstance(name, str) or n is None or n != int(n) or n < 1:
        return None
    return name, int(n)


@dataclass
class PlanExercise(FunctionExercise):
    """Problem 6's design, (estimand, N), judged by its consequence (``design_power`` with the
    estimand's upper sd, and the cost bound above), not by equality with the reference's design:
    any N from the cheapest up to the slack passes. A named mistake is recognised when the
    design fails and equals that mistake's design."""

    def _compare(self, got, expected, inputs) -> Result | None:
        design, sigma = _p6c_design(got), inputs["sigma"]
        if design is not None and design[0] in sigma:
            name, n = design
            enough = design_power(sigma[name][1], inputs["effect"], inputs["alpha"], n) >= inputs["power"]
            if enough and n <= P6C_SLACK * expected[1] + P6C_EXTRA:
                return None
        for mistake in self.mistakes:
            if mistake.matches(got, inputs, lambda a, b: _p6c_design(a) == b):
                return self._fail(f"this looks like: {mistake.name}. {mistake.explanation}", mistake.name)
        if got is None or got is Ellipsis:
            return self._fail(f"your function returned {got}: return a pair (estimand, N).",
                              "returned None" if got is None else "returned Ellipsis")
        if design is None:
            return self._fail(f"return a pair (estimand, N): one of sigma's keys and a whole number of "
                              f"documents, at least 1; got {got!r}", "wrong type")
        if design[0] not in sigma:
            return self._fail(f"{design[0]!r} is not one of the estimands in `sigma`", "unknown estimand")
        name, n = design
        achieved = design_power(sigma[name][1], inputs["effect"], inputs["alpha"], n)
        if achieved < inputs["power"]:
            return self._fail(f"with {n} documents your design's power against the effect, planned with the "
                              f"pilot's upper sd, is {achieved:.2f}, below the {inputs['power']:.0%} asked for: "
                              "too few documents for the estimand you chose.", "underpowered")
        return self._fail(f"your design reaches the power, but with more than {P6C_SLACK} times the "
                          f"documents of the cheapest design that does, plus {P6C_EXTRA}: documents cost "
                          "time, and the plan should buy the power it needs and no more.", "wasteful")


P6C = PlanExercise(
    id="ps_p6c", title="the design: which estimand, how many documents", reference=plan_documents,
    make_inputs=_p6c_inputs,
    mistakes=[
        Mistake("planned with the pilot's point estimate", "A pilot of a few documents can underestimate the "
                "spread badly, and a plan built on its estimate falls short of its power whenever the spread is "
                "larger than estimated. Which of the pilot's numbers the plan uses is stated above the exercise.",
                lambda **kw: _p6c_variant(**kw, which=0)),
        Mistake("rounded down", "N must be a whole number at least as large as the formula's value: rounding "
                "down leaves the design just short of its power.",
                lambda **kw: _p6c_variant(**kw, rounding=math.floor)),
        Mistake("one-sided critical value", "The interval is two-sided: its critical value is the normal "
                "quantile at 1 - alpha / 2, not 1 - alpha.", lambda **kw: _p6c_variant(**kw, tails=1)),
        Mistake("no power term", "With only the critical value in the formula the interval excludes 0 about "
                "half the time when the mean equals the effect: add the quantile of the power.",
                lambda **kw: _p6c_variant(**kw, power_term=False)),
        Mistake("forgot the square root of N", "The standard error of a mean of N documents is sigma / sqrt(N), "
                "not sigma / N: solving for N squares the ratio.",
                lambda **kw: _p6c_variant(**kw, square=False)),
        Mistake("chose the estimand that needs the most documents", "Every estimand on offer answers the "
                "question; the design should pick the one whose spread lets the fewest documents reach the "
                "power.", lambda **kw: _p6c_variant(**kw, worst=True)),
    ],
    hint="For each estimand, the interval's half-width with N documents is about z sigma / sqrt(N), with sigma "
         "the pilot's conservative end. Ask for the N at which a mean of size `effect` lies "
         "z_{1-alpha/2} + z_power standard errors from 0, round it so that the power is reached, and keep the "
         "estimand that needs the fewest.",
)
