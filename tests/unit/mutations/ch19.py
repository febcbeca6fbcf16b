"""Planted wrong answers for chapter 19's exercises, each with the diagnosis it must get."""


import torch


def _s(step):
    return step.clamp(min=1).double()


def maximum(step, d_model, warmup):
    s = _s(step)
    return d_model ** -0.5 * torch.maximum(s ** -0.5, s * warmup ** -1.5)


def python_scalars(step, d_model, warmup):  # loops in Python; step 0 divides by zero
    return torch.tensor([d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5) for s in step.tolist()])


def float32_peak_everywhere(step, d_model, warmup):  # the peak value, whatever the step
    return torch.full(step.shape, (d_model * warmup) ** -0.5, dtype=torch.float32)


def _fill(target, size, share, conf):
    dist = torch.full((len(target), size), share)
    dist[torch.arange(len(target)), target] = conf
    return dist


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
        (python_scalars, None),  # raises ZeroDivisionError at step 0: reported as an error
        (float32_peak_everywhere, "wrong values"),
    ],
    "ch19_ex2": [
        (eps_per_class, "wrong values"),
    ],
}
