"""``explore``: a figure with knobs that responds on the static site as in a live kernel.

One anywidget holds the figure drawn for every state of a grid of control values and draws
its own controls in the page, so moving a control switches figures client-side with no
kernel (the static site, a notebook reopened without a kernel). When a kernel answers the
widget's greeting (Jupyter, Colab), the controls step through every value and each move
calls ``render`` in Python again: fully live, at the controls' full resolution.

Why this mechanism (measured on this machine, matplotlib 3.11, Pillow 13, figures shaped like
the chapters'): the 21 figures are matplotlib drawings of model internals, so drawing them
ahead keeps one render function for both paths, and a test can compare the two byte for
byte. Per state, at the figures' own 100 dpi: a 7 x 2.6 inch bar chart is 10 KB as PNG,
4 KB as a 256-colour palette PNG, 3 KB as lossless WebP and 20 KB as SVG; three 64 x 64
heatmaps 77 / 23 / 36 / 100 KB; three 2,000-point scatters 75 / 22 / 26 / 645 KB. SVG
loses wherever there are many marks or pixels; WebP saves little over the palette PNG, so
each state is a palette PNG (Pillow's fast octree, 2-40 ms; no ``bbox_inches="tight"``,
which draws the figure twice). At most ``MAX_STATES`` = 64 states per figure that is about
0.3-1.5 MB per figure. Plotly frames would have meant rewriting every render in plotly, and
drawing in the browser a JS port of each of the 21 figures. The cost is execution time:
one state takes 0.1-0.4 s of CPU, so a figure's grid costs 5-25 s, at build time and when
a chapter runs in Colab.

Where a control has more values than its share of the 64 states, the page steps more
coarsely than the live widget and says so in a note under the figure.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import io
import math
import os
import traceback
from dataclasses import dataclass
from typing import Any, Callable

import anywidget
import traitlets

from circuitbook.widgets import frontend

# CIRCUITBOOK_EXPLORE_STATES lowers the budget where the static frames are not looked at:
# scripts/numerics.py re-executes the book only to compare claims, checks and printed numbers
MAX_STATES = int(os.environ.get("CIRCUITBOOK_EXPLORE_STATES", "64"))
if MAX_STATES < 1:
    raise ValueError(f"CIRCUITBOOK_EXPLORE_STATES must be a positive number of states, got {MAX_STATES}")
_MISSING = inspect.Parameter.empty


@dataclass(frozen=True)
class Control:
    """One knob: every value a reader can pick live, with the label the page shows for it."""

    name: str
    values: tuple
    labels: tuple[str, ...]
    start: int          # index of the initial value
    slider: bool        # a slider (ordered numbers) or a drop-down (options)


def _float_decimals(step: float) -> int:
    text = repr(float(step))
    return 0 if "e" in text or text.endswith(".0") else len(text.split(".")[1])


def _range(name: str, lo, hi, step) -> tuple[tuple, tuple[str, ...]]:
    if step <= 0 or hi < lo:
        raise ValueError(f"explore: control {name}=({lo}, {hi}, {step}) needs min <= max and step > 0")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi, step)):
        values = tuple(range(lo, hi + 1, step))
        return values, tuple(str(v) for v in values)
    n = math.floor((hi - lo) / step + 1e-9) + 1
    values = tuple(round(lo + i * step, 12) for i in range(n))
    d = _float_decimals(step)
    return values, tuple(f"{v:.{d}f}" for v in values)


def _options(name: str, options) -> tuple[tuple, tuple[str, ...]]:
    items = list(options.items()) if isinstance(options, dict) else list(options)
    if not items:
        raise ValueError(f"explore: control {name!r} has no options")
    pairs = [item if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
             else (str(item), item) for item in items]
    return tuple(v for _, v in pairs), tuple(label for label, _ in pairs)


def _index(values: tuple, value) -> int | None:
    for i, v in enumerate(values):
        if isinstance(v, float) or isinstance(value, float):
            try:
                if abs(float(v) - float(value)) <= 1e-9 * max(1.0, abs(float(v))):
                    return i
            except (TypeError, ValueError):
                continue
        elif v == value:
            return i
    return None


def make_control(name: str, spec, default=_MISSING) -> Control:
    """A :class:`Control` from what ``ipywidgets.interactive`` accepts: ``(min, max[, step])``,
    a list of values or of ``(label, value)`` pairs, a dict of label -> value, or a widget
    (a slider with ``min``/``max``/``step`` or a selection widget with ``options``)."""
    slider, widget_value = True, _MISSING
    if isinstance(spec, tuple) and len(spec) in (2, 3) and all(isinstance(v, (int, float)) for v in spec):
        lo, hi = spec[:2]
        step = spec[2] if len(spec) == 3 else (1 if all(isinstance(v, int) for v in spec) else 0.1)
        values, labels = _range(name, lo, hi, step)
    elif isinstance(spec, (list, dict)):
        values, labels = _options(name, spec)
        slider = False
    elif hasattr(spec, "_options_labels") and hasattr(spec, "_options_values"):  # Dropdown, Select, ...
        values, labels = tuple(spec._options_values), tuple(spec._options_labels)
        slider, widget_value = False, spec.value
    elif all(hasattr(spec, a) for a in ("min", "max", "step", "value")):      # IntSlider, FloatSlider
        values, labels = _range(name, spec.min, spec.max, spec.step)
        widget_value = spec.value
    else:
        raise TypeError(f"explore: control {name}={spec!r} is not a (min, max[, step]) tuple, a list or "
                        "dict of options, or an ipywidgets slider or selection widget")
    if not values:
        raise ValueError(f"explore: control {name!r} has no values")
    initial = widget_value if widget_value is not _MISSING else default
    if initial is _MISSING:
        start = (len(values) - 1) // 2 if slider else 0
    else:
        start = _index(values, initial)
        if start is None:
            raise ValueError(f"explore: the initial value {name}={initial!r} is not one of the control's values "
                             f"({labels[0]} .. {labels[-1]})")
    return Control(name, values, labels, start, slider)


def controls_for(render: Callable, controls: dict) -> list[Control]:
    """The controls of ``render``, each starting at ``render``'s default for it, if it has one."""
    if not controls:
        raise ValueError("explore needs at least one control, e.g. explore(draw, d_k=(1, 256, 1))")
    params = inspect.signature(render).parameters
    accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [n for n in controls if n not in params and not accepts_any]
    if unknown:
        raise TypeError(f"explore: {getattr(render, '__name__', render)}() has no parameter {', '.join(unknown)}")
    return [make_control(n, spec, params[n].default if n in params else _MISSING)
            for n, spec in controls.items()]


