"""Training the toy translation model of the zoo, and its metrics (chapter 19).

The recipe of Vaswani et al. (2017) (``circuitbook.train.vaswani``) applied to the
Annotated Transformer's encoder-decoder (``circuitbook.models.encoder_decoder``) on the toy
translation task (``circuitbook.data.translation``): ``train_translation``,
``train_translation_zoo_model``, and the held-out metrics ``translation_metrics`` with the
expected calibration error ``calibration``.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from circuitbook.data import translation as T
from circuitbook.models.encoder_decoder import (
    EncoderDecoder,
    beam_search,
    greedy_decode,
    model_from_config,
    truncate_at,
)
from circuitbook.train.vaswani import LabelSmoothing, vaswani_adam

ZOO_CONFIG = dict(
    N=2, d_model=64, d_ff=128, h=4, dropout=0.1, norm_position="pre", max_len=32,
    steps=1000, batch_size=64, warmup=200, lr_factor=1.0, smoothing=0.1,
    n_train=20000, n_test=500, n_beam_eval=200, beam_size=4,
)
"""Shape and recipe of the zoo's "toy-translation" model (chapter 19 describes the recipe and
continues the training; chapter 12 reads its cross-attention)."""


@contextmanager
def _deterministic(seed: int, threads: int):
    """Seed torch's global RNG and set the thread count inside, restoring both after."""
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield
    finally:
        torch.set_num_threads(old_threads)


def loss_compute(model: EncoderDecoder, batch, criterion) -> torch.Tensor:
    """Per-token loss of ``batch`` (a ``circuitbook.data.Batch``): criterion(generator(out), tgt_y) / ntokens."""
    out = model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask)
    logp = model.generator(out)
    return criterion(logp.reshape(-1, logp.size(-1)), batch.tgt_y.reshape(-1)) / batch.ntokens


def train_translation(
    seed: int = 0,
    *,
    smoothing: float = 0.1,
    steps: int | None = None,
    threads: int = 1,
    evaluate: bool = True,
    device: str | torch.device = "cpu",
    **overrides,
):
    """Train the toy translation model (``circuitbook.data.translation``) from scratch.

    Recipe (chapter 19): ``make_model`` with ``ZOO_CONFIG``'s shape, Adam(0.9, 0.98, 1e-9)
    with the Noam schedule (``vaswani_adam``), ``LabelSmoothing(smoothing)``, batches drawn
    from a fixed pool of training sentences disjoint from the held-out set. Deterministic
    given ``seed`` (global RNG forked and restored; ``threads`` torch threads, 1 by default).
    ``overrides`` replace ``ZOO_CONFIG`` entries (e.g. ``steps=300`` for a quick run).
    ``device`` is where training runs; the default is the CPU, where the zoo's checkpoint was
    trained, because the same seed gives bitwise the same weights only on the same kernels.
    The initial weights and the batch order come from CPU generators on every device.

    Returns ``(model, metrics, config)``: the model in eval mode; ``metrics`` from
    ``translation_metrics`` plus ``train_seconds``, ``final_loss`` and ``loss_history``;
    ``config`` (JSON-serialisable) holds everything ``model_from_config`` needs plus the
    recipe and task description.
    """
    unknown = set(overrides) - set(ZOO_CONFIG)
    if unknown:
        raise ValueError(f"unknown training options {sorted(unknown)}; known: {sorted(ZOO_CONFIG)}")
    cfg = dict(ZOO_CONFIG, **overrides, smoothing=smoothing, seed=seed)
    if steps is not None:
        cfg["steps"] = steps
    cfg.update(src_vocab=len(T.SRC_VOCAB), tgt_vocab=len(T.TGT_VOCAB), pad=T.PAD, bos=T.BOS, eos=T.EOS,
               task="circuitbook.data.translation (SVO + adjective-noun -> SOV + noun-adjective)")
    train_sents, test_sents = T.make_split(cfg["n_train"], cfg["n_test"], seed=seed)
    device = torch.device(device)
    src, tgt = T.to_tensors(train_sents)
    src, tgt = src.to(device), tgt.to(device)

    with _deterministic(seed, threads):
        model = model_from_config(cfg).to(device)
        criterion = LabelSmoothing(cfg["tgt_vocab"], padding_idx=T.PAD, smoothing=smoothing)
        opt, sched = vaswani_adam(model.parameters(), cfg["d_model"], warmup=cfg["warmup"], factor=cfg["lr_factor"])
        gen = torch.Generator().manual_seed(seed)
        history = []
        t0 = time.perf_counter()
        model.train()
        for step in range(cfg["steps"]):
            idx = torch.randint(0, src.shape[0], (cfg["batch_size"],), generator=gen, device="cpu").to(device)
            batch = T.Batch(src[idx], tgt[idx], pad=T.PAD)
            loss = loss_compute(model, batch, criterion)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            if step % 50 == 0 or step == cfg["steps"] - 1:
                history.append((step, round(loss.item(), 4)))
        train_seconds = time.perf_counter() - t0
        model.eval()
        metrics = {"train_seconds": round(train_seconds, 2), "final_loss": history[-1][1], "loss_history": history}
        if evaluate:
            metrics.update(translation_metrics(model, test_sents, beam_size=cfg["beam_size"], n_beam=cfg["n_beam_eval"]))
    return model, metrics, cfg


