"""A Sphinx extension for the claims ledger: ``{claims-ledger}`` renders a table of every
claim the chapters check in code, read from the executed notebooks at build time.

Each chapter records a statement with ``circuitbook.book.identity``, ``finding`` or
``observation``, which raises if the statement does not hold and otherwise attaches a machine-readable copy to the cell's output. This directive
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


def executed_chapters(directive) -> list[tuple[str, str, object]]:
    """(docname, title, executed notebook) for every notebook page of the book, read from the
    execution cache. Raises a directive error naming the pages that were never executed."""
    env = directive.state.document.settings.env
    cache_dir = env.config.nb_execution_cache_path or str(Path(env.srcdir) / "_build" / ".jupyter_cache")
    out, missing = [], []
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
        out.append((docname, title, nb))
    if missing:
        raise directive.error(f"{directive.name}: no executed copy in the cache for {missing}; execute the book first")
    return out


def rebuild_always(marker: str):
    """An ``env-get-outdated`` handler: pages whose source uses ``marker`` are rebuilt on every
    build, since what they show lives in other documents (Sphinx cannot see that dependency)."""

    def handler(app, env, added, changed, removed):
        return sorted(docname for docname in env.found_docs
                      if Path(env.doc2path(docname)).suffix == ".md"
                      and marker in Path(env.doc2path(docname)).read_text())

    return handler


def _cell(text) -> str:
    return f"`{_escape(str(text))}`"


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


# One table a kind: (heading, sentence, columns, row maker)
KINDS = {
    "finding": ("Findings", "a measured effect set beside the null that could have produced it, with "
                "the statistic that weighs them; each was stated before its cell measured it, and the "
                "cell raises if the test does not say what the statement says",
                ["chapter", "cell", "finding", "effect", "null", "test"],
                lambda c: [f"{c['effect']:.4g}", _escape(_null(c)), _escape(_statistic(c))]),
    "identity": ("Identities", "true by construction (algebra, a theorem, a count), checked only to show "
                 "that the code matches the algebra; agreement to rounding is held to the computation's "
                 "worst-case rounding bound, not a tuned tolerance",
                 ["chapter", "cell", "identity", "checked"],
                 lambda c: [_cell(c["measured"])]),
    "observation": ("Observations", "numbers the pages report with no test: not evidence on their own",
                    ["chapter", "cell", "observation", "value"],
                    lambda c: [_cell(c["measured"])]),
}


class ClaimsLedger(Directive):
    has_content = False

    def run(self):
        rows = [(docname, title, cell_no, claim)
                for docname, title, nb in executed_chapters(self)
                for cell_no, claim in claims_of(nb)]
        counts = {kind: sum(c.get("kind") == kind for *_, c in rows) for kind in KINDS}
        lines = [f"{len(rows)} statements in {len({r[0] for r in rows})} pages, each checked or recorded by "
                 f"an executed cell of this build: {counts['finding']} findings, {counts['identity']} "
                 f"identities and {counts['observation']} observations.", ""]
        for kind, (heading, sentence, columns, cells) in KINDS.items():
            mine = [r for r in rows if r[3].get("kind") == kind]
            if not mine:
                continue
            lines += [f"**{heading}.** {len(mine)} {heading.lower()}: {sentence}.", "",
                      "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            for docname, title, cell_no, claim in mine:
                lines.append(f"| {{doc}}`{_escape(title)} </{docname}>` | {cell_no} | "
                             f"{_escape(claim['statement'])} | " + " | ".join(cells(claim)) + " |")
            lines.append("")
        container = nodes.container(classes=["claims-ledger"])
        # inside a MyST page, nested_parse reads MyST markdown, so the table and {doc} roles work
        self.state.nested_parse(StringList(lines, source="claims-ledger"), self.content_offset, container)
        return [container]


def setup(app):
    app.add_directive("claims-ledger", ClaimsLedger)
    app.connect("env-get-outdated", rebuild_always("{claims-ledger}"))
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "0.1"}
