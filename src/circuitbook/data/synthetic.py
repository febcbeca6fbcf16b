"""Synthetic tasks with known answers for the toy models (chapters 14-17).

Each task is built so that we know exactly what a model *could* learn from it:

- ``bigram_chain``: a Markov chain with a known transition matrix ``P[a, b] = p(b | a)``.
  The best a zero-layer model can do is predict ``P[current token]``, so its
  ``W_E W_U`` should approach ``log P`` up to a per-row constant (chapter 14).
- ``skip_trigram_task``: sequences ``... A ... B -> C`` with a documented table of
  triples (A anywhere earlier, B the current token, C the next one). A one-layer model
  learns them as skip-trigrams, and because its OV circuit maps a source A to the same
  outputs whatever the destination, it also boosts wrong combinations: the skip-trigram
  "bug" of Elhage et al. (2021), e.g. ``keep ... in -> bay`` (chapter 15).
- ``induction_tokens``: random segments repeated across the context from a random
  phase. Only in-context copying predicts them, which needs an induction head: two
  composed layers (chapters 16-17).

Every generator takes a ``seed`` and returns the same tensors for the same seed.
Tokens are LongTensors ``[batch, pos]`` in TransformerLens's row-vector convention.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

# ----------------------------------------------------------------------------------------
# Bigram chain (chapter 14)
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BigramChain:
    """A Markov chain over ``d_vocab`` tokens with a known transition matrix.

    ``transition[a, b] = p(next = b | current = a)``, shape [d_vocab, d_vocab], rows sum
    to 1. ``successors[a]`` lists the ``n_successors`` likely next tokens of ``a``; every
    other entry holds only the small ``floor`` mass, so the structure is visible in a
    heatmap. Built by :func:`bigram_chain`; taught in chapter 14.
    """

    transition: torch.Tensor
    successors: torch.Tensor
    seed: int

    @property
    def d_vocab(self) -> int:
        return self.transition.shape[0]

    def log_transition(self) -> torch.Tensor:
        """``log P`` [d_vocab, d_vocab]: what a perfect zero-layer model's logits equal
        up to a constant per row (chapter 14 compares it with ``W_E W_U``)."""
        return self.transition.log()

    def entropy(self) -> float:
        """The loss floor in nats: ``sum_a pi[a] H(P[a])`` with ``H(P[a]) = -sum_b P[a, b] log P[a, b]``
        and ``pi`` the stationary distribution (how often the chain visits ``a``). No model
        can beat it on long samples of this chain."""
        p = self.transition
        return float((self.stationary() * -(p * p.log()).sum(-1)).sum())

    def stationary(self) -> torch.Tensor:
        """The stationary distribution pi [d_vocab] with ``pi P = pi`` (row vector)."""
        pi = torch.full((self.d_vocab,), 1.0 / self.d_vocab, dtype=torch.float64, device="cpu")
        p = self.transition.double()
        for _ in range(500):
            pi = pi @ p
        return (pi / pi.sum()).float()

    def sample(self, batch: int, seq_len: int, seed: int = 0) -> torch.Tensor:
        """Sample ``batch`` chains of ``seq_len`` tokens: a LongTensor [batch, seq_len].

        The first token is uniform; each next token is drawn from ``transition[prev]``.
        Same ``seed`` -> same tokens.
        """
        _check_batch(batch, seq_len)
        g = torch.Generator().manual_seed(seed)
        cdf = self.transition.double().cumsum(-1)
        cdf[:, -1] = 1.0
        tokens = torch.empty(batch, seq_len, dtype=torch.long, device="cpu")
        tokens[:, 0] = torch.randint(0, self.d_vocab, (batch,), generator=g, device="cpu")
        u = torch.rand(seq_len, batch, 1, generator=g, dtype=torch.float64, device="cpu")
        for t in range(1, seq_len):
            rows = cdf[tokens[:, t - 1]]  # [batch, d_vocab]: the CDF of each row's next token
            tokens[:, t] = torch.searchsorted(rows, u[t]).squeeze(1).clamp_(max=self.d_vocab - 1)
        return tokens


def bigram_chain(
    d_vocab: int = 64,
    *,
    seed: int = 0,
    n_successors: int = 4,
    concentration: float = 1.0,
    floor: float = 0.02,
) -> BigramChain:
    """A seeded random bigram chain with a few likely successors per token (chapter 14).

    Row ``a`` of the transition matrix is
    ``P[a] = (1 - floor) * Dirichlet(concentration) over n_successors tokens + floor / d_vocab``,
    so each token has ``n_successors`` likely followers (smaller ``concentration`` makes
    one of them dominate) and every transition has probability at least
    ``floor / d_vocab`` (so ``log P`` is finite). Every token is the likely successor of
    exactly ``n_successors`` tokens, so no token is unreachable; the Dirichlet weights still
    make the visit frequencies uneven (chapter 14 shows them for toy-0l's chain). A model
    that learns only bigram statistics reaches ``chain.entropy()``.
    """
    if d_vocab < 2:
        raise ValueError(f"d_vocab must be >= 2, got {d_vocab}")
    if not 1 <= n_successors <= d_vocab:
        raise ValueError(f"n_successors must be in 1..d_vocab={d_vocab}, got {n_successors}")
    if concentration <= 0:
        raise ValueError(f"concentration must be > 0, got {concentration}")
    if not 0 < floor < 1:
        raise ValueError(f"floor must be in (0, 1), got {floor} (0 would make log P infinite)")
    rng = np.random.default_rng(seed)
    # A relabelled circulant graph: a -> perm[(rank[a] + offset_k) mod d_vocab]. Every token
    # then has exactly n_successors distinct successors *and* predecessors, so every token is
    # visited (how often depends on the Dirichlet weights) and every row of P gets learned.
    perm = rng.permutation(d_vocab)
    rank = np.argsort(perm)
    offsets = rng.choice(np.arange(1, d_vocab), size=n_successors, replace=False) if d_vocab > n_successors else np.arange(n_successors)
    successors = perm[(rank[:, None] + offsets[None, :]) % d_vocab]
    weights = rng.dirichlet(np.full(n_successors, float(concentration)), size=d_vocab)
    transition = torch.full((d_vocab, d_vocab), floor / d_vocab, device="cpu")
    transition.scatter_add_(1, torch.from_numpy(successors), (1 - floor) * torch.from_numpy(weights).float())
    return BigramChain(transition=transition, successors=torch.from_numpy(successors).long(), seed=seed)


# ----------------------------------------------------------------------------------------
# Skip-trigrams (chapter 15)
# ----------------------------------------------------------------------------------------

#: The known skip-trigrams ``(source A, current B, next C)``: "A ... B -> C".
#: ``keep`` and ``hold`` are each followed by several destinations, and ``in`` and ``on``
#: follow both sources, so neither A alone nor B alone predicts C. A one-layer model
#: attends from B back to A and copies A through its OV circuit; that OV circuit maps
#: ``keep`` to *all* of keep's completions, whatever the destination, so it also boosts
#: ``keep ... in -> bay``: the skip-trigram bug (Elhage et al. 2021).
SKIP_TRIGRAMS: tuple[tuple[str, str, str], ...] = (
    ("keep", "in", "mind"),
    ("keep", "at", "bay"),
    ("keep", "on", "track"),
    ("hold", "in", "check"),
    ("hold", "on", "tight"),
)


def _skip_trigram_bugs(triples) -> tuple[tuple[str, str, str, str], ...]:
    """The wrong combinations ``(A, B, wrong C, control A')`` a one-layer model should boost.

    ``wrong C`` is a completion of ``A`` with another destination; ``A'`` is another
    source seen with ``B`` but never with ``wrong C``, so ``p(wrong C | A' ... B)`` is the
    baseline that ``p(wrong C | A ... B)`` exceeds when the bug is present.
    """
    completions: dict[str, set[str]] = {}
    for a, _, c in triples:
        completions.setdefault(a, set()).add(c)
    bugs = []
    for a, b, c in triples:
        for wrong in sorted(completions[a] - {c}):
            if (a, b, wrong) in triples:
                continue
            controls = [a2 for a2, b2, _ in triples if b2 == b and a2 != a and wrong not in completions[a2]]
            if controls:
                bugs.append((a, b, wrong, controls[0]))
    return tuple(bugs)


#: ``(A, B, wrong C, control A')``: e.g. ``("keep", "in", "bay", "hold")`` reads "after
#: keep ... in, a one-layer model gives *bay* more probability than after hold ... in".
SKIP_TRIGRAM_BUGS: tuple[tuple[str, str, str, str], ...] = _skip_trigram_bugs(SKIP_TRIGRAMS)


@dataclass(frozen=True)
class SkipTrigramTask:
    """The skip-trigram task of chapter 15: filler text with one ``A ... B -> C`` per row.

    ``vocab[i]`` names token ``i``: the words of :data:`SKIP_TRIGRAMS` first, then fillers
    ``"w10", "w11", ...``. ``triples`` is a LongTensor [n_triples, 3] of (A, B, C) ids and
    ``bugs`` a LongTensor [n_bugs, 4] of (A, B, wrong C, control A) ids. Filler tokens
    are uniform over ``filler_ids`` (so the best filler loss is ``ln(len(filler_ids))``),
    and never equal a word of the table, so only the planted triple predicts ``C``.
    """

    d_vocab: int
    vocab: tuple[str, ...]
    triples: torch.Tensor
    bugs: torch.Tensor
    filler_ids: torch.Tensor
    max_gap: int = 24
    orphan_fraction: float = 0.25
    names: tuple[tuple[str, str, str], ...] = field(default=SKIP_TRIGRAMS)

    def token(self, name: str) -> int:
        """The id of word ``name`` (e.g. ``task.token("keep")``)."""
        try:
            return self.vocab.index(name)
        except ValueError:
            raise KeyError(f"{name!r} is not a word of this task; words: {list(self.vocab[:self.n_words])}") from None

    @property
    def n_words(self) -> int:
        return len(self.vocab) - len(self.filler_ids)

    def table(self) -> list[dict]:
        """The triple table as rows ``{"A", "B", "C", "ids"}`` for display in chapter 15."""
        return [
            {"A": a, "B": b, "C": c, "ids": tuple(int(i) for i in ids)}
            for (a, b, c), ids in zip(self.names, self.triples)
        ]

    def sample(self, batch: int, seq_len: int, seed: int = 0, *, return_positions: bool = False):
        """Sample ``batch`` rows of ``seq_len`` tokens, each with one planted triple.

        Row layout: fillers, ``A`` at position ``a``, fillers, ``B`` at ``b`` and ``C`` at
        ``b + 1``, fillers, with ``1 <= b - a <= max_gap`` and ``b + 1 < seq_len``. The
        triple is uniform over the table. In a fraction ``orphan_fraction`` of the rows
        the source ``A`` and the completion ``C`` are fillers ("... B -> filler"), so the
        current token ``B`` alone never predicts ``C``: the model must look back at ``A``.

        Returns tokens [batch, seq_len]; with ``return_positions=True`` also
        ``(triple_index, b)`` LongTensors [batch] (``triple_index = -1`` on orphan rows),
        so the prediction of ``C`` is ``logits[i, b[i]]``.
        """
        _check_batch(batch, seq_len)
        if seq_len < 3:
            raise ValueError(f"seq_len must be >= 3 to hold 'A ... B -> C', got {seq_len}")
        g = torch.Generator().manual_seed(seed)
        fill = torch.randint(0, len(self.filler_ids), (batch, seq_len), generator=g, device="cpu")
        tokens = self.filler_ids[fill]
        which = torch.randint(0, len(self.triples), (batch,), generator=g, device="cpu")
        b = torch.randint(1, seq_len - 1, (batch,), generator=g, device="cpu")
        gap_max = torch.clamp(b, max=self.max_gap)
        gap = 1 + (torch.rand(batch, generator=g, device="cpu") * gap_max).long().clamp(max=gap_max - 1)
        orphan = torch.rand(batch, generator=g, device="cpu") < self.orphan_fraction
        rows = torch.arange(batch, device="cpu")
        planted = self.triples[which]
        tokens[rows, b] = planted[:, 1]
        keep = ~orphan
        tokens[rows[keep], (b - gap)[keep]] = planted[keep, 0]
        tokens[rows[keep], (b + 1)[keep]] = planted[keep, 2]
        if not return_positions:
            return tokens
        return tokens, torch.where(orphan, -1, which), b


def skip_trigram_task(d_vocab: int = 64, *, max_gap: int = 24, orphan_fraction: float = 0.25) -> SkipTrigramTask:
    """The skip-trigram task over ``d_vocab`` tokens (chapter 15).

    The first ids are the words of :data:`SKIP_TRIGRAMS` (``keep, in, mind, at, bay, ...``
    in order of first appearance); the rest are filler. The task itself is fixed (the
    seed lives in :meth:`SkipTrigramTask.sample`). A one-layer model can learn every
    triple with a head that attends from ``B`` back to ``A`` and an OV circuit mapping
    ``A`` to ``C``; with a single head that same OV circuit also boosts the wrong
    completions listed in :data:`SKIP_TRIGRAM_BUGS`.
    """
    words: list[str] = []
    for triple in SKIP_TRIGRAMS:
        for w in triple:
            if w not in words:
                words.append(w)
    if d_vocab < len(words) + 2:
        raise ValueError(f"d_vocab must be >= {len(words) + 2} (the {len(words)} words plus filler), got {d_vocab}")
    if max_gap < 1:
        raise ValueError(f"max_gap must be >= 1, got {max_gap}")
    if not 0.0 <= orphan_fraction < 1.0:
        raise ValueError(f"orphan_fraction must be in [0, 1), got {orphan_fraction}")
    vocab = tuple(words + [f"w{i}" for i in range(len(words), d_vocab)])
    idx = {w: i for i, w in enumerate(words)}
    triples = torch.tensor([[idx[w] for w in t] for t in SKIP_TRIGRAMS], device="cpu")
    bugs = torch.tensor([[idx[w] for w in t] for t in SKIP_TRIGRAM_BUGS], device="cpu")
    return SkipTrigramTask(
        d_vocab=d_vocab,
        vocab=vocab,
        triples=triples,
        bugs=bugs,
        filler_ids=torch.arange(len(words), d_vocab, device="cpu"),
        max_gap=max_gap,
        orphan_fraction=orphan_fraction,
    )


def skip_trigram_tokens(batch: int, seq_len: int, d_vocab: int = 64, *, seed: int = 0):
    """Tokens [batch, seq_len] of the skip-trigram task plus its triple table (chapter 15).

    Shorthand for ``task = skip_trigram_task(d_vocab); (task.sample(batch, seq_len,
    seed=seed), task.table())``.
    """
    task = skip_trigram_task(d_vocab)
    return task.sample(batch, seq_len, seed=seed), task.table()


# ----------------------------------------------------------------------------------------
# Induction data (chapters 16-17, 19)
# ----------------------------------------------------------------------------------------


def induction_tokens(
    batch: int,
    seq_len: int,
    d_vocab: int = 64,
    *,
    seed: int = 0,
    min_len: int = 16,
    max_len: int = 32,
    background: BigramChain | None = None,
    background_fraction: float = 0.0,
) -> torch.Tensor:
    """Rows made of a random segment repeated across the context: training data for
    induction heads (chapters 17 and 19).

    Row ``r`` draws a length ``m_r`` uniform in ``[min_len, max_len]``, a segment
    ``s_r`` of ``m_r`` uniform random tokens and a phase ``phi_r`` uniform in
    ``[0, m_r)``, and is ``x[r, t] = s_r[(t + phi_r) mod m_r]``. The first ``m_r`` tokens
    are unpredictable (loss ``ln d_vocab``); every later token equals the one ``m_r``
    positions back, which a two-layer model predicts with a previous-token head
    feeding an induction head. Random lengths and phases matter: repeats at fixed
    positions can be solved from position alone, with no induction head.

    With ``background`` (a :class:`BigramChain`), a fraction ``background_fraction`` of
    the rows are bigram chains instead, so the model also learns bigram statistics and
    the in-context loss first rises, then collapses at the phase change. Returns a
    LongTensor [batch, seq_len]; same ``seed`` -> same tokens.
    """
    _check_batch(batch, seq_len)
    if d_vocab < 2:
        raise ValueError(f"d_vocab must be >= 2, got {d_vocab}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}")
    if not 0.0 <= background_fraction <= 1.0:
        raise ValueError(f"background_fraction must be in [0, 1], got {background_fraction}")
    if background_fraction > 0 and background is None:
        raise ValueError("background_fraction > 0 needs a background chain, e.g. background=bigram_chain(d_vocab)")
    if background is not None and background.d_vocab != d_vocab:
        raise ValueError(f"background has d_vocab={background.d_vocab}, but d_vocab={d_vocab}")
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (batch, 1), generator=g, device="cpu")
    phase = (torch.rand(batch, 1, generator=g, device="cpu") * lengths).long()
    segments = torch.randint(0, d_vocab, (batch, max_len), generator=g, device="cpu")
    index = (torch.arange(seq_len, device="cpu") + phase) % lengths
    tokens = segments.gather(1, index)
    if background is not None and background_fraction > 0:
        is_bg = torch.rand(batch, generator=g, device="cpu") < background_fraction
        bg_seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g, device="cpu"))
        bg = background.sample(batch, seq_len, seed=bg_seed)
        tokens = torch.where(is_bg[:, None], bg, tokens)
    return tokens


def _check_batch(batch: int, seq_len: int) -> None:
    if batch < 1 or seq_len < 1:
        raise ValueError(f"batch and seq_len must be >= 1, got batch={batch}, seq_len={seq_len}")
