"""Grade a folder of submitted notebooks with the autograder bundles from scripts/assignments.py.

Submissions are graded in parallel, ``--jobs`` at a time (default: one per core), each by
``otter run`` in its own sandbox (scripts/grade_job.py, built on bubblewrap), under its own time
limit, with one torch thread. ``make grade`` refuses to run, saying how to install it, where
bubblewrap is missing or cannot create its namespaces. Each job:
  - runs as an unprivileged uid of its own (when grading as root; else as the grading user), with
    no capabilities, in new user, mount, PID, network, IPC and UTS namespaces;
  - sees only its own submission, the bundle (its tests), the grading venv and Python (read-only),
    the book's package and, when cached, the converted SmolLM2 weights (read-only); not the
    home folder (so not ``~/.config/circuitbook/instructor_secret``), not the other submissions,
    not the book's sources or solution notebooks;
  - gets an environment of its own (an allowlist: never ``INSTRUCTOR_SECRET``) and no network;
  - is limited to 256 processes and threads, 12 GiB of address space per process, files of at
    most 1 GiB, 2 GiB in each of its private ``/tmp`` and ``/job``, and, kept by this script over
    all its processes, ``--memory`` GiB of memory (default 6; the sum of their proportional set
    sizes, so pages that forks share count once) and ``--timeout`` seconds.
Whatever a submission does (crash, loop forever, fork without end, allocate 30 GB, kill its
kernel, call sys.exit, delete or reorder cells, call the reference solutions, try to read the
secret, a classmate's notebook or the solutions, reach the network, delete files, write to other
submissions' results), the job ends, the affected problems score zero with the reason written
down, and the other submissions are graded as if it were not there. The feedback kept for a
student is our checks' own line for each problem (or the name of a built-in exception), never
the notebook's output or an exception's message (see :func:`feedback`): otter grades in the
submission's own kernel, so a submission can change its own results, but nothing else. On
Gradescope, the per-submission container is the sandbox instead.

A progress bar (tqdm) shows submissions done and the time left; at the end the run prints its
throughput in submissions per minute.

Writes, into the output folder (default ``_build/grades``), only after every job has ended:
  grades.csv              student, assignment, problem, score, max, feedback
  feedback/<student>.txt  one readable report per student
  results/<student>.json  for the instructor: each problem's score, its outcome (passed, a named
                          mistake, not attempted, an error, or failed unnamed) and the check's own
                          category of the mistake (``Result.mistake``), or what the error was
  report.html, report.csv the class report (scripts/class_report.py): the score distribution, each
                          problem's pass rate, and how many students made each named mistake

The mistake's category reaches the grader on a line of its own. A bundle's tests already end a
failing test's message with ``[CHECK] <exercise>: <category>`` (``Result.autograded``), the line
that Gradescope's results show; for this report each bundle is graded from a copy
(:func:`reporting_bundle`) whose tests' assertion message ends with ``[CHECK] {json}`` (the
check's ``Result.exercise``, ``Result.mistake`` and the start of its message, which says "not
attempted yet" or "your function raised ..."). That line comes from the submission's kernel, so
a submission could forge it (for itself only, as it could its score): it is read only for its own
problem, its category kept only when short and of plain characters, and never shown to a student.

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

Usage: python scripts/grade.py SUBMISSIONS [--out DIR] [--jobs N] [--timeout 300] [--memory 6] [--assignment NAME]
                              [--assignments DIR] [--roster CSV]
"""

from __future__ import annotations

import argparse
import builtins
import csv
import importlib.util
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import pprint
import zipfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import NamedTuple

import nbformat
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import class_report  # noqa: E402
import grade_job  # noqa: E402
import variants  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ROOT / "_build" / "assignments"
JOB = Path(__file__).with_name("grade_job.py")


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


