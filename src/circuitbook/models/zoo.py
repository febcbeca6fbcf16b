"""The book's model zoo: small trained checkpoints shipped with the package.

``load(name)`` returns a trained model in well under a second, so chapters never wait for
training. Every checkpoint is two files in ``circuitbook/zoo/``: ``<name>.safetensors``
(the weights) and ``<name>.json`` (the model config, the training recipe, the metrics
measured when it was built, and for ``toy-2l`` the training history of chapter 17).

The recipes live here, in code: ``python -m circuitbook.models.zoo [names...]`` retrains
the checkpoints from scratch, seeded, on one CPU thread, and rewrites both files.

======================  =======  ===================================================
name                    chapter  what it is
======================  =======  ===================================================
``toy-0l``              14       zero-layer model on a bigram chain: W_E W_U ~ log P
``toy-1l``              15       one-layer attn-only on bigrams + skip-trigrams +
                                 repeats; it cannot do induction
``toy-skip-trigram``    15       one-layer, one-head model of the skip-trigram task,
                                 with the skip-trigram bug
``toy-2l``              16, 17   two-layer attn-only with a previous-token head and
                                 an induction head; its history shows the phase change
``toy-translation``     12, 19   the Annotated Transformer's encoder-decoder on the
                                 toy translation task (``models.encoder_decoder``)
``text-2l``             19       two-layer attn-only on Shakespeare (512-token BPE) with
                                 passages repeated; its history shows the induction
                                 bump, and it ships float16 checkpoints
``text-2l-seed1``       19       the same recipe, model and data seed 1
``text-2l-smeared``     19       the same recipe with Olsson et al.'s smeared keys
``text-2l-plain``       19       two-layer attn-only on plain Shakespeare, 256-token
                                 context, nothing copied; ships float16 checkpoints
                                 (``text-2l-plain-smeared``: the same with smeared
                                 keys, 6,000 steps)
======================  =======  ===================================================

The text models are stored in float16 (and loaded into float32 models);
``load_checkpoint(name, step)`` returns ``text-2l`` or ``text-2l-plain`` as it was at an
intermediate step.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from circuitbook.devices import resolve_device

ZOO_DIR = Path(__file__).resolve().parent.parent / "zoo"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """How one attention-only zoo model is built (read by ``build`` and saved in its json).

    ``model``: keyword arguments of ``attn_only``; ``data``: which generator and its
    settings; ``train``: steps, lr, batch size, sequence length and the base data seed
    (step ``s`` trains on data seeded ``data_seed + s``); ``targets``: the metric bounds
    the built model must meet (``{"metric": [">", 0.8]}``).
    """

    name: str
    chapter: str
    description: str
    model: dict
    data: dict
    train: dict
    targets: dict = field(default_factory=dict)


# The shape shared by the toy models: the framework's attention-only transformer.
_TOY = dict(d_model=64, n_heads=4, d_head=16, d_vocab=64, n_ctx=64, positional="shortformer", seed=0)

RECIPES: dict[str, Recipe] = {
    "toy-0l": Recipe(
        name="toy-0l",
        chapter="14",
        description="Zero-layer transformer (logits = W_E W_U + b_U) trained on a random bigram chain.",
        model=dict(_TOY, n_layers=0),
        data=dict(kind="bigram", chain_seed=0, n_successors=4, concentration=1.0, floor=0.02),
        train=dict(steps=2000, lr=1e-2, batch=64, seq_len=64, data_seed=10_000),
        targets=dict(corr_WEWU_logP=[">", 0.9], loss_minus_entropy=["<", 0.05], kl_chain_model=["<", 0.05]),
    ),
    "toy-1l": Recipe(
        name="toy-1l",
        chapter="15",
        description=(
            "One-layer attention-only transformer on a mix of bigram rows, skip-trigram rows and "
            "repeated random segments. It learns bigrams and skip-trigrams but cannot do induction."
        ),
        model=dict(_TOY, n_layers=1),
        data=dict(kind="mixture", fractions=dict(bigram=0.25, skip_trigram=0.5, repeats=0.25), chain_seed=0,
                  min_len=16, max_len=32),
        train=dict(steps=1500, lr=1e-2, batch=32, seq_len=64, data_seed=20_000),
        targets=dict(loss_second_copy=[">", 2.0], triple_accuracy=[">", 0.8], induction_best=["<", 0.3]),
    ),
    "toy-skip-trigram": Recipe(
        name="toy-skip-trigram",
        chapter="15",
        description=(
            "One-layer, one-head attention-only transformer on the skip-trigram task "
            "(circuitbook.data.SKIP_TRIGRAMS); shows skip-trigrams and the skip-trigram bug."
        ),
        model=dict(_TOY, n_layers=1, n_heads=1, n_ctx=32),
        data=dict(kind="skip_trigram", max_gap=24, orphan_fraction=0.25),
        train=dict(steps=500, lr=1e-2, batch=64, seq_len=32, data_seed=30_000),
        targets=dict(triple_accuracy=[">", 0.95], bug_ratio_min=[">", 2.0]),
    ),
    "toy-2l": Recipe(
        name="toy-2l",
        chapter="16, 17",
        description=(
            "Two-layer attention-only transformer trained on random segments (16-32 tokens) repeated "
            "across the context from a random phase; forms a "
            "previous-token head in layer 0 and an induction head in layer 1."
        ),
        model=dict(_TOY, n_layers=2),
        data=dict(kind="induction", min_len=16, max_len=32, chain_seed=0, background_fraction=0.0),
        train=dict(steps=3000, lr=1e-2, batch=32, seq_len=64, data_seed=40_000, history_every=10),
        targets=dict(induction_best=[">", 0.8], prev_token_best=[">", 0.7], loss_second_copy=["<", 0.5]),
    ),
}

# The text models of chapter 19: Shakespeare in a 512-token BPE, context 128.
_TEXT = dict(d_model=64, n_heads=4, d_head=16, d_vocab=512, n_ctx=128, positional="shortformer", seed=0)
_TEXT_DATA = dict(kind="passages", vocab_size=512, heldout_play="timon-of-athens", n_repeats=2,
                  min_len=16, max_len=40, heldout_rows=128, icl_early=[8, 16], icl_late=[96, 128])
_TEXT_TRAIN = dict(steps=3500, lr=1e-2, batch=16, seq_len=128, data_seed=50_000, history_every=25,
                   checkpoints=[500, 1000, 1500, 2000, 2500, 3000])
_TEXT_DESCRIPTION = (
    "Two-layer attention-only transformer on Shakespeare (the book's BPE, 512 tokens), trained on "
    "128-token windows of 37 plays in each of which two passages of 16-40 tokens are copied over "
    "a later stretch of the same window; Timon of Athens is held out. "
)
RECIPES.update({
    "text-2l": Recipe(
        name="text-2l", chapter="19", description=_TEXT_DESCRIPTION + "Seed 0; ships checkpoints.",
        model=dict(_TEXT, n_layers=2), data=_TEXT_DATA, train=_TEXT_TRAIN,
        targets=dict(induction_best=[">", 0.3]),
    ),
    "text-2l-seed1": Recipe(
        name="text-2l-seed1", chapter="19", description=_TEXT_DESCRIPTION + "Model and data seed 1.",
        model=dict(_TEXT, n_layers=2, seed=1), data=_TEXT_DATA,
        train=dict(_TEXT_TRAIN, data_seed=60_000, checkpoints=[]),
        targets=dict(induction_best=[">", 0.3]),
    ),
    "text-2l-smeared": Recipe(
        name="text-2l-smeared", chapter="19",
        description=_TEXT_DESCRIPTION + ("Seed 0, with Olsson et al.'s smeared keys in both layers; "
                                         "1,000 steps, since its induction heads form in the first few hundred."),
        model=dict(_TEXT, n_layers=2, smeared_keys=True), data=_TEXT_DATA,
        train=dict(_TEXT_TRAIN, steps=1000, checkpoints=[]),
        targets=dict(induction_best=[">", 0.3]),
    ),
})
# Plain text, no copied passages: 256-token windows, long enough for speaker names and
# phrases of one scene to recur. ICL bands: tokens 40-59 (Olsson et al.'s early token 50 at
# the same absolute place) against the last 20 tokens, 236-255 (Olsson et al.'s late token is
# 500, which this context does not reach).
RECIPES["text-2l-plain"] = Recipe(
    name="text-2l-plain", chapter="19",
    description=("Two-layer attention-only transformer on plain Shakespeare (the book's BPE, 512 tokens): "
                 "256-token windows of 37 plays, nothing copied or injected; Timon of Athens is held out. "
                 "Seed 0; ships checkpoints."),
    model=dict(_TEXT, n_layers=2, n_ctx=256),
    data=dict(_TEXT_DATA, n_repeats=0, icl_early=[40, 60], icl_late=[236, 256]),
    train=dict(_TEXT_TRAIN, steps=10_000, seq_len=256, data_seed=70_000, history_every=50,
               checkpoints=[1000, 2000, 3000, 4000, 5000, 6000, 8000]),
)
# The same plain text with smeared keys: a one-layer route to induction (chapter 19's
# second try on plain text, after text-2l-plain formed none in 10,000 steps).
RECIPES["text-2l-plain-smeared"] = Recipe(
    name="text-2l-plain-smeared", chapter="19",
    description=RECIPES["text-2l-plain"].description.replace(
        "Seed 0; ships checkpoints.", "Seed 0, with Olsson et al.'s smeared keys in both layers; 6,000 steps; "
        "ships checkpoints."),
    model=dict(RECIPES["text-2l-plain"].model, smeared_keys=True),
    data=RECIPES["text-2l-plain"].data,
    train=dict(RECIPES["text-2l-plain"].train, steps=6000, checkpoints=[1000, 2000, 3000, 4000]),
)
TEXT_MODELS: tuple[str, ...] = ("text-2l", "text-2l-seed1", "text-2l-smeared", "text-2l-plain",
                                "text-2l-plain-smeared")

#: Every model ``load`` knows; ``toy-translation``'s recipe lives in ``train.translation``.
NAMES: tuple[str, ...] = ("toy-0l", "toy-1l", "toy-2l", "toy-skip-trigram", "toy-translation") + TEXT_MODELS

# Fixed evaluation settings, so a loaded checkpoint's metrics can be recomputed exactly.
EVAL = dict(repeat_seq_len=32, repeat_batch=16, repeat_seed=0, n_rows=512, eval_seed=999_983)


# ----------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    if name not in NAMES:
        raise KeyError(f"unknown zoo model {name!r}; the zoo has: {', '.join(NAMES)}")


def paths(name: str, directory: Path | str | None = None) -> tuple[Path, Path]:
    """``(weights .safetensors, info .json)`` paths of ``name``."""
    _check_name(name)
    d = ZOO_DIR if directory is None else Path(directory)
    return d / f"{name}.safetensors", d / f"{name}.json"


def checkpoint_path(name: str, directory: Path | str | None = None) -> Path:
    """The ``<name>.checkpoints.safetensors`` file of a text model's intermediate weights."""
    _check_name(name)
    return (ZOO_DIR if directory is None else Path(directory)) / f"{name}.checkpoints.safetensors"


