"""Benchmark the offline SmolLM2-135M loader (circuitbook.models.pretrained, chapters 11 and 17).

Measures, in a fresh process:
- the time of ``load_smollm2()`` (imports of torch/transformer_lens excluded, reported apart);
- the peak resident memory of the process after loading (``ru_maxrss``);
- the largest absolute difference of log-probabilities between the converted
  ``HookedTransformer`` and the ``transformers`` model on a few prompts (loaded afterwards,
  so it does not count towards the peak above), and the top next token of a fact prompt.

Targets: load < 60 s, peak RSS < 3 GB, log-prob difference < 1e-3.

    .venv/bin/python benchmarks/bench_pretrained.py [--threads N]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

PROMPTS = ["The capital of France is", "def fib(n):\n    return", "Once upon a time, there was a little"]


def peak_rss_gb() -> float:
    # Linux reports ru_maxrss in KiB (macOS in bytes).
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()

    t0 = time.perf_counter()
    import torch
    import transformer_lens  # noqa: F401  (imported here so its cost is reported apart)

    from circuitbook.models.pretrained import load_smollm2, smollm2_hf

    torch.set_num_threads(args.threads)
    t_import = time.perf_counter() - t0

    t1 = time.perf_counter()
    model, tok = load_smollm2()
    t_load = time.perf_counter() - t1
    rss = peak_rss_gb()

    hf, _ = smollm2_hf()
    max_diff = 0.0
    with torch.no_grad():
        for prompt in PROMPTS:
            ids = tok(prompt, return_tensors="pt").input_ids
            diff = model(ids).log_softmax(-1) - hf(ids).logits.log_softmax(-1)
            max_diff = max(max_diff, diff.abs().max().item())
        top = tok.decode(model(model.to_tokens(PROMPTS[0]))[0, -1].argmax())

    print(f"threads               {args.threads}")
    print(f"import (torch, TL)    {t_import:6.1f} s")
    print(f"load_smollm2()        {t_load:6.1f} s   (target < 60 s)   {'ok' if t_load < 60 else 'SLOW'}")
    print(f"peak RSS after load   {rss:6.2f} GB  (target < 3 GB)   {'ok' if rss < 3 else 'HIGH'}")
    print(f"max |log-prob diff|   {max_diff:.2e}  (target < 1e-3)  {'ok' if max_diff < 1e-3 else 'OFF'}")
    print(f"'{PROMPTS[0]}' -> {top!r}")


if __name__ == "__main__":
    main()