def untouched(path: Path, template: Path) -> set[str]:
    """The problems whose answer cell the submission at ``path`` hands back as it was handed out
    (the same source as in the student notebook ``template``): not attempted, whatever the test
    then says (an untouched value problem's test raises NameError: its variable is undefined)."""
    def answers(file: Path) -> dict[str, str]:
        try:
            nb = nbformat.read(file, as_version=4)
        except Exception:  # noqa: BLE001 - an unreadable notebook has no answers
            return {}
        out = {}
        for cell in nb.cells:
            tests = cell.get("metadata", {}).get("otter", {}).get("tests") or [None]
            if "otter_answer_cell" in cell.get("metadata", {}).get("tags", []) and isinstance(tests[0], str):
                out.setdefault(tests[0], cell.source.strip())
        return out

    handed_out = answers(template)
    return {q for q, source in answers(path).items() if handed_out.get(q) == source}


def package_dir() -> Path:
    """The folder of the ``circuitbook`` package this grader imports: bound read-only into each job."""
    return Path(importlib.util.find_spec("circuitbook").submodule_search_locations[0]).resolve()


def smollm2_cache() -> Path | None:
    """This machine's cache folder when it holds the current converted SmolLM2 (bound read-only
    into each job, which then loads it in seconds instead of converting it again), else None."""
    from circuitbook.cache import cache_dir
    from circuitbook.models.pretrained import smollm2_cache_key, smollm2_gguf_path

    try:
        key = smollm2_cache_key(smollm2_gguf_path())
    except (OSError, RuntimeError, ImportError):
        return None
    return cache_dir() if (cache_dir() / "smollm2-135m" / key / "meta.json").is_file() else None


class Graded(NamedTuple):
    """One problem of one submission: its score, the student's feedback line, and for the
    instructor's report its ``status`` (passed, mistake, not attempted, error or failed: see
    :func:`outcome`) with the check's category of
    the mistake (``Result.mistake``, when the status is "mistake") or what the error was."""

    score: float
    max: float
    feedback: str
    status: str = "error"
    mistake: str | None = None
    error: str | None = None


# why a job gave no results for its problems, as the report counts them
STOPPED = {"time limit": "stopped at the time limit", "memory": "stopped at the memory limit"}
JOB_ERRORS = {**{why: "the notebook's kernel died" for _, why in grade_job.FAILURES},
              grade_job.NO_RESULTS: "the notebook did not run to the end"}
NOT_REACHED = "no result for this problem (the notebook did not reach it)"
GRADER_FAILED = "the grader itself failed on this submission: ask the instructor"


def grade_one(path: Path, bundle: Path, timeout: int, slot: int = 0, limits: grade_job.Limits = grade_job.Limits(),
              cache: Path | None = None) -> dict[str, Graded]:
    """{problem: Graded} for one submission graded with ``bundle`` (an autograder.zip, best one
    that :func:`reporting_bundle` made) in its own sandbox (scripts/grade_job.py; ``slot``: which
    of the concurrent jobs it is); never raises."""
    problems = problems_in(bundle)

    def zero(reason: str, error: str) -> dict[str, Graded]:
        return {p: Graded(0.0, 1.0, reason, "error", None, error) for p in problems}
    files = {"grade_job.py": JOB, "submission.ipynb": path, "autograder.zip": bundle}
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp, \
            open(Path(tmp) / "stdout", "w+b") as out, open(Path(tmp) / "stderr", "w+b") as err, \
            grade_job.sandbox(files, slot=slot, limits=limits, package=package_dir(), cache=cache) as (cmd, fds):
        # bwrap itself gets no more of the grader's environment than the job does
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=fds,
                                env=grade_job.HOST_ENV, start_new_session=True)
        try:
            stopped = _watch(proc, timeout, limits.memory)
        finally:
            _kill_group(proc)
        if stopped:
            return zero(stopped, STOPPED["time limit"] if stopped.startswith("grading stopped after") else STOPPED["memory"])
        out.seek(0)
        lines = out.read(1 << 20).decode(errors="replace").strip().splitlines()
        err.seek(0)
        trouble = err.read(2000).decode(errors="replace").strip()
    try:
        report = json.loads(lines[-1])
        data = report["results"]
    except (ValueError, IndexError, KeyError, TypeError):
        # the sandbox itself failed: bwrap's message is for the instructor, not the student
        print(f"{path.stem}: the grading job failed: {trouble[-400:]}", file=sys.stderr)
        return zero(GRADER_FAILED, "the grader failed")
    if not isinstance(data, dict):
        why = report.get("failure")
        why = why if why in grade_job.REASONS else grade_job.NO_RESULTS
        return zero(why, JOB_ERRORS[why])
    results = {}
    for test in data.get("tests", []) if isinstance(data.get("tests"), list) else []:
        name = test.get("name") if isinstance(test, dict) else None
        if name not in problems:
            continue
        try:
            score, top = float(test.get("score") or 0.0), float(test.get("max_score") or 1.0)
        except (TypeError, ValueError):
            score, top = 0.0, 1.0
        output = str(test.get("output", ""))
        results[name] = Graded(score, top, feedback(output, score >= top, name), *outcome(output, score >= top, name))
    for p in problems:
        results.setdefault(p, Graded(0.0, 1.0, NOT_REACHED, "error", None, "not reached"))
    return results


