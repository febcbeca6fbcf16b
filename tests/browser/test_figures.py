"""No figure's parts collide on the built site: every plotly figure of every page, on a laptop
(1280 px) and a phone (390 px), in the light and the dark theme (issue 40).

The plotly figures (``circuitbook.viz.heatmap`` and ``Heatmap``) are drawn in the page, laid out
for its width and theme by the figure's own script (``viz._PLOTLY_THEME``). Each page is loaded
once, at 1280 px in the light theme, and each figure is scrolled into view and drawn (they load
lazily); then the theme is switched to dark as the theme's toggle does, the window narrowed to
390 px, and the theme switched back to light. After each step, once every figure has been laid
out for it (the ``data-layout`` its script writes) and drawn, the parts of every figure are
measured in Chromium: the title, the subplot titles, the axis titles, the tick labels of each
axis, the colour bars, the legends and each subplot's plot area, each as its box on screen
(turned with it where the text is turned). ``scripts/figure_audit.py`` holds the rules, shared
with the audit of the matplotlib figures: a title over a colour bar, a legend or another title,
a colour bar or a legend over a plot area, an axis title over tick labels, tick labels of one
axis over each other, any of these over another, and any text reaching past the figure's edge
(cut) fail, with 1 px allowed for rounding. A failure names the page, the figure, the width,
the theme and what overlaps what.

A figure that is not drawn at all, or not laid out again for a theme or a width within 20 s,
fails too.
"""

from __future__ import annotations

import time

import pytest
from test_browser import SITE, Log, offline_context, server, watch  # noqa: F401
from test_hover import plotly_pages

import figure_audit  # scripts/, on the path through test_browser

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

# (width, theme) in the order a page goes through them: one load, then the theme's toggle and
# the window's width change the figures in place, as for a reader
STEPS = [(1280, "light"), (1280, "dark"), (390, "dark"), (390, "light")]

# Every figure scrolled into view and drawn, one after the other (each loads plotly.js, or
# draws, when it comes near the viewport); then back to the top. Returns the figures' ids.
DRAW_JS = """async () => {
  const figs = [...document.querySelectorAll('.circuitbook-plotly')];
  for (const el of figs) {
    el.scrollIntoView({ block: 'center', behavior: 'instant' });
    const end = performance.now() + 20000;
    while (!(el.classList.contains('js-plotly-plot') && el._fullLayout) && performance.now() < end) {
      await new Promise((ok) => setTimeout(ok, 50));
    }
  }
  window.scrollTo({ top: 0, behavior: 'instant' });
  return figs.map((el) => ({ id: el.id, drawn: !!el._fullLayout }));
}"""

# Every drawn figure laid out for `want` ("dark narrow", ...) by its script (which says so once
# it has drawn), as wide as its container, and nothing about it changed for `quiet` ms (the
# script redraws 150 ms after a change; plotly follows the container's width on its own).
SETTLED_JS = """async ([want, quiet, timeout]) => {
  const figs = [...document.querySelectorAll('.circuitbook-plotly.js-plotly-plot')];
  const sig = (gd) => { const L = gd._fullLayout || {};
    return [gd.dataset.layout, gd.clientWidth, L.width, L.height, JSON.stringify(L._size)].join(','); };
  const ready = (gd) => gd.dataset.layout === want && gd._fullLayout
    && Math.abs(gd._fullLayout.width - gd.clientWidth) <= 1.5;
  const start = performance.now();
  let last = null, since = start;
  while (performance.now() - start < timeout) {
    const now = figs.map(sig).join(';');
    if (now !== last) { last = now; since = performance.now(); }
    if (figs.every(ready) && performance.now() - since >= quiet) return [];
    await new Promise((ok) => setTimeout(ok, 50));
  }
  return figs.filter((gd) => !ready(gd)).map((gd) => gd.id + ' (laid out for ' + gd.dataset.layout + ')');
}"""

