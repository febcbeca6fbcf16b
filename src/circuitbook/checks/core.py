"""The machinery behind every exercise check: run the reader's answer on fresh random
inputs, compare it with the reference on the same inputs, and when they differ, say
which known mistake the answer looks like.

An exercise is declared once, in ``circuitbook/checks/chNN.py``::

    EX1 = FunctionExercise(
        id="ch06_ex1", title="scaled dot-product scores",
        reference=scores,                       # the reference solution
        make_inputs=lambda g: {"q": ..., "k": ...},  # fresh random inputs from generator g
        mistakes=[Mistake("pattern sharper than the paper's", "Your rows are more peaked ...", wrong_fn)],
        hint="...")

A mistake is recognised by *recomputing* it: ``wrong_fn(**inputs)`` is what an answer with
that mistake returns, so if the reader's output matches it we can name the mistake
instead of only saying "wrong". Shape mismatches, ``None``, exceptions and untouched
templates (``raise NotImplementedError``) get their own messages.
"""

from __future__ import annotations

import builtins
import copy
import html
import importlib
import inspect
import numbers
import re
import secrets
import sys
import threading
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import torch


def _ipython_shell():
    """The running IPython shell (a kernel's or a terminal's), or None; looked up without
    importing IPython where nothing has imported it yet."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        return ipython.get_ipython()
    except Exception:  # noqa: BLE001 - a half-imported IPython is no shell
        return None


def _kernel_shell():
    """The IPython shell of a running Jupyter kernel (a notebook, JupyterLab, Colab), or None:
    in plain Python, pytest, scripts and a terminal IPython there is none."""
    shell = _ipython_shell()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


@dataclass
class Result:
    """The outcome of one check: truthy when passed. Displays as one line in a notebook.

    A check called in a notebook shows its result where it runs (:meth:`show`), wherever the
    call stands in its cell (``r = checks.ch06_ex1(f)``, a check followed by other lines, two
    checks in one cell), once: when the result is also the cell's last expression, the
    displayhook finds it already shown by this cell and adds nothing. Outside a kernel nothing
    is displayed by the call, and the result prints as one line where Python prints it.

    ``detail`` is text that comes from the answer itself (the message of an exception it
    raised): the notebook shows it after the message, but :meth:`graded`, the line a grader
    keeps, leaves it out, so that feedback cannot carry out what the answer's code read."""

    exercise: str
    passed: bool
    message: str
    mistake: str | None = None
    hint: str | None = None
    detail: str | None = None
    # (the kernel's shell, the cell's execution count) where show() displayed this result
    _shown: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __bool__(self) -> bool:
        return self.passed

    def show(self) -> Result:
        """Display this result in the running kernel's notebook, now (nothing outside a kernel)."""
        shell = _kernel_shell()
        if shell is not None:
            self._publish()
            self._shown = (id(shell), shell.execution_count)
        return self

    def _publish(self) -> None:
        # formatted by the shell's own formatters (text/plain and text/html here), so that a
        # front end or a grader that turns some or all of them off (otter hides the displays
        # of its tests that way) is obeyed
        from IPython.display import publish_display_data

        shell = _ipython_shell()
        if shell is None:
            return
        data, metadata = shell.display_formatter.format(_ResultView(self))
        if data:
            publish_display_data(data, metadata)

    def _ipython_display_(self) -> None:
        # IPython's display() and the displayhook of a cell's last expression: shown, unless
        # this very cell's show() already did (a check as the last expression shows once)
        shell = _kernel_shell()
        if shell is not None and self._shown == (id(shell), shell.execution_count):
            return
        self._publish()

    def __str__(self) -> str:
        return self.graded(detail=True)

    def graded(self, detail: bool = False) -> str:
        """The result as one line (and its hint), without the answer's own text unless ``detail``."""
        mark = "PASSED" if self.passed else "RECORDED" if self.mistake == RECORDED else "NOT YET"
        text = f"[{mark}] {self.exercise}: {self.message}"
        if detail and self.detail:
            text += f": {self.detail}"
        if self._shows_hint():
            text += f"\n  Hint: {self.hint}"
        return text

    def _shows_hint(self) -> bool:
        """A failed attempt shows the hint; an untouched template ("not attempted") does not: a hint
        before any attempt would be read instead of the problem. Its message says how to get one."""
        return not self.passed and bool(self.hint) and self.category() not in ("not attempted", RECORDED)

    __repr__ = __str__

    def category(self) -> str | None:
        """What kind of failure this is, in a few words for a grader's results: the check's named
        mistake (``mistake``), else "not attempted", "your function raised <a built-in exception>",
        or "no named mistake"; None when the check passed. Never the answer's own text."""
        if self.passed:
            return None
        if self.mistake:
            return self.mistake
        if self.message.startswith("not attempted"):
            return "not attempted"
        raised = re.match(r"your function raised (\w+( \w+)?)", self.message)
        return f"your function raised {raised.group(1)}" if raised else "no named mistake"

    def autograded(self) -> str:
        """The message of an autograder's failing test (the tests ``make assignments`` writes, which
        otter and Gradescope show): :meth:`graded`, then ``[CHECK] <exercise>: <category>`` on a line
        of its own (:meth:`category`), so that a test's result names the mistake, never the solution."""
        text = self.graded()
        return text if self.passed else f"{text}\n[CHECK] {self.exercise}: {self.category()}"

    def _repr_html_(self) -> str:
        color, mark = (("#1a7f37", "&#10004;") if self.passed else ("#57606a", "&#9998;")
                       if self.mistake == RECORDED else ("#b35900", "&#10008;"))
        message = f"{self.message}: {self.detail}" if self.detail else self.message
        body = f"<b>{html.escape(self.exercise)}</b>: {html.escape(message)}"
        if self._shows_hint():
            body += f"<br><i>Hint:</i> {html.escape(self.hint)}"
        return (f'<div class="circuitbook-check" data-passed="{str(self.passed).lower()}" '
                f'style="border-left:4px solid {color};padding:4px 8px;margin:4px 0">'
                f'<span style="color:{color}">{mark}</span> {body}</div>')


