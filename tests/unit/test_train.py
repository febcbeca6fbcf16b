"""Training: the Vaswani recipe's numbers by hand, and the toy-model loop (chapter 19)."""

from __future__ import annotations

import math

import pytest
import torch

from circuitbook.train import (
    InductionMetrics,
    LabelSmoothing,
    noam_lr,
    phase_change_step,
    repeat_losses,
    train_lm,
)

# ---------------------------------------------------------------------------- Vaswani recipe


def test_noam_schedule_by_hand():
    assert noam_lr(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)
    # warm-up is linear: lr(step) = d_model^-0.5 * step * warmup^-1.5
    assert noam_lr(1000, 512, 4000) == pytest.approx(512**-0.5 * 1000 * 4000**-1.5)
    assert noam_lr(2000, 512, 4000) == pytest.approx(2 * noam_lr(1000, 512, 4000))
    # then decays as 1/sqrt(step)
    assert noam_lr(16000, 512, 4000) == pytest.approx(noam_lr(4000, 512, 4000) / 2)
    assert noam_lr(0, 512, 4000) == noam_lr(1, 512, 4000), "step 0 is treated as step 1"
    assert noam_lr(4000, 512, 4000, factor=2.0) == pytest.approx(2 * 512**-0.5 * 4000**-0.5)


def test_label_smoothing_target_by_hand():
    crit = LabelSmoothing(5, padding_idx=0, smoothing=0.4)
    dist = crit.target_distribution(torch.tensor([2]))
    # 1 - 0.4 on the true class; 0.4 spread over the 3 classes that are neither true nor padding
    torch.testing.assert_close(dist, torch.tensor([[0.0, 0.4 / 3, 0.6, 0.4 / 3, 0.4 / 3]]))
    assert dist[0, 1].item() == pytest.approx(0.1333, abs=1e-4)
    # a padding target gets an all-zero row
    assert crit.target_distribution(torch.tensor([0])).sum() == 0


def test_label_smoothing_loss_is_kl_to_the_target():
    crit = LabelSmoothing(5, padding_idx=0, smoothing=0.4)
    logp = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).log_softmax(-1)
    target = torch.tensor([2, 1, 0])
    dist = crit.target_distribution(target)
    expected = (dist * (dist.clamp_min(1e-30).log() - logp)).where(dist > 0, torch.zeros(())).sum()
    torch.testing.assert_close(crit(logp, target), expected)


# ---------------------------------------------------------------------------- the loop


def _tiny(n_layers=2, seed=0):
    from circuitbook.models import attn_only

    return attn_only(n_layers, d_model=32, n_heads=2, d_vocab=16, n_ctx=32, seed=seed)


def test_train_lm_is_seeded_and_restores_threads():
    from circuitbook.data import bigram_chain

    chain = bigram_chain(16, seed=0)
    runs = []
    before = torch.get_num_threads()
    for _ in range(2):
        model = _tiny(0)
        runs.append(train_lm(model, lambda s: chain.sample(16, 32, seed=s), steps=30, lr=1e-2, threads=1,
                             progress=False))
    assert torch.get_num_threads() == before
    assert runs[0] == runs[1], "same seeds, same losses"
    assert runs[0][-1] < runs[0][0] - 0.5, "a zero-layer model quickly learns bigrams"
    assert not model.training, "the model is left in eval mode"


def test_train_lm_callbacks_and_errors():
    from circuitbook.data import bigram_chain

    chain = bigram_chain(16, seed=0)
    seen = []

    def stop_at_5(step, model, loss):
        seen.append((step, loss))
        return step == 5

    model = _tiny(0)
    losses = train_lm(model, lambda s: chain.sample(4, 32, seed=s), steps=50, callback=stop_at_5, progress=False)
    assert len(losses) == 5 and seen[0] == (0, None) and seen[-1][0] == 5
    with pytest.raises(ValueError, match="ran out after 2 steps"):
        train_lm(model, iter([chain.sample(4, 32), chain.sample(4, 32)]), steps=3, progress=False)
    with pytest.raises(ValueError, match="optimizer must be"):
        train_lm(model, lambda s: chain.sample(4, 32), steps=1, optimizer="lion", progress=False)
    # schedule multiplies the lr: a zero schedule leaves the weights untouched
    w = model.W_E.detach().clone()
    train_lm(model, lambda s: chain.sample(4, 32), steps=3, schedule=lambda s: 0.0, progress=False)
    assert torch.equal(w, model.W_E)


