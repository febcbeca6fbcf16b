"""Chapter 19 (training): exercise checks and reference solutions."""

from __future__ import annotations

import torch

from circuitbook.checks.core import FunctionExercise, Mistake, allclose


# --------------------------------------------------------------------------------------
# Exercise 19.1: the Noam learning-rate schedule
# --------------------------------------------------------------------------------------


def noam(step, d_model, warmup):
    """step: integer tensor -> learning rates (float tensor, same shape)."""
    s = step.clamp(min=1).double()
    return d_model ** -0.5 * torch.minimum(s ** -0.5, s * warmup ** -1.5)


def _noam_inputs(g: torch.Generator) -> dict:
    d_model = int(torch.randint(32, 1025, (1,), generator=g))
    warmup = int(torch.randint(100, 6001, (1,), generator=g))
    below = torch.randint(2, warmup, (4,), generator=g)
    above = torch.randint(warmup + 1, 10 * warmup, (4,), generator=g)
    step = torch.cat([torch.tensor([0, 1, warmup]), below, above]).sort().values
    return {"step": step, "d_model": d_model, "warmup": warmup}


def _branches(step, warmup, clamp=True):
    s = (step.clamp(min=1) if clamp else step).double()
    return s ** -0.5, s * warmup ** -1.5


EX1 = FunctionExercise(
    id="ch19_ex1",
    title="the Noam learning-rate schedule",
    reference=noam,
    library_answers=("circuitbook.train.vaswani.noam_lr",),
    make_inputs=_noam_inputs,
    mistakes=[
        Mistake("forgot the d_model^-0.5 factor",
                "Your rate does not change with d_model. Should a wider model take the same steps as a narrow one?",
                lambda step, d_model, warmup: torch.minimum(*_branches(step, warmup))),
        Mistake("multiplied by sqrt(d_model) instead of dividing",
                "Your rate grows with d_model. Which way should the width scale the steps?",
                lambda step, d_model, warmup: d_model ** 0.5 * torch.minimum(*_branches(step, warmup))),
        Mistake("max instead of min",
                "Your rate keeps growing after the warm-up. Which of the two branches should apply at each "
                "step?",
                lambda step, d_model, warmup: d_model ** -0.5 * torch.maximum(*_branches(step, warmup))),
        Mistake("warmup^-0.5 instead of warmup^-1.5",
                "Your ramp does not meet the decay branch at step = warmup. What power of warmup makes the "
                "two branches equal there?",
                lambda step, d_model, warmup: d_model ** -0.5 * torch.minimum(
                    _branches(step, warmup)[0], step.clamp(min=1).double() * warmup ** -0.5)),
        Mistake("step 0 not treated as step 1",
                "Your rate at step 0 is wrong. What does each branch give at step 0, and how does the "
                "Annotated Transformer avoid it?",
                lambda step, d_model, warmup: d_model ** -0.5 * torch.minimum(*_branches(step, warmup, False))),
        Mistake("shifted by one step",
                "Your rates match the schedule one step later. Which step number are you using?",
                lambda step, d_model, warmup: noam(step + 1, d_model, warmup)),
        Mistake("decays as 1/step instead of 1/sqrt(step)",
                "Your rate falls too fast after the warm-up. What power of the step does the paper use?",
                lambda step, d_model, warmup: d_model ** -0.5 * torch.minimum(
                    step.clamp(min=1).double() ** -1.0, _branches(step, warmup)[1])),
        Mistake("only the warm-up ramp",
                "Your rate keeps growing after the warm-up ends. What should stop the ramp?",
                lambda step, d_model, warmup: d_model ** -0.5 * _branches(step, warmup)[1]),
        Mistake("only the decay (no warm-up)",
                "Your rate starts at its largest value: there is no warm-up. What should hold it down "
                "early on?",
                lambda step, d_model, warmup: d_model ** -0.5 * _branches(step, warmup)[0]),
    ],
    hint="Read the paper's equation 3 term by term: how does the rate behave during the first warmup "
         "steps, and how after them? At a given step, which of the two terms is in force, and what power "
         "of d_model scales both? What would step 0 do to the formula, and how should you treat it? Work "
         "in floating point; the answer has step's shape.",
    # learning rates are ~1e-7..1e-2: compare relatively, not with an absolute tolerance
    compare=allclose(atol=0.0, rtol=1e-5),
)


