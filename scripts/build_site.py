"""Build the static site with jupyter-book 1 and fail on warnings that mean broken content.

Notebooks are expected to be executed already (scripts/execute_notebooks.py fills the cache
that _config.yml names); if the build has to execute one itself, we say so.

Every Sphinx warning fails the build (missing toc entries, broken cross-references, unknown
directives or roles, failed execution, bad citations) except the patterns in ``ALLOWED``,
each of which says why it is harmless.

``--only PAGE ...`` builds the root page and the named pages alone (a table of contents
written into the output folder), for a browser test of one page: every asset of the full
build is there, links to pages left out are expected and allowed (``ONLY_ALLOWED``). For the
SmolLM2 lab: ``build_site.py --out _build/smollm2 --only book/induction/02_smollm2_lab``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ALLOWED: list[tuple[str, str]] = [
    # (regex, reason)
    (r"\[IPKernelApp\] WARNING \| Kernel is running over TCP without encryption",
     "ipykernel's note about its local TCP transport: a kernel on this machine, not content"),
]


#: what a partial build (``--only``) also allows: references to the pages it leaves out
ONLY_ALLOWED: list[tuple[str, str]] = [
    (r"unknown document|undefined label|toctree contains reference to nonexisting document"
     r"|document isn't included in any toctree|could not find bibtex key", "a page left out of --only"),
]


def only_toc(pages: list[str], folder: Path) -> Path:
    """A table of contents with the full one's root and ``pages``, written into ``folder``."""
    import yaml

    full = yaml.safe_load((ROOT / "_toc.yml").read_text())
    toc = {"format": full["format"], "root": full["root"],
           "chapters": [{"file": p.removesuffix(".py").removesuffix(".ipynb")} for p in pages]}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "_toc_only.yml"
    path.write_text(yaml.safe_dump(toc, sort_keys=False))
    return path


def main() -> int:
    import vendor_assets

    vendor_assets.main()
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", help="build into OUT/_build/html instead of ./_build/html (for parallel builds)")
    ap.add_argument("--only", nargs="+", metavar="PAGE", help="build the root page and these pages alone")
    args = ap.parse_args()
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--keep-going"]
    if args.out:
        cmd += ["--path-output", args.out]
    allowed = list(ALLOWED)
    if args.only:
        cmd += ["--toc", str(only_toc(args.only, Path(args.out or ROOT / "_build")))]
        allowed += ONLY_ALLOWED
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / "build.log").write_text(log)
    warnings = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR|CRITICAL)\b", line)]
    bad = [w for w in warnings if not any(re.search(p, w) for p, _ in allowed)]
    executed = [line for line in log.splitlines() if "Executing notebook" in line]
    if executed:
        print(f"note: the build executed {len(executed)} notebook(s) itself (cache miss)")
    if proc.returncode != 0 or bad:
        print(log[-6000:])
        print(f"\nsite build FAILED: exit {proc.returncode}, {len(bad)} warning(s) that mean broken content:")
        for w in bad:
            print("  ", w)
        return 1
    index = Path(args.out or ROOT) / "_build" / "html" / "index.html"
    print(f"site built with no content warnings: {index}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
