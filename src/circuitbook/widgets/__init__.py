"""Interactive explorations for the chapters and the explainers (anywidget).

``explore`` is the chapters' one way to put a knob on a figure: in Jupyter and Colab the
figure redraws live for every value; on the static site, with no kernel, the widget switches
between figures drawn at build time for a grid of control values (see ``explorer.py``).
"""

from __future__ import annotations

from circuitbook.widgets.explorer import Explore, explore

__all__ = ["Explore", "explore"]
