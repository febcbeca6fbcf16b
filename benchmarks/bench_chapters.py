"""Each chapter's execution time against its budget, in one run.

The house rule: every chapter executes in about a minute on 2 quiet cores
(``scripts/execute_notebooks.BUDGET_S``). `make book` only reports a chapter over budget, so
that a busy machine never fails a reader's build; this script measures every chapter (or the
named ones) afresh, one kernel at a time, outside the execution cache, and prints its time,
the ratio to the budget and the load average it ran under. A ratio above 1 on a quiet machine
(1-minute load average below the number of cores) is a chapter to speed up; under load the
times are upper bounds.

Usage: python benchmarks/bench_chapters.py [--budget 60] [--strict] [names...]
Exit status 1 if a chapter fails to execute, or, with ``--strict``, runs over its budget.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from execute_notebooks import BUDGET_S, RUNAWAY_S, execute, toc_notebooks  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="only notebooks whose path contains one of these")
    ap.add_argument("--budget", type=float, default=BUDGET_S, help=f"seconds per chapter (default {BUDGET_S})")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a chapter runs over its budget")
    args = ap.parse_args(argv)
    notebooks = [p for p in toc_notebooks(strict=not args.names)
                 if not args.names or any(n in str(p) for n in args.names)]
    print(f"{len(notebooks)} notebook(s), budget {args.budget:.0f} s each, {os.cpu_count()} cores; "
          f"load average (1 min) {os.getloadavg()[0]:.1f} at the start", flush=True)
    print(f"{'chapter':<34} {'seconds':>8} {'/budget':>8} {'load':>5}  verdict", flush=True)
    failed, over, total = [], [], 0.0
    start = time.perf_counter()
    for path in notebooks:
        rel = str(path.relative_to(ROOT))
        _, seconds, err = execute(path, cell_timeout=None, notebook_timeout=RUNAWAY_S)
        total += seconds
        verdict = "FAILED" if err else ("over budget" if seconds > args.budget else "ok")
        print(f"{rel:<34} {seconds:8.1f} {seconds / args.budget:8.2f} {os.getloadavg()[0]:5.1f}  {verdict}", flush=True)
        if err:
            failed.append(rel)
            print(err, flush=True)
        elif seconds > args.budget:
            over.append(rel)
    print(f"total {total:.0f} s of execution ({time.perf_counter() - start:.0f} s wall) for {len(notebooks)} "
          f"notebook(s); {len(over)} over budget{': ' + ', '.join(over) if over else ''}; "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''}", flush=True)
    return 1 if failed or (args.strict and over) else 0


if __name__ == "__main__":
    sys.exit(main())
