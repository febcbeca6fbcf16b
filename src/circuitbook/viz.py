"""Attention patterns drawn by CircuitsVis, with its JavaScript bundle served once per site.

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
back to a plain script tag; the bundle's UMD parts take their CommonJS branch first there.)
"""

from __future__ import annotations

import hashlib
import html
import json
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
  var CDN = %(cdn)s, SITE = %(site)s;
  function bundleUrl() {
    // on the book's site every page loads _static/documentation_options.js: serve from there
    var s = document.querySelector('script[src*="_static/documentation_options.js"]');
    return s ? s.src.replace(/documentation_options\\.js.*$/, SITE) : CDN;
  }
  function viaTag(url, resolve, reject) {
    var tag = document.createElement("script");
    tag.onload = function () { resolve(window.CircuitsVis); };
    tag.onerror = function () { reject(new Error("circuitsvis: could not load " + url)); };
    tag.src = url;
    document.head.appendChild(tag);
  }
  function load() {
    if (window.CircuitsVis) return Promise.resolve(window.CircuitsVis);
    if (!window.__circuitbookCircuitsVis) {
      var url = bundleUrl();
      window.__circuitbookCircuitsVis = new Promise(function (resolve, reject) {
        if (!window.fetch || url.indexOf("file:") === 0) return viaTag(url, resolve, reject);
        fetch(url).then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        }).then(function (code) {
          // evaluated with `define` undefined: nothing in it can talk to require.js
          var cv = new Function("define", code + "\\n;return CircuitsVis;")(undefined);
          window.CircuitsVis = cv;
          resolve(cv);
        }).catch(function () { viaTag(url, resolve, reject); });
      });
    }
    return window.__circuitbookCircuitsVis;
  }
  load().then(function (cv) {
    cv.render(%(id)s, cv[%(component)s], %(props)s);
  }).catch(function (e) {
    var el = document.getElementById(%(id)s);
    if (el) el.textContent = String(e);
    console.error(e);
  });
})();"""

# CircuitsVis sizes its head thumbnails by the window's width, not the column's: in the book's
# narrow column they are small, and the theme's large headings would spill over them.
_CSS = (".circuitbook-circuitsvis h3{font-size:1.05rem;margin:.6rem 0}"
        ".circuitbook-circuitsvis h4{font-size:.7rem;line-height:1.15;max-width:100%;overflow-wrap:anywhere}")

_ids: Counter = Counter()


def _script_json(value) -> str:
    """JSON safe inside an inline <script> element."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")


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
    the output is small and the same on every machine. Returns an ``IPython.display.HTML``:
    make it a cell's last expression (or ``display`` it).
    """
    from IPython.display import HTML

    pattern = torch.as_tensor(pattern).detach().to("cpu", torch.float64)
    tokens = [str(t) for t in tokens]
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
        "cdn": _script_json(CDN_BUNDLE), "site": _script_json(SITE_BUNDLE), "id": _script_json(div_id),
        "component": _script_json("AttentionHeads"), "props": props_json,
    }
    label = html.escape(f"attention patterns of {n_heads} head(s) over {len(tokens)} tokens")
    body = (f"<style>{_CSS}</style>\n"
            f'<div id="{div_id}" class="circuitbook-circuitsvis" data-component="AttentionHeads" '
            f'aria-label="{label}" style="margin: 15px 0; min-height: 40px"></div>\n'
            f"<script>\n{script}\n</script>")
    return HTML(body)
