"""Fixes to the HTML that jupyter-book 1.0.4 (Sphinx 7.4, sphinx-book-theme 1.2) writes, each
found by the browser tests (tests/browser), and the site's own stylesheet.

- **Inline scripts included twice.** Extensions that add an inline script (``add_js_file(None,
  body=...)``) after the builder starts, as sphinx-thebe and sphinx-togglebutton do, get it
  written twice: Sphinx records it once as ``None`` and once as ``''``, which compare unequal.
  The second ``const THEBE_JS_URL = ...`` then throws "Identifier 'THEBE_JS_URL' has already
  been declared" on every page. We drop exact repeats (same file or body, same attributes).
- **The site's stylesheet** (``scripts/site_static/circuitbook-site.css``): code cells 79
  characters wide at desktop width, no sideways scroll on a phone, the claim records, the
  exercises and CircuitsVis in both colour themes.
- **The widget renderer loads when a widget comes near.** On a page with saved widgets,
  myst-nb puts require.js, our require config and the 4.4 MB ipywidgets HTML manager in the
  head. We replace the three with a small inline loader that fetches them, in order, when the
  first widget view comes within a screen or so of the viewport (``embed-amd.js`` renders at
  once when it arrives after the page's load event).
- **Font Awesome as the few icons the site shows.** pydata-sphinx-theme loads
  ``fontawesome.js`` (1.49 MB: every icon of three styles, as JavaScript that swaps ``<i>``
  for ``<svg>``) on every page. After the build we list the icon classes that the pages and
  the theme's scripts use, and write ``_static/circuitbook-icons.css``: each of those icons as
  a CSS mask of its own SVG path, taken from that same ``fontawesome.js`` (a few KB). The
  script and its preload go from every page.
- **Live Code says what it needs, and loads thebe from the site.** sphinx-thebe loads thebe
  from unpkg when the button is pressed ("Loading thebe from CDN..." hangs offline). We serve
  thebe from ``_static/thebe/`` (vendored, pinned, by scripts/vendor_assets.py), and the button
  and its messages say that the code runs on mybinder.org, an online service.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

STATIC = Path(__file__).resolve().parent / "site_static"
WIDGET_SCRIPTS = ("widgets/require.js", "widgets/widgets-config.js", "widgets/embed-amd.js")
THEBE_SITE = "_static/thebe/index.js"
LIVE_CODE_LABEL = "Live code (mybinder.org)"
LIVE_CODE_TITLE = ("Run this page's code on mybinder.org, a free online service: it needs the internet "
                   "and can take a minute to start")
THEBE_LOADING = "Starting live code: connecting to mybinder.org (needs the internet)..."


def _key(js) -> tuple:
    attributes = getattr(js, "attributes", {}) or {}
    return (getattr(js, "filename", js) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))


def dedupe_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        key = _key(js)
        if key not in seen:
            seen.add(key)
            unique.append(js)
    scripts[:] = unique


_LAZY_WIDGETS = """(function () {
  // the widget renderer (require.js, its config, the ipywidgets HTML manager), fetched in order
  // when a widget view comes within a screen or so of the viewport
  var urls = %s, started = false;
  function start() {
    if (started) return;
    started = true;
    (function next(i) {
      if (i >= urls.length) return;
      var s = document.createElement("script");
      s.src = urls[i];
      s.onload = function () { next(i + 1); };
      s.onerror = function () { console.error("could not load " + urls[i]); };
      document.head.appendChild(s);
    })(0);
  }
  function watch() {
    var views = document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]');
    if (!views.length || !window.IntersectionObserver) return start();
    var seen = new IntersectionObserver(function (entries) {
      if (!entries.some(function (e) { return e.isIntersecting; })) return;
      seen.disconnect();
      start();
    }, { rootMargin: "1200px 0px" });
    views.forEach(function (v) { seen.observe(v.parentElement); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
})();"""


def lazy_widgets_and_local_thebe(app, pagename, templatename, context, doctree) -> None:
    from sphinx.builders.html._assets import _JavaScript

    scripts = context.get("script_files")
    if not scripts:
        return
    pathto = context["pathto"]
    widget_urls, out = {}, []
    for js in scripts:
        filename = getattr(js, "filename", "") or ""
        body = (getattr(js, "attributes", {}) or {}).get("body", "")
        name = next((w for w in WIDGET_SCRIPTS if filename.endswith(w)), None)
        if name:
            widget_urls[name] = pathto(filename, resource=True)
            continue
        if "const THEBE_JS_URL" in body:
            body = re.sub(r'const THEBE_JS_URL = "[^"]*"',
                          f"const THEBE_JS_URL = {json.dumps(pathto(THEBE_SITE, resource=True))}", body)
            js = _JavaScript(None, body=body, priority=js.priority)
        out.append(js)
    if widget_urls:
        ordered = [widget_urls[w] for w in WIDGET_SCRIPTS if w in widget_urls]
        out.append(_JavaScript(None, body=_LAZY_WIDGETS % json.dumps(ordered), priority=500))
    scripts[:] = out


# --------------------------------------------------------------------------- Font Awesome

# an icon: "name":[width,height,[aliases],"unicode","path" or ["path",...]]; minified, a name
# that is a valid identifier has no quotes
_ICON = re.compile(r'(?:"([a-z0-9-]+)"|\b([a-z][a-z0-9]*)):\[(\d+),(\d+),\[[^\]]*\],"([0-9a-f]+)",'
                   r'("(?:[^"\\]|\\.)*"|\[[^\]]*\])\]')
_FA_STYLES = {"fa-solid": "solid", "fas": "solid", "fa-regular": "regular", "far": "regular",
              "fa-brands": "brands", "fab": "brands"}
_FA_HELPERS = {"fa-lg", "fa-fw", "fa-xs", "fa-sm", "fa-2x", "fa-spin", "fa-w-14"}


def fontawesome_packs(js: str) -> dict[str, dict[str, tuple[int, int, str]]]:
    """The icon packs of pydata-sphinx-theme's ``fontawesome.js``: style -> {name: (width,
    height, SVG path)}. The file defines each pack as one run of ``"name":[w,h,[aliases],
    "unicode","path"]`` entries; the brands pack holds ``github``, and of the other two the
    regular pack is the smaller."""
    runs: list[dict] = []
    last_end = None
    for m in _ICON.finditer(js):
        if last_end is None or m.start() != last_end + 1:  # entries of one pack are comma-separated
            runs.append({})
        path = json.loads(m.group(6))
        runs[-1][m.group(1) or m.group(2)] = (int(m.group(3)), int(m.group(4)),
                                               " ".join(path) if isinstance(path, list) else path)
        last_end = m.end()
    runs = [r for r in runs if len(r) > 20]
    brands = next(r for r in runs if "github" in r)
    others = sorted((r for r in runs if r is not brands), key=len)
    return {"brands": brands, "regular": others[0], "solid": others[-1]}


def icons_used(texts: list[str]) -> set[tuple[str, str]]:
    """(style, name) of every Font Awesome icon named in the class lists of ``texts`` (HTML and
    the theme's scripts); an icon with no style class is solid, Font Awesome's default."""
    out = set()
    for text in texts:
        for classes in re.findall(r'class(?:Name)?\s*[=:]\s*["\']([^"\']*\bfa-[^"\']*)["\']', text):
            words = classes.split()
            style = next((_FA_STYLES[w] for w in words if w in _FA_STYLES), "solid")
            for w in words:
                if w.startswith("fa-") and len(w) > 3 and w not in _FA_STYLES and w not in _FA_HELPERS:
                    out.add((style, w[3:]))
    return out


def icon_css(packs, used: set[tuple[str, str]]) -> str:
    from urllib.parse import quote

    rules = [
        "/* The Font Awesome icons this site shows, each as a mask of its SVG path (taken from the\n"
        "   fontawesome.js of pydata-sphinx-theme, Font Awesome Free: icons CC BY 4.0). Written by\n"
        "   scripts/sphinx_site_fixes.py. */",
        ".fa-solid::before,.fas::before,.fa-regular::before,.far::before,.fa-brands::before,.fab::before"
        "{content:\"\";display:inline-block;width:1em;height:1em;background-color:currentColor;"
        "-webkit-mask:var(--cb-icon) no-repeat center/contain;mask:var(--cb-icon) no-repeat center/contain;"
        "vertical-align:-0.125em}",
        ".fa-lg{font-size:1.25em;line-height:.05em;vertical-align:-.075em}",
        ".fa-fw{text-align:center;width:1.25em}",
    ]
    selectors = {"solid": (".fa-solid", ".fas"), "regular": (".fa-regular", ".far"), "brands": (".fa-brands", ".fab")}
    missing = []
    for style, name in sorted(used):
        icon = packs[style].get(name) or (packs["solid"].get(name) if style != "solid" else None)
        if icon is None:
            missing.append(f"{style} {name}")
            continue
        w, h, path = icon
        svg = f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}"><path d="{path}"/></svg>'
        sel = ",".join(f"{s}.fa-{name}::before" for s in selectors[style])
        rules.append(f'{sel}{{--cb-icon:url("data:image/svg+xml,{quote(svg)}");width:{w / h:.4g}em}}')
    return "\n".join(rules) + "\n", missing


_FA_TAGS = re.compile(r'\s*<script src="[^"]*_static/scripts/fontawesome\.js[^"]*"></script>'
                      r'|\s*<!-- So that users can add custom icons -->')


def replace_fontawesome(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from sphinx.util import logging

    out = Path(app.outdir)
    fa = out / "_static" / "scripts" / "fontawesome.js"
    if not fa.exists():
        return
    pages = sorted(out.rglob("*.html"))
    scripts = [p.read_text(errors="replace") for p in (out / "_static").rglob("*.js")
               if "fontawesome" not in p.name and p.stat().st_size < 2_000_000]
    texts = [p.read_text() for p in pages]
    css, missing = icon_css(fontawesome_packs(fa.read_text()), icons_used(texts + scripts))
    if missing:
        logging.getLogger(__name__).warning(f"site icons: no Font Awesome icon for {missing}")
    (out / "_static" / "circuitbook-icons.css").write_text(css)
    for page, text in zip(pages, texts):
        rel = Path(*[".."] * (len(page.relative_to(out).parts) - 1), "_static", "circuitbook-icons.css").as_posix()
        new = _FA_TAGS.sub("", text)
        new = new.replace("</head>", f'  <link rel="stylesheet" href="{rel}" />\n</head>', 1)
        new = re.sub(r'(<span class="btn__text-container">)Live Code(</span>)', rf"\g<1>{LIVE_CODE_LABEL}\g<2>", new)
        new = new.replace('title="Launch Thebe"', f'title="{LIVE_CODE_TITLE}"')
        # thebe would fetch MathJax 2 from cdnjs to typeset live LaTeX outputs: off (the
        # chapters' outputs are HTML and figures; the page's own math is typeset already)
        new = new.replace("predefinedOutput: true\n", 'predefinedOutput: true,\n        mathjaxUrl: ""\n')
        if new != text:
            page.write_text(new)
    fa.unlink()  # nothing loads it any more
    for extra in ("fontawesome.js.map", "fontawesome.js.LICENSE.txt"):
        (fa.parent / extra).unlink(missing_ok=True)
    thebe = out / "_static" / "sphinx-thebe.js"
    if thebe.exists():
        text = thebe.read_text()
        thebe.write_text(text.replace("Loading thebe from CDN...", THEBE_LOADING)
                         .replace("Launching from mybinder.org: ", "mybinder.org (needs the internet): "))


def add_static(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", add_static)
    app.add_css_file("circuitbook-site.css")
    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("html-page-context", lazy_widgets_and_local_thebe, priority=910)
    app.connect("build-finished", replace_fontawesome)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}
