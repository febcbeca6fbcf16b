"""No matplotlib figure of the book has colliding labels or labels cut at its edge (issue 40).

The chapters' matplotlib figures are PNG images drawn while a chapter executes, so their
collisions do not depend on the reader's browser: they are measured as they are drawn. Every
kernel of ``scripts/execute_notebooks.py`` starts with ``scripts/figure_audit.py``, which
measures each figure the inline backend shows (titles, axis titles, tick labels, legends, colour
bars and plot areas, with the figure's own renderer) and applies the rules that the browser test
of the plotly figures applies (tests/browser/test_figures.py). The executor stores the audit with
the chapter's cached execution (and copies it to ``_build/figure-audit/``), so it always belongs
to the executed code these tests find in the cache.

For every chapter: the audit exists and was made by today's ``figure_audit.py``; it saw every
figure the chapter shows (one per PNG image among its outputs, and at least one where a cell
calls ``plt.show`` at its top level), failed on none; and no figure has a finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import execute_notebooks  # noqa: E402

CACHE = execute_notebooks.cache_path(ROOT)

pytestmark = pytest.mark.skipif(not CACHE.exists(), reason="nothing executed yet: run make book")


def _executed(path: Path):
    """(cache record, executed notebook) of ``path``'s current code, or (None, None)."""
    import nbformat
    from jupyter_cache import get_cache

    cache = get_cache(str(CACHE))
    nb = nbformat.read(path, as_version=4)
    try:
        record = cache.match_cache_notebook(nb)
    except KeyError:
        return None, None
    return record, cache.merge_match_into_notebook(nb)[1]


def _images(nb) -> int:
    return sum("image/png" in out.get("data", {}) for cell in nb.cells if cell.cell_type == "code"
               for out in cell.get("outputs", []))


def _calls_show(nb) -> bool:
    """Whether a code cell calls ``plt.show`` at its top level (where it always runs; one inside
    a function or a branch may not)."""
    return any(line.startswith("plt.show(") for cell in nb.cells if cell.cell_type == "code"
               for line in cell.source.splitlines())


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(ROOT), ids=lambda p: p.name)
def test_every_matplotlib_figure_was_audited_and_has_no_collision(path):
    rel = path.relative_to(ROOT).as_posix()
    record, nb = _executed(path)
    assert record is not None, f"{rel} has no execution of its current code in the cache: run scripts/execute_notebooks.py"
    audit = record.data.get("figure_audit")
    assert audit is not None and audit.get("version") == execute_notebooks.audit_version(), (
        f"{rel} was executed without today's scripts/figure_audit.py: run scripts/execute_notebooks.py")
    assert "error" not in audit, f"{rel}: {audit['error']}"
    figures = audit["figures"]
    failed = [f"cell [{f['cell']}] {f['name']!r}: {f['error']}" for f in figures if f.get("error")]
    assert not failed, f"{rel}: the audit failed on:\n" + "\n".join(failed)
    assert len(figures) == _images(nb), (
        f"{rel}: {_images(nb)} figure image(s) among the outputs, {len(figures)} audited")
    if _calls_show(nb):
        assert figures, f"{rel} calls plt.show, and the audit saw no figure"
    problems = [f"cell [{f['cell']}] {f['name']!r}: {finding}" for f in figures for finding in f["findings"]]
    assert not problems, f"{rel}: {len(problems)} collision(s) or cut label(s):\n" + "\n".join(problems)
