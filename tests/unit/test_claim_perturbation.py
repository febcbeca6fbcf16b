"""Every kind of finding the chapters claim fails when its measured input is perturbed.

A check in a chapter is an ``identity`` / ``identity_close``, a ``finding`` set beside its
null, or an ``observation`` (``circuitbook.book``), which has no verdict. Read by what
they compare, the checks of ``book/*.py`` come in a handful of kinds:

- **agreement up to rounding** (``identity_close``): two computations of one quantity agree
  within the derived rounding bound (chapter 17: our induction scores equal
  ``circuitbook.heads``'; chapter 18: a brute-force composition score equals the library's);
- **a score above its null** (chapter 12: every cross-attention head reads more of the
  dictionary off its full OV circuit than random score matrices do);
- **an identification** by argmax or rank (chapter 17a: the best previous-token head L0H2
  stands out from every head of 40 untrained copies of the model), or against a null
  (chapter 18: L0H2's K-composition into every layer-1 head exceeds the largest score any
  layer-0 head reaches under random rotations);
- **an all-quantifier** over heads (chapter 17a: even the weakest of toy-2l's four layer-1
  heads scores above every head of the fresh-second-half control);
- **equality with a recorded value** (chapter 17b: the phase-change step computed from the
  training history is the one the zoo recorded).

For each kind, one test recomputes a real chapter's measurement from the zoo's models, the
way the chapter does, checks that the claim holds as measured, and then perturbs the
measured input by a realistic amount (a different head, a shuffled pattern, fresh tokens
instead of a repeat, noise far above the rounding bound, the transpose a convention slip
introduces) and checks that the same claim then raises ``AssertionError``. A claim that
passed under both would be a claim that cannot fail. (``tests/unit/mutations`` does the
same for the exercises' checks.)
"""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.book import (Null, attn_only_forward_terms, finding, identity,
                             identity_close, rounding_bound)
from circuitbook.composition import composition_scores, rotated_baseline
from circuitbook.data import repeated_random_tokens
from circuitbook.data import translation as T
from circuitbook.heads import induction_scores, prev_token_scores
from circuitbook.models import encoder_decoder as ED
from circuitbook.models import load, zoo
from circuitbook.models.attn_only import attn_only
from circuitbook.train import phase_change_step

N = 32  # chapter 17: repeated random tokens, two copies of 32
FAILED = "(identity|finding) failed"


@pytest.fixture(scope="module")
def toy2l():
    with torch.no_grad():
        model = load("toy-2l")
        tokens = repeated_random_tokens(16, N, model.cfg.d_vocab, seed=2)
        _, cache = model.run_with_cache(tokens)
    patterns = [cache["pattern", layer] for layer in range(model.cfg.n_layers)]
    big = max(t[t.isfinite()].abs().max().item() for t in cache.values())
    return model, tokens, patterns, big


def induction_stripe(pattern: torch.Tensor) -> torch.Tensor:
    """Chapter 17's induction score: attention from query N + i to key i + 1 -> [head]."""
    return pattern.diagonal(offset=-(N - 1), dim1=-2, dim2=-1)[..., 1:].mean(dim=(0, 2))


def prev_stripe(pattern: torch.Tensor) -> torch.Tensor:
    """Chapter 17's previous-token score: attention from p to p - 1 -> [head]."""
    return pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, 2))


# -- agreement up to rounding ----------------------------------------------------------


def _score_terms(cfg, tokens) -> int:
    """Chapter 17a's rounding count: two forward passes over 2N positions, then a mean over
    at most batch x 2N entries."""
    return 2 * attn_only_forward_terms(cfg, 2 * N) + tokens.shape[0] * 2 * N


def claim_scores_agree(ours, model, tokens, big):
    """Chapter 17a's identity_close, with its terms counted as the chapter counts them."""
    with torch.no_grad():
        theirs = induction_scores(model, tokens=tokens)
    identity_close("our induction scores equal circuitbook.heads' on toy-2l", ours, theirs,
                   terms=_score_terms(model.cfg, tokens), scale=big)


def test_agreement_fails_for_a_shuffled_pattern_or_noise(toy2l):
    model, tokens, patterns, big = toy2l
    ours = torch.stack([induction_stripe(p) for p in patterns])
    claim_scores_agree(ours, model, tokens, big)
    # the pattern of the wrong copy: keys shifted by one position (the off-by-one slip)
    shifted = torch.stack([p.roll(1, dims=-1) for p in patterns])
    with pytest.raises(AssertionError, match=FAILED):
        claim_scores_agree(torch.stack([induction_stripe(p) for p in shifted]), model, tokens, big)
    # noise 100x the rounding bound of the comparison
    bound = rounding_bound(_score_terms(model.cfg, tokens), big)
    with pytest.raises(AssertionError, match=FAILED):
        claim_scores_agree(ours + 100 * bound, model, tokens, big)


