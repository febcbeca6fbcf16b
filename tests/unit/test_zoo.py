"""The shipped zoo: every checkpoint loads, and meets the metrics recorded in its json."""

from __future__ import annotations

import hashlib
import math

import pytest
import torch

from circuitbook.data import bigram_chain, repeated_random_tokens, skip_trigram_task
from circuitbook.models import zoo
from circuitbook.train import build, streams
from circuitbook.train import metrics as train_metrics

TOY = ["toy-0l", "toy-1l", "toy-2l", "toy-skip-trigram"]


def _close(got, want, path="metrics", rel_tol=2e-3, abs_tol=2e-4):
    """Recursively compare recomputed metrics with the recorded ones (json rounds to 6 digits)."""
    if isinstance(want, dict):
        assert set(want) <= set(got), f"{path}: missing {set(want) - set(got)}"
        for k in want:
            _close(got[k], want[k], f"{path}.{k}", rel_tol, abs_tol)
    elif isinstance(want, list):
        assert len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{path}[{i}]", rel_tol, abs_tol)
    elif isinstance(want, float):
        assert math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol), f"{path}: recorded {got}, independent {want}"
    else:
        assert got == want, f"{path}: recomputed {got!r}, recorded {want!r}"


@pytest.fixture(scope="module")
def models():
    return {name: zoo.load(name) for name in TOY}


