"""The shipped zoo: every checkpoint loads, and meets the metrics recorded in its json."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from circuitbook.models import zoo

TOY = ["toy-0l", "toy-1l", "toy-2l", "toy-skip-trigram"]


def _close(got, want, path="metrics"):
    """Recursively compare recomputed metrics with the recorded ones (json rounds to 6 digits)."""
    if isinstance(want, dict):
        assert set(want) <= set(got), f"{path}: missing {set(want) - set(got)}"
        for k in want:
            _close(got[k], want[k], f"{path}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]")
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=2e-3, abs_tol=2e-4), f"{path}: recomputed {got}, recorded {want}"
    else:
        assert got == want, f"{path}: recomputed {got!r}, recorded {want!r}"


@pytest.fixture(scope="module")
def models():
    return {name: zoo.load(name) for name in TOY}


def test_unknown_name_lists_the_zoo():
    with pytest.raises(KeyError, match="toy-0l, toy-1l, toy-2l, toy-skip-trigram, toy-translation"):
        zoo.load("toy-3l")


@pytest.mark.parametrize("name", TOY)
def test_checkpoint_meets_its_recorded_metrics(name, models):
    model = models[name]
    record = zoo.info(name)
    assert record["config"]["n_layers"] == model.cfg.n_layers
    weights, _ = zoo.paths(name)
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == record["weights"]["sha256"]
    recomputed = zoo.evaluate(name, model)
    _close(recomputed, record["metrics"])
    assert zoo.check_targets(name, recomputed) == [], "the recipe's targets hold for the shipped weights"


def test_toy_models_are_attention_only_without_layernorm(models):
    for name, model in models.items():
        cfg = model.cfg
        assert cfg.attn_only and cfg.normalization_type is None, name
        assert cfg.positional_embedding_type == "shortformer", name
        assert not model.training


def test_zero_layer_model_learns_log_transition_matrix(models):
    m = zoo.metrics("toy-0l")
    assert m["corr_WEWU_logP"] > 0.9
    assert m["loss_bigram"] - m["bigram_entropy"] < 0.05, "close to the best possible bigram loss"


def test_one_layer_cannot_do_induction_but_two_layers_can(models):
    chance = math.log(64)
    one = zoo.induction_metrics(models["toy-1l"])
    two = zoo.induction_metrics(models["toy-2l"])
    # one layer: the second copy stays near chance (it can only guess tokens seen before)
    assert one["loss_second_copy"] > 2.0 and one["loss_second_copy"] > chance - 1.5
    assert one["induction_best"] < 0.3
    # two layers: a previous-token head in layer 0 feeds an induction head in layer 1
    assert two["loss_second_copy"] < 0.5 and two["loss_first_copy"] > chance - 0.5
    assert two["induction_best"] > 0.8 and two["induction_head"][0] == 1
    assert two["prev_token_best"] > 0.7 and two["prev_token_head"][0] == 0


def test_skip_trigram_model_has_the_bug(models):
    m = zoo.skip_trigram_metrics(models["toy-skip-trigram"])
    assert m["triple_accuracy"] > 0.95
    keep_in_bay = next(b for b in m["bugs"] if (b["A"], b["B"], b["wrong_C"]) == ("keep", "in", "bay"))
    assert keep_in_bay["p_bug"] > 2 * keep_in_bay["p_control"], "keep ... in -> bay is boosted by keep's OV circuit"


def test_toy_2l_history_shows_the_phase_change():
    h = zoo.history("toy-2l")
    info = zoo.info("toy-2l")
    step = info["training"]["phase_change_step"]
    assert step is not None and 0 < step < h["step"][-1]
    i = h["step"].index(step)
    assert h["loss_second_copy"][0] > 3.5 and h["loss_second_copy"][-1] < 0.5
    assert max(h["induction_best"][: max(1, i - 10)]) < 0.3 < h["induction_best"][-1]
    assert len(h["induction"][0]) == 2 and len(h["induction"][0][0]) == 4
    with pytest.raises(KeyError, match="no training history"):
        zoo.history("toy-0l")


def test_short_retraining_reproduces_the_recorded_start():
    """Retraining the toy-2l recipe for 100 steps follows its recorded history (seeded, 1 thread)."""
    from circuitbook.models import attn_only
    from circuitbook.train import InductionMetrics, train_lm

    recipe = zoo.RECIPES["toy-2l"]
    cfg = dict(recipe.model)
    model = attn_only(cfg.pop("n_layers"), **cfg)
    ev = zoo.EVAL
    tracker = InductionMetrics(every=recipe.train["history_every"], seq_len=ev["repeat_seq_len"],
                               batch=ev["repeat_batch"], seed=ev["repeat_seed"])
    losses = train_lm(model, zoo.batch_fn(recipe), steps=100, lr=recipe.train["lr"], threads=1,
                      callback=tracker, progress=False)
    recorded = zoo.history("toy-2l")
    n = len(tracker.history["step"])
    assert tracker.history["step"] == recorded["step"][:n]
    for got, want in zip(tracker.history["loss"][1:], recorded["loss"][1:n]):
        assert abs(got - want) < 0.05
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10


def test_translation_checkpoint():
    try:
        record = zoo.info("toy-translation")
    except FileNotFoundError:
        pytest.skip("toy-translation is not built yet: python -m circuitbook.models.zoo toy-translation")
    model = zoo.load("toy-translation")
    recomputed = zoo.evaluate("toy-translation", model)
    _close(recomputed, record["metrics"])
    assert recomputed["token_accuracy"] > 0.9
