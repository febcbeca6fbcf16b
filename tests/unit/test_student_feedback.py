"""Feedback on the answers a student actually gave (issue 39's walk through the problem set).

Each test takes one answer that was rejected with a misleading message, or accepted or called
in a way the statement never said, and asserts what the feedback must do now: name the part that
falls short, read the answer the way the statement allows, and never give the answer away.
"""

from __future__ import annotations

import pytest
import torch

from circuitbook import checks
from circuitbook.checks import ps


def test_problem_3_a_strong_match_with_a_weak_copy_is_told_the_copy_is_short():
    # W_QK = 100 S_tok^T S_prev attends perfectly; W_OV = 3 S_tok^T S_tok copies too weakly for the
    # stated loss criterion: the message must blame the copy, not the attention
    answer = lambda S_tok, S_prev: (100 * S_tok.T @ S_prev, 3 * S_tok.T @ S_tok)  # noqa: E731
    result = checks.get("ps_p3").check(answer)
    assert not result.passed and result.mistake == "too weak", str(result)
    assert "W_QK is strong enough" in result.message and "copy" in result.message, result.message
    assert "softmax barely prefers" not in result.message, result.message
    # the criterion the check applies is stated on the page before the check
    page = open("book/induction/03_problems.py").read()
    statement = page[page.index("## Problem 3"):page.index("checks.ps_p3(")]
    assert "0.9" in statement and "0.5 nats" in statement


def test_problem_3_parameters_may_have_any_names():
    result = checks.get("ps_p3").check(lambda t, p: (30 * t.T @ p, 10 * t.T @ t))
    assert result.passed, str(result)


@pytest.mark.parametrize("answer", ["A", "a", "A.", " (A) ", "A) No layer-1 head carries induction alone"])
def test_problem_7b_reads_the_letter_however_it_is_written(answer):
    assert checks.get("ps_p7b").check(answer).passed


@pytest.mark.parametrize("answer", ["E", "maybe", ""])
def test_problem_7b_names_an_answer_that_is_no_option(answer):
    result = checks.get("ps_p7b").check(answer)
    assert not result.passed and result.mistake == "wrong form"
    assert "A, B, C, D" in result.message and "expected a str" not in result.message, result.message


def test_problem_7b_a_wrong_option_does_not_say_which_is_right():
    result = checks.get("ps_p7b").check("B")
    assert not result.passed and "A" not in result.message.replace("A)", ""), result.message


def test_problem_1a_full_rank_beside_the_split_ranks_is_read():
    right = ps.p1_reference()
    both = {**right, "full_QK_rank": right["full_rank"], "full_OV_rank": right["full_rank"]}
    assert checks.get("ps_p1a").check(both).passed
    wrong = {**both, "full_OV_rank": right["full_rank"] + 1}
    result = checks.get("ps_p1a").check(wrong)
    assert not result.passed and "full_OV_rank" in result.message and "missing []" not in result.message, result


def test_problem_4_a_pattern_read_as_key_query_is_named():
    def transposed(model, tokens):
        n = tokens.shape[1] // 2
        _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("hook_pattern"))
        ind, prev = [], []
        for layer in range(model.cfg.n_layers):
            pattern = cache["pattern", layer].transpose(-1, -2)  # read as [batch, head, key, query]
            ind.append(pattern.diagonal(offset=-(n - 1), dim1=-2, dim2=-1)[..., 1:].mean((0, 2)))
            prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean((0, 2)))
        return torch.stack(ind), torch.stack(prev)

    result = checks.get("ps_p4").check(transposed, seed=0)
    assert result.mistake == "pattern read as [key, query]", str(result)
    assert "above the" in result.message and "diagonal" in result.message


def test_problem_5_a_wrong_pair_is_explained_by_name():
    def per_position_mean(model, head, reader, tokens):
        score, loss = ps.ablation_effect(model, head, reader, tokens)
        return score * 0.9, loss * 1.1  # both off: a different ablation than asked

    result = checks.get("ps_p5").check(per_position_mean, seed=0)
    assert not result.passed
    assert "induction score" in result.message and "loss on the second copy" in result.message, result.message
    assert "element 0" not in result.message
