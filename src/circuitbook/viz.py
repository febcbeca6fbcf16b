"""Attention patterns drawn by CircuitsVis, and heatmaps with hover labels drawn by plotly, with
their JavaScript bundles served once per site.

``circuitsvis.attention.attention_heads(...)`` is convenient but awkward for a static book:
its ``_repr_html_`` probes the internet on every display and then either pastes the whole
1.3 MB bundle into the output (offline) or imports it from a CDN (online), so an executed
notebook depends on the network it ran on, and a page with several views carries several
copies of the bundle.

:func:`attention_pattern_view` writes the same view with a small loader instead. The output
is the same for the same inputs wherever it runs, and it loads the bundle:

- on the book's site, from the site itself (``_static/circuitsvis/iife.js``, copied from the
  installed circuitsvis package by ``scripts/vendor_assets.py``), once per page;
- elsewhere (Jupyter, Colab), from the unpkg CDN, at the same circuitsvis version.

The bundle is CircuitsVis's IIFE build. It is evaluated inside a function whose ``define``
is undefined, so on a page with require.js (every page with widgets) none of the UMD
libraries bundled in it can register an anonymous AMD module, which would break the page's
widgets. (Where the file cannot be fetched, e.g. a page opened from ``file://``, it falls
back to a plain script tag, with ``define`` hidden while it runs.)

:func:`heatmap` does the same for plotly: a heatmap whose hover names the row, the column and
the value, for the chapters' grids indexed by tokens or by (layer, head) that are too large to
label cell by cell. Its output carries the figure twice: as plotly's JSON mimetype, which
JupyterLab draws with its plotly extension (offline), and as HTML whose loader fetches
plotly.js from the site (``_static/plotly/plotly.min.js``, copied from the installed plotly
package) or, elsewhere (Colab, classic Jupyter), from plotly's CDN at the installed version.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections import Counter
from collections.abc import Sequence

import torch

#: the circuitsvis version whose bundle the site serves and the CDN fallback names
CIRCUITSVIS_VERSION = "1.43.3"
#: where the bundle lives on the site, relative to its ``_static/`` folder
SITE_BUNDLE = "circuitsvis/iife.js"
CDN_BUNDLE = f"https://unpkg.com/circuitsvis@{CIRCUITSVIS_VERSION}/dist/cdn/iife.js"

_LOADER = """\
(function () {
  var CDN = %(cdn)s, SITE = %(site)s, NAME = %(name)s, KEY = "__circuitbook" + NAME;
  function bundleUrl() {
    // on the book's site every page loads _static/documentation_options.js: serve from there
    var s = document.querySelector('script[src*="_static/documentation_options.js"]');
    return s ? s.src.replace(/documentation_options\\.js.*$/, SITE) : CDN;
  }
  function viaTag(url, resolve, reject) {
    // with require.js on the page, a UMD bundle would register an anonymous AMD module
    var define = window.define, tag = document.createElement("script");
    window.define = undefined;
    tag.onload = function () { window.define = define; resolve(window[NAME]); };
    tag.onerror = function () {
      window.define = define;
      reject(new Error(NAME + ": could not load " + url));
    };
    tag.src = url;
    document.head.appendChild(tag);
  }
  function load() {
    if (window[NAME]) return Promise.resolve(window[NAME]);
    if (!window[KEY]) {
      var url = bundleUrl();
      window[KEY] = new Promise(function (resolve, reject) {
        if (!window.fetch || url.indexOf("file:") === 0) return viaTag(url, resolve, reject);
        fetch(url).then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        }).then(function (code) {
          // evaluated with `define` undefined: nothing in it can talk to require.js; a bundle
          // that declares `var NAME` declares it inside this function, so it is returned
          var lib = new Function("define", code + "\\n;return typeof " + NAME + " === 'undefined' ? window." +
                                 NAME + " : " + NAME + ";")(undefined);
          if (!lib) throw new Error(NAME + " not defined by " + url);
          window[NAME] = lib;
          resolve(lib);
        }).catch(function () { viaTag(url, resolve, reject); });
      });
    }
    return window[KEY];
  }
  function start() {
    load().then(%(then)s).catch(function (e) {
      var el = document.getElementById(%(id)s);
      if (el) el.textContent = String(e);
      console.error(e);
    });
  }
  // Lazily: the bundle is fetched when the view comes within a screen or so of the viewport,
  // so a reader who never scrolls to it never downloads it (a view on the first screen starts
  // at once). Without IntersectionObserver, at once.
  var el = document.getElementById(%(id)s);
  if (!el || !window.IntersectionObserver) return start();
  var seen = new IntersectionObserver(function (entries) {
    if (!entries.some(function (e) { return e.isIntersecting; })) return;
    seen.disconnect();
    start();
  }, { rootMargin: "1200px 0px" });
  seen.observe(el);
})();"""

# CircuitsVis sizes its head thumbnails by the window's width, not the column's: in the book's
# narrow column they are small, and the theme's large headings would spill over them.
_CSS = (".circuitbook-circuitsvis h3{font-size:1.05rem;margin:.6rem 0}"
        ".circuitbook-circuitsvis h4{font-size:.7rem;line-height:1.15;max-width:100%;overflow-wrap:anywhere}")

_ids: Counter = Counter()


def _script_json(value) -> str:
    """JSON safe inside an inline <script> element."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")