def _watch(proc: subprocess.Popen, timeout: float, memory: int) -> str | None:
    """Wait for the job; None when it ended by itself, else why it was stopped: past the time
    limit, or past ``memory`` bytes over all its processes (:func:`_resident`, sampled every POLL s)."""
    end = time.monotonic() + timeout
    while True:
        try:
            proc.wait(timeout=grade_job.POLL)
            return None
        except subprocess.TimeoutExpired:
            pass
        if time.monotonic() > end:
            return f"grading stopped after {timeout:g} s (an endless loop, or far too slow)"
        if _resident(proc.pid) > memory:
            return (f"grading stopped: the notebook's processes held more than {memory / 2**30:g} GiB of memory "
                    "(too large an allocation, or too many processes)")


def _resident(pid: int) -> int:
    """Memory held by ``pid`` and all its descendants (from /proc: the job's PID namespace is
    inside this one): the sum of their proportional set sizes, which counts a page shared by k
    processes (a forked kernel's torch) once in all, not k times."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            total += int(re.search(r"^Pss:\s+(\d+) kB", rollup, re.M).group(1)) * 1024
        except (OSError, AttributeError, ValueError):
            pass  # ended meanwhile
    return total


def _kill_group(proc: subprocess.Popen) -> None:
    """End the job: its process group (setpriv/bwrap), and with it the sandbox's namespaces."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


_CHECK_LINE = re.compile(r"AssertionError: (\[NOT YET\] [\w.]+: .*)$")


def feedback(output: str, passed: bool, problem: str) -> str:
    """What a student may read of otter's output for one problem: "passed", else our check's
    own line (``[NOT YET] <problem>: ...`` and its hint), else the name of the built-in exception
    the test raised. Never the output's other text: it comes from the submission (its prints,
    its exception messages) and could carry whatever the job could read."""
    if passed:
        return "passed"
    lines = [line.strip() for line in output.splitlines()]
    for i, line in enumerate(lines):
        found = _CHECK_LINE.search(line)
        if found and found.group(1).startswith(f"[NOT YET] {problem}:"):
            hint = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].startswith("Hint:") else ""
            return f"{found.group(1)} {hint}".strip()[:600]
    for line in reversed(lines):
        name = re.match(r"^(\w+)(:|$)", line)
        if name and name.group(1) in BUILTIN_ERRORS:
            why = EXPLAIN.get(name.group(1), "raised while the test ran")
            return f"{name.group(1)}: {why} (run the check in your notebook to see the message)"
    return "the test failed (run the check in your notebook to see why)"


_CHECK_DATA = re.compile(r"^\[CHECK\] (\{.*\})$")
_CATEGORY = re.compile(r"^[\w .,:'()\[\]{}^+\-/]{1,80}$")
UNRECOGNISED = "(a category the checks do not use)"