# --------------------------------------------------------------------------------------
# Exercise 19.2: label-smoothed targets
# --------------------------------------------------------------------------------------


def smoothed_targets(target, size, padding_idx, eps):
    """target: [N] class ids -> smoothed target distribution [N, size]."""
    dist = torch.full((target.shape[0], size), eps / (size - 2))
    dist[torch.arange(target.shape[0]), target] = 1 - eps
    dist[:, padding_idx] = 0.0
    dist[target == padding_idx] = 0.0
    return dist


def _smooth_inputs(g: torch.Generator) -> dict:
    size = int(torch.randint(6, 13, (1,), generator=g))
    padding_idx = int(torch.randint(1, size, (1,), generator=g))  # never 0: "assumed 0" must show
    eps = 0.05 + 0.4 * float(torch.rand(1, generator=g))
    n = int(torch.randint(8, 13, (1,), generator=g))
    target = torch.randint(0, size, (n,), generator=g)
    target[:2] = padding_idx  # at least two padding rows
    target[2] = (padding_idx + 1) % size  # and at least one real one
    target = target[torch.randperm(n, generator=g)]
    return {"target": target, "size": size, "padding_idx": padding_idx, "eps": eps}


def _smooth(target, size, padding_idx, eps, *, share=None, conf=None, zero_col=True, zero_rows=True,
            add=False, pad=None):
    pad = padding_idx if pad is None else pad
    share = eps / (size - 2) if share is None else share
    conf = 1.0 - eps if conf is None else conf
    dist = torch.full((target.shape[0], size), share)
    rows = torch.arange(target.shape[0])
    dist[rows, target] = dist[rows, target] + conf if add else conf
    if zero_col:
        dist[:, pad] = 0.0
    if zero_rows:
        dist[target == pad] = 0.0
    return dist


EX2 = FunctionExercise(
    id="ch19_ex2",
    title="label-smoothed targets",
    reference=smoothed_targets,
    library_answers=("circuitbook.train.vaswani.LabelSmoothing.target_distribution",),
    make_inputs=_smooth_inputs,
    mistakes=[
        Mistake("spread eps over all size classes",
                "The other classes get the wrong share of eps. Which classes should share it, and how "
                "many are they?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps,
                                                               share=eps / size)),
        Mistake("eps shared among the wrong number of classes",
                "Each share of eps is slightly too small. For one row, count the classes that receive a "
                "share in your answer, then count them again from the rules of label smoothing.",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps,
                                                               share=eps / (size - 1))),
        Mistake("forgot to zero the padding column",
                "Your targets put mass on the padding token. Should the model ever be taught to predict it?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps,
                                                               zero_col=False)),
        Mistake("forgot to zero the padding rows",
                "Rows whose target is padding are not empty. Should a padding position add anything to "
                "the loss?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps,
                                                               zero_rows=False)),
        Mistake("true class gets 1 instead of 1 - eps",
                "Your rows sum to more than 1. Where does the smoothing mass come from?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps, conf=1.0)),
        Mistake("the true class's value is off",
                "The true class gets slightly more than it should. Add up, term by term, what your code "
                "gives the true class, and compare the total with what it should get.",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps, add=True)),
        Mistake("assumed the padding index is 0",
                "Your targets are wrong when the padding index is not 0. Which index did you zero?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps, pad=0)),
        Mistake("one-hot targets (no smoothing)",
                "Your targets are one-hot: nothing is smoothed. Where should eps go?",
                lambda target, size, padding_idx, eps: _smooth(target, size, padding_idx, eps,
                                                               share=0.0, conf=1.0)),
    ],
    hint="Each row is a distribution over the size classes. How much does the true class get, how much "
         "the padding class, and how is what is left shared among the other classes (how many are "
         "there)? What should a row whose target is the padding class hold? Shape [N, size].",
)

EXERCISES = {ex.id: ex for ex in (EX1, EX2)}
