"""A Sphinx extension for the claims ledger: ``{claims-ledger}`` renders a table of every
claim the chapters check in code, read from the executed notebooks at build time.

Each chapter records a statement with ``circuitbook.book.identity``, ``finding`` or
``observation``, which raises if the statement does not hold and otherwise attaches a machine-readable copy to the cell's output. This directive
reads those outputs from the execution cache, so the ledger is generated from the very cells
that checked the claims, with the values measured in this build, and cannot disagree with them.

The ledger is one table (chapter, kind, statement, value, test), a row a statement, in the
book's order. ``ledger_static/claims-ledger.js`` adds, on the static site and with no kernel,
filters by chapter and kind, a text search, sorting by column and paging (50 rows at a time, so
that a phone does not scroll through 600 cards); without JavaScript the whole table shows.
``ledger_static/claims-ledger.css`` lays the table over the full content width, as compact
cards on a phone, and gives its links WCAG AA contrast in both colour themes. Both files are
added to the ledger's page only.

Which pages: every notebook of the book's table of contents (``_toc.yml``), so that a partial
build (``build_site.py --only book/ledger``) shows the same ledger as the full one, plus any
other notebook page of the build. A page with no executed copy in the cache fails the build,
naming it. ``CIRCUITBOOK_LEDGER_STALE=1`` (for previewing the page's layout only) takes such a
page's newest cache record instead and says so in a warning box above the table.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx import addnodes

CLAIM_MIME = "application/vnd.circuitbook.claim+json"
STATIC = Path(__file__).resolve().parent / "ledger_static"
STALE_ENV = "CIRCUITBOOK_LEDGER_STALE"


def claims_of(nb) -> list[tuple[int, dict]]:
    """(code cell number, claim) for every claim output of an executed notebook."""
    out, n = [], 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        n += 1
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if CLAIM_MIME in data:
                out.append((n, data[CLAIM_MIME]))
    return out


def executed(path: Path, cache_dir: str):
    from jupyter_cache import get_cache

    nb = nbformat.read(path, as_version=4)
    try:
        _, merged = get_cache(cache_dir).merge_match_into_notebook(nb)
    except KeyError:
        return None
    return merged


def newest_record(path: Path, cache_dir: str):
    """The newest executed copy of ``path`` in the cache, whatever code it ran (or None)."""
    from jupyter_cache import get_cache

    cache = get_cache(cache_dir)
    records = [r for r in cache.list_cache_records() if Path(r.uri).resolve() == path.resolve()]
    if not records:
        return None
    return cache.get_cache_bundle(max(records, key=lambda r: r.created).pk).nb


def book_notebooks(env) -> list[str]:
    """Docnames of the book's notebook pages: those of ``_toc.yml`` in its order, then any other
    notebook page of this build."""
    srcdir = Path(env.srcdir)
    docs = []
    try:
        from execute_notebooks import toc_notebooks

        docs = [p.relative_to(srcdir).with_suffix("").as_posix()
                for p in toc_notebooks(srcdir, strict=False)]
    except (ImportError, FileNotFoundError, ValueError):
        pass
    docs += sorted(d for d in env.found_docs if d not in docs and Path(env.doc2path(d)).suffix == ".ipynb")
    return docs


def executed_chapters(directive) -> list[tuple[str, str, object]]:
    """(docname, title, executed notebook) for every notebook page of the book, read from the
    execution cache. Raises a directive error naming the pages that were never executed
    (unless ``CIRCUITBOOK_LEDGER_STALE`` is set: then their newest cache records, listed in
    ``env.circuitbook_stale``)."""
    env = directive.state.document.settings.env
    cache_dir = env.config.nb_execution_cache_path or str(Path(env.srcdir) / "_build" / ".jupyter_cache")
    stale_ok = bool(os.environ.get(STALE_ENV))
    out, missing, stale = [], [], []
    for docname in book_notebooks(env):
        path = Path(env.srcdir) / f"{docname}.ipynb"
        if not path.exists():
            continue
        nb = executed(path, cache_dir)
        if nb is None and stale_ok:
            nb = newest_record(path, cache_dir)
            if nb is not None:
                stale.append(docname)
        if nb is None:
            missing.append(docname)
            continue
        source = nb if docname not in stale else nbformat.read(path, as_version=4)  # a cache record has no markdown
        title = next((c.source.splitlines()[0].lstrip("# ") for c in source.cells
                      if c.cell_type == "markdown" and c.source.startswith("# ")), docname)
        out.append((docname, title, nb))
    if missing:
        raise directive.error(f"{directive.name}: no executed copy in the cache for {missing}; execute the book first")
    env.circuitbook_stale = stale
    return out


def rebuild_always(marker: str):
    """An ``env-get-outdated`` handler: pages whose source uses ``marker`` are rebuilt on every
    build, since what they show lives in other documents (Sphinx cannot see that dependency)."""

    def handler(app, env, added, changed, removed):
        return sorted(docname for docname in env.found_docs
                      if Path(env.doc2path(docname)).suffix == ".md"
                      and marker in Path(env.doc2path(docname)).read_text())

    return handler


def _statistic(claim: dict) -> str:
    """The finding's test in a few words: rank and p, z and p, or the bootstrap interval."""
    p = claim["p"]
    p_text = f"p = {p:.2g}" if p >= 1e-4 else "p < 0.0001"
    if claim["null_kind"] == "draws":
        return f"rank {claim['rank']} of {claim['n'] + 1}, {p_text}"
    if claim["null_kind"] == "normal":
        return f"z = {claim['z']:.1f}, {p_text}"
    return f"interval [{claim['lo']:.3g}, {claim['hi']:.3g}], {p_text}"


