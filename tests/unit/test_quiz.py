"""The induction module's quiz cannot be gamed: the right option is not systematically the
longest nor in one position, every wrong option says what is wrong with it, and the math
reads correctly without MathJax."""

from __future__ import annotations

import collections
import html
import re
from pathlib import Path

import pytest

from circuitbook.widgets import quiz_questions
from circuitbook.widgets.quiz import Quiz, plain, rich, tex_to_html

QUESTIONS = quiz_questions.QUESTIONS
PAGE = Path(__file__).resolve().parents[2] / "book" / "induction" / "04_quiz.py"


def balance(questions: list[dict]) -> tuple[int, collections.Counter]:
    """(questions whose right option is the longest as read, right answers per position)."""
    longest = sum(
        max(range(len(q["options"])), key=lambda i: len(plain(q["options"][i]))) == q["correct"]
        and sum(len(plain(o)) == len(plain(q["options"][q["correct"]])) for o in q["options"]) == 1
        for q in questions)
    return longest, collections.Counter(q["correct"] for q in questions)


def test_the_quiz_has_eight_questions_of_four_options():
    assert len(QUESTIONS) == 8
    assert all(len(q["options"]) == 4 for q in QUESTIONS)


def test_the_right_option_is_rarely_the_longest():
    longest, _ = balance(QUESTIONS)
    assert longest <= 2, f"the right option is the longest in {longest} of {len(QUESTIONS)} questions"


def test_no_position_holds_the_right_answer_more_than_twice():
    _, positions = balance(QUESTIONS)
    assert max(positions.values()) <= 2, positions


def test_the_balance_test_catches_a_gameable_quiz():
    """The quiz this replaced: the right option the longest in 6 of 7, option B right in 4."""
    gameable = [{"options": ["a", "the long right answer", "b", "c"], "correct": 1}] * 4 + \
               [{"options": ["the long right answer", "a", "b", "c"], "correct": 0}] * 2 + \
               [{"options": ["a", "b", "the long right answer", "c"], "correct": 2}]
    longest, positions = balance(gameable)
    assert longest == 7 and positions[1] == 4


def test_every_wrong_option_says_what_is_wrong_with_it():
    for n, q in enumerate(QUESTIONS, 1):
        for i, why in enumerate(q["why_not"]):
            if i == q["correct"]:
                assert why is None, f"question {n}: the right option needs no why-not"
            else:
                assert why and len(why) > 30, f"question {n}, option {i}: say which misconception it is"


def test_question_seven_asks_for_what_its_answer_gives():
    q = QUESTIONS[6]
    assert "single" not in q["question"] and "combination" in q["question"]
    right = q["options"][q["correct"]]
    assert right.count(",") + right.count(" and ") >= 2  # several pieces of evidence, as asked


def test_question_seven_does_not_require_a_head_to_be_necessary_alone():
    """Redundant circuits (the book's own toy-2l and SmolLM2) fail a one-head ablation test:
    the right answer must not ask for it, and the option that does must be wrong."""
    q = QUESTIONS[6]
    right = q["options"][q["correct"]]
    assert "alone" not in right
    alone = [i for i, o in enumerate(q["options"]) if "ablating it alone" in o]
    assert alone and all(i != q["correct"] for i in alone)
    assert "redundan" in q["why_not"][alone[0]]


def test_question_eight_quotes_a_patching_effect_its_numbers_give():
    """The normalised effect in the question is (patched - corrupted) / (clean - corrupted) of the
    losses it quotes, and the right option reads it as sufficiency (denoising), not necessity."""
    q = QUESTIONS[7]
    clean, corrupted, patched, effect = (float(x) for x in re.findall(r"\d+\.\d+", plain(q["question"])))
    assert abs((patched - corrupted) / (clean - corrupted) - effect) < 0.005
    right = q["options"][q["correct"]]
    assert "necessary" not in right and "alone" in right
    assert any("necessary" in o for o in q["options"])


def test_math_reads_correctly_without_mathjax():
    assert tex_to_html("W_{QK}") == "<i>W</i><sub><i>QK</i></sub>"
    assert tex_to_html("W_K^\\top") == "<i>W</i><sub><i>K</i></sub><sup>⊤</sup>"
    assert tex_to_html("G^{-\\top}") == "<i>G</i><sup>\u2212⊤</sup>"
    assert tex_to_html("d_\\text{model} \\le 64") == "<i>d</i><sub>model</sub> ≤ 64"
    assert plain("rank $\\operatorname{rank} W_{OV} \\le 64$") == "rank rank WOV ≤ 64"
    span = rich("the $W_{QK}$ circuit")
    assert 'data-tex="W_{QK}"' in span and span.startswith("the <span class=\"cb-math\"")
    for q in QUESTIONS:
        texts = [q["question"], q["explanation"], *q["options"], *(w for w in q["why_not"] if w)]
        for text in texts:
            seen = plain(text)
            assert "$" not in seen and "\\" not in seen and "{" not in seen, f"raw TeX left in: {seen}"


def test_the_widget_ships_rendered_questions_and_starts_unsubmitted():
    quiz = Quiz(QUESTIONS)
    assert not quiz.submitted and quiz.score is None and quiz.attempts == 0
    assert quiz.answers == [None] * len(QUESTIONS)
    first = quiz.questions[0]
    assert "<sub>" in first["question"] and first["why_not"][first["correct"]] is None
    quiz.answers = [q["correct"] for q in QUESTIONS]
    quiz.submitted = True
    assert quiz.score == len(QUESTIONS)


def test_the_widget_refuses_a_question_without_why_not():
    bad = {k: v for k, v in QUESTIONS[0].items() if k != "why_not"}
    with pytest.raises(ValueError, match="why_not"):
        Quiz([bad])


def test_the_script_can_retry():
    js = (Path(__file__).resolve().parents[2] / "src" / "circuitbook" / "widgets" / "quiz.js").read_text()
    assert "cb-retry" in js and 'model.set("submitted", false)' in js
    # a wrong answer is not told the right option, so that a retry means something
    assert "q.options[q.correct]" not in js
    assert html.escape("<") == "&lt;" and re.search(r"tex2chtmlPromise", js)


def test_the_page_does_not_print_its_answer_key():
    """The questions, with their right options and explanations, live in the package; the
    page's cell only builds the widget, and its input is removed from the site."""
    page = PAGE.read_text()
    assert '"correct"' not in page and "why_not" not in page
    assert 'tags=["remove-input"]' in page and "Quiz(QUESTIONS)" in page
