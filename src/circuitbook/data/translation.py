"""A toy translation task with a known answer (chapters 12 and 19).

The source language is a tiny English; the target language is invented. Translation is
word-for-word through a fixed dictionary (``TABLE``), plus two reordering rules:

- **adjectives follow their noun** (as in French): ``big red dog`` -> ``dog' big' red'``
  (the adjectives keep their order);
- **the verb goes last** (subject-object-verb, as in Japanese or Latin):
  ``NP_subj verb NP_obj`` -> ``NP_subj' NP_obj' verb'``.

Source sentences are ``NP verb NP`` with ``NP = ADJ{0,1,2} NOUN`` (no repeated adjective
inside a noun phrase), so a sentence has 3 to 7 words and its translation the same number.
Example: ``big dog sees small red cat`` -> ``hundo granda kato eta ruga vidas``
(``exact_translation``). There are no articles and no agreement: the grammar is the
reordering, nothing else. 14 nouns, 8 adjectives and 8 verbs give 910 noun phrases and
910 * 8 * 910 = 6.6 million sentences.

Because of the two rules the alignment between target and source positions
(``alignment``) is a permutation that is not the identity, so a model's cross-attention
pattern can be checked against it (chapter 12), and because the dictionary is a bijection
``table_ids()`` gives the exact token-to-token table that the cross-attention OV circuit
``W_E^src W_OV W_U^tgt`` should approximate (``table_agreement`` scores it).

Token ids: 0 ``<pad>``, 1 ``<s>`` (BOS), 2 ``</s>`` (EOS) in both vocabularies; the words
follow. Source words are listed by class (nouns, adjectives, verbs), target words in
alphabetical order, so the id-to-id table is a non-trivial permutation. Sequences are
``[BOS] words [EOS]`` padded with PAD. ``Batch`` builds the masks exactly as the Annotated
Transformer's ``Batch`` does.
"""

from __future__ import annotations

import random
from typing import Iterable, Sequence

import torch

from circuitbook.masks import make_std_mask

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ["<pad>", "<s>", "</s>"]

NOUNS = {
    "dog": "hundo", "cat": "kato", "bird": "birdo", "fish": "fiso", "horse": "ekvo", "cow": "bovo",
    "mouse": "muso", "fox": "vulpo", "bear": "urso", "wolf": "lupo", "king": "rego", "child": "infano",
    "farmer": "farmo", "teacher": "doko",
}
ADJECTIVES = {
    "big": "granda", "small": "eta", "red": "ruga", "green": "verda", "old": "malnova", "young": "juna",
    "happy": "gaja", "tired": "laca",
}
VERBS = {
    "sees": "vidas", "likes": "satas", "chases": "casas", "helps": "helpas", "finds": "trovas",
    "feeds": "nutras", "hears": "audas", "follows": "sekvas",
}

TABLE: dict[str, str] = {**NOUNS, **ADJECTIVES, **VERBS}
"""The word-for-word dictionary, source word -> target word (a bijection)."""

SRC_VOCAB: list[str] = SPECIALS + list(NOUNS) + list(ADJECTIVES) + list(VERBS)
TGT_VOCAB: list[str] = SPECIALS + sorted(TABLE.values())
SRC_INDEX = {w: i for i, w in enumerate(SRC_VOCAB)}
TGT_INDEX = {w: i for i, w in enumerate(TGT_VOCAB)}
MAX_WORDS = 7  # 2 adjectives + noun, verb, 2 adjectives + noun
MAX_LEN = MAX_WORDS + 2  # with BOS and EOS

assert len(set(TABLE.values())) == len(TABLE), "the dictionary must be a bijection"


# --------------------------------------------------------------------------------------
# The reference translation
# --------------------------------------------------------------------------------------


def _split(words: Sequence[str]) -> tuple[list[str], str, list[str]]:
    """(subject NP, verb, object NP) of a source sentence, or a clear ValueError."""
    words = list(words)
    unknown = [w for w in words if w not in TABLE]
    if unknown:
        raise ValueError(f"words not in the source vocabulary: {unknown}; known words: {sorted(TABLE)}")
    verbs = [i for i, w in enumerate(words) if w in VERBS]
    if len(verbs) != 1:
        raise ValueError(f"a source sentence has exactly one verb (NP verb NP), got {words}")
    v = verbs[0]
    subj, obj = words[:v], words[v + 1 :]
    for np_ in (subj, obj):
        if not np_ or np_[-1] not in NOUNS or any(w not in ADJECTIVES for w in np_[:-1]) or len(np_) > 3:
            raise ValueError(f"noun phrases are 0-2 adjectives then a noun, got {np_} in {words}")
    return subj, words[v], obj


