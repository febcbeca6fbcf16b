"""Text windows in which a passage recurs: training data for the text model of chapter 19.

Real documents repeat themselves: a name, a refrain, a line quoted back. Shakespeare's plays
do so at every speech (the speaker's name), but a tiny model on two CPU cores sees too
few of those repeats in a few minutes to form induction heads. ``passage_windows`` makes
them more frequent while keeping the text: every row is a window of consecutive corpus
tokens, and ``n_repeats`` times a passage of the row is copied over a later stretch of the
same row, as if the document quoted itself.
"""

from __future__ import annotations

import torch


def passage_windows(
    ids: torch.Tensor,
    batch: int,
    seq_len: int,
    *,
    seed: int,
    n_repeats: int = 1,
    min_len: int = 16,
    max_len: int = 40,
) -> torch.Tensor:
    """``[batch, seq_len]`` windows of ``ids`` (a 1-D token stream), each with repeated passages.

    Row ``r`` starts as ``ids[o_r : o_r + seq_len]`` at a random offset ``o_r``. Then, ``n_repeats``
    times: a length ``L`` is drawn uniformly from ``[min_len, max_len]``, a destination start
    ``c`` from ``[L, seq_len - L]`` and a source start ``a`` from ``[0, c - L]``, and
    ``row[c : c + L] = row[a : a + L]``: a passage is copied over a later, non-overlapping
    stretch of the same row. ``n_repeats=0`` gives plain windows. Deterministic in ``seed``
    (a ``torch.Generator``).
    """
    if ids.dim() != 1 or len(ids) <= seq_len:
        raise ValueError(f"ids must be a 1-D stream longer than seq_len={seq_len}, got shape {tuple(ids.shape)}")
    if n_repeats and not 1 <= min_len <= max_len <= seq_len // 2:
        raise ValueError(f"need 1 <= min_len <= max_len <= seq_len // 2, got {min_len}, {max_len}, {seq_len}")
    g = torch.Generator().manual_seed(seed)
    offsets = torch.randint(0, len(ids) - seq_len, (batch,), generator=g, device="cpu")
    rows = ids.cpu()[offsets[:, None] + torch.arange(seq_len, device="cpu")].clone()
    for _ in range(n_repeats):
        length = torch.randint(min_len, max_len + 1, (batch,), generator=g, device="cpu")
        u = torch.rand(batch, 2, generator=g, device="cpu")
        dst = length + (u[:, 0] * (seq_len - 2 * length + 1)).long()
        src = (u[:, 1] * (dst - length + 1)).long()
        for r in range(batch):
            n, a, c = int(length[r]), int(src[r]), int(dst[r])
            rows[r, c : c + n] = rows[r, a : a + n].clone()
    return rows


def play_streams(tokenizer, heldout_play: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, heldout)`` 1-D token streams of the Shakespeare plays, split by play.

    ``train`` is every play except ``heldout_play`` (in ``shakespeare_plays`` order), each
    followed by ``<|endoftext|>``; ``heldout`` is ``heldout_play`` alone. ``tokenizer`` is a
    ``tokenizers.Tokenizer`` such as ``shakespeare_tokenizer(512)``.
    """
    from circuitbook.data.corpus import END_OF_TEXT, shakespeare_plays

    plays = shakespeare_plays()
    if heldout_play not in plays:
        raise KeyError(f"no play {heldout_play!r}; the plays are {', '.join(plays)}")
    eot = tokenizer.token_to_id(END_OF_TEXT)
    names = [n for n in plays if n != heldout_play]
    train: list[int] = []
    for enc in tokenizer.encode_batch([plays[n] for n in names]):
        train.extend(enc.ids)
        train.append(eot)
    heldout = tokenizer.encode(plays[heldout_play]).ids
    return torch.tensor(train, dtype=torch.long, device="cpu"), torch.tensor(heldout, dtype=torch.long, device="cpu")
