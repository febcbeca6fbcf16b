"""Planted wrong answers for chapter 19's exercises, each with the diagnosis it must get."""

import math

import torch


def _s(step):
    return step.clamp(min=1).double()


def no_dmodel(step, d_model, warmup):
    s = _s(step)
    return torch.minimum(s ** -0.5, s * warmup ** -1.5)


def times_sqrt_dmodel(step, d_model, warmup):
    s = _s(step)
    return math.sqrt(d_model) * torch.minimum(s ** -0.5, s * warmup ** -1.5)


def maximum(step, d_model, warmup):
    s = _s(step)
    return d_model ** -0.5 * torch.maximum(s ** -0.5, s * warmup ** -1.5)


def warmup_half(step, d_model, warmup):
    s = _s(step)
    return d_model ** -0.5 * torch.minimum(s ** -0.5, s / math.sqrt(warmup))


def unclamped(step, d_model, warmup):
    s = step.double()
    return d_model ** -0.5 * torch.minimum(s ** -0.5, s * warmup ** -1.5)


def python_scalars(step, d_model, warmup):  # loops in Python; step 0 divides by zero
    return torch.tensor([d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5) for s in step.tolist()])


def plus_one(step, d_model, warmup):
    s = step.double() + 1
    return d_model ** -0.5 * torch.minimum(s ** -0.5, s * warmup ** -1.5)


def inverse_step(step, d_model, warmup):
    s = _s(step)
    return d_model ** -0.5 * torch.minimum(1 / s, s * warmup ** -1.5)


def ramp_only(step, d_model, warmup):
    return d_model ** -0.5 * _s(step) * warmup ** -1.5


def decay_only(step, d_model, warmup):
    return d_model ** -0.5 / _s(step).sqrt()


def float32_peak_everywhere(step, d_model, warmup):  # the peak value, whatever the step
    return torch.full(step.shape, (d_model * warmup) ** -0.5, dtype=torch.float32)


def _fill(target, size, share, conf):
    dist = torch.full((len(target), size), share)
    dist[torch.arange(len(target)), target] = conf
    return dist


def over_size(target, size, padding_idx, eps):
    d = _fill(target, size, eps / size, 1 - eps)
    d[:, padding_idx] = 0
    d[target == padding_idx] = 0
    return d


def over_size_minus_one(target, size, padding_idx, eps):
    d = _fill(target, size, eps / (size - 1), 1 - eps)
    d[:, padding_idx] = 0
    d[target == padding_idx] = 0
    return d


def pad_column_kept(target, size, padding_idx, eps):
    d = _fill(target, size, eps / (size - 2), 1 - eps)
    d[target == padding_idx] = 0
    return d


def pad_rows_kept(target, size, padding_idx, eps):
    d = _fill(target, size, eps / (size - 2), 1 - eps)
    d[:, padding_idx] = 0
    return d


def confidence_one(target, size, padding_idx, eps):
    d = _fill(target, size, eps / (size - 2), 1.0)
    d[:, padding_idx] = 0
    d[target == padding_idx] = 0
    return d


def scatter_add(target, size, padding_idx, eps):
    d = torch.full((len(target), size), eps / (size - 2))
    d.scatter_add_(1, target[:, None], torch.full((len(target), 1), 1 - eps))
    d[:, padding_idx] = 0
    d[target == padding_idx] = 0
    return d


def pad_zero(target, size, padding_idx, eps):
    d = _fill(target, size, eps / (size - 2), 1 - eps)
    d[:, 0] = 0
    d[target == 0] = 0
    return d


def one_hot(target, size, padding_idx, eps):
    d = torch.nn.functional.one_hot(target, size).float()
    d[:, padding_idx] = 0
    return d


def eps_per_class(target, size, padding_idx, eps):
    d = _fill(target, size, eps, 1 - eps)  # eps per class, not shared
    d[:, padding_idx] = 0
    d[target == padding_idx] = 0
    return d


MUTATIONS = {
    "ch19_ex1": [
        (no_dmodel, "forgot the d_model^-0.5 factor"),
        (times_sqrt_dmodel, "multiplied by sqrt(d_model) instead of dividing"),
        (maximum, "max instead of min"),
        (warmup_half, "warmup^-0.5 instead of warmup^-1.5"),
        (unclamped, "step 0 not treated as step 1"),
        (python_scalars, None),  # raises ZeroDivisionError at step 0: reported as an error
        (plus_one, "shifted by one step"),
        (inverse_step, "decays as 1/step instead of 1/sqrt(step)"),
        (ramp_only, "only the warm-up ramp"),
        (decay_only, "only the decay (no warm-up)"),
        (float32_peak_everywhere, "wrong values"),
    ],
    "ch19_ex2": [
        (over_size, "spread eps over all size classes"),
        (over_size_minus_one, "spread eps over size - 1 classes"),
        (pad_column_kept, "forgot to zero the padding column"),
        (pad_rows_kept, "forgot to zero the padding rows"),
        (confidence_one, "true class gets 1 instead of 1 - eps"),
        (scatter_add, "true class also got a share of eps"),
        (pad_zero, "assumed the padding index is 0"),
        (one_hot, "one-hot targets (no smoothing)"),
        (eps_per_class, "wrong values"),
    ],
}
