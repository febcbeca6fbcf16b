"""Helpers for the chapters themselves: numbers that prose quotes, and checked claims.

``glue(name, value)`` hands a computed number to the page, where the prose writes
``{glue:text}`name:.3f``` so the number in the sentence is the number the cell computed.

``claim(statement, measured, holds)`` records one claim the book checks in code. It raises
if the claim does not hold (so a false claim fails the build), prints one line, and attaches
a machine-readable copy to the cell's output, from which the appendix's claims ledger is
generated. Both work without jupyter-book (on Colab, or in a plain Python session).
"""

from __future__ import annotations

from typing import Any

CLAIM_MIME = "application/vnd.circuitbook.claim+json"


def glue(name: str, value: Any, display: bool = False) -> None:
    """Make ``value`` available to the page's prose as ``{glue:text}`name```.

    Returns None, so a glue call as a cell's last line prints nothing.
    """
    try:
        from myst_nb import glue as _glue
    except ImportError:  # Colab: no jupyter-book, and the page's prose is not rendered anyway
        return
    _glue(name, value, display=display)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if hasattr(value, "item") and getattr(value, "numel", lambda: 2)() == 1:
        return _show(value.item())
    return str(value)


def claim(statement: str, measured: Any, holds: bool, *, chapter: str | None = None) -> None:
    """Record a checked claim: fail loudly if ``holds`` is false, else print and log it.

    ``measured`` is the number (or short text) the check produced, shown in the ledger.
    """
    if not holds:
        raise AssertionError(f"claim failed: {statement} (measured {_show(measured)})")
    line = f"checked: {statement}  [measured: {_show(measured)}]"
    try:
        from IPython import get_ipython
        from IPython.display import display

        if get_ipython() is not None:
            import html

            display({"text/plain": line,
                     "text/html": ('<div class="circuitbook-claim" style="color:#1a7f37">&#10004; checked: '
                                   f"{html.escape(statement)} <small>[measured: {html.escape(_show(measured))}]"
                                   "</small></div>"),
                     CLAIM_MIME: {"statement": statement, "measured": _show(measured), "chapter": chapter}},
                    raw=True)
            return
    except ImportError:
        pass
    print(line)
