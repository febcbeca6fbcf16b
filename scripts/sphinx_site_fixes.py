"""Small fixes to the HTML that jupyter-book 1.0.4 (Sphinx 7.4) writes, found by the browser
tests (tests/browser): each one is an error in the console of every page without it.

- **Inline scripts included twice.** Extensions that add an inline script (``add_js_file(None,
  body=...)``) after the builder starts, as sphinx-thebe and sphinx-togglebutton do, get it
  written twice: Sphinx records it once as ``None`` and once as ``''``, which compare unequal.
  The second ``const THEBE_JS_URL = ...`` then throws "Identifier 'THEBE_JS_URL' has already
  been declared" on every page. We drop exact repeats (same file or body, same attributes).
"""

from __future__ import annotations


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


def setup(app):
    app.connect("html-page-context", dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
