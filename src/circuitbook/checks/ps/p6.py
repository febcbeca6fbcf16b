"""Problem 6: in-context learning measured directly, the design that decides how many documents,
and matched control heads.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, Result, as_number, recognised


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
    library_answers=("circuitbook.icl.icl_scores", "circuitbook.loss.per_token_loss",
                     # the band averaging and its sign, from losses the answer computed itself
                     "circuitbook.icl.icl_score_from_losses", "circuitbook.train.text.row_icl_scores",
                     "circuitbook.train.phases.icl_score_from_positions"),
    make_inputs=_p6_inputs,
    mistakes=[
        Mistake("off by one position", "Your losses pair each token with the logits at its own "
                "position. Which position's logits were computed before the model had seen token t?",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, shift=0)),
        Mistake("wrong sign", "Your scores are not the docstring's. Which window's loss does it subtract from "
                "which, and what sign does a model that improves with context then get?",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, sign=-1)),
        Mistake("used raw logits", "Your losses are read straight off the logits. Is a logit a "
                "log-probability? What would adding one constant to every logit at a position do to your "
                "score, and to the model's prediction?",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, log=False)),
        Mistake("single tokens instead of windows", "Your score uses one token of each window. What does the "
                "statement average over, and how much would one token's loss vary from document to document?",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, single=True)),
        Mistake("averaged over documents", "You returned one number for the whole batch. What does the "
                "bootstrap that puts an interval on the mean resample, and what shape does the docstring ask for?",
                lambda logits, tokens, early, late: _icl_variant(logits, tokens, early, late, docs=True)),
    ],
    hint="For one token t of a window: which position's logits predict it, and how do you get from them to "
         "the probability the model gave tokens[:, t]? What is averaged over a window, which window's mean "
         "is subtracted from which, and how many numbers does the docstring ask for?",
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
        Mistake("ignored the exclusions", "Some of your controls are heads that `excluded` marks. Of all the "
                "heads of a target's layer, which one is closest in size to the target, and could it stand in "
                "for itself?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, ignore=True)),
        Mistake("excluded only the targets", "None of your controls is a target, but some are heads that "
                "`excluded` marks. Which heads besides the targets does the statement keep out, and what would "
                "ablating one of them test?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, only_targets=True)),
        Mistake("matched across layers", "Some of your controls sit in another layer than the target they "
                "stand for. What would ablating a head at another depth of the computation compare the target "
                "with?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, any_layer=True)),
        Mistake("chose the same control twice", "Two of your targets got the same control. How many heads "
                "would the control run then ablate, against how many targets?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, repeat=True)),
        Mistake("took the first free head of the layer", "Your controls are allowed heads of the right layers, "
                "but their sizes play no part in which ones you took. What else does the statement ask a control "
                "to share with its target?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, first=True)),
        Mistake("matched by ratio", "In one layer an allowed head lies below the target and another above it, "
                "and your control is not the one the statement's measure of closeness picks. How does the "
                "statement measure the distance between two sizes, and does your measure agree with it on "
                "both sides of the target?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, ratio=True)),
        Mistake("broke a tie the other way", "In one layer two allowed heads lie at exactly the same distance "
                "from the target, one above and one below, and your control is not the one the statement "
                "asks for. What does it say decides such a case?",
                lambda targets, norms, excluded: _p6b_variant(targets, norms, excluded, last_on_tie=True)),
    ],
    hint="Take one target and write down the heads that could stand in for it: in which layer may they sit, "
         "and which heads of that layer are ruled out, by `excluded` and by your own earlier choices? Among "
         "the rest, how does the statement measure closeness in size, and what does it say when two heads "
         "are equally close? Return one (layer, head) pair per target, in the targets' order.",
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
                return self._fail(recognised(mistake.explanation), mistake.name)
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
        Mistake("rounded down", "Your N falls just short of the power asked for. The formula "
                "rarely gives a whole number: check how you turned its value into a count of documents.",
                lambda **kw: _p6c_variant(**kw, rounding=math.floor)),
        Mistake("one-sided critical value", "Your N is too small for the interval the statement asks for. "
                "Is that interval one-sided or two-sided, and which normal quantile leaves alpha outside it?",
                lambda **kw: _p6c_variant(**kw, tails=1)),
        Mistake("no power term", "With your N the interval excludes 0 only about half the time "
                "when the mean equals the effect. Where in your formula does the power asked for enter?",
                lambda **kw: _p6c_variant(**kw, power_term=False)),
        Mistake("forgot the square root of N", "Your N grows in proportion to sigma / effect. How does the "
                "standard error of a mean of N documents shrink as N grows, and what does that make N grow like?",
                lambda **kw: _p6c_variant(**kw, square=False)),
        Mistake("chose the estimand that needs the most documents", "You chose the estimand that needs the most "
                "documents. Every estimand on offer answers the question: what, then, should decide among them?",
                lambda **kw: _p6c_variant(**kw, worst=True)),
    ],
    hint="For one estimand: how wide is the interval with N documents, and which of the pilot's two numbers "
         "for its spread does the statement plan with? How far from 0 must a mean of size `effect` lie, in "
         "standard errors, for the interval to exclude 0 with the power asked for (both the level and the "
         "power enter)? How must N be rounded, and which estimand do you then keep?",
)
