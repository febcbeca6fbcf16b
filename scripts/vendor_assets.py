"""Fetch the site's JavaScript from the npm registry (pinned) so the built book works offline.

By default a jupyter-book page loads MathJax, require.js and the ipywidgets renderer from
public CDNs; offline, math stays raw TeX and widget areas stay empty. This script puts local
copies under ``_vendor/`` (git-ignored), which ``_config.yml`` serves as static files:

- ``mathjax/``  MathJax 3 (es5 build and its woff-v2 fonts)
- ``widgets/require.js``, ``widgets/embed-amd.js``  the ipywidgets HTML manager
- ``widgets/anywidget/index.js``  anywidget's front end, copied from the installed Python
  package so its version always matches the kernel side
- ``widgets/widgets-config.js``  points require.js at the local anywidget, from any page depth

Idempotent: packages already unpacked at the pinned version are not fetched again.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENDOR = ROOT / "_vendor"

PACKAGES = {  # npm spec -> {path inside the package: path under _vendor}
    "mathjax@3.2.2": {"es5": "mathjax"},
    "requirejs@2.3.4": {"require.js": "widgets/require.js"},
    "@jupyter-widgets/html-manager@1.0.6": {"dist/embed-amd.js": "widgets/embed-amd.js"},
}

WIDGETS_CONFIG = """\
// Point require.js at the site's own copy of anywidget (html-manager would fetch it from a CDN).
// The path is computed from this script's own URL, so it works on pages at any depth.
(function () {
  var src = document.currentScript && document.currentScript.src;
  var base = src ? src.substring(0, src.lastIndexOf('/') + 1) : '_static/widgets/';
  if (window.requirejs) {
    window.requirejs.config({ paths: { anywidget: base + 'anywidget/index' } });
  }
})();
"""


def fetch(spec: str, parts: dict[str, str]) -> None:
    stamp = VENDOR / ".stamps" / spec.replace("/", "_")
    if stamp.exists() and all((VENDOR / dst).exists() for dst in parts.values()):
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(["npm", "pack", "--silent", spec], cwd=tmp, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"npm pack {spec} failed (is the npm registry reachable?):\n{out.stderr}")
        tgz = Path(tmp) / out.stdout.strip().splitlines()[-1]
        with tarfile.open(tgz) as tar:
            tar.extractall(tmp, filter="data")
        for src, dst in parts.items():
            source, target = Path(tmp) / "package" / src, VENDOR / dst
            if target.exists():
                shutil.rmtree(target) if target.is_dir() else target.unlink()
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target)
            else:
                shutil.copy2(source, target)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(spec)
    print(f"vendored {spec}")


def anywidget_js() -> None:
    spec = importlib.util.find_spec("anywidget")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("anywidget is not installed; run `make env`")
    src = Path(spec.submodule_search_locations[0]) / "nbextension" / "index.js"
    dst = VENDOR / "widgets" / "anywidget" / "index.js"
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        shutil.copy2(src, dst)
    (VENDOR / "widgets" / "widgets-config.js").write_text(WIDGETS_CONFIG)


def main() -> int:
    for spec, parts in PACKAGES.items():
        fetch(spec, parts)
    anywidget_js()
    return 0


if __name__ == "__main__":
    sys.exit(main())
