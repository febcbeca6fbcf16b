"""Bookkeeping out of the reader's way: a code cell that mostly keeps the book's accounts is
folded, and its fold says what it holds.

A chapter's code does two jobs. Some of it teaches: the computation the reader follows. The rest
keeps the books: it glues numbers into the prose (``glue``) and records the page's statements
(``identity``, ``identity_close``, ``finding``, ``observation``), each of which raises when it does
not hold. A cell whose top-level statements are mostly the second kind (:func:`is_bookkeeping`)
is tagged ``hide-input`` in its chapter, so the page shows its outputs (the claims, with their
numbers) and folds its code; this extension replaces the fold's generic "Show code cell source"
with what the cell does (:func:`fold_prompt`), e.g. "Show the code that checks 2 identities and a
finding and glues numbers into the text".

tests/site/test_built_site.py fails on a page that shows such a cell unfolded.
"""

from __future__ import annotations

import ast

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

#: the calls that keep the books, and how a fold names what they do
KINDS = {"identity": "identity", "identity_close": "identity", "finding": "finding",
         "observation": "observation"}
GLUE = "glue"
MIN_LINES = 3  # a two-line cell is no burden to read, whatever it holds


def _name(call: ast.Call) -> str | None:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _keeps_books(stmt: ast.stmt) -> bool:
    """A statement that is a bookkeeping call, or a loop (or ``with``/``if``) made only of them."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _name(stmt.value) in KINDS or _name(stmt.value) == GLUE
    if isinstance(stmt, (ast.For, ast.With, ast.If)):
        body = stmt.body + getattr(stmt, "orelse", [])
        return bool(body) and all(_keeps_books(s) for s in body)
    return False


def bookkeeping_share(source: str) -> tuple[int, int]:
    """(bookkeeping statements, all top-level statements) of a cell's code; (0, 0) for code that is
    not plain Python (an IPython magic), which this rule leaves alone."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return 0, 0
    return sum(_keeps_books(s) for s in body), len(body)


def is_bookkeeping(source: str) -> bool:
    """True for a cell of at least MIN_LINES lines of code whose top-level statements are at least
    half bookkeeping calls: the reader would read mostly the book's accounts."""
    lines = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    kept, total = bookkeeping_share(source)
    return len(lines) >= MIN_LINES and total > 0 and 2 * kept >= total


def fold_prompt(source: str) -> str:
    """What a folded cell does, in words: the kinds of statement it records and whether it glues."""
    try:
        calls = [_name(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    except SyntaxError:
        return "Show the code"
    counts = {kind: sum(KINDS.get(c) == kind for c in calls) for kind in ("identity", "finding", "observation")}
    verbs = {"identity": "checks", "finding": "tests", "observation": "records"}
    plural = {"identity": "identities", "finding": "findings", "observation": "observations"}
    parts = [f"{verbs[k]} {'an' if k in ('identity', 'observation') else 'a'} {k}" if n == 1
             else f"{verbs[k]} {n} {plural[k]}" for k, n in counts.items() if n]
    if GLUE in calls:
        parts.append("glues numbers into the text")
    if not parts:
        return "Show the code"
    return "Show the code that " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


class BookkeepingFolds(SphinxPostTransform):
    """Each folded bookkeeping cell's prompt says what the cell does. Runs before myst-nb's
    ``HideInputCells`` (priority 199), which makes the fold from these attributes."""

    default_priority = 195
    formats = ("html",)

    def run(self, **kwargs):
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code" or cell.get("hide_mode") != "input":
                continue
            source = "".join(c.astext() for c in cell.children if c.get("nb_element") == "cell_code_source")
            if is_bookkeeping(source):
                cell["prompt_show"], cell["prompt_hide"] = fold_prompt(source), "Hide the code"


def setup(app):
    app.add_post_transform(BookkeepingFolds)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
