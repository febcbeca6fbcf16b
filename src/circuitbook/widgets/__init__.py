"""Interactive explorations for the chapters (ipywidgets) and the explainers (anywidget).

``explore`` is the chapters' one way to put a knob on a figure: in Jupyter and Colab the
figure redraws live; on the static site the figure drawn for the initial values is kept in
the saved widget state, so the page shows a meaningful picture without a kernel.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import Any, Callable

_WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def _colab_widget_metadata() -> dict:
    """Display metadata that points Colab's front end at its custom widget manager, once it is
    enabled (``google.colab.output.enable_custom_widget_manager()``); empty elsewhere.

    Colab adds it itself only to ``display(...)`` messages. A widget that is a cell's last
    expression is sent as an execute result without it, and with ipywidgets 8 Colab then
    cannot render it (anywidget adds the same metadata to its widgets for this reason)."""
    output = sys.modules.get("google.colab.output")
    url = getattr(getattr(output, "_widgets", None), "_installed_url", None)
    return {_WIDGET_MIME: {"colab": {"custom_widget_manager": {"url": url}}}} if url else {}


@cache
def _explore_class():
    import ipywidgets as widgets

    class Explore(widgets.interactive):
        """``ipywidgets.interactive`` that also displays on Colab with ipywidgets 8."""

        def _repr_mimebundle_(self, **kwargs):  # ipywidgets 8 (7 displays via _ipython_display_)
            data = super()._repr_mimebundle_(**kwargs)
            metadata = _colab_widget_metadata()
            return (data, metadata) if data and metadata else data

    return Explore


def explore(render: Callable[..., Any], /, **controls):
    """Controls + an output area that calls ``render(**values)`` whenever a control moves.

    ``controls`` are ipywidgets (``IntSlider``, ``Dropdown``, ...) or the abbreviations
    ``ipywidgets.interactive`` accepts (a ``(min, max, step)`` tuple, a list of options).
    ``render`` draws with matplotlib (call ``plt.show()``) or returns something displayable.
    Returns an ``ipywidgets.interactive`` box; display it as a cell's last expression. Works
    with ipywidgets 7.6+ and 8, also on Colab (see :func:`_colab_widget_metadata`).
    """
    import ipywidgets as widgets

    if not controls:
        raise ValueError("explore needs at least one control, e.g. explore(draw, d_k=(1, 256, 1))")
    ui = _explore_class()(render, **controls)
    ui.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    ui.add_class("circuitbook-explore")
    return ui
