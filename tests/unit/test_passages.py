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


def test_copies_come_from_the_first_half_and_land_in_the_second():
    ids = torch.arange(10_000)  # every token unique: a copy is visible as a jump
    seq_len, half = 64, 32
    rows = passage_windows(ids, 16, seq_len, seed=0, n_repeats=2, min_len=4, max_len=12)
    start = rows[:, :1]
    assert torch.equal(rows[:, :half] - start, torch.arange(half).expand(16, half)), "first half is plain text"
    for r in range(16):
        moved = [t for t in range(half, seq_len) if rows[r, t] != start[r, 0] + t]
        assert len(moved) >= 4, "at least one passage of min_len tokens was copied"
        for t in moved:  # every copied token is one of the first half's tokens
            assert 0 <= int(rows[r, t] - start[r, 0]) < half
    assert torch.equal(rows, passage_windows(ids, 16, seq_len, seed=0, n_repeats=2, min_len=4, max_len=12))
    assert not torch.equal(rows, passage_windows(ids, 16, seq_len, seed=1, n_repeats=2, min_len=4, max_len=12))


def test_passage_windows_rejects_bad_lengths():
    with pytest.raises(ValueError, match="min_len"):
        passage_windows(torch.arange(100), 2, 16, seed=0, min_len=4, max_len=9)
    with pytest.raises(ValueError, match="longer than seq_len"):
        passage_windows(torch.arange(10), 2, 16, seed=0)
