"""Grade a folder of submitted notebooks with the autograder bundles from scripts/assignments.py.

Submissions are graded in parallel, ``--jobs`` at a time (default: one per core), each by
``otter run`` in its own process (scripts/grade_job.py), its own scratch folder and under its own
time limit, with one torch thread. Whatever a submission does (crash, loop forever, kill its
kernel, call sys.exit, delete or reorder cells, import the reference solutions, read files it
should not, delete files, write to other submissions' results), the job ends, the affected problems
score zero with the reason written down, and the other submissions are graded as if it were not
there. Run as root (as in a container) with util-linux's ``unshare`` and ``setpriv``, each job is
also sandboxed: a private /tmp, every other file system read-only, no capabilities, its own PID
namespace (see scripts/grade_job.py). Otherwise the jobs are isolated from each other only by
process and folder, which a hostile submission can get past: grade in otter's Docker-based
``otter grade`` or on Gradescope then.

A progress bar (tqdm) shows submissions done and the time left; at the end the run prints its
throughput in submissions per minute.

Writes, into the output folder (default ``_build/grades``), only after every job has ended:
  grades.csv              student, assignment, problem, score, max, feedback
  feedback/<student>.txt  one readable report per student

The assignment of a submission is read from its notebook metadata (``circuitbook.assignment``,
set in the student version), or given with ``--assignment``. The student is the file's stem.

Per-student variants (see scripts/variants.py): when the assignment has a parameter cell and a
roster is known (``--roster roster.csv``, or else the ids of the notebooks that
``make assignments STUDENTS=roster.csv`` wrote into ``<assignment>/students/``), each submission is
graded with its student's variant, recomputed from the file's stem and the instructor's secret
(never read from the notebook): the hidden tests of a copy of the bundle hold that variant's
inputs. A file whose stem is not on the roster scores zero ("not on the roster"). A notebook
whose parameter cell does not hold its student's values (a classmate's notebook handed in under
another name) is graded all the same and flagged: a row ``variant`` (0 of 0 points) says so.

Usage: python scripts/grade.py SUBMISSIONS [--out DIR] [--jobs N] [--timeout 300] [--assignment NAME]
                              [--assignments DIR] [--roster CSV]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import variants  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ROOT / "_build" / "assignments"
JOB = Path(__file__).with_name("grade_job.py")
SANDBOX = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private"]


def problems_of(assignment: str, assignments: Path = ASSIGNMENTS) -> list[str]:
    """The problem names of an assignment, from its autograder's tests."""
    return problems_in(assignments / assignment / "autograder" / "autograder.zip")


def problems_in(bundle: Path) -> list[str]:
    with zipfile.ZipFile(bundle) as z:
        return sorted(Path(n).stem for n in z.namelist() if n.startswith("tests/") and n.endswith(".py"))


def roster_of(assignment: str, assignments: Path, roster: Path | None) -> set[str] | None:
    """The student ids whose variants grade ``assignment``: the roster given, else the notebooks
    `make assignments STUDENTS=...` wrote; None when the assignment has no variants or no roster."""
    if not variants.CHOICES.get(assignment):
        return None
    if roster is not None:
        return set(variants.read_roster(roster))
    folder = assignments / assignment / "students"
    return {p.stem for p in folder.glob("*.ipynb")} if folder.is_dir() else None


def assignment_of(path: Path) -> str | None:
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - a broken file is reported, not fatal
        return None
    return nb.metadata.get("circuitbook", {}).get("assignment")