class _ResultView:
    """What a Result displays as (its line, its HTML), without Result's own ``_ipython_display_``."""

    def __init__(self, result: Result):
        self.result = result

    def __repr__(self) -> str:
        return str(self.result)

    def _repr_html_(self) -> str:
        return self.result._repr_html_()


class Session:
    """What the checks have said in this Python session (one notebook's kernel): the latest
    result of every exercise checked, so that progress counts checks that passed rather than
    clicks."""

    def __init__(self):
        self._latest: dict[str, bool] = {}
        self._recorded: set[str] = set()
        self._listeners: list[weakref.WeakMethod] = []

    def record(self, result: Result) -> Result:
        self._latest[result.exercise] = result.passed
        (self._recorded.add if result.mistake == RECORDED else self._recorded.discard)(result.exercise)
        self._listeners = [ref for ref in self._listeners if ref() is not None]
        for ref in list(self._listeners):
            listener = ref()
            if listener is not None:
                listener(result)
        return result

    def subscribe(self, listener) -> None:
        """Call the bound method ``listener(result)`` after every check recorded from now on
        (the problem set's progress widget, which updates live). Held weakly: a listener
        whose object is gone is dropped."""
        self._listeners.append(weakref.WeakMethod(listener))

    def passed(self, exercise: str) -> bool:
        """True when the latest check of ``exercise`` in this session passed."""
        return self._latest.get(exercise, False)

    def recorded(self, exercise: str) -> bool:
        """True when the latest call for ``exercise`` recorded an answer whose verdict only the
        autograder gives (:meth:`ValueExercise.record`)."""
        return exercise in self._recorded

    def settled(self, exercise: str) -> bool:
        """Passed, or recorded for the autograder: nothing more to do in this notebook."""
        return self.passed(exercise) or self.recorded(exercise)

    def still_open(self, problems: dict[str, list[str]]) -> dict[str, list[str]]:
        """Each problem (problem -> the ids of its checks) that is not done -> its checks not yet
        settled, in order; a problem missing from the result is done."""
        still = {p: [i for i in ids if not self.settled(i)] for p, ids in problems.items()}
        return {p: ids for p, ids in still.items() if ids}


SESSION = Session()


def random_int(lo: int, hi: int, g: torch.Generator) -> int:
    """A random int in [lo, hi] (both included) from ``g``: the random shapes of an exercise's inputs."""
    return lo + int(torch.randint(0, hi - lo + 1, (1,), generator=g))


def recognised(explanation: str) -> str:
    """The student's message for a recognised mistake: its explanation, not its name.

    A name says what went wrong in the words of the fix ("forgot the scale", "the other axis"),
    which hands the student the answer; the explanation asks the question that leads there.
    The name still reaches the instructor, as ``Result.mistake`` (the class report's category)."""
    return f"not quite: {explanation}"


@dataclass
class Mistake:
    """A plausible wrong answer, recognised by recomputing it on the same inputs. ``name`` is
    for the instructor's report; the student sees only ``explanation`` (see :func:`recognised`)."""

    name: str
    explanation: str
    wrong: Callable[..., Any]

    def matches(self, got: Any, inputs: dict, compare: Callable[[Any, Any], bool]) -> bool:
        try:
            return compare(got, self.wrong(**copy.deepcopy(inputs)))
        except Exception:  # noqa: BLE001 - a mistake that cannot be computed here does not match
            return False


