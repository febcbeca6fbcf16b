"""Hover works on the built site, offline: the plotly heatmaps (``circuitbook.viz.heatmap``).

One test per kind of hoverable figure. For every plotly heatmap on every page, in its first
and last panel, the mouse is put on two cells (the largest value and one in the middle);
the hover label must name that cell's row and column, with the axis titles the figure
draws, and show its value. What is expected is read from the figure's data as the page's
HTML holds it (parsed here in Python), and the cell's position on screen from plotly's
axes: so a label that named a neighbouring cell, a transposed grid or a wrong value fails.
That they fit a 390-pixel phone screen is checked with the widgets, in
tests/browser/test_layout.py. Screenshots of each first hover go to ``_build/screenshots/hover/``.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser import SCREENSHOTS, SITE, Log, offline_context, open_page, server, site_pages, watch  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

SHOTS = SCREENSHOTS / "hover"
FIGURE = re.compile(r'<div id="(circuitbook-plotly-[0-9a-f]+-\d+)".*?var f = (\{.*?\}); P\.newPlot', re.S)


def figures(path: str) -> dict[str, dict]:
    """The plotly figures of a page, by element id, as its HTML holds them."""
    return {m.group(1): json.loads(m.group(2)) for m in FIGURE.finditer((SITE / path).read_text())}


def _heatmap_traces(fig: dict) -> list[dict]:
    """The heatmap panels of a figure (a side panel, e.g. bars, has traces of its own kind;
    a figure of curves, e.g. chapter 19's training history, has none)."""
    return [t for t in fig["data"] if t.get("type") == "heatmap" and t.get("coloraxis") == "coloraxis"]


def plotly_pages() -> list[str]:
    """The pages with a plotly figure shown by ``circuitbook.viz`` (heatmaps, or curves)."""
    return [p for p in site_pages() if 'class="circuitbook-plotly"' in (SITE / p).read_text(errors="replace")]


def heatmap_pages() -> list[str]:
    """The pages with at least one ``circuitbook.viz.heatmap``."""
    return [p for p in plotly_pages() if any(_heatmap_traces(fig) for fig in figures(p).values())]


def _cells(z: list[list]) -> list[tuple[int, int]]:
    """The cell with the largest |value| and a filled cell near the middle."""
    filled = [(i, j) for i, row in enumerate(z) for j, v in enumerate(row) if v is not None]
    biggest = max(filled, key=lambda c: abs(z[c[0]][c[1]]))
    middle = min(filled, key=lambda c: abs(c[0] - len(z) // 2) + abs(c[1] - len(z[0]) // 3))
    return [biggest] if middle == biggest else [biggest, middle]


POINT_JS = """([id, axis, i, j]) => {
  const gd = document.getElementById(id);
  gd.scrollIntoView({block: 'center', behavior: 'instant'});
  const L = gd._fullLayout, xa = L['xaxis' + axis], ya = L.yaxis;
  const r = gd.getBoundingClientRect();
  return [r.left + xa._offset + xa.l2p(j), r.top + ya._offset + ya.l2p(i)];
}"""

HOVER_JS = """(id) => {
  const g = document.getElementById(id).querySelector('.hoverlayer .hovertext');
  return g ? [...g.querySelectorAll('tspan.line')].map((t) => t.textContent) : null;
}"""


def _title(axis: dict, default: str) -> str:
    return ((axis.get("title") or {}).get("text") or default)


def test_some_page_has_heatmaps():
    assert heatmap_pages(), "no page of the site holds a circuitbook.viz.heatmap"


@pytest.mark.parametrize("path", heatmap_pages())
def test_hovering_a_heatmap_cell_names_its_row_column_and_value(browser, server, path):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems = []
    try:
        assert open_page(page, server, path), f"{path}: the page's figures did not render"
        for n, (fig_id, fig) in enumerate(figures(path).items()):
            layout = fig["layout"]
            data = _heatmap_traces(fig)
            if not data:
                continue
            row_name = _title(layout["yaxis"], "row")
            for p in sorted({0, len(data) - 1}):
                trace = data[p]
                axis = trace.get("xaxis", "x").removeprefix("x")
                col_name = _title(layout[f"xaxis{axis}"], "column")
                for k, (i, j) in enumerate(_cells(trace["z"])):
                    x, y = page.evaluate(POINT_JS, [fig_id, axis, i, j])
                    page.mouse.move(x, y)
                    try:
                        page.wait_for_function(f"() => ({HOVER_JS})({json.dumps(fig_id)})", timeout=5_000)
                    except Exception:  # noqa: BLE001 - playwright's TimeoutError
                        problems.append(f"{fig_id} panel {p} cell ({i}, {j}): no hover label")
                        continue
                    lines = page.evaluate(HOVER_JS, fig_id)
                    if n == 0 and p == 0 and k == 0:
                        page.screenshot(path=str(SHOTS / (path.removeprefix("book/").replace("/", "-")
                                                          .removesuffix(".html") + ".png")))
                    want = [f"{row_name}: {trace['y'][i]}", f"{col_name}: {trace['x'][j]}"]
                    value = trace["z"][i][j]
                    shown = lines[2].removeprefix("value: ").replace("\u2212", "-") if len(lines) == 3 else ""
                    decimals = len(shown.split(".")[1]) if "." in shown else 0
                    try:
                        close = abs(float(shown) - value) <= 0.5 * 10 ** -decimals + 1e-12
                    except ValueError:
                        close = False
                    if lines[:2] != want or not close:
                        problems.append(f"{fig_id} panel {p} cell ({i}, {j}): hover says {lines}, "
                                        f"the data say {want} and value {value}")
                    page.mouse.move(0, 0)
        assert not log.console, log.console
    finally:
        context.close()
    assert not problems, f"{path}:\n" + "\n".join(problems)

