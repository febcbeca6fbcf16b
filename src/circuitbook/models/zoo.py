"""The book's model zoo: small trained checkpoints shipped with the package.

``load(name)`` returns a trained model in well under a second, so chapters never wait for
training. Every checkpoint is two files in ``circuitbook/zoo/``: ``<name>.safetensors``
(the weights) and ``<name>.json`` (the model config, the training recipe, the metrics
measured when it was built, and for ``toy-2l`` the training history of chapter 17).

This module is the registry and the loader: the recipes (``RECIPES``, in code), the fixed
evaluation settings (``EVAL``) and ``load``. Building is training's business and lives
above the models: ``python -m circuitbook.train.build [names...]`` retrains the checkpoints
from scratch, seeded, on one CPU thread, and rewrites both files; ``circuitbook.train.streams``
holds each recipe's training data and ``circuitbook.train.metrics`` the recorded metrics.
(The json files of checkpoints built before that move record the command
``python -m circuitbook.models.zoo``, its former name.)

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

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch

from circuitbook.devices import resolve_device

ZOO_DIR = Path(__file__).resolve().parent.parent / "zoo"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """How one attention-only zoo model is built (read by ``circuitbook.train.build`` and
    saved in its json).

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

# Fixed evaluation settings, so a loaded checkpoint's metrics can be recomputed exactly
# (``circuitbook.train.metrics.evaluate``).
EVAL = dict(repeat_seq_len=32, repeat_batch=16, repeat_seed=0, n_rows=512, eval_seed=999_983)


# ----------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------


def check_name(name: str) -> None:
    """Raise a ``KeyError`` listing the zoo unless ``name`` is one of ``NAMES``."""
    if name not in NAMES:
        raise KeyError(f"unknown zoo model {name!r}; the zoo has: {', '.join(NAMES)}")


def paths(name: str, directory: Path | str | None = None) -> tuple[Path, Path]:
    """``(weights .safetensors, info .json)`` paths of ``name``."""
    check_name(name)
    d = ZOO_DIR if directory is None else Path(directory)
    return d / f"{name}.safetensors", d / f"{name}.json"


def checkpoint_path(name: str, directory: Path | str | None = None) -> Path:
    """The ``<name>.checkpoints.safetensors`` file of a text model's intermediate weights."""
    check_name(name)
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
            f"build it with `python -m circuitbook.train.build {name}`"
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
    check_name(name)
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
        from circuitbook.models.encoder_decoder import model_from_config

        return model_from_config(config).to(device)
    from circuitbook.models.attn_only import attn_only

    cfg = dict(config, seed=None)  # the weights are loaded next: no need to seed torch's global RNG
    return attn_only(cfg.pop("n_layers"), device=device, **cfg)