def allclose(atol: float = 1e-5, rtol: float = 1e-4, *, equal_nan: bool = False) -> Callable[[Any, Any], bool]:
    """Equality up to tolerance for tensors, numbers, and tuples/lists/dicts of them.
    ``equal_nan``: a NaN in a tensor equals a NaN in the same place, so that a named mistake whose
    output has NaN rows is recognised by recomputing it (a reference with none still fails an
    answer that has some)."""
    def compare(a, b) -> bool:
        if isinstance(b, dict):
            return isinstance(a, dict) and set(a) == set(b) and all(compare(a[k], b[k]) for k in b)
        if isinstance(b, (tuple, list)) and not isinstance(b, str):
            return (isinstance(a, (tuple, list)) and len(a) == len(b)
                    and all(compare(x, y) for x, y in zip(a, b)))
        if isinstance(b, torch.Tensor):
            if not (isinstance(a, torch.Tensor) and a.shape == b.shape):
                return False
            # in float64 (complex128) whatever either dtype: a float answer to an integer
            # question is not truncated into a right one, and any float dtype may answer
            wide = torch.complex128 if a.is_complex() or b.is_complex() else torch.float64
            return torch.allclose(a.detach().cpu().to(wide), b.detach().cpu().to(wide), atol=atol, rtol=rtol,
                                  equal_nan=equal_nan)
        if isinstance(b, int) and not isinstance(b, bool):
            # counts are exact: a relative tolerance would let 13**6 - 1 pass for 13**6
            x = as_number(a)
            return x is not None and x == b
        if isinstance(b, (int, float)):
            x = as_number(a)
            return x is not None and abs(x - float(b)) <= atol + rtol * abs(float(b))
        return a == b
    return compare


def _describe(x: Any) -> str:
    """What ``x`` is, with its value only for a plain number: never the text of an object the
    answer made (a string or a repr could carry anything the answer's code read)."""
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)}"
    if isinstance(x, (bool, int, float)):
        return f"{type(x).__name__} {x!r}"
    return shape_of(x) if isinstance(x, (dict, tuple, list)) else f"a {type(x).__name__}"


def raised(exc: BaseException) -> tuple[str, str]:
    """(message, detail) for an exception the answer raised: the message names a built-in
    exception type (another is "an exception"), the detail holds the exception's own text,
    which only the notebook shows (see :class:`Result`)."""
    name = type(exc).__name__
    builtin = getattr(builtins, name, None) is type(exc)
    return f"your function raised {name if builtin else 'an exception'}", \
        (str(exc) if builtin else f"{name}: {exc}")[:300]


class ReferenceCalled(BaseException):
    """Raised by the guard: the answer called one of the book's reference functions while it
    was checked under :func:`guarded`. A BaseException, so that ``except Exception`` in the
    answer does not swallow it."""


class LibraryAnswerCalled(ReferenceCalled):
    """Raised by :func:`call_answer`, in the notebook as under the guard: the answer called a
    function (of ``circuitbook``, or of torch) that the exercise being checked declares as
    computing its answer (``FunctionExercise.library_answers``). ``name`` is that function's
    dotted name."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


# Per thread (a trace function is set per thread, so two checks in two threads cannot see
# each other's guard): how deep this thread is in guarded().
_GUARD = threading.local()


def guarded(check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)`` with the reference guard on (the hidden tests of ``make
    assignments`` call each check this way). While the answer of a function exercise runs, a
    call of

    - any function defined in the modules ``circuitbook.checks.chNN`` and ``ps`` (the references
      and their helpers) fails the check with :data:`REFERENCE_MESSAGE`, and
    - any function of the package that *the exercise being checked* declares in its
      ``library_answers`` (the library's own implementation of what the exercise asks for, such
      as ``circuitbook.paths.count_paths`` for the path counts, or torch's own where the exercise
      asks for it from scratch, ``torch.nn.functional.layer_norm`` for chapter 11) fails it with
      :data:`LIBRARY_MESSAGE`, which names the function (this one also in the reader's notebook,
      where the check runs unguarded: :func:`call_answer`). Another exercise's declared functions
      stay allowed: a library function may be one exercise's answer and another's building block,

    so the function itself, a wrapper around it (``lambda *a, **k: ps.head_scores(*a, **k)``), a
    ``functools.partial`` of it, a call that reaches it through other code (calling the
    ``nn.Module`` whose ``forward`` it is, or ``icl_scores``, which calls ``per_token_loss``), a
    copy made with ``types.FunctionType(ref.__code__, ...)``, or an answer that catches what the
    guard raised fails. It does not catch a copy of a reference's or a library function's source (the package,
    with its source, is installed on every student's machine), a library function that computes
    the answer but is not declared (only the functions the exercise lists are watched), a C
    function (the trace sees Python frames: ``torch.layer_norm`` escapes where
    ``torch.nn.functional.layer_norm`` is caught), a call made in another thread, an answer that
    switches the trace off (``sys.settrace(None)``) or reads the expected value from the check's
    frame, nor a value computed with one before the check runs (the value problems). It stops
    the obvious shortcuts, not a student set on cheating: the answer runs in the checking
    process."""
    _GUARD.depth = getattr(_GUARD, "depth", 0) + 1
    try:
        return check(*args, **kwargs)
    finally:
        _GUARD.depth -= 1