def _spread(n_values: int, n: int, must: int) -> list[int]:
    """``n`` evenly spread indices of ``range(n_values)``, ends and ``must`` included."""
    if n >= n_values:
        return list(range(n_values))
    picked = sorted({round(i * (n_values - 1) / (n - 1)) for i in range(n)}) if n > 1 else [must]
    if must not in picked:  # swap in the initial value for its nearest neighbour, ends kept if n > 2
        inner = picked[1:-1] or picked
        nearest = min(inner, key=lambda i: abs(i - must))
        picked = sorted(set(picked) - {nearest} | {must})
    return picked


def static_grid(controls: list[Control], max_states: int | None = None) -> list[list[int]]:
    """For each control, the indices of its values that the static page can show, so that
    the product over controls is at most ``max_states``: controls with few values keep them
    all, and the budget left is shared evenly (geometrically) by the others."""
    keep: dict[int, int] = {}
    budget = MAX_STATES if max_states is None else max_states
    if budget < 1:
        raise ValueError(f"explore: max_states must be at least 1, not {budget}")
    order = sorted(range(len(controls)), key=lambda i: len(controls[i].values))
    for done, i in enumerate(order):
        left = len(order) - done
        share = max(k for k in range(1, budget + 1) if k ** left <= budget)
        keep[i] = min(len(controls[i].values), share)
        budget //= keep[i]
    return [_spread(len(c.values), keep[i], c.start) for i, c in enumerate(controls)]


def figure_label(fig) -> str:
    """The text the figure itself draws as titles: its suptitle and every axes' titles."""
    parts = [fig.get_suptitle()]
    for ax in fig.axes:
        parts += [ax.get_title(loc) for loc in ("left", "center", "right")]
    return " | ".join(" ".join(p.split()) for p in parts if p.strip())


@contextlib.contextmanager
def random_state_kept():
    """Run the block and put back torch's, numpy's and Python's global random states.

    A page draws up to ``MAX_STATES`` frames per figure, and a frame may draw random weights.
    Without this, every random number the page draws after an explorer would depend on how
    many frames were drawn (``CIRCUITBOOK_EXPLORE_STATES``), not only on the page's seed."""
    import random

    import numpy as np
    import torch

    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=range(torch.cuda.device_count())):
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