# The parts of one figure: [x, y] corners in px from the figure's top left, and its size.
PARTS_JS = """(id) => {
  const gd = document.getElementById(id);
  const svg = gd && gd.querySelector('svg.main-svg');
  if (!svg || !gd._fullLayout) return null;
  const F = svg.getBoundingClientRect(), L = gd._fullLayout, parts = [];
  const shown = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
  const words = (el) => el.textContent.replace(/\\s+/g, ' ').trim();
  const quad = (el) => {  // the element's own box, through its transforms (a turned label stays turned)
    const b = el.getBBox(), m = el.getScreenCTM();
    if (!m || (!b.width && !b.height)) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x - F.left, p.y - F.top]; });
  };
  const rect = (el) => {
    const r = el.getBoundingClientRect();
    if (!r.width && !r.height) return null;
    const [x0, y0, x1, y1] = [r.left - F.left, r.top - F.top, r.right - F.left, r.bottom - F.top];
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
  };
  const add = (role, q, owner, name, axis) => {
    if (q) parts.push({ role, quad: q, owner: owner || '', name: (name || '').slice(0, 60), axis: axis || '' });
  };
  const texts = (sel) => [...gd.querySelectorAll(sel)].filter((t) => words(t) && shown(t));
  texts('.g-gtitle text.gtitle').forEach((t) => add('title', quad(t), 'figure', words(t)));
  // annotations placed on the paper without an arrow are labels (make_subplots' subplot
  // titles); others point at the data and are only required to stay inside the figure
  gd.querySelectorAll('.infolayer g.annotation').forEach((g) => {
    const a = (L.annotations || [])[Number(g.getAttribute('data-index'))] || {};
    const label = a.xref === 'paper' && a.yref === 'paper' && !a.showarrow;
    [...g.querySelectorAll('text.annotation-text')].filter((t) => words(t) && shown(t))
      .forEach((t) => add(label ? 'title' : 'text', quad(t), label ? 'subplot titles' : 'annotation', words(t)));
  });
  texts('.infolayer text').forEach((t) => {
    const m = String(t.getAttribute('class')).match(/^([xy][0-9]*)title$/);
    if (m) add('axis-title', quad(t), 'axis ' + m[1], words(t), m[1]);
  });
  const union = (el) => {  // the box around what is drawn (plotly leaves empty groups far away)
    const rs = [...el.querySelectorAll('*')].filter((e) => !e.firstElementChild && (e.tagName !== 'text' || words(e)))
      .map((e) => e.getBoundingClientRect()).filter((r) => r.width > 0 && r.height > 0);
    if (!rs.length) return null;
    const [x0, y0] = [Math.min(...rs.map((r) => r.left)) - F.left, Math.min(...rs.map((r) => r.top)) - F.top];
    const [x1, y1] = [Math.max(...rs.map((r) => r.right)) - F.left, Math.max(...rs.map((r) => r.bottom)) - F.top];
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]];
  };
  gd.querySelectorAll('.infolayer g.colorbar').forEach((cb, k) => {
    const owner = 'colour bar ' + (k + 1);
    add('colorbar', union(cb), owner);
    [...cb.querySelectorAll('g[class$="tick"] > text')].filter((t) => words(t) && shown(t))
      .forEach((t) => add('ticks', quad(t), owner, words(t), owner));
    [...cb.querySelectorAll('.cbtitle text')].filter((t) => words(t) && shown(t))
      .forEach((t) => add('axis-title', quad(t), owner, words(t), owner));
  });
  gd.querySelectorAll('.cartesianlayer g[class$="tick"] > text').forEach((t) => {
    const m = String(t.parentNode.getAttribute('class')).match(/^([xy][0-9]*)tick$/);
    if (m && words(t) && shown(t)) add('ticks', quad(t), 'axis ' + m[1], words(t), m[1]);
  });
  gd.querySelectorAll('.infolayer g.legend').forEach((g, k) => {
    const bg = g.querySelector('rect.bg');
    add('legend', rect(bg || g), 'legend ' + (k + 1));
  });
  Object.entries(L._plots || {}).forEach(([name, sp]) => {
    const xa = sp.xaxis, ya = sp.yaxis;
    if (!xa || !ya) return;
    const [x0, y0] = [xa._offset, ya._offset], [x1, y1] = [xa._offset + xa._length, ya._offset + ya._length];
    add('area', [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], 'subplot ' + name);
  });
  const given = gd.layout && gd.layout.title;  // plotly fills an empty one with a placeholder
  const title = (given && given.text) || gd.getAttribute('aria-label') || id;
  return { title: title.replace(/<br>/gi, ' '), size: [F.width, F.height], parts };
}"""


def _findings(fig: dict) -> list[str]:
    width, height = fig["size"]
    return (figure_audit.collisions(fig["parts"])
            + figure_audit.cut(fig["parts"], (0.0, 0.0, width, height)))


@pytest.fixture(scope="module")
def measured(browser, server):  # noqa: F811
    """{page: {"figures": n, "problems": [...], "seconds": s}}: every page with plotly figures,
    loaded once and taken through STEPS (one browser context, one tab)."""
    log = Log()
    context = offline_context(browser, log, color_scheme="light")
    page = watch(context.new_page(), log)
    out = {}
    try:
        for path in plotly_pages():
            start = time.perf_counter()
            problems: list[str] = []
            page.set_viewport_size({"width": STEPS[0][0], "height": 900})
            page.goto(f"{server}/{path}", wait_until="load", timeout=60_000)
            page.evaluate("() => { document.documentElement.dataset.theme = 'light'; "
                          "document.documentElement.dataset.mode = 'light'; }")
            figures = page.evaluate(DRAW_JS)
            problems += [f"figure {f['id']} was not drawn" for f in figures if not f["drawn"]]
            for width, theme in STEPS:
                page.set_viewport_size({"width": width, "height": 900})
                page.evaluate(f"() => {{ document.documentElement.dataset.theme = '{theme}'; "
                              f"document.documentElement.dataset.mode = '{theme}'; }}")
                want = f"{theme} {'narrow' if width < 640 else 'wide'}"
                late = page.evaluate(SETTLED_JS, [want, 400, 20_000])
                problems += [f"at {width} px, {theme}: {f} not laid out as {want!r} within 20 s" for f in late]
                for f in figures:
                    fig = page.evaluate(PARTS_JS, f["id"])
                    if fig is None:
                        continue
                    problems += [f"{fig['title']!r} at {width} px, {theme}: {finding}" for finding in _findings(fig)]
            # uncaught exceptions (plotly's among them); console errors are test_browser.py's
            out[path] = {"figures": len(figures), "problems": problems, "seconds": time.perf_counter() - start,
                         "uncaught": [c for c in log.console if c.startswith("uncaught")]}
            log.console.clear()
    finally:
        context.close()
    return out


def test_some_page_has_plotly_figures():
    assert plotly_pages(), "no page of the site holds a plotly figure of circuitbook.viz"


@pytest.mark.parametrize("path", plotly_pages())
def test_no_figure_has_colliding_or_cut_labels(measured, path):
    seen = measured[path]
    assert seen["figures"] > 0, f"{path}: no plotly figure found on the page"
    assert not seen["uncaught"], f"{path}: " + "\n".join(seen["uncaught"])
    assert not seen["problems"], f"{path}: {len(seen['problems'])} problem(s):\n" + "\n".join(seen["problems"])
