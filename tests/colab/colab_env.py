"""The simulated Colab runtime: a venv with what Colab preinstalls, built once and cached.

The venv lives under ``_build/colab-venv/<key>``, where the key hashes
``colab-preinstalls.txt``'s requirements and the Python version, so changing them builds a new one.
Each notebook then runs in its own *runtime*: a hard-linked copy of that venv (seconds, no
extra disk), so one notebook's set-up cell cannot help the next one, as on Colab where every
notebook gets a fresh runtime. ``python -m venv`` records the interpreter path only in
``pyvenv.cfg`` (relative to the copy) and we call everything through ``bin/python -m``, so
the copy is a working venv of its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PREINSTALLS = HERE / "colab-preinstalls.txt"
STUB = HERE / "colab_stub"  # the stand-in google.colab package and Colab's kernel launcher
TORCH = "torch==2.13.0"  # first, so nothing later pulls another torch build


def requirements(ipywidgets: str | None = None) -> list[str]:
    """The requirement lines of colab-preinstalls.txt; ``ipywidgets`` replaces its version (the
    simulation of a runtime with ipywidgets 8, which Colab users get when they upgrade it)."""
    lines = [line.strip() for line in PREINSTALLS.read_text().splitlines()]
    lines = [line for line in lines if line and not line.startswith("#")]
    if ipywidgets:
        lines = [f"ipywidgets=={ipywidgets}" if line.startswith("ipywidgets==") else line for line in lines]
    return lines


def _key(lines: list[str]) -> str:
    """Hash of the requirement lines (comments do not change the venv) and the Python version."""
    h = hashlib.sha256("\n".join(lines).encode())
    h.update(f"{TORCH} {sys.version_info[:3]}".encode())
    return h.hexdigest()[:12]


def site_packages(venv: Path) -> Path:
    out = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def base_venv(ipywidgets: str | None = None, log=print) -> Path:
    """The cached venv holding Colab's preinstalls (built on first use, 2-3 minutes)."""
    lines = requirements(ipywidgets)
    venv = ROOT / "_build" / "colab-venv" / _key(lines)
    if (venv / ".complete").exists():
        return venv
    tmp = venv.with_name(venv.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"building the simulated Colab venv in {venv} (once per set of requirements)")
    python = shutil.which("python3") or sys.executable
    subprocess.run([python, "-m", "venv", str(tmp)], check=True)
    (tmp / "preinstalls.txt").write_text("\n".join(lines) + "\n")
    pip = [str(tmp / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, TORCH], check=True)
    subprocess.run([*pip, "-c", _torch_constraint(tmp), "-r", str(tmp / "preinstalls.txt")], check=True)
    shutil.rmtree(venv, ignore_errors=True)  # a stale, unfinished one
    tmp.rename(venv)
    _fix_paths(tmp, venv)
    (venv / ".complete").write_text(_key(lines) + "\n")
    return venv


def _torch_constraint(venv: Path) -> str:
    path = venv / "torch-constraint.txt"
    path.write_text(TORCH + "\n")
    return str(path)


def _fix_paths(old: Path, new: Path) -> None:
    """A renamed venv: rewrite the old prefix where venv and pip wrote it (activate, shebangs)."""
    for f in (new / "bin").iterdir():
        if f.is_file() and not f.is_symlink():
            try:
                text = f.read_text()
            except UnicodeDecodeError:
                continue
            if str(old) in text:
                # a new file, not an in-place write: in a hard-linked runtime copy the old
                # inode is shared with the cached venv, which must stay as it is
                tmp = f.with_name(f.name + ".tmp")
                tmp.write_text(text.replace(str(old), str(new)))
                shutil.copymode(f, tmp)
                os.replace(tmp, f)


def runtime(base: Path, dest: Path) -> Path:
    """A fresh runtime: ``dest`` becomes a hard-linked copy of ``base`` with the stub added."""
    subprocess.run(["cp", "-al", str(base), str(dest)], check=True)
    _fix_paths(base, dest)
    site = site_packages(dest)
    # google.colab as Colab has it: a namespace package "google" (protobuf shares it), so no
    # google/__init__.py; copied, not linked, so the copy is the runtime's own
    shutil.copytree(STUB / "google", site / "google", dirs_exist_ok=True, copy_function=shutil.copy)
    for module in ("colab_kernel_launcher.py", "colab_sim_watch.py"):
        shutil.copy(STUB / module, site / module)
    return dest


def kernel_env(venv: Path, home: Path, **extra: str) -> dict[str, str]:
    """The kernel's environment: nothing from the test's own Python (no PYTHONPATH, no venv)."""
    # PIP_* and proxy settings are how this machine reaches the package registry
    keep = {k: v for k, v in os.environ.items()
            if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR") or k.startswith("PIP_") or k.lower().endswith("_proxy")}
    keep["PATH"] = f"{venv / 'bin'}:{keep.get('PATH', '/usr/bin:/bin')}"
    keep.update(HOME=str(home), VIRTUAL_ENV=str(venv), **extra)
    return keep
