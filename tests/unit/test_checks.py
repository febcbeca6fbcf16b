"""The checks are themselves tested: the reference passes, every row of the mutation table
fails with the right diagnosis, and no stub, constant or untouched template can pass."""

from __future__ import annotations

import pytest
import torch

from circuitbook import checks
from circuitbook.checks import FunctionExercise, Mistake, ValueExercise
from circuitbook.checks.ps.p3 import DesignExercise

# Wrong answers beyond the declared mistakes: the generic diagnoses (wrong shape, type, values)
# and wrong answers no declared mistake names, which must still fail.
from mutations import MUTATIONS

EXERCISES = checks.all_exercises()
FUNCTION_IDS = sorted(k for k, v in EXERCISES.items() if not isinstance(v, ValueExercise))
ALL_IDS = sorted(EXERCISES)


SEED = 1234  # fixed in the tests so a run is reproducible; students get fresh inputs each time


def _check(ex, answer):
    return ex(answer, seed=SEED) if isinstance(ex, FunctionExercise) else ex(answer)


def _template(*args, **kwargs):
    raise NotImplementedError("Write your solution here, then run this cell.")


# Value exercises' right answers, worked out here from the statements, not read from the checks:
VALUE_ANSWERS = {
    # GPT-2 medium: 24 layers of 16 heads. Token and positional embedding, one term per head, one
    # attention output bias and one MLP output per layer: 2 + 24 * 16 + 24 + 24
    "ch01_ex2": 2 + 24 * 16 + 24 + 24,
    # GPT-2 small (the default): d_model 768, d_head 64, d_vocab 50,257; every circuit of one head
    # factors through its 64-dimensional head space
    "ps_p1a": {"W_QK_shape": (768, 768), "W_QK_rank": 64, "W_OV_shape": (768, 768), "W_OV_rank": 64,
               "full_QK_shape": (50257, 50257), "full_OV_shape": (50257, 50257), "full_rank": 64},
}
# ps_p3b's answer is a measured score: tests/unit/test_ps_references.py measures it by hand; ps_p7b's
# is a reading with the measured number that decides it: tests/unit/test_student_feedback.py.
MEASURED_ELSEWHERE = {"ps_p3b", "ps_p7b"}


@pytest.mark.parametrize("ex_id", ALL_IDS)
def test_reference_passes(ex_id):
    """A function exercise's reference passes its own check (the references are compared with
    independent kernels in test_check_references.py); a value exercise accepts the answer
    worked out above, independently of its ``expected``."""
    ex = EXERCISES[ex_id]
    if isinstance(ex, ValueExercise):
        if ex_id in MEASURED_ELSEWHERE:
            pytest.skip("measured by hand in test_ps_references.py")
        assert ex_id in VALUE_ANSWERS, f"{ex_id}: add its answer, worked out from the statement, to VALUE_ANSWERS"
        answer = VALUE_ANSWERS[ex_id]
    else:
        answer = ex.reference
    result = _check(ex, answer)
    assert result.passed, str(result)


def declared_mistakes(ex) -> list[tuple[object, str]]:
    """(wrong answer, its name) for every mistake an exercise declares: a function exercise's
    ``Mistake(name, feedback, wrong)`` is answered with ``wrong`` itself, a value exercise's
    ``(wrong value, name, feedback)`` with the value. The mistakes are declared once, beside the
    reference (``circuitbook.checks``); this is where each one is tested."""
    mistakes = ex.mistakes() if callable(ex.mistakes) else ex.mistakes
    out = []
    for m in mistakes:
        if isinstance(m, Mistake):
            out.append((m.wrong, m.name))
        elif isinstance(m[0], str) and callable(m[1]):  # a design exercise's (name, wrong design, feedback)
            out.append((m[1], m[0]))
        else:
            out.append((m[0], m[1]))
    return out


DECLARED = {k: declared_mistakes(v) for k, v in EXERCISES.items()}