def _np_order(np_: list[int]) -> list[int]:
    """Positions of a noun phrase in target order: noun first, then the adjectives."""
    return [np_[-1]] + np_[:-1]


def alignment(words: Sequence[str]) -> list[int]:
    """For each target word position j, the source word position it translates.

    ``exact_translation(words)[j] == TABLE[words[alignment(words)[j]]]``. Positions count
    words only (add 1 on both sides for the BOS column of model inputs). Chapter 12 compares
    cross-attention patterns with this permutation.
    """
    subj, _, obj = _split(words)
    s = list(range(len(subj)))
    v = len(subj)
    o = list(range(v + 1, v + 1 + len(obj)))
    return _np_order(s) + _np_order(o) + [v]


def exact_translation(src):
    """The reference translation of a source sentence.

    Accepts a string (``"big dog sees cat"`` -> ``"hundo granda kato vidas"``), a list of
    source words (-> list of target words), or a 1-D sequence/tensor of source token ids
    (BOS, EOS and PAD are ignored; -> list of target ids of the words, no specials).
    """
    if isinstance(src, str):
        return " ".join(exact_translation(src.split()))
    if isinstance(src, torch.Tensor):
        if src.ndim != 1:
            raise ValueError(f"exact_translation takes one sentence (1-D ids), got shape {tuple(src.shape)}")
        src = src.tolist()
    src = list(src)
    if src and all(isinstance(t, int) for t in src):
        words = decode(strip_specials(src), SRC_VOCAB)
        return encode(exact_translation(words), TGT_VOCAB)
    order = alignment(src)
    return [TABLE[src[i]] for i in order]


# --------------------------------------------------------------------------------------
# Vocabulary helpers and the exact table
# --------------------------------------------------------------------------------------


def encode(words: Sequence[str], vocab: list[str]) -> list[int]:
    """Word list -> id list in ``vocab`` (``SRC_VOCAB`` or ``TGT_VOCAB``), no specials added."""
    index = SRC_INDEX if vocab is SRC_VOCAB else TGT_INDEX if vocab is TGT_VOCAB else {w: i for i, w in enumerate(vocab)}
    bad = [w for w in words if w not in index]
    if bad:
        raise ValueError(f"words not in this vocabulary: {bad}")
    return [index[w] for w in words]


def decode(ids: Iterable[int], vocab: list[str]) -> list[str]:
    """Id list -> word list (specials are kept as their names, e.g. ``</s>``)."""
    ids = [int(i) for i in ids]
    bad = [i for i in ids if not 0 <= i < len(vocab)]
    if bad:
        raise ValueError(f"ids out of range 0..{len(vocab) - 1}: {bad}")
    return [vocab[i] for i in ids]


def strip_specials(ids: Iterable[int]) -> list[int]:
    """Drop BOS and PAD, cut at the first EOS: the word ids of one sequence."""
    out = []
    for i in (int(t) for t in ids):
        if i == EOS:
            break
        if i not in (PAD, BOS):
            out.append(i)
    return out


def table_ids() -> torch.Tensor:
    """The dictionary as ids: LongTensor [len(SRC_VOCAB)], entry s = target id of source id s.

    Specials map to themselves (PAD->PAD, BOS->BOS, EOS->EOS). Chapter 12 scores a
    [src_vocab, tgt_vocab] matrix such as the full OV circuit against it.
    """
    return torch.tensor([i if i < len(SPECIALS) else TGT_INDEX[TABLE[w]] for i, w in enumerate(SRC_VOCAB)], device="cpu")


def table_agreement(scores: torch.Tensor, words_only: bool = True) -> float:
    """Top-1 agreement of a [src_vocab, tgt_vocab] score matrix with the dictionary.

    Fraction of source words s (specials excluded when ``words_only``) for which
    argmax_t scores[s, t] is the true translation. A random matrix scores about
    1/len(TGT_VOCAB); the exact table scores 1. Chapter 12 applies it to
    ``W_E^src W_OV^h W_U^tgt``.
    """
    shape = (len(SRC_VOCAB), len(TGT_VOCAB))
    if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != shape:
        raise ValueError(f"scores must be a [src_vocab, tgt_vocab] = {list(shape)} tensor, got {getattr(scores, 'shape', type(scores))}")
    rows = slice(len(SPECIALS), None) if words_only else slice(None)
    return (scores.argmax(-1)[rows] == table_ids()[rows].to(scores.device)).float().mean().item()