# -- a score above chance ----------------------------------------------------------------


def claim_above_chance(agree: torch.Tensor) -> None:
    """Chapter 12's finding: the lowest head's agreement beside random score matrices."""
    g = torch.Generator().manual_seed(0)
    n_src, n_tgt = len(T.SRC_VOCAB), len(T.TGT_VOCAB)
    random_agree = torch.tensor([T.table_agreement(torch.randn(n_src, n_tgt, generator=g))
                                 for _ in range(200)])
    finding("every single cross-attention head reads part of the dictionary (the lowest)",
            agree.min(), null=Null.draws("200 random score matrices", random_agree))


def test_above_chance_fails_when_the_vocabulary_is_misaligned():
    model = load("toy-translation")
    d_model = model.src_embed[0].lut.weight.shape[1]
    with torch.no_grad():
        W_E = model.src_embed[0].lut.weight * math.sqrt(d_model)
        W_U = model.generator.proj.weight.T
        full_ov = torch.stack([
            torch.einsum("sd,hde,hem,mt->hst", W_E, t["W_V"], t["W_O"], W_U)
            for t in (ED.tl_weights(layer.src_attn) for layer in model.decoder.layers)])
    n_layers, n_heads = full_ov.shape[:2]

    def agreement(ov):
        return torch.tensor([[T.table_agreement(ov[l, h]) for h in range(n_heads)]
                             for l in range(n_layers)])

    claim_above_chance(agreement(full_ov))
    # the target vocabulary read in another order (a mismatched vocabulary file)
    perm = torch.randperm(len(T.TGT_VOCAB), generator=torch.Generator().manual_seed(0))
    with pytest.raises(AssertionError, match=FAILED):
        claim_above_chance(agreement(full_ov[..., perm]))
    # the source embedding of another model: rows shuffled
    rows = torch.randperm(len(T.SRC_VOCAB), generator=torch.Generator().manual_seed(1))
    with pytest.raises(AssertionError, match=FAILED):
        claim_above_chance(agreement(full_ov[:, :, rows]))


# -- an identification (argmax) ----------------------------------------------------------


@pytest.fixture(scope="module")
def untrained_prev(toy2l):
    """The previous-token scores of every head of 40 untrained toy-2l's. Chapter 17a quotes their
    maximum for scale only (untrained attention is near even, so a trained head beats it whatever
    it does); here they serve as the null of an identification claim, to show the claim fails when
    the pattern is transposed or the trained model is swapped for an untrained one."""
    _, tokens, _, _ = toy2l
    recipe = dict(zoo.info("toy-2l")["config"])
    n_layers = recipe.pop("n_layers")
    out = []
    with torch.no_grad():
        for seed in range(1, 41):
            _, cache = attn_only(n_layers, **dict(recipe, seed=seed)).run_with_cache(tokens)
            out.append(torch.stack([prev_stripe(cache["pattern", l]) for l in range(n_layers)]))
    return torch.stack(out)


def claim_prev_head(prev: torch.Tensor, null: torch.Tensor) -> None:
    best = divmod(int(prev.argmax()), prev.shape[1])
    finding(f"L{best[0]}H{best[1]} attends to the previous token: the best head's score against "
            "the best head of each untrained model", prev.max(),
            null=Null.draws("the best of the 8 heads of each of 40 untrained toy-2l's",
                            null.flatten(1).max(1).values))


def test_identification_fails_for_a_transposed_pattern_or_an_untrained_model(toy2l, untrained_prev):
    model, tokens, patterns, _ = toy2l
    claim_prev_head(torch.stack([prev_stripe(p) for p in patterns]), untrained_prev)
    # the row-column convention slipped: the stripe read from the transposed (causal) pattern
    with pytest.raises(AssertionError, match=FAILED):
        claim_prev_head(torch.stack([prev_stripe(p.mT) for p in patterns]), untrained_prev)
    # the scores of a model at initialisation in place of the trained one
    with pytest.raises(AssertionError, match=FAILED):
        claim_prev_head(untrained_prev[0], untrained_prev[1:])


def claim_strongest_writer(k_scores: torch.Tensor, null_max: torch.Tensor) -> None:
    """Chapter 18's finding: L0H2's K-composition into each layer-1 head exceeds the largest
    score of any layer-0 head under random rotations. k_scores: [writer in layer 0, reader
    in layer 1]; null_max: [rotation, reader]."""
    for r in range(k_scores.shape[1]):
        finding(f"L0H2's K-composition into L1H{r} exceeds the largest score of any layer-0 "
                "head under random rotations", k_scores[2, r],
                null=Null.draws("largest layer-0 score, outputs rotated", null_max[:, r]))


