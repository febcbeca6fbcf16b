"""Execute every notebook listed in _toc.yml into the book's execution cache.

Why our own executor rather than letting `jupyter-book build` run them: we want a
limit on each notebook's *total* time (myst-nb only limits single cells), a clear
per-notebook report, and failure on any error.

A reader's build must not fail because their machine is busy, so by default no cell has a
time limit and a notebook is stopped only by a runaway guard (``RUNAWAY_S``, 30 minutes,
far above any chapter's minute). A chapter slower than its budget (``BUDGET_S``: each
executes in about a minute on 2 quiet cores) is listed at the end, with the load average,
and does not fail. Tight limits (``--cell-timeout 120 --notebook-timeout 300``, 2-5 times a
chapter's quiet time) are for `make test-full`; ``benchmarks/bench_chapters.py`` prints every
chapter's time against its budget. Each executed notebook is stored in
the same jupyter-cache database that myst-nb reads (`execute.cache` in _config.yml), so the
build that follows finds every notebook already executed and does not run it again.

jupyter-cache keys a notebook by its code cells only. A chapter's outputs also depend on
the package it imports, the zoo's weights and the pinned environment, so each cached
record also stores ``inputs_fingerprint()``, a hash of all of those, and a record whose
fingerprint differs is executed again. A second `make book` therefore re-executes exactly
the notebooks whose code changed, or all of them when the package, the zoo or the
requirements changed.

Every matplotlib figure a chapter shows is measured as it is drawn (``scripts/figure_audit.py``,
started in each kernel): its titles, axis titles, tick labels, legends and colour bars that
collide, and labels cut at the image's edge, are stored with the notebook's cached execution
and written to ``_build/figure-audit/<notebook>.json`` on every run, executed or cached (a
cached execution from before the audit, or from another version of it, is executed again);
tests/site/test_figure_audit.py reads them.

``--require-passing`` also reads each executed notebook's exercises: every reference solution
must print ``[PASSED]`` for each check it calls, and every untouched student template
``[NOT YET]`` (a check that passes a template could never fail). `make test` runs it on a few
canary chapters, `make test-full` on all.

Usage: python scripts/execute_notebooks.py [--cell-timeout S] [--notebook-timeout S] [--budget S]
       [--require-passing] [--force] [names...]
Exit status 1 if any notebook failed or ran past its limit (never for a chapter over budget),
or, with --require-passing, if an exercise's verdicts are wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

FIGURE_AUDIT = ROOT / "scripts" / "figure_audit.py"
"""Started in every kernel of the build: it measures each matplotlib figure as it is shown."""
AUDIT_DIR = ROOT / "_build" / "figure-audit"
"""Where each notebook's figure audit is written (one JSON file per notebook)."""

BUDGET_S = 60
"""Each chapter executes in about a minute on 2 quiet cores (docs/authoring.md)."""
RUNAWAY_S = 1800
"""The default limit on one notebook's total time: a guard against a notebook that never ends,
30 times a chapter's budget, so that no build fails because its machine was busy."""


def toc_files(root: Path = ROOT, strict: bool = True) -> list[Path]:
    """Every file named in _toc.yml (root included), resolved to an existing path.

    ``strict=False`` skips entries whose file does not exist yet (for running a few chapters
    while others are being written); the full build and the tests are always strict.
    """
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    paths = []
    for name in names:
        matches = [root / f"{name}{ext}" for ext in (".ipynb", ".md") if (root / f"{name}{ext}").exists()]
        if not matches and not strict:
            continue
        if not matches:
            raise FileNotFoundError(f"_toc.yml lists {name!r} but neither {name}.ipynb nor {name}.md exists")
        paths.append(matches[0])
    return paths


def toc_notebooks(root: Path = ROOT, strict: bool = True) -> list[Path]:
    return [p for p in toc_files(root, strict) if p.suffix == ".ipynb"]


