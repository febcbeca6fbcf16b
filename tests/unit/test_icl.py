"""The in-context-learning score (circuitbook.icl) against hand-computed losses and
TransformerLens's own per-token loss."""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.data import repeated_random_tokens
from circuitbook.icl import icl_score, icl_score_from_losses, icl_scores
from conftest import build_model, no_repeat_tokens


# --- ICL score --------------------------------------------------------------------------------


def test_icl_score_matches_per_token_loss():
    model = build_model(2, n_ctx=30)
    tokens = repeated_random_tokens(4, 15, model.cfg.d_vocab)
    per_token = model(tokens, return_type="loss", loss_per_token=True).detach()  # [batch, pos - 1]
    want = float((per_token[:, 20 - 1] - per_token[:, 3 - 1]).mean())  # entry t - 1 predicts token t
    assert icl_score(model, tokens, early=3, late=20) == pytest.approx(want, abs=1e-10)


def test_icl_score_is_negative_for_the_induction_model(induction_model):
    tokens = no_repeat_tokens(8, 12, induction_model.cfg.d_vocab)
    assert icl_score(induction_model, tokens, early=2, late=20) < -1.0


def hand_icl(logits, tokens, early, late):
    """Per sequence, in Python floats: mean over late of -log softmax(logits[b, t-1])[tokens[b, t]]
    minus the same over early."""
    out = []
    for row, toks in zip(logits.double().tolist(), tokens.tolist()):
        def loss(t):
            z = row[t - 1]
            top = max(z)
            return math.log(sum(math.exp(v - top) for v in z)) + top - z[toks[t]]
        out.append(sum(map(loss, late)) / len(late) - sum(map(loss, early)) / len(early))
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("chunk", [2**22, 10])  # one log-softmax, or one position at a time
def test_icl_scores_by_hand(monkeypatch, chunk):
    import circuitbook.loss as L

    monkeypatch.setattr(L, "_LOG_SOFTMAX_ENTRIES", chunk)
    g = torch.Generator().manual_seed(4)
    logits = 3 * torch.randn(3, 12, 7, generator=g, dtype=torch.float64)
    tokens = torch.randint(0, 7, (3, 12), generator=g)
    want = hand_icl(logits, tokens, range(2, 5), range(8, 12))
    # the three spellings of a window: a range, (lo, hi) for lo..hi-1, and one token index
    for early, late in [(range(2, 5), range(8, 12)), ((2, 5), (8, 12)), (range(2, 5), (8, 12))]:
        torch.testing.assert_close(icl_scores(logits, tokens, early, late), want, rtol=0, atol=1e-12)
    torch.testing.assert_close(icl_scores(logits, tokens, 3, 11), hand_icl(logits, tokens, [3], [11]),
                               rtol=0, atol=1e-12)
    # half precision: computed in float32 from the bfloat16 values
    half = logits.bfloat16()
    got = icl_scores(half, tokens, (2, 5), (8, 12))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.double(), hand_icl(half, tokens, range(2, 5), range(8, 12)), rtol=0, atol=1e-5)


def test_icl_score_from_losses_by_hand():
    # losses[t - 1] is the loss on token t: tokens 1..6 have losses 6, 5, 4, 3, 2, 1
    curve = [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]
    assert float(icl_score_from_losses(curve, (2, 4), (5, 7))) == (2 + 1) / 2 - (5 + 4) / 2
    assert float(icl_score_from_losses(curve, 1, 6)) == 1 - 6
    batch = torch.tensor([curve, curve[::-1]])
    torch.testing.assert_close(icl_score_from_losses(batch, range(1, 3), range(5, 7)),
                               torch.tensor([1.5 - 5.5, 5.5 - 1.5]))
    for bad, match in [((0, 2), "outside 1..6"), ((3, 3), "holds no token"), (range(5, 8), "outside 1..6"),
                       ([1, 2], "token index, a range or a"), (2.0, "token index, a range or a")]:
        with pytest.raises((ValueError, TypeError), match=match):
            icl_score_from_losses(curve, bad, (5, 7))
    with pytest.raises(ValueError, match="floating"):
        icl_score_from_losses(torch.ones(6, dtype=torch.long), 1, 2)


def test_icl_scores_errors_are_named():
    logits = torch.zeros(2, 5, 3)
    with pytest.raises(ValueError, match=r"tokens must be \[batch, pos\] = \(2, 5\)"):
        icl_scores(logits, torch.zeros(2, 4, dtype=torch.long), 1, 3)
    with pytest.raises(TypeError, match="integer token ids"):
        icl_scores(logits, torch.zeros(2, 5), 1, 3)
    with pytest.raises(ValueError, match=r"floating \[batch, pos, d_vocab\]"):
        icl_scores(logits[0], torch.zeros(2, 5, dtype=torch.long), 1, 3)
    with pytest.raises(ValueError, match="late window 5"):
        icl_scores(logits, torch.zeros(2, 5, dtype=torch.long), 1, 5)


def test_icl_score_sequence_too_short():
    model = build_model(1, n_ctx=16)
    tokens = torch.zeros(2, 16, dtype=torch.long)
    with pytest.raises(ValueError, match="sequence too short for icl_score: token index late=500"):
        icl_score(model, tokens)
    with pytest.raises(ValueError, match="1 <= early < late"):
        icl_score(model, tokens, early=8, late=4)
