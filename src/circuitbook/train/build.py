"""Building the zoo: train each checkpoint from its recipe, record it, save it (chapters 14-19).

``python -m circuitbook.train.build [names...]`` retrains the named checkpoints (default: all
of ``circuitbook.models.zoo.NAMES``) from their recipes, seeded, on one CPU thread, and
rewrites ``<name>.safetensors`` and ``<name>.json`` in the zoo (``--out`` elsewhere). It
prints each model's training time and headline metrics, and exits 1 if a model misses its
recipe's targets.

- :func:`build`: train one model; returns it with the json record (config, recipe, the
  metrics of ``circuitbook.train.metrics.evaluate``, the training log and history);
- :func:`check_targets`: the recipe's targets a record misses;
- :func:`save`: write both files, with the weights' SHA-256 in the json.

The registry and the loader stay below, in ``circuitbook.models.zoo``: a model can be
loaded without any of this.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch
from safetensors.torch import save_file, save_model

from circuitbook.models.attn_only import attn_only
from circuitbook.models.zoo import (
    EVAL,
    FORMAT_VERSION,
    NAMES,
    RECIPES,
    TEXT_MODELS,
    ZOO_DIR,
    check_name,
    checkpoint_path,
    paths,
)
from circuitbook.train.lm import InductionMetrics, train_lm
from circuitbook.train.metrics import evaluate, toy_translation_metrics
from circuitbook.train.streams import batch_fn, text_heldout
from circuitbook.train.text import TextMetrics, icl_bands
from circuitbook.train.translation import train_translation_zoo_model


def build(name: str, *, threads: int = 1, progress: bool = True) -> tuple[object, dict]:
    """Train ``name`` from its recipe; return ``(model, record)`` with the json record.

    Deterministic: seeded model init and data, ``threads`` torch threads (1 by default;
    the same machine gives the same weights).
    """
    check_name(name)
    if name == "toy-translation":
        return _build_translation()
    if name in TEXT_MODELS:
        return _build_text(name, threads=threads, progress=progress)
    recipe = RECIPES[name]
    cfg = dict(recipe.model)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            model = attn_only(cfg.pop("n_layers"), **cfg)
        every = recipe.train.get("history_every")
        tracker = InductionMetrics(every=every, seq_len=EVAL["repeat_seq_len"], batch=EVAL["repeat_batch"],
                                   seed=EVAL["repeat_seed"]) if every else None
        t0 = time.perf_counter()
        losses = train_lm(model, batch_fn(recipe), steps=recipe.train["steps"], lr=recipe.train["lr"],
                          threads=threads, callback=tracker, progress=progress, desc=name)
        seconds = time.perf_counter() - t0
        model.eval()
        values = evaluate(name, model)
    finally:
        torch.set_num_threads(old_threads)
    training = {"seconds": round(seconds, 1), "threads": threads, "final_loss": _mean(losses[-50:]),
                "loss_curve": _curve(losses)}
    record = {"config": recipe.model, "recipe": asdict(recipe), "metrics": values, "training": training}
    if tracker is not None:
        record["history"] = _round(tracker.history)
        training["phase_change_step"] = tracker.phase_change_step(chance=math.log(recipe.model["d_vocab"]))
    return model, record


def _build_text(name: str, *, threads: int, progress: bool) -> tuple[object, dict]:
    """Train a text model, recording ``TextMetrics`` and keeping its float16 checkpoints
    (returned in ``record["checkpoints"]``, which ``save`` writes to their own file)."""
    recipe = RECIPES[name]
    cfg, d, t = dict(recipe.model), recipe.data, recipe.train
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        batches = batch_fn(recipe)
        tracker = TextMetrics(text_heldout(recipe), every=t["history_every"], **icl_bands(d),
                              repeat_len=EVAL["repeat_seq_len"],
                              repeat_batch=EVAL["repeat_batch"], repeat_seed=EVAL["repeat_seed"],
                              checkpoints=t["checkpoints"])
        with torch.random.fork_rng(devices=[]):
            model = attn_only(cfg.pop("n_layers"), **cfg)
        load_before = os.getloadavg()
        t0, c0 = time.perf_counter(), time.process_time()
        losses = train_lm(model, batches, steps=t["steps"], lr=t["lr"], threads=threads, callback=tracker,
                          progress=progress, desc=name)
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        load_after = os.getloadavg()
        model.eval()
        with torch.no_grad():  # the metrics are those of the weights as shipped, in float16
            for p in model.parameters():
                p.copy_(p.half().float())
        values = evaluate(name, model)
    finally:
        torch.set_num_threads(old_threads)
    # wall time depends on what else shares the CPU; the process's CPU time much less so
    training = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1), "threads": threads,
                "final_loss": _mean(losses[-50:]), "loadavg_1min_at_start": round(load_before[0], 2),
                "loadavg_1min_at_end": round(load_after[0], 2),
                "loadavg_15min_at_end": round(load_after[2], 2), "nproc": os.cpu_count(),
                "checkpoint_steps": sorted(tracker.checkpoints), "stored_dtype": "float16"}
    record = {"config": recipe.model, "recipe": asdict(recipe), "metrics": values, "training": training,
              "history": _round(tracker.history, 4), "checkpoints": tracker.checkpoints}
    return model, record


def _build_translation() -> tuple[object, dict]:
    t0 = time.perf_counter()
    model, recorded, config = train_translation_zoo_model(seed=0)
    seconds = time.perf_counter() - t0
    values = toy_translation_metrics(model, config)
    training = {"seconds": round(seconds, 1), "threads": 1, "recorded_at_training": recorded}
    record = {"config": config, "recipe": {"source": "circuitbook.train.translation.train_translation_zoo_model",
                                           "seed": 0}, "metrics": values, "training": training}
    return model, record


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _curve(losses: list[float], points: int = 100) -> list[list[float]]:
    """``[[step, mean loss over the window ending at step], ...]``, about ``points`` entries."""
    w = max(1, len(losses) // points)
    return [[i + w, round(_mean(losses[i : i + w]), 4)] for i in range(0, len(losses) - w + 1, w)]


def _round(x, digits: int = 5):
    """Round every float in a nested structure to ``digits`` significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if math.isfinite(x) else x
    if isinstance(x, dict):
        return {k: _round(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v, digits) for v in x]
    return x