def checkpoint_steps(name: str = "text-2l") -> list[int]:
    """The training steps at which ``name`` shipped a checkpoint (its final step included)."""
    record = info(name)
    return sorted(record["training"].get("checkpoint_steps", [])) + [record["recipe"]["train"]["steps"]]


def load_checkpoint(name: str = "text-2l", step: int | None = None, *, device: str | torch.device | None = None):
    """``name`` as it was after ``step`` training steps, in eval mode (chapter 19).

    ``step`` must be one of :func:`checkpoint_steps`; the last one (or ``None``) is the final
    model, the same as ``load(name)``. Checkpoints are stored in float16 and loaded into the
    float32 model; a ``ValueError`` lists the steps that exist.
    """
    steps = checkpoint_steps(name)
    if step is None or step == steps[-1]:
        return load(name, device=device)
    if step not in steps:
        raise ValueError(f"{name!r} has checkpoints at steps {steps}, not at {step}")
    from safetensors.torch import load_file

    record = info(name)
    model = _empty_model(name, record["config"], resolve_device(device))
    prefix = f"step{step}/"
    state = {k[len(prefix):]: v for k, v in load_file(str(checkpoint_path(name))).items() if k.startswith(prefix)}
    model.load_state_dict(state, strict=True)
    return model.eval()


