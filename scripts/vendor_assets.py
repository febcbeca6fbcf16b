"""Fetch the site's JavaScript from the npm registry (pinned) so the built book works offline.

By default a jupyter-book page loads MathJax, require.js and the ipywidgets renderer from
public CDNs; offline, math stays raw TeX and widget areas stay empty. This script puts local
copies under ``_vendor/`` (git-ignored), which ``_config.yml`` serves as static files:

- ``mathjax/``  MathJax 3 (es5 build and its woff-v2 fonts)
- ``widgets/require.js``, ``widgets/embed-amd.js``  the ipywidgets HTML manager
- ``widgets/anywidget/index.js``  anywidget's front end, copied from the installed Python
  package so its version always matches the kernel side
- ``widgets/widgets-config.js``  points require.js at the local anywidget, from any page depth
- ``circuitsvis/iife.js``  CircuitsVis's browser bundle, copied from the installed Python package
  (same version as the kernel side); ``circuitbook.viz`` loads it once per page instead of
  pasting 1.3 MB into every output
- ``plotly/plotly.min.js``  plotly.js, copied from the installed plotly package (the version its
  figures are written for); ``circuitbook.viz.heatmap`` loads it once per page
- ``thebe/``  thebe (``lib/``, without source maps), which sphinx-thebe's "Live code" button
  loads from the site instead of unpkg (scripts/sphinx_site_fixes.py points it here). npm has
  thebe 0.9.3, not the 0.8.2 that sphinx-thebe 0.3.1 names; 0.9 keeps the ``thebelab`` global
  (``thebelab.bootstrap``, ``thebelab.on``) that sphinx-thebe calls
- ``lab/<model>.js``  the toy models' weights and ablation means, as the induction lab's
  in-page forward pass reads them (``circuitbook.widgets.lab_export``)

Idempotent: packages already unpacked at the pinned version are not fetched again.
"""

from __future__ import annotations

import importlib.util
import os
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
    "thebe@0.9.3": {"lib": "thebe"},
    "@jupyter-widgets/html-manager@1.0.6": {
        "dist/embed-amd.js": "widgets/embed-amd.js",
        # the widgets' icon font (Font Awesome), which embed-amd.js loads from its own folder;
        # widgets-config.js maps that folder to widgets/html-manager/ (see WIDGETS_CONFIG)
        **{f"dist/{name}": f"widgets/html-manager/{name}" for name in (
            "1551f4f60c37af51121f.woff2", "7a3337626410ca2f4071.woff2", "d878b0a6a1144760244f.woff2",
            "2285773e6b4b172f07d9.woff", "bb58e57c48a3e911f15f.woff", "eeccf4f66002c6f2ba24.woff",
            "491974d108fe4002b2aa.ttf", "527940b104eb2ea366c8.ttf", "be9ee23c0c6390141475.ttf",
            "23f19bb08961f37aaf69.eot", "77206a6bb316fa0aded5.eot", "9bbb245e67a133f6e486.eot",
            "2f517e09eb2ca6650ff5.svg", "4689f52cc96215721344.svg", "7a8b4f130182d19a2d7c.svg")},
    },
}

