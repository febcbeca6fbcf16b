"""Exercise checks with specific feedback, one module per chapter (``checks/ch06.py``, ...).

In a notebook::

    from circuitbook import checks
    checks.ch06_ex1(my_attention)     # -> one line: passed, or which mistake it looks like

Each exercise id ``chNN_exK`` lives in ``circuitbook/checks/chNN.py`` as an object in that
module's ``EXERCISES`` dict; modules are imported on first use.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from circuitbook.checks.core import SESSION, FunctionExercise, Mistake, PairExercise, Result, ValueExercise

__all__ = ["FunctionExercise", "PairExercise", "ValueExercise", "Mistake", "Result", "SESSION", "get",
           "all_exercises"]

_ID = re.compile(r"^(ch\d\d|ps)_")


def get(exercise_id: str):
    """The exercise object for ``exercise_id`` (e.g. "ch06_ex1"), or a clear error."""
    match = _ID.match(exercise_id)
    if not match:
        raise KeyError(f"exercise ids look like 'ch06_ex1'; got {exercise_id!r}")
    try:
        module = importlib.import_module(f"circuitbook.checks.{match.group(1)}")
    except ModuleNotFoundError:
        raise KeyError(f"no exercises for {match.group(1)!r}; known: {sorted(_modules())}") from None
    try:
        return module.EXERCISES[exercise_id]
    except KeyError:
        raise KeyError(f"unknown exercise {exercise_id!r}; {match.group(1)} has {sorted(module.EXERCISES)}") from None


def _modules() -> list[str]:
    import circuitbook.checks as pkg

    return [m.name for m in pkgutil.iter_modules(pkg.__path__) if _ID.match(m.name + "_")]


def all_exercises() -> dict:
    """Every exercise of every chapter module, by id (used by the tests and the site)."""
    out = {}
    for name in _modules():
        out.update(importlib.import_module(f"circuitbook.checks.{name}").EXERCISES)
    return out


def __getattr__(name: str):
    if _ID.match(name):
        return get(name)
    raise AttributeError(f"module 'circuitbook.checks' has no attribute {name!r}")