def check_targets(name: str, values: dict) -> list[str]:
    """The targets of ``name``'s recipe that ``values`` misses (empty list: all met)."""
    failures = []
    for key, (op, bound) in RECIPES[name].targets.items() if name in RECIPES else []:
        v = values.get(key)
        ok = v is not None and (v > bound if op == ">" else v < bound)
        if not ok:
            failures.append(f"{key} = {v} (target {op} {bound})")
    return failures


def save(name: str, model, record: dict, directory: Path | str | None = None) -> tuple[Path, Path]:
    """Write ``<name>.safetensors`` and ``<name>.json`` (with the weights' SHA-256)."""
    weights, meta = paths(name, directory)
    weights.parent.mkdir(parents=True, exist_ok=True)
    # one metadata entry only: safetensors writes a dict's entries in arbitrary order, and the
    # file should be byte-identical when the weights are
    tag = {"circuitbook.zoo": f"{name} (format {FORMAT_VERSION})"}
    extra = {}
    if name in TEXT_MODELS:  # float16 on disk, to keep the package small
        record = dict(record)
        checkpoints = record.pop("checkpoints")
        save_file({k: v.detach().cpu().half().contiguous() for k, v in model.state_dict().items()}, str(weights),
                  metadata=tag)
        if checkpoints:
            ckpt = checkpoint_path(name, directory)
            save_file({f"step{s}/{k}": v.contiguous() for s, sd in checkpoints.items() for k, v in sd.items()},
                      str(ckpt), metadata=tag)
            extra["checkpoints_file"] = {"file": ckpt.name, "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest(),
                                         "bytes": ckpt.stat().st_size}
    else:
        save_model(model, str(weights), metadata=tag)
    record = {
        "name": name,
        "format": FORMAT_VERSION,
        "chapter": RECIPES[name].chapter if name in RECIPES else "12, 19",
        "description": RECIPES[name].description if name in RECIPES else
        "The Annotated Transformer's encoder-decoder trained on the toy translation task.",
        "weights": {"file": weights.name, "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
                    "bytes": weights.stat().st_size},
        **extra,
        "built_with": {"torch": torch.__version__, "python": sys.version.split()[0],
                       "command": f"python -m circuitbook.train.build {name}"},
        **_round(record, 6),
    }
    meta.write_text(_dumps(record) + "\n")
    return weights, meta


def _dumps(x, indent: int = 0) -> str:
    """JSON with one key per line and every list on one line (compact, diff-friendly)."""
    if isinstance(x, dict) and x:
        pad = " " * (indent + 1)
        items = [f"{pad}{json.dumps(k)}: {_dumps(v, indent + 1)}" for k, v in x.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return json.dumps(x, separators=(", ", ": "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m circuitbook.train.build",
                                     description="Retrain the zoo's checkpoints from their recipes (seeded, 1 thread).")
    parser.add_argument("names", nargs="*", help=f"models to build (default: all): {', '.join(NAMES)}")
    parser.add_argument("--out", default=None, help=f"output folder (default: {ZOO_DIR})")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        parser.error(f"unknown zoo model(s) {unknown}; the zoo has: {', '.join(NAMES)}")
    failed = []
    for n in names:
        model, record = build(n, threads=args.threads, progress=not args.no_progress)
        weights, meta = save(n, model, record, args.out)
        misses = check_targets(n, record["metrics"])
        shown = {k: v for k, v in record["metrics"].items() if not isinstance(v, (list, dict))}
        print(f"{n}: {record['training']['seconds']} s, {weights.stat().st_size / 1024:.0f} KB, {shown}")
        if misses:
            failed.append(n)
            print(f"  MISSED TARGETS: {misses}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
