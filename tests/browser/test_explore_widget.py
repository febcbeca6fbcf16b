"""The explore widget's page code (``explore.js``) in Chromium, with no site build needed.

The widget is created in this process by ``explore`` (so its frames are real matplotlib
renders) and its ES module is loaded into a blank page with a stand-in for the anywidget
model. Without a kernel the controls step through the static grid only and every state
shows its precomputed figure; with a kernel (the stand-in answers the widget's greeting and
forwards ``selection`` to the Python widget, which calls ``render`` as in Jupyter) every
value of the control is reachable and off-grid values are drawn live.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser
WIDGETS = Path(__file__).resolve().parents[2] / "src" / "circuitbook" / "widgets"

PAGE = """<!doctype html><html><body><div id="box" style="width: %dpx"></div><script type="module">
import mod from "./explore.js";
const state = %s;
const handlers = {};
const on = (ev, cb) => { (handlers[ev] = handlers[ev] || []).push(cb); };
const fire = (ev, arg) => (handlers[ev] || []).forEach((cb) => cb(arg));
const kernel = %s;
const model = {
  get: (k) => state[k],
  set: (k, v) => { state[k] = v; },
  on,
  save_changes: async () => {
    if (!kernel) return;
    state.live = await window.kernelSelect(JSON.stringify(state.selection));
    fire("change:live");
  },
  send: (msg) => { if (kernel && msg.type === "hello") setTimeout(() => fire("msg:custom", { type: "live" }), 0); },
};
mod.render({ model, el: document.getElementById("box") });
window.ready = true;
</script></body></html>"""


@pytest.fixture(scope="module")
def widget():
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from circuitbook.widgets import explore

    def draw(n=3, colour="blue"):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot(range(n + 1), color=colour)
        ax.set_title(f"n = {n}, colour {colour}")
        plt.show()

    return explore(draw, n=(0, 40, 1), colour=["blue", "red"])


@pytest.fixture
def page_for(tmp_path, widget, browser, serve):
    # the module as the widget ships it: explore.js with the siblings it imports (dom.js) inlined
    from circuitbook.widgets.frontend import esm

    (tmp_path / "explore.js").write_text(esm("explore.js", WIDGETS))
    base = serve(tmp_path)
    state = {k: getattr(widget, k) for k in ("controls", "frames", "selection", "live")}
    pages = []

    def make(kernel: bool, width: int = 700):
        (tmp_path / "index.html").write_text(PAGE % (width, json.dumps(state), json.dumps(kernel)))
        page = browser.new_page()
        pages.append(page)
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        def select(indices):
            widget.selection = json.loads(indices)
            return dict(widget.live)

        page.expose_function("kernelSelect", select)
        page.goto(f"{base}/index.html")
        page.wait_for_function("() => window.ready === true")
        return page, errors

    yield make
    for page in pages:
        page.close()


def _state(page):
    return page.evaluate("""() => { const r = document.querySelector('.cb-explore');
      const img = r.querySelector('img');
      return { values: JSON.parse(r.dataset.values), shown: r.dataset.shown, key: r.dataset.key, alt: img.alt,
               src: img.src, max: r.querySelector('input[type=range]').max, live: r.dataset.live || '',
               note: r.querySelector('.cb-explore-note').hidden ? '' : r.querySelector('.cb-explore-note').textContent }; }""")


def test_grid_is_coarser_than_the_control_and_says_so(widget):
    n, colour = widget.controls
    assert len(n["labels"]) == 41 and len(colour["grid"]) == 2
    assert len(n["grid"]) == 32 and len(widget.frames) == 64, "64 states: 32 values of n x 2 colours"
    assert widget.selection[0] in n["grid"], "the initial value is in the static grid"


def test_without_a_kernel_the_slider_steps_through_precomputed_figures(page_for, widget):
    page, errors = page_for(kernel=False)
    first = _state(page)
    assert first["values"] == {"n": "3", "colour": "blue"} and first["alt"] == "n = 3, colour blue"
    assert first["max"] == "31" and "n takes 32 of its 41 values" in first["note"]
    page.focus("input[type=range]")
    page.keyboard.press("End")
    end = _state(page)
    assert end["values"]["n"] == "40" and end["alt"] == "n = 40, colour blue" and end["src"] != first["src"]
    page.select_option("select", "1")
    red = _state(page)
    assert red["alt"] == "n = 40, colour red" and red["shown"] == red["key"] == "40,1"
    assert red["src"] == widget.frames["40,1"]["src"]
    page.select_option("select", "0")
    page.focus("input[type=range]")
    page.keyboard.press("Home")
    walked = [_state(page)["values"]["n"]]
    for _ in range(40):  # one arrow step on the page is one step of the static grid
        page.keyboard.press("ArrowRight")
        walked.append(_state(page)["values"]["n"])
    grid = [str(i) for i in widget.controls[0]["grid"]]
    assert list(dict.fromkeys(walked)) == grid and walked[-1] == "40"
    assert not errors, errors


def test_with_a_kernel_every_value_is_reachable_and_drawn_live(page_for, widget):
    page, errors = page_for(kernel=True)
    page.wait_for_function("() => document.querySelector('.cb-explore').dataset.live === '1'")
    s = _state(page)
    assert s["max"] == "40" and s["note"] == "", "live: the slider has every value and no coarseness note"
    off_grid = next(i for i in range(41) if i not in widget.controls[0]["grid"])
    page.evaluate(f"""() => {{ const i = document.querySelector('input[type=range]'); i.value = '{off_grid}';
        i.dispatchEvent(new Event('input')); i.dispatchEvent(new Event('change')); }}""")
    page.wait_for_function(f"() => document.querySelector('.cb-explore').dataset.shown === '{off_grid},0'")
    s = _state(page)
    assert s["alt"] == f"n = {off_grid}, colour blue" and s["values"]["n"] == str(off_grid)
    assert widget.values == {"n": off_grid, "colour": "blue"}
    assert not errors, errors


def test_narrow_viewport_does_not_overflow(page_for):
    page, errors = page_for(kernel=False, width=360)
    over = page.evaluate("""() => { const r = document.querySelector('.cb-explore');
      return [r.scrollWidth, r.clientWidth, r.querySelector('img').getBoundingClientRect().width]; }""")
    assert over[0] <= over[1] and over[2] <= 360, over
    assert not errors, errors


# --------------------------------------------------------------------------- the Python side, no browser

def _draw_one(a=1, b="x"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.set_title(f"a = {a}, b = {b}")
    plt.show()


@pytest.mark.parametrize("controls, error", [
    ({}, "at least one control"),
    ({"c": (0, 3)}, "has no parameter c"),
    ({"a": (5, 1, 1)}, "needs min <= max and step > 0"),
    ({"a": (0, 4, 0)}, "needs min <= max and step > 0"),
    ({"b": []}, "has no options"),
    ({"b": object()}, "is not a (min, max[, step]) tuple"),
    ({"a": (2, 9, 2)}, "the initial value a=1 is not one of the control's values (2 .. 8)"),
])
def test_bad_controls_get_clear_errors(controls, error):
    import matplotlib

    matplotlib.use("agg")
    from circuitbook.widgets import explore

    with pytest.raises((TypeError, ValueError)) as info:
        explore(_draw_one, **controls)
    assert error in str(info.value)


def test_a_render_must_draw_exactly_one_figure():
    import matplotlib

    matplotlib.use("agg")
    import matplotlib.pyplot as plt

    from circuitbook.widgets import explore

    with pytest.raises(ValueError, match="drew 0 matplotlib figures"):
        explore(lambda a=1: None, a=(0, 2))
    with pytest.raises(ValueError, match="drew 2 matplotlib figures"):
        explore(lambda a=1: (plt.figure(), plt.figure()), a=(0, 2))
    assert plt.get_fignums() == [], "figures of a failed render are closed"


@pytest.mark.parametrize("sizes", [[1024], [151, 41], [3, 2, 8, 6], [9, 2, 4], [6, 5], [2], [64]])
def test_static_grid_stays_within_the_cap_and_keeps_the_start(sizes):
    from circuitbook.widgets.explorer import MAX_STATES, make_control, static_grid

    controls = [make_control(f"c{i}", (0, n - 1, 1), default=n // 3) for i, n in enumerate(sizes)]
    grid = static_grid(controls)
    states = 1
    for c, g in zip(controls, grid):
        states *= len(g)
        assert c.start in g and g == sorted(set(g)) and all(0 <= i < len(c.values) for i in g)
        if len(g) > 2:
            assert g[0] == 0 and g[-1] == len(c.values) - 1, "a coarsened slider keeps its ends"
    assert states <= MAX_STATES
    assert states >= min(MAX_STATES // 2, math.prod(sizes)), "most of the budget is used"
