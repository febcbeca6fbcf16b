"""A Sphinx extension for the claims ledger: ``{claims-ledger}`` renders a table of every
claim the chapters check in code, read from the executed notebooks at build time.

Each chapter records a claim with ``circuitbook.book.claim(...)``, which raises if the claim
is false and otherwise attaches a machine-readable copy to the cell's output. This directive
reads those outputs from the execution cache, so the ledger is generated from the very cells
that checked the claims, with the values measured in this build, and cannot disagree with them.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList

CLAIM_MIME = "application/vnd.circuitbook.claim+json"
LEDGER_DOCS: set[str] = set()


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


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


class ClaimsLedger(Directive):
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        LEDGER_DOCS.add(env.docname)
        cache_dir = env.config.nb_execution_cache_path or str(Path(env.srcdir) / "_build" / ".jupyter_cache")
        rows, missing = [], []
        for docname in sorted(env.found_docs):
            path = Path(env.doc2path(docname))
            if path.suffix != ".ipynb":
                continue
            nb = executed(path, cache_dir)
            if nb is None:
                missing.append(docname)
                continue
            title = next((c.source.splitlines()[0].lstrip("# ") for c in nb.cells
                          if c.cell_type == "markdown" and c.source.startswith("# ")), docname)
            for cell_no, claim in claims_of(nb):
                rows.append((docname, title, cell_no, claim))
        if missing:
            raise self.error(f"claims-ledger: no executed copy in the cache for {missing}; execute the book first")
        lines = ["| chapter | code cell | claim checked in code | measured in this build |", "|---|---|---|---|"]
        for docname, title, cell_no, claim in rows:
            lines.append(f"| {{doc}}`{_escape(title)} </{docname}>` | {cell_no} | {_escape(claim['statement'])} "
                         f"| `{_escape(str(claim['measured']))}` |")
        intro = (f"{len(rows)} claims in {len({r[0] for r in rows})} chapters, each checked by an executed cell "
                 "of this build.")
        container = nodes.container(classes=["claims-ledger"])
        self.state.nested_parse(StringList([intro, ""] + lines, source="claims-ledger"), self.content_offset,
                                container)
        # myst tables parse through the markdown parser, not rST: parse with myst if present
        return [container]


def _always_outdated(app, env, added, changed, removed):
    """Rebuild the ledger page on every build: the claims it shows live in other documents."""
    pages = set(LEDGER_DOCS)
    for docname in env.found_docs:
        path = Path(env.doc2path(docname))
        if path.suffix == ".md" and "{claims-ledger}" in path.read_text():
            pages.add(docname)
    return sorted(pages)


def setup(app):
    app.add_directive("claims-ledger", ClaimsLedger)
    app.connect("env-get-outdated", _always_outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