def can_sandbox() -> bool:
    """Root (a container's root will do) with unshare and setpriv: grade_job.py's sandbox works."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")):
        return False
    return subprocess.run([*SANDBOX, "true"], capture_output=True).returncode == 0


def grade_one(path: Path, bundle: Path, timeout: int, sandbox: bool) -> dict[str, tuple[float, float, str]]:
    """{problem: (score, max, feedback)} for one submission graded with ``bundle`` (an autograder.zip);
    never raises."""
    problems = problems_in(bundle)
    zero = lambda reason: {p: (0.0, 1.0, reason) for p in problems}  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        work = Path(tmp)
        os.chmod(work, 0o700)
        shutil.copy(path, work / "submission.ipynb")
        shutil.copy(bundle, work / "autograder.zip")
        cmd = [sys.executable, str(JOB), str(work)] + (["--sandbox"] if sandbox else [])
        proc = subprocess.Popen((SANDBOX if sandbox else []) + cmd, cwd=work, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            return zero(f"grading stopped after {timeout} s (an endless loop, or far too slow)")
        finally:
            _kill_group(proc)
    try:
        report = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return zero("the grader itself failed: " + err.decode(errors="replace").strip()[-400:])
    data = report["results"]
    if data is None:
        tail = report["log"].strip().splitlines()[-3:]
        return zero("the notebook could not be run to the end: " + " | ".join(tail)[-400:])
    results = {}
    for test in data.get("tests", []):
        name = test.get("name")
        if name not in problems:
            continue
        score, top = float(test.get("score") or 0.0), float(test.get("max_score") or 1.0)
        results[name] = (score, top, _feedback(test.get("output", ""), score >= top))
    for p in problems:
        results.setdefault(p, (0.0, 1.0, "no result for this problem (the notebook did not reach it)"))
    return results


def _kill_group(proc: subprocess.Popen) -> None:
    """End the job and whatever it started (in the sandbox, its PID namespace goes with it)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _feedback(output: str, passed: bool) -> str:
    """The useful line of otter's test output: our check's message or the error."""
    if passed:
        return "passed"
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    keep = [line for line in lines if line.startswith(("[NOT YET]", "Hint:", "AssertionError", "NameError",
                                                       "TypeError", "ValueError", "RuntimeError"))
            or "reference solution" in line]
    text = " ".join(keep) or " ".join(lines[-3:])
    return text[:500]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "grades")
    ap.add_argument("--jobs", type=int, default=0, help="submissions graded at once (default: the number of cores)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per submission")
    ap.add_argument("--assignment", help="grade every submission against this assignment")
    ap.add_argument("--assignments", type=Path, default=ASSIGNMENTS,
                    help="the folder `make assignments` wrote (default: _build/assignments)")
    ap.add_argument("--roster", type=Path, help="roster CSV (column 'id'): grade each student's variant "
                    "(default: the students `make assignments STUDENTS=...` wrote notebooks for)")
    args = ap.parse_args(argv)
    jobs = args.jobs or os.cpu_count() or 1

    subs = sorted(args.submissions.glob("*.ipynb"))
    if not subs:
        print(f"no .ipynb files in {args.submissions}", file=sys.stderr)
        return 1
    sandbox = can_sandbox()
    if not sandbox:
        print("note: not sandboxed (needs root, unshare and setpriv): each submission has its own process, "
              "folder and time limit, but hostile code could reach the files of this user; see grade_job.py",
              file=sys.stderr)
    graded, unknown, flags = {}, {}, {}
    todo = []
    rosters, key = {}, None
    scratch = Path(tempfile.mkdtemp(prefix="variant-bundles-"))  # the variants' bundles
    for path in subs:
        assignment = args.assignment or assignment_of(path)
        base = args.assignments / (assignment or "?") / "autograder" / "autograder.zip"
        if assignment is None or not base.exists():
            unknown[path.stem] = (assignment or "?", None)
            continue
        if assignment not in rosters:
            rosters[assignment] = roster_of(assignment, args.assignments, args.roster)
        roster = rosters[assignment]
        if roster is None:
            todo.append((path, assignment, base))
            continue
        if path.stem not in roster:
            unknown[path.stem] = (assignment, "not on the roster: its file name must be a student id of the "
                                              "roster, whose variant it is graded with")
            continue
        key = key or variants.secret()
        values = variants.variant(assignment, path.stem, key)
        flags[(path.stem, assignment)] = variants.flag(path, values)
        index = variants.all_variants(assignment).index(values)
        own = scratch / f"{assignment}-{index}.zip"
        if not own.exists():
            variants.variant_bundle(base, values, own)
        todo.append((path, assignment, own))
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool, \
            tqdm(total=len(todo), unit="submission", desc=f"grading (JOBS={jobs})", file=sys.stderr) as bar:
        futures = {pool.submit(grade_one, path, own, args.timeout, sandbox): (path.stem, assignment)
                   for path, assignment, own in todo}
        for future in as_completed(futures):
            graded[futures[future]] = future.result()
            bar.update()
            bar.set_postfix_str(f"{bar.n / max(time.monotonic() - start, 1e-9) * 60:.1f}/min")
    elapsed = time.monotonic() - start
    shutil.rmtree(scratch)

    (args.out / "feedback").mkdir(parents=True, exist_ok=True)
    rows = []
    reason = ("not a notebook of a known assignment (unreadable, or its metadata names no assignment "
              "that `make assignments` built)")
    for student, (assignment, why) in sorted(unknown.items()):
        rows.append([student, assignment, "*", 0.0, 0.0, why or reason])
        (args.out / "feedback" / f"{student}.txt").write_text(f"{student}: {why or reason}\n")
        print(f"{student:20s} ? {why or reason}")
    for (student, assignment), results in sorted(graded.items()):
        total = sum(s for s, _, _ in results.values())
        top = sum(m for _, m, _ in results.values())
        lines = [f"{student}: {assignment}: {total:g} / {top:g}", ""]
        for problem, (score, mx, feedback) in sorted(results.items()):
            rows.append([student, assignment, problem, score, mx, feedback])
            lines.append(f"{problem}: {score:g} / {mx:g}  {feedback}")
        flag = flags.get((student, assignment))
        if flag:
            rows.append([student, assignment, "variant", 0.0, 0.0, flag])
            lines.append(f"variant: {flag}")
        (args.out / "feedback" / f"{student}.txt").write_text("\n".join(lines) + "\n")
        print(f"{student:20s} {assignment}: {total:g} / {top:g}{'  FLAGGED' if flag else ''}")
    with open(args.out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "problem", "score", "max", "feedback"])
        writer.writerows(rows)
    rate = len(todo) / elapsed * 60 if todo and elapsed > 0 else 0.0
    print(f"graded {len(todo)} submission(s) in {elapsed:.1f} s with JOBS={jobs}: {rate:.2f} submissions/minute"
          f"{' (sandboxed)' if sandbox else ''}")
    print(f"wrote {args.out / 'grades.csv'} and {len(subs)} feedback file(s) in {args.out / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
