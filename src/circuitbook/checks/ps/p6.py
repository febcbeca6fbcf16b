"""Problem 6: in-context learning measured directly, and matched control heads.

Part of the induction module's problem set (``circuitbook.checks.ps``)."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake


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
