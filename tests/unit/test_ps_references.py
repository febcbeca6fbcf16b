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
  and hand-written answers with the natural off-by-one windows are named;
- problem 6c: the design's power is the two-sided z-test's, against the closed form written out
  with ``math.erf`` and table quantiles, and against a simulation of that test (fixed seed, a
  four-standard-error binomial tolerance); the reference's N is the fewest documents whose
  hand-computed power reaches the target; and the check passes exactly the designs from that N
  to 1.2 N + 2 documents of the cheapest estimand;
- problem 7: the reference's patching effects are the hand-patched ones (every head's clean z
  in the corrupted run, the sender's clean-minus-corrupted output added to one input of the
  layer-1 heads), the check takes them in every numeric form, and names a hand-written
  noising run.

Comparisons of the float32 zoo model with the float64 hand pass allow the float32 rounding of
the model's forward pass (``rounding_bound`` with ``attn_only_forward_terms``), doubled for the
log-softmax (the target's logit and the log-sum-exp each carry it once).
"""

from __future__ import annotations

import math
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
    assert wrong.mistake == "off-by-one diagonal" and "key i:" in wrong.message, str(wrong)
    assert "n - 1" not in wrong.message and "i + 1" not in wrong.message, wrong.message  # names the fault, not the fix


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


# --- problem 6c: the design's power, by hand ------------------------------------------------------


def phi(x: float) -> float:
    """The standard normal CDF, written with math.erf."""
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def phi_inv(q: float) -> float:
    """Its inverse, by bisection (60 halvings of [-10, 10]: below 1e-16 in x)."""
    lo, hi = -10.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if phi(mid) < q else (lo, mid)
    return (lo + hi) / 2


def hand_power(sd: float, effect: float, alpha: float, n: int) -> float:
    """The two-sided z-test of a mean rejects when |mean| sqrt(n) / sd > z_{1-alpha/2}: with true
    mean ``effect`` the statistic is normal with mean effect sqrt(n) / sd and variance 1."""
    z, shift = phi_inv(1 - alpha / 2), effect * math.sqrt(n) / sd
    return phi(shift - z) + phi(-shift - z)


def hand_plan_n(sigma: dict, effect: float, alpha: float, power: float) -> tuple[str, int]:
    """The cheapest estimand and its fewest documents, counting n up (upper sds)."""
    best = None
    for name, (_, upper) in sigma.items():
        n = 1
        while hand_power(upper, effect, alpha, n) < power:
            n += 1
        if best is None or n < best[1]:
            best = (name, n)
    return best


@pytest.mark.parametrize("sd,effect,alpha,n,z", [(0.5, 0.25, 0.05, 32, 1.959963984540054),
                                                 (0.41, 0.2, 0.01, 12, 2.5758293035489004),
                                                 (1.0, 0.1, 0.1, 500, 1.6448536269514722)])
def test_problem_6c_power_is_the_closed_form_with_table_quantiles(sd, effect, alpha, n, z):
    shift = effect * math.sqrt(n) / sd
    expected = phi(shift - z) + phi(-shift - z)
    # both sides are double-precision evaluations of erf-based CDFs: 1e-9 is far above their rounding
    assert abs(ps.p6.design_power(sd, effect, alpha, n) - expected) < 1e-9
    assert abs(phi_inv(1 - alpha / 2) - z) < 1e-12


def test_problem_6c_power_matches_a_simulated_z_test():
    g = torch.Generator().manual_seed(SEED)
    m, n, sd, effect, alpha = 20_000, 12, 0.4, 0.25, 0.05
    means = effect + sd * torch.randn(m, n, generator=g, dtype=F64).mean(1)
    rejected = float((means.abs() * math.sqrt(n) / sd > 1.959963984540054).double().mean())
    p = ps.p6.design_power(sd, effect, alpha, n)
    # the share of m independent rejections has standard error sqrt(p (1 - p) / m); four of them
    assert abs(rejected - p) < 4 * math.sqrt(p * (1 - p) / m)


@pytest.mark.parametrize("seed", range(6))
def test_problem_6c_reference_is_the_fewest_documents_and_the_check_judges_by_power_and_cost(seed):
    inputs = ps.p6._p6c_inputs(torch.Generator().manual_seed(seed))
    assert ps.plan_documents(**inputs) == hand_plan_n(**inputs)
    # designs of the cheapest estimand at the ends of the accepted range and one step outside
    sizes = {"fewest": lambda n: n, "ceiling": lambda n: math.floor(1.2 * n + 2),
             "one short": lambda n: n - 1, "one over": lambda n: math.floor(1.2 * n + 2) + 1}

    def answer(size):
        def plan(sigma, effect, alpha, power):
            name, n = hand_plan_n(sigma, effect, alpha, power)
            return name, sizes[size](n)
        return plan

    ex = checks.get("ps_p6c")
    for size, passes, mistakes in [("fewest", True, None), ("ceiling", True, None),
                                   ("one short", False, ("underpowered", "rounded down")),
                                   ("one over", False, ("wasteful",))]:
        result = ex.check(answer(size), seed=seed)
        assert result.passed == passes, (size, result)
        assert passes or result.mistake in mistakes, (size, result)


# --- problem 7: patching, by hand ----------------------------------------------------------------


def hand_run(model, tokens, *, z_clean=None, patch_head=None, into=None, delta=None):
    """(logits, z per layer [batch, pos, head, d_head]) of a float64 hand forward pass of a
    two-layer attention-only shortformer model. ``patch_head=(l, h)`` replaces that head's z by
    ``z_clean[l][:, :, h]`` at every position; ``into`` = "q", "k" or "v" adds ``delta``
    [batch, pos, d_model] only to that input of every layer-1 head (their other inputs, and
    everything else, read the stream as it is); ``into="logits"`` adds it only to the final
    stream."""
    cfg = model.cfg
    assert cfg.n_layers == 2 and cfg.positional_embedding_type == "shortformer"
    w = hand.weights(model)
    tokens = tokens.to("cpu")
    n = tokens.shape[1]
    x, pos = w["W_E"][tokens], w["W_pos"][:n]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    zs = []
    for layer in range(2):
        extra = {c: delta if (into == c and layer == 1) else 0 for c in "qkv"}
        out, z_l = torch.zeros_like(x), []
        for head in range(cfg.n_heads):
            q = (x + extra["q"] + pos) @ w["W_Q"][layer, head] + w["b_Q"][layer, head]
            k = (x + extra["k"] + pos) @ w["W_K"][layer, head] + w["b_K"][layer, head]
            v = (x + extra["v"]) @ w["W_V"][layer, head] + w["b_V"][layer, head]
            scores = (q @ k.transpose(-1, -2) / math.sqrt(cfg.d_head)).masked_fill(future, -math.inf)
            z = scores.softmax(-1) @ v
            if patch_head == (layer, head):
                z = z_clean[layer][:, :, head]
            out = out + z @ w["W_O"][layer, head]
            z_l.append(z)
        x = x + out + w["b_O"][layer]
        zs.append(torch.stack(z_l, dim=2))
    if into == "logits":
        x = x + delta
    return x @ w["W_U"] + w["b_U"], zs


def hand_loss(logits, targets, positions) -> float:
    """The mean over the batch and ``positions`` p of -log p(targets[:, p + 1]) read at p."""
    logp = logits.log_softmax(-1)
    return float(torch.stack([-logp[b, p, targets[b, p + 1]] for b in range(len(targets))
                              for p in positions]).mean())


def hand_shares(model, clean, corrupted, positions, *, noising=False):
    """Problem 7 by hand: every head's clean z patched into the corrupted run, then the best
    layer-0 head's clean-minus-corrupted output into the layer-1 heads' q, k, v or the logits,
    each as (patched - corrupted) / (clean - corrupted) of the loss against the clean tokens.
    ``noising`` swaps the runs (the corrupted activations patched into the clean run)."""
    clean, corrupted = clean.to("cpu"), corrupted.to("cpu")
    targets = clean  # what the metric asks to predict, in either direction
    if noising:
        clean, corrupted = corrupted, clean
    lg_clean, z_clean = hand_run(model, clean)
    lg_corr, z_corr = hand_run(model, corrupted)
    m_clean, m_corr = hand_loss(lg_clean, targets, positions), hand_loss(lg_corr, targets, positions)

    def normalised(logits):
        return (hand_loss(logits, targets, positions) - m_corr) / (m_clean - m_corr)

    heads = torch.tensor([[normalised(hand_run(model, corrupted, z_clean=z_clean, patch_head=(l, h))[0])
                           for h in range(model.cfg.n_heads)] for l in range(2)], dtype=F64)
    s = int(heads[0].argmax())
    W_O = model.W_O.detach().to("cpu", F64)
    delta = (z_clean[0][:, :, s] - z_corr[0][:, :, s]) @ W_O[0, s]
    paths = {c.upper(): normalised(hand_run(model, corrupted, into=c, delta=delta)[0]) for c in "kqv"}
    paths["direct"] = normalised(hand_run(model, corrupted, into="logits", delta=delta)[0])
    return {"heads": heads, "sender": (0, s), "paths": paths}, (m_clean, m_corr)


def test_problem_7_reference_is_the_hand_measured_patching(toy):
    inputs = ps.P7.make_inputs(torch.Generator().manual_seed(SEED))
    clean, corrupted, at = inputs["clean"], inputs["corrupted"], inputs["positions"]
    got = ps.patching_shares(toy, clean, corrupted, at)
    want, (m_clean, m_corr) = hand_shares(toy, clean, corrupted, at)
    # a loss carries the rounding of the float32 forward pass (`bound`); a normalised effect
    # e = (a - c) / (g - c) moves, to first order, by at most (2 + 2 |e|) b / |g - c|
    b = bound(toy, clean, hand.forward(toy, clean.to("cpu"))[2])
    gap = abs(m_clean - m_corr)
    assert got["sender"] == want["sender"]
    for l in range(2):
        for h in range(toy.cfg.n_heads):
            e = float(want["heads"][l, h])
            assert abs(float(got["heads"][l, h]) - e) <= (2 + 2 * abs(e)) * b / gap, (l, h)
    for p, e in want["paths"].items():
        assert abs(got["paths"][p] - e) <= (2 + 2 * abs(e)) * b / gap, (p, got["paths"][p], e)
    assert m_corr > m_clean  # the corruption hurts, so the normalisation is well defined


def test_problem_7_takes_any_numeric_form_and_names_a_hand_written_noising():
    ex = checks.get("ps_p7")

    def answer(form):
        def run(model, clean, corrupted, positions):
            r, _ = hand_shares(model, clean, corrupted, positions)
            heads, (_, s), paths = r["heads"], r["sender"], r["paths"]
            return {"float32 tensor": {"heads": heads.float(), "sender": (0, s), "paths": paths},
                    "numpy and a list": {"heads": heads.numpy(), "sender": [0, s],
                                         "paths": {k: np.float64(v) for k, v in paths.items()}},
                    "nested lists, tensors": {"heads": heads.tolist(), "sender": torch.tensor([0, s]),
                                              "paths": {k: torch.tensor(v) for k, v in paths.items()}}}[form]
        return run

    for form in ("float32 tensor", "numpy and a list", "nested lists, tensors"):
        result = ex.check(answer(form), seed=SEED)
        assert result.passed, (form, str(result))
    noising = ex.check(lambda model, clean, corrupted, positions:
                       hand_shares(model, clean, corrupted, positions, noising=True)[0], seed=SEED)
    assert noising.mistake == "the runs' roles exchanged", str(noising)
    missing = ex.check(lambda model, clean, corrupted, positions:
                       {k: v for k, v in hand_shares(model, clean, corrupted, positions)[0].items()
                        if k != "paths"}, seed=SEED)
    assert not missing.passed
