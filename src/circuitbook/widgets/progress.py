"""Problem-set progress: a "mark done" button per problem and an "n of N done" counter.

The state persists in the notebook (the widget's saved state), in a small JSON file next to
the notebook when a kernel is running (so re-running the notebook restores it), and in the
browser's localStorage on the static site and on Colab.
"""

from __future__ import annotations

import json
from pathlib import Path

import anywidget
import traitlets

HERE = Path(__file__).parent


class ProgressTracker(anywidget.AnyWidget):
    _esm = HERE / "progress.js"
    _css = HERE / "explainers.css"
    set_id = traitlets.Unicode().tag(sync=True)
    problem = traitlets.Unicode().tag(sync=True)
    problems = traitlets.List(traitlets.Unicode()).tag(sync=True)
    done = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(self, *, store: Path | None = None, **kwargs):
        super().__init__(**kwargs)
        self._store = store
        self.observe(self._save, names="done")

    def _save(self, change) -> None:
        if self._store is not None:
            data = _read(self._store)
            data[self.set_id] = sorted(set(change["new"]))
            self._store.write_text(json.dumps(data, indent=1))


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


class ProblemSet:
    """The trackers of one problem set: ``ps = ProblemSet("induction", ["1", ..., "6"])``,
    then ``ps.tracker("3")`` under problem 3. All trackers share one ``done`` list."""

    def __init__(self, set_id: str, problems: list[str], store: str | Path | None = ".circuitbook-progress.json"):
        self.set_id, self.problems = set_id, [str(p) for p in problems]
        self.store = Path(store) if store is not None else None
        saved = _read(self.store).get(set_id, []) if self.store is not None else []
        self.done = [p for p in saved if p in self.problems]
        self._trackers: list[ProgressTracker] = []

    def tracker(self, problem: str) -> ProgressTracker:
        problem = str(problem)
        if problem not in self.problems:
            raise ValueError(f"problem {problem!r} is not in this set: {self.problems}")
        t = ProgressTracker(set_id=self.set_id, problem=problem, problems=self.problems, done=list(self.done),
                            store=self.store)
        t.observe(self._sync, names="done")
        self._trackers.append(t)
        return t

    def _sync(self, change) -> None:
        self.done = list(change["new"])
        for t in self._trackers:
            if t.done != self.done:
                t.done = list(self.done)

    @property
    def count(self) -> int:
        return len(set(self.done) & set(self.problems))
