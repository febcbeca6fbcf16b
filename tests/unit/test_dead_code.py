"""No dead code in the package: vulture finds no name that nothing uses.

Users of ``circuitbook`` are the chapters (``book``), the scripts and the benchmarks; the tests
are left out on purpose, so a function kept alive only by its own test counts as dead.
Framework entry points (module ``__getattr__``, ``_repr_html_``, widget traits) are listed in
``vulture_whitelist.py`` with the framework that calls each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WHITELIST = Path(__file__).with_name("vulture_whitelist.py")
USERS = ["book", "scripts", "benchmarks"]


def vulture(*paths: str | Path) -> list[str]:
    """vulture's findings (one line each) over ``paths``, at its default confidence (60%)."""
    run = subprocess.run(
        [sys.executable, "-m", "vulture", *map(str, paths), "--exclude", "*.ipynb"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    if run.returncode not in (0, 3):  # 3: dead code found; anything else: vulture itself failed
        raise RuntimeError(f"vulture failed (exit {run.returncode}): {run.stderr}")
    return run.stdout.splitlines()


def test_package_has_no_dead_code():
    found = [line for line in vulture("src/circuitbook", *USERS, WHITELIST) if line.startswith("src/circuitbook")]
    assert not found, "dead code in circuitbook (remove it, or whitelist a framework entry point):\n" + "\n".join(found)


def test_dead_code_check_finds_a_function_nobody_calls(tmp_path):
    module = tmp_path / "stray.py"
    module.write_text("def used():\n    return 1\n\n\ndef never_called():\n    return 2\n\n\nprint(used())\n")
    found = vulture(module)
    assert len(found) == 1 and "never_called" in found[0], found