@pytest.mark.parametrize("ex_id", ALL_IDS)
def test_five_wrong_answers_per_exercise(ex_id):
    n = len(DECLARED[ex_id]) + len(MUTATIONS.get(ex_id, []))
    assert n >= 5, f"{ex_id} needs at least five wrong answers (declared mistakes and extra plants); has {n}"


@pytest.mark.parametrize("ex_id,row", [(k, i) for k in ALL_IDS for i in range(len(DECLARED[k]))])
def test_every_declared_mistake_is_diagnosed(ex_id, row):
    """A declared mistake that the check cannot name is a dead detector: it equals the
    reference (the check passes it), or an earlier mistake shadows it, or it raises."""
    wrong, name = DECLARED[ex_id][row]
    result = _check(EXERCISES[ex_id], wrong)
    assert not result.passed, f"{ex_id}: the declared mistake {name!r} passes the check"
    assert result.mistake == name, f"{ex_id}: declared {name!r}, diagnosed {result.mistake!r}: {result}"
    assert result.hint, "a failing check must give a hint"
    # the name is the instructor's category; the student reads the explanation, which asks, where
    # a name like "forgot the scale" would state the fix
    assert not result.message.startswith("this looks like") and f": {name}." not in result.message, result.message


@pytest.mark.parametrize("ex_id,row", [(k, i) for k in ALL_IDS for i in range(len(MUTATIONS.get(k, [])))])
def test_mutations_fail_with_the_right_diagnosis(ex_id, row):
    wrong, mistake = MUTATIONS[ex_id][row]
    result = _check(EXERCISES[ex_id], wrong)
    assert not result.passed, f"{ex_id}: planted wrong answer #{row} passed"
    if mistake is not None:
        assert result.mistake == mistake, f"{ex_id} #{row}: diagnosed {result.mistake!r}, expected {mistake!r}: {result}"
    assert result.hint, "a failing check must give a hint"


@pytest.mark.parametrize("ex_id", FUNCTION_IDS)
@pytest.mark.parametrize("stub", ["template", "none", "zeros", "constant", "not callable"])
def test_stubs_cannot_pass(ex_id, stub):
    ex = EXERCISES[ex_id]
    if not isinstance(ex, DesignExercise):
        shape_source = ex.reference(**ex.make_inputs(torch.Generator().manual_seed(0)))
    else:  # a design (problem 3) is checked on the page's fixed inputs, so the reference's own
        # matrices returned as a constant are a right answer: the constant stub is something else
        shape_source = torch.zeros(3)
    answers = {
        "template": _template,
        "none": lambda *a, **kw: None,
        "zeros": lambda *a, **kw: torch.zeros_like(shape_source) if isinstance(shape_source, torch.Tensor) else 0,
        "constant": lambda *a, **kw: shape_source,  # the answer for *other* inputs
        "not callable": 42,
    }
    result = _check(ex, answers[stub])
    assert not result.passed, f"{ex_id} accepted the {stub} stub"
    if stub == "template":
        assert "not attempted" in result.message


# The machinery itself, on a hand-made exercise with known mistakes.

def _scale(x, k):
    return x * k


TOY = FunctionExercise(
    id="toy_ex1", title="scale a tensor",
    reference=_scale,
    make_inputs=lambda g: {"x": torch.randn(3, 4, generator=g), "k": 2.0 + torch.rand(1, generator=g).item()},
    mistakes=[Mistake("forgot to scale", "Multiply by k.", lambda x, k: x),
              Mistake("transposed", "Keep the input's layout.", lambda x, k: (x * k).T)],
    hint="Return x times k.",
)


