"""The composition-score nulls at real shapes: time, memory and the exact moment they estimate.

1. ``random_baseline`` at GPT-2-small shapes (d_model 768, d_head 64, 512 samples): its time,
   the peak resident memory of this process, and its estimate of ``E[score^2]`` against the
   exact ``expected_squared_score(768) = 1/768``, with the standard error of the estimate.
   The old implementation formed three [512, 768, 768] float64 tensors (2.4 GB each).
2. ``rotated_baseline`` on the zoo's ``toy-2l``: for each layer-0 -> layer-1 pair, the
   K-composition score against the null of the same heads randomly rotated, as a z-score.

Usage::

    python benchmarks/bench_baseline.py [--device cpu|cuda] [--samples 512] [--null-samples 64]
"""

from __future__ import annotations

import argparse
import math
import resource
import time
import warnings

import torch


def main() -> int:
    warnings.simplefilter("ignore")
    from circuitbook.composition import composition_scores, expected_squared_score, random_scores, rotated_baseline
    from circuitbook.models import load

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--null-samples", type=int, default=64)
    args = ap.parse_args()

    d_model, d_head = 768, 64
    t0 = time.perf_counter()
    s = random_scores(d_model, d_head, n_samples=args.samples, device=args.device)
    if s.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter() - t0
    sq = s.square()
    se = float(sq.std()) / math.sqrt(sq.numel())
    print(f"random_baseline({d_model}, {d_head}, n_samples={args.samples}) on {args.device}: {t:.2f} s, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
    print(f"  mean score {float(s.mean()):.5f} (Jensen bound 1/sqrt(d_model) = {1 / math.sqrt(d_model):.5f})")
    print(f"  mean score^2 * d_model = {float(sq.mean()) * d_model:.4f} +- {se * d_model:.4f} (1 SE); "
          f"exact {expected_squared_score(d_model) * d_model:.4f}")

    model = load("toy-2l", device=args.device)
    t0 = time.perf_counter()
    null = rotated_baseline(model, "K", n_samples=args.null_samples)
    t = time.perf_counter() - t0
    score = composition_scores(model, "K")
    z = (score - null.mean(0)) / null.std(0)
    n = model.cfg.n_heads
    print(f"rotated_baseline(toy-2l, 'K', n_samples={args.null_samples}): {t:.2f} s; layer 0 -> layer 1 "
          f"z-scores of the K-composition against it (rows: writers, columns: readers):")
    for h1 in range(n):
        print("  " + "  ".join(f"{float(z[0, h1, 1, h2]):+7.1f}" for h2 in range(n)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