def _file_tensors(path) -> dict[str, torch.Tensor]:
    """Every tensor of a safetensors file, read with safetensors' own reader."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


@pytest.mark.parametrize("name", zoo.NAMES)
def test_load_gives_exactly_the_shipped_weights(name):
    """``load`` returns the tensors of the file whose SHA-256 the build recorded, bit for bit
    (text models: the float16 file widened to float32, exactly), and nothing else."""
    weights, _ = zoo.paths(name)
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == zoo.info(name)["weights"]["sha256"]
    want = _file_tensors(weights)
    model = zoo.load(name, device="cpu")
    got = model.state_dict()
    assert set(want) <= set(got)
    for k, w in want.items():
        assert torch.equal(got[k], w.to(got[k].dtype)) and got[k].to(w.dtype).equal(w), k
    # what the file does not hold is a buffer the model builds itself (masks, IGNORE)
    params = {n for n, _ in model.named_parameters()}
    assert params <= set(want), f"parameters not loaded from the file: {params - set(want)}"


def test_text_2l_checkpoints_load_exactly_their_stored_weights():
    record = zoo.info("text-2l")
    stored = _file_tensors(zoo.checkpoint_path("text-2l"))
    for step in zoo.checkpoint_steps("text-2l")[:-1]:
        got = zoo.load_checkpoint("text-2l", step, device="cpu").state_dict()
        prefix = f"step{step}/"
        mine = {k[len(prefix):]: v for k, v in stored.items() if k.startswith(prefix)}
        assert mine and all(torch.equal(got[k], v.float()) for k, v in mine.items()), step
    assert record["training"]["checkpoint_steps"] == zoo.checkpoint_steps("text-2l")[:-1]


@pytest.mark.parametrize("name", TOY + ["toy-translation"])
def test_saving_a_loaded_model_rewrites_the_shipped_file_byte_for_byte(name, tmp_path):
    """``train.build.save`` writes the same weights file the shipped build wrote, so the save
    path (moved out of ``models``) still produces what the loader reads."""
    record = {k: v for k, v in zoo.info(name).items() if k in ("config", "recipe", "metrics", "training", "history")}
    weights, meta = build.save(name, zoo.load(name, device="cpu"), record, tmp_path)
    assert weights.read_bytes() == zoo.paths(name)[0].read_bytes()
    assert zoo.info(name, tmp_path)["weights"] == zoo.info(name)["weights"]


def test_the_build_command_refuses_unknown_names(capsys):
    with pytest.raises(SystemExit) as stop:
        build.main(["toy-3l"])
    assert stop.value.code == 2 and "unknown zoo model(s) ['toy-3l']" in capsys.readouterr().err


def test_unknown_name_lists_the_zoo():
    with pytest.raises(KeyError, match="toy-0l, toy-1l, toy-2l, toy-skip-trigram, toy-translation"):
        zoo.load("toy-3l")


def independent_metrics(name: str, model) -> dict:
    """The zoo's headline metrics recomputed without circuitbook's metric code.

    Losses come from TransformerLens's own ``return_type="loss"``, attention scores from
    ``run_with_cache``'s patterns read with explicit loops, the bigram entropy and the skip-
    trigram accuracy from the task's definition; only the seeded data is shared with ``zoo``.
    """
    ev, cfg = zoo.EVAL, model.cfg
    out = {}
    recipe = zoo.RECIPES[name]
    if cfg.n_layers >= 1 and 2 * ev["repeat_seq_len"] <= cfg.n_ctx:
        n = ev["repeat_seq_len"]
        tokens = repeated_random_tokens(ev["repeat_batch"], n, cfg.d_vocab, seed=ev["repeat_seed"])
        with torch.no_grad():
            loss = model(tokens, return_type="loss", loss_per_token=True).double()  # [batch, 2n - 1]
            _, cache = model.run_with_cache(tokens)
        out["loss_first_copy"] = float(loss[:, : n - 1].mean())
        out["loss_second_copy"] = float(loss[:, n:].mean())
        ind = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
        prev = torch.zeros_like(ind)
        for layer in range(cfg.n_layers):
            A = cache["pattern", layer].double()
            ind[layer] = torch.stack([A[:, :, n + i, i + 1] for i in range(n)], -1).mean((0, 2))
            prev[layer] = torch.stack([A[:, :, p, p - 1] for p in range(1, 2 * n)], -1).mean((0, 2))
        out["induction_best"], out["prev_token_best"] = float(ind.max()), float(prev.max())
        out["induction_head"] = list(divmod(int(ind.argmax()), cfg.n_heads))
        out["prev_token_head"] = list(divmod(int(prev.argmax()), cfg.n_heads))
    if recipe.data["kind"] in ("bigram", "mixture"):
        chain = bigram_chain(cfg.d_vocab, seed=recipe.data["chain_seed"], n_successors=recipe.data.get("n_successors", 4),
                             concentration=recipe.data.get("concentration", 1.0), floor=recipe.data.get("floor", 0.02))
        tokens = chain.sample(ev["n_rows"], cfg.n_ctx, seed=ev["eval_seed"])
        with torch.no_grad():
            out["loss_bigram"] = float(model(tokens, return_type="loss"))
        P = chain.transition.double()
        pi = torch.linalg.eig(P.T).eigenvectors[:, 0].real  # stationary: the eigenvector of eigenvalue 1
        pi = pi / pi.sum()
        out["bigram_entropy"] = float(-(pi[:, None] * P * P.log()).sum())
    if recipe.data["kind"] in ("skip_trigram", "mixture"):
        task = skip_trigram_task(cfg.d_vocab)
        tokens, which, b = task.sample(ev["n_rows"], min(32, cfg.n_ctx), seed=ev["eval_seed"], return_positions=True)
        keep = which >= 0
        with torch.no_grad():
            logits = model(tokens[keep])
        hits = [int(logits[r, int(b[keep][r])].argmax()) == int(task.triples[which[keep][r], 2])
                for r in range(int(keep.sum()))]
        out["triple_accuracy"] = sum(hits) / len(hits)
    return out


@pytest.mark.parametrize("name", TOY)
def test_recorded_metrics_are_true_of_the_shipped_weights(name, models):
    model = models[name]
    record = zoo.info(name)
    assert record["config"]["n_layers"] == model.cfg.n_layers
    weights, _ = zoo.paths(name)
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == record["weights"]["sha256"]
    want = independent_metrics(name, model)
    assert want, name
    recorded = {k: record["metrics"][k] for k in want}
    # float32 forward passes along different code paths (and the json's 6 digits): 1e-4.
    _close(recorded, want, rel_tol=1e-4, abs_tol=1e-5)
    assert build.check_targets(name, record["metrics"]) == [], "the recipe's targets hold for the shipped weights"


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
    one = train_metrics.induction_metrics(models["toy-1l"])
    two = train_metrics.induction_metrics(models["toy-2l"])
    # one layer: the second copy stays near chance (it can only guess tokens seen before)
    assert one["loss_second_copy"] > 2.0 and one["loss_second_copy"] > chance - 1.5
    assert one["induction_best"] < 0.3
    # two layers: a previous-token head in layer 0 feeds an induction head in layer 1
    assert two["loss_second_copy"] < 0.5 and two["loss_first_copy"] > chance - 0.5
    assert two["induction_best"] > 0.8 and two["induction_head"][0] == 1
    assert two["prev_token_best"] > 0.7 and two["prev_token_head"][0] == 0


def test_skip_trigram_model_has_the_bug(models):
    m = train_metrics.skip_trigram_metrics(models["toy-skip-trigram"])
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
    losses = train_lm(model, streams.batch_fn(recipe), steps=100, lr=recipe.train["lr"], threads=1,
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
        pytest.skip("toy-translation is not built yet: python -m circuitbook.train.build toy-translation")
    model = zoo.load("toy-translation")
    recomputed = train_metrics.evaluate("toy-translation", model)
    _close(recomputed, record["metrics"])
    assert recomputed["token_accuracy"] > 0.9


# ----------------------------------------------------------------------------------------
# The text models of chapter 19 (float16 on disk, loaded into float32 models)
# ----------------------------------------------------------------------------------------


def _independent_position_loss(model, tokens: torch.Tensor) -> torch.Tensor:
    """Mean loss at each position from TransformerLens's own per-token loss, in float64."""
    with torch.no_grad():
        return model(tokens, return_type="loss", loss_per_token=True).double().mean(0)


