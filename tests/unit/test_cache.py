"""The disk cache (circuitbook.cache) and SmolLM2's cache key, on small stand-ins.

The real SmolLM2 round trip through the cache is in test_pretrained.py (it loads the model).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

from circuitbook import cache
from circuitbook.models import pretrained as P


@pytest.fixture
def in_tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CIRCUITBOOK_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


class Builder:
    """A stand-in conversion: counts its calls and returns known tensors."""

    def __init__(self, value: float = 1.0):
        self.calls, self.value = 0, value

    def __call__(self, folder):
        self.calls += 1
        (folder / "extra.txt").write_text("written by the builder")
        return {"w": torch.full((3, 4), self.value), "b": torch.arange(5)}, {"eps": 1e-5}


def test_cache_dir_order(monkeypatch, tmp_path):
    monkeypatch.delenv("CIRCUITBOOK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == tmp_path / "xdg" / "circuitbook"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache.cache_dir() == __import__("pathlib").Path.home() / ".cache" / "circuitbook"
    monkeypatch.setenv("CIRCUITBOOK_CACHE", str(tmp_path / "mine"))
    assert cache.cache_dir() == tmp_path / "mine"


def test_build_once_then_read_back(in_tmp_cache):
    build = Builder()
    tensors, meta, folder = cache.cached_tensors("thing", "k1", build)
    assert build.calls == 1 and folder == in_tmp_cache / "thing" / "k1"
    again, meta2, _ = cache.cached_tensors("thing", "k1", build)
    assert build.calls == 1, "a second load must read the cache, not convert again"
    torch.testing.assert_close(again["w"], torch.full((3, 4), 1.0), rtol=0, atol=0)
    assert torch.equal(again["b"], torch.arange(5)) and meta2 == {"eps": 1e-5} == meta
    assert (folder / "extra.txt").read_text() == "written by the builder"
    assert sorted(p.name for p in (in_tmp_cache / "thing").iterdir()) == ["k1"], "no temporary folder is left"


def test_a_new_key_rebuilds_and_removes_the_stale_entry(in_tmp_cache):
    cache.cached_tensors("thing", "k1", Builder(1.0))
    build = Builder(2.0)
    tensors, _, _ = cache.cached_tensors("thing", "k2", build)
    assert build.calls == 1 and float(tensors["w"][0, 0]) == 2.0
    assert [p.name for p in (in_tmp_cache / "thing").iterdir()] == ["k2"]


@pytest.mark.parametrize("damage", ["truncate", "garble", "bad meta", "no meta"])
def test_a_damaged_entry_is_rebuilt(in_tmp_cache, damage):
    _, _, folder = cache.cached_tensors("thing", "k1", Builder())
    tensors_file, meta_file = folder / cache.TENSORS, folder / cache.META
    if damage == "truncate":
        tensors_file.write_bytes(tensors_file.read_bytes()[:20])
    elif damage == "garble":
        tensors_file.write_bytes(os.urandom(tensors_file.stat().st_size))
    elif damage == "bad meta":
        meta_file.write_text("{not json")
    else:
        meta_file.unlink()  # as after a crash between writing the tensors and the metadata
    build = Builder()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tensors, meta, _ = cache.cached_tensors("thing", "k1", build)
    assert build.calls == 1, f"a cache with {damage} must be rebuilt"
    if damage != "no meta":
        assert any("cannot be read" in str(w.message) for w in seen)
    assert torch.equal(tensors["w"], torch.full((3, 4), 1.0)) and meta == {"eps": 1e-5}
    again = Builder(2.0)
    assert torch.equal(cache.cached_tensors("thing", "k1", again)[0]["w"], torch.full((3, 4), 1.0))
    assert again.calls == 0, "the rebuilt entry is read back, not rebuilt again"


def test_a_failed_build_leaves_no_entry(in_tmp_cache):
    def broken(folder):
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError, match="conversion failed"):
        cache.cached_tensors("thing", "k1", broken)
    assert not any((in_tmp_cache / "thing").iterdir())


def test_fingerprint_follows_the_content_and_the_modification_time(tmp_path):
    f = tmp_path / "model.gguf"
    data = bytearray(os.urandom(3 * cache.SAMPLE_BYTES))
    f.write_bytes(data)
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    first = cache.file_fingerprint(f)
    assert cache.file_fingerprint(f) == first
    data[-1] ^= 0xFF  # last byte: inside the sampled tail
    f.write_bytes(data)
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    assert cache.file_fingerprint(f) != first
    data[-1] ^= 0xFF
    f.write_bytes(data)
    os.utime(f, ns=(2_000_000_000, 2_000_000_000))  # same bytes, rewritten later
    assert cache.file_fingerprint(f) != first
    os.utime(f, ns=(1_000_000_000, 1_000_000_000))
    assert cache.file_fingerprint(f) == first


def test_smollm2_cache_key_changes_with_the_file_and_the_conversion_version(tmp_path, monkeypatch):
    f = tmp_path / "stand-in.gguf"
    f.write_bytes(b"GGUF" + bytes(1000))
    key = P.smollm2_cache_key(f)
    monkeypatch.setattr(P, "SMOLLM2_CONVERSION_VERSION", P.SMOLLM2_CONVERSION_VERSION + 1)
    assert P.smollm2_cache_key(f) != key
    monkeypatch.undo()
    assert P.smollm2_cache_key(f) == key
    f.write_bytes(b"GGUF" + bytes(999) + b"\x01")
    assert P.smollm2_cache_key(f) != key


def test_a_build_that_loses_the_race_keeps_the_winners_entry(in_tmp_cache):
    """Two notebooks executed at once both miss the cache and both build: the one that finishes
    second must neither fail nor replace the entry the first wrote (a reader may hold it)."""
    winner = Builder(1.0)

    def slow_loser(folder):
        cache.cached_tensors("thing", "k1", winner)  # the other process finishes meanwhile
        return Builder(3.0)(folder)  # a stand-in for the same conversion, told apart by its value

    tensors, _, folder = cache.cached_tensors("thing", "k1", slow_loser)
    assert torch.equal(tensors["w"], torch.full((3, 4), 3.0)) and winner.calls == 1
    assert sorted(p.name for p in (in_tmp_cache / "thing").iterdir()) == ["k1"], "no temporary folder is left"
    again, _, _ = cache.cached_tensors("thing", "k1", Builder(5.0))
    assert torch.equal(again["w"], torch.full((3, 4), 1.0)), "the winner's entry stands"
