"""The mutation table: for every exercise, plausible wrong answers and the mistake each
must be diagnosed as. One module per chapter (``chNN.py``) defines ``MUTATIONS``, a dict
from exercise id to rows ``(wrong answer, expected mistake name or None)``; None means
"must fail", without requiring a named diagnosis. At least five rows per exercise.
"""

from __future__ import annotations

import importlib
import pkgutil

MUTATIONS: dict[str, list[tuple[object, str | None]]] = {}
for _info in pkgutil.iter_modules(__path__):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _key, _rows in _module.MUTATIONS.items():
        if _key in MUTATIONS:
            raise ValueError(f"exercise {_key} has mutation rows in two modules")
        MUTATIONS[_key] = _rows
