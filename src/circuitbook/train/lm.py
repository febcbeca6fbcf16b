"""Training the attention-only toy models on next-token prediction (chapters 14-17, 19).

- ``lm_loss``: the mean next-token loss a model is trained on (``circuitbook.loss.per_token_loss``,
  the book's one next-token loss, re-exported by ``circuitbook.train``);
- ``train_lm``: the zoo's training loop (Adam, constant lr by default);
- ``repeat_losses``, ``InductionMetrics``, ``phase_change_step``: how induction forms.
"""

from __future__ import annotations

import math

import torch

from circuitbook.data.repeats import repeated_random_tokens
from circuitbook.heads import induction_and_prev_token_scores
from circuitbook.loss import per_token_loss


def lm_loss(model, tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy: ``-mean_t log p(x_{t+1} | x_{<=t})`` over [batch, pos-1].

    The loss every toy model is trained on (chapter 19); a scalar tensor with grad.
    """
    logits = model(tokens, return_type="logits")
    return per_token_loss(logits, tokens).mean()


def make_optimizer(model, optimizer="adam", *, lr: float = 1e-2, weight_decay: float = 0.0, betas=(0.9, 0.999)):
    """``"adam"``, ``"adamw"`` or ``"sgd"`` over ``model.parameters()``; an optimizer
    instance is returned unchanged. The zoo's toy models use plain Adam at a constant
    lr of 1e-2, no warm-up (chapter 19)."""
    if isinstance(optimizer, torch.optim.Optimizer):
        return optimizer
    params = [p for p in model.parameters() if p.requires_grad]
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, weight_decay=weight_decay)
    if optimizer == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay)
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be 'adam', 'adamw', 'sgd' or a torch.optim.Optimizer, got {optimizer!r}")


def _next_batch(batches, step: int) -> torch.Tensor:
    if callable(batches):
        return batches(step)
    try:
        return next(batches)
    except StopIteration:
        raise ValueError(f"the batch iterator ran out after {step} steps; pass more batches or fewer steps") from None


def train_lm(
    model,
    batches,
    *,
    steps: int,
    lr: float = 1e-2,
    optimizer="adam",
    weight_decay: float = 0.0,
    schedule=None,
    threads: int | None = None,
    callback=None,
    progress: bool = True,
    desc: str = "train",
) -> list[float]:
    """Train ``model`` on next-token prediction for ``steps`` steps; return the losses.

    ``batches`` is a function ``step -> tokens [batch, pos]`` (deterministic training:
    ``lambda step: induction_tokens(32, 64, seed=step)``) or an iterator of token
    batches. Each step: ``loss = lm_loss(model, tokens)``, ``loss.backward()``,
    ``optimizer.step()``. ``optimizer`` is ``"adam"`` (default), ``"adamw"``, ``"sgd"`` or an
    optimizer instance. ``schedule(step) -> factor`` multiplies the learning rate (a
    ``LambdaLR``; e.g. ``lambda s: noam_lr(s, d_model, warmup)`` with ``lr=1``); the
    default is a constant ``lr``. ``threads`` sets ``torch.set_num_threads`` during training (tiny
    models run best on 1 thread when the CPU is shared) and restores it afterwards.

    ``callback(step, model, loss)`` (or a list of them) is called once before training
    with ``step=0, loss=None`` and after every step with the step count (1-based) and
    that step's loss; if it returns ``True``, training stops early. A tqdm bar shows
    the loss unless ``progress=False``. Taught in chapter 19.
    """
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    callbacks = [] if callback is None else list(callback) if isinstance(callback, (list, tuple)) else [callback]
    opt = make_optimizer(model, optimizer, lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule) if schedule is not None else None
    if not callable(batches):
        batches = iter(batches)
    device = next(model.parameters()).device
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    losses: list[float] = []
    try:
        model.train()
        stop = any([bool(cb(0, model, None)) for cb in callbacks])
        bar = _progress(steps, desc, progress)
        for step in range(1, steps + 1):
            if stop:
                break
            tokens = _next_batch(batches, step - 1).to(device)
            loss = lm_loss(model, tokens)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
            losses.append(loss.item())
            stop = any([bool(cb(step, model, losses[-1])) for cb in callbacks])
            if bar is not None:
                bar.update(1)
                if step % 10 == 0 or stop:
                    bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if bar is not None:
            bar.close()
    finally:
        model.eval()
        torch.set_num_threads(old_threads)
    return losses


def _progress(steps: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=steps, desc=desc, leave=False)


def repeat_losses(model, *, seq_len: int | None = None, batch: int = 8, seed: int = 0) -> tuple[float, float]:
    """Mean loss on the first and on the second copy of repeated random tokens.

    Tokens ``[r_0 .. r_{n-1}, r_0 .. r_{n-1}]`` (``n = seq_len``, default ``n_ctx // 2``):
    the first copy is unpredictable (about ``ln d_vocab`` nats for a model that
    learned no bigrams); on the second copy an induction head copies the answer from
    ``n`` positions back. Returns ``(first, second)``, averaged over predictions of
    tokens ``1..n-1`` and ``n+1..2n-1`` (the first token of each copy is left out).
    This gap is the in-context learning that appears at the phase change (chapter 17).
    """
    n = model.cfg.n_ctx // 2 if seq_len is None else seq_len
    if not 2 <= 2 * n <= model.cfg.n_ctx:
        raise ValueError(f"seq_len={n} needs 2 * seq_len <= n_ctx={model.cfg.n_ctx} and seq_len >= 1")
    device = next(model.parameters()).device
    tokens = repeated_random_tokens(batch, n, model.cfg.d_vocab, seed=seed, device=device)
    with torch.no_grad():
        loss = per_token_loss(model(tokens, return_type="logits"), tokens)
    return float(loss[:, : n - 1].mean()), float(loss[:, n:].mean())


class HistoryRecorder:
    """The part every training-record callback of ``train_lm`` shares (chapter 19).

    Every ``every`` steps (and at step 0) it appends one record to ``self.history`` (a dict of
    lists, one per name in ``KEYS``): ``step``, ``loss`` (the mean training loss since the
    previous record) and what the subclass's ``evaluate(model)`` measures. ``stop_when(record)
    -> bool`` ends training early.
    """

    KEYS: tuple[str, ...] = ("step", "loss")

    def __init__(self, every: int, *, stop_when=None):
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self.every, self.stop_when = every, stop_when
        self.history: dict[str, list] = {k: [] for k in self.KEYS}
        self._pending: list[float] = []

    def evaluate(self, model) -> dict:
        """One record (without ``step``/``loss``) for ``model`` as it is now."""
        raise NotImplementedError

    def __call__(self, step: int, model, loss: float | None) -> bool:
        if loss is not None:
            self._pending.append(loss)
        if step % self.every:
            return False
        was_training = model.training
        model.eval()
        record = {"step": step, "loss": sum(self._pending) / len(self._pending) if self._pending else None}
        record.update(self.evaluate(model))
        model.train(was_training)
        self._pending = []
        for k in self.KEYS:
            self.history[k].append(record[k])
        return bool(self.stop_when(record)) if self.stop_when is not None else False

    @property
    def last(self) -> dict:
        """The latest record as a dict (empty before the first)."""
        return {k: v[-1] for k, v in self.history.items() if v}


class InductionMetrics(HistoryRecorder):
    """A ``train_lm`` callback that records how induction forms (chapters 17 and 19).

    Every ``every`` steps (and at step 0) it appends to ``self.history`` (a dict of lists):

    - ``step``; ``loss``: the mean training loss since the previous record;
    - ``loss_first_copy`` / ``loss_second_copy``: :func:`repeat_losses` on a fixed batch of
      repeated random tokens (the in-context loss is the second);
    - ``induction`` / ``prev_token``: the full [n_layers, n_heads] scores of
      ``circuitbook.heads`` as nested lists, and ``induction_best`` / ``prev_token_best``.

    ``stop_when(record) -> bool`` ends training early (e.g. at the first sign of induction).
    :meth:`phase_change_step` finds the step where the in-context loss collapses.
    """

    KEYS = (
        "step", "loss", "loss_first_copy", "loss_second_copy",
        "induction_best", "prev_token_best", "induction", "prev_token",
    )

    def __init__(self, every: int = 25, *, seq_len: int | None = None, batch: int = 8, seed: int = 0, stop_when=None):
        super().__init__(every, stop_when=stop_when)
        self.seq_len, self.batch, self.seed = seq_len, batch, seed

    def evaluate(self, model) -> dict:
        """One record (without ``step``/``loss``) for ``model`` as it is now."""
        n = model.cfg.n_ctx // 2 if self.seq_len is None else self.seq_len
        first, second = repeat_losses(model, seq_len=n, batch=self.batch, seed=self.seed)
        record = {"loss_first_copy": first, "loss_second_copy": second}
        if model.cfg.n_layers == 0:
            ind = prev = torch.zeros(0, model.cfg.n_heads)
        else:
            ind, prev = induction_and_prev_token_scores(model, seq_len=n, batch=self.batch, seed=self.seed)
        record["induction"], record["prev_token"] = ind.tolist(), prev.tolist()
        record["induction_best"] = float(ind.max()) if ind.numel() else 0.0
        record["prev_token_best"] = float(prev.max()) if prev.numel() else 0.0
        return record

    def phase_change_step(self, chance: float | None = None) -> int | None:
        """The step where the in-context loss collapses, or ``None`` if it never does.

        Defined as the first recorded step at which ``loss_second_copy`` falls below the
        midpoint between chance (``ln d_vocab``, or ``chance``) and its lowest recorded
        value; ``None`` if that lowest value is not at least 0.5 nats below chance.
        """
        return phase_change_step(self.history, chance=chance)


def phase_change_step(history: dict, *, chance: float | None = None, d_vocab: int | None = None) -> int | None:
    """:meth:`InductionMetrics.phase_change_step` for a saved history (dict of lists).

    ``chance`` defaults to ``ln d_vocab`` if ``d_vocab`` is given, else to the first
    recorded ``loss_first_copy`` (a model at initialisation is at chance on both copies).
    """
    second, steps = history["loss_second_copy"], history["step"]
    if not second:
        return None
    if chance is None:
        chance = math.log(d_vocab) if d_vocab is not None else history["loss_first_copy"][0]
    low = min(second)
    if low > chance - 0.5:
        return None
    mid = (chance + low) / 2
    return next(s for s, v in zip(steps, second) if v < mid)
