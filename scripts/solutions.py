"""Each exercise's solution is declared once: its reference function in ``circuitbook.checks``.

An exercise is declared in ``src/circuitbook/checks/chNN.py`` (or ``checks/ps/pN.py``): the reference
solution, the named mistakes with their feedback, the hint. The chapter's exercise cell shows
that same reference function, with its body between ``# BEGIN SOLUTION`` and ``# END
SOLUTION``, from which ``notebooks.py`` makes the student's template and the folded solution.
So the chapter is *written from* the declaration: ``python scripts/notebooks.py sync``
rewrites every exercise function of every chapter from its reference, and ``notebooks.py
check`` (the ``sources`` stage of ``make test``) and ``tests/unit/test_solutions.py`` fail when
one differs. To change a solution, edit the reference in ``circuitbook.checks``; the check, the
chapter and the tests of its mistakes (``tests/unit/test_checks.py``) then follow it.

Only function exercises have a reference function. A value exercise (the answer is a number
or a tuple a reader computes) has an ``expected`` computed independently of the chapter's
solution lines; executing the chapter (``execute_notebooks.py --require-passing``) checks that
the two agree.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
from dataclasses import dataclass

BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
# a check called in a cell, ``checks.<id>(``: the exercise it names (course.py and notebooks.py read it too)
CHECK_CALL = re.compile(r"\bchecks\.(\w+)\(")


@dataclass
class Exercise:
    """One function exercise in a chapter: where its function stands and what it must be."""

    id: str
    function: str
    first: int  # 0-based index of the function's first line in the chapter's lines
    last: int  # index one past its last line
    written: str  # the function as the chapter has it
    declared: str  # the function as its reference declares it, markers placed


def declared_solution(reference) -> str:
    """The reference function's source, with its body (after the docstring) between the
    solution markers at the body's indentation: the text a chapter's exercise cell shows."""
    source = textwrap.dedent(inspect.getsource(reference)).rstrip("\n")
    lines = source.splitlines()
    node = ast.parse(source).body[0]
    body = node.body
    if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]  # the docstring stays visible in the template
    start = body[0].lineno - 1
    # comments directly above the first statement belong to the solution too
    while start > 0 and lines[start - 1].strip().startswith("#"):
        start -= 1
    indent = lines[body[0].lineno - 1][: len(lines[body[0].lineno - 1]) - len(lines[body[0].lineno - 1].lstrip())]
    return "\n".join(lines[:start] + [indent + BEGIN] + lines[start:] + [indent + END])


def exercises(chapter: str) -> list[Exercise]:
    """Every function exercise of a chapter's source text: a function defined in a cell tagged
    ``exercise`` whose name is the reference's of an exercise that cell checks."""
    from circuitbook import checks

    lines = chapter.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("# %%")] + [len(lines)]
    found = []
    for a, b in zip(starts, starts[1:]):
        if '"exercise"' not in lines[a]:
            continue
        cell = "\n".join(lines[a + 1 : b])
        defs = {n.name: n for n in ast.parse(cell).body if isinstance(n, ast.FunctionDef)}
        for exercise_id in CHECK_CALL.findall(cell):
            reference = getattr(checks.get(exercise_id), "reference", None)
            if reference is None or reference.__name__ not in defs:
                continue
            node = defs[reference.__name__]
            first = a + 1 + (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
            last = a + 1 + node.end_lineno
            if last < b and lines[last].strip() == END:  # a comment: not part of the function's AST
                last += 1
            found.append(Exercise(exercise_id, reference.__name__, first, last,
                                  "\n".join(lines[first:last]), declared_solution(reference)))
    return found


def written_from_declarations(chapter: str) -> str:
    """The chapter's text with every exercise function as its reference declares it."""
    lines = chapter.splitlines()
    for ex in sorted(exercises(chapter), key=lambda e: e.first, reverse=True):
        lines[ex.first : ex.last] = ex.declared.splitlines()
    return "\n".join(lines) + ("\n" if chapter.endswith("\n") else "")


def drift(chapter: str) -> list[str]:
    """The exercises whose function in the chapter differs from its declaration."""
    return [f"{ex.id} ({ex.function})" for ex in exercises(chapter) if ex.written != ex.declared]
