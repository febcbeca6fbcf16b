"""Grade a folder of submitted notebooks with the autograder bundles from scripts/assignments.py.

Each submission is graded by ``otter run`` in its own process, in a scratch folder holding only
a copy of the submission, under a time limit. Whatever a submission does (loop forever, kill its
kernel, delete or reorder cells, import the reference solutions, read files it should not), the
run ends, the affected problems score zero with the reason written down, and the next submission
is graded.

Writes, into the output folder (default ``_build/grades``):
  grades.csv              student, assignment, problem, score, max, feedback
  feedback/<student>.txt  one readable report per student

The assignment of a submission is read from its notebook metadata (``circuitbook.assignment``,
set in the student version), or given with ``--assignment``. The student is the file's stem.

Usage: python scripts/grade.py SUBMISSIONS [--out DIR] [--timeout 300] [--assignment NAME]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ROOT / "_build" / "assignments"


def problems_of(assignment: str) -> list[str]:
    """The problem names of an assignment, from its autograder's tests."""
    import zipfile

    with zipfile.ZipFile(ASSIGNMENTS / assignment / "autograder" / "autograder.zip") as z:
        return sorted(Path(n).stem for n in z.namelist() if n.startswith("tests/") and n.endswith(".py"))


def assignment_of(path: Path) -> str | None:
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - a broken file is reported, not fatal
        return None
    return nb.metadata.get("circuitbook", {}).get("assignment")


def grade_one(path: Path, assignment: str, timeout: int) -> dict[str, tuple[float, float, str]]:
    """{problem: (score, max, feedback)} for one submission; never raises."""
    problems = problems_of(assignment)
    zero = lambda reason: {p: (0.0, 1.0, reason) for p in problems}  # noqa: E731
    otter = Path(sys.executable).parent / "otter"
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        work = Path(tmp)
        sub = work / "submission.ipynb"
        shutil.copy(path, sub)
        try:
            proc = subprocess.run(
                [str(otter), "run", "-a", str(ASSIGNMENTS / assignment / "autograder" / "autograder.zip"),
                 "-o", str(work), str(sub)],
                cwd=work, capture_output=True, text=True, timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            return zero(f"grading stopped after {timeout} s (an endless loop, or far too slow)")
        results = work / "results.json"
        if not results.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return zero("the notebook could not be run to the end: " + " | ".join(tail)[-400:])
        data = json.loads(results.read_text())
    out = {}
    for test in data.get("tests", []):
        name = test.get("name")
        if name not in problems:
            continue
        score, top = float(test.get("score") or 0.0), float(test.get("max_score") or 1.0)
        out[name] = (score, top, _feedback(test.get("output", ""), score >= top))
    for p in problems:
        out.setdefault(p, (0.0, 1.0, "no result for this problem (the notebook did not reach it)"))
    return out


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
    ap.add_argument("--timeout", type=int, default=300, help="seconds per submission")
    ap.add_argument("--assignment", help="grade every submission against this assignment")
    args = ap.parse_args(argv)

    subs = sorted(args.submissions.glob("*.ipynb"))
    if not subs:
        print(f"no .ipynb files in {args.submissions}", file=sys.stderr)
        return 1
    (args.out / "feedback").mkdir(parents=True, exist_ok=True)
    rows = []
    for path in subs:
        student = path.stem
        assignment = args.assignment or assignment_of(path)
        if assignment is None or not (ASSIGNMENTS / assignment / "autograder" / "autograder.zip").exists():
            reason = ("not a notebook of a known assignment (unreadable, or its metadata names no assignment "
                      "that `make assignments` built)")
            rows.append([student, assignment or "?", "*", 0.0, 0.0, reason])
            (args.out / "feedback" / f"{student}.txt").write_text(f"{student}: {reason}\n")
            print(f"{student:20s} ? {reason}")
            continue
        results = grade_one(path, assignment, args.timeout)
        total = sum(s for s, _, _ in results.values())
        top = sum(m for _, m, _ in results.values())
        lines = [f"{student}: {assignment}: {total:g} / {top:g}", ""]
        for problem, (score, mx, feedback) in sorted(results.items()):
            rows.append([student, assignment, problem, score, mx, feedback])
            lines.append(f"{problem}: {score:g} / {mx:g}  {feedback}")
        (args.out / "feedback" / f"{student}.txt").write_text("\n".join(lines) + "\n")
        print(f"{student:20s} {assignment}: {total:g} / {top:g}")
    with open(args.out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "assignment", "problem", "score", "max", "feedback"])
        writer.writerows(rows)
    print(f"wrote {args.out / 'grades.csv'} and {len(subs)} feedback file(s) in {args.out / 'feedback'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