def test_induction_metrics_history_shape_and_trend():
    """A short seeded run of the toy-2l recipe: the loss falls and the history is complete."""
    from circuitbook.models import attn_only
    from circuitbook.models.zoo import RECIPES
    from circuitbook.train.streams import batch_fn

    recipe = RECIPES["toy-2l"]
    cfg = dict(recipe.model)
    model = attn_only(cfg.pop("n_layers"), **cfg)
    metrics = InductionMetrics(every=40, seq_len=32, batch=8, seed=0)
    losses = train_lm(model, batch_fn(recipe), steps=120, lr=1e-2, threads=1, callback=metrics, progress=False)
    h = metrics.history
    assert h["step"] == [0, 40, 80, 120]
    assert h["loss"][0] is None and all(isinstance(x, float) for x in h["loss"][1:])
    assert abs(h["loss_first_copy"][0] - math.log(64)) < 0.1, "an untrained model is at chance"
    assert sum(losses[-20:]) / 20 < sum(losses[:20]) / 20 - 0.1, "the loss falls"
    for key in ("induction", "prev_token"):
        assert torch.tensor(h[key]).shape == (4, 2, 4), "full [n_layers, n_heads] scores per record"
    assert h["induction_best"][-1] == pytest.approx(max(map(max, h["induction"][-1])))
    assert metrics.last["step"] == 120


def test_repeat_losses_of_an_untrained_model_are_at_chance():
    first, second = repeat_losses(_tiny(2), seq_len=16, batch=8)
    assert abs(first - math.log(16)) < 0.2 and abs(second - math.log(16)) < 0.2
    with pytest.raises(ValueError, match="n_ctx"):
        repeat_losses(_tiny(2), seq_len=17)


def test_phase_change_step():
    history = {
        "step": [0, 10, 20, 30, 40],
        "loss_first_copy": [4.2, 4.2, 4.3, 4.5, 4.5],
        "loss_second_copy": [4.2, 4.0, 3.0, 1.0, 0.4],
    }
    # midpoint between chance 4.2 and the low 0.4 is 2.3: first crossed at step 30
    assert phase_change_step(history) == 30
    assert phase_change_step(history, chance=math.log(64)) == 30
    flat = dict(history, loss_second_copy=[4.2, 4.1, 4.0, 3.9, 3.9])
    assert phase_change_step(flat) is None, "no collapse, no phase change"
    assert InductionMetrics().phase_change_step() is None


def test_text_metrics_records_every_few_steps_and_keeps_float16_checkpoints():
    from circuitbook.models import attn_only
    from circuitbook.train.text import TextMetrics

    model = attn_only(2, d_model=16, n_heads=2, d_head=8, d_vocab=32, n_ctx=32, seed=0)
    heldout = torch.randint(0, 32, (4, 32), generator=torch.Generator().manual_seed(0))
    rec = TextMetrics(heldout, every=2, early=(1, 4), late=(20, 32), repeat_len=8, repeat_batch=2, checkpoints=(1,))
    for step in range(5):
        rec(step, model, float(step))
    assert rec.history["step"] == [0, 2, 4]
    # the mean training loss since the previous record: [0], then [1, 2], then [3, 4]
    assert rec.history["loss"] == [0.0, 1.5, 3.5]
    assert set(rec.checkpoints) == {1}
    assert all(v.dtype == torch.float16 for v in rec.checkpoints[1].values())
    assert rec.checkpoints[1].keys() == model.state_dict().keys()
    # the held-out loss is the mean of the per-position curve, and the ICL score its two bands
    curve = rec.history["position_loss"][0]
    assert len(curve) == 31
    assert rec.history["heldout_loss"][0] == pytest.approx(sum(curve) / 31, rel=1e-9)
    assert rec.history["icl"][0] == pytest.approx(sum(curve[19:31]) / 12 - sum(curve[0:3]) / 3, rel=1e-9)
    assert rec.last["step"] == 4 and model.training


def test_row_position_losses_match_transformer_lens_per_token_loss():
    from circuitbook.models import attn_only
    from circuitbook.train.text import position_loss, row_position_losses

    model = attn_only(2, d_model=16, n_heads=2, d_head=8, d_vocab=32, n_ctx=32, seed=0)
    tokens = torch.randint(0, 32, (5, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():  # TransformerLens's own loss, an independent reference
        want = model(tokens, return_type="loss", loss_per_token=True).double()
    rows = row_position_losses(model, tokens, chunk=2)  # chunks of 2, 2 and 1 rows
    assert rows.shape == (5, 31) and rows.dtype == torch.float64
    # float32 log-softmax over 32 logits of size ~1: a few dozen roundings of eps32 each
    assert torch.allclose(rows, want, atol=1e-5, rtol=0)
    assert torch.allclose(position_loss(model, tokens), want.mean(0), atol=1e-5, rtol=0)