def info(name: str, directory: Path | str | None = None) -> dict:
    """The json record of ``name``: ``config``, ``recipe``, ``metrics``, ``training``
    (and ``history`` for ``toy-2l``)."""
    weights, meta = paths(name, directory)
    if not meta.exists() or not weights.exists():
        raise FileNotFoundError(
            f"the zoo checkpoint {name!r} is not built (missing {meta.name} or {weights.name} in {meta.parent}); "
            f"build it with `python -m circuitbook.models.zoo {name}`"
        )
    return json.loads(meta.read_text())


def metrics(name: str) -> dict:
    """The metrics recorded when ``name`` was built (see ``evaluate``)."""
    return info(name)["metrics"]


def history(name: str = "toy-2l") -> dict:
    """The training history of ``name`` as a dict of lists (chapter 17 plots the phase
    change from it): ``step``, ``loss``, ``loss_first_copy``, ``loss_second_copy``,
    ``induction_best``, ``prev_token_best`` and the [n_layers, n_heads] ``induction`` /
    ``prev_token`` scores per record."""
    record = info(name)
    if "history" not in record:
        raise KeyError(f"{name!r} has no training history; only {[n for n in RECIPES if 'history_every' in RECIPES[n].train]} do")
    return record["history"]


def load(name: str, *, device: str | torch.device | None = None):
    """A trained zoo model by name, in eval mode, with every weight on ``device`` (chapters 14-19).

    ``device=None`` picks ``circuitbook.devices.default_device()``: CUDA when available, as
    TransformerLens does.

    Toy models are TransformerLens ``HookedTransformer``s built with ``attn_only`` from the
    saved config; ``"toy-translation"`` is an ``EncoderDecoder``. Unknown names raise a
    ``KeyError`` listing the zoo. The recorded metrics are in ``info(name)["metrics"]``.
    """
    _check_name(name)
    record = info(name)
    weights, _ = paths(name)
    device = resolve_device(device)
    model = _empty_model(name, record["config"], device)
    from safetensors.torch import load_model

    # load_model reads the file on the CPU and copies it into the model's existing parameters,
    # wherever those are: the model was built on ``device``, so that is where the weights land.
    load_model(model, str(weights), strict=True)
    return model.eval()


