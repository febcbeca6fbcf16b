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
                                "4": ["ps_p4", "ps_p4b"], "5": ["ps_p5b", "ps_p5", "ps_p5c"],
                                "6": ["ps_p6", "ps_p6c", "ps_p6b"], "7": ["ps_p7c", "ps_p7", "ps_p7b"]}
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


def test_a_tracker_reads_as_text_where_no_widget_is_drawn():
    """Issue 39: outside a live widget front end (a terminal, nbconvert, a grader's log) the
    tracker was ``<ProgressTracker object at 0x...>``. Its text form (``str``, ``repr`` and the
    text/plain of its display, whole: ipywidgets cuts that at 110 characters) says its problem's
    state, how many problems are done and which, and every check still open, by problem."""
    session = Session()
    table = {"1": ["ps_p1a", "ps_p1b"], "2": ["ps_p2"], "3": ["ps_p3", "ps_p3b"]}
    problems = ProblemSet(table, session=session)  # held: the session listens to it weakly
    one, three = problems.tracker("1"), problems.tracker("3")
    assert str(one) == repr(one) == ("Problem 1: not done yet (ps_p1a, ps_p1b open). Progress in this session: 0 of 3 "
                                     "done; still open: problem 1 (ps_p1a, ps_p1b); problem 2 (ps_p2); problem 3 "
                                     "(ps_p3, ps_p3b)")
    _run(session, "ps_p1a", ps.p1_reference())
    _run(session, "ps_p2", ps.path_counts)
    assert str(one) == ("Problem 1: not done yet (ps_p1b open). Progress in this session: 1 of 3 done (problem 2); "
                        "still open: problem 1 (ps_p1b); problem 3 (ps_p3, ps_p3b)")
    _run(session, "ps_p1b", ps.reparametrize)
    assert str(one).startswith("Problem 1: checks passed. Progress in this session: 2 of 3 done (problems 1, 2); "
                               "still open: problem 3 (ps_p3, ps_p3b)")
    assert str(three).startswith("Problem 3: not done yet (ps_p3, ps_p3b open).")
    data = one._repr_mimebundle_()
    data = data[0] if isinstance(data, tuple) else data
    assert data["text/plain"] == str(one) and len(str(one)) > 110
    assert "application/vnd.jupyter.widget-view+json" in data  # the live widget is still there
    assert "object at 0x" not in str(one)