def _null(claim: dict) -> str:
    if claim["null_kind"] == "point" or claim["null_sd"] is None:
        return f"{claim['null']}: {claim['null_mean']:.3g}"
    return f"{claim['null']}: {claim['null_mean']:.3g} \u00b1 {claim['null_sd']:.2g}"


# kind: (plural, what it is)
KINDS = {
    "identity": ("identities", "true by construction (algebra, a theorem, a count), checked only to show "
                 "that the code matches the algebra; agreement to rounding is held to the computation's "
                 "worst-case rounding bound, not a tuned tolerance"),
    "finding": ("findings", "a measured effect set beside the null that could have produced it, with "
                "the statistic that weighs them; each was stated before its cell measured it, and the "
                "cell raises if the test does not say what the statement says"),
    "observation": ("observations", "numbers the pages report with no test: not evidence on their own"),
}
COLUMNS = ["chapter", "kind", "statement", "value", "test"]
WIDTHS = [16, 9, 45, 12, 18]  # relative column widths (the statement is the long one)


def _value(claim: dict) -> str:
    return f"{claim['effect']:.4g}" if claim.get("kind") == "finding" else str(claim.get("measured", ""))


def _para(*children, classes=()) -> nodes.paragraph:
    return nodes.paragraph("", "", *children, classes=list(classes))


def _test_cell(claim: dict) -> list[nodes.Node]:
    kind = claim.get("kind")
    if kind == "finding":
        return [_para(nodes.Text(f"null: {_null(claim)}")), _para(nodes.Text(_statistic(claim)))]
    return [_para(nodes.Text("by construction" if kind == "identity" else "no test"), classes=["ledger-none"])]


def _doc_link(env, docname: str, title: str) -> nodes.Node:
    ref = addnodes.pending_xref("", refdoc=env.docname, refdomain="std", refexplicit=True,
                                reftarget=f"/{docname}", reftype="doc", refwarn=True)
    ref += nodes.inline("", title, classes=["xref", "std", "std-doc"])
    return ref


def ledger_table(env, rows) -> nodes.table:
    table = nodes.table(classes=["ledger-table"])
    group = nodes.tgroup(cols=len(COLUMNS))
    table += group
    group += [nodes.colspec(colwidth=w) for w in WIDTHS]
    head = nodes.thead()
    group += head
    header = nodes.row()
    header += [nodes.entry("", _para(nodes.Text(c))) for c in COLUMNS]
    head += header
    body = nodes.tbody()
    group += body
    for docname, title, cell_no, claim in rows:
        kind = claim.get("kind", "")
        row = nodes.row(classes=["ledger-row", f"ledger-{kind}"])
        row += nodes.entry("", _para(_doc_link(env, docname, title)),
                           _para(nodes.Text(f"cell {cell_no}"), classes=["ledger-cellno"]))
        row += nodes.entry("", _para(nodes.Text(kind)))
        row += nodes.entry("", _para(nodes.Text(claim["statement"])))
        row += nodes.entry("", _para(nodes.Text(_value(claim)), classes=["ledger-value"]))
        row += nodes.entry("", *_test_cell(claim))
        body += row
    return table


class ClaimsLedger(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        rows = [(docname, title, cell_no, claim)
                for docname, title, nb in executed_chapters(self)
                for cell_no, claim in claims_of(nb)]
        counts = {kind: sum(c.get("kind") == kind for *_, c in rows) for kind in KINDS}
        container = nodes.container(classes=["claims-ledger"])
        stale = getattr(env, "circuitbook_stale", [])
        if stale:
            warn = nodes.warning()
            warn += _para(nodes.Text(f"A preview: {len(stale)} pages ({', '.join(stale)}) have no executed copy "
                                     "of their current code; their rows come from an older run."))
            container += warn
        container += _para(nodes.Text(
            f"{len(rows)} statements in {len({r[0] for r in rows})} pages, each checked or recorded by an "
            f"executed cell of this build: {counts['finding']} findings, {counts['identity']} identities "
            f"and {counts['observation']} observations."), classes=["ledger-summary"])
        kinds = nodes.bullet_list(classes=["ledger-kinds"])
        for kind, (plural, sentence) in KINDS.items():
            kinds += nodes.list_item("", _para(nodes.strong("", f"{counts[kind]} {plural}"),
                                               nodes.Text(f": {sentence}.")))
        container += kinds
        container += ledger_table(env, rows)
        return [container]


def add_static(app, config) -> None:
    config.html_static_path.append(str(STATIC))


def ledger_assets(app, pagename, templatename, context, doctree) -> None:
    """The ledger's script and stylesheet, on the pages that show a ledger only."""
    if doctree is None or not any("claims-ledger" in n["classes"] for n in doctree.findall(nodes.container)):
        return
    app.add_css_file("claims-ledger.css")
    app.add_js_file("claims-ledger.js", loading_method="defer")


def setup(app):
    app.add_directive("claims-ledger", ClaimsLedger)
    app.connect("config-inited", add_static)
    app.connect("html-page-context", ledger_assets)
    app.connect("env-get-outdated", rebuild_always("{claims-ledger}"))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.2"}
