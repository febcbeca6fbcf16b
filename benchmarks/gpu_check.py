"""One command for a machine with a GPU: the GPU test suite, then the kernel benchmark on CUDA.

1. ``pytest tests/gpu tests/unit/test_devices.py``: every kernel, the training loop, the zoo's
   metrics, the encoder-decoder and chapter 17's calls (``test_gpu.py``); activation and path
   patching on a 3-layer model, direct logit attribution, the neurons' activations and
   statistics, the Haar sampler, the ICL kernel, the hand-built scaffold and SmolLM2's loader
   (``test_analysis.py``); and every other file of ``tests/gpu`` (the exercise checks), on
   CUDA, in float32, float16 and bfloat16, against CPU float64 (tolerances in
   ``tests/gpu/gpu_helpers.py``), each result on the model's device in full (``cuda:0``,
   not only its type); then the device-placement tests.
2. ``benchmarks/bench_kernels.py --device cuda``: composition, copying and induction scores at
   GPT-2-small shapes against TransformerLens's routes; the rows comparing with
   TransformerLens (their speed-ups are ours over theirs) are repeated at the end.

Exits non-zero if a test fails or the benchmark does. Without a CUDA GPU it says so and exits 2
(``--device cpu`` runs both parts on the CPU instead, as a dry run).

Usage::

    python benchmarks/gpu_check.py [--quick] [--device cuda|cpu]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    print(out, flush=True)
    print(f"(exit {proc.returncode}, {time.perf_counter() - t0:.0f} s)\n", flush=True)
    return proc.returncode, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the benchmark at small shapes (seconds)")
    ap.add_argument("--device", default="cuda", help="cuda (default) or cpu for a dry run")
    args = ap.parse_args()

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no CUDA GPU on this machine (torch.cuda.is_available() is False); "
              "nothing measured. Use --device cpu for a dry run.")
        return 2
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "CPU"
    print(f"gpu_check on {args.device} ({name}); torch {torch.__version__}, CUDA {torch.version.cuda}\n")
    env = dict(os.environ, CIRCUITBOOK_GPU_SUITE_DEVICE=args.device)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH", "")]))

    tests_rc, _ = run([sys.executable, "-m", "pytest", "tests/gpu", "tests/unit/test_devices.py", "-q", "-ra",
                       "-p", "no:cacheprovider"], env)
    bench = [sys.executable, "benchmarks/bench_kernels.py", "--device", args.device] + (["--quick"] if args.quick else [])
    bench_rc, out = run(bench, env)

    print("=== against TransformerLens (speed-up = TransformerLens time / ours) ===")
    header = None
    for line in out.splitlines():
        if line.startswith("| kind") or line.startswith("| heads") or line.startswith("| route"):
            header = line
        if "TransformerLens" in line or "FactoredMatrix" in line or "run_with_cache" in line:
            if header:
                print(header)
                header = None
            print(line)
    print(f"\ntests: {'passed' if tests_rc == 0 else f'FAILED (exit {tests_rc})'}; "
          f"benchmark: {'ran' if bench_rc == 0 else f'FAILED (exit {bench_rc})'}")
    return 0 if tests_rc == 0 and bench_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
