"""Problem-set progress that counts passed checks: "n of N done" and the checks still open.

A problem counts as done when every one of its checks has passed in this notebook's kernel
(``circuitbook.checks.core.Session``, which every check call records into), or, in a course's
student notebook, recorded an answer that only the autograder grades; a check that
fails later re-opens its problem. Nothing is self-reported and nothing is stored: re-running
the notebook re-runs the checks. The trackers update live, after each check, because the
problem set listens to the session.

On the static site there is no kernel, and the checks the page ran at build time (with the
solutions in place) are not the reader's: the widget then says that progress is tracked when
the notebook runs, rather than showing a count. It tells the two apart by greeting the kernel
(``{"type": "hello"}``) and waiting for the answer (``{"type": "live"}``), as the chapters'
``explore`` widget does.

Used by the induction module's problem set (book/induction/03_problems).
"""

from __future__ import annotations

import anywidget
import traitlets

from circuitbook.checks.core import SESSION, Session
from circuitbook.widgets import frontend


class ProgressTracker(anywidget.AnyWidget):
    """One problem's line: its own checks (passed or open), the set's "n of N done", and the
    problems still open. ``done``: problems whose checks all passed; ``still_open``: problem ->
    the ids of its checks that have not passed."""

    _esm = frontend.esm("progress.js")
    _css = frontend.css("progress.css")
    problem = traitlets.Unicode().tag(sync=True)
    problems = traitlets.List(traitlets.Unicode()).tag(sync=True)
    done = traitlets.List(traitlets.Unicode()).tag(sync=True)
    still_open = traitlets.Dict().tag(sync=True)
    # this problem's checks whose answers are recorded for the autograder, with no verdict here
    recorded = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.on_msg(self._on_msg)

    def _on_msg(self, _widget, content, _buffers):
        if isinstance(content, dict) and content.get("type") == "hello":
            self.send({"type": "live"})  # a kernel is here: the counts are this notebook's

    def __str__(self) -> str:
        """The line as text, for where no widget is drawn (a terminal, nbconvert, a grader's log,
        a screen reader): this problem's state, "n of N done" with the problems done, and the
        checks still open, as this session (the notebook's kernel) knew them when the text was made."""
        mine = self.still_open.get(self.problem, [])
        head = (f"Problem {self.problem}: not done yet ({', '.join(mine)} open)" if mine
                else f"Problem {self.problem}: checks passed")
        if not mine and self.recorded:
            head = (f"Problem {self.problem}: done here ({', '.join(self.recorded)}: answer recorded, "
                    "graded by the autograder)")
        done = [p for p in self.problems if p not in self.still_open]
        text = f"{head}. Progress in this session: {len(done)} of {len(self.problems)} done"
        text += f" (problem{'s' if len(done) > 1 else ''} {', '.join(done)})" if done else ""
        rest = [p for p in self.problems if p in self.still_open]
        if rest:
            text += "; still open: " + "; ".join(f"problem {p} ({', '.join(self.still_open[p])})" for p in rest)
        return text

    __repr__ = __str__

    def _repr_mimebundle_(self, **kwargs):
        # ipywidgets cuts text/plain at 110 characters; the text form is whole
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        data["text/plain"] = str(self)
        return bundle


class ProblemSet:
    """The trackers of one problem set: ``ps = ProblemSet({"1": ["ps_p1a", "ps_p1b"], ...})``,
    then ``ps.tracker("1")`` under problem 1. ``checks`` maps each problem to the ids of the
    checks that must pass; all trackers update whenever ``session`` records a check."""

    def __init__(self, checks: dict[str, list[str]], session: Session = SESSION):
        self.checks = {str(p): list(ids) for p, ids in checks.items()}
        self.problems = list(self.checks)
        self.session = session
        self._trackers: list[ProgressTracker] = []
        session.subscribe(self._on_check)

    @property
    def done(self) -> list[str]:
        """Problems whose checks have all passed (or, in a course, recorded an answer that only the
        autograder grades: ``ValueExercise.record``), in order."""
        still_open = self.open
        return [p for p in self.problems if p not in still_open]

    @property
    def open(self) -> dict[str, list[str]]:
        """Each problem not done -> its checks that have not passed."""
        return self.session.still_open(self.checks)

    @property
    def count(self) -> int:
        return len(self.done)

    def tracker(self, problem: str) -> ProgressTracker:
        problem = str(problem)
        if problem not in self.checks:
            raise ValueError(f"problem {problem!r} is not in this set: {self.problems}")
        t = ProgressTracker(problem=problem, problems=self.problems, done=self.done, still_open=self.open,
                            recorded=self._recorded(problem))
        self._trackers.append(t)
        return t

    def _on_check(self, result) -> None:
        if not any(result.exercise in ids for ids in self.checks.values()):
            return
        done, still = self.done, self.open
        for t in self._trackers:
            with t.hold_sync():
                t.done, t.still_open, t.recorded = done, still, self._recorded(t.problem)

    def _recorded(self, problem: str) -> list[str]:
        return [i for i in self.checks[problem] if self.session.recorded(i)]
