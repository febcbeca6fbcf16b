"""The machinery behind every exercise check: run the reader's answer on fresh random
inputs, compare it with the reference on the same inputs, and when they differ, say
which known mistake the answer looks like.

An exercise is declared once, in ``circuitbook/checks/chNN.py``::

    EX1 = FunctionExercise(
        id="ch06_ex1", title="scaled dot-product scores",
        reference=scores,                       # the reference solution
        make_inputs=lambda g: {"q": ..., "k": ...},  # fresh random inputs from generator g
        mistakes=[Mistake("forgot the scale", "Divide by sqrt(d_k) ...", wrong_fn)],
        hint="...")

A mistake is recognised by *recomputing* it: ``wrong_fn(**inputs)`` is what an answer with
that mistake returns, so if the reader's output matches it we can name the mistake
instead of only saying "wrong". Shape mismatches, ``None``, exceptions and untouched
templates (``raise NotImplementedError``) get their own messages.
"""

from __future__ import annotations

import copy
import html
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable

import torch


@dataclass
class Result:
    """The outcome of one check: truthy when passed. Displays as one line in a notebook."""

    exercise: str
    passed: bool
    message: str
    mistake: str | None = None
    hint: str | None = None

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        mark = "PASSED" if self.passed else "NOT YET"
        text = f"[{mark}] {self.exercise}: {self.message}"
        if not self.passed and self.hint:
            text += f"\n  Hint: {self.hint}"
        return text

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color, mark = ("#1a7f37", "&#10004;") if self.passed else ("#b35900", "&#10008;")
        body = f"<b>{html.escape(self.exercise)}</b>: {html.escape(self.message)}"
        if not self.passed and self.hint:
            body += f"<br><i>Hint:</i> {html.escape(self.hint)}"
        return (f'<div class="circuitbook-check" data-passed="{str(self.passed).lower()}" '
                f'style="border-left:4px solid {color};padding:4px 8px;margin:4px 0">'
                f'<span style="color:{color}">{mark}</span> {body}</div>')


@dataclass
class Mistake:
    """A plausible wrong answer, recognised by recomputing it on the same inputs."""

    name: str
    explanation: str
    wrong: Callable[..., Any]

    def matches(self, got: Any, inputs: dict, compare: Callable[[Any, Any], bool]) -> bool:
        try:
            return compare(got, self.wrong(**copy.deepcopy(inputs)))
        except Exception:  # noqa: BLE001 - a mistake that cannot be computed here does not match
            return False


def allclose(atol: float = 1e-5, rtol: float = 1e-4) -> Callable[[Any, Any], bool]:
    """Equality up to tolerance for tensors, numbers, and tuples/lists/dicts of them."""
    def compare(a, b) -> bool:
        if isinstance(b, dict):
            return isinstance(a, dict) and set(a) == set(b) and all(compare(a[k], b[k]) for k in b)
        if isinstance(b, (tuple, list)) and not isinstance(b, str):
            return (isinstance(a, (tuple, list)) and len(a) == len(b)
                    and all(compare(x, y) for x, y in zip(a, b)))
        if isinstance(b, torch.Tensor):
            return (isinstance(a, torch.Tensor) and a.shape == b.shape
                    and torch.allclose(a.detach().to(b.dtype).cpu(), b.detach().cpu(), atol=atol, rtol=rtol))
        if isinstance(b, int) and not isinstance(b, bool):
            # counts are exact: a relative tolerance would let 13**6 - 1 pass for 13**6
            try:
                return float(a) == b and not isinstance(a, bool)
            except (TypeError, ValueError):
                return False
        if isinstance(b, (int, float)):
            try:
                return abs(float(a) - float(b)) <= atol + rtol * abs(float(b))
            except (TypeError, ValueError):
                return False
        return a == b
    return compare


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    return f"{type(x).__name__} {x!r}"[:80]


