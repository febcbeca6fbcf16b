"""How much faster `make grade` gets with more jobs: 8 copies of the problem set's reference solution,
graded with JOBS=1 and with JOBS=2, and the ratio of the two wall-clock times.

Also reports the peak resident memory of grading one problem-set submission: the RSS of the whole
process tree of the job (grade.py, otter, the notebook's kernel), summed and sampled every 0.1 s
(psutil), which is what a Gradescope container must hold for one submission.

Usage: python benchmarks/bench_grading.py [--copies 8] [--reuse]
(builds the problem set's assignment first; --reuse grades with the one already in _build/assignments,
copied, so that a rebuild meanwhile does not disturb the run)

The machine is shared: on a loaded 2-core machine, JOBS=2 cannot reach 2x, and the figure is a
lower bound of what an idle machine gives.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "grading"))

import assignments  # noqa: E402
from submissions import PROBLEMS, reference  # noqa: E402


def grade(folder: Path, jobs: int, out: Path, built: Path) -> tuple[float, float]:
    """(wall-clock seconds, peak summed RSS of the process tree in MiB) of grading ``folder``."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "grade.py"), str(folder), "--out", str(out),
                             "--jobs", str(jobs), "--timeout", "1800", "--assignments", str(built)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    root, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        rss = 0
        try:
            for p in [root, *root.children(recursive=True)]:
                rss += p.memory_info().rss
        except psutil.Error:  # a process ended while being read
            pass
        peak = max(peak, rss)
        time.sleep(0.1)
    out_text, err_text = proc.communicate()
    elapsed = time.monotonic() - start
    if proc.returncode:
        raise SystemExit(out_text + err_text)
    print(out_text.strip().splitlines()[-2])
    return elapsed, peak / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--reuse", action="store_true", help="grade with the assignment `make assignments` built")
    args = ap.parse_args(argv)
    folder = assignments.OUT / assignments.assignment_name(PROBLEMS)
    if not (args.reuse and (folder / "autograder" / "autograder.zip").exists()):
        folder = assignments.assign(PROBLEMS)
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        built = Path(tmp) / "assignments"
        shutil.copytree(folder, built / folder.name)
        subs = Path(tmp) / "subs"
        subs.mkdir()
        nb = reference(PROBLEMS, folder)
        for i in range(args.copies):
            nbformat.write(nb, subs / f"student{i:02d}.ipynb")
        one, peak_one = grade(subs, 1, Path(tmp) / "out1", built)
        two, peak_two = grade(subs, 2, Path(tmp) / "out2", built)
    print(f"{args.copies} problem-set submissions: JOBS=1 {one:.1f} s ({one / args.copies:.1f} s each), "
          f"JOBS=2 {two:.1f} s; speed-up {one / two:.2f}x")
    print(f"peak RSS of the grading process tree: JOBS=1 {peak_one:.0f} MiB (one submission at a time), "
          f"JOBS=2 {peak_two:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