def test_machinery_names_each_mistake():
    assert TOY(_scale).passed
    assert TOY(lambda x, k: x).mistake == "forgot to scale"
    assert TOY(lambda x, k: x).message == "not quite: Multiply by k."  # explained, not named
    assert TOY(lambda x, k: (x * k).T).mistake == "transposed"
    assert TOY(lambda x, k: x * k + 1).mistake == "constant offset"
    assert TOY(lambda x, k: -x * k).mistake == "wrong sign"
    assert TOY(lambda x, k: x * k * 3).mistake == "wrong scale"
    assert TOY(lambda x, k: x * k + (torch.arange(4) == 2)).mistake == "wrong values"
    assert "index 2 of dimension 1" in TOY(lambda x, k: x * k + (torch.arange(4) == 2)).message
    assert TOY(lambda x, k: (x * k)[:2]).mistake == "wrong shape"
    assert TOY(lambda x, k: None).mistake == "returned None"
    assert TOY(lambda x, k: ...).mistake == "returned Ellipsis"
    first = TOY(lambda x, k: (_ for _ in ()).throw(NotImplementedError)).message
    assert "not attempted" in first and "(3, 4)" in first and "scale a tensor" in first


def test_an_empty_body_is_not_attempted_but_a_missing_return_is_named():
    def student_version(x, k):
        """What otter's student notebook holds: the solution replaced by `...`."""
        ...

    def forgot_return(x, k):
        x * k

    first = TOY(student_version)
    assert "not attempted" in first.message and "(3, 4)" in first.message and first.mistake is None
    assert TOY(forgot_return).mistake == "returned None"
    r = TOY(lambda x, k: 1 / 0)
    assert not r.passed and "ZeroDivisionError" in r.message
    assert "Hint: Return x times k." in str(TOY(lambda x, k: x))
    assert 'data-passed="true"' in TOY(_scale)._repr_html_()


def test_value_exercise():
    ex = ValueExercise(id="toy_ex2", title="a count", expected=lambda: 12,
                       mistakes=[(6, "off by a factor of two", "Count both directions.")], hint="h")
    assert ex(12).passed and not ex(None).passed and ex(6).mistake == "off by a factor of two"
    assert ex(7).mistake == "wrong values"


def test_a_wrong_count_gets_no_direction_and_a_wrong_scale_no_factor():
    """A count can be resubmitted at will: "too large" would let a reader bisect to it, and a
    negative count's "wrong sign" would name it. A tensor off by a constant factor is told so,
    without the factor, which would name the missing scale (0.35 is 1 / sqrt(8))."""
    count = ValueExercise(id="toy_ex3", title="a count", expected=lambda: 12, hint="h")
    for wrong in (11, 13, 24, -12, 13.0):
        result = count(wrong)
        assert result.mistake == "wrong values", result
        assert not any(w in result.message for w in ("too large", "too small", "sign", "factor")), result
    # a number that is not a count keeps its direction, unless its exercise withholds it
    assert "too large" in ValueExercise(id="toy_ex4", title="a ratio", expected=lambda: 1.5, hint="h")(2.0).message
    quiet = ValueExercise(id="toy_ex5", title="a score", expected=lambda: 0.0353, hint="h", tells_direction=False)
    for wrong in (0.5, 0.1, 0.03, -0.0353):
        assert not any(w in quiet(wrong).message for w in ("too large", "too small", "sign")), quiet(wrong)


def test_problem_3b_cannot_be_bisected():
    # r50ps4: 0.5 "too large", 0.1 "too large", 0.03 "too small" ... found the score in 11 tries
    from circuitbook.checks.ps.p3 import design_induction_head

    answers = {}
    for wrong in (0.5, 0.1, 0.03, 0.04):
        result = checks.get("ps_p3b").check(wrong, design=design_induction_head)
        assert not result.passed
        answers[wrong] = result.message.replace(f"{wrong:.6g}", "X")
    assert len(set(answers.values())) == 1, answers  # the same words, whichever side
    scaled = TOY(lambda x, k: x * k / 8 ** 0.5)
    assert scaled.mistake == "wrong scale" and not any(c.isdigit() for c in scaled.message), scaled.message
    assert "0.35" not in str(checks.ch04_ex1(lambda tokens, lut: lut[tokens] * 2.0))


