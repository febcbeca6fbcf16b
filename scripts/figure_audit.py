"""Figures whose parts collide: the rules, and the build-time audit of every matplotlib figure.

A figure is read as a list of *parts*, each a quadrilateral on the page or image (four corners,
pixels, in any orientation, so a tick label turned by 30 degrees is its own turned box, not the
box around it) with

- ``role``: ``title`` (a figure's or a subplot's title, a figure-level text), ``axis-title``,
  ``ticks`` (one tick label), ``legend``, ``colorbar`` (the whole bar with its ticks and title),
  ``area`` (a subplot's plot area) or ``text`` (anything else: notes placed on the data);
- ``owner``: what it belongs to (a subplot, a colour bar), for the report and the exemptions;
- ``axis``: for ``ticks`` and ``axis-title``, the axis they label.

:func:`collisions` applies the book's rules (issue 40) to those parts: two parts that overlap by
more than ``TOLERANCE_PX`` (rounding, no more) collide, except

- two plot areas (subplots may share one; a twin axis has the same area);
- a note on the data (``text``): its place is the author's choice, it is only required to be
  inside the figure;
- a colour bar and its own tick labels or title (they are parts of it);
- where ``legend_inside_ok`` (matplotlib, whose ``loc="best"`` puts a legend inside its own
  subplot on purpose), a legend and its own subplot's area.

So a title over a colour bar, a legend or another title, a colour bar or a legend over a plot
area, an axis title over tick labels, two tick labels of one axis over each other and two subplot
titles over each other all collide. :func:`cut` lists every part that is not a plot area and
reaches past the figure's edge by more than the tolerance: a label the reader sees cut.

The browser test of the site's plotly figures (tests/browser/test_figures.py) measures the parts
in Chromium and applies these rules. For matplotlib, whose figures are PNG images drawn while a
chapter executes, ``scripts/execute_notebooks.py`` starts each kernel with this file (see
:func:`install`): every figure the inline backend shows is measured as it is drawn, with the
figure's own renderer, and the parts and their collisions are written to a JSON file that the
executor stores with the notebook's cached execution and copies to ``_build/figure-audit/``;
tests/site/test_figure_audit.py reads them.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

TOLERANCE_PX = 1.0
"""Overlap allowed between two parts, and reach past the figure's edge: rounding, no more."""


# --------------------------------------------------------------------------- geometry

def box(x0: float, y0: float, x1: float, y1: float) -> list[list[float]]:
    """An axis-aligned box as the four corners of a quadrilateral."""
    return [[x0, y0], [x1, y0], [x1, y1], [x0, y1]]


def _axes_of(quad) -> list[tuple[float, float]]:
    """The unit normals of a quadrilateral's edges (separating axes)."""
    out = []
    for k in range(len(quad)):
        (x0, y0), (x1, y1) = quad[k], quad[(k + 1) % len(quad)]
        dx, dy = x1 - x0, y1 - y0
        n = math.hypot(dx, dy)
        if n > 1e-9:
            out.append((-dy / n, dx / n))
    return out


def overlap(a, b) -> float:
    """How far two convex quadrilaterals overlap: the smallest depth of their overlap along any
    separating axis (0 if they are apart or only touch). For two axis-aligned boxes it is the
    smaller of the overlap's width and height."""
    depth = math.inf
    for ax, ay in _axes_of(a) + _axes_of(b):
        pa = [x * ax + y * ay for x, y in a]
        pb = [x * ax + y * ay for x, y in b]
        d = min(max(pa), max(pb)) - max(min(pa), min(pb))
        if d <= 0:
            return 0.0
        depth = min(depth, d)
    return 0.0 if depth is math.inf else depth


def outside(quad, frame) -> float:
    """How far a quadrilateral reaches past an axis-aligned ``frame`` (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = frame
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return max(0.0, x0 - min(xs), max(xs) - x1, y0 - min(ys), max(ys) - y1)


# --------------------------------------------------------------------------- the rules

def _describe(part: dict) -> str:
    """A part in words; tick labels as their axis's, so that a row of them is one finding."""
    role, name = part["role"], part.get("name") or ""
    if role == "ticks":
        return f"tick labels of {part.get('axis') or part.get('owner') or 'an axis'}"
    what = {"title": "title", "axis-title": "axis title", "legend": "legend",
            "colorbar": "colour bar", "area": "plot area", "text": "text"}[role]
    where = f"axis {part['axis']}" if role == "axis-title" and part.get("axis") else part.get("owner") or ""
    label = f"{what} {name!r}" if name and role in ("title", "axis-title", "text") else what
    return f"{label} ({where})" if where else label


def _exempt(a: dict, b: dict, legend_inside_ok: bool) -> bool:
    ra, rb = a["role"], b["role"]
    if "text" in (ra, rb) or ra == rb == "area":
        return True
    for p, q in ((a, b), (b, a)):
        if p["role"] == "colorbar" and q.get("owner") == p.get("owner") and q["role"] in ("ticks", "axis-title"):
            return True
        if legend_inside_ok and p["role"] == "legend" and q["role"] == "area" and q.get("owner") == p.get("owner"):
            return True
    return False