def outcome(output: str, passed: bool, problem: str) -> tuple[str, str | None, str | None]:
    """(status, mistake, error) of one problem for the instructor's report, from otter's output:
    "passed"; "mistake" with the check's ``Result.mistake`` (read from the ``[CHECK]`` line that
    :func:`reporting_bundle`'s tests add to their assertion message); "not attempted" (the check's
    "not attempted yet"); "error" with what raised (the answer, or the test: a name the test needs
    undefined); else "failed" (a check's verdict without a category, or a bundle without the line)."""
    if passed:
        return "passed", None, None
    lines = [line.strip() for line in output.splitlines()]
    for line in lines:
        found = _CHECK_DATA.match(line)
        if not found:
            continue
        try:
            data = json.loads(found.group(1))
        except ValueError:
            continue
        if not isinstance(data, dict) or data.get("exercise") != problem:
            continue
        start, mistake = str(data.get("message", "")), data.get("mistake")
        if mistake is not None:
            return "mistake", mistake if isinstance(mistake, str) and _CATEGORY.match(mistake) else UNRECOGNISED, None
        if start.startswith("not attempted"):
            return "not attempted", None, None
        raised = re.match(r"your function raised (\w+)", start)
        if raised:
            return "error", None, f"the answer raised {raised.group(1) if raised.group(1) in BUILTIN_ERRORS else 'an exception'}"
        return "failed", None, None
    if any(_CHECK_LINE.search(line) for line in lines):
        return "failed", None, None
    for line in reversed(lines):
        name = re.match(r"^(\w+)(:|$)", line)
        if name and name.group(1) in BUILTIN_ERRORS:
            return "error", None, f"the test raised {name.group(1)}"
    return "failed", None, None


# the last line of a bundle's tests: scripts/assignments.py's ASSERT (whose message already ends
# with the readable "[CHECK] <exercise>: <category>" that Gradescope shows), or, in a bundle
# built before that line, the check's line alone
_ASSERTS = (">>> assert _result.passed, _result.autograded()\n", ">>> assert _result.passed, _result.graded()\n")
# the assertion message of reporting_bundle's tests: the bundle's own, then the category as JSON
_REPORTED = (">>> assert _result.passed, _result.{}() + chr(10) + '[CHECK] ' + __import__('json').dumps("
             "{{'exercise': _result.exercise, 'mistake': _result.mistake, 'message': str(_result.message)[:40]}}, "
             "default=str)\n")


def reporting_bundle(bundle: Path, out: Path) -> Path:
    """A copy of ``bundle`` whose tests end their assertion message with the check's category
    (``[CHECK] {"exercise", "mistake", "message"}``: the start of the message only); the
    student's feedback (:func:`feedback`) keeps only the check's line and hint, as before."""
    with zipfile.ZipFile(bundle) as z:
        entries = [(info, z.read(info.filename)) for info in z.infolist()]
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for info, payload in entries:
            if info.filename.startswith("tests/") and info.filename.endswith(".py") \
                    and any(a[:-1].encode() in payload for a in _ASSERTS):
                scope: dict = {}
                exec(compile(payload.decode(), "<otter test>", "exec"), scope)  # noqa: S102 - our own bundle's test
                for suite in scope["test"]["suites"]:
                    for case in suite["cases"]:
                        for line in _ASSERTS:
                            method = line.split("_result.")[-1].split("(")[0]
                            case["code"] = case["code"].replace(line, _REPORTED.format(method))
                payload = (f"OK_FORMAT = {scope['OK_FORMAT']!r}\n\n"
                           f"test = {pprint.pformat(scope['test'], indent=4, width=120)}\n").encode()
            z.writestr(info, payload)
    return out