def cache_path(root: Path = ROOT) -> Path:
    cfg = yaml.safe_load((root / "_config.yml").read_text())
    return root / cfg["execute"]["cache"]


# Everything besides a notebook's own code that its outputs depend on. Hashing the whole
# package (kernels, checks, widgets, zoo weights) is deliberate: a finer dependency graph
# would be cheaper to re-run but could miss an edge, and a stale green is the worse failure.
FINGERPRINTED = ["src/circuitbook", "requirements.txt", "requirements-data.txt", "pyproject.toml"]


def inputs_fingerprint(root: Path = ROOT, env: dict[str, str] | None = None) -> str:
    """sha256 over the package's files (names and bytes), the requirements and ``env``.

    ``env`` is the numeric configuration the kernel runs under (see scripts/numerics.py):
    the same code under another configuration is a different execution.
    """
    h = hashlib.sha256()
    for entry in FINGERPRINTED:
        top = root / entry
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc":
                continue
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(json.dumps(sorted((env or {}).items())).encode())
    return h.hexdigest()


def audit_version() -> str:
    """A hash of the figure audit's code: an audit made by another version is made again."""
    return hashlib.sha256(FIGURE_AUDIT.read_bytes()).hexdigest()[:16]


def audit_file(rel: str, audit_dir: Path) -> Path:
    """The JSON file of one notebook's figure audit (``book/induction/03_problems.ipynb`` ->
    ``book--induction--03_problems.json``)."""
    return audit_dir / (rel.removesuffix(".ipynb").replace("/", "--") + ".json")


def execute(path: Path, cell_timeout: int | None = None, notebook_timeout: float = RUNAWAY_S,
            env: dict[str, str] | None = None, figure_audit: Path | None = None) -> tuple[object, float, str | None]:
    """Execute ``path`` top to bottom in its own folder; stop it past ``notebook_timeout``.

    ``cell_timeout=None`` sets no limit on a single cell. ``env`` adds variables to the
    kernel's environment (a second numeric configuration). With ``figure_audit`` (a path),
    the kernel starts with ``scripts/figure_audit.py``, which records there every matplotlib
    figure shown (the kernel runs it before the first cell, outside the notebook's history,
    leaving no name behind).
    Returns (executed notebook, seconds, error text or None). On a timeout the kernel is
    shut down, so a runaway notebook cannot hold the CPU for the ones after it.
    """
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    extra = []
    if figure_audit is not None:
        line = f"__import__('runpy').run_path({str(FIGURE_AUDIT)!r}, run_name='circuitbook_figure_audit');"
        extra = [f"--IPKernelApp.exec_lines={[line]!r}"]
        env = {**(env or {}), "CIRCUITBOOK_FIGURE_AUDIT": str(figure_audit)}
    client = NotebookClient(
        nb, timeout=cell_timeout, allow_errors=False, kernel_name="python3",
        startup_timeout=300,  # a kernel starting on a busy machine is slow, not broken
        resources={"metadata": {"path": str(path.parent)}}, store_widget_state=True,
        record_timing=False,  # timing metadata would change the hash myst-nb matches on
        extra_arguments=extra,
    )

    async def run():
        try:
            # start_kernel(env=...) replaces the environment, so pass the whole of it
            kwargs = {"env": {**os.environ, **env}} if env else {}
            await asyncio.wait_for(client.async_execute(**kwargs), timeout=notebook_timeout)
        finally:
            if client.km is not None and await _alive(client.km):
                await client.km.shutdown_kernel(now=True)

    start = time.perf_counter()
    err = None
    try:
        asyncio.run(run())
    except asyncio.TimeoutError:
        err = f"ran past the notebook limit of {notebook_timeout} s"
    except Exception:  # noqa: BLE001 - any failure is reported with its traceback
        err = traceback.format_exc(limit=3)
        if time.perf_counter() - start >= notebook_timeout:  # the kernel died as we stopped it
            err = f"ran past the notebook limit of {notebook_timeout} s\n" + err
    return nb, time.perf_counter() - start, err


