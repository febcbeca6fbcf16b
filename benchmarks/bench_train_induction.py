"""How long until induction heads form? Train the toy-2l recipe from scratch (chapter 19).

Trains the two-layer attention-only model of the zoo's ``toy-2l`` recipe (d_model 64, 4
heads of 16, n_ctx 64, d_vocab 64, shortformer, no LayerNorm, Adam lr 1e-2, batch 32,
random segments repeated from a random phase) on ``--threads`` CPU threads and stops at
the first evaluation where the model shows induction:

    best induction score > 0.7, best previous-token score > 0.5,
    loss on the second copy of repeated random tokens < 1 nat (chance: ln 64 = 4.16).

Reports the wall time (training plus the periodic evaluations), the step, the phase-change
step, the machine's load average (other processes share the CPU), and saves a plot of
the phase change. Usage::

    python benchmarks/bench_train_induction.py [--out /tmp/bench_train_induction.png] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time


def shows_induction(record: dict, induction: float = 0.7, prev: float = 0.5, loss: float = 1.0) -> bool:
    return (
        record["induction_best"] > induction
        and record["prev_token_best"] > prev
        and record["loss_second_copy"] < loss
    )


def plot(history: dict, phase_step: int | None, stop_step: int | None, d_vocab: int, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = history["step"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    train = [(s, l) for s, l in zip(steps, history["loss"]) if l is not None]
    ax1.plot(*zip(*train), label="training loss")
    ax1.plot(steps, history["loss_first_copy"], label="first copy (no context to use)")
    ax1.plot(steps, history["loss_second_copy"], label="second copy (in-context)")
    ax1.axhline(math.log(d_vocab), color="grey", ls=":", label=f"chance ln {d_vocab}")
    ax1.set_ylabel("loss (nats)")
    ax1.legend(fontsize=8)
    ax2.plot(steps, history["induction_best"], label="best induction score")
    ax2.plot(steps, history["prev_token_best"], label="best previous-token score")
    ax2.set_ylabel("score")
    ax2.set_xlabel("step")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=8)
    for ax in (ax1, ax2):
        if phase_step is not None:
            ax.axvline(phase_step, color="red", ls="--", lw=1)
        if stop_step is not None:
            ax.axvline(stop_step, color="black", ls=":", lw=1)
    ax1.set_title("toy-2l from scratch: the induction phase change (red: phase change)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="/tmp/bench_train_induction.png", help="where to save the plot (PNG)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument("--every", type=int, default=10, help="evaluate every this many steps")
    args = parser.parse_args()

    import torch

    from circuitbook.models.attn_only import attn_only
    from circuitbook.models.zoo import RECIPES
    from circuitbook.train import InductionMetrics, phase_change_step, train_lm
    from circuitbook.train.streams import batch_fn

    torch.set_num_threads(args.threads)
    recipe = RECIPES["toy-2l"]
    cfg = dict(recipe.model)
    load_before = os.getloadavg()
    model = attn_only(cfg.pop("n_layers"), **cfg)
    metrics = InductionMetrics(every=args.every, seq_len=32, batch=16, seed=0, stop_when=shows_induction)
    t0 = time.perf_counter()
    losses = train_lm(model, batch_fn(recipe), steps=args.max_steps, lr=recipe.train["lr"], threads=args.threads,
                      callback=metrics, progress=False)
    wall = time.perf_counter() - t0
    load_after = os.getloadavg()

    h = metrics.history
    last = metrics.last
    reached = shows_induction(last)
    d_vocab = recipe.model["d_vocab"]
    phase = phase_change_step(h, chance=math.log(d_vocab))
    plot(h, phase, last["step"] if reached else None, d_vocab, args.out)
    result = {
        "reached_induction": reached,
        "steps": len(losses),
        "wall_seconds": round(wall, 2),
        "ms_per_step": round(1000 * wall / max(1, len(losses)), 1),
        "phase_change_step": phase,
        "induction_best": round(last["induction_best"], 3),
        "prev_token_best": round(last["prev_token_best"], 3),
        "loss_first_copy": round(last["loss_first_copy"], 3),
        "loss_second_copy": round(last["loss_second_copy"], 3),
        "chance": round(math.log(d_vocab), 3),
        "threads": args.threads,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpu_count": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "plot": args.out,
    }
    verdict = "showed induction" if reached else f"did NOT show induction within {args.max_steps} steps"
    print(f"toy-2l recipe on {args.threads} thread(s): {verdict} after {result['steps']} steps, "
          f"{result['wall_seconds']} s wall ({result['ms_per_step']} ms/step incl. evaluation)")
    print(f"  phase change at step {phase}; induction {result['induction_best']}, prev-token "
          f"{result['prev_token_best']}, loss first copy {result['loss_first_copy']} vs second copy "
          f"{result['loss_second_copy']} (chance {result['chance']})")
    print(f"  load average before {result['loadavg_before']}, after {result['loadavg_after']} "
          f"on {result['cpu_count']} CPUs (above ~1 means other processes shared the CPU)")
    print(f"  plot: {args.out}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