def _empty_model(name: str, config: dict, device: torch.device):
    if name == "toy-translation":
        from circuitbook.train.translation import model_from_config

        return model_from_config(config).to(device)
    from circuitbook.models.attn_only import attn_only

    cfg = dict(config, seed=None)  # the weights are loaded next: no need to seed torch's global RNG
    return attn_only(cfg.pop("n_layers"), device=device, **cfg)


# ----------------------------------------------------------------------------------------
# Data of each recipe
# ----------------------------------------------------------------------------------------


def batch_fn(recipe: Recipe):
    """``step -> tokens [batch, seq_len]`` for ``recipe``: the exact training data."""
    from circuitbook.data import synthetic as S

    d, t, vocab = recipe.data, recipe.train, recipe.model["d_vocab"]
    batch, seq_len, base = t["batch"], t["seq_len"], t["data_seed"]
    if d["kind"] == "bigram":
        chain = _chain(recipe)
        return lambda step: chain.sample(batch, seq_len, seed=base + step)
    if d["kind"] == "skip_trigram":
        task = S.skip_trigram_task(vocab, max_gap=d["max_gap"], orphan_fraction=d["orphan_fraction"])
        return lambda step: task.sample(batch, seq_len, seed=base + step)
    if d["kind"] == "induction":
        chain = _chain(recipe) if d["background_fraction"] > 0 else None
        return lambda step: S.induction_tokens(
            batch, seq_len, vocab, seed=base + step, min_len=d["min_len"], max_len=d["max_len"],
            background=chain, background_fraction=d["background_fraction"],
        )
    if d["kind"] == "mixture":
        return lambda step: _mixture(recipe, batch, seq_len, base + step)
    if d["kind"] == "passages":
        passage_windows = _text_data_module("passages").passage_windows
        train_ids, _ = text_streams(recipe)
        return lambda step: passage_windows(train_ids, batch, seq_len, seed=base + step, n_repeats=d["n_repeats"],
                                            min_len=d["min_len"], max_len=d["max_len"])
    raise ValueError(f"unknown data kind {d['kind']!r} in recipe {recipe.name!r}")