def _exercises_pass(rel: str, nb) -> bool:
    problems = exercise_problems(nb)
    for problem in problems:
        print(f"EXERCISE  {rel}: {problem}", flush=True)
    n = sum("solution" in c.metadata.get("tags", []) for c in nb.cells)
    if not problems and n:
        print(f"          {rel}: its {n} reference solution(s) pass and its template(s) do not", flush=True)
    return not problems


def duplicate_glue(nb) -> list[str]:
    """The names an executed notebook glues more than once. myst-nb keeps one of them and warns
    ("glue key ... duplicate"), which fails the site build: a page must glue each name once."""
    names = Counter(output.get("metadata", {}).get("scrapbook", {}).get("name")
                    for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", []))
    return sorted(name for name, n in names.items() if name is not None and n > 1)


def _load() -> str:
    """The 1-minute load average, as text."""
    return f"{os.getloadavg()[0]:.1f}"


CHECK_LINE = re.compile(r"^\[(PASSED|NOT YET)\] (\S+?):", re.M)


def _verdicts(cell) -> list[tuple[str, str]]:
    """(PASSED | NOT YET, exercise id) of every check result a code cell printed or displayed."""
    found = []
    for output in cell.get("outputs", []):
        text = output.get("data", {}).get("text/plain", "") if "data" in output else output.get("text", "")
        found += CHECK_LINE.findall(text if isinstance(text, str) else "".join(text))
    return found


def exercise_problems(nb) -> list[str]:
    """What is wrong with the exercises of an executed notebook (empty: nothing).

    A generated notebook has, for each exercise, the student's template (tag ``exercise``)
    and the reference solution (tag ``solution``), both calling the exercise's check. The
    solution must pass every check it calls; the template must pass none.
    """
    problems = []
    for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
        tags = cell.metadata.get("tags", [])
        verdicts = _verdicts(cell)
        if "solution" in tags:
            if not verdicts:
                problems.append(f"code cell {i}: a reference solution printed no check result")
            problems += [f"code cell {i}: the reference solution of {ex} is [NOT YET]"
                         for mark, ex in verdicts if mark != "PASSED"]
        elif "exercise" in tags:
            problems += [f"code cell {i}: the untouched template of {ex} is [PASSED]"
                         for mark, ex in verdicts if mark == "PASSED"]
    return problems


async def _alive(km) -> bool:
    try:
        result = km.is_alive()
        return await result if asyncio.iscoroutine(result) else bool(result)
    except Exception:  # noqa: BLE001
        return False


def default_jobs() -> int:
    """Notebooks executed at once: two where there are two cores or more. Most chapters run
    small models, where one kernel keeps a core busy with Python and leaves the other idle
    (CI's execute stage: 939 s of CPU in 754 s on 2 cores, one at a time)."""
    return max(1, min(2, os.cpu_count() or 1))


def thread_env(jobs: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """The kernel's thread settings when ``jobs`` notebooks share the cores: each gets its
    share, so that two kernels do not each start a thread per core. Empty for one job, or when
    ``env`` already fixes the threads (the second numeric configuration runs on one)."""
    if jobs <= 1 or "OMP_NUM_THREADS" in (env or {}):
        return {}
    n = str(max(1, (os.cpu_count() or 1) // jobs))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}


SOLO = ("book/induction/03_problems.ipynb", "book/17_induction_evidence.ipynb")
"""The pages that run SmolLM2 over long contexts (problem 6's 32 documents of 511 tokens, chapter
17b's patching): their time goes into large matrix products that use every core, so when
notebooks run in parallel these run first, alone, with all the threads (104 s and 68 s of
CI's 752 s at 2 threads). Under a configuration that fixes one thread they gain nothing from
running alone: they start first beside the others (the problem set, last in the book's order,
ran 218 s alone at the end of the second configuration)."""


def execute_all(notebooks: list[Path], cache_dir: Path, *, env: dict[str, str] | None = None,
                force: bool = False, cell_timeout: int | None = None, notebook_timeout: float = RUNAWAY_S,
                budget: float = BUDGET_S, require_passing: bool = False, report_path: Path | None = None,
                root: Path = ROOT, jobs: int = 1, figure_audit_dir: Path | None = None) -> list[str]:
    """Execute each notebook into the jupyter-cache at ``cache_dir`` unless a record with the
    same code and the same ``inputs_fingerprint(root, env)`` is there. Returns the failures.

    ``jobs`` notebooks run at once, each kernel on its share of the cores (:func:`thread_env`;
    the thread count is a scheduling choice, not part of the fingerprint: the second numeric
    configuration tests that outputs do not depend on it), the :data:`SOLO` ones first and
    alone. A notebook that executes but takes longer than ``budget`` seconds is listed as slow
    at the end (with the load average it ran under), and is not a failure. With
    ``require_passing`` a notebook whose exercises have ``exercise_problems`` (executed now or
    cached) fails. With ``figure_audit_dir``, every kernel audits the matplotlib figures it
    shows (:func:`execute`); the audit is stored with the cached execution and written to
    :func:`audit_file` in that folder for every notebook, executed or cached, and a cached
    execution without an audit by today's version of it is executed again."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(cache_dir))
    fingerprint = inputs_fingerprint(root, env)
    report = json.loads(report_path.read_text()) if report_path and report_path.exists() else {}
    failures, slow, todo = [], [], []
    load_start = _load()
    for path in notebooks:
        rel = str(path.relative_to(root))
        nb = nbformat.read(path, as_version=4)
        if not force:
            try:
                record = cache.match_cache_notebook(nb)
            except KeyError:
                record = None
            audited = figure_audit_dir is None or (
                record is not None and (record.data.get("figure_audit") or {}).get("version") == audit_version())
            if record is not None and record.data.get("inputs") == fingerprint and audited:
                if figure_audit_dir is not None:
                    target = audit_file(rel, figure_audit_dir)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(json.dumps(record.data["figure_audit"], indent=1))
                secs = record.data.get("execution_seconds")
                print(f"cached    {rel}  ({secs:.1f} s when executed)", flush=True)
                report[rel] = {"seconds": secs, "status": "cached"}
                if require_passing and not _exercises_pass(rel, cache.merge_match_into_notebook(nb)[1]):
                    failures.append(rel)
                continue
            if record is not None and record.data.get("inputs") != fingerprint:
                print(f"stale     {rel}: the package, zoo or requirements changed since it ran", flush=True)
            elif record is not None:
                print(f"stale     {rel}: its figures were not audited by today's scripts/figure_audit.py", flush=True)
        todo.append(path)

    def run(path: Path, threads: dict[str, str]):
        print(f"executing {path.relative_to(root)}", flush=True)
        kernel_env = {**threads, **(env or {})} or None
        audit = None
        if figure_audit_dir is not None:
            audit = audit_file(str(path.relative_to(root)), figure_audit_dir)
            audit.unlink(missing_ok=True)
        return path, *execute(path, cell_timeout, notebook_timeout, kernel_env, audit)

    def finished(path: Path, executed, seconds: float, err: str | None) -> None:
        rel = str(path.relative_to(root))
        if err is None and seconds > notebook_timeout:
            err = f"took {seconds:.1f} s, over the notebook limit of {notebook_timeout} s"
        if err is not None:
            print(f"FAILED after {seconds:.1f} s: {rel}\n{err}", flush=True)
            failures.append(rel)
            report[rel] = {"seconds": seconds, "status": "failed", "error": err[-2000:]}
            return
        data = {"execution_seconds": seconds, "inputs": fingerprint}
        if figure_audit_dir is not None:
            target = audit_file(rel, figure_audit_dir)
            try:
                audit = json.loads(target.read_text())
            except (OSError, ValueError) as e:  # the kernel never started the audit
                audit = {"figures": [], "error": f"no figure audit from the kernel ({type(e).__name__}: {e})"}
            data["figure_audit"] = {**audit, "version": audit_version()}
            target.write_text(json.dumps(data["figure_audit"], indent=1))
        cache.cache_notebook_bundle(
            CacheBundleIn(executed, str(path), data=data),
            check_validity=False, overwrite=True,
        )
        print(f"ok in {seconds:.1f} s: {rel}", flush=True)
        report[rel] = {"seconds": seconds, "status": "executed", "budget": budget}
        twice = duplicate_glue(executed)
        if twice:
            print(f"GLUE      {rel}: glued more than once (the site build fails on it): {', '.join(twice)}",
                  flush=True)
            failures.append(rel)
        if require_passing and not _exercises_pass(rel, executed):
            failures.append(rel)
        if seconds > budget:
            slow.append(f"{rel} {seconds:.0f} s")

    threads = thread_env(jobs, env)
    longest = [p for p in todo if str(p.relative_to(root)) in SOLO]
    solo = longest if threads else []
    for path in solo:
        finished(*run(path, {}))
    # the cache and the report are written here, in this thread; the kernels run in the pool's.
    # Under a fixed thread count the longest pages start first, so that none is left running
    # alone at the end
    rest = [p for p in longest if p not in solo] + [p for p in todo if p not in longest]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for done in as_completed([pool.submit(run, p, threads) for p in rest]):
            finished(*done.result())
    if slow:
        print(f"slow (over the {budget:.0f} s budget; not a failure): {', '.join(slow)}. "
              f"Load average {load_start} at the start, {_load()} at the end, on {os.cpu_count()} cores, "
              f"{max(1, jobs)} notebook(s) at a time; benchmarks/bench_chapters.py times each chapter "
              "alone against its budget.", flush=True)
    if report_path:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(report, indent=1, sort_keys=True))
    return failures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="only notebooks whose path contains one of these")
    ap.add_argument("--cell-timeout", type=int, default=0,
                    help="seconds one cell may run (default 0: no limit; make test-full: 120)")
    ap.add_argument("--notebook-timeout", type=int, default=RUNAWAY_S,
                    help=f"seconds one notebook may run (default {RUNAWAY_S}, a runaway guard; make test-full: 200)")
    ap.add_argument("--budget", type=float, default=BUDGET_S,
                    help=f"a chapter slower than this is reported, not failed (default {BUDGET_S})")
    ap.add_argument("--require-passing", action="store_true",
                    help="fail a notebook whose reference solutions do not pass or whose templates do")
    ap.add_argument("--force", action="store_true", help="execute even when the cache holds a match")
    ap.add_argument("--report", default=str(ROOT / "_build" / "execution_report.json"))
    ap.add_argument("--jobs", type=int, default=default_jobs(),
                    help="notebooks executed at once, each on its share of the cores (default: 2 on 2 or more cores)")
    args = ap.parse_args(argv)

    notebooks = [p for p in toc_notebooks(strict=not args.names)
                 if not args.names or any(n in str(p) for n in args.names)]
    start = time.perf_counter()
    failures = execute_all(notebooks, cache_path(), force=args.force, cell_timeout=args.cell_timeout or None,
                           notebook_timeout=args.notebook_timeout, budget=args.budget,
                           require_passing=args.require_passing, report_path=Path(args.report), jobs=args.jobs,
                           figure_audit_dir=AUDIT_DIR)
    print(f"executing took {time.perf_counter() - start:.0f} s in all", flush=True)
    if failures:
        print(f"{len(failures)} notebook(s) failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    print(f"{len(notebooks)} notebook(s) executed or cached, none failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
