"""A graded multiple-choice quiz widget (the induction module's "Check yourself")."""

from __future__ import annotations

from pathlib import Path

import anywidget
import traitlets

HERE = Path(__file__).parent


class Quiz(anywidget.AnyWidget):
    """``Quiz(questions=[{"question", "options", "correct", "explanation"}, ...])``.

    Every question must be answered before the quiz can be submitted; after submission each
    question shows whether the answer was right and why. ``score`` is available in Python.
    """

    _esm = HERE / "quiz.js"
    _css = HERE / "explainers.css"
    questions = traitlets.List(traitlets.Dict()).tag(sync=True)
    answers = traitlets.List().tag(sync=True)
    submitted = traitlets.Bool(False).tag(sync=True)

    def __init__(self, questions: list[dict], **kwargs):
        for i, q in enumerate(questions):
            missing = {"question", "options", "correct", "explanation"} - set(q)
            if missing:
                raise ValueError(f"question {i + 1} is missing {sorted(missing)}")
            if not 0 <= q["correct"] < len(q["options"]):
                raise ValueError(f"question {i + 1}: correct={q['correct']} is not an option index")
        super().__init__(questions=questions, answers=[None] * len(questions), **kwargs)

    @property
    def score(self) -> int | None:
        if not self.submitted:
            return None
        return sum(a == q["correct"] for a, q in zip(self.answers, self.questions))