def call_answer(answer: Callable[..., Any], args: tuple = (), kwargs: dict | None = None, *,
                library: tuple[str, ...] = ()) -> Any:
    """``answer(*args, **kwargs)``, watched for calls of the functions named in ``library`` (the
    dotted names of the exercise's ``library_answers``), and under :func:`guarded` also for calls
    of the reference functions. Raises :class:`LibraryAnswerCalled` when the answer called one of
    the former, else :class:`ReferenceCalled` when it called a reference (either even where the
    answer caught what the guard raised). The library watch is on in the reader's notebook too, so
    that on a library answer the check a student runs and the graded check agree; a call of a
    reference is watched under the guard only (the notebook shows it as correct, the grader
    refuses it). With no ``library`` names and no guard it only calls the answer.

    The watch is a trace function (``sys.settrace``, this thread only) that looks at the code
    object of every Python frame the answer enters: nothing of the references or of the library
    is replaced, so the guard is safe beside other threads and needs no CPython internals beyond
    the tracing API. It sees Python frames only, which is all a reference or a declared library
    function is (a method such as an ``nn.Module``'s ``forward`` included); its cost is one small
    call per Python function call of the answer."""
    kwargs = {} if kwargs is None else kwargs
    under_guard = bool(getattr(_GUARD, "depth", 0))
    if not under_guard and not library:
        return answer(*args, **kwargs)
    codes: dict[types.CodeType, str | None] = (
        {fn.__code__: None for fn in _reference_functions()} if under_guard else {})
    for name in library:  # resolved (imported) before the watch starts, not inside it
        for fn in _library_functions(name):
            codes[fn.__code__] = name
    tripped: list[str | None] = []

    def tripwire(name: str | None) -> ReferenceCalled:
        return ReferenceCalled() if name is None else LibraryAnswerCalled(name)

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            tripped.append(codes[frame.f_code])
            raise tripwire(tripped[-1])
        return None  # no line-by-line tracing inside the frame

    previous = sys.gettrace()
    sys.settrace(watch)
    try:
        got = answer(*args, **kwargs)
    finally:
        sys.settrace(previous)
    if tripped:
        raise tripwire(tripped[0])
    return got


def _reference_functions() -> list[types.FunctionType]:
    """Every Python function defined at the top of a loaded exercise module (the references,
    their helpers and the mistakes' helpers), unwrapped from decorators, plus each exercise's
    own reference."""
    found: dict[int, types.FunctionType] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("circuitbook.checks.") or name.endswith(".core"):
            continue
        own = [v for v in vars(module).values()
               if isinstance(v, types.FunctionType) and getattr(v, "__module__", None) == name]
        refs = [getattr(ex, "reference", None) for ex in getattr(module, "EXERCISES", {}).values()]
        for value in own + refs:
            found.update((id(fn), fn) for fn in _unwrapped(value))
    return list(found.values())


def _unwrapped(value: Any) -> list[types.FunctionType]:
    """``value`` and the functions its decorators wrap (``__wrapped__``), while they are Python
    functions: what the guard watches for one reference or one declared library function."""
    chain = []
    while isinstance(value, types.FunctionType):
        chain.append(value)
        value = getattr(value, "__wrapped__", None)
    return chain


def _library_functions(name: str) -> list[types.FunctionType]:
    """The Python functions a dotted name of ``library_answers`` stands for: a function
    (``circuitbook.paths.count_paths``) or a method (``circuitbook.models.encoder_decoder.
    Embeddings.forward``), unwrapped from decorators (``__wrapped__``) as
    :func:`_reference_functions` unwraps the references. The longest importable prefix is the
    module, the rest attributes; a name that does not resolve to a Python function raises
    (tests/unit/test_reference_guard.py resolves every declared name)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        try:
            value: Any = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name is not None and not module.startswith(err.name):
                raise  # the module exists but one of its own imports is missing
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        break
    else:
        raise ValueError(f"library_answers: {name!r} names no module's attribute")
    found = _unwrapped(getattr(value, "__func__", value))  # a classmethod's or bound method's function
    if not found:
        raise TypeError(f"library_answers: {name!r} is not a Python function")
    return found


#: the ``mistake`` of a result that recorded an answer without a verdict (ValueExercise.record)
RECORDED = "answer recorded"
NO_HINT_YET = "A hint appears once the check has run an attempt of yours that does not pass yet."
"""What an untouched template's message says about hints (none is shown before an attempt)."""

REFERENCE_MESSAGE = ("your function calls the book's reference solution (a function of circuitbook.checks): "
                     "the graded check runs your own code")
