"""Every ``explore(...)`` figure on the built site responds to its controls with no kernel,
and its static figures are the ones the render function draws live.

- Every control of every explorable figure, on every page, is moved to (up to) two other
  values and back, as a reader would: keyboard on a slider (Home, End, arrows), a pick in a
  drop-down. After each move the figure shown must be the one for the new state: its
  ``alt`` text (the titles the figure itself draws, read off the matplotlib figure in
  Python) names the new value of every control, and the image changed. Back at the start,
  the first figure is shown again. Screenshots before and after the first move of each
  figure go to ``_build/screenshots/explore/``.
- The static figures match live ones: each chapter with ``explore`` runs again in a kernel
  (one kernel for all chapters, its namespace reset before each), up to its last ``explore`` cell, and for two states of every figure (its start and
  the far corner of its static grid) the live path (``widget.selection = ...``, which calls
  ``render`` in Python, as in Jupyter) must give the same PNG as the page holds.
"""

from __future__ import annotations

import base64
import io
import json
import re
import time
from pathlib import Path

import pytest
from test_browser import (SCREENSHOTS, SITE, Log, notebook_source, offline_context,  # noqa: F401
                          open_page, server, site_pages, watch)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = SCREENSHOTS / "explore"
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def explore_pages() -> list[str]:
    """Pages whose saved widget state holds explore widgets (read from the HTML, no browser)."""
    return [p for p in site_pages() if "cb-explore-controls" in (SITE / p).read_text(errors="replace")]


def names_value(label: str, value: str) -> bool:
    """Does the figure's label text name this control value? A number must appear as a number
    (so "1" is not found inside "16"); any other value as a substring."""
    try:
        want = float(value)
    except ValueError:
        return value in label
    return any(abs(float(n) - want) <= 1e-9 * max(1.0, abs(want)) for n in NUMBER.findall(label))


def widget_state(page_path: str) -> dict[str, dict]:
    """model id -> state of every Explore widget saved in a built page."""
    html = (SITE / page_path).read_text()
    m = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S)
    assert m, f"{page_path}: no widget state"
    models = json.loads(m.group(1))["state"]
    return {mid: s["state"] for mid, s in models.items() if "frames" in s["state"] and "controls" in s["state"]}


# --------------------------------------------------------------------------- every control responds

STATE_JS = """(root) => {
  const img = root.querySelector('img.cb-explore-figure');
  return { key: root.dataset.key, shown: root.dataset.shown, values: JSON.parse(root.dataset.values || '{}'),
           alt: img.alt, src: img.src, decoded: img.complete && img.naturalWidth > 0,
           note: root.querySelector('.cb-explore-note').hidden ? '' :
                 root.querySelector('.cb-explore-note').textContent };
}"""


