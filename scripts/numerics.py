"""Execute the book under a second numeric configuration and compare it with the first.

The same code rounds differently on another CPU: PyTorch picks its kernels by the CPU's
instruction set (AVX-512, AVX2, NEON, ...) and splits reductions by the thread count, so
sums are added in another order. A claim whose tolerance was tuned until it passed on one
machine fails on the next. This script runs every chapter again under a configuration
that a different CPU would give, on this machine:

    ATEN_CPU_CAPABILITY=default   PyTorch's generic kernels instead of the vectorised ones
    OMP_NUM_THREADS=1             one thread

The kernels are what moves the roundings: a [512, 576] x [576, 1536] float32 product is
bit for bit the same on one thread and on two here, and differs by up to 4.6e-5 under the
generic kernels. The thread count differs from the build's only for the pages it runs alone
on every core (``execute_notebooks.SOLO``); the others it runs two at a time, one thread each.

and fails when, between the build's own execution and this one,

- a notebook fails (every ``claim`` raises when it does not hold, so a failed claim fails
  its notebook), or the two runs check different claims;
- an exercise check changes its verdict ([PASSED] / [NOT YET] for the same exercise);
- a number glued into the prose (``{glue:text}`name:fmt```) differs by more than one unit
  of the last digit it is printed with: then the page states a digit that depends on the
  machine. Numbers printed without a format must agree exactly. Numbers glued with
  ``machine_dependent=True`` (timings, memory) are counted and listed, not compared.

Usage: python scripts/numerics.py [names...]   (after scripts/execute_notebooks.py)
The second run has its own cache (``_build/.jupyter_cache_numerics``), so it too re-runs
only what changed. Exit status 1 on any difference.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
from execute_notebooks import (  # noqa: E402
    ROOT, cache_path, default_jobs, execute_all, inputs_fingerprint, thread_env, toc_notebooks)
from sphinx_ledger import claims_of  # noqa: E402

MACHINE_MIME = "application/vnd.circuitbook.machine-dependent+json"
# the last entry only saves time: the static explore frames (drawn for up to 64 states per
# figure) are not what this run compares, so it draws the fewest states the grid allows
ALT_ENV = {"ATEN_CPU_CAPABILITY": "default", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "CIRCUITBOOK_EXPLORE_STATES": "1"}
ALT_CACHE = ROOT / "_build" / ".jupyter_cache_numerics"

GLUE_REF = re.compile(r"\{glue(?::text)?\}`([^`]+)`")
CHECK_LINE = re.compile(r"^\[(PASSED|NOT YET)\] (\S+?):", re.M)
FORMAT = re.compile(r"^[+\- ]?,?(?:\.(\d+))?([fe%d])?$")


def capability(env: dict[str, str] | None = None) -> str:
    """What PyTorch's CPU dispatch and thread count are under ``env`` (a fresh interpreter)."""
    code = "import torch; print(torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **(env or {})},
                         capture_output=True, text=True, check=True)
    kernels, threads = out.stdout.split()
    return f"{kernels} kernels, {threads} thread(s)"


def executed(path: Path, cache_dir: Path, env: dict[str, str] | None):
    """``path`` with the outputs of its execution in ``cache_dir`` merged in (the cache keeps
    code cells only), if it ran with today's inputs; else None."""
    from jupyter_cache import get_cache

    cache = get_cache(str(cache_dir))
    nb = nbformat.read(path, as_version=4)
    try:
        record = cache.match_cache_notebook(nb)
    except KeyError:
        return None
    if record.data.get("inputs") != inputs_fingerprint(env=env):
        return None
    return cache.merge_match_into_notebook(nb)[1]


def glued(nb) -> tuple[dict[str, str], set[str]]:
    """(name -> text/plain of every value the notebook glued, names marked machine-dependent)."""
    out, machine = {}, set()
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            meta = output.get("metadata", {}).get("scrapbook")
            if meta:
                out[meta["name"]] = output["data"].get(meta["mime_prefix"] + "text/plain")
            if MACHINE_MIME in output.get("data", {}):
                machine.add(output["data"][MACHINE_MIME]["name"])
    return out, machine


def check_verdicts(nb) -> list[tuple[str, str]]:
    """(exercise, PASSED / NOT YET) for every check result, in the order they ran."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = output.get("data", {}).get("text/plain", "") if "data" in output else output.get("text", "")
            found += [(ex, mark) for mark, ex in CHECK_LINE.findall(text)]
    return found


def prose_refs(nb) -> list[tuple[str, str]]:
    """(name, format spec or '') of every glued number the notebook's prose prints."""
    refs = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for ref in GLUE_REF.findall(cell.source):
                name, _, fmt = ref.partition(":")
                refs.append((name, fmt))
    return refs


