"""The class report after grading (scripts/class_report.py, written by scripts/grade.py): a class
of six problem-set submissions with planted mistakes, graded the way `make grade` grades them
(sandboxed otter runs, two at a time), and the report's CSV and HTML checked against what was
planted: each count comes from the checks' own categories (``Result.mistake``) as the graded
tests recorded them, never from this file.

The notebooks are cut after problem 3, as in tests/grading/test_variants.py (problems 4-7 load
SmolLM2 and would take minutes each): their tests then fail on a name the cut notebook never
defines, which the report counts as errors ("the test raised NameError"), apart from mistakes.
Skipped, saying why, where bubblewrap cannot sandbox the jobs (as test_grading.py)."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import time
import zipfile

import nbformat
import pytest

from submissions import PROBLEMS, ROOT, answer_cells, assignments, cut_after_problem_3, solutions, with_answers

import class_report
import grade
import grade_job
from circuitbook.checks import ps

NO_SANDBOX = grade_job.problem()
NAME = assignments.assignment_name(PROBLEMS)
GRADED = ("ps_p1a", "ps_p1b", "ps_p2", "ps_p3", "ps_p3b")  # problems 1-3: what the cut notebooks reach
N = 6

# What each student got wrong, by problem: (the outcome, the check's category or the error).
# Everything not listed is the reference solution, which passes.
PLANTED = {
    "ada_all_right": {},
    # 3b measures the student's own problem-3 design broken: a design that fails problem 3 fails 3b too
    "ben_swapped": {"ps_p3": ("named mistake", "attends two positions early"),
                    "ps_p3b": ("named mistake", "design does not build")},
    "cal_left_two": {"ps_p1a": ("not attempted", None), "ps_p2": ("not attempted", None)},
    "dan_two_slips": {"ps_p2": ("named mistake", "forgot the direct path"),
                      "ps_p3b": ("named mistake", "the unbroken scaffold's score")},
    "eve_three": {"ps_p1a": ("named mistake", "head-space shapes"),
                  "ps_p1b": ("error", "the answer raised ValueError"),
                  "ps_p3": ("named mistake", "attends two positions early"),
                  "ps_p3b": ("named mistake", "design does not build")},
    "fay_value": {"ps_p2": ("named mistake", "forgot the direct path"), "ps_p3b": ("named mistake", "wrong values")},
}


def _answers(right: dict[str, str]) -> dict[str, dict[str, str]]:
    """Each student's answer cells that differ from the reference (``None``: as handed out)."""
    swapped = right["ps_p3"].replace("30 * S_tok.T @ S_prev", "30 * S_prev.T @ S_tok")
    no_direct = right["ps_p2"].replace('"direct": 1', '"direct": 0').replace('"total": total', '"total": total - 1')
    head_space = right["ps_p1a"].replace('"W_QK_shape": (d_model, d_model)', '"W_QK_shape": (d_head, d_head)') \
        .replace('"W_OV_shape": (d_model, d_model)', '"W_OV_shape": (d_head, d_head)')
    raises = right["ps_p1b"].replace("return W_Q @ G", 'raise ValueError("not today")\n    return W_Q @ G')
    unbroken = right["ps_p3b"].replace('prev_into="S_tok", ', "")
    literal = f"broken_score = {ps.p3b_reference(ps.P3_CTX)!r}\n\nchecks.ps_p3b(broken_score, n_ctx=P3_CTX)"
    for new, old in ((swapped, right["ps_p3"]), (no_direct, right["ps_p2"]), (head_space, right["ps_p1a"]),
                     (raises, right["ps_p1b"]), (unbroken, right["ps_p3b"])):
        assert new != old, "a planted mistake no longer applies to the reference solution"
    return {
        "ada_all_right": {},
        # the swapped design, and the broken scaffold's score copied in as a number (so that the
        # swap costs problem 3 only, not 3b, which the page computes from the design)
        "ben_swapped": {"ps_p3": swapped, "ps_p3b": literal},
        "cal_left_two": {"ps_p1a": None, "ps_p2": None},
        "dan_two_slips": {"ps_p2": no_direct, "ps_p3b": unbroken},
        "eve_three": {"ps_p1a": head_space, "ps_p1b": raises, "ps_p3": swapped, "ps_p3b": literal},
        "fay_value": {"ps_p2": no_direct, "ps_p3b": "broken_score = 0.123\n\nchecks.ps_p3b(broken_score, n_ctx=P3_CTX)"},
    }