LIBRARY_MESSAGE = ("your function calls {name}, a library's own version of what this exercise asks you to "
                   "write: the graded check runs your own code")
"""The message of an answer that called one of its exercise's ``library_answers``, in the
notebook's check and under :func:`guarded` alike; ``{name}`` is the function's dotted name."""


def shape_of(x: Any) -> str:
    """What kind of answer ``x`` is, without its values: what a first run may tell."""
    if isinstance(x, torch.Tensor):
        kind = "" if x.is_floating_point() or x.is_complex() else (
            " of True/False" if x.dtype == torch.bool else " of integers")
        return f"a tensor{kind} of shape {tuple(x.shape)}" if x.ndim else f"a one-element tensor{kind} (or a number)"
    if isinstance(x, bool):
        return "True or False"
    if isinstance(x, int):
        return "an int"
    if isinstance(x, float):
        return "a float"
    if isinstance(x, dict):
        return "a dict {" + ", ".join(f"{k!r}: {shape_of(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (tuple, list)):
        if x and all(isinstance(v, int) and not isinstance(v, bool) for v in x):
            return f"a tuple of {len(x)} ints"
        word = "a pair" if len(x) == 2 else f"a {type(x).__name__} of {len(x)}"
        return f"{word} ({', '.join(shape_of(v) for v in x)})"
    return f"a {type(x).__name__}"


def describe_inputs(inputs: dict) -> str:
    """The inputs of one trial, by name: shapes for tensors, values for small settings."""
    parts = []
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{name} {tuple(value.shape)}")
        elif isinstance(value, (bool, int, float, str)) or (
                isinstance(value, tuple) and all(isinstance(v, (int, str)) for v in value)):
            parts.append(f"{name}={value!r}")
        elif isinstance(value, dict):
            parts.append(f"{name} (a dict of {len(value)})")
        else:
            parts.append(f"{name} (a {type(value).__name__})")
    return ", ".join(parts)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.allclose(a, b, atol=1e-4, rtol=1e-3, equal_nan=True))


def _indices(idx: list[int]) -> str:
    if len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"{idx[0]}..{idx[-1]}"
    return ", ".join(map(str, idx[:6])) + (", ..." if len(idx) > 6 else "")


def tensor_difference(got: torch.Tensor, expected: torch.Tensor) -> tuple[str, str]:
    """How a tensor of the right shape differs from the right one: sign, scale, a constant
    offset, a transpose, or which entries (and along which dimensions) are off."""
    g = got.detach().cpu().to(torch.complex128 if expected.is_complex() else torch.float64)
    e = expected.detach().cpu().to(g.dtype)
    if torch.isnan(g).any() and not torch.isnan(e).any():
        return f"your answer contains NaN in {int(torch.isnan(g).sum())} entries: a division by zero, or an " \
               "inf minus an inf?", "NaN"
    if e.ne(0).any() and _close(g, -e):
        return "right shape, but the sign is flipped everywhere", "wrong sign"
    finite = torch.isfinite(e) & torch.isfinite(g)
    if finite.all():
        denom = (e.abs() ** 2).sum()
        if denom > 0 and not expected.is_complex():
            c = float((g * e).sum() / denom)
            if abs(c) > 1e-6 and abs(c - 1) > 1e-3 and _close(g, c * e):
                # the factor itself is not printed: it would name the missing scale (0.35 is
                # 1 / sqrt(8)), and the reader's question is which scale the definition applies
                return "right shape, off by the same factor in every entry: which scale does the definition " \
                       "apply, and did you apply it once, at the right place?", "wrong scale"
        d = (g - e).flatten()
        if d.numel() > 1 and _close(d, d[0].expand_as(d)):
            return "right shape, off by the same constant in every entry (a missing or extra bias or shift?)", \
                   "constant offset"
    if g.ndim >= 2 and g.shape[-1] == g.shape[-2] and _close(g.transpose(-1, -2), e):
        return "right shape, but transposed: rows and columns swapped", "transposed"
    bad = ~torch.isclose(g, e, atol=1e-4, rtol=1e-3, equal_nan=True)
    if not bad.any():
        bad = ~torch.isclose(g, e, atol=1e-5, rtol=1e-4)
    n_bad, total = int(bad.sum()), bad.numel()
    message = f"right shape, wrong values in {n_bad} of {total} entries"
    if finite.all():
        message += f" (largest difference {float((g - e).abs().max()):.3g})"
    if bad.ndim >= 2 and bad.shape[-1] == bad.shape[-2] and n_bad < total:
        square = bad.reshape(-1, *bad.shape[-2:]).any(0)
        if not square.tril().any():
            return message + "; all of them above the diagonal (column after row)", "wrong values"
        if not square.triu().any():
            return message + "; all of them below the diagonal (column before row)", "wrong values"
    where = []
    for dim in range(bad.ndim):
        others = tuple(i for i in range(bad.ndim) if i != dim)
        along = bad.any(dim=others) if others else bad
        idx = along.nonzero().flatten().tolist()
        if 0 < len(idx) < bad.shape[dim]:
            where.append(f"index {_indices(idx)} of dimension {dim}")
    if where:
        message += "; only at " + " and ".join(where[:2])
    return message, "wrong values"


