"""Interactive explorations for the chapters (ipywidgets) and the explainers (anywidget).

``explore`` is the chapters' one way to put a knob on a figure: in Jupyter and Colab the
figure redraws live; on the static site the figure drawn for the initial values is kept in
the saved widget state, so the page shows a meaningful picture without a kernel.
"""

from __future__ import annotations

from typing import Any, Callable


def explore(render: Callable[..., Any], /, **controls):
    """Controls + an output area that calls ``render(**values)`` whenever a control moves.

    ``controls`` are ipywidgets (``IntSlider``, ``Dropdown``, ...) or the abbreviations
    ``ipywidgets.interactive`` accepts (a ``(min, max, step)`` tuple, a list of options).
    ``render`` draws with matplotlib (call ``plt.show()``) or returns something displayable.
    Returns the ``ipywidgets.interactive`` box; display it as a cell's last expression.
    """
    import ipywidgets as widgets

    if not controls:
        raise ValueError("explore needs at least one control, e.g. explore(draw, d_k=(1, 256, 1))")
    ui = widgets.interactive(render, **controls)
    ui.layout = widgets.Layout(border="1px solid #ddd", padding="6px")
    ui.add_class("circuitbook-explore")
    return ui