def collisions(parts: list[dict], *, legend_inside_ok: bool = False, tolerance: float = TOLERANCE_PX) -> list[str]:
    """Every pair of parts that collide under the rules above, in words: one line for each pair
    of things (a row of tick labels counts as one thing), naming the tick labels involved and
    the deepest overlap."""
    found: dict[tuple[str, str], list] = {}
    for i, a in enumerate(parts):
        for b in parts[i + 1:]:
            if _exempt(a, b, legend_inside_ok):
                continue
            depth = overlap(a["quad"], b["quad"])
            if depth <= tolerance:
                continue
            entry = found.setdefault((_describe(a), _describe(b)), [0.0, []])
            entry[0] = max(entry[0], depth)
            entry[1] += [p["name"] for p in (a, b) if p["role"] == "ticks" and p["name"] not in entry[1]]
    out = []
    for (a, b), (depth, names) in found.items():
        labels = f" ({', '.join(repr(n) for n in names[:6])}{', ...' if len(names) > 6 else ''})" if names else ""
        what = f"{a} overlap each other{labels}" if a == b else f"{a} overlaps {b}{labels}"
        out.append(f"{what}, by {depth:.1f} px")
    return out


def cut(parts: list[dict], frame, *, tolerance: float = TOLERANCE_PX) -> list[str]:
    """Every part (not a plot area) that reaches past the figure's ``frame`` (x0, y0, x1, y1),
    in words (a row of tick labels as one)."""
    found: dict[str, list] = {}
    for p in parts:
        out = outside(p["quad"], frame)
        if p["role"] != "area" and out > tolerance:
            entry = found.setdefault(_describe(p), [0.0, []])
            entry[0] = max(entry[0], out)
            if p["role"] == "ticks":
                entry[1].append(p["name"])
    return [f"{what}{' (' + ', '.join(repr(n) for n in names[:6]) + (', ...' if len(names) > 6 else '') + ')' if names else ''}"
            f" cut at the figure's edge, {depth:.1f} px outside" for what, (depth, names) in found.items()]


# --------------------------------------------------------------------------- matplotlib

def _text_quad(text, renderer):
    """A matplotlib Text's box as drawn: turned with the text where it is turned."""
    bb = text.get_window_extent(renderer)
    angle = text.get_rotation() % 180
    if min(angle, 180 - angle) < 1e-6 or abs(angle - 90) < 1e-6:
        return box(bb.x0, bb.y0, bb.x1, bb.y1)
    # the turned box has the same centre as the box around it; its size is the unturned text's
    text.set_rotation(0)
    try:
        flat = text.get_window_extent(renderer)
    finally:
        text.set_rotation(angle)
    w, h = flat.width / 2, flat.height / 2
    cx, cy = (bb.x0 + bb.x1) / 2, (bb.y0 + bb.y1) / 2
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    return [[cx + x * c - y * s, cy + x * s + y * c] for x, y in ((-w, -h), (w, -h), (w, h), (-w, h))]


def _bbox_quad(bb):
    return box(bb.x0, bb.y0, bb.x1, bb.y1)


def _shown(text) -> bool:
    return bool(text is not None and text.get_visible() and str(text.get_text()).strip())


def _name(fig, n: int) -> str:
    sup = getattr(fig, "_suptitle", None)
    if _shown(sup):
        return sup.get_text()
    for ax in fig.axes:
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if _shown(t):
                return t.get_text()
    for ax in fig.axes:
        for t in (ax.yaxis.label, ax.xaxis.label):
            if _shown(t):
                return f"(untitled; axis {t.get_text()!r})"
    return f"figure {n}"


