"""The widgets fit their boxes on the built site, on a laptop (1280 px) and a phone (390 px).

- The induction stepper draws every token whole (no "Grunnin…"): each label in its strip is
  the token itself, and a long sentence scrolls inside the strip instead of widening the page.
- No explore widget, no explainer and no hover figure (``circuitbook.viz.heatmap``) is wider
  than its container, and none runs past the viewport's right edge.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser import EXPLAINERS, SITE, Log, offline_context, open_page, server, watch  # noqa: F401
from test_explore import explore_pages
from test_hover import plotly_pages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

WIDTHS = [1280, 390]

FIT_JS = """(selector) => [...document.querySelectorAll(selector)].map((w) => {
  const r = w.getBoundingClientRect(), p = w.parentElement.getBoundingClientRect();
  return { cls: String(w.className).slice(0, 40), classes: String(w.className), width: r.width, right: r.right, parentRight: p.right + 1,
           viewport: document.documentElement.clientWidth + 1, scroll: w.scrollWidth, client: w.clientWidth + 1 };
})"""


def _open(browser, server, path, width):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    page.set_viewport_size({"width": width, "height": 900})
    assert open_page(page, server, path), f"{path}: widgets did not render"
    return context, page, log


def _overflows(boxes, scrolls_inside: tuple[str, ...] = ()) -> list[str]:
    """Boxes wider than their container or the viewport, or whose content is wider than they
    are; those whose class starts with one of ``scrolls_inside`` may scroll inside themselves."""
    return [f"{b['cls']}: {b['width']:.0f} px wide, right edge {b['right']:.0f} (container {b['parentRight']:.0f}, "
            f"viewport {b['viewport']:.0f}), content {b['scroll']} in {b['client']:.0f}"
            for b in boxes if b["right"] > min(b["parentRight"], b["viewport"])
            or (b["scroll"] > b["client"] and not any(c in b["classes"].split() for c in scrolls_inside))]


def _stepper_tokens() -> list[list[str]]:
    """The text tokens of every stepper saved with the page (the page has more than one: the
    SmolLM2 stepper saves its tokens, the live toy stepper its token ids and their words)."""
    html = (SITE / EXPLAINERS).read_text()
    state = json.loads(re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>',
                                 html, re.S).group(1))["state"]
    tokens = []
    for widget in state.values():
        s = widget["state"]
        if "sequences" in s.get("data", {}):    # precomputed (SmolLM2): the tokens themselves
            tokens.append(s["data"]["sequences"]["text"]["tokens"])
        elif s.get("model_name") and s.get("words"):  # live (toy-2l): ids, named by `words`
            tokens.append([s["words"][str(i)] for i in s["tokens"]["text"]])
    return tokens


@pytest.mark.parametrize("width", WIDTHS)
def test_stepper_draws_every_token_whole_inside_its_box(browser, server, width):  # noqa: F811
    context, page, log = _open(browser, server, EXPLAINERS, width)
    try:
        steppers, saved = page.locator(".cb-stepper"), _stepper_tokens()
        assert steppers.count() == len(saved) >= 1
        for i in range(steppers.count()):
            labels = steppers.nth(i).locator("text.cb-label").evaluate_all("(ts) => ts.map((t) => t.textContent)")
            assert labels in saved, "the strip's labels are not a sequence's tokens, whole"
        # each label fits inside its own token box
        cut = page.evaluate("""() => [...document.querySelectorAll('.cb-stepper text.cb-label')].filter((t) => {
            const box = t.previousElementSibling.getBBox(), b = t.getBBox();
            return b.x < box.x - 0.5 || b.x + b.width > box.x + box.width + 0.5; }).map((t) => t.textContent)""")
        assert not cut, f"labels wider than their token box: {cut}"
        assert not _overflows(page.evaluate(FIT_JS, ".cb-stepper, .cb-builder"))
        strip = page.evaluate(FIT_JS, ".cb-stepper .cb-scroll")[0]  # it may scroll, inside the stepper
        assert strip["right"] <= min(strip["parentRight"], strip["viewport"]), strip
        assert not log.console, log.console
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", sorted({*explore_pages(), EXPLAINERS, *plotly_pages()}))
def test_widgets_fit_their_container(browser, server, path, width):  # noqa: F811
    context, page, _ = _open(browser, server, path, width)
    try:
        boxes = page.evaluate(FIT_JS, ".cb-explore, .cb-stepper, .cb-builder, .cb-quiz, "
                              ".circuitbook-plotly, .circuitbook-plotly svg.main-svg")
        assert boxes, f"{path}: no widget found"
        # on a phone an explore figure keeps a readable width and scrolls inside its widget
        problems = _overflows(boxes, scrolls_inside=("cb-explore",) if width < 600 else ())
        assert not problems, f"{path} at {width} px:\n" + "\n".join(problems)
    finally:
        context.close()
