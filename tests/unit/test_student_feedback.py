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


def _key_side_layer1_effects():
    """Problem 7's key-side measurement, made here from the statement: toy-2l, 16 sequences of 32
    random tokens repeated (seed 2), the first copy's even positions replaced (generator seed 11),
    the loss read where the match is spoiled and the copied token clean (n + i, i even)."""
    from circuitbook.data import repeated_random_tokens
    from circuitbook.models import load
    from circuitbook.patching import mean_loss, patch_heads, patching_run

    model, n = load("toy-2l"), 32
    clean = repeated_random_tokens(16, n, model.cfg.d_vocab, seed=2)
    bad = clean.clone()
    bad[:, 0:n:2] = torch.randint(0, model.cfg.d_vocab, (16, n // 2), generator=torch.Generator().manual_seed(11))
    at = [n + i for i in range(0, n - 1, 2)]
    return patch_heads(patching_run(model, clean, bad, lambda lg: mean_loss(lg, clean, at)))[1]


@pytest.fixture(scope="module")
def decisive():
    """The number that decides problem 7b's reading A: the largest single layer-1 effect (A says no
    head is enough alone, which one head restoring all of the gap would refute), computed from the
    table, not read off the figure's two decimals."""
    return float(_key_side_layer1_effects().max())


@pytest.mark.parametrize("letter", ["A", "a", "A.", " (A) ", "A) No layer-1 head carries induction alone"])
def test_problem_7b_reads_the_letter_however_it_is_written(letter, decisive):
    assert checks.get("ps_p7b").check((letter, decisive)).passed


@pytest.mark.parametrize("letter", ["E", "maybe", ""])
def test_problem_7b_names_an_answer_that_is_no_option(letter, decisive):
    result = checks.get("ps_p7b").check((letter, decisive))
    assert not result.passed and result.mistake == "wrong form"
    assert "A, B, C, D" in result.message and "expected a str" not in result.message, result.message


def test_problem_7b_a_wrong_option_does_not_say_which_is_right(decisive):
    result = checks.get("ps_p7b").check(("B", decisive))
    assert not result.passed and "A" not in result.message.replace("A)", ""), result.message


def test_problem_7b_cannot_be_solved_by_elimination(decisive):
    # issue 39 and the second referee: four tries used to find the answer, and the wrong letters' named
    # explanations left the right one by elimination. Every pair that is not the answer now gets the
    # same words, whether the letter, the number or both are wrong, and none explains a statement
    ex = checks.get("ps_p7b")
    assert all(not ex.check(letter).passed for letter in "ABCD")
    messages = set()
    for number in (0.0, 0.25, 1.0, decisive, decisive + 0.05, decisive - 0.05):
        results = [ex.check((letter, number)) for letter in "ABCD"]
        if number == decisive:
            assert results[0].passed and not any(r.passed for r in results[1:])
            results = results[1:]
        assert not any(r.passed for r in results), (number, [str(r) for r in results])
        assert all(r.mistake == "wrong pair" for r in results), [str(r) for r in results]
        messages |= {r.message for r in results}
    assert len(messages) == 1, messages
    message = messages.pop()
    assert "correct" not in message and "looks like" not in message and "sizeable" not in message
    # the number must be computed from the table: the figure's two decimals are not enough
    printed = round(decisive, 2)
    if abs(printed - decisive) > ps.p7.P7B_TOLERANCE:
        assert not ex.check(("A", printed)).passed
    assert ex.check(("A", decisive), effects=_key_side_layer1_effects()).passed
    # the hint does not paraphrase the right option
    assert "enough" not in (ex.hint or "") and "alone" not in (ex.hint or "")


def test_problem_3b_judges_the_students_own_design():
    # the second referee: designs that pass problem 3 were rejected in 3b because the check compared with
    # the reference design's broken score. The page passes the student's design, and the check measures it
    from circuitbook.checks.ps.p3 import _p3_space

    space = _p3_space(ps.P3_CTX)
    designs = [lambda t, p: (30 * t.T @ p - 10 * t.T @ t, 10 * t.T @ t),
               lambda t, p: (30 * t.T @ p + 5 * t.T @ t, 10 * t.T @ t)]
    for design in designs:
        assert checks.get("ps_p3").check(design).passed
        broken = ps.scaffold_behaviour(*design(space["S_tok"], space["S_prev"]), prev_into="S_tok",
                                       n_ctx=ps.P3_CTX)["induction_score"]
        assert abs(broken - ps.p3b_reference(ps.P3_CTX)) > 0.01 * ps.p3b_reference(ps.P3_CTX)  # not the book's
        assert checks.get("ps_p3b").check(broken, design=design, n_ctx=ps.P3_CTX).passed
        # the pair itself may be passed too, and the unbroken score is still named
        pair = design(space["S_tok"], space["S_prev"])
        assert checks.get("ps_p3b").check(broken, design=pair, n_ctx=ps.P3_CTX).passed
        unbroken = ps.scaffold_behaviour(*pair, n_ctx=ps.P3_CTX)["induction_score"]
        assert checks.get("ps_p3b").check(unbroken, design=design,
                                          n_ctx=ps.P3_CTX).mistake == "the unbroken scaffold's score"
    # a design that does not build is reported, not crashed on
    result = checks.get("ps_p3b").check(0.1, design=lambda t, p: 1 / 0, n_ctx=ps.P3_CTX)
    assert not result.passed and "design" in result.message
    # the page passes the design
    page = open("book/induction/03_problems.py").read()
    assert "checks.ps_p3b(broken_score, design=design_induction_head" in page


def test_problem_7_positions_are_the_spoiled_predictions_and_nothing_else():
    # the key side: the query at n + i (token i) needs key i + 1, whose previous token i is
    # corrupted when i is even, and copies token i + 1 (odd, clean); the query side: the query at
    # n + j (j odd) keeps its own token after a corrupted one; 2n - 1 predicts nothing
    assert ps.spoiled_positions(8, "key") == [8, 10, 12, 14]
    assert ps.spoiled_positions(8, "query") == [9, 11, 13]
    ex = checks.get("ps_p7c")
    assert ex.check(lambda n, side: ps.spoiled_positions(n, side)[::-1]).passed  # any order
    one_later = ex.check(lambda n, side: [p + 1 for p in ps.spoiled_positions(n, side)], seed=0)
    assert one_later.mistake == "token positions instead of prediction positions", str(one_later)
    # the statement says which positions are meant, before the check
    page = open("book/induction/03_problems.py").read()
    statement = page[page.index("## Problem 7"):page.index("checks.ps_p7c(")]
    assert "predict" in statement and "p + 1" in statement and "0, 2, \\dots, n - 2" in statement


def test_problem_6b_closest_is_a_difference_and_a_tie_goes_to_the_lower_index():
    from circuitbook.checks.ps import p6

    ex = checks.get("ps_p6b")
    by_ratio = ex.check(lambda targets, norms, excluded: p6._p6b_variant(targets, norms, excluded, ratio=True), seed=0)
    assert by_ratio.mistake == "matched by ratio", str(by_ratio)
    higher = ex.check(lambda targets, norms, excluded: p6._p6b_variant(targets, norms, excluded, last_on_tie=True),
                      seed=0)
    assert higher.mistake == "broke a tie the other way", str(higher)
    assert "lower" not in higher.message  # the feedback points at the statement, not at the rule
    page = open("book/induction/03_problems.py").read()
    statement = page[page.index("Now your part of the design: the controls"):page.index("checks.ps_p6b(")]
    assert "absolute difference" in statement and "not a ratio" in statement and "lower head index" in statement


def test_problem_5_a_mean_per_position_is_named_and_the_batch_is_stated():
    result = checks.get("ps_p5").check(ps.p5._p5_per_position, seed=0)
    assert result.mistake == "a mean per position", str(result)
    page = open("book/induction/03_problems.py").read()
    statement = page[page.index("Now break the circuit"):page.index("checks.ps_p5(")]
    assert "all $2n$ positions of all the" in statement and "same" in statement


def test_problems_4_5_7_each_have_a_decision_judged_by_its_consequence():
    # problem 4: the control batch (any fresh uniform draw passes; the test's repeat does not)
    ex = checks.get("ps_p4b")
    assert ex.check(lambda tokens, lo, hi, seed: torch.randint(lo, hi, tokens.shape)).passed
    kept = ex.check(lambda tokens, lo, hi, seed: tokens)
    assert kept.mistake == "kept the repeat" and "10%" in kept.message, str(kept)
    # problem 5: the head to beat is the most damaging other one, by each measure
    rows = {0: (0.9, 0.1), 1: (0.6, 0.3), 2: (0.05, 3.0), 3: (0.8, 0.9)}
    assert ps.comparison_heads(rows, 2) == (1, 3)
    # problem 7: the positions, above
    assert set(ps.PROBLEMS["4"]) >= {"ps_p4b"} and "ps_p5c" in ps.PROBLEMS["5"] and "ps_p7c" in ps.PROBLEMS["7"]


def test_problem_1a_full_rank_beside_the_split_ranks_is_read():
    right = ps.p1_reference()
    both = {**right, "full_QK_rank": right["full_rank"], "full_OV_rank": right["full_rank"]}
    assert checks.get("ps_p1a").check(both).passed
    wrong = {**both, "full_OV_rank": right["full_rank"] + 1}
    result = checks.get("ps_p1a").check(wrong)
    assert not result.passed and "full_OV_rank" in result.message and "missing []" not in result.message, result


def test_problem_1b_messages_write_inverses_as_text_not_tex():
    # the referee (r47): "G^{-1}" and "G^{-T}" are TeX in the student's feedback; p1 writes G^-1, G^-T
    wrong = checks.get("ps_p1b").check(lambda W_Q, W_K, G: (W_Q @ G, W_K @ torch.linalg.inv(G)))
    assert not wrong.passed and wrong.mistake == "W_K times G^-1", str(wrong)
    assert "(W_K G^-1)^T" in wrong.message and "{" not in wrong.message and "}" not in wrong.message, wrong.message
    # the transpose step is the student's to take (the referee, r49): the feedback names it and stops
    assert "G^-T" not in wrong.message, wrong.message
    for mistake in ps.P1B.mistakes:
        assert "^{" not in mistake.name + mistake.explanation, mistake.name
    assert checks.get("ps_p1b").check(ps.reparametrize).passed


def test_problem_2_hint_asks_what_a_path_decides_without_the_expansion():
    # the referee (r47): "the product of the layers' (identity + heads) factors ... expand it" handed over
    # the (1 + n)^L structure; the hint asks what a path does at each layer instead
    hint = checks.get("ps_p2").hint
    assert "identity + heads" not in hint and "expand" not in hint and "(1 + n" not in hint, hint
    assert "each layer" in hint, hint
    wrong = checks.get("ps_p2").check(lambda n_layers, n_heads: {
        "direct": 1, "single": n_layers * n_heads, "virtual": 2 ** n_layers - 1 - n_layers * n_heads,
        "total": 2 ** n_layers})
    assert not wrong.passed and wrong.mistake == "2^L paths" and wrong.hint == hint, str(wrong)
    assert checks.get("ps_p2").check(ps.path_counts).passed


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



def _positional_head(S_tok, S_prev):
    """The third referee's head: W_QK sends the query at p to the key at p - n + 1 by position alone
    (n = n_ctx / 2, the period of the page's test sequences), with the page's copying W_OV."""
    V, N = S_tok.shape[0], S_prev.shape[1] - 2 * S_tok.shape[0]
    n = N // 2
    S_pos = torch.eye(2 * V + N, dtype=torch.float64)[V:V + N]
    W_QK = 30 * sum(S_pos[q, :, None] @ S_pos[q - n + 1, None, :] for q in range(n - 1, N))
    return W_QK, 10 * S_tok.T @ S_tok


def test_problem_3_a_head_that_finds_the_match_by_position_fails():
    # on sequences that all repeat after n_ctx / 2 tokens a positional head scores 1 and predicts the
    # second copy perfectly; where a prefix of random length shifts the repeat it finds nothing
    from circuitbook.checks.ps.p3 import _p3_space

    space = _p3_space(ps.P3_CTX)
    pair = _positional_head(space["S_tok"], space["S_prev"])
    fixed = ps.scaffold_behaviour(*pair)
    assert fixed["induction_score"] > 0.99 and fixed["loss_second_copy"] < 0.01, fixed  # the old test's blind spot
    result = checks.get("ps_p3").check(_positional_head)
    assert not result.passed and result.mistake == "finds the match by position", str(result)
    assert "S_prev" not in result.message and "S_tok" not in result.message, result.message  # no fix given
    # the book's design passes both batches, and problem 3b sends the positional head back to problem 3
    assert checks.get("ps_p3").check(ps.design_induction_head).passed
    broken = ps.scaffold_behaviour(*pair, prev_into="S_tok")["induction_score"]
    result = checks.get("ps_p3b").check(broken, design=_positional_head, n_ctx=ps.P3_CTX)
    assert not result.passed and "problem 3" in result.message, str(result)
    # the shifted batch: every repeat offset differs from n_ctx / 2, and the book's design finds each match
    for n_ctx in (16, ps.P3_CTX, 64):
        tokens, prefixes = ps.p3.prefixed_tokens(n_ctx=n_ctx)
        for row, k in zip(tokens, prefixes):
            m = (len(row) - k) // 2
            assert k >= 2 and m != n_ctx // 2 and torch.equal(row[k:k + m], row[k + m:])
            assert len(set(row[:k + m].tolist())) == k + m  # one earlier occurrence for each query


def test_problem_3_named_mistakes_do_not_state_the_fix():
    for mistake in checks.get("ps_p3").mistakes:
        assert "S_prev^T" not in mistake.explanation and "must be positive" not in mistake.explanation
        assert "swapped" not in mistake.name, mistake.name


def test_problem_4b_explains_a_shuffle_only_for_a_shuffle():
    ex = checks.get("ps_p4b")
    shuffled = ex.check(ps.p4._p4b_shuffled, seed=0)
    assert shuffled.mistake == "every token twice" and "rearranged" in shuffled.message, str(shuffled)
    # a fresh uniform draw from a range too narrow repeats tokens by chance: not a shuffle
    narrow = ex.check(lambda tokens, lo, hi, seed: torch.randint(lo, lo + 30, tokens.shape), seed=0)
    assert narrow.mistake == "tokens repeat by chance", str(narrow)
    assert "shuffle" not in narrow.message and "rearranged" not in narrow.message, narrow.message
    assert "?" in narrow.message and "afresh" not in narrow.message + shuffled.message


def test_problem_4b_a_run_of_ids_in_every_row_is_not_a_control():
    # no repeat and no token twice, yet no draw: the same run of consecutive ids in every sequence
    ex = checks.get("ps_p4b")
    run = ex.check(lambda tokens, lo, hi, seed: (lo + torch.arange(tokens.shape[1])).repeat(tokens.shape[0], 1),
                   seed=0)
    assert not run.passed and run.mistake == "a fixed pattern", str(run)
    assert "equal parts" in run.message and "sequences are the same" in run.message, run.message
    assert "randint" not in run.message and "uniform" not in run.message, run.message
    # the reference, and any fresh uniform draw, still pass
    assert ex.check(ps.p4.unrepeated_tokens, seed=0).passed
    assert ex.check(lambda tokens, lo, hi, seed: torch.randint(lo, hi, tokens.shape), seed=1).passed
    # shares are printed to a tenth of a percent, so a share just over the bar never reads as the bar
    narrow = ex.check(lambda tokens, lo, hi, seed: torch.randint(lo, lo + 30, tokens.shape), seed=0)
    share = narrow.message.split("In yours ")[1].split("%")[0]
    assert "." in share and float(share) > 10, narrow.message
    page = open("book/induction/03_problems.py").read()
    statement = page[page.index("The chance level is your design decision"):page.index("def head_scores")]
    assert "four equal parts" in statement and "no two sequences" in statement


def test_problem_5c_the_page_applies_the_rule_batch_by_batch():
    # the rule picks the most damaging other head of the table it is given: the page gives it each
    # fresh batch's own table, so that beating the head it picks means beating every other head there
    page = open("book/induction/03_problems.py").read()
    cell = page[page.index("worst_score, worst_loss = comparison_heads(rows"):page.index("def batch_boot")]
    assert "comparison_heads(rows_t, writer[1])" in cell and "for head in range(model.cfg.n_heads)" in cell


# --- a course's choice: recorded in the notebook, graded by the autograder (issue 39) -----------

def test_in_a_course_problem_7b_records_every_well_formed_answer_in_the_same_words(decisive):
    # trying each option in a course's notebook must tell nothing: the right pair and every wrong one
    # get the same reply (the answer echoed, no verdict, no hint), and each counts as answered
    ex = checks.get("ps_p7b")
    assert ex.verdict_in_autograder
    tries = [(letter, number) for letter in "ABCD" for number in (decisive, 0.0, decisive + 0.05)]
    replies = set()
    for answer in tries:
        session = checks.core.Session()
        original, checks.core.SESSION = checks.core.SESSION, session
        try:
            result = ex.record(answer)
        finally:
            checks.core.SESSION = original
        assert not result.passed and result.category() == checks.core.RECORDED
        assert session.recorded("ps_p7b") and session.settled("ps_p7b") and not session.passed("ps_p7b")
        assert "Hint" not in str(result) and str(result).startswith("[RECORDED] ps_p7b:")
        replies.add(str(result).replace(str(answer), "<answer>"))
    assert len(replies) == 1, replies
    # the autograder's test still tells the right pair from the others
    assert ex.check(("A", decisive)).passed and not ex.check(("B", decisive)).passed


@pytest.mark.parametrize("answer", [None, "A", ("E", 0.5), ("A", "half")])
def test_in_a_course_problem_7b_still_says_what_is_wrong_with_the_form(answer):
    # a malformed answer would be graded wrong however right its idea: the student is told at once,
    # as the self-study check tells it, and nothing is recorded
    ex = checks.get("ps_p7b")
    result = ex.record(answer)
    assert result.category() in ("not attempted", "wrong form"), str(result)
    assert result.message == ex.check(answer).message


def test_record_is_refused_for_an_exercise_whose_verdict_the_notebook_gives():
    with pytest.raises(ValueError, match="ps_p1a gives its verdict in the notebook"):
        checks.get("ps_p1a").record(ps.p1_reference())


def test_the_progress_tracker_counts_a_recorded_answer_as_answered_not_passed(decisive):
    from circuitbook.widgets.progress import ProblemSet

    session = checks.core.Session()
    problems = ProblemSet(ps.PROBLEMS, session=session)
    tracker = problems.tracker("7")
    assert "ps_p7b" in tracker.still_open["7"]
    session.record(checks.get("ps_p7c").check(ps.spoiled_positions))
    session.record(checks.get("ps_p7").check(ps.patching_shares))
    original, checks.core.SESSION = checks.core.SESSION, session
    try:
        checks.get("ps_p7b").record(("C", 0.3))
    finally:
        checks.core.SESSION = original
    assert "7" in problems.done and ps.progress(session).done == problems.done
    assert tracker.recorded == ["ps_p7b"]
    assert "ps_p7b: answer recorded, graded by the autograder" in str(tracker)