@pytest.mark.parametrize("name", zoo.TEXT_MODELS)
def test_text_model_metrics_are_true_of_the_shipped_weights(name):
    record = zoo.info(name)
    weights, _ = zoo.paths(name)
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == record["weights"]["sha256"]
    model = zoo.load(name)
    assert next(model.parameters()).dtype == torch.float32
    assert any("hook_k.alpha" in n for n, _ in model.named_parameters()) == record["config"].get("smeared_keys", False)
    recipe = zoo.RECIPES[name]
    heldout = streams.text_heldout(recipe)
    curve = _independent_position_loss(model, heldout)
    lo, hi = recipe.data["icl_late"]
    elo, ehi = recipe.data["icl_early"]
    icl = float(curve[lo - 1 : hi - 1].mean() - curve[elo - 1 : ehi - 1].mean())
    # the metrics were measured on the float32 weights, which ship rounded to float16
    # (relative 2^-11 per weight); measured effect on these losses: well under 0.01 nats
    assert abs(float(curve.mean()) - record["metrics"]["heldout_loss"]) < 0.01
    assert abs(icl - record["metrics"]["icl"]) < 0.01
    h = zoo.history(name)
    assert h["step"][-1] == recipe.train["steps"] and len(h["position_loss"][0]) == recipe.train["seq_len"] - 1
    assert abs(h["heldout_loss"][-1] - float(curve.mean())) < 0.01


@pytest.mark.parametrize("name", ["text-2l", "text-2l-plain"])
def test_text_checkpoints_reproduce_the_recorded_history(name):
    record = zoo.info(name)
    ckpt = zoo.checkpoint_path(name)
    assert hashlib.sha256(ckpt.read_bytes()).hexdigest() == record["checkpoints_file"]["sha256"]
    steps = zoo.checkpoint_steps(name)
    assert steps == sorted(zoo.RECIPES[name].train["checkpoints"]) + [zoo.RECIPES[name].train["steps"]]
    h = zoo.history(name)
    heldout = streams.text_heldout(zoo.RECIPES[name])
    losses = []
    for step in steps[:2] + steps[-2:]:
        model = zoo.load_checkpoint(name, step)
        loss = float(_independent_position_loss(model, heldout).mean())
        assert abs(loss - h["heldout_loss"][h["step"].index(step)]) < 0.01, step
        losses.append(loss)
    assert losses[0] > losses[-1], "training lowered the held-out loss"
    with pytest.raises(ValueError, match="has checkpoints at steps"):
        zoo.load_checkpoint(name, 7)


def test_plain_text_recipe_trains_on_unmodified_windows_of_the_plays():
    recipe = zoo.RECIPES["text-2l-plain"]
    train_ids, heldout = streams.text_streams(recipe)
    rows = streams.batch_fn(recipe)(0)
    assert rows.shape == (recipe.train["batch"], recipe.train["seq_len"]) == (16, 256)
    n = rows.shape[1]
    for row in rows:  # every row is a stretch of the training stream, token for token
        starts = (train_ids[: len(train_ids) - n] == row[0]).nonzero().flatten()
        assert any(torch.equal(train_ids[s : s + n], row) for s in starts.tolist())
    # the held-out play is not in the training stream: its first 64 tokens appear nowhere there
    probe = heldout[1000:1064]
    starts = (train_ids[: len(train_ids) - 64] == probe[0]).nonzero().flatten()
    assert not any(torch.equal(train_ids[s : s + 64], probe) for s in starts.tolist())


def test_plain_text_retraining_reproduces_the_recorded_start():
    """The first recorded step of text-2l-plain, retrained from its recipe (seeded, 1 thread)."""
    from circuitbook.models import attn_only
    from circuitbook.train import train_lm

    recipe = zoo.RECIPES["text-2l-plain"]
    cfg = dict(recipe.model)
    model = attn_only(cfg.pop("n_layers"), **cfg)
    every = recipe.train["history_every"]
    losses = train_lm(model, streams.batch_fn(recipe), steps=every, lr=recipe.train["lr"], threads=1,
                      progress=False)
    recorded = zoo.history("text-2l-plain")
    assert recorded["step"][1] == every
    # float32 training on another CPU drifts a little from the recorded run
    assert abs(sum(losses) / every - recorded["loss"][1]) < 0.05