def last_digit(value: float, fmt: str) -> float | None:
    """The size of one unit in the last digit ``fmt`` prints ``value`` with (None: exact)."""
    m = FORMAT.match(fmt)
    if not m:
        return None
    digits, kind = m.group(1), m.group(2)
    p = int(digits) if digits is not None else 6
    if kind == "f":
        return 10.0 ** -p
    if kind == "%":
        return 10.0 ** -p / 100
    if kind == "e":
        return 10.0 ** (math.floor(math.log10(abs(value))) - p) if value else 10.0 ** -p
    return None  # d, or no type: integers and strings, which must agree exactly


def compare_glue(name: str, fmt: str, a: str, b: str) -> str | None:
    """None if the printed number ``a`` (first run) agrees with ``b`` (second) at its precision."""
    if a == b:
        return None
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return f"glued {name!r} is {a!r} in one run and {b!r} in the other"
    unit = last_digit(x, fmt)
    if unit is None:
        return f"glued {name!r} (printed exactly) is {a} in one run and {b} in the other"
    if abs(x - y) > unit:
        return (f"glued {name!r} printed as {fmt!r}: {x:{fmt}} vs {y:{fmt}} "
                f"(|difference| {abs(x - y):.3g} > one printed unit {unit:.3g})")
    return None


def compare(native, alt) -> tuple[list[str], dict[str, int]]:
    problems = []
    claims_a = [c["statement"] for _, c in claims_of(native)]
    claims_b = [c["statement"] for _, c in claims_of(alt)]
    if claims_a != claims_b:
        problems.append(f"different claims checked: {sorted(set(claims_a) ^ set(claims_b))[:5]}")
    checks_a, checks_b = check_verdicts(native), check_verdicts(alt)
    if checks_a != checks_b:
        changed = [f"{x} -> {y}" for x, y in zip(checks_a, checks_b) if x != y] or [f"{len(checks_a)} vs {len(checks_b)} checks"]
        problems.append(f"exercise checks changed: {changed}")
    (glue_a, machine), (glue_b, _) = glued(native), glued(alt)
    refs = prose_refs(native)
    for name, fmt in refs:
        if name not in glue_a or name not in glue_b:
            problems.append(f"the prose prints {name!r}, which a run did not glue")
            continue
        problem = None if name in machine else compare_glue(name, fmt, glue_a[name], glue_b[name])
        if problem:
            problems.append(problem)
    timings = sum(name in machine for name, _ in refs)
    return problems, {"claims": len(claims_a), "checks": len(checks_a), "glued": len(refs) - timings,
                      "machine-dependent": timings}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="only notebooks whose path contains one of these")
    # a runaway guard, not a speed test: generic kernels on one thread are slower than the
    # build's (the problem set took 187 s here beside the site build, against 104 s natively)
    ap.add_argument("--notebook-timeout", type=int, default=600)
    ap.add_argument("--jobs", type=int, default=default_jobs(), help="notebooks executed at once")
    args = ap.parse_args(argv)

    # the first execution ran its notebooks args.jobs at a time, on their share of the cores
    first, second = capability(thread_env(args.jobs) or None), capability(ALT_ENV)
    print(f"first configuration: {first}; second: {second} "
          f"({' '.join(f'{k}={v}' for k, v in ALT_ENV.items())})", flush=True)
    if first == second:
        print("note: on this machine the two configurations coincide; the comparison still runs")
    notebooks = [p for p in toc_notebooks(strict=not args.names)
                 if not args.names or any(n in str(p) for n in args.names)]
    missing = [str(p.relative_to(ROOT)) for p in notebooks if executed(p, cache_path(), None) is None]
    if missing:
        print(f"no up-to-date first execution of {missing}: run scripts/execute_notebooks.py first",
              file=sys.stderr)
        return 1
    failures = execute_all(notebooks, ALT_CACHE, env=ALT_ENV, notebook_timeout=args.notebook_timeout,
                           report_path=ROOT / "_build" / "numerics_report.json", jobs=args.jobs)
    totals = {"claims": 0, "checks": 0, "glued": 0, "machine-dependent": 0}
    bad = {}
    for path in notebooks:
        rel = str(path.relative_to(ROOT))
        if rel in failures:
            continue
        problems, counts = compare(executed(path, cache_path(), None), executed(path, ALT_CACHE, ALT_ENV))
        totals = {k: totals[k] + counts[k] for k in totals}
        if problems:
            bad[rel] = problems
    for rel, problems in bad.items():
        print(f"{rel}:", *(f"  {p}" for p in problems), sep="\n")
    print(f"second configuration: {len(notebooks) - len(failures)} of {len(notebooks)} notebooks ran; "
          f"compared {totals['claims']} claims, {totals['checks']} exercise checks and "
          f"{totals['glued']} printed numbers ({totals['machine-dependent']} more, timings and the like, "
          f"marked machine-dependent and not compared): {sum(map(len, bad.values()))} difference(s)")
    return 1 if failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
