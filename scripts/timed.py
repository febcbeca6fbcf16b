"""Run the stages of `make test` and `make test-full`, timing each, and print the table.

    python scripts/timed.py start LOG TITLE           begin a run: empty LOG, note the time
    python scripts/timed.py run LOG NAME -- COMMAND   run COMMAND (a bash command line) as stage NAME
    python scripts/timed.py summary LOG               print every stage's time and the total

Each stage prints one line when it ends: its wall time and the CPU time of everything it ran
(user + system of its finished child processes, from ``getrusage``), and the load average,
so a slow stage on a busy machine can be told from a slow stage. A failed stage does not stop
the run: every stage runs, so one log shows every failure, and ``summary`` exits 1 if any
stage failed, naming them. LOG is a small tab-separated file.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path


def _load() -> float:
    return os.getloadavg()[0]


def start(log: Path, title: str) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"start\t{time.time()}\t{title}\t{_load():.1f}\n")
    print(f"== {title}: started at load average {_load():.1f} on {os.cpu_count()} cores", flush=True)


def run(log: Path, name: str, command: str) -> int:
    print(f"== stage {name}: {command}", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(["bash", "-c", command]).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    status = "ok" if code == 0 else f"FAILED (exit {code})"
    with log.open("a") as f:
        f.write(f"stage\t{name}\t{wall:.1f}\t{cpu:.1f}\t{_load():.1f}\t{status}\n")
    print(f"== stage {name}: {status}, {wall:.0f} s wall, {cpu:.0f} s CPU, load average {_load():.1f}",
          flush=True)
    return 0  # the run goes on; summary() reports the failure


def summary(log: Path) -> int:
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    head = next(r for r in rows if r[0] == "start")
    stages = [r for r in rows if r[0] == "stage"]
    print(f"== {head[2]}: time per stage (load average {head[3]} at the start, {_load():.1f} now)")
    print(f"   {'stage':<16} {'wall s':>8} {'CPU s':>8} {'load':>6}  status")
    for _, name, wall, cpu, load, status in stages:
        print(f"   {name:<16} {float(wall):8.0f} {float(cpu):8.0f} {float(load):6.1f}  {status}")
    walls, cpus = sum(float(r[2]) for r in stages), sum(float(r[3]) for r in stages)
    total = time.time() - float(head[1])
    print(f"   {'stages':<16} {walls:8.0f} {cpus:8.0f}")
    print(f"== {head[2]}: {total:.0f} s wall in all ({total / 60:.1f} min), {cpus:.0f} s CPU in its stages",
          flush=True)
    failed = [r[1] for r in stages if r[5] != "ok"]
    if failed:
        print(f"== {head[2]} FAILED in stage(s): {', '.join(failed)} (their output is above)", flush=True)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[0] == "start":
        start(Path(argv[1]), " ".join(argv[2:]))
        return 0
    if len(argv) >= 4 and argv[0] == "run" and argv[3] == "--":
        return run(Path(argv[1]), argv[2], " ".join(argv[4:]))
    if len(argv) == 2 and argv[0] == "summary":
        return summary(Path(argv[1]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