def _moves(control) -> list[tuple[str, object]]:
    """Moves to (up to) two other values, then back to the start, as (key or "select", where)."""
    inp = control.locator(".cb-explore-input")
    if inp.evaluate("(e) => e.tagName") == "SELECT":
        options = inp.locator("option").evaluate_all("(os) => os.map((o) => o.value)")
        start = inp.input_value()
        others = [o for o in (options[-1], options[0], options[len(options) // 2]) if o != start]
        others = list(dict.fromkeys(others))[:2]
        return [("select", o) for o in others] + [("select", start)]
    n, pos = int(inp.get_attribute("max")) + 1, int(inp.input_value())
    if pos == 0:
        return ([("ArrowRight", 1)] if n > 2 else []) + [("End", n - 1), ("Home", 0)]
    if pos == n - 1:
        return ([("ArrowLeft", n - 2)] if n > 2 else []) + [("Home", 0), ("End", n - 1)]
    return [("End", n - 1), ("Home", 0)] + [("ArrowRight", i) for i in range(1, pos + 1)]


def n_values(control) -> int:
    inp = control.locator(".cb-explore-input")
    if inp.evaluate("(e) => e.tagName") == "SELECT":
        return inp.locator("option").count()
    return int(inp.get_attribute("max")) + 1


def _apply(page, control, move):
    kind, arg = move
    inp = control.locator(".cb-explore-input")
    if kind == "select":  # by position: Playwright's value= also matches a label ("4" is h=4's label)
        values = inp.locator("option").evaluate_all("(os) => os.map((o) => o.value)")
        inp.select_option(index=values.index(arg))
    else:
        inp.focus()
        page.keyboard.press(kind)


def _wait_shown(page, root):
    page.wait_for_function(
        "(r) => r.dataset.shown === r.dataset.key && r.querySelector('img').complete", arg=root.element_handle(),
        timeout=10_000)


@pytest.mark.parametrize("path", explore_pages())
def test_every_explore_control_responds_without_a_kernel(browser, server, path):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        assert open_page(page, server, path), f"{path}: widgets did not render"
        roots = page.locator(".cb-explore")
        assert roots.count() == len(widget_state(path)), "not every saved explore widget is on the page"
        problems, moved = [], 0
        for w in range(roots.count()):
            root = roots.nth(w)
            root.scroll_into_view_if_needed()
            first = root.evaluate(STATE_JS)
            assert first["decoded"] and first["shown"] == first["key"], f"{path} #{w}: no initial figure"
            shot = f"{path.removeprefix('book/').removesuffix('.html').replace('/', '-')}-{w}"
            root.screenshot(path=str(SHOTS / f"{shot}-before.png"))
            controls = root.locator(".cb-explore-control")
            for c in range(controls.count()):
                control = controls.nth(c)
                name = control.get_attribute("data-name")
                start_label = first["values"][name]
                moves = _moves(control)
                previous, visited = first, set()
                for move in moves:
                    _apply(page, control, move)
                    _wait_shown(page, root)
                    now = root.evaluate(STATE_JS)
                    label = now["values"][name]
                    where = control.locator(".cb-explore-input").input_value()
                    if where != str(move[1]):
                        problems.append(f"{path} #{w} {name}: {move[0]} left the control at {where}, not {move[1]}")
                    visited.add(label)
                    if not now["decoded"]:
                        problems.append(f"{path} #{w} {name}={label}: the figure did not decode")
                    if not all(names_value(now["alt"], v) for v in now["values"].values()):
                        problems.append(f"{path} #{w} {name}={label}: the figure's label {now['alt']!r} "
                                        f"does not name every value of {now['values']}")
                    if now["values"] != previous["values"] and now["src"] == previous["src"]:
                        problems.append(f"{path} #{w} {name}: {previous['values']} -> {now['values']} "
                                        "but the figure did not change")
                    if not moved:
                        root.screenshot(path=str(SHOTS / f"{shot}-after.png"))
                    moved += 1
                    previous = now
                back = root.evaluate(STATE_JS)
                if back["values"][name] != start_label or back["src"] != first["src"] or back["alt"] != first["alt"]:
                    problems.append(f"{path} #{w} {name}: back at {back['values'][name]} (start {start_label}), "
                                    "but the first figure is not shown again")
                if len(visited - {start_label}) < min(2, n_values(control) - 1):
                    problems.append(f"{path} #{w} {name}: moved only to {sorted(visited - {start_label})}")
        assert moved > 0
        assert not problems, "\n".join(problems)
        assert not log.console and not log.external, log.console + log.external
    finally:
        context.close()


def test_coarser_static_steps_are_said_on_the_page():
    """A widget whose static grid skips values says so in its note (drawn by the page); the
    grid of every saved widget stays within the cap of states."""
    from circuitbook.widgets.explorer import MAX_STATES

    coarse, problems = 0, []
    for path in explore_pages():
        for mid, state in widget_state(path).items():
            n_states = 1
            for c in state["controls"]:
                n_states *= len(c["grid"])
                coarse += len(c["grid"]) < len(c["labels"])
            if n_states > MAX_STATES or n_states != len(state["frames"]):
                problems.append(f"{path} {mid}: {n_states} grid states, {len(state['frames'])} frames")
    assert coarse > 0
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- static == live

def _png_pixels(src: str):
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).convert("RGB")


def same_figure(a: str, b: str) -> str | None:
    """None if two PNG data URLs show the same figure, else why not. Equal bytes pass at once.
    Otherwise the images must have one size and differ in at most 0.1% of their pixels: on
    one machine the drawing is deterministic, and only a float summed in another order (a
    thread split) can move an antialiased edge by a pixel, while any other change of state
    (a value, a title digit, a curve) changes far more pixels than that."""
    if a == b:
        return None
    from PIL import ImageChops

    x, y = _png_pixels(a), _png_pixels(b)
    if x.size != y.size:
        return f"sizes differ: {x.size} vs {y.size}"
    diff = ImageChops.difference(x, y).convert("L").point(lambda v: 255 if v > 0 else 0)
    changed = diff.histogram()[255]
    total = x.size[0] * x.size[1]
    return None if changed <= 0.001 * total else f"{changed} of {total} pixels differ"


LIVE_CELL = """
import gc as _gc, json as _json
from circuitbook.widgets.explorer import Explore as _Explore
_seen = get_ipython().__dict__.setdefault("_circuitbook_seen", set())  # earlier chapters' widgets
_out = []
for _w in [o for o in _gc.get_objects() if isinstance(o, _Explore) and id(o) not in _seen]:
    _sig = [[c["name"], c["labels"]] for c in _w.controls]
    _res = {}
    for _key in __KEYS__.get(_json.dumps(_sig), []):
        _w.selection = [int(i) for i in _key.split(",")]
        _res[_key] = dict(_w.live)
    _out.append({"sig": _sig, "live": _res})
    _seen.add(id(_w))
print("LIVE-RESULT" + _json.dumps(_out))
"""

# Before each chapter: a clean namespace (modules already imported stay: torch, TransformerLens
# and matplotlib are imported once for all chapters, which is most of a small chapter's time),
# the chapter's folder as working directory, and this repository's package first on the path.
SETUP_CELL = """
get_ipython().run_line_magic("reset", "-f")
import os, sys
os.chdir(__DIR__)
if __SRC__ not in sys.path:
    sys.path.insert(0, __SRC__)
import matplotlib.pyplot as _plt
_plt.close("all")
import circuitbook.widgets.explorer as _ex
_ex.MAX_STATES = 1  # draw only the first state ahead
# process-wide torch state a chapter sets for itself (chapters that only read models turn
# autograd off, some run on one thread) goes back to a fresh kernel's, as each chapter expects
import torch as _torch
_torch.set_grad_enabled(True)
if not hasattr(sys, "_fresh_kernel_threads"):  # the first set-up runs before any chapter
    sys._fresh_kernel_threads = _torch.get_num_threads()
_torch.set_num_threads(sys._fresh_kernel_threads)
"""


@pytest.fixture(scope="module")
def live_kernel():
    """One kernel for the live renders of every chapter (a namespace reset between chapters),
    instead of one per chapter: the chapters' own set-up still runs once per chapter, the
    kernel's start and the imports only once."""
    import nbformat
    from nbclient import NotebookClient

    client = NotebookClient(nbformat.v4.new_notebook(), timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}, allow_errors=False)
    with client.setup_kernel():
        def run(cells):
            client.nb.cells = cells
            for i, cell in enumerate(cells):
                client.execute_cell(cell, i)
            return cells
        yield run


def _live_renders(run, notebook: Path, keys: dict[str, list[str]]) -> list[dict]:
    """Run ``notebook`` in the live kernel up to its last explore cell (each widget drawing
    only its first state), then draw ``keys[signature]`` live in each widget."""
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    last = max(i for i, c in enumerate(cells) if re.search(r"(^|[=\s])explore\(", c.source, re.M))
    setup = nbformat.v4.new_code_cell(  # this repository's package, as the site was built from it
        SETUP_CELL.replace("__DIR__", repr(str(notebook.parent))).replace("__SRC__", repr(str(ROOT / "src"))))
    probe = nbformat.v4.new_code_cell(LIVE_CELL.replace("__KEYS__", repr(keys)))
    out = run([setup] + cells[: last + 1] + [probe])
    text = "".join(o.get("text", "") for o in out[-1].outputs if o.get("name") == "stdout")
    return json.loads(text.split("LIVE-RESULT", 1)[1])


@pytest.mark.parametrize("path", [p for p in explore_pages() if notebook_source(p)])
def test_static_figures_match_live_renders(live_kernel, path):
    """Two states of every figure (start and far corner of the grid): live == static."""
    start = time.perf_counter()
    states = widget_state(path)
    wanted: dict[str, list[str]] = {}
    static: dict[str, dict] = {}
    for state in states.values():
        sig = json.dumps([[c["name"], c["labels"]] for c in state["controls"]])
        assert sig not in static, f"{path}: two explore widgets with the same controls"
        far = ",".join(str(c["grid"][-1] if c["grid"][-1] != i else c["grid"][0])
                       for c, i in zip(state["controls"], state["selection"]))
        first = ",".join(map(str, state["selection"]))
        wanted[sig] = [far, first]  # in this order each assignment changes the selection
        static[sig] = state
    results = _live_renders(live_kernel, ROOT / notebook_source(path), wanted)
    assert sorted(json.dumps(r["sig"]) for r in results) == sorted(wanted), \
        f"{path}: the live run made other explore widgets than the page holds"
    problems = []
    for r in results:
        sig = json.dumps(r["sig"])
        for key in wanted[sig]:
            live, frame = r["live"][key], static[sig]["frames"][key]
            if "error" in live:
                problems.append(f"{path} state {key}: live render failed: {live['error']}")
                continue
            why = same_figure(live["src"], frame["src"])
            if why or live["label"] != frame["label"]:
                problems.append(f"{path} state {key}: static and live differ ({why or 'labels'}): "
                                f"{frame['label']!r} vs {live['label']!r}")
    assert not problems, "\n".join(problems)
    print(f"{path}: {sum(len(v) for v in wanted.values())} states compared in {time.perf_counter() - start:.0f} s")