def test_strongest_writer_fails_with_the_column_convention_ov(toy2l):
    model, _, _, _ = toy2l
    fro = torch.linalg.matrix_norm
    H = model.cfg.n_heads

    def k_scores(writer_ov):
        out = torch.zeros(H, H)
        for w in range(H):
            W_A = writer_ov(w)
            for r in range(H):
                W_B = model.W_K[1, r] @ model.W_Q[1, r].T
                out[w, r] = fro(W_A @ W_B) / (fro(W_A) * fro(W_B))
        return out

    with torch.no_grad():
        null_max = rotated_baseline(model, "K", n_samples=100)[:, 0, :, 1, :].max(1).values
        claim_strongest_writer(composition_scores(model, "K")[0, :, 1, :], null_max)
        claim_strongest_writer(k_scores(lambda w: model.W_V[0, w] @ model.W_O[0, w]), null_max)
        # the convention slip: Elhage et al.'s column W_OV = (W_V W_O)^T in a row formula
        with pytest.raises(AssertionError, match=FAILED):
            claim_strongest_writer(k_scores(lambda w: (model.W_V[0, w] @ model.W_O[0, w]).T),
                                   null_max)


# -- a count / all-quantifier ------------------------------------------------------------


def fresh_tokens(tokens):
    """Chapter 17a's control: the first half kept, a fresh random second half."""
    g = torch.Generator().manual_seed(7)
    return torch.cat([tokens[:, :N], torch.randint(0, 64, (16, N), generator=g)], 1)


def claim_all_induction(ind: torch.Tensor, fresh_ind: torch.Tensor) -> None:
    finding("every layer-1 head is an induction head: the weakest of the four against the "
            "same stripe on sequences whose second half is fresh", ind[1].min(),
            null=Null.draws("the 4 layer-1 heads on 16 sequences with a fresh second half",
                            fresh_ind.flatten()))


def test_all_quantifier_fails_without_a_repeat(toy2l):
    model, tokens, patterns, _ = toy2l
    with torch.no_grad():
        _, cache = model.run_with_cache(fresh_tokens(tokens))
    fresh_ind = cache["pattern", 1].diagonal(offset=-(N - 1), dim1=-2, dim2=-1)[..., 1:].mean(-1)
    claim_all_induction(torch.stack([induction_stripe(p) for p in patterns]), fresh_ind)
    # the control measured in place of the repeat: nothing to copy
    with pytest.raises(AssertionError, match=FAILED):
        claim_all_induction(torch.stack([induction_stripe(cache["pattern", l])
                                         for l in range(model.cfg.n_layers)]), fresh_ind)
    # or the scores of the previous-token stripe instead (a different head's job)
    with pytest.raises(AssertionError, match=FAILED):
        claim_all_induction(torch.stack([prev_stripe(p) for p in patterns]), fresh_ind)


# -- equality with a recorded value ------------------------------------------------------


def test_recorded_step_fails_for_a_shifted_history():
    hist = zoo.history("toy-2l")
    recorded = zoo.info("toy-2l")["training"]["phase_change_step"]
    d_vocab = load("toy-2l").cfg.d_vocab

    def claim_step(history):
        change = phase_change_step(history, d_vocab=d_vocab)
        identity("the phase-change step computed from the history is the one the zoo recorded",
                 change, change == recorded)

    claim_step(hist)
    # the same curve, recorded 10 steps later (an off-by-one in the logging)
    late = dict(hist, loss_second_copy=[hist["loss_second_copy"][0]] + hist["loss_second_copy"][:-1])
    with pytest.raises(AssertionError, match=FAILED):
        claim_step(late)
    # the first-copy loss (which never collapses) read in place of the second-copy loss
    with pytest.raises(AssertionError, match=FAILED):
        claim_step(dict(hist, loss_second_copy=hist["loss_first_copy"]))


def test_prev_token_scores_library_matches_the_stripe(toy2l):
    """The identification above uses the chapter's stripe; the library agrees (a control,
    so the perturbation tests do not depend on a private re-implementation)."""
    model, tokens, patterns, big = toy2l
    ours = torch.stack([prev_stripe(p) for p in patterns])
    with torch.no_grad():
        theirs = prev_token_scores(model, tokens=tokens)
    identity_close("our previous-token scores equal circuitbook.heads'", ours, theirs,
                   terms=_score_terms(model.cfg, tokens), scale=big)
