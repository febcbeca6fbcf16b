"""circuitbook.data.passages: text windows with passages copied from the first half into the second."""

from __future__ import annotations

import pytest
import torch

from circuitbook.data.passages import passage_windows


def test_plain_windows_are_consecutive_tokens():
    ids = torch.arange(1000)
    rows = passage_windows(ids, 8, 32, seed=3, n_repeats=0)
    assert rows.shape == (8, 32)
    assert torch.equal(rows - rows[:, :1], torch.arange(32).expand(8, 32))


def test_copies_come_from_earlier_in_the_same_row():
    ids = torch.arange(10_000)  # every token unique: a copy is visible as a jump
    seq_len = 64
    rows = passage_windows(ids, 32, seq_len, seed=0, n_repeats=2, min_len=4, max_len=12)
    start = rows[:, :1]
    assert torch.equal(rows[:, :4] - start, torch.arange(4).expand(32, 4)), "no copy lands before min_len"
    for r in range(32):
        offset = (rows[r] - start[r, 0]).tolist()  # the corpus position each token came from
        moved = [t for t in range(seq_len) if offset[t] != t]
        assert len(moved) >= 4, "at least one passage of min_len tokens was copied"
        for t in moved:  # every copied token comes from earlier in the row
            assert 0 <= offset[t] < t
    assert torch.equal(rows, passage_windows(ids, 32, seq_len, seed=0, n_repeats=2, min_len=4, max_len=12))
    assert not torch.equal(rows, passage_windows(ids, 32, seq_len, seed=1, n_repeats=2, min_len=4, max_len=12))


def test_passage_windows_rejects_bad_lengths():
    with pytest.raises(ValueError, match="min_len"):
        passage_windows(torch.arange(100), 2, 16, seed=0, min_len=4, max_len=9)
    with pytest.raises(ValueError, match="longer than seq_len"):
        passage_windows(torch.arange(10), 2, 16, seed=0)