@pytest.fixture(scope="module")
def report(built, tmp_path_factory):
    if NO_SANDBOX is not None:
        pytest.skip(f"make grade cannot sandbox here: {NO_SANDBOX}")
    folder = built[PROBLEMS]
    template = nbformat.read(folder / "student" / f"{NAME}.ipynb", as_version=4)
    questions = [c.metadata["otter"]["tests"][0] for c in answer_cells(template)]
    right = dict(zip(questions, solutions(PROBLEMS)))
    handed_out = {q: c.source for q, c in zip(questions, answer_cells(template))}
    subs = tmp_path_factory.mktemp("class")
    for student, changed in _answers(right).items():
        answers = {**right, **{q: handed_out[q] if code is None else code for q, code in changed.items()}}
        nb = with_answers(nbformat.read(folder / "student" / f"{NAME}.ipynb", as_version=4), answers)
        cut_after_problem_3(nb)
        nbformat.write(nb, subs / f"{student}.ipynb")
    out = tmp_path_factory.mktemp("grades")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "grade.py"), str(subs), "--out", str(out),
                           "--jobs", "2", "--timeout", "600"], capture_output=True, text=True, timeout=1800)
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(f"graded {N} cut problem-set notebooks in {elapsed:.0f} s (JOBS=2)")
    with open(out / "report.csv") as f:
        rows = list(csv.DictReader(f))
    return rows, (out / "report.html").read_text(), out


def _count(rows, section, problem, category) -> int:
    found = [r for r in rows if (r["assignment"], r["section"], r["problem"], r["category"]) ==
             (NAME, section, problem, category)]
    assert len(found) <= 1, found
    return int(found[0]["students"]) if found else 0


def _expected() -> dict[tuple[str, str, str], int]:
    """{(section, problem, category): students} from PLANTED, for the problems the notebooks reach."""
    out: dict[tuple[str, str, str], int] = {}
    for problem in GRADED:
        wrong = [PLANTED[s][problem] for s in PLANTED if problem in PLANTED[s]]
        out["outcome", problem, "passed"] = N - len(wrong)
        for outcome in ("named mistake", "not attempted", "error", "failed (no category)"):
            out["outcome", problem, outcome] = sum(o == outcome for o, _ in wrong)
        for outcome, name in wrong:
            section = {"named mistake": "mistake", "error": "error"}.get(outcome)
            if section:
                out[section, problem, name] = out.get((section, problem, name), 0) + 1
    return out


def test_the_report_counts_exactly_the_planted_mistakes(report):
    rows, _, _ = report
    expected = _expected()
    got = {(r["section"], r["problem"], r["category"]): int(r["students"]) for r in rows
           if r["problem"] in GRADED and r["section"] in ("outcome", "mistake", "error")}
    # every outcome row of a reached problem, and no mistake or error that was not planted
    assert {k: v for k, v in got.items() if v or k[0] != "outcome"} == {k: v for k, v in expected.items() if v}, rows
    assert all(r["of"] == str(N) for r in rows if r["section"] != "ungraded")
    assert all(r["assignment"] == NAME for r in rows)


def test_pass_rates(report):
    rows, _, _ = report
    for problem in GRADED:
        passed = N - sum(problem in PLANTED[s] for s in PLANTED)
        (row,) = [r for r in rows if r["section"] == "outcome" and r["problem"] == problem and r["category"] == "passed"]
        assert int(row["students"]) == passed and row["share"] == f"{passed / N:.3f}", row


def test_problems_the_cut_notebooks_never_reach_are_errors_not_mistakes(report):
    rows, _, _ = report
    beyond = sorted(set(grade.problems_of(NAME, ROOT / "_build" / "assignments")) - set(GRADED))
    assert beyond
    for problem in beyond:
        assert _count(rows, "outcome", problem, "error") == N
        assert _count(rows, "error", problem, "the test raised NameError") == N
        assert not [r for r in rows if r["problem"] == problem and r["section"] == "mistake"]


def test_the_score_distribution_matches_the_class(report):
    rows, _, out = report
    # one point per problem, all or nothing: each student's total is the reached problems they passed
    totals = [len(GRADED) - len(PLANTED[s]) for s in PLANTED]
    top = len(grade.problems_of(NAME, ROOT / "_build" / "assignments"))
    hist = {float(r["category"]): int(r["students"]) for r in rows if r["section"] == "score"}
    assert hist == {float(s): totals.count(s) for s in range(top + 1)}
    # the same totals as grades.csv, student by student
    with open(out / "grades.csv") as f:
        graded = [r for r in csv.DictReader(f) if r["problem"] not in ("*", "variant")]
    per_student = {}
    for r in graded:
        per_student[r["student"]] = per_student.get(r["student"], 0.0) + float(r["score"])
    assert sorted(per_student.values()) == sorted(map(float, totals))