def test_unknown_exercise_ids_are_clear():
    with pytest.raises(KeyError, match="exercise ids look like"):
        checks.get("nonsense")
    with pytest.raises(KeyError, match="no exercises for 'ch99'"):
        checks.get("ch99_ex1")


def test_problem_set_progress_counts_passed_checks_not_clicks(monkeypatch):
    from circuitbook.checks import SESSION, ps

    monkeypatch.setattr(SESSION, "_latest", {})  # a fresh session, restored after the test
    assert str(ps.progress()).startswith("0 of 7 done; still open: problem 1 (ps_p1a, ps_p1b)")
    checks.ps_p2(ps.path_counts)
    checks.ps_p1a(ps.p1_reference())
    report = ps.progress()
    assert report.done == ["2"] and report.open["1"] == ["ps_p1b"], report
    assert str(report).startswith("1 of 7 done") and "problem 1 (ps_p1b)" in str(report)
    checks.ps_p2(lambda n_layers, n_heads: None)  # broken later: the latest check counts
    assert "2" not in ps.progress().done
    # the graders' direct .check() calls (hidden tests, other seeds) are not the student's progress
    checks.get("ps_p2").check(ps.path_counts, seed=1)
    assert "2" not in ps.progress().done
    assert 'class="circuitbook-progress-report"' in ps.progress()._repr_html_()


# --- every right answer passes, called as the notebook calls the check ------------------------------

import functools  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from circuitbook.checks import core, ps  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_a_number_may_come_in_any_form():
    for x in (3, 3.0, np.float32(3), np.float64(3), np.int64(3), torch.tensor(3.0), torch.tensor(3),
              torch.tensor([3.0], dtype=torch.float16), torch.tensor(3.0, dtype=torch.bfloat16), np.array(3.0),
              np.array([3.0])):
        assert core.as_number(x) == 3.0, type(x)
    for x in (True, np.bool_(True), torch.tensor(True), "3", [3], torch.ones(2), None, np.ones(2)):
        assert core.as_number(x) is None, x
    same = core.allclose()
    assert same(np.float32(0.25), 0.25) and same(torch.tensor(7), 7) and same(np.int64(7), 7)
    assert not same(torch.tensor([2.7, 3.2]), torch.tensor([2, 3]))  # not truncated to the integers


def _p1_forms(model: str) -> dict:
    ref = ps.p1_reference(model)
    rank = ref["full_rank"]
    split = {**{k: v for k, v in ref.items() if k != "full_rank"}, "full_QK_rank": rank, "full_OV_rank": rank}
    return {"as named": ref, "split full rank": split, "lower case": {k.lower(): v for k, v in split.items()},
            "lists": {k: list(v) if isinstance(v, tuple) else v for k, v in ref.items()},
            "torch.Size": {k: torch.Size(v) if isinstance(v, tuple) else v for k, v in ref.items()},
            "numpy ints": {k: tuple(np.int64(x) for x in v) if isinstance(v, tuple) else np.int64(v)
                           for k, v in ref.items()},
            "tensor ranks": {k: v if isinstance(v, tuple) else torch.tensor(v) for k, v in ref.items()},
            "float ranks": {k: v if isinstance(v, tuple) else float(v) for k, v in ref.items()}}


@pytest.mark.parametrize("model", sorted(ps.P1_MODELS))
def test_problem_1a_takes_every_spelling_of_the_right_answer(model):
    for form, answer in _p1_forms(model).items():
        result = ps.P1A.check(answer, model=model)
        assert result.passed, (form, str(result))


