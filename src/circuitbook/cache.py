"""The user's cache directory, and tensors converted once and then read from it.

- :func:`cache_dir`: ``$CIRCUITBOOK_CACHE``, else ``$XDG_CACHE_HOME/circuitbook``, else
  ``~/.cache/circuitbook``. The trained Shakespeare tokenizer (chapter 20's corpus) and the
  converted SmolLM2 weights (chapters 11, 17, 18) live there.
- :func:`file_fingerprint`: a cheap identity of a large file (size, modification time and a
  hash of its first and last MiBs), so a changed or reinstalled file gets a new cache key.
- :func:`cached_tensors`: run a slow conversion once per key, store its tensors as safetensors
  and read them back in later processes; a damaged entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Callable

import torch

SAMPLE_BYTES = 4 * 1024**2
"""Bytes hashed at each end of a file by :func:`file_fingerprint`."""

TENSORS, META = "tensors.safetensors", "meta.json"


def cache_dir() -> Path:
    """``$CIRCUITBOOK_CACHE``, else ``$XDG_CACHE_HOME/circuitbook``, else ``~/.cache/circuitbook``."""
    if os.environ.get("CIRCUITBOOK_CACHE"):
        return Path(os.environ["CIRCUITBOOK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "circuitbook"


def file_fingerprint(path: str | Path) -> str:
    """sha256 of ``(size, mtime_ns, first SAMPLE_BYTES, last SAMPLE_BYTES)`` of ``path``, hex.

    About 0.1 s for SmolLM2's 98 MB GGUF file where hashing it all takes 0.9 s (measured on a
    loaded 2-core machine). Any rewrite of the file changes its modification time, so a
    reinstalled or edited file gets a new fingerprint even if its sampled bytes agree.
    """
    path = Path(path)
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:".encode())
    with path.open("rb") as f:
        h.update(f.read(SAMPLE_BYTES))
        if st.st_size > 2 * SAMPLE_BYTES:
            f.seek(-SAMPLE_BYTES, os.SEEK_END)
            h.update(f.read(SAMPLE_BYTES))
    return h.hexdigest()


def cached_tensors(
    name: str, key: str, build: Callable[[Path], tuple[dict[str, torch.Tensor], dict]]
) -> tuple[dict[str, torch.Tensor], dict, Path]:
    """Tensors and metadata for ``(name, key)``: from the cache, or from ``build`` once.

    The entry is the folder ``cache_dir() / name / key`` holding ``tensors.safetensors`` and
    ``meta.json`` (written last, so a half-written entry is never read). On a miss,
    ``build(folder)`` returns ``(tensors, meta)`` (``meta`` JSON-serialisable) and may write
    more files into ``folder`` (e.g. a tokenizer); the entry is assembled in a temporary folder
    and renamed into place, and the other keys of ``name`` are removed (they are stale). An
    entry that cannot be read (truncated or garbled file, bad JSON) is rebuilt with a warning.
    Returns ``(tensors, meta, folder)``; tensors read from the cache are on the CPU.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file, save_file

    root = cache_dir() / name
    folder = root / key
    if (folder / META).is_file():
        try:
            return load_file(folder / TENSORS), json.loads((folder / META).read_text()), folder
        except (OSError, SafetensorError, ValueError) as e:
            warnings.warn(f"the cached {name} in {folder} cannot be read ({e}); rebuilding it", stacklevel=2)
            shutil.rmtree(folder, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=root))  # one per build, even in one process
    try:
        tensors, meta = build(tmp)
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, tmp / TENSORS)
        (tmp / META).write_text(json.dumps(meta, indent=1, sort_keys=True))
        for old in root.iterdir():
            if old != tmp and old.name != key and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
        # two processes that missed the cache at once (notebooks executed in parallel) both
        # build: the first to finish keeps its entry, which is the same, and the second's goes
        if not (folder / META).is_file():
            shutil.rmtree(folder, ignore_errors=True)  # half-written, or none
            try:
                os.replace(tmp, folder)
            except OSError:
                if not (folder / META).is_file():
                    raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tensors, meta, folder
