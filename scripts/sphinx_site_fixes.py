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
  for ``<svg>``) on every page, though its stylesheet already draws the same icons from Font
  Awesome's web fonts (``.fa-bars:before{content:"\\f0c9"}``), which then cost 300 KB more.
  After the build we drop the script (and its preload) from every page, list the icons the
  pages, the themes' scripts and the themes' stylesheets use, cut the three fonts down to
  them with fontTools, and point the font faces at the cut fonts
  (``_static/circuitbook-icons.css``): a few KB in all.
- **Live Code says what it needs, and loads thebe from the site.** sphinx-thebe loads thebe
  from unpkg when the button is pressed ("Loading thebe from CDN..." hangs offline). We serve
  thebe from ``_static/thebe/`` (vendored, pinned, by scripts/vendor_assets.py), and the button
  and its messages say that the code runs on mybinder.org, an online service; offline, its
  message says so and its spinner stops (the stylesheet lets the button grow to hold it).
- **What a screen reader is told** (axe-core's findings, tests/browser/test_a11y.py; all in
  :func:`accessible_names`): a fold's summary and the search button are named by their visible
  text, the sidebar's expanders by the page whose entries they show; a long signature's
  parameter lines are <div>s, not a <dl> with no terms; the bibliography's entries are list
  items. The stylesheet gives the toolbar's buttons a focus ring, keeps the search field's
  magnifier beside the query, and fades the tables' stripes enough for their links to read.
"""

from __future__ import annotations

import html as html_lib
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
# appended to sphinx-thebe.js: thebe 0.9 reports an unreachable mybinder.org only as an
# unhandled rejection, and the button would say "launching" for ever
THEBE_OFFLINE = """
window.addEventListener("unhandledrejection", function (event) {
  if (String(event.reason).indexOf("mybinder.org") < 0) return;
  event.preventDefault();
  var text = document.querySelector(".thebe-launch-button .loading-text") ||
             document.querySelector(".thebe-launch-button");
  if (text) text.textContent = "Could not reach mybinder.org: live code needs the internet. " +
                               "The page's outputs are the ones computed when the book was built.";
  var button = document.querySelector(".thebe-launch-button");
  if (button) button.classList.add("cb-thebe-failed");  // the site's stylesheet stops the spinner
});
"""


# What a screen reader says for a control must contain what the control shows (WCAG 2.5.3,
# axe-core's label-content-name-mismatch): myst-nb names every fold's <summary> "Toggle hidden
# content" over its visible "Show code cell source" (or the exercises' "Show the solution and its
# check"), and pydata-sphinx-theme names its search field's button "Search" over its visible
# "Search Ctrl+K". Without the aria-label, each is named by the text it shows.
# And docutils marks each entry of the bibliography role="doc-biblioentry", a role DPUB-ARIA 1.1
# deprecated, so that its list (role="list") holds no list items (axe-core's aria-required-children):
# listitem, which the deprecation names in its place.
_NAME_FIXES = [
    (re.compile(r'<summary aria-label="Toggle hidden content">'), "<summary>"),
    (re.compile(r'(<button class="btn search-button-field [^"]*"[^>]*?) aria-label="[^"]*"'), r"\g<1>"),
    (re.compile(r'(<div class="citation" id="[^"]*") role="doc-biblioentry">'), r'\g<1> role="listitem">'),
]


# pydata-sphinx-theme's sidebar opens a page's entries with a <details> whose <summary> holds
# only a chevron drawn by CSS: nothing to name it (axe-core's summary-name). It is named after the
# page whose entries it shows ("Pages under API reference").
_EXPANDER = re.compile(r'(<a class="[^"]*\breference\b[^"]*" href="[^"]*">((?:(?!</a>|<a\b).)*)</a>'
                       r'<details(?: open="open")?>)<summary>(<span class="toctree-toggle")', re.S)


def _expander_name(m: re.Match) -> str:
    title = html_lib.escape(html_lib.unescape(re.sub(r"<[^>]+>", "", m[2])).strip(), quote=True)
    return f'{m[1]}<summary aria-label="Pages under {title}">{m[3]}'


# Sphinx writes a long signature one parameter a line (scripts/sphinx_api.py asks for it) as a
# <dl> of <dd>s with no <dt>, which a screen reader announces as a broken definition list (axe-core's
# definition-list): the same lines as <div>s, drawn as before by the site's stylesheet.
_SIG_PARAMS = re.compile(r'(<span class="sig-paren">[(\[]</span>\s*)<dl>(.*?)</dl>'
                         r'(\s*<span class="sig-paren">[)\]]</span>)', re.S)


def _sig_lines(m: re.Match) -> str:
    lines = re.sub(r"<dd(\s[^>]*)?>", lambda d: f'<div class="cb-sig-param"{d[1] or ""}>', m[2])
    return f'{m[1]}<div class="cb-sig-params">{lines.replace("</dd>", "</div>")}</div>{m[3]}'


def accessible_names(html: str) -> str:
    """``html`` with the controls named by their visible text (see ``_NAME_FIXES``), the
    sidebar's expanders named (``_EXPANDER``) and long signatures' lines as <div>s (``_SIG_PARAMS``)."""
    for pattern, replacement in _NAME_FIXES:
        html = pattern.sub(replacement, html)
    return _SIG_PARAMS.sub(_sig_lines, _EXPANDER.sub(_expander_name, html))


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

_FA_STYLES = {"fa-solid", "fas", "fa-regular", "far", "fa-brands", "fab", "fa-classic"}
_FA_HELPERS = {"fa-lg", "fa-fw", "fa-xs", "fa-sm", "fa-2x", "fa-spin", "fa-w-14"}
_FA_RULE = re.compile(r'([^{}]+)\{content:"\\([0-9a-f]{4})"\}')
_FONTS = (("Font Awesome 6 Free", 900, "fa-solid-900"), ("Font Awesome 6 Free", 400, "fa-regular-400"),
          ("Font Awesome 6 Brands", 400, "fa-brands-400"))


def fontawesome_codepoints(css: str) -> dict[str, int]:
    """Icon name -> code point, from the ``.fa-NAME:before{content:"\\fXXX"}`` rules that
    pydata-sphinx-theme's stylesheet carries for every Font Awesome icon."""
    out = {}
    for selectors, code in _FA_RULE.findall(css):
        for name in re.findall(r"\.fa-([a-z0-9-]+):{1,2}before", selectors):
            out[name] = int(code, 16)
    return out