def text_streams(recipe: Recipe) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, heldout)`` token streams of a text recipe (``circuitbook.data.passages.play_streams``
    with the Shakespeare tokenizer of the recipe's vocabulary size); encoded once per process."""
    return _streams(recipe.data["vocab_size"], recipe.data["heldout_play"])


@functools.lru_cache(maxsize=2)
def _streams(vocab_size: int, heldout_play: str) -> tuple[torch.Tensor, torch.Tensor]:
    tokenizer = _text_data_module("corpus").shakespeare_tokenizer(vocab_size)
    return _text_data_module("passages").play_streams(tokenizer, heldout_play)


def _text_data_module(name: str):
    """``circuitbook.data.<name>``, imported by name: the text models need the ``corpus`` extra
    (``tokenizers`` and the plays), and ``scripts/notebooks.py`` gives a chapter's set-up cell
    every extra its import statements reach. Chapters that only load toy models stay light;
    chapter 19 imports ``circuitbook.data.passages`` itself."""
    import importlib

    return importlib.import_module(f"circuitbook.data.{name}")


def text_heldout(recipe: Recipe) -> torch.Tensor:
    """The fixed held-out windows of a text recipe: [heldout_rows, seq_len] of plain text."""
    from circuitbook.train.text import heldout_windows

    _, heldout = text_streams(recipe)
    return heldout_windows(heldout, recipe.train["seq_len"], recipe.data["heldout_rows"])


def _chain(recipe: Recipe):
    from circuitbook.data.synthetic import bigram_chain

    d = recipe.data
    return bigram_chain(
        recipe.model["d_vocab"], seed=d["chain_seed"], n_successors=d.get("n_successors", 4),
        concentration=d.get("concentration", 1.0), floor=d.get("floor", 0.02),
    )


def _mixture(recipe: Recipe, batch: int, seq_len: int, seed: int) -> torch.Tensor:
    """Rows of bigram chain, skip-trigram task and repeated segments, in fixed proportions."""
    from circuitbook.data import synthetic as S

    d, vocab = recipe.data, recipe.model["d_vocab"]
    counts = {k: round(v * batch) for k, v in d["fractions"].items()}
    counts["repeats"] = batch - counts["bigram"] - counts["skip_trigram"]
    parts = [
        _chain(recipe).sample(counts["bigram"], seq_len, seed=seed),
        S.skip_trigram_task(vocab).sample(counts["skip_trigram"], seq_len, seed=seed),
        S.induction_tokens(counts["repeats"], seq_len, vocab, seed=seed, min_len=d["min_len"], max_len=d["max_len"]),
    ]
    return torch.cat(parts)


# ----------------------------------------------------------------------------------------
# Metrics (recomputable from the weights alone)
# ----------------------------------------------------------------------------------------


def evaluate(name: str, model) -> dict:
    """Recompute ``name``'s recorded metrics from ``model`` (fixed seeds, so a loaded
    checkpoint reproduces its json up to float rounding)."""
    _check_name(name)
    if name == "toy-translation":
        return _translation_metrics(model, info(name)["config"])
    recipe = RECIPES[name]
    out = {}
    if name in TEXT_MODELS:
        out.update(text_metrics(recipe, model))
    if recipe.model["n_layers"] >= 1 and 2 * EVAL["repeat_seq_len"] <= recipe.model["n_ctx"]:
        out.update(induction_metrics(model))
    kind = recipe.data["kind"]
    if kind in ("bigram", "mixture", "induction") and (kind != "induction" or recipe.data["background_fraction"] > 0):
        out.update(bigram_metrics(model, _chain(recipe)))
    if kind in ("skip_trigram", "mixture"):
        out.update(skip_trigram_metrics(model))
    return out


def induction_metrics(model) -> dict:
    """Loss on the first / second copy of repeated random tokens, and the best induction and
    previous-token heads with their scores (chapter 17)."""
    from circuitbook.heads import induction_and_prev_token_scores
    from circuitbook.train.lm import repeat_losses

    n, b, s = EVAL["repeat_seq_len"], EVAL["repeat_batch"], EVAL["repeat_seed"]
    first, second = repeat_losses(model, seq_len=n, batch=b, seed=s)
    ind, prev = induction_and_prev_token_scores(model, seq_len=n, batch=b, seed=s)
    best_ind, best_prev = _argmax2d(ind), _argmax2d(prev)
    return {
        "loss_first_copy": first,
        "loss_second_copy": second,
        "chance": math.log(model.cfg.d_vocab),
        "induction_best": float(ind.max()),
        "induction_head": best_ind,
        "prev_token_best": float(prev.max()),
        "prev_token_head": best_prev,
    }


def text_metrics(recipe: Recipe, model) -> dict:
    """Held-out loss and in-context-learning score of a text model (chapter 19): the mean loss
    over every position of ``text_heldout(recipe)`` and ``icl_score_from_positions`` with the
    recipe's bands."""
    from circuitbook.train.phases import icl_score_from_positions
    from circuitbook.train.text import position_loss

    curve = position_loss(model, text_heldout(recipe))
    d = recipe.data
    return {"heldout_loss": float(curve.mean()),
            "icl": icl_score_from_positions(curve.tolist(), early=tuple(d["icl_early"]), late=tuple(d["icl_late"]))}


def _argmax2d(scores: torch.Tensor) -> list[int]:
    i = int(scores.argmax())
    return [i // scores.shape[1], i % scores.shape[1]]


def bigram_metrics(model, chain) -> dict:
    """Held-out loss on the bigram chain vs its entropy (the floor), and for a zero-layer
    model the correlation of ``W_E W_U`` with ``log P`` and the mean KL divergence
    ``sum_a pi[a] KL(P[a] || softmax(W_E W_U + b_U)[a])`` (chapter 14).

    Both matrices are centred per row before correlating, since softmax ignores a
    constant added to a row of logits: ``corr(W_E W_U - rowmean, log P - rowmean)``.
    """
    from circuitbook.train import lm_loss

    device = next(model.parameters()).device
    tokens = chain.sample(EVAL["n_rows"], model.cfg.n_ctx, seed=EVAL["eval_seed"]).to(device)
    with torch.no_grad():
        loss = float(lm_loss(model, tokens))
    out = {"loss_bigram": loss, "bigram_entropy": chain.entropy(), "loss_minus_entropy": loss - chain.entropy()}
    if model.cfg.n_layers == 0:
        with torch.no_grad():
            wewu = model.W_E @ model.W_U
            log_p = chain.log_transition().to(device)
            transition = chain.transition.to(device)
            out["corr_WEWU_logP"] = _row_centred_corr(wewu, log_p)
            out["corr_logits_logP"] = _row_centred_corr(wewu + model.b_U, log_p)
            log_q = (wewu + model.b_U).log_softmax(-1)
            kl_rows = (transition * (log_p - log_q)).sum(-1)
            out["kl_chain_model"] = float((chain.stationary().to(device) * kl_rows).sum())
    return out


def _row_centred_corr(a: torch.Tensor, b: torch.Tensor) -> float:
    a = a - a.mean(-1, keepdim=True)
    b = b - b.mean(-1, keepdim=True)
    return float((a * b).sum() / (a.norm() * b.norm()))


def skip_trigram_metrics(model) -> dict:
    """Accuracy on the known skip-trigrams and the size of the skip-trigram bug (chapter 15).

    ``triple_accuracy``: fraction of held-out rows whose argmax prediction after ``B`` is
    ``C``; ``triple_prob``: mean p(C). For each row ``(A, B, wrong C, control A')`` of
    ``SKIP_TRIGRAM_BUGS``, ``bugs`` holds p(wrong C | A ... B) and p(wrong C | A' ... B),
    measured on the same rows with only the source token swapped; ``bug_ratio_min`` is
    the smallest ratio of the two (> 1 everywhere means the bug is present everywhere).
    """
    from circuitbook.data.synthetic import skip_trigram_task

    task = skip_trigram_task(model.cfg.d_vocab)
    seq_len = min(32, model.cfg.n_ctx)
    tokens, which, b = task.sample(EVAL["n_rows"], seq_len, seed=EVAL["eval_seed"], return_positions=True)
    keep = which >= 0
    device = next(model.parameters()).device
    tokens, which, b = tokens[keep].to(device), which[keep].to(device), b[keep].to(device)
    triples = task.triples.to(device)
    rows = torch.arange(len(b), device=device)
    with torch.no_grad():
        probs = model(tokens).softmax(-1)[rows, b]  # [rows, d_vocab]: the prediction after B
    target = triples[which, 2]
    out = {
        "triple_accuracy": float((probs.argmax(-1) == target).float().mean()),
        "triple_prob": float(probs[rows, target].mean()),
    }
    source_pos = (tokens == triples[which, 0][:, None]).float().argmax(-1)
    bugs = []
    for a, dest, wrong, control in task.bugs.tolist():
        sel = triples[which, 1] == dest
        p = {}
        for label, src in (("p_bug", a), ("p_control", control)):
            t = tokens[sel].clone()
            r = torch.arange(int(sel.sum()), device=device)
            t[r, source_pos[sel]] = src
            with torch.no_grad():
                p[label] = float(model(t).softmax(-1)[r, b[sel], wrong].mean())
        bugs.append({"A": task.vocab[a], "B": task.vocab[dest], "wrong_C": task.vocab[wrong],
                     "control_A": task.vocab[control], **p, "ratio": p["p_bug"] / p["p_control"]})
    out["bugs"] = bugs
    out["bug_ratio_min"] = min(x["ratio"] for x in bugs)
    return out


def _translation_metrics(model, config: dict) -> dict:
    """Teacher-forced and greedy held-out metrics of the translation model (no beam search)."""
    from circuitbook.data import translation as T
    from circuitbook.train.translation import translation_metrics

    _, test = T.make_split(config["n_train"], config["n_test"], seed=config["seed"])
    m = translation_metrics(model, test, beam_size=config.get("beam_size", 4), n_beam=0)
    return {k: m[k] for k in ("n_test", "exact_match_greedy", "token_accuracy", "mean_confidence", "ece", "nll")}


def check_targets(name: str, values: dict) -> list[str]:
    """The targets of ``name``'s recipe that ``values`` misses (empty list: all met)."""
    failures = []
    for key, (op, bound) in RECIPES[name].targets.items() if name in RECIPES else []:
        v = values.get(key)
        ok = v is not None and (v > bound if op == ">" else v < bound)
        if not ok:
            failures.append(f"{key} = {v} (target {op} {bound})")
    return failures


# ----------------------------------------------------------------------------------------
# Building (python -m circuitbook.models.zoo)
# ----------------------------------------------------------------------------------------


def build(name: str, *, threads: int = 1, progress: bool = True) -> tuple[object, dict]:
    """Train ``name`` from its recipe; return ``(model, record)`` with the json record.

    Deterministic: seeded model init and data, ``threads`` torch threads (1 by default;
    the same machine gives the same weights).
    """
    _check_name(name)
    if name == "toy-translation":
        return _build_translation()
    if name in TEXT_MODELS:
        return _build_text(name, threads=threads, progress=progress)
    from circuitbook.models.attn_only import attn_only
    from circuitbook.train import InductionMetrics, train_lm

    recipe = RECIPES[name]
    cfg = dict(recipe.model)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.random.fork_rng(devices=[]):
            model = attn_only(cfg.pop("n_layers"), **cfg)
        every = recipe.train.get("history_every")
        tracker = InductionMetrics(every=every, seq_len=EVAL["repeat_seq_len"], batch=EVAL["repeat_batch"],
                                   seed=EVAL["repeat_seed"]) if every else None
        t0 = time.perf_counter()
        losses = train_lm(model, batch_fn(recipe), steps=recipe.train["steps"], lr=recipe.train["lr"],
                          threads=threads, callback=tracker, progress=progress, desc=name)
        seconds = time.perf_counter() - t0
        model.eval()
        values = evaluate(name, model)
    finally:
        torch.set_num_threads(old_threads)
    training = {"seconds": round(seconds, 1), "threads": threads, "final_loss": _mean(losses[-50:]),
                "loss_curve": _curve(losses)}
    record = {"config": recipe.model, "recipe": asdict(recipe), "metrics": values, "training": training}
    if tracker is not None:
        record["history"] = _round(tracker.history)
        training["phase_change_step"] = tracker.phase_change_step(chance=math.log(recipe.model["d_vocab"]))
    return model, record


def _build_text(name: str, *, threads: int, progress: bool) -> tuple[object, dict]:
    """Train a text model, recording ``TextMetrics`` and keeping its float16 checkpoints
    (returned in ``record["checkpoints"]``, which ``save`` writes to their own file)."""
    import os

    from circuitbook.models.attn_only import attn_only
    from circuitbook.train import train_lm
    from circuitbook.train.text import TextMetrics

    recipe = RECIPES[name]
    cfg, d, t = dict(recipe.model), recipe.data, recipe.train
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        batches = batch_fn(recipe)
        tracker = TextMetrics(text_heldout(recipe), every=t["history_every"], early=tuple(d["icl_early"]),
                              late=tuple(d["icl_late"]), repeat_len=EVAL["repeat_seq_len"],
                              repeat_batch=EVAL["repeat_batch"], repeat_seed=EVAL["repeat_seed"],
                              checkpoints=t["checkpoints"])
        with torch.random.fork_rng(devices=[]):
            model = attn_only(cfg.pop("n_layers"), **cfg)
        load_before = os.getloadavg()
        t0, c0 = time.perf_counter(), time.process_time()
        losses = train_lm(model, batches, steps=t["steps"], lr=t["lr"], threads=threads, callback=tracker,
                          progress=progress, desc=name)
        seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
        load_after = os.getloadavg()
        model.eval()
        with torch.no_grad():  # the metrics are those of the weights as shipped, in float16
            for p in model.parameters():
                p.copy_(p.half().float())
        values = evaluate(name, model)
    finally:
        torch.set_num_threads(old_threads)
    # wall time depends on what else shares the CPU; the process's CPU time much less so
    training = {"seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1), "threads": threads,
                "final_loss": _mean(losses[-50:]), "loadavg_1min_at_start": round(load_before[0], 2), "loadavg_1min_at_end": round(load_after[0], 2),
                "loadavg_15min_at_end": round(load_after[2], 2), "nproc": os.cpu_count(),
                "checkpoint_steps": sorted(tracker.checkpoints), "stored_dtype": "float16"}
    record = {"config": recipe.model, "recipe": asdict(recipe), "metrics": values, "training": training,
              "history": _round(tracker.history, 4), "checkpoints": tracker.checkpoints}
    return model, record


def _build_translation() -> tuple[object, dict]:
    from circuitbook.train.translation import train_translation_zoo_model

    t0 = time.perf_counter()
    model, recorded, config = train_translation_zoo_model(seed=0)
    seconds = time.perf_counter() - t0
    values = _translation_metrics(model, config)
    training = {"seconds": round(seconds, 1), "threads": 1, "recorded_at_training": recorded}
    record = {"config": config, "recipe": {"source": "circuitbook.train.translation.train_translation_zoo_model",
                                           "seed": 0}, "metrics": values, "training": training}
    return model, record


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _curve(losses: list[float], points: int = 100) -> list[list[float]]:
    """``[[step, mean loss over the window ending at step], ...]``, about ``points`` entries."""
    w = max(1, len(losses) // points)
    return [[i + w, round(_mean(losses[i : i + w]), 4)] for i in range(0, len(losses) - w + 1, w)]


def _round(x, digits: int = 5):
    """Round every float in a nested structure to ``digits`` significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}") if math.isfinite(x) else x
    if isinstance(x, dict):
        return {k: _round(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_round(v, digits) for v in x]
    return x


def save(name: str, model, record: dict, directory: Path | str | None = None) -> tuple[Path, Path]:
    """Write ``<name>.safetensors`` and ``<name>.json`` (with the weights' SHA-256)."""
    from safetensors.torch import save_model

    weights, meta = paths(name, directory)
    weights.parent.mkdir(parents=True, exist_ok=True)
    # one metadata entry only: safetensors writes a dict's entries in arbitrary order, and the
    # file should be byte-identical when the weights are
    tag = {"circuitbook.zoo": f"{name} (format {FORMAT_VERSION})"}
    extra = {}
    if name in TEXT_MODELS:  # float16 on disk, to keep the package small
        from safetensors.torch import save_file

        record = dict(record)
        checkpoints = record.pop("checkpoints")
        save_file({k: v.detach().cpu().half().contiguous() for k, v in model.state_dict().items()}, str(weights),
                  metadata=tag)
        if checkpoints:
            ckpt = checkpoint_path(name, directory)
            save_file({f"step{s}/{k}": v.contiguous() for s, sd in checkpoints.items() for k, v in sd.items()},
                      str(ckpt), metadata=tag)
            extra["checkpoints_file"] = {"file": ckpt.name, "sha256": hashlib.sha256(ckpt.read_bytes()).hexdigest(),
                                         "bytes": ckpt.stat().st_size}
    else:
        save_model(model, str(weights), metadata=tag)
    record = {
        "name": name,
        "format": FORMAT_VERSION,
        "chapter": RECIPES[name].chapter if name in RECIPES else "12, 19",
        "description": RECIPES[name].description if name in RECIPES else
        "The Annotated Transformer's encoder-decoder trained on the toy translation task.",
        "weights": {"file": weights.name, "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
                    "bytes": weights.stat().st_size},
        **extra,
        "built_with": {"torch": torch.__version__, "python": sys.version.split()[0],
                       "command": f"python -m circuitbook.models.zoo {name}"},
        **_round(record, 6),
    }
    meta.write_text(_dumps(record) + "\n")
    return weights, meta


def _dumps(x, indent: int = 0) -> str:
    """JSON with one key per line and every list on one line (compact, diff-friendly)."""
    if isinstance(x, dict) and x:
        pad = " " * (indent + 1)
        items = [f"{pad}{json.dumps(k)}: {_dumps(v, indent + 1)}" for k, v in x.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    return json.dumps(x, separators=(", ", ": "))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m circuitbook.models.zoo",
                                     description="Retrain the zoo's checkpoints from their recipes (seeded, 1 thread).")
    parser.add_argument("names", nargs="*", help=f"models to build (default: all): {', '.join(NAMES)}")
    parser.add_argument("--out", default=None, help=f"output folder (default: {ZOO_DIR})")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    names = args.names or list(NAMES)
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        parser.error(f"unknown zoo model(s) {unknown}; the zoo has: {', '.join(NAMES)}")
    failed = []
    for n in names:
        model, record = build(n, threads=args.threads, progress=not args.no_progress)
        weights, meta = save(n, model, record, args.out)
        misses = check_targets(n, record["metrics"])
        shown = {k: v for k, v in record["metrics"].items() if not isinstance(v, (list, dict))}
        print(f"{n}: {record['training']['seconds']} s, {weights.stat().st_size / 1024:.0f} KB, {shown}")
        if misses:
            failed.append(n)
            print(f"  MISSED TARGETS: {misses}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