def test_problem_1a_names_its_keys_in_the_text():
    text = (ROOT / "book" / "induction" / "03_problems.py").read_text()
    problem_1 = text[text.index("## Problem 1"):text.index("checks.ps_p1a(")]
    for key in (*ps.P1_KEYS, *ps.P1_SPLIT):
        assert f"`{key}`" in problem_1, key


@pytest.mark.parametrize("model", sorted(ps.P1_MODELS))
def test_problem_1a_keeps_every_named_mistake_detectable_for_every_model(model):
    # the per-student variants draw problem 1's model from P1_MODELS (scripts/variants.py)
    right = ps.p1_reference(model)
    names = []
    for wrong, name, _ in ps.p1._p1_mistakes(model):
        assert not ps.P1A.compare(wrong, right), f"{model}: '{name}' gives the right answer"
        assert ps.P1A.check(wrong, model=model).mistake == name, (model, name)
        split = {**{k: v for k, v in wrong.items() if k != "full_rank"},
                 "full_QK_rank": wrong["full_rank"], "full_OV_rank": wrong["full_rank"]}
        assert ps.P1A.check(split, model=model).mistake == name, (model, name, "split spelling")
        names.append(name)
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("n_ctx", ps.P3_CONTEXTS)
def test_problem_3b_keeps_every_named_mistake_detectable_for_every_context(n_ctx):
    # the per-student variants draw problem 3's context length from P3_CONTEXTS
    for wrong, name, _ in ps.p3._p3b_mistakes(n_ctx):
        assert ps.P3B.check(wrong, n_ctx=n_ctx).mistake == name, (n_ctx, name)
    assert ps.P3B.check(torch.tensor(ps.p3b_reference(n_ctx), dtype=torch.float32), n_ctx=n_ctx).passed


def test_problem_1b_takes_any_float_dtype_and_any_right_pair():
    inv_t = lambda G: torch.linalg.inv(G).T  # noqa: E731
    right = {
        "float64": lambda W_Q, W_K, G: (W_Q @ G, W_K @ inv_t(G)),
        "float32": lambda W_Q, W_K, G: (W_Q.float() @ G.float(), W_K.float() @ inv_t(G.float())),
        "float16 out": lambda W_Q, W_K, G: tuple(t.half() for t in (W_Q @ G, W_K @ inv_t(G))),
        "solve": lambda W_Q, W_K, G: [W_Q @ G, torch.linalg.solve(G, W_K.T).T],
        "another G": lambda W_Q, W_K, G: (W_Q @ (2 * G), W_K @ inv_t(2 * G)),
    }
    for name, answer in right.items():
        result = ps.P1B.check(answer, seed=SEED)
        assert result.passed, (name, str(result))
    float32_mistake = ps.P1B.check(lambda W_Q, W_K, G: (W_Q.float() @ G.float(), W_K.float() @ G.float().T),
                                   seed=SEED)
    assert float32_mistake.mistake == "W_K times G^T", str(float32_mistake)


def test_problem_2_and_5b_take_numbers_in_any_form():
    as_floats = lambda n_layers, n_heads: {k: float(v) for k, v in ps.path_counts(n_layers, n_heads).items()}  # noqa
    as_numpy = lambda n_layers, n_heads: {k: np.int64(v) for k, v in ps.path_counts(n_layers, n_heads).items()}  # noqa
    for answer in (as_floats, as_numpy):
        assert ps.P2.check(answer, seed=SEED).passed
    for form in (torch.tensor, np.float32, np.float64):
        assert ps.P5B.check(lambda model, writer, reader, form=form: form(ps.k_composition(model, writer, reader)),
                            seed=SEED).passed


def _flags(ex) -> list[str]:
    import inspect

    return [n for n, p in inspect.signature(ex.reference).parameters.items()
            if isinstance(p.default, bool) or p.annotation in (bool, "bool")]


FLAGGED = sorted(k for k, v in EXERCISES.items() if isinstance(v, FunctionExercise) and _flags(v))


