"""The problem set's progress widget counts checks that passed in this kernel, live.

Reference: the problem set's own table of checks (``checks.ps.PROBLEMS``) read by hand, and
``checks.ps.progress()``, which reads the session without the widget.
"""

import gc

from circuitbook import checks
from circuitbook.checks import ps
from circuitbook.checks.core import Session
from circuitbook.widgets.progress import ProblemSet


def _run(session, ex_id, answer):
    """Run a check as a notebook cell does, recording into ``session``."""
    return session.record(checks.get(ex_id).check(answer))


def test_trackers_count_passed_checks_and_update_after_each_check():
    session = Session()
    problems = ProblemSet(ps.PROBLEMS, session=session)
    trackers = [problems.tracker(p) for p in ps.PROBLEMS]
    assert all(t.done == [] for t in trackers)
    assert trackers[0].still_open == {"1": ["ps_p1a", "ps_p1b"], "2": ["ps_p2"], "3": ["ps_p3", "ps_p3b"],
                                "4": ["ps_p4"], "5": ["ps_p5b", "ps_p5"], "6": ["ps_p6", "ps_p6c", "ps_p6b"],
                                "7": ["ps_p7", "ps_p7b"]}
    _run(session, "ps_p1a", ps.p1_reference())
    # half of problem 1: not done, and its other check is the one still open, in every tracker
    assert all(t.done == [] and t.still_open["1"] == ["ps_p1b"] for t in trackers)
    _run(session, "ps_p1b", ps.reparametrize)
    _run(session, "ps_p2", ps.path_counts)
    assert all(t.done == ["1", "2"] and "1" not in t.still_open and "2" not in t.still_open for t in trackers)
    assert problems.count == 2 and problems.done == ps.progress(session).done == ["1", "2"]
    # a later failing check re-opens its problem
    _run(session, "ps_p2", lambda n_layers, n_heads: None)
    assert all(t.done == ["1"] and t.still_open["2"] == ["ps_p2"] for t in trackers)
    assert problems.open == ps.progress(session).open


def test_a_new_problem_set_starts_from_the_checks_already_passed():
    session = Session()
    _run(session, "ps_p2", ps.path_counts)
    assert ProblemSet(ps.PROBLEMS, session=session).tracker("3").done == ["2"]


def test_the_widget_goes_live_only_when_a_kernel_answers_its_greeting():
    sent = []
    t = ProblemSet(ps.PROBLEMS, session=Session()).tracker("4")
    t.send = sent.append
    t._on_msg(t, {"type": "something else"}, [])
    assert sent == []
    t._on_msg(t, {"type": "hello"}, [])
    assert sent == [{"type": "live"}]


def test_unknown_problems_are_refused_and_listeners_are_held_weakly():
    session = Session()
    problems = ProblemSet(ps.PROBLEMS, session=session)
    try:
        problems.tracker("8")
    except ValueError as e:
        assert "not in this set" in str(e)
    else:
        raise AssertionError("problem 8 was accepted")
    del problems
    gc.collect()
    _run(session, "ps_p2", ps.path_counts)  # the dropped set's listener is gone, no error
    assert session._listeners == []