def as_number(x: Any) -> float | None:
    """``x`` as a float where it is one real number in any of the forms a reader may give it:
    an int or float, a NumPy scalar or one-element array (``np.float32``, ``np.int64``), a
    one-element tensor of any real dtype, on any device. None for anything else (True and
    False included: a verdict is not a number)."""
    if isinstance(x, bool) or str(getattr(x, "dtype", "")) in ("bool", "torch.bool"):
        return None
    if isinstance(x, torch.Tensor):
        return float(x.detach().cpu()) if x.numel() == 1 and not x.is_complex() else None
    if isinstance(x, numbers.Real):
        return float(x)
    if type(x).__module__ == "numpy" and getattr(x, "size", None) == 1 and getattr(x.dtype, "kind", "") in "iuf":
        return float(x.reshape(()))
    return None



def _is_count(x: Any) -> bool:
    """True for an integer answer (a count): a Python or NumPy int, or a one-element integer tensor;
    not True/False."""
    if isinstance(x, bool):
        return False
    if isinstance(x, torch.Tensor):
        return x.numel() == 1 and not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
    return isinstance(x, numbers.Integral)


def difference(got: Any, expected: Any, *, pencil: bool = False, direction: bool = True) -> tuple[str, str]:
    """How ``got`` differs from ``expected`` without printing ``expected``'s values: the
    type or shape, the sign, the scale, which entries or which keys; never by what factor
    (that would name a missing scale). ``pencil=True`` (a value answer, which a reader can
    resubmit at will, not a function checked on fresh inputs): for a count, not even "too
    large" or "too small", since a direction would let the reader bisect to it; nor for any
    number when ``direction`` is False (:attr:`ValueExercise.tells_direction`)."""
    if isinstance(expected, torch.Tensor) and expected.ndim > 0:
        if not isinstance(got, torch.Tensor):
            return f"expected {shape_of(expected)}, got {_describe(got)}", "wrong type"
        if got.shape != expected.shape:
            note = ""
            if got.ndim >= 2 and got.transpose(-1, -2).shape == expected.shape:
                note = " (the last two dimensions are swapped: transposed?)"
            elif got.numel() == expected.numel():
                note = " (the same number of entries: a reshape or permute in the wrong order?)"
            return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}{note}", "wrong shape"
        return tensor_difference(got, expected)
    e = as_number(expected)
    if e is not None:
        g = as_number(got)
        if g is None:
            return f"expected {shape_of(expected)}, got {_describe(got)}", "wrong type"
        if pencil and _is_count(expected):
            return f"your {g:.6g} is not the right count: list what is to be counted, kind by kind, and " \
                   "count each kind again", "wrong values"
        if pencil and not direction:
            return f"your {g:.6g} is not what this measurement gives: go through it again, step by step, " \
                   "as the statement describes it", "wrong values"
        if e != 0 and abs(g + e) <= 1e-6 + 1e-4 * abs(e):
            return f"your {g:.6g} has the wrong sign", "wrong sign"
        side = "too large" if g > e else "too small"
        # no factor: "about 0.35 times" would name the missing scale
        return f"your {g:.6g} is {side}", "wrong values"
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"expected {shape_of(expected)}, got {_describe(got)}", "wrong type"
        missing, extra = sorted(set(expected) - set(got), key=str), sorted(set(got) - set(expected), key=str)
        if missing or extra:
            return f"the keys differ: missing {missing}, unexpected {extra}", "wrong keys"
        wrong = [k for k in expected if not allclose()(got[k], expected[k])]
        first = difference(got[wrong[0]], expected[wrong[0]], pencil=pencil)[0] if wrong else ""
        return f"wrong {', '.join(map(str, wrong))}: {wrong[0]}: {first}", "wrong values"
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(expected):
            return f"expected {shape_of(expected)}, got {_describe(got)}", "wrong type"
        wrong = [i for i, (a, b) in enumerate(zip(got, expected)) if not allclose()(a, b)]
        if not wrong:
            return "the elements are right but not in the expected form", "wrong type"
        first = difference(got[wrong[0]], expected[wrong[0]], pencil=pencil)[0]
        return f"element {', '.join(map(str, wrong))} of {len(expected)} is wrong: element {wrong[0]}: {first}", \
            "wrong values"
    return f"expected {shape_of(expected)}; yours ({_describe(got)}) is not it", "wrong values"