def test_the_html_shows_the_same_numbers_accessibly(report):
    rows, page, _ = report
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") \
        and "https://" not in page  # offline: nothing to fetch
    # the histogram: one bar per total score, with the counts, and a text alternative
    bars = re.findall(r'<rect class="bar"[^>]*data-score="([\d.]+)" data-students="(\d+)"', page)
    hist = {r["category"]: r["students"] for r in rows if r["section"] == "score"}
    assert dict(bars) == hist
    assert re.search(r'<svg[^>]*role="img"[^>]*aria-labelledby="hist0-title hist0-desc"', page)
    desc = re.search(r'<desc id="hist0-desc">(.*?)</desc>', page).group(1)
    for score, count in hist.items():
        assert f"{count} student{'s' if count != '1' else ''} scored {score}" in desc
    # tables with captions and header cells
    assert page.count("<caption>") >= 4 and '<th scope="col">' in page and '<th scope="row">' in page
    # each planted mistake and its count, in one row of the mistakes table
    for (section, problem, name), count in _expected().items():
        if section in ("mistake", "error"):
            cell = class_report.html.escape(name)
            assert re.search(rf'<tr><th scope="row">{problem}</th><td>{re.escape(cell)}</td><td>{count}</td>', page), \
                (problem, name)
    for problem in GRADED:
        passed = N - sum(problem in PLANTED[s] for s in PLANTED)
        assert re.search(rf'<tr><th scope="row">{problem}</th><td>{passed}</td>.*<td>{100 * passed / N:.0f}%</td></tr>',
                         page), problem


def test_a_forged_or_foreign_category_line_is_not_taken_at_its_word():
    # the [CHECK] line comes from the submission's kernel: only its own problem's, and only a plain category
    line = '[CHECK] {"exercise": "ps_p2", "mistake": "<img src=x onerror=alert(1)>", "message": "this looks like"}'
    assert grade.outcome(line, False, "ps_p2") == ("mistake", grade.UNRECOGNISED, None)
    assert grade.outcome(line, False, "ps_p3")[0] == "failed"
    assert grade.outcome(line, True, "ps_p2") == ("passed", None, None)


@pytest.mark.parametrize("method", ["autograded", "graded"])
def test_the_category_reaches_the_report_from_the_bundles_tests(tmp_path, method):
    # make assignments' tests end with ASSERT (their message: the check's line, then the readable
    # "[CHECK] <exercise>: <category>" Gradescope shows); a bundle built before ended with graded().
    # reporting_bundle adds the JSON line to either, and outcome() reads the category from it
    from circuitbook.checks import Result

    assert assignments.ASSERT == "assert _result.passed, _result.autograded()"
    code = f">>> _result = RESULT\n>>> assert _result.passed, _result.{method}()\n"
    test = {"name": "ps_p2", "points": 1, "suites": [{"cases": [{"code": code, "hidden": False, "locked": False}],
                                                      "scored": True, "setup": "", "teardown": "", "type": "doctest"}]}
    original = tmp_path / "autograder.zip"
    with zipfile.ZipFile(original, "w") as z:
        z.writestr("tests/ps_p2.py", f"OK_FORMAT = True\n\ntest = {test!r}\n")
    reporting = grade.reporting_bundle(original, tmp_path / "reporting.zip")
    scope: dict = {}
    with zipfile.ZipFile(reporting) as z:
        exec(z.read("tests/ps_p2.py").decode(), scope)  # noqa: S102 - the test's own bundle
    (case,) = scope["test"]["suites"][0]["cases"]
    assert "[CHECK] " in case["code"] and f"_result.{method}()" in case["code"]
    wrong = Result("ps_p2", False, "this looks like: forgot the direct path. The path through no head counts too.",
                   "forgot the direct path", "Count every path.")
    lines = [line[4:] for line in case["code"].splitlines()]
    env = {"RESULT": wrong}
    exec("\n".join(lines[:-1]), env)  # noqa: S102
    try:
        exec(lines[-1], env)  # noqa: S102
    except AssertionError as exc:
        output = f"Traceback (most recent call last):\nAssertionError: {exc}"
    else:
        raise AssertionError("a failing check's test passed")
    assert grade.outcome(output, False, "ps_p2") == ("mistake", "forgot the direct path", None)
    assert grade.feedback(output, False, "ps_p2") == (
        "[NOT YET] ps_p2: this looks like: forgot the direct path. The path through no head counts too. "
        "Hint: Count every path.")
    assert ("[CHECK] ps_p2: forgot the direct path" in output) == (method == "autograded")
