"""The training recipe of Vaswani et al. (2017), as chapter 19 teaches it.

- Adam with beta = (0.9, 0.98), eps = 1e-9 (section 5.3 of the paper);
- the "Noam" schedule lr(step) = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5):
  linear warm-up for ``warmup`` steps, then decay as 1/sqrt(step);
- label-smoothed cross-entropy with smoothing eps = 0.1 (section 5.4).
"""

from __future__ import annotations

import torch
from torch import nn

VASWANI_BETAS = (0.9, 0.98)
VASWANI_EPS = 1e-9


def noam_lr(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), for step >= 1.

    The two branches meet at ``step == warmup``, where lr peaks at
    factor * (d_model * warmup)^-0.5. Step 0 is treated as step 1 (PyTorch's LambdaLR
    calls the schedule with step 0 before the first update). Taught in chapter 19.
    """
    if d_model < 1 or warmup < 1:
        raise ValueError(f"d_model and warmup must be >= 1, got d_model={d_model}, warmup={warmup}")
    step = max(int(step), 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def vaswani_adam(params, d_model: int, warmup: int = 4000, factor: float = 1.0):
    """Adam(betas=(0.9, 0.98), eps=1e-9) with the Noam schedule as a LambdaLR.

    Returns ``(optimizer, scheduler)``; call ``scheduler.step()`` after each
    ``optimizer.step()``. The optimizer's base lr is 1 so that the scheduler's value
    *is* the learning rate. Taught in chapter 19.
    """
    opt = torch.optim.Adam(params, lr=1.0, betas=VASWANI_BETAS, eps=VASWANI_EPS)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: noam_lr(step, d_model, warmup, factor))
    return opt, sched


class LabelSmoothing(nn.Module):
    """Label-smoothed cross-entropy: KL(target distribution || model distribution).

    The target puts ``1 - smoothing`` on the true class and spreads ``smoothing`` evenly
    over the other classes, excluding ``padding_idx`` (which gets 0, as do rows whose
    target is padding). With ``padding_idx=None`` the mass is spread over all
    ``size - 1`` wrong classes. Input: log-probabilities [N, size]; target: [N] class ids.
    ``self.true_dist`` keeps the last target distribution for inspection. The loss is the
    sum of KL over the batch, as in the Annotated Transformer; divide by the number of
    tokens for a per-token value. Taught in chapter 19.
    """

    def __init__(self, size: int, padding_idx: int | None = 0, smoothing: float = 0.1):
        super().__init__()
        if not 0.0 <= smoothing < 1.0:
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
        if padding_idx is not None and not 0 <= padding_idx < size:
            raise ValueError(f"padding_idx {padding_idx} is outside 0..{size - 1}")
        self.size, self.padding_idx, self.smoothing = size, padding_idx, smoothing
        self.confidence = 1.0 - smoothing
        self.criterion = nn.KLDivLoss(reduction="sum")
        self.true_dist: torch.Tensor | None = None

    def target_distribution(self, target: torch.Tensor) -> torch.Tensor:
        """The smoothed target distribution [N, size] for class ids ``target`` [N]."""
        n_other = self.size - (1 if self.padding_idx is None else 2)
        dist = torch.full((target.shape[0], self.size), self.smoothing / n_other, device=target.device)
        dist.scatter_(1, target.long().unsqueeze(1), self.confidence)
        if self.padding_idx is not None:
            dist[:, self.padding_idx] = 0.0
            dist[target == self.padding_idx] = 0.0
        return dist

    def forward(self, log_probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if log_probs.ndim != 2 or log_probs.shape[1] != self.size:
            raise ValueError(f"log_probs must be [N, {self.size}], got {tuple(log_probs.shape)}")
        if target.shape != log_probs.shape[:1]:
            raise ValueError(f"target must be [N]={log_probs.shape[0]} class ids, got {tuple(target.shape)}")
        self.true_dist = self.target_distribution(target).to(log_probs.dtype)
        return self.criterion(log_probs, self.true_dist)