def arguments(answer: Callable[..., Any], inputs: dict) -> tuple[tuple, dict] | None:
    """How to call ``answer`` on an exercise's ``inputs`` (in the statement's order): by name
    when its parameters carry the statement's names, in any order; else by position, so that
    ``lambda t, p: ...`` answers ``f(S_tok, S_prev)``; None when neither fits its signature.
    A function whose signature cannot be read is called by name."""
    try:
        signature = inspect.signature(answer)
    except (TypeError, ValueError):
        return (), dict(inputs)
    for args, kwargs in (((), dict(inputs)), (tuple(inputs.values()), {})):
        try:
            signature.bind(*args, **kwargs)
        except TypeError:
            continue
        return args, kwargs
    return None


def _parameters(answer: Callable[..., Any]) -> str:
    return "(" + ", ".join(inspect.signature(answer).parameters) + ")"


def _untouched(answer: Callable[..., Any]) -> bool:
    """True for a function whose body is only ``...`` (after an optional docstring): the
    student version that ``make assignments`` hands out, before anything is written. Read
    from the source (notebook cells keep theirs), since ``...`` compiles to ``return None``."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(answer)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return False
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = [n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
                                       and isinstance(n.value.value, str))]
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and body[0].value.value is Ellipsis


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
    # the names of a tuple answer's elements, as the statement says them ("the induction
    # score", "the loss"): feedback on a wrong tuple then says which is wrong, by name
    names: tuple[str, ...] = ()
    # dotted names of circuitbook (or torch) functions, never checks', that compute this exercise's
    # whole answer, such as "circuitbook.paths.count_paths": an answer that calls one fails, in the
    # notebook's check as in the graded one (call_answer). Only this exercise's names are watched
    # when it is checked; strings, resolved when it is checked, so declaring one imports nothing.
    library_answers: tuple[str, ...] = ()

    def __call__(self, answer: Callable[..., Any], *, seed: int | None = None) -> Result:
        """The check as the reader calls it: recorded in this session's progress, and shown at
        once in a notebook (:meth:`Result.show`). Graders call :meth:`check`, which does neither."""
        return SESSION.record(self.check(answer, seed=seed)).show()

    def check(self, answer: Callable[..., Any], *, seed: int | None = None) -> Result:
        if not callable(answer):
            return self._fail(f"expected your function, got {_describe(answer)}")
        seed = secrets.randbits(31) if seed is None else seed
        for trial in range(self.n_trials):
            g = torch.Generator().manual_seed(seed + trial)
            inputs = self.make_inputs(g)
            expected = self.reference(**copy.deepcopy(inputs))
            call = arguments(answer, copy.deepcopy(inputs))
            if call is None:
                return self._fail(f"your function cannot be called with this exercise's inputs: it takes "
                                  f"{_parameters(answer)}, and the check passes {', '.join(inputs)} (by name, or "
                                  f"in that order)", "wrong signature")
            try:
                got = call_answer(answer, call[0], call[1], library=self.library_answers)
            except NotImplementedError:
                return self._fail(self.first_run(inputs, expected))
            except LibraryAnswerCalled as called:
                return self._fail(LIBRARY_MESSAGE.format(name=called.name), "library solution")
            except ReferenceCalled:
                return self._fail(REFERENCE_MESSAGE, "reference solution")
            except Exception as exc:  # noqa: BLE001 - the reader's bug, reported as feedback
                return self._fail(*raised(exc)[:1], detail=raised(exc)[1])
            if got is None and _untouched(answer):
                return self._fail(self.first_run(inputs, expected).replace(
                    "replace `raise NotImplementedError`", "replace the `...` (or `raise NotImplementedError`)"))
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
                return self._fail(recognised(mistake.explanation), mistake.name)
        if got is None:
            return self._fail("your function returned None: did you forget `return`? It should return "
                              f"{shape_of(expected)} here.", "returned None")
        if got is Ellipsis:
            return self._fail("your function returned `...`: replace it with your answer, "
                              f"{shape_of(expected)} here.", "returned Ellipsis")
        return self._explain(got, expected, inputs)

    def first_run(self, inputs: dict, expected: Any) -> str:
        """The untouched template's message: what to do, and the shape of the answer."""
        return (f"not attempted yet: replace `raise NotImplementedError` with your code ({self.title}). "
                f"On inputs {describe_inputs(inputs)} it should return {shape_of(expected)}. {NO_HINT_YET}")

    def _explain(self, got, expected, inputs) -> Result:
        """Feedback for a wrong answer that matches no known mistake: how it differs (type,
        shape, sign, scale, which entries), each element by its name where ``names`` gives them.
        Exercises whose answers need more (a dict of weights run as a model) override this."""
        if self.names and isinstance(got, (tuple, list)) and len(got) == len(self.names) == len(expected):
            same = allclose()
            notes = [f"{name}: {difference(a, b)[0]}" for name, a, b in zip(self.names, got, expected)
                     if not same(a, b)]
            if notes:
                return self._fail("; ".join(notes), "wrong values")
        return self._fail(*difference(got, expected))

    def _fail(self, message: str, mistake: str | None = None, *, detail: str | None = None) -> Result:
        return Result(self.id, False, message, mistake, self.hint or None, detail)


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
                notes.append(f"{name}: {tensor_difference(a, b)[0]}")
        return self._fail("; ".join(notes) or "wrong values", "wrong values")