BUILTIN_ERRORS = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
EXPLAIN = {"NameError": "a name the test needs is not defined (did the cell that defines it run?)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("submissions", type=Path)
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "grades")
    ap.add_argument("--jobs", type=int, default=0, help="submissions graded at once (default: the number of cores)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per submission")
    ap.add_argument("--memory", type=float, default=grade_job.Limits().memory / 2**30,
                    help="GiB of memory per submission, all its processes together (default: 6)")
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
    why = grade_job.problem()
    if why:
        print(f"make grade: cannot sandbox the grading jobs on this machine, so nothing was graded.\n{why}",
              file=sys.stderr)
        return 2
    limits = grade_job.Limits(memory=int(args.memory * 2**30))
    cache = smollm2_cache()
    graded, unknown, flags, blank = {}, {}, {}, {}
    todo = []
    rosters, key = {}, None
    scratch = Path(tempfile.mkdtemp(prefix="variant-bundles-"))  # the reporting and the variants' bundles
    for path in subs:
        assignment = args.assignment or assignment_of(path)
        built = args.assignments / (assignment or "?") / "autograder" / "autograder.zip"
        if assignment is None or not built.exists():
            unknown[path.stem] = (assignment or "?", None)
            continue
        base = scratch / f"{assignment}.zip"
        if not base.exists():  # its tests also say the check's category of a mistake
            reporting_bundle(built, base)
        if assignment not in rosters:
            rosters[assignment] = roster_of(assignment, args.assignments, args.roster)
        roster = rosters[assignment]
        template = args.assignments / assignment / "student" / f"{assignment}.ipynb"
        blank[(path.stem, assignment)] = untouched(path, template) if template.exists() else set()
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
    slots: queue.Queue = queue.Queue()  # each running job has its own slot, hence its own uid
    for slot in range(jobs):
        slots.put(slot)

    def graded_in_a_slot(path, own):
        slot = slots.get()
        try:
            return grade_one(path, own, args.timeout, slot, limits, cache)
        finally:
            slots.put(slot)

    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=jobs) as pool, \
            tqdm(total=len(todo), unit="submission", desc=f"grading (JOBS={jobs})", file=sys.stderr) as bar:
        futures = {pool.submit(graded_in_a_slot, path, own): (path.stem, assignment) for path, assignment, own in todo}
        for future in as_completed(futures):
            results = future.result()
            for problem in blank[futures[future]] & set(results):
                if results[problem].status not in ("passed", "not attempted"):
                    results[problem] = results[problem]._replace(status="not attempted", mistake=None, error=None)
            graded[futures[future]] = results
            bar.update()
            bar.set_postfix_str(f"{bar.n / max(time.monotonic() - start, 1e-9) * 60:.1f}/min")
    elapsed = time.monotonic() - start
    shutil.rmtree(scratch)

    (args.out / "feedback").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(args.out / "results", ignore_errors=True)  # the report counts this run's submissions only
    (args.out / "results").mkdir()
    rows = []
    reason = ("not a notebook of a known assignment (unreadable, or its metadata names no assignment "
              "that `make assignments` built)")
    for student, (assignment, why) in sorted(unknown.items()):
        rows.append([student, assignment, "*", 0.0, 0.0, why or reason])
        (args.out / "feedback" / f"{student}.txt").write_text(f"{student}: {why or reason}\n")
        _write_json(args.out / "results" / f"{student}.json",
                    {"student": student, "assignment": assignment, "ungraded": "not on the roster" if why else
                     "not a notebook of a known assignment"})
        print(f"{student:20s} ? {why or reason}")
    for (student, assignment), results in sorted(graded.items()):
        total = sum(r.score for r in results.values())
        top = sum(r.max for r in results.values())
        lines = [f"{student}: {assignment}: {total:g} / {top:g}", ""]
        for problem, r in sorted(results.items()):
            rows.append([student, assignment, problem, r.score, r.max, r.feedback])
            lines.append(f"{problem}: {r.score:g} / {r.max:g}  {r.feedback}")
        flag = flags.get((student, assignment))
        if flag:
            rows.append([student, assignment, "variant", 0.0, 0.0, flag])
            lines.append(f"variant: {flag}")
        (args.out / "feedback" / f"{student}.txt").write_text("\n".join(lines) + "\n")
        _write_json(args.out / "results" / f"{student}.json", {
            "student": student, "assignment": assignment, "score": total, "max": top, "flagged": bool(flag),
            "problems": {problem: {"score": r.score, "max": r.max, "status": r.status, "mistake": r.mistake,
                                   "error": r.error} for problem, r in sorted(results.items())}})
        print(f"{student:20s} {assignment}: {total:g} / {top:g}{'  FLAGGED' if flag else ''}")
    with open(args.out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "problem", "score", "max", "feedback"])
        writer.writerows(rows)
    rate = len(todo) / elapsed * 60 if todo and elapsed > 0 else 0.0
    print(f"graded {len(todo)} submission(s) in {elapsed:.1f} s with JOBS={jobs}: {rate:.2f} submissions/minute"
          " (sandboxed)")
    print(f"wrote {args.out / 'grades.csv'} and {len(subs)} feedback file(s) in {args.out / 'feedback'}")
    html_path, csv_path = class_report.write_report(args.out)
    print(f"wrote the class report: {html_path} (open it in a browser) and {csv_path}")
    return 0


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
