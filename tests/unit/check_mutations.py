"""The mutation table: for every exercise, plausible wrong answers and the mistake each
must be diagnosed as. Each entry is ``(wrong answer, expected mistake name or None)``; None
means "must fail", without requiring a named diagnosis.

Chapters add their exercises' rows here. At least five rows per exercise.
"""

from __future__ import annotations

MUTATIONS: dict[str, list[tuple[object, str | None]]] = {}