@pytest.mark.parametrize("ex_id", FLAGGED)
def test_every_flag_of_a_function_is_exercised(ex_id):
    """A function that ignores a flag must fail: each flag takes both values across the trials
    of a few seeds (what a student's check sees)."""
    ex = EXERCISES[ex_id]
    for flag in _flags(ex):
        seen = {ex.make_inputs(torch.Generator().manual_seed(s + t)).get(flag, "default")
                for s in (SEED, 0, 7) for t in range(ex.n_trials)}
        assert {True, False} <= seen, f"{ex_id}: the flag {flag} only ever takes {seen}"


# --- the reference guard ---------------------------------------------------------------------------------


def _own_path_counts(n_layers, n_heads):
    total = (1 + n_heads) ** n_layers
    return {"direct": 1, "single": n_layers * n_heads, "virtual": total - 1 - n_layers * n_heads, "total": total}


def test_the_guard_trips_on_the_reference_however_it_is_wrapped():
    def catches(n_layers, n_heads):
        try:
            return ps.path_counts(n_layers, n_heads)
        except BaseException:  # noqa: BLE001 - a submission hiding the tripwire
            return _own_path_counts(n_layers, n_heads)

    nameless = lambda *a, **k: ps.path_counts(*a, **k)  # noqa: E731
    nameless.__module__ = None  # crashed the old guard with AttributeError
    for name, answer in {"bare": ps.path_counts, "wrapper": lambda *a, **k: ps.path_counts(*a, **k),
                         "partial": functools.partial(ps.path_counts), "caught": catches,
                         "module None": nameless}.items():
        result = core.guarded(ps.P2.check, answer, seed=SEED)
        assert not result.passed and result.mistake == "reference solution", (name, str(result))
        assert ps.P2.check(answer, seed=SEED).passed, name  # unguarded (the notebook): no tripwire
    assert core.guarded(ps.P2.check, _own_path_counts, seed=SEED).passed
    assert ps.path_counts(2, 3)["total"] == 16  # the references are themselves again afterwards


def test_the_guard_replaces_no_code_and_holds_per_thread():
    """The guard watches calls; it does not swap the references' code objects (process-global,
    CPython-internal), so a check in another thread, unguarded, runs the reference untouched
    while a guarded check is running in this one, and a copy of the function made from its code
    object still trips it."""
    code = ps.path_counts.__code__
    seen = {}
    copy_of_reference = types.FunctionType(code, ps.path_counts.__globals__, "mine")

    def other_thread():
        seen["other"] = ps.P2.check(ps.path_counts, seed=SEED).passed

    def answer(n_layers, n_heads):
        seen["code untouched"] = ps.path_counts.__code__ is code
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        return _own_path_counts(n_layers, n_heads)

    assert core.guarded(ps.P2.check, answer, seed=SEED).passed
    assert seen == {"code untouched": True, "other": True}
    result = core.guarded(ps.P2.check, copy_of_reference, seed=SEED)
    assert not result.passed and result.mistake == "reference solution", str(result)


def test_the_hidden_test_uses_the_guard():
    sys.path.insert(0, str(ROOT / "scripts"))
    import assignments

    code = assignments.hidden_test("ps_p2", "path_counts", {}, {})
    exec(code, {"path_counts": _own_path_counts})  # noqa: S102 - our own generated test
    with pytest.raises(AssertionError, match="reference solution"):
        exec(code, {"path_counts": lambda *a, **k: ps.path_counts(*a, **k)})  # noqa: S102


def test_graded_feedback_leaves_out_the_answers_own_text():
    def leaks(W_Q, W_K, G):
        raise ValueError("the secret the answer read")

    result = ps.P1B.check(leaks, seed=SEED)
    assert "the secret" in str(result) and "the secret" in result._repr_html_()
    assert "the secret" not in result.graded() and "raised ValueError" in result.graded()

    class Stolen(Exception):
        pass

    custom = ps.P1B.check(lambda W_Q, W_K, G: (_ for _ in ()).throw(Stolen("x")), seed=SEED)
    assert "Stolen" not in custom.graded() and "raised an exception" in custom.graded()
    as_string = ps.P3B.check("the secret the answer read")
    assert "secret" not in str(as_string), str(as_string)