def draw(render: Callable, values: dict) -> dict:
    """Call ``render(**values)`` and return its one matplotlib figure as a palette PNG data URL
    with the figure's drawn titles (``label``) and anything it printed (``text``)."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from PIL import Image

    before = set(plt.get_fignums())
    printed = io.StringIO()
    show = plt.show
    plt.show = lambda *a, **k: None  # the figure is ours to encode, not the cell's to display
    try:
        with random_state_kept(), contextlib.redirect_stdout(printed):
            returned = render(**values)
    finally:
        plt.show = show
    new = [plt.figure(n) for n in sorted(set(plt.get_fignums()) - before)]
    if isinstance(returned, Figure) and returned not in new:
        new.append(returned)
    try:
        if len(new) != 1:
            raise ValueError(f"explore: {getattr(render, '__name__', 'render')}({values}) drew {len(new)} "
                             "matplotlib figures; it must draw exactly one")
        fig = new[0]
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=fig.dpi, facecolor="white")  # "tight" would draw it twice
        label = figure_label(fig)
    finally:
        for f in new:
            plt.close(f)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    out = io.BytesIO()
    image.quantize(256, method=Image.Quantize.FASTOCTREE).save(out, format="png")
    src = "data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii")
    return {"src": src, "label": label, "text": printed.getvalue()}


def state_key(indices) -> str:
    return ",".join(str(int(i)) for i in indices)


class Explore(anywidget.AnyWidget):
    """The widget ``explore`` returns; ``values`` is the current state as a dict."""

    _esm = frontend.esm("explore.js")
    _css = frontend.css("explore.css")
    controls = traitlets.List(traitlets.Dict()).tag(sync=True)  # name, labels, slider, grid
    frames = traitlets.Dict().tag(sync=True)                      # state key -> drawn figure
    selection = traitlets.List(traitlets.Int()).tag(sync=True)   # index of each control's value
    live = traitlets.Dict().tag(sync=True)                         # the last figure drawn live

    def __init__(self, render: Callable, controls: list[Control], max_states: int | None = None):
        self._render, self._controls = render, controls
        grid = static_grid(controls, MAX_STATES if max_states is None else max_states)
        frames = {}
        for point in _product(grid):
            frames[state_key(point)] = draw(render, self._values(point))
        super().__init__(
            controls=[{"name": c.name, "labels": list(c.labels), "slider": c.slider, "grid": g}
                      for c, g in zip(controls, grid)],
            frames=frames, selection=[c.start for c in controls])
        self.on_msg(self._on_msg)
        self.observe(self._on_selection, names="selection")

    def _values(self, indices) -> dict:
        return {c.name: c.values[i] for c, i in zip(self._controls, indices)}

    @property
    def values(self) -> dict:
        return self._values(self.selection)

    def _on_msg(self, _widget, content, _buffers):
        if isinstance(content, dict) and content.get("type") == "hello":
            self.send({"type": "live"})  # a kernel is here: the page may step through every value

    def _on_selection(self, change):
        indices = change["new"]
        key = state_key(indices)
        if len(indices) != len(self._controls) or any(
                not 0 <= i < len(c.values) for c, i in zip(self._controls, indices)):
            self.live = {"key": key, "error": f"no such state: {indices}"}
            return
        try:
            self.live = {"key": key, **draw(self._render, self._values(indices))}
        except Exception as exc:  # noqa: BLE001 - shown in the widget, where the reader moved the knob
            self.live = {"key": key, "error": "".join(traceback.format_exception_only(type(exc), exc)).strip()}


def _product(grid: list[list[int]]):
    if not grid:
        yield ()
        return
    for i in grid[0]:
        for rest in _product(grid[1:]):
            yield (i, *rest)


def explore(render: Callable[..., Any], /, **controls) -> Explore:
    """Controls and a figure that ``render(**values)`` draws with matplotlib.

    ``controls`` are what ``ipywidgets.interactive`` accepts: ``(min, max[, step])`` tuples,
    lists of values or of ``(label, value)`` pairs, dicts, or ipywidgets sliders and
    selection widgets. Each control starts at ``render``'s default for it. ``render`` draws
    one matplotlib figure (``plt.show()`` or returning it) whose titles name the control
    values. Display the returned widget as a cell's last expression.
    """
    return Explore(render, controls_for(render, controls))
