"""A check shows its feedback wherever it runs in a notebook cell, exactly once (issue 39).

Before: a check's result showed only as a cell's last expression, so ``r = checks.ch08_ex1(f)``,
a check followed by another line, or the first of two checks in a cell showed nothing. Now a
check called in a kernel displays its result at once (``Result.show``) and the displayhook adds
nothing when the same result is also the cell's last expression; outside a kernel (pytest,
otter's grading, scripts) the call displays nothing and prints nothing.

Reference: a real kernel (nbclient executes a small notebook) and the output list of each cell,
counted by hand: one check result per check call, the verdict of each from the exercise's own
reference solution (passes) and its declared transposed-matrix mistake (fails, by name).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from circuitbook import checks
from circuitbook.checks.ch08 import SIDES, SIDES_MESSAGE, extended_qk

ROOT = Path(__file__).resolve().parents[2]
VERDICT = re.compile(r"^\[(PASSED|NOT YET)\] (\S+?):", re.M)

CELLS = {
    "setup": "from circuitbook import checks\n"
             "from circuitbook.checks.ch08 import extended_qk\n"
             "def wrong(W_Q, b_Q, W_K, b_K):\n"
             "    return extended_qk(W_Q, b_Q, W_K, b_K).T\n"
             "from circuitbook.widgets.progress import ProblemSet",
    "assigned": "r = checks.ch08_ex1(extended_qk)",
    "followed": "checks.ch08_ex1(wrong)\nx = 1",
    "last": "checks.ch08_ex1(extended_qk)",
    "silenced": "checks.ch08_ex1(extended_qk);",
    "two": "checks.ch08_ex1(wrong)\nchecks.ch08_ex1(extended_qk)",
    "loop": "for f in (wrong, extended_qk):\n    checks.ch08_ex1(f)",
    "value": "checks.ch01_ex2(2)\nn = checks.ch01_ex2(None)",
    "again": "r",  # a result shown in an earlier cell shows again when asked for
    "usable": "print(bool(r), r.passed, r.exercise, r.mistake)",
    "grader": "checks.get('ch08_ex1').check(wrong)",  # the grader's call: no display of its own
    "tracker": "ProblemSet({'1': ['ch08_ex1', 'ch01_ex2']}).tracker('1')",
}
EXPECTED = {
    "setup": [],
    "assigned": [("PASSED", "ch08_ex1")],
    "followed": [("NOT YET", "ch08_ex1")],
    "last": [("PASSED", "ch08_ex1")],
    "silenced": [("PASSED", "ch08_ex1")],
    "two": [("NOT YET", "ch08_ex1"), ("PASSED", "ch08_ex1")],
    "loop": [("NOT YET", "ch08_ex1"), ("PASSED", "ch08_ex1")],
    "value": [("NOT YET", "ch01_ex2"), ("NOT YET", "ch01_ex2")],
    "again": [("PASSED", "ch08_ex1")],
    "usable": [],
    "grader": [("NOT YET", "ch08_ex1")],
    "tracker": [],
}


def _text(output) -> str:
    text = output.get("data", {}).get("text/plain", "") if "data" in output else output.get("text", "")
    return text if isinstance(text, str) else "".join(text)


def test_a_check_shows_once_wherever_it_stands_in_a_cell():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS.values()])
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=False,
                   resources={"metadata": {"path": str(ROOT)}}).execute()
    cells = dict(zip(CELLS, nb.cells))
    for name, cell in cells.items():
        shown = [o for o in cell.outputs if o.output_type in ("display_data", "execute_result")]
        verdicts = [v for o in shown for v in VERDICT.findall(_text(o))]
        # one output per check call, each exactly one verdict line, never a second copy
        assert verdicts == EXPECTED[name], (name, [_text(o) for o in cell.outputs])
        if name != "tracker":
            assert len(shown) == len(EXPECTED[name]), (name, cell.outputs)
        for o in shown:
            if VERDICT.search(_text(o)):
                assert 'class="circuitbook-check"' in o.data["text/html"], (name, o)
    # the recognised mistake is explained, not named: its name is the instructor's category
    followed = _text(cells["followed"].outputs[0])
    assert SIDES_MESSAGE[:60] in followed and SIDES not in followed, followed
    assert _text(cells["usable"].outputs[0]).strip() == "True True ch08_ex1 None"
    # the tracker (issue 39's second item): its text form, beside the widget, in a real kernel
    (tracker,) = cells["tracker"].outputs
    assert "application/vnd.jupyter.widget-view+json" in tracker.data
    assert _text(tracker).startswith("Problem 1: not done yet (ch01_ex2 open). Progress in this session: 0 of 1 done")


def test_outside_a_kernel_a_check_prints_nothing_and_returns_its_result():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = checks.ch08_ex1(extended_qk)
        graded = checks.get("ch08_ex1").check(lambda W_Q, b_Q, W_K, b_K: extended_qk(W_Q, b_Q, W_K, b_K).T)
    assert out.getvalue() == err.getvalue() == ""
    assert result.passed and str(result).startswith("[PASSED] ch08_ex1:")
    assert not graded and graded.mistake == SIDES