WIDGETS_CONFIG = """\
// Point require.js at the site's own copy of anywidget (html-manager would fetch it from a CDN).
// The path is computed from this script's own URL, so it works on pages at any depth.
(function () {
  var src = document.currentScript && document.currentScript.src;
  var base = src ? src.substring(0, src.lastIndexOf('/') + 1) : '_static/widgets/';
  if (window.requirejs) {
    window.requirejs.config({ paths: {
      anywidget: base + 'anywidget/index',
      // The modules defined in embed-amd.js find their icon fonts next to their own URL, which
      // require.js makes <page folder>/@jupyter-widgets/...: 404s on every widget page. Map
      // them to the folder that holds the fonts (the modules are defined, never fetched).
      '@jupyter-widgets/html-manager/dist': base + 'html-manager',
      '@jupyter-widgets/html-manager': base + 'html-manager/html-manager',
      '@jupyter-widgets/controls': base + 'html-manager/controls',
      '@jupyter-widgets/base': base + 'html-manager/base'
    } });
  }
  // html-manager 1.0.6 typesets widget labels with MathJax 2's API (MathJax.Hub.Queue), but the
  // site runs MathJax 3, which has no Hub: without this shim every page with math and widgets
  // throws "Cannot read properties of undefined (reading 'Queue')". MathJax 3 replaces
  // window.MathJax when its (deferred) script runs, so the shim is installed after that.
  function shimMathJax2() {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.version) return;
    mj.Hub = { Queue: function (job) {
      var el = job && job[2];
      if (el && window.MathJax.typesetPromise) {
        window.MathJax.typesetPromise([el]).catch(function (e) { console.warn('MathJax:', e); });
      }
    } };
  }
  document.addEventListener('DOMContentLoaded', shimMathJax2);
  window.addEventListener('load', shimMathJax2);
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
            if source.is_dir():  # source maps are for debugging the library, not served
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.map"))
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


def _constants(path: Path, *names: str) -> dict:
    """Module-level string constants of a source file, read without importing it (or torch)."""
    import ast

    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in names:
                out[node.targets[0].id] = ast.literal_eval(node.value)
    return out


def circuitsvis_js() -> None:
    """Copy circuitsvis's IIFE bundle (without its source-map comment: the 7 MB map is not
    served) to ``_vendor/circuitsvis/iife.js``; checks it matches ``circuitbook.viz``'s pin."""
    spec = importlib.util.find_spec("circuitsvis")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("circuitsvis is not installed; run `make env`")
    pkg = Path(spec.submodule_search_locations[0])
    from importlib.metadata import version

    pins = _constants(ROOT / "src" / "circuitbook" / "viz.py", "CIRCUITSVIS_VERSION", "SITE_BUNDLE")
    CIRCUITSVIS_VERSION, SITE_BUNDLE = pins["CIRCUITSVIS_VERSION"], pins["SITE_BUNDLE"]

    if version("circuitsvis") != CIRCUITSVIS_VERSION:
        raise SystemExit(f"circuitsvis {version('circuitsvis')} is installed but circuitbook.viz pins "
                         f"{CIRCUITSVIS_VERSION} (its CDN fallback): update one to match the other")
    src = pkg / "dist" / "cdn" / "iife.js"
    text = src.read_text(encoding="utf-8")
    lines = text.rstrip("\n").split("\n")
    if lines[-1].startswith("//# sourceMappingURL="):
        lines = lines[:-1]
    body = "\n".join(lines) + "\n"
    dst = VENDOR / SITE_BUNDLE
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_text(encoding="utf-8") != body:
        dst.write_text(body, encoding="utf-8")
        print(f"vendored circuitsvis {CIRCUITSVIS_VERSION} bundle from {src}")


def plotly_js() -> None:
    """Copy the plotly.js bundle that the installed plotly package ships to the path
    ``circuitbook.viz`` loads it from."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("plotly is not installed; run `make env`")
    src = Path(spec.submodule_search_locations[0]) / "package_data" / "plotly.min.js"
    site = _constants(ROOT / "src" / "circuitbook" / "viz.py", "PLOTLY_SITE_BUNDLE")["PLOTLY_SITE_BUNDLE"]
    dst = VENDOR / site
    dst.parent.mkdir(parents=True, exist_ok=True)
    if not dst.exists() or dst.read_bytes() != src.read_bytes():
        shutil.copy2(src, dst)
        print(f"vendored plotly.js from {src}")


def lab_models() -> None:
    """Export the zoo models the induction lab runs in the page (a subprocess: it imports
    torch, which this script otherwise never does)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "circuitbook.widgets.lab_export", str(VENDOR / "lab")], check=True, env=env)


def main() -> int:
    for spec, parts in PACKAGES.items():
        fetch(spec, parts)
    anywidget_js()
    circuitsvis_js()
    plotly_js()
    lab_models()
    return 0


if __name__ == "__main__":
    sys.exit(main())
