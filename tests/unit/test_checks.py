"""The checks are themselves tested: the reference passes, every row of the mutation table
fails with the right diagnosis, and no stub, constant or untouched template can pass."""

from __future__ import annotations

import pytest
import torch

from circuitbook import checks
from circuitbook.checks import FunctionExercise, Mistake, ValueExercise

from mutations import MUTATIONS

EXERCISES = checks.all_exercises()
FUNCTION_IDS = sorted(k for k, v in EXERCISES.items() if not isinstance(v, ValueExercise))
ALL_IDS = sorted(EXERCISES)


SEED = 1234  # fixed in the tests so a run is reproducible; students get fresh inputs each time


def _check(ex, answer):
    return ex(answer, seed=SEED) if isinstance(ex, FunctionExercise) else ex(answer)


def _template(*args, **kwargs):
    raise NotImplementedError("Write your solution here, then run this cell.")


@pytest.mark.parametrize("ex_id", ALL_IDS)
def test_reference_passes(ex_id):
    ex = EXERCISES[ex_id]
    answer = ex.expected() if isinstance(ex, ValueExercise) else ex.reference
    result = _check(ex, answer)
    assert result.passed, str(result)


@pytest.mark.parametrize("ex_id", ALL_IDS)
def test_mutation_table_has_five_rows(ex_id):
    assert len(MUTATIONS.get(ex_id, [])) >= 5, f"{ex_id} needs at least five planted wrong answers"


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
    if isinstance(ex, FunctionExercise):
        shape_source = ex.reference(**ex.make_inputs(torch.Generator().manual_seed(0)))
    else:  # an exercise that runs the answer in a model (problem 3): its reference takes no random inputs
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


def test_unknown_exercise_ids_are_clear():
    with pytest.raises(KeyError, match="exercise ids look like"):
        checks.get("nonsense")
    with pytest.raises(KeyError, match="no exercises for 'ch99'"):
        checks.get("ch99_ex1")


def test_problem_set_progress_counts_passed_checks_not_clicks():
    from circuitbook.checks import SESSION, ps

    SESSION.clear()
    try:
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
    finally:
        SESSION.clear()
    assert 'class="circuitbook-progress-report"' in ps.progress()._repr_html_()