@dataclass
class FunctionExercise:
    """An exercise whose answer is a function, checked on ``n_trials`` fresh random inputs."""

    id: str
    title: str
    reference: Callable[..., Any]
    make_inputs: Callable[[torch.Generator], dict]
    mistakes: list[Mistake] = field(default_factory=list)
    hint: str = ""
    n_trials: int = 3
    compare: Callable[[Any, Any], bool] = field(default_factory=allclose)

    def __call__(self, answer: Callable[..., Any], *, seed: int | None = None) -> Result:
        return self.check(answer, seed=seed)

    def check(self, answer: Callable[..., Any], *, seed: int | None = None) -> Result:
        if not callable(answer):
            return self._fail(f"expected your function, got {_describe(answer)}")
        seed = secrets.randbits(31) if seed is None else seed
        for trial in range(self.n_trials):
            g = torch.Generator().manual_seed(seed + trial)
            inputs = self.make_inputs(g)
            expected = self.reference(**copy.deepcopy(inputs))
            try:
                got = answer(**copy.deepcopy(inputs))
            except NotImplementedError:
                return self._fail("not attempted yet: replace `raise NotImplementedError` with your code")
            except Exception as exc:  # noqa: BLE001 - the reader's bug, reported as feedback
                return self._fail(f"your function raised {type(exc).__name__}: {exc}"[:300])
            verdict = self._compare(got, expected, inputs)
            if verdict is not None:
                return verdict
        return Result(self.id, True, f"correct on {self.n_trials} random inputs ({self.title})")

    def _compare(self, got, expected, inputs) -> Result | None:
        """None if ``got`` is right; else the failure, naming a known mistake when one matches."""
        if self.compare(got, expected):
            return None
        for mistake in self.mistakes:
            if mistake.matches(got, inputs, self.compare):
                return self._fail(f"this looks like: {mistake.name}. {mistake.explanation}", mistake.name)
        if got is None:
            return self._fail("your function returned None: did you forget `return`?", "returned None")
        return self._explain(got, expected, inputs)

    def _explain(self, got, expected, inputs) -> Result:
        """Feedback for a wrong answer that matches no known mistake. Exercises whose answers
        are not a tensor or a number (a pair, a dict of weights) override this."""
        if isinstance(expected, torch.Tensor):
            if not isinstance(got, torch.Tensor):
                return self._fail(f"expected a tensor of shape {tuple(expected.shape)}, got {_describe(got)}",
                                  "wrong type")
            if got.shape != expected.shape:
                note = ""
                if got.ndim >= 2 and got.transpose(-1, -2).shape == expected.shape:
                    note = " (the last two dimensions are swapped: transposed?)"
                return self._fail(f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}{note}",
                                  "wrong shape")
            diff = (got.detach().to(expected.dtype).cpu() - expected.detach().cpu()).abs().max().item()
            return self._fail(f"right shape, wrong values (largest difference {diff:.3g})", "wrong values")
        return self._fail(f"expected {_describe(expected)}, got {_describe(got)}", "wrong values")

    def _fail(self, message: str, mistake: str | None = None) -> Result:
        return Result(self.id, False, message, mistake, self.hint or None)


@dataclass
class PairExercise(FunctionExercise):
    """A function exercise whose answer is a pair of tensors, named ``names``; when the pair
    matches no known mistake, the feedback says which half is wrong and how."""

    names: tuple[str, str] = ("first", "second")

    def _explain(self, got, expected, inputs) -> Result:
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            return self._fail(f"return a pair ({', '.join(self.names)}); got {type(got).__name__}", "wrong type")
        notes = []
        for name, a, b in zip(self.names, got, expected):
            if not isinstance(a, torch.Tensor):
                notes.append(f"{name} is not a tensor")
            elif a.shape != b.shape:
                notes.append(f"{name} has shape {tuple(a.shape)}, expected {tuple(b.shape)}")
            elif not self.compare(a, b):
                note = " (it is the transpose of the right answer)" if self.compare(a.T, b) else ""
                notes.append(f"{name} has the right shape but wrong values{note}")
        return self._fail("; ".join(notes) or "wrong values", "wrong values")


@dataclass
class ValueExercise:
    """An exercise whose answer is a value (a number, a shape, a formula as a function of n)."""

    id: str
    title: str
    expected: Callable[[], Any]
    mistakes: list[tuple[Any, str, str]] = field(default_factory=list)  # (wrong value, name, explanation)
    hint: str = ""
    compare: Callable[[Any, Any], bool] = field(default_factory=allclose)

    def __call__(self, answer: Any) -> Result:
        return self.check(answer)

    def check(self, answer: Any) -> Result:
        if answer is None or answer is Ellipsis:
            return Result(self.id, False, "not attempted yet: set the answer variable", None, self.hint or None)
        expected = self.expected()
        if self.compare(answer, expected):
            return Result(self.id, True, f"correct ({self.title})")
        for wrong, name, explanation in self.mistakes:
            if self.compare(answer, wrong):
                return Result(self.id, False, f"this looks like: {name}. {explanation}", name, self.hint or None)
        return Result(self.id, False, f"not quite: {_describe(answer)} is not right", "wrong values",
                      self.hint or None)