def icons_used(texts: list[str]) -> set[str]:
    """Every Font Awesome icon named in the class lists of ``texts`` (the pages and the
    themes' scripts)."""
    out = set()
    for text in texts:
        for classes in re.findall(r'class(?:Name)?\s*[=:]\s*["\']([^"\']*\bfa-[^"\']*)["\']', text):
            out |= {w[3:] for w in classes.split()
                    if w.startswith("fa-") and len(w) > 3 and w not in _FA_STYLES | _FA_HELPERS}
    return out


def css_glyphs(css: str) -> set[int]:
    """The icons the themes' stylesheets draw themselves (admonition titles, external links,
    breadcrumbs): the characters of their ``--pst-icon-*`` variables and their ``content``
    escapes, leaving out the class rules of the whole icon set."""
    found = {ord(c) for c in re.findall(r'--pst-icon-[a-z-]+:\s*"(.)"', css)}
    rest = _FA_RULE.sub("", css)
    found |= {int(h, 16) for h in re.findall(r'content:\s*"\\(f[0-9a-f]{3}|e[0-9a-f]{3})"', rest)}
    return found


def subset_fonts(static: Path, codepoints: set[int]) -> str:
    """Font Awesome's three fonts cut down to ``codepoints`` (fontTools, WOFF), and the
    ``@font-face`` rules that make the browser fetch them instead of the full fonts."""
    from fontTools import subset

    rules = []
    for family, weight, name in _FONTS:
        options = subset.Options()
        options.flavor = "woff"  # WOFF2 would need the brotli module
        font = subset.load_font(str(static / "vendor" / "fontawesome" / "webfonts" / f"{name}.ttf"), options)
        cutter = subset.Subsetter(options)
        cutter.populate(unicodes=sorted(codepoints))
        cutter.subset(font)
        subset.save_font(font, str(static / f"{name}-subset.woff"), options)
        rules.append(f'@font-face{{font-display:block;font-family:"{family}";font-style:normal;'
                     f'font-weight:{weight};src:url({name}-subset.woff) format("woff")}}')
    return "\n".join(rules) + "\n"


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
    static = out / "_static"
    scripts = [p.read_text(errors="replace") for p in static.rglob("*.js")
               if "fontawesome" not in p.name and p.stat().st_size < 2_000_000]
    styles = "\n".join(p.read_text(errors="replace") for p in (static / "styles").glob("*.css"))
    texts = [p.read_text() for p in pages]
    names = fontawesome_codepoints(styles)
    used = icons_used(texts + scripts)
    missing = sorted(used - set(names))
    if missing:
        logging.getLogger(__name__).warning(f"site icons: no Font Awesome icon named {missing}")
    css = ("/* Font Awesome (Free: fonts SIL OFL 1.1) cut down to the icons this site shows; written by\n"
           "   scripts/sphinx_site_fixes.py. These rules come after the theme's and so replace its fonts. */\n"
           + subset_fonts(static, {names[n] for n in used if n in names} | css_glyphs(styles)))
    (static / "circuitbook-icons.css").write_text(css)
    for page, text in zip(pages, texts):
        rel = Path(*[".."] * (len(page.relative_to(out).parts) - 1), "_static", "circuitbook-icons.css").as_posix()
        new = accessible_names(_FA_TAGS.sub("", text))
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
        if THEBE_OFFLINE not in text:
            thebe.write_text(text.replace("Loading thebe from CDN...", THEBE_LOADING)
                             .replace("Launching from mybinder.org: ", "mybinder.org (needs the internet): ")
                             + THEBE_OFFLINE)


def add_static(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def setup(app):
    app.connect("config-inited", add_static)
    app.add_css_file("circuitbook-site.css")
    app.connect("html-page-context", dedupe_scripts, priority=900)
    app.connect("html-page-context", lazy_widgets_and_local_thebe, priority=910)
    app.connect("build-finished", replace_fontawesome)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}
