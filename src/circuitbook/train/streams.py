"""The training data of each zoo recipe, as the builds saw it (chapters 14-19).

A recipe (``circuitbook.models.zoo.RECIPES``) names its data by kind and settings; these
functions turn it into tokens:

- :func:`batch_fn`: ``step -> tokens [batch, seq_len]``, the exact batches ``train_lm`` was
  given (bigram chain, skip-trigram task, repeated segments, their mixture, or Shakespeare
  windows with copied passages);
- :func:`text_streams` / :func:`text_heldout`: a text recipe's training and held-out token
  streams, and the fixed held-out windows its metrics are measured on;
- :func:`recipe_chain`: the bigram chain a recipe samples from.

Every draw is seeded, so the same recipe gives the same tokens on every machine.
"""

from __future__ import annotations

import functools
import importlib

import torch

from circuitbook.data import synthetic as S
from circuitbook.models.zoo import Recipe
from circuitbook.train.text import heldout_windows


def batch_fn(recipe: Recipe):
    """``step -> tokens [batch, seq_len]`` for ``recipe``: the exact training data (step ``s``
    draws its batch with seed ``recipe.train["data_seed"] + s``)."""
    d, t, vocab = recipe.data, recipe.train, recipe.model["d_vocab"]
    batch, seq_len, base = t["batch"], t["seq_len"], t["data_seed"]
    if d["kind"] == "bigram":
        chain = recipe_chain(recipe)
        return lambda step: chain.sample(batch, seq_len, seed=base + step)
    if d["kind"] == "skip_trigram":
        task = S.skip_trigram_task(vocab, max_gap=d["max_gap"], orphan_fraction=d["orphan_fraction"])
        return lambda step: task.sample(batch, seq_len, seed=base + step)
    if d["kind"] == "induction":
        chain = recipe_chain(recipe) if d["background_fraction"] > 0 else None
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
    every extra its import statements reach, which for a constant of ``circuitbook.train``
    (chapter 2 reads ``ZOO_CONFIG``) is every module of the package. Chapters that only train
    or load toy models stay light; chapter 19 imports ``circuitbook.data.passages`` itself."""
    return importlib.import_module(f"circuitbook.data.{name}")


def text_heldout(recipe: Recipe) -> torch.Tensor:
    """The fixed held-out windows of a text recipe: [heldout_rows, seq_len] of plain text."""
    _, heldout = text_streams(recipe)
    return heldout_windows(heldout, recipe.train["seq_len"], recipe.data["heldout_rows"])


def recipe_chain(recipe: Recipe):
    """The bigram chain of ``recipe`` (``circuitbook.data.bigram_chain`` with its settings)."""
    d = recipe.data
    return S.bigram_chain(
        recipe.model["d_vocab"], seed=d["chain_seed"], n_successors=d.get("n_successors", 4),
        concentration=d.get("concentration", 1.0), floor=d.get("floor", 0.02),
    )


def _mixture(recipe: Recipe, batch: int, seq_len: int, seed: int) -> torch.Tensor:
    """Rows of bigram chain, skip-trigram task and repeated segments, in fixed proportions."""
    d, vocab = recipe.data, recipe.model["d_vocab"]
    counts = {k: round(v * batch) for k, v in d["fractions"].items()}
    counts["repeats"] = batch - counts["bigram"] - counts["skip_trigram"]
    parts = [
        recipe_chain(recipe).sample(counts["bigram"], seq_len, seed=seed),
        S.skip_trigram_task(vocab).sample(counts["skip_trigram"], seq_len, seed=seed),
        S.induction_tokens(counts["repeats"], seq_len, vocab, seed=seed, min_len=d["min_len"], max_len=d["max_len"]),
    ]
    return torch.cat(parts)