def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet, inverted: the printable character that stands for each
    byte (``"Ġ"`` for a space, ``"Ċ"`` for a newline) -> the byte (Radford et al. 2019's
    ``bytes_to_unicode``, which SmolLM2's tokenizer shares)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out, extra = {chr(b): b for b in keep}, 0
    for b in range(256):
        if b not in keep:
            out[chr(256 + extra)] = b
            extra += 1
    return out


_BYTES = _byte_decoder()
#: how a token's whitespace is drawn, so that it stays visible in a token strip
_VISIBLE = {"\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d"}


def readable_tokens(tokens: Sequence[str]) -> list[str]:
    """Tokens as a reader writes them: a byte-level BPE tokenizer's pieces
    (``tokenizer.convert_ids_to_tokens``: ``"ĠSC"``, ``"Ċ"``) turned back into text (``" SC"``,
    and a newline drawn as ``"↵"``); SentencePiece's ``"▁"`` becomes a space. The markers are
    recognised only where the sequence has GPT-2's space or newline marker (``Ġ``, ``Ċ``) or
    SentencePiece's, so plain text with such letters is left alone. A piece that holds part of
    a multi-byte character shows the replacement character ``"�"`` for the missing part."""
    tokens = [str(t) for t in tokens]
    byte_level = any(("\u0120" in t or "\u010a" in t) for t in tokens)
    sentencepiece = not byte_level and any("\u2581" in t for t in tokens)
    out = []
    for t in tokens:
        if byte_level and all(c in _BYTES for c in t):
            t = bytes(_BYTES[c] for c in t).decode("utf-8", errors="replace")
        elif sentencepiece:
            t = t.replace("\u2581", " ")
        out.append("".join(_VISIBLE.get(c, c) for c in t))
    return out


# CircuitsVis's chart library marks each attention canvas role="img" and names none of them, so
# a screen reader announces a row of unnamed images (axe-core's "role-img-alt", serious). Each is
# named after the head heading the box it sits in, as it is drawn (React draws them after
# render returns, and again when the reader picks another head).
_NAME_CANVASES = ("(function (id) { var root = document.getElementById(id); function name() { "
                  "root.querySelectorAll('canvas[role=img]:not([aria-label])').forEach(function (c) { "
                  "var box = c.parentElement, h = null; "
                  "while (box && box !== root && !(h = box.querySelector('h3, h4'))) box = box.parentElement; "
                  "c.setAttribute('aria-label', 'attention pattern' + (h ? ' of ' + h.textContent.trim() : '')); }); } "
                  "new MutationObserver(name).observe(root, { childList: true, subtree: true }); name(); })")


def attention_pattern_view(
    tokens: Sequence[str],
    pattern: torch.Tensor,
    head_names: Sequence[str] | None = None,
    *,
    causal: bool = True,
    decimals: int = 3,
):
    """CircuitsVis's attention-heads view of ``pattern`` [head, query, key] over ``tokens``.

    Shows one thumbnail per head and the selected head full size, hovering a token to see
    where it attends. ``head_names`` label the heads (default ``"head 0"``, ...); ``causal``
    greys out the future (the upper triangle). Values are rounded to ``decimals`` places so
    the output is small and the same on every machine. ``tokens`` may be a tokenizer's raw
    pieces: they are shown as text (:func:`readable_tokens`). Returns an ``IPython.display.HTML``:
    make it a cell's last expression (or ``display`` it).
    """
    from IPython.display import HTML

    pattern = torch.as_tensor(pattern).detach().to("cpu", torch.float64)
    tokens = readable_tokens(tokens)
    if pattern.ndim != 3:
        raise ValueError(f"pattern must be [head, query, key], got shape {tuple(pattern.shape)}")
    n_heads, n_q, n_k = pattern.shape
    if n_q != n_k or n_k != len(tokens):
        raise ValueError(f"pattern {tuple(pattern.shape)} does not match {len(tokens)} tokens: "
                         "expected [head, n_tokens, n_tokens]")
    if head_names is None:
        head_names = [f"head {h}" for h in range(n_heads)]
    head_names = [str(h) for h in head_names]
    if len(head_names) != n_heads:
        raise ValueError(f"{len(head_names)} head names for {n_heads} heads")
    if not torch.isfinite(pattern).all():
        raise ValueError("pattern has non-finite entries")

    values = [[[round(float(x), decimals) + 0.0 for x in row] for row in head] for head in pattern.tolist()]
    props = {"attention": values, "tokens": tokens, "attentionHeadNames": head_names,
             "maxValue": 1, "minValue": 0, "maskUpperTri": bool(causal)}
    props_json = _script_json(props)
    digest = hashlib.sha256(props_json.encode()).hexdigest()[:12]
    _ids[digest] += 1  # the same view shown twice in one run still gets distinct ids
    div_id = f"circuitbook-cv-{digest}-{_ids[digest]}"
    script = _LOADER % {
        "cdn": _script_json(CDN_BUNDLE), "site": _script_json(SITE_BUNDLE), "name": _script_json("CircuitsVis"),
        "id": _script_json(div_id),
        "then": f'function (cv) {{ cv.render({_script_json(div_id)}, cv["AttentionHeads"], {props_json}); '
                f'{_NAME_CANVASES}({_script_json(div_id)}); }}',
    }
    label = html.escape(f"attention patterns of {n_heads} head(s) over {len(tokens)} tokens")
    body = (f"<style>{_CSS}</style>\n"
            f'<div id="{div_id}" class="circuitbook-circuitsvis" data-component="AttentionHeads" '
            f'aria-label="{label}" style="margin: 15px 0; min-height: 40px"></div>\n'
            f"<script>\n{script}\n</script>")
    return HTML(body)


# --------------------------------------------------------------------------- heatmaps (plotly)

#: where plotly.js lives on the site, relative to its ``_static/`` folder
PLOTLY_SITE_BUNDLE = "plotly/plotly.min.js"


def plotly_cdn_bundle() -> str:
    """plotly's CDN URL of the plotly.js that the installed plotly package ships (and the site serves)."""
    from plotly.offline import get_plotlyjs_version

    return f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"


def _unique(labels: Sequence, n: int, axis: str) -> list[str]:
    """Labels as strings, one per row or column; a label that repeats (a token seen twice) gets
    its index appended, since plotly merges equal category names into one."""
    labels = [str(x) for x in labels]
    if len(labels) != n:
        raise ValueError(f"{len(labels)} {axis} labels for {n} {axis}s")
    seen = Counter(labels)
    return [f"{x} [{i}]" if seen[x] > 1 else x for i, x in enumerate(labels)]


# The figure follows the page: dark colours where the book's site (pydata-sphinx-theme's
# data-theme) or JupyterLab (data-jp-theme-light) is dark; where it is narrower than 640 px (a
# phone), smaller titles, and the legend and colour bar laid out under the plot instead of
# beside it; drawn anew when either changes. At every width its labels are kept apart: each
# axis makes room for its labels (automargin), the titles are broken into lines that fit
# (fitTitles), a legend placed by hand goes under the plot, and a side panel moves clear of
# what is beside it (clearSides). tests/browser/test_figures.py checks every figure of the site
# at 1280 and 390 px, light and dark.
# The figure's own JSON is left as written (JupyterLab's plotly renderer draws that one).
_PLOTLY_THEME = """(function () {
  var NARROW = 640, INK = "#d8dce0", GRID = "#3a3f44";
  function dark() {
    var root = document.documentElement, body = document.body;
    if (root.dataset.theme) return root.dataset.theme === "dark";
    if (body && body.dataset.jpThemeLight) return body.dataset.jpThemeLight === "false";
    return false;
  }
  function copy(o) { return JSON.parse(JSON.stringify(o || {})); }
  var FAMILY = '"Open Sans", verdana, arial, sans-serif', LINE = 1.3, BR = new RegExp("<br */?>", "i"), pen = null;
  function textWidth(text, size, family) {  // as the browser draws it, in px
    pen = pen || document.createElement("canvas").getContext("2d");
    pen.font = size + "px " + (family || FAMILY);
    return pen.measureText(String(text).replace(/<[^>]*>/g, "")).width;
  }
  function fit(text, px, size, family) {  // lines no wider than px, broken between words
    var out = [];
    String(text).split(BR).forEach(function (piece) {
      if (/<[^>]*>/.test(piece)) { out.push(piece); return; }  // styled text is left whole
      var lines = [""];
      piece.split(" ").forEach(function (w) {
        var last = lines.length - 1, joined = lines[last] ? lines[last] + " " + w : w;
        if (lines[last] && textWidth(joined, size, family) > px) lines.push(w);
        else lines[last] = joined;
      });
      out = out.concat(lines);
    });
    return out;
  }
  // Titles that fit: the figure's title broken into lines as wide as the figure, each subplot's
  // title and each bottom axis's title as wide as its subplot (side by side at 390 px, or three
  // abreast at 1280, they ran into each other and past the figure's edges), smaller on a
  // phone; the title at the top and the subplot titles under it, with the top margin they need.
  function fitTitles(L, M, width, narrow, data) {
    var family = (L.font && L.font.family) || FAMILY, base = (L.font && L.font.size) || 12;
    // the left margin plotly will make for the first y axis's tick labels and title
    var left = M.l, ya = L.yaxis || {}, labels = (ya.ticktext || []).map(String);
    (data || []).forEach(function (t) {
      if ((t.yaxis || "y") === "y" && Array.isArray(t.y)) {
        t.y.forEach(function (v) { if (typeof v === "string") labels.push(v); });
      }
    });
    if (labels.length && ya.showticklabels !== false) {
      var tick = (ya.tickfont && ya.tickfont.size) || base, widest = 0;
      labels.forEach(function (v) { widest = Math.max(widest, textWidth(v, tick, family)); });
      var yt = ya.title && ya.title.text ? ((ya.title.font && ya.title.font.size) || Math.round(1.2 * base)) * LINE + 8 : 0;
      left = Math.max(left, widest + 10 + yt);
    }
    var plotW = Math.max(80, width - left - M.r), top = 0, heads = 0;
    var title = L.title && L.title.text;
    if (title) {
      var size = (L.title.font && L.title.font.size) || Math.round(base * 1.4);
      if (narrow) size = Math.min(size, 12);
      var lines = fit(title, width - 24, size, family);
      L.title = Object.assign({}, L.title, { text: lines.join("<br>"), y: 1, yref: "container", yanchor: "top",
                                             pad: { t: 8 }, font: Object.assign({}, L.title.font, { size: size }) });
      top = 8 + lines.length * size * LINE;
    }
    var domains = Object.keys(L).filter(function (k) { return /^xaxis[0-9]*$/.test(k); }).map(function (k) {
      return { key: k, d: L[k].domain || [0, 1] };
    });
    var yTop = 0;
    Object.keys(L).forEach(function (k) { if (/^yaxis[0-9]*$/.test(k)) yTop = Math.max(yTop, (L[k].domain || [0, 1])[1]); });
    function within(x) {  // the narrowest subplot column over x (paper coordinates)
      var hits = domains.filter(function (c) { return c.d[0] - 1e-6 <= x && x <= c.d[1] + 1e-6; });
      hits.sort(function (p, q) { return (p.d[1] - p.d[0]) - (q.d[1] - q.d[0]); });
      return hits.length ? hits[0].d : [0, 1];
    }
    (L.annotations || []).forEach(function (a) {  // subplot titles: on the paper, with no arrow
      if (a.xref !== "paper" || a.yref !== "paper" || a.showarrow !== false || typeof a.text !== "string") return;
      var size = (a.font && a.font.size) || base, d = within(a.x);
      if (narrow) size = Math.min(size, 12);
      var lines = fit(a.text, (d[1] - d[0]) * plotW, size, family);
      a.text = lines.join("<br>");
      a.font = Object.assign({}, a.font, { size: size });
      if (a.y >= yTop - 0.01 && a.yanchor === "bottom") heads = Math.max(heads, lines.length * size * LINE + 4);
    });
    if (domains.length > 1) {
      domains.forEach(function (c) {
        var t = L[c.key].title;
        if (!t || !t.text) return;
        var size = (t.font && t.font.size) || Math.round(1.2 * base);  // plotly's default for axis titles
        L[c.key].title = Object.assign({}, t, { text: fit(t.text, (c.d[1] - c.d[0]) * plotW, size, family).join("<br>") });
      });
    }
    if (!top && !heads) return 0;
    var need = Math.ceil((top ? top + 6 : 8) + heads + 4), grow = Math.max(0, need - M.t);
    M.t += grow;
    return grow;
  }
  function layout(base, el, data) {
    var L = copy(base), width = (el && el.clientWidth) || 800;
    // every axis makes room for its tick labels and title (grows the margins), so that no label
    // is cut at the figure's edge and no axis title is pushed onto its tick labels
    var axes = {};
    Object.keys(L).forEach(function (k) { if (/^[xy]axis[0-9]*$/.test(k)) axes[k] = true; });
    (data || []).forEach(function (t) {
      axes["xaxis" + String(t.xaxis || "x").slice(1)] = true;
      axes["yaxis" + String(t.yaxis || "y").slice(1)] = true;
    });
    Object.keys(axes).forEach(function (k) {
      L[k] = Object.assign({ automargin: true }, L[k]);
    });
    if (dark()) {
      L.paper_bgcolor = "rgba(0,0,0,0)";
      L.plot_bgcolor = "rgba(0,0,0,0)";
      L.font = Object.assign({}, L.font, { color: INK });
      if (L.title && L.title.font) L.title.font.color = INK;
      L.hoverlabel = { bgcolor: "#1e2226", font: { color: "#f0f0f0" } };
      Object.keys(L).forEach(function (k) {
        if (/^[xy]axis[0-9]*$/.test(k)) {
          Object.assign(L[k], { gridcolor: GRID, zerolinecolor: GRID, linecolor: "#888", tickcolor: "#888" });
        }
      });
      (L.annotations || []).forEach(function (a) { a.font = Object.assign({}, a.font, { color: INK }); });
      (L.shapes || []).forEach(function (s) {
        if (s.line && /^(black|#000|#000000)$/i.test(String(s.line.color))) s.line.color = "#f0f0f0";
      });
      L.legend = Object.assign({}, L.legend, { bgcolor: "rgba(0,0,0,0)" });
    }
    if (el) el.circuitbookLayout = state(el);  // what this layout is for, said once it is drawn
    var narrow = width < NARROW, m;
    if (narrow) {
      m = Object.assign({ l: 60, r: 20, t: 60, b: 60 }, L.margin);
      m.l = Math.min(m.l, 48);
      m.r = Math.min(m.r, 12);
    } else {
      m = Object.assign({ l: 80, r: 80, t: 100, b: 80 }, L.margin);  // plotly's defaults
    }
    var taller = fitTitles(L, m, width, narrow, data);
    L.margin = m;
    if (taller) L.height = (L.height || 450) + taller;  // the plot keeps its height
    Object.keys(L).forEach(function (k) {  // a colour bar's title along the bar, clear of its top tick label
      var bar = /^coloraxis[0-9]*$/.test(k) && L[k].colorbar, t = bar && bar.title;
      if (t && t.text && !t.side && !narrow) bar.title = Object.assign({}, t, { side: "right" });
    });
    var legend = L.legend || {}, placed = legend.x != null || legend.y != null;
    if (!narrow && placed && L.showlegend !== false) {
      // a legend placed by hand (in a corner of a subplot, under the plot at a guessed depth)
      // goes under the plot, at the figure's foot: plotly makes room for it there. Placed by
      // hand, it lay over a subplot (chapters 9 and 12), under the axis titles, and beside a
      // colour bar plotly drew it over the heatmap (chapter 5)
      L.legend = Object.assign({}, legend, { orientation: "h", x: 0, xanchor: "left", xref: "container",
                                             y: 0, yanchor: "bottom", yref: "container" });
    }
    if (narrow) {
      // under the plot, from the bottom up: the colour bar laid flat, then the legend with one
      // entry a row (a vertical one at the right would take half a phone's width)
      var height = L.height || 450, below = 0;
      var shown = (data || []).filter(function (t) {
        return t.showlegend !== false && (t.type || "scatter") !== "heatmap";
      });
      var entries = shown.length, groups = {}, titles = 0;
      if (L.showlegend === false || (entries < 2 && L.showlegend !== true)) entries = 0;
      shown.forEach(function (t) { groups[t.legendgroup || ""] = true; });
      (data || []).forEach(function (t) { if (t.legendgrouptitle && t.legendgrouptitle.text) titles += 1; });
      // the legend's height: about 24 px a row, for each entry and each group's title, and the
      // gap plotly leaves between groups (tracegroupgap, 10 px unless set); at 20 px an entry
      // and no gaps, chapter 19's grouped legends ran 20-40 px up into the plot
      var gap = L.legend && L.legend.tracegroupgap != null ? L.legend.tracegroupgap : 10;
      var legendPx = entries ? 24 * (entries + titles) + gap * (Object.keys(groups).length - 1) : 0;
      if (L.coloraxis && L.coloraxis.colorbar) {
        L.coloraxis.colorbar = Object.assign({}, L.coloraxis.colorbar, {
          orientation: "h", thickness: 10, len: 0.9, x: 0.5, xanchor: "center", xref: "container",
          y: 4, yanchor: "bottom", yref: "container", ypad: 0,
          title: Object.assign({}, L.coloraxis.colorbar.title, { side: "top" }) });
        L.coloraxis.colorbar.y = 4 / (height + 56 + legendPx);
        below += 56;
      }
      if (entries) {
        L.legend = Object.assign({}, L.legend, { orientation: "h", x: 0, xanchor: "left", xref: "container",
                                                 y: below / (height + below + legendPx), yanchor: "bottom",
                                                 yref: "container", entrywidth: 1, entrywidthmode: "fraction" });
        below += legendPx;
      }
      m.b += below;
      L.height = height + below;
      L.margin = m;
    }
    return L;
  }
  function state(el) {  // what the layout follows: "light wide", "dark narrow", ...
    return (dark() ? "dark" : "light") + " " + ((((el && el.clientWidth) || 800) < NARROW) ? "narrow" : "wide");
  }
  // A subplot beside another (heatmap(side=...)'s side panel) needs room on its left for its
  // tick labels and axis title, clear of the plot area beside it and of a colour bar set
  // between them. Measured once drawn, the subplot moves right until they clear by 8 px (at
  // most three times, as moving it can change its labels). A share of the width guessed in
  // advance was too small in the book's column: chapter 8's bars' axis title ran under the
  // colour bar at 1280 px, chapter 5's into the heatmap at 390 px.
  function edges(nodes) {
    var lo = Infinity, hi = -Infinity;
    nodes.forEach(function (e) {
      if (e.firstElementChild || (e.tagName === "text" && !e.textContent.trim())) return;
      var r = e.getBoundingClientRect();
      if (r.width > 0 && r.height > 0) { lo = Math.min(lo, r.left); hi = Math.max(hi, r.right); }
    });
    return [lo, hi];
  }
  function clearSides(P, el, tries) {
    var L = el._fullLayout, given = el.layout || {}, update = {}, moved = false;
    var svg = el.querySelector("svg.main-svg");
    if (tries <= 0 || !L || !L._plots || !svg) return Promise.resolve();
    var F = svg.getBoundingClientRect(), plots = [];
    Object.keys(L._plots).forEach(function (k) {
      var p = L._plots[k];
      if (p.xaxis && p.yaxis && !p.yaxis.overlaying) plots.push(p);
    });
    var bars = [].slice.call(el.querySelectorAll(".infolayer g.colorbar")).map(function (g) {
      return edges([].slice.call(g.querySelectorAll("*")));
    });
    plots.forEach(function (q) {
      var xa = q.xaxis, ya = q.yaxis;
      if (ya.side === "right" || update[xa._name + ".domain"]) return;
      var beside = plots.filter(function (p) {
        return p.xaxis._id !== xa._id && p.xaxis.domain[1] <= xa.domain[0] + 1e-9
          && p.yaxis.domain[0] < ya.domain[1] && ya.domain[0] < p.yaxis.domain[1];
      });
      var labels = [].slice.call(el.querySelectorAll(".cartesianlayer g." + ya._id + "tick text, .infolayer text." + ya._id + "title"));
      var left = edges(labels)[0], areaLeft = F.left + xa._offset;
      if (!beside.length || !isFinite(left)) return;
      var wall = Math.max.apply(null, beside.map(function (p) { return F.left + p.xaxis._offset + p.xaxis._length; }));
      bars.forEach(function (b) {  // a colour bar between the two
        if (isFinite(b[0]) && b[0] >= wall - 1 && b[1] <= areaLeft + 1) wall = Math.max(wall, b[1]);
      });
      var need = wall + 8 - left;
      if (!(need > 0.5)) return;
      var d = xa.domain, start = Math.min(d[1] - 0.1, d[0] + need / L._size.w);
      update[xa._name + ".domain"] = [start, d[1]];
      (given.annotations || []).forEach(function (a, i) {  // its title stays centred over it
        if (a.xref === "paper" && Math.abs(a.x - (d[0] + d[1]) / 2) < 1e-6) update["annotations[" + i + "].x"] = (start + d[1]) / 2;
      });
      moved = true;
    });
    if (!moved) return Promise.resolve();
    return P.relayout(el, update).then(function () { return clearSides(P, el, tries - 1); });
  }
  // Drawn anew each time, not updated (Plotly.react): updated from a wide layout to a narrow
  // one, plotly kept the upright colour bar's margin for the flat one, and the plot area's
  // height went below zero ("Something went wrong with axis scaling"). Once drawn, the figure
  // says which layout it has (data-layout), and its inner SVGs are hidden from screen readers:
  // the figure is one image, named by the element's aria-label.
  function drawn(el, P) {
    return (P ? clearSides(P, el, 3) : Promise.resolve()).then(function () {
      el.querySelectorAll("svg").forEach(function (s) { s.setAttribute("aria-hidden", "true"); });
      el.setAttribute("data-layout", el.circuitbookLayout);
    });
  }
  function draw(P, el, f) {
    return P.newPlot(el, f.data, layout(f.layout, el, f.data), f.config).then(function () { return drawn(el, P); });
  }
  function follow(P, el, f) {
    // drawn anew for another theme or layout, or 40 px more or less room (the titles' lines
    // and the side panel's place are measured for a width)
    var last = el.circuitbookLayout, wide = el.clientWidth, pending = null;
    function redo() {
      if (state(el) === last && Math.abs(el.clientWidth - wide) < 40) return;
      last = state(el);
      wide = el.clientWidth;
      draw(P, el, f);
    }
    function soon() { clearTimeout(pending); pending = setTimeout(redo, 150); }
    new MutationObserver(soon).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    if (document.body) {
      new MutationObserver(soon).observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light"] });
    }
    window.addEventListener("resize", soon);
  }
  return { layout: layout, drawn: drawn, follow: follow };
})()"""


def _plain(text) -> str:
    """Text as a screen reader should read it: plotly's line breaks and tags gone."""
    return " ".join(re.sub(r"<[^>]*>", " ", str(text or "")).split())


def figure_label(layout: dict) -> str:
    """The name a screen reader reads for a figure (its element's ``aria-label``): its title, else
    its subplots' titles, with what its axes show ("query position by key position"); never
    empty. A figure with no title was named by nothing (an empty ``aria-label``)."""
    title = _plain((layout.get("title") or {}).get("text"))
    panels = [_plain(a.get("text")) for a in layout.get("annotations") or ()
              if a.get("xref") == "paper" and a.get("yref") == "paper" and a.get("showarrow") is False]
    name = title or "; ".join(p for p in panels if p)

    def axis_title(key):
        return _plain(((layout.get(key) or {}).get("title") or {}).get("text"))

    x, y = axis_title("xaxis"), axis_title("yaxis")
    axes = f"{y} by {x}" if x and y else x or y
    label = f"{name}: {axes}" if name and axes else name or axes
    return label or "plotly figure"


class Heatmap:
    """A plotly figure (``.figure``, a ``plotly.graph_objects.Figure``) that displays the same
    everywhere: plotly's JSON for JupyterLab and HTML that loads plotly.js from the book's
    site (or plotly's CDN off the site). Make it a cell's last expression, or ``display`` it."""

    def __init__(self, figure):
        self.figure = figure

    def to_dict(self) -> dict:
        """The figure as plotly.js takes it: ``data``, ``layout`` and ``config``."""
        fig = self.figure.to_plotly_json()
        return {"data": fig["data"], "layout": fig["layout"],
                "config": {"responsive": True, "displaylogo": False}}

    def _repr_mimebundle_(self, include=None, exclude=None):
        fig = self.to_dict()
        fig_json = _script_json(fig)
        digest = hashlib.sha256(fig_json.encode()).hexdigest()[:12]
        _ids[digest] += 1
        div_id = f"circuitbook-plotly-{digest}-{_ids[digest]}"
        script = _LOADER % {
            "cdn": _script_json(plotly_cdn_bundle()), "site": _script_json(PLOTLY_SITE_BUNDLE),
            "name": _script_json("Plotly"), "id": _script_json(div_id),
            "then": (f"function (P) {{\n  var el = document.getElementById({_script_json(div_id)}), T = {_PLOTLY_THEME};\n"
                     f"  var f = {fig_json}; P.newPlot(el, f.data, T.layout(f.layout, el, f.data), f.config)"
                     ".then(function () { return T.drawn(el, P); }).then(function () { T.follow(P, el, f); });\n}"),
        }
        title = (fig["layout"].get("title") or {}).get("text", "heatmap")
        label = html.escape(figure_label(fig["layout"]), quote=True)
        height = fig["layout"].get("height", 450)
        body = (f'<div id="{div_id}" class="circuitbook-plotly" role="figure" aria-label="{label}" '
                f'style="width: 100%; max-width: 100%; min-height: {height}px"></div>\n'
                f"<script>\n{script}\n</script>")
        bundle = {"application/vnd.plotly.v1+json": json.loads(fig_json), "text/html": body,
                  "text/plain": f"<heatmap: {title}>"}
        return {k: v for k, v in bundle.items() if (not include or k in include) and k not in (exclude or ())}


def heatmap(
    z,
    x_labels: Sequence,
    y_labels: Sequence,
    *,
    title: str = "",
    panel_titles: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    zmin: float | None = None,
    zmax: float | None = None,
    zmid: float | None = None,
    colorscale: str | Sequence = "Blues",
    value_format: str = ".3f",
    outline: Sequence[tuple[int, int]] = (),
    side: Sequence = (),
    side_title: str = "",
    side_width: float = 0.4,
) -> Heatmap:
    """A heatmap of ``z`` [row, col], or of ``z`` [panel, row, col] side by side on one colour
    scale, whose hover names the row (``y_labels[i]``), the column (``x_labels[j]``) and the
    value ``z[i, j]`` (formatted with ``value_format``, a d3 format). Row 0 is at the top, as
    in ``plt.imshow``. NaN cells are left blank. ``zmid`` alone centres the scale on it;
    ``colorscale`` is a plotly name (``"RdBu_r"``) or a list of ``[fraction, colour]``.
    ``outline`` lists cells ``(i, j)`` to draw a black box around, in every panel.
    ``side`` holds plotly traces (a bar chart, lines) for one more panel on the right, with
    its own axes (``side_title`` above it, ``side_width`` its width relative to a heatmap
    panel's); style its axes through ``.figure.update_xaxes(..., col=-1)`` and so on. For grids indexed by tokens or by (layer,
    head) with more rows or columns than fit as tick labels (chapters 5, 8, 9, 12, 16, 17, 18 and
    the induction problems). Returns a :class:`Heatmap`; its ``.figure`` is the plotly figure.
    """
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    values = torch.as_tensor(z).detach().to("cpu", torch.float64)
    if values.ndim == 2:
        values = values[None]
    if values.ndim != 3:
        raise ValueError(f"z must be [row, col] or [panel, row, col], got shape {tuple(values.shape)}")
    n_panels, n_rows, n_cols = values.shape
    if torch.isinf(values).any():
        raise ValueError("z has infinite entries")
    xs, ys = _unique(x_labels, n_cols, "column"), _unique(y_labels, n_rows, "row")
    panel_titles = list(panel_titles) if panel_titles is not None else [""] * n_panels
    if len(panel_titles) != n_panels:
        raise ValueError(f"{len(panel_titles)} panel titles for {n_panels} panels")
    finite = values[~values.isnan()]
    if finite.numel() == 0:
        raise ValueError("z has no finite entries")
    lo = float(finite.min()) if zmin is None else zmin
    hi = float(finite.max()) if zmax is None else zmax
    if zmid is not None and zmin is None and zmax is None:
        half = max(abs(lo - zmid), abs(hi - zmid))
        lo, hi = zmid - half, zmid + half

    titles = panel_titles + ([side_title] if side else [])
    n_cols_total = n_panels + (1 if side else 0)
    fig = make_subplots(rows=1, cols=n_cols_total, horizontal_spacing=0.16 if side else 0.04,
                        column_widths=[1.0] * n_panels + ([side_width] if side else []),
                        subplot_titles=titles if any(titles) else None)
    hover = (f"{y_title or 'row'}: %{{y}}<br>{x_title or 'column'}: %{{x}}<br>"
             f"value: %{{z:{value_format}}}<extra></extra>")
    for p in range(n_panels):
        # 4 significant digits: the hover shows 3; NaN (JSON has none) is a blank cell
        cells = [[None if v != v else float(f"{v:.4g}") for v in row] for row in values[p].tolist()]
        fig.add_trace(go.Heatmap(z=cells, x=xs, y=ys, coloraxis="coloraxis", hovertemplate=hover,
                                 name=panel_titles[p] or title, xgap=0, ygap=0), row=1, col=p + 1)
        fig.update_xaxes(type="category", title_text=x_title, automargin=True, row=1, col=p + 1)
        axis = "" if p == 0 else str(p + 1)
        for i, j in outline:  # category axes place cell j at j, so its box is j +- 0.5
            fig.add_shape(type="rect", x0=j - 0.5, x1=j + 0.5, y0=i - 0.5, y1=i + 0.5,
                          xref=f"x{axis}", yref=f"y{axis}", line={"color": "black", "width": 1.5})
    for p in range(n_panels):  # the heatmap panels share one row axis, row 0 on top
        fig.update_yaxes(type="category", autorange="reversed", row=1, col=p + 1, automargin=True,
                         matches="y" if p else None, showticklabels=p == 0)
    fig.update_yaxes(title_text=y_title, row=1, col=1)
    for trace in side:
        fig.add_trace(trace, row=1, col=n_cols_total)
    colorbar = {"thickness": 12}
    if side:  # the colour bar goes beside the heatmaps, not beyond the side panel
        last = fig.layout[f"xaxis{n_panels if n_panels > 1 else ''}"]
        colorbar["x"] = last.domain[1] + 0.01
    fig.update_layout(
        template="none", title={"text": title, "x": 0.5, "xanchor": "center", "font": {"size": 14}},
        coloraxis={"colorscale": colorscale, "cmin": lo, "cmax": hi, "colorbar": colorbar},
        height=int(min(720, max(320, 14 * n_rows + 140))), margin={"l": 60, "r": 20, "t": 60, "b": 60},
        paper_bgcolor="white", plot_bgcolor="white", font={"color": "#222", "size": 11},
        hoverlabel={"bgcolor": "white", "font": {"color": "#111"}},
    )
    return Heatmap(fig)