def test_an_answer_is_called_by_name_or_by_position():
    """A reader's parameters need not carry the statement's names: the check calls by name
    when they do (any order), else in the statement's order; a signature that fits neither
    is named, not reported as the answer's own TypeError."""
    ex = FunctionExercise(id="t_call", title="scale", reference=lambda x, k: x * k,
                          make_inputs=lambda g: {"x": torch.randn(3, generator=g), "k": 2.0})
    assert ex.check(lambda a, b: a * b).passed  # other names, the statement's order
    assert ex.check(lambda k, x: x * k).passed  # the statement's names, another order
    wrong = ex.check(lambda a: a)
    assert not wrong.passed and wrong.mistake == "wrong signature"
    assert "(a)" in wrong.message and "x, k" in wrong.message, wrong.message


def test_an_autograders_message_names_the_category_on_a_line_of_its_own():
    # the message of a failing test that make assignments writes (otter's and Gradescope's
    # results.json keep it): the check's line, then "[CHECK] <exercise>: <category>"
    def raises(x, k):
        raise ValueError("the answer's own text")

    class Custom(Exception):
        pass

    def raises_custom(x, k):
        raise Custom("the answer's own text")

    def template(x, k):
        raise NotImplementedError

    cases = {
        "forgot to scale": lambda x, k: x,
        "not attempted": template,
        "your function raised ValueError": raises,
        "your function raised an exception": raises_custom,
        "wrong shape": lambda x, k: x[0],
    }
    for category, answer in cases.items():
        result = TOY.check(answer, seed=SEED)
        assert result.category() == category, (category, str(result))
        text = result.autograded()
        assert text.splitlines()[-1] == f"[CHECK] toy_ex1: {category}", text
        assert text.startswith(result.graded()) and "the answer's own text" not in text
    right = TOY.check(_scale, seed=SEED)
    assert right.category() is None and right.autograded() == right.graded()
    value = ValueExercise(id="toy_ex2", title="a count", expected=lambda: 12)
    assert value.check(None).category() == "not attempted"
    assert value.check(7).autograded().endswith("[CHECK] toy_ex2: wrong values")


def test_ch04_tied_logits_checks_a_non_square_table_last():
    """Exercise 4.2's trials: two square tables, then one with vocab < d_model, whatever the seed,
    so a scale taken from lut.shape[0] (exercise 4.1's named mistake) fails with its name, and
    forgetting the transpose, which runs only on a square table, is still named."""
    import math

    ex = EXERCISES["ch04_ex2"]
    wrong_scale = lambda tokens, lut, b_U: math.sqrt(lut.shape[0]) * lut[tokens] @ lut.T + b_U  # noqa: E731
    no_transpose = lambda tokens, lut, b_U: math.sqrt(lut.shape[-1]) * lut[tokens] @ lut + b_U  # noqa: E731
    for seed in range(6):
        base = seed - seed % 3
        shapes = [tuple(ex.make_inputs(torch.Generator().manual_seed(base + t))["lut"].shape) for t in range(3)]
        assert [a == b for a, b in shapes] == [True, True, False], shapes
        assert ex.check(ex.reference, seed=seed).passed
        result = ex.check(wrong_scale, seed=seed)
        assert not result.passed and result.mistake == "scale from lut.shape[0]", result
        assert "lut.shape[0]" in result.message
        assert ex.check(no_transpose, seed=seed).mistake == "logits from the table's other axis"