def figure_parts(fig, renderer) -> list[dict]:
    """The parts of a drawn matplotlib figure, in display pixels (origin at the bottom left)."""
    parts = []

    def add(role, quad, owner, name="", axis=""):
        parts.append({"role": role, "quad": [[round(float(x), 2), round(float(y), 2)] for x, y in quad], "owner": owner,
                      "name": str(name)[:60], "axis": axis})

    plots = [ax for ax in fig.axes if ax.get_visible()]
    names = {}
    for i, ax in enumerate(plots):
        kind = "colour bar" if getattr(ax, "_colorbar", None) is not None else "subplot"
        names[ax] = f"{kind} {i + 1}"
    for ax in plots:
        owner = names[ax]
        if getattr(ax, "_colorbar", None) is not None:
            add("colorbar", _bbox_quad(ax.get_tightbbox(renderer)), owner)
            for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                for tick in axis._update_ticks():
                    for label in (tick.label1, tick.label2):
                        if _shown(label):
                            add("ticks", _text_quad(label, renderer), owner, label.get_text(), f"{owner} {which}")
                if _shown(axis.label):
                    add("axis-title", _text_quad(axis.label, renderer), owner, axis.label.get_text(), f"{owner} {which}")
            continue
        if ax.axison and ax.patch.get_visible():
            add("area", _bbox_quad(ax.bbox), owner)
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if _shown(t):
                add("title", _text_quad(t, renderer), owner, t.get_text())
        if ax.axison:
            for which, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
                if not axis.get_visible():
                    continue
                for tick in axis._update_ticks():
                    for label in (tick.label1, tick.label2):
                        if _shown(label) and tick.get_visible():
                            add("ticks", _text_quad(label, renderer), owner, label.get_text(), f"{owner} {which}")
                if _shown(axis.offsetText):
                    add("ticks", _text_quad(axis.offsetText, renderer), owner, axis.offsetText.get_text(),
                        f"{owner} {which}")
                if _shown(axis.label):
                    add("axis-title", _text_quad(axis.label, renderer), owner, axis.label.get_text(), f"{owner} {which}")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            add("legend", _bbox_quad(legend.get_window_extent(renderer)), owner)
        for t in ax.texts:
            if _shown(t):
                add("text", _text_quad(t, renderer), owner, t.get_text())
    figure_texts = [getattr(fig, "_suptitle", None), getattr(fig, "_supxlabel", None),
                    getattr(fig, "_supylabel", None), *fig.texts]
    for k, t in enumerate(figure_texts):
        if _shown(t) and not any(t is u for u in figure_texts[:k]):  # a suptitle is in fig.texts too
            add("title", _text_quad(t, renderer), "figure", t.get_text())
    for legend in fig.legends:
        if legend.get_visible():
            add("legend", _bbox_quad(legend.get_window_extent(renderer)), "figure")
    return parts


def audit_figure(fig, bbox_inches="tight", pad_inches=None) -> dict:
    """The collisions and cut labels of a matplotlib figure that has just been drawn, as the
    inline backend saves it: with ``bbox_inches="tight"`` the image is the figure's tight box
    (everything laid out) padded by ``pad_inches``, else the whole figure."""
    import matplotlib as mpl

    # laid out again as the whole figure: saving with a tight box leaves the axis titles where
    # that box's draw put them, shifted (tick labels are placed anew when asked, titles are not)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    parts = figure_parts(fig, renderer)
    if bbox_inches == "tight":
        pad = mpl.rcParams["savefig.pad_inches"] if pad_inches in (None, "layout") else pad_inches
        tight = fig.get_tightbbox(renderer)  # inches
        frame = [(tight.x0 - pad) * fig.dpi, (tight.y0 - pad) * fig.dpi,
                 (tight.x1 + pad) * fig.dpi, (tight.y1 + pad) * fig.dpi]
    else:
        frame = [0.0, 0.0, fig.bbox.width, fig.bbox.height]
    return {"findings": collisions(parts, legend_inside_ok=True) + cut(parts, frame),
            "parts": len(parts), "size_px": [round(fig.bbox.width), round(fig.bbox.height)]}


# --------------------------------------------------------------------------- in the kernel

def install(out: str | os.PathLike) -> None:
    """Measure every figure that IPython's inline backend shows from now on, and record each in
    ``out`` (JSON: ``{"figures": [{"cell": execution count, "name", "findings", ...}]}``),
    rewritten after each figure. IPython draws a figure for display through
    ``IPython.core.pylabtools.print_figure``, which the inline backend binds as the PNG
    formatter of every Figure when it is first activated (on ``import matplotlib.pyplot``):
    wrapped here, before any cell runs, it sees every figure shown, once per display, just as
    it is drawn. An audit that fails records its error instead of the figure's findings, and
    never stops the figure from being shown."""
    from IPython.core import pylabtools

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {"figures": []}
    out.write_text(json.dumps(record))
    draw = pylabtools.print_figure

    def print_figure(fig, fmt="png", bbox_inches="tight", base64=False, **kwargs):
        data = draw(fig, fmt, bbox_inches, base64, **kwargs)
        if data is None:  # an empty figure: nothing is shown
            return data
        try:
            from IPython import get_ipython

            shell = get_ipython()
            # the cell's number (``In [n]``): IPython counts the cell it is running before it runs it
            count = getattr(shell, "execution_count", None)
            entry = {"cell": count - 1 if isinstance(count, int) else None,
                     "name": _name(fig, len(record["figures"]) + 1)}
            entry.update(audit_figure(fig, bbox_inches, kwargs.get("pad_inches")))
        except Exception as e:  # noqa: BLE001 - reported by the test, never breaks the figure
            entry = {"cell": None, "name": "?", "findings": [], "error": f"{type(e).__name__}: {e}"}
        record["figures"].append(entry)
        out.write_text(json.dumps(record, indent=1))
        return data

    pylabtools.print_figure = print_figure


if __name__ == "circuitbook_figure_audit" and os.environ.get("CIRCUITBOOK_FIGURE_AUDIT"):
    install(os.environ["CIRCUITBOOK_FIGURE_AUDIT"])