# --------------------------------------------------------------------------------------
# Sentences, splits and tensors
# --------------------------------------------------------------------------------------


def _noun_phrase(rng: random.Random) -> list[str]:
    n_adj = rng.choice((0, 1, 1, 2))
    return rng.sample(list(ADJECTIVES), n_adj) + [rng.choice(list(NOUNS))]


def random_sentence(rng: random.Random) -> list[str]:
    """One source sentence ``NP verb NP`` drawn with ``rng`` (a ``random.Random``).

    Each noun phrase has 0, 1 or 2 adjectives with probabilities 1/4, 1/2, 1/4.
    """
    return _noun_phrase(rng) + [rng.choice(list(VERBS))] + _noun_phrase(rng)


def sample_sentences(n: int, seed: int = 0) -> list[list[str]]:
    """``n`` source sentences (with repeats possible), deterministic given ``seed``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    return [random_sentence(rng) for _ in range(n)]


def make_split(n_train: int, n_test: int, seed: int = 0) -> tuple[list[list[str]], list[list[str]]]:
    """Disjoint train and held-out sets of distinct source sentences.

    Draws distinct sentences with ``random.Random(seed)``; the first ``n_test`` form the
    held-out set, the next ``n_train`` the training pool. No held-out sentence occurs in the
    training pool (6.6 million sentences exist, so both sets are small samples).
    """
    if n_train < 1 or n_test < 1:
        raise ValueError(f"n_train and n_test must be >= 1, got {n_train}, {n_test}")
    rng = random.Random(seed)
    seen, out = set(), []
    while len(out) < n_train + n_test:
        s = random_sentence(rng)
        key = " ".join(s)
        if key not in seen:
            seen.add(key)
            out.append(s)
    return out[n_test:], out[:n_test]


def to_tensors(sentences: Sequence[Sequence[str]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Source sentences -> (src [n, MAX_LEN], tgt [n, MAX_LEN]) LongTensors.

    Each row is ``[BOS] ids [EOS]`` then PAD; ``tgt`` holds the reference translations.
    """
    if len(sentences) == 0:
        raise ValueError("to_tensors needs at least one sentence")
    src = torch.full((len(sentences), MAX_LEN), PAD, dtype=torch.long, device="cpu")
    tgt = torch.full((len(sentences), MAX_LEN), PAD, dtype=torch.long, device="cpu")
    for i, words in enumerate(sentences):
        s = [BOS] + encode(words, SRC_VOCAB) + [EOS]
        t = [BOS] + encode(exact_translation(words), TGT_VOCAB) + [EOS]
        src[i, : len(s)] = torch.tensor(s, device="cpu")
        tgt[i, : len(t)] = torch.tensor(t, device="cpu")
    return src, tgt


class Batch:
    """A batch for teacher-forced training, as in the Annotated Transformer.

    - ``src`` [batch, src], ``src_mask`` = (src != pad) [batch, 1, src];
    - ``tgt`` = target[:, :-1] (decoder input, starts with BOS), ``tgt_y`` = target[:, 1:]
      (what each position must predict), ``tgt_mask`` = ``make_std_mask`` [batch, tgt, tgt];
    - ``ntokens``: number of non-pad tokens in ``tgt_y`` (the loss is divided by it).
    """

    def __init__(self, src: torch.Tensor, tgt: torch.Tensor | None = None, pad: int = PAD):
        self.src = src
        self.src_mask = (src != pad).unsqueeze(-2)
        if tgt is not None:
            self.tgt = tgt[:, :-1]
            self.tgt_y = tgt[:, 1:]
            self.tgt_mask = make_std_mask(self.tgt, pad)
            self.ntokens = (self.tgt_y != pad).sum()


def batches(sentences: Sequence[Sequence[str]], batch_size: int, seed: int = 0, shuffle: bool = True):
    """Yield ``Batch``es covering ``sentences`` once (an epoch), shuffled with ``seed``."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    src, tgt = to_tensors(sentences)
    order = (torch.randperm(len(sentences), generator=torch.Generator().manual_seed(seed), device="cpu") if shuffle
             else torch.arange(len(sentences), device="cpu"))
    for start in range(0, len(sentences), batch_size):
        idx = order[start : start + batch_size]
        yield Batch(src[idx], tgt[idx], PAD)