@dataclass
class ValueExercise:
    """An exercise whose answer is a value (a number, a shape, a formula as a function of n).

    Keyword arguments of a call (``checks.ps_p1a(answer, model="text-2l")``) are the exercise's
    inputs: they go to ``expected`` and, when ``mistakes`` is a function, to it (per-student
    variants of a problem set pass them from the notebook's parameter cell)."""

    id: str
    title: str
    expected: Callable[..., Any]
    # (wrong value, name, explanation), or a function of the inputs returning that list
    mistakes: list[tuple[Any, str, str]] | Callable[..., list] = field(default_factory=list)
    hint: str = ""
    compare: Callable[[Any, Any], bool] = field(default_factory=allclose)
    # (answer, a value) -> both in one spelling, where the text allows several (problem 1's keys)
    normalise: Callable[[Any, Any], tuple[Any, Any]] | None = None
    # (answer, expected) -> what is wrong with the answer's form (a letter that names no option),
    # or None; asked before the generic comparison, whose words fit numbers and tensors
    explain: Callable[[Any, Any], str | None] | None = None
    # A choice among a few options, which a notebook that gave its verdict would let a student
    # find by trying each one: a course's student notebook (scripts/course.py and
    # scripts/assignments.py write it so) calls :meth:`record` instead, which checks the
    # answer's form only, and the verdict comes from the autograder's tests (:meth:`check`).
    verdict_in_autograder: bool = False
    # A wrong number is told whether it is too large or too small, unless this is False: for a
    # value a reader could reach by bisection within the tolerance (a score in [0, 1] whose
    # closed form the exercise is about), as a count never gets a direction
    tells_direction: bool = True

    def __call__(self, answer: Any, **inputs: Any) -> Result:
        """As :meth:`FunctionExercise.__call__`: recorded, and shown at once in a notebook."""
        return SESSION.record(self.check(answer, **inputs)).show()

    def record(self, answer: Any, **inputs: Any) -> Result:
        """A course's call for an exercise whose verdict only the autograder gives: an answer that
        is missing or malformed is told so (as :meth:`check` would tell it); a well-formed one is
        recorded, with no word on whether it is right, and counts as answered in the session."""
        if not self.verdict_in_autograder:
            raise ValueError(f"{self.id} gives its verdict in the notebook: call checks.{self.id}(answer)")
        result = self.form_problem(answer, **inputs)  # a Result is falsy when not passed: no `or`
        if result is None:
            result = Result(self.id, False, f"answer recorded: {str(answer)[:60]}. In this course the autograder "
                            "gives the verdict when you submit; until then you can change your answer and run "
                            "this cell again.", RECORDED)
        return SESSION.record(result).show()

    def form_problem(self, answer: Any, **inputs: Any) -> Result | None:
        """The failure of an answer that is missing or not of the answer's form, else None: what
        both :meth:`check` and :meth:`record` say before any comparison with the answer."""
        if answer is None or answer is Ellipsis:
            return Result(self.id, False, f"not attempted yet: set the answer variable ({self.title}) to "
                          f"{shape_of(self.expected(**inputs))}. {NO_HINT_YET}", None, self.hint or None)
        return None

    def check(self, answer: Any, **inputs: Any) -> Result:
        expected = self.expected(**inputs)
        problem = self.form_problem(answer, **inputs)
        if problem is not None:
            return problem
        spell = self.normalise or (lambda a, v: (a, v))
        if self.compare(*spell(answer, expected)):
            return Result(self.id, True, f"correct ({self.title})")
        mistakes = self.mistakes(**inputs) if callable(self.mistakes) else self.mistakes
        for wrong, name, explanation in mistakes:
            if self.compare(*spell(answer, wrong)):
                return Result(self.id, False, recognised(explanation), name, self.hint or None)
        form = self.explain(answer, expected) if self.explain else None
        if form is not None:
            return Result(self.id, False, f"not quite: {form}", "wrong form", self.hint or None)
        if isinstance(expected, str):  # a choice: which one is right is the question itself
            return Result(self.id, False, f"not quite: {answer!r} is not the answer", "wrong choice",
                          self.hint or None)
        message, mistake = difference(*spell(answer, expected), pencil=True, direction=self.tells_direction)
        return Result(self.id, False, f"not quite: {message}", mistake, self.hint or None)