def test_ch04_tied_logits_extra_scale_asks_how_often_not_where():
    """Exercise 4.2 checks logits only, and in this zero-layer model sqrt(d) lut[t] @ lut.T equals
    lut[t] @ (sqrt(d) lut).T, so the check cannot tell which end carries the factor: an answer that
    scales the unembedding instead passes. What it can tell is how many times the factor enters, so
    the extra-scale message and the hint ask that, and name neither end."""
    import math

    ex = EXERCISES["ch04_ex2"]
    both_ends = lambda tokens, lut, b_U: (math.sqrt(lut.shape[-1]) * lut)[tokens] @ (  # noqa: E731
        math.sqrt(lut.shape[-1]) * lut).T + b_U
    other_end = lambda tokens, lut, b_U: lut[tokens] @ (math.sqrt(lut.shape[-1]) * lut).T + b_U  # noqa: E731
    for seed in range(3):
        assert ex.check(ex.reference, seed=seed).passed
        result = ex.check(both_ends, seed=seed)
        assert not result.passed and result.mistake == "an extra scale", result
        assert "how many times" in result.message
        assert ex.check(other_end, seed=seed).passed  # the check's scope: the logits, not the end
    for text in (ex.mistakes[1].explanation, ex.hint):
        assert "how many times" in text.lower()
        assert not any(w in text.lower() for w in ("which end", "which of the two ends", "carries"))


def test_ch06_padding_feedback_names_each_nan_and_asks_without_the_fix():
    """Exercise 6.1's NaN answers: the commonest (keys masked with -inf, padding queries' rows then
    multiplied by the mask, where NaN * 0 stays NaN on the rows before any real token) has its own
    name and a message that points at NaN * 0; the mask applied after the softmax and renormalised
    (0/0 on padding rows) gets the NaN-row message, which asks about the student's own computation,
    not about a softmax. The uniform-row message and the hint ask questions, naming no fill value
    and no place for the mask."""
    from mutations.ch06 import masked_after_softmax_renormalised, padding_rows_zeroed_by_a_product

    ex = EXERCISES["ch06_ex1"]
    uniform = next(m for m in ex.mistakes if m.name == "rows of padding queries are uniform")
    for seed in range(5):
        assert ex.check(ex.reference, seed=seed).passed
        product = ex.check(padding_rows_zeroed_by_a_product, seed=seed)
        assert not product.passed and product.mistake == "rows of padding queries before any real token are NaN"
        assert "NaN times 0" in product.message, product.message
        renormalised = ex.check(masked_after_softmax_renormalised, seed=seed)
        assert not renormalised.passed and renormalised.mistake == "rows of padding queries are NaN"
        assert "your computation" in renormalised.message and "a softmax give" not in renormalised.message
        flat = ex.check(uniform.wrong, seed=seed)
        assert not flat.passed and flat.mistake == uniform.name and "which step" in flat.message
        assert "fill value" not in flat.message, flat.message
    assert "before the softmax" not in ex.hint and "go before" not in ex.hint, ex.hint


def test_ch06_mistake_names_say_the_symptom_not_the_fix():
    """The names reach the instructor's report and the autograder's test output ("[CHECK] ch06_ex2:
    <name>"), so none says what to do (scale, swap, which matrix, no softmax); each is still the
    diagnosis its own wrong answer gets (test_every_declared_mistake_is_diagnosed)."""
    names = {ex_id: [m.name for m in EXERCISES[ex_id].mistakes] for ex_id in ("ch06_ex1", "ch06_ex2")}
    assert "pattern sharper than the paper's" in names["ch06_ex1"]
    assert names["ch06_ex2"] == ["scores too large by a constant factor", "scores too small by a constant factor",
                                 "scores laid out key by query", "scores symmetric in query and key",
                                 "rows of the scores sum to 1"]
    fixes = ("forgot", "not scaled", "swapped", "used W_Q", "applied", "scale from")
    assert not [n for ns in names.values() for n in ns if any(f in n for f in fixes)], names
