"""The problem set's checks against references that share no code with them.

Every reference here is computed by hand in float64 (tests/unit/hand_forward.py: a forward pass
written out from the model's weights, one head at a time, and the measurements as loops over
their entries), never with ``circuitbook.checks.ps``; the hand pass is itself checked against
the model's own logits. Then:

- problem 3: the check passes exactly the designs that do induction as the page defines it
  (induction score above 0.9, loss on the second copy below 0.5 nats), on designs placed clearly
  on either side of both thresholds;
- problem 3b: its reference is the hand-measured score of the broken scaffold at every context
  length, the check accepts that score in every numeric form, and rejects it 2% off and every
  other context length's score (which lie at least 3% apart);
- problem 4: the reference's scores are the hand-measured ones, and a hand-written answer that
  reads key i instead of i + 1 is named as that mistake;
- problem 5: the reference's (score, loss) with a head mean-ablated is the hand-measured pair,
  and hand-written answers with the natural off-by-one windows are named.

Comparisons of the float32 zoo model with the float64 hand pass allow the float32 rounding of
the model's forward pass (``rounding_bound`` with ``attn_only_forward_terms``), doubled for the
log-softmax (the target's logit and the log-sum-exp each carry it once).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import hand_forward as hand
from circuitbook import checks
from circuitbook.book import attn_only_forward_terms, rounding_bound
from circuitbook.checks import ps
from circuitbook.models import load
from circuitbook.models.handbuilt import induction_scaffold, subspaces

F64 = torch.float64
V = 32  # problem 3's scaffold vocabulary, as the page builds it
SEED = 1234


def repeated(batch: int, n: int, vocab: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(0, vocab, (batch, n), generator=g)
    return torch.cat([half, half], dim=1)


def scaffold_tokens(n_ctx: int, batch: int = 8, seed: int = 0) -> torch.Tensor:
    """The scaffold's tokens as ``scaffold_tokens``' docstring describes them: each row a random
    permutation's first n tokens, twice, from a generator seeded with ``seed``."""
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randperm(V, generator=g)[: n_ctx // 2] for _ in range(batch)]
    return torch.stack(rows).repeat(1, 2)


def scaffold(W_QK, W_OV, n_ctx: int, prev_into: str = "S_prev"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return induction_scaffold(W_QK, W_OV, d_vocab=V, n_ctx=n_ctx, prev_into=prev_into)


def design(a: float, b: float, n_ctx: int = 40):
    """The page's design with scales a and b: a S_tok^T S_prev, b S_tok^T S_tok."""
    s = subspaces(V, n_ctx)
    return a * s["S_tok"].T @ s["S_prev"], b * s["S_tok"].T @ s["S_tok"]


def behaviour(W_QK, W_OV, n_ctx: int = 40, prev_into: str = "S_prev") -> tuple[float, float, float]:
    """(induction score of head 1.0, loss on the second copy, the rounding bound of the score),
    measured by hand."""
    tokens = scaffold_tokens(n_ctx)
    model = scaffold(W_QK, W_OV, n_ctx, prev_into)
    logits, patterns, scale = hand.forward(model, tokens)
    # the scaffold is float64 throughout: its forward pass's rounding, on sums of size `scale`
    tol = bound(model, tokens, scale, F64)
    return float(hand.induction_score(patterns[1], n_ctx // 2)[0]), hand.second_copy_loss(logits, tokens), tol


def bound(model, tokens: torch.Tensor, scale: float, dtype=torch.float32) -> float:
    """The rounding of the model's forward pass (a softmax turns an error d in its scores into at
    most 2 d in its probabilities, a log-softmax into 2 d in the log-probabilities)."""
    return 2 * rounding_bound(attn_only_forward_terms(model.cfg, tokens.shape[1]), scale, dtype)


@pytest.fixture(scope="module")
def toy():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load("toy-2l", device="cpu")


# --- the hand pass is the models' forward pass ---------------------------------------------------


def test_the_hand_forward_pass_is_the_models_forward_pass(toy):
    tokens = repeated(4, 24, toy.cfg.d_vocab, 0)
    logits, patterns, scale = hand.forward(toy, tokens)
    with torch.no_grad():
        theirs, cache = toy.run_with_cache(tokens)
    tol = bound(toy, tokens, scale)
    assert float((logits - theirs.double()).abs().max()) <= tol
    for layer, pattern in enumerate(patterns):
        assert float((pattern - cache["pattern", layer].double()).abs().max()) <= tol
    for prev_into in ("S_prev", "S_tok"):
        model = scaffold(*design(30, 10), 40, prev_into)
        tokens = scaffold_tokens(40)
        logits, _, scale = hand.forward(model, tokens)
        with torch.no_grad():
            theirs = model(tokens)
        assert float((logits - theirs).abs().max()) <= bound(model, tokens, scale, F64), prev_into


def test_the_scaffold_tokens_follow_their_recipe():
    for n_ctx in (16, 40, 64):
        assert torch.equal(ps.scaffold_tokens(n_ctx=n_ctx), scaffold_tokens(n_ctx))


# --- problem 3 -------------------------------------------------------------------------------------

# (scale of W_QK, scale of W_OV): measured by hand, score/loss 0.42/0.49, 0.66/0.05, 0.99/0.00,
# 1.00/1.69, 1.00/0.20, 1.00/0.00 (each clear of a threshold in the way that decides it)
DESIGNS = [(3, 10), (4, 10), (8, 10), (10, 2), (10, 5), (30, 10)]


@pytest.mark.parametrize("a,b", DESIGNS)
def test_problem_3_passes_exactly_the_designs_that_do_induction(a, b):
    score, loss, _ = behaviour(*design(a, b))
    does_induction = score > 0.9 and loss < 0.5
    # clear of the thresholds where it matters: 0.05 in score, 0.05 nats in loss
    assert (score > 0.95 or score < 0.85) and (loss < 0.45 or loss > 0.55 or score < 0.85), (score, loss)
    result = checks.get("ps_p3").check(lambda S_tok, S_prev: design(a, b))
    assert result.passed == does_induction, (a, b, score, loss, str(result))
    if not does_induction:
        assert result.mistake == "too weak" and "30" not in result.message and "10" not in result.message.split(
            "Now:")[0], result.message  # names the fault, never the page's scales


def test_problem_3_accepts_any_dtype_and_container():
    right = design(30, 10)
    for answer in [right, [right[0].float(), right[1].float()], tuple(w.numpy() for w in right),
                   design(40, 20), (right[0].to(torch.float16), right[1].to(torch.float16))]:
        result = checks.get("ps_p3").check(lambda S_tok, S_prev, answer=answer: answer)
        assert result.passed, str(result)


# --- problem 3b ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broken() -> dict[int, tuple[float, float, float]]:
    """The broken scaffold at every context length, measured by hand."""
    return {n: behaviour(*design(30, 10, n), n_ctx=n, prev_into="S_tok") for n in ps.P3_CONTEXTS}


@pytest.fixture(scope="module")
def broken_scores(broken) -> dict[int, float]:
    return {n: score for n, (score, _, _) in broken.items()}


def test_problem_3b_reference_is_the_hand_measured_score(broken):
    for n, (score, _, tol) in broken.items():
        assert abs(ps.p3b_reference(n) - score) <= tol, n


def test_problem_3b_takes_the_score_in_every_form_and_nothing_2_percent_off(broken_scores):
    ex = checks.get("ps_p3b")
    scores = sorted(broken_scores.values())
    gaps = [b / a - 1 for a, b in zip(scores, scores[1:])]
    assert min(gaps) >= 0.03, f"two context lengths' scores lie {min(gaps):.1%} apart"
    for n, score in broken_scores.items():
        forms = [score, float(np.float32(score)), np.float32(score), np.float64(score), torch.tensor(score),
                 torch.tensor(score, dtype=torch.float32), torch.tensor([score]), np.array(score)]
        for form in forms:
            result = ex.check(form, n_ctx=n)
            assert result.passed, (n, type(form), str(result))
        for off in (1.02, 0.98):
            assert not ex.check(score * off, n_ctx=n).passed, (n, off)
        for m, other in broken_scores.items():
            if m != n:
                assert not ex.check(other, n_ctx=n).passed, (n, m)
    book = broken_scores[ps.P3_CTX]
    assert ex.check(book, n_ctx=16).mistake == "the book's context length"


# --- problem 4 -------------------------------------------------------------------------------------


def hand_head_scores(model, tokens, key_shift: int = 1):
    """Problem 4 written by hand: induction reads query n + i -> key i + key_shift."""
    n = tokens.shape[1] // 2
    _, patterns, _ = hand.forward(model, tokens)
    if key_shift == 1:
        ind = torch.stack([hand.induction_score(p, n) for p in patterns])
    else:  # the off-by-one: key i, over every query of the second copy
        ind = torch.stack([torch.stack([p[b, :, n + i, i] for b in range(p.shape[0]) for i in range(n)]).mean(0)
                           for p in patterns])
    return ind, torch.stack([hand.prev_token_score(p) for p in patterns])


def test_problem_4_reference_is_the_hand_measured_scores(toy):
    for seed in (0, 1):
        tokens = repeated(4, 12 + 7 * seed, toy.cfg.d_vocab, seed)
        with torch.no_grad():
            ind, prev = ps.head_scores(toy, tokens)
        want_ind, want_prev = hand_head_scores(toy, tokens)
        tol = bound(toy, tokens, hand.forward(toy, tokens)[2])  # means of the patterns' entries
        assert float((ind.double() - want_ind).abs().max()) <= tol
        assert float((prev.double() - want_prev).abs().max()) <= tol


def test_problem_4_takes_a_hand_written_answer_and_names_key_i():
    ex = checks.get("ps_p4")
    assert ex.check(lambda model, tokens: hand_head_scores(model, tokens), seed=SEED).passed
    assert ex.check(lambda model, tokens: list(hand_head_scores(model, tokens)), seed=SEED).passed
    wrong = ex.check(lambda model, tokens: hand_head_scores(model, tokens, key_shift=0), seed=SEED)
    assert wrong.mistake == "off-by-one diagonal" and "key i + 1" in wrong.message, str(wrong)


# --- problem 5 -------------------------------------------------------------------------------------


def hand_ablation(model, head, reader, tokens, loss_from: int | None = None, key_shift: int = 1):
    """Problem 5 by hand: (reader's induction score, loss on the second copy), ``head``
    mean-ablated. ``loss_from``: the first token of the loss's window (n + 1 when right)."""
    n = tokens.shape[1] // 2
    logits, patterns, _ = hand.forward(model, tokens, mean_ablate=tuple(head))
    pattern = patterns[reader[0]]
    entries = [pattern[b, reader[1], n + i, i + key_shift] for b in range(tokens.shape[0]) for i in range(n)
               if i + key_shift < 2 * n]
    logp = logits.log_softmax(-1)
    start = n + 1 if loss_from is None else loss_from
    terms = [-logp[b, t - 1, tokens[b, t]] for b in range(tokens.shape[0]) for t in range(start, 2 * n)]
    return float(torch.stack(entries).mean()), float(torch.stack(terms).mean())


def test_problem_5_reference_is_the_hand_measured_ablation(toy):
    tokens = repeated(8, 24, toy.cfg.d_vocab, 3)
    for head in range(toy.cfg.n_heads):
        tol = bound(toy, tokens, hand.forward(toy, tokens, mean_ablate=(0, head))[2])
        for reader in ((1, 0), (1, 3)):
            got = ps.ablation_effect(toy, (0, head), reader, tokens)
            want = hand_ablation(toy, (0, head), reader, tokens)
            assert abs(got[0] - want[0]) <= tol and abs(got[1] - want[1]) <= tol, (head, reader, got, want)


def test_problem_5_takes_any_numeric_form_and_names_the_off_by_one_windows():
    ex = checks.get("ps_p5")
    forms = {"floats": lambda *a: hand_ablation(*a),
             "tensors": lambda *a: tuple(torch.tensor(v) for v in hand_ablation(*a)),
             "numpy": lambda *a: [np.float32(v) for v in hand_ablation(*a)]}
    for name, answer in forms.items():
        result = ex.check(lambda model, head, reader, tokens: answer(model, head, reader, tokens), seed=SEED)
        assert result.passed, (name, str(result))
    with_n = ex.check(lambda model, head, reader, tokens: hand_ablation(
        model, head, reader, tokens, loss_from=tokens.shape[1] // 2), seed=SEED)
    assert with_n.mistake == "loss window includes token n", str(with_n)
    key_i = ex.check(lambda model, head, reader, tokens: hand_ablation(model, head, reader, tokens, key_shift=0),
                     seed=SEED)
    assert key_i.mistake == "off-by-one diagonal", str(key_i)