def train_translation_zoo_model(seed: int = 0):
    """The zoo's "toy-translation" model: ``train_translation(seed)`` with ``ZOO_CONFIG``
    (smoothing 0.1, 1 thread, deterministic). Returns ``(model, metrics, config)``; the
    state_dict is under 1 MB. Chapter 19 shows the recipe; chapter 12 reads its cross-attention.
    """
    return train_translation(seed, smoothing=ZOO_CONFIG["smoothing"], threads=1)


def calibration(confidence: torch.Tensor, correct: torch.Tensor, n_bins: int = 10) -> dict:
    """Expected calibration error of top-1 predictions.

    ECE = sum_b (|B_b| / n) |acc(B_b) - conf(B_b)| over ``n_bins`` equal-width confidence
    bins (Guo et al. 2017). ``confidence`` [n] is the probability of the predicted token,
    ``correct`` [n] whether it was right. Returns ``ece``, ``mean_confidence``, ``accuracy``
    and per-bin ``bins`` (lower edge, count, accuracy, confidence). Chapter 19.
    """
    confidence, correct = confidence.double().flatten(), correct.double().flatten()
    if confidence.shape != correct.shape or confidence.numel() == 0:
        raise ValueError(f"confidence and correct must be equal-length, non-empty; got {confidence.shape}, {correct.shape}")
    edges = torch.linspace(0, 1, n_bins + 1, dtype=torch.float64, device=confidence.device)
    which = torch.bucketize(confidence, edges[1:-1], right=True)
    ece, bins = 0.0, []
    for b in range(n_bins):
        sel = which == b
        cnt = int(sel.sum())
        if cnt:
            acc, conf = correct[sel].mean().item(), confidence[sel].mean().item()
            ece += cnt / confidence.numel() * abs(acc - conf)
            bins.append((round(edges[b].item(), 2), cnt, round(acc, 4), round(conf, 4)))
    return {"ece": ece, "mean_confidence": confidence.mean().item(), "accuracy": correct.mean().item(), "bins": bins}


def translation_metrics(model: EncoderDecoder, sentences, beam_size: int = 4, n_beam: int | None = 200) -> dict:
    """Held-out metrics of a translation model on source ``sentences`` (lists of words).

    - ``exact_match_greedy`` / ``exact_match_beam``: fraction of sentences translated exactly
      (beam search on the first ``n_beam`` sentences, it is slower; ``n_beam=0`` skips it
      and reports None);
    - ``token_accuracy``: teacher-forced top-1 accuracy over target tokens (words and EOS);
    - ``mean_confidence``, ``ece``, ``nll``: teacher-forced calibration (``calibration``).
    Chapter 19.
    """
    model.eval()
    device = next(model.parameters()).device
    src, tgt = T.to_tensors(sentences)
    src, tgt = src.to(device), tgt.to(device)
    batch = T.Batch(src, tgt, pad=T.PAD)
    max_len = tgt.shape[1]
    with torch.no_grad():
        logp = model.generator(model(batch.src, batch.tgt, batch.src_mask, batch.tgt_mask))
        keep = batch.tgt_y != T.PAD
        conf, pred = logp.exp().max(-1)
        correct = (pred == batch.tgt_y)[keep]
        cal = calibration(conf[keep], correct)
        nll = -logp.gather(-1, batch.tgt_y[..., None]).squeeze(-1)[keep].mean().item()
        want = [T.encode(T.exact_translation(s), T.TGT_VOCAB) for s in sentences]
        greedy = truncate_at(greedy_decode(model, src, batch.src_mask, max_len, T.BOS), T.EOS)
        n_b = len(sentences) if n_beam is None else min(n_beam, len(sentences))
        beam = truncate_at(beam_search(model, src[:n_b], batch.src_mask[:n_b], max_len, T.BOS, T.EOS, beam_size), T.EOS) if n_b else []
    return {
        "n_test": len(sentences),
        "exact_match_greedy": sum(g == w for g, w in zip(greedy, want)) / len(want),
        "exact_match_beam": sum(b == w for b, w in zip(beam, want[:n_b])) / n_b if n_b else None,
        "n_beam": n_b,
        "beam_size": beam_size,
        "token_accuracy": cal["accuracy"],
        "mean_confidence": cal["mean_confidence"],
        "ece": cal["ece"],
        "nll": nll,
        "calibration_bins": cal["bins"],
    }
