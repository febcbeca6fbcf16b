"""The showcase widgets as a reader meets them on the built site (issue 31's rough edges):

- the lab, on an empty token box, clears its predictions, loss and path expansion;
- its prediction bars are probabilities on a 0-1 scale (a bar's share of its track is the
  probability it shows), not scaled to the top value;
- junk typed into it ("hello t3 99 t70 5,6") is read as far as it goes, and the widget says
  which pieces it dropped and why;
- "random tokens, repeated" draws a fresh sequence on every click and on every page load;
- a lab whose weights do not load says so, instead of "loading" forever;
- the toy model's stepper keeps the ids a reader typed ("t1" is not relabelled as the
  text's word for id 1);
- in the dark theme the lab, the stepper and the builder sit on the page's dark background,
  not in a light box, and the lab's attention maps are transparent where attention is zero;
- at 390 px the composition builder lays its table out as one card per term, with no
  sideways scroll and no word broken across lines; at 1280 it is a table.
"""

from __future__ import annotations

import json
import re

import pytest
from test_browser import EXPLAINERS, SITE, Log, offline_context, open_page, server, watch  # noqa: F401

LAB = "book/induction/02_lab.html"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / LAB).exists(),
                       reason=f"lab page not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]


def _open(browser, server, path, width=1280, scheme="light", block=None):  # noqa: F811
    log = Log()
    context = offline_context(browser, log, color_scheme=scheme)
    if block:  # a file the site is missing: every request for it fails
        context.route(block, lambda route: route.abort("failed"))
    page = watch(context.new_page(), log)
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, server, path)
    # the widgets these tests look at, drawn (not waiting on the page's other views)
    try:
        page.wait_for_function(WIDGETS_DRAWN_JS, arg=path, timeout=30_000)
        rendered = True
    except Exception:  # noqa: BLE001 - playwright's TimeoutError; the test says what is missing
        rendered = False
    return context, page, log, rendered


WIDGETS_DRAWN_JS = """(path) => path.endsWith('02_lab.html')
  ? !!document.querySelector('.cb-lab .cb-lab-status, .cb-lab .cb-lab-input')
  : document.querySelectorAll('.cb-stepper .cb-body').length === 2 && !!document.querySelector('.cb-builder .cb-terms tr')"""


@pytest.fixture
def lab(browser, server):  # noqa: F811
    context, page, log, rendered = _open(browser, server, LAB)
    assert rendered, f"{LAB}: the lab did not render"
    page.wait_for_function("() => { const r = document.querySelector('.cb-lab'); return r && r.cbLab; }",
                           timeout=30_000)
    yield page.locator(".cb-lab")
    assert not log.console, log.console
    context.close()


def _type(box, text: str):
    box.fill(text)
    box.dispatch_event("change")


def test_lab_clears_everything_on_empty_input(lab):
    for part in ("predictions", "loss", "paths"):
        assert lab.locator(f".cb-lab-{part} .cb-caption").count() > 0, f"the lab starts with no {part}"
    _type(lab.locator(".cb-lab-input"), "")
    assert "no tokens yet" in lab.locator(".cb-lab-strip").inner_text()
    for part in ("heads", "predictions", "loss", "paths"):
        box = lab.locator(f".cb-lab-{part}")
        assert box.evaluate("(e) => e.children.length") == 0, f"{part} kept what the old sequence drew"
        assert box.evaluate("(e) => Object.keys(e.dataset)") == [], f"{part} kept its old numbers"
    # and a sequence typed again draws again
    _type(lab.locator(".cb-lab-input"), "t1 t2 t3 t1 t2")
    assert lab.locator(".cb-lab-predictions .cb-bar").count() == 5


def test_lab_draws_probabilities_on_a_zero_to_one_scale(lab):
    _type(lab.locator(".cb-lab-input"), "t5 t9 t13 t2 t40")  # no repeat: a spread prediction
    probs = [p for _, p in json.loads(lab.locator(".cb-lab-predictions").get_attribute("data-probabilities"))]
    shares = lab.locator(".cb-lab-predictions .cb-bar").evaluate_all(
        "(bars) => bars.map((b) => b.getBoundingClientRect().width / b.parentElement.getBoundingClientRect().width)")
    shown = [float(t) for t in lab.locator(".cb-lab-predictions .cb-bar-value").all_inner_texts()]
    assert probs[0] < 0.9, f"the test needs a top prediction well under 1, got {probs[0]}"
    track = lab.locator(".cb-lab-predictions .cb-bar-track").first.evaluate("(e) => e.getBoundingClientRect().width")
    for p, share, text in zip(probs, shares, shown):
        assert abs(share - p) <= 1.5 / track, f"a bar of probability {p:.3f} fills {share:.3f} of its track"
        assert abs(text - p) <= 0.005
    assert shares[0] < 0.95, "the top bar is drawn full width though its probability is below 1"


def test_lab_says_which_typed_tokens_it_dropped(lab):
    _type(lab.locator(".cb-lab-input"), "hello t3 99 t70 5,6")
    assert lab.locator(".cb-lab-input").input_value() == "t3 t5 t6"
    note = lab.locator(".cb-lab-note").inner_text()
    assert '"hello" (not a token)' in note and '"99", "t70" (past t63)' in note, note
    lab.locator(".cb-lab-random").click()  # a sequence it made itself: nothing to say
    assert lab.locator(".cb-lab-note").inner_text() == ""


def test_lab_palette_refuses_a_token_past_a_full_context(lab):
    """At 64 tokens a click in the palette adds nothing and says why (it used to drop the first
    token without a word, while the typed box says what it cut)."""
    full = " ".join(f"t{i % 64}" for i in range(64))
    _type(lab.locator(".cb-lab-input"), full)
    palette = lab.locator(".cb-lab-palette")
    palette.locator("summary").click()
    palette.locator(".cb-lab-add[data-token='7']").click()
    assert lab.locator(".cb-lab-input").input_value() == full, "a click past the context changed the sequence"
    assert "context is full (64 tokens)" in lab.locator(".cb-lab-note").inner_text()
    lab.locator(".cb-lab-back").click()
    palette.locator(".cb-lab-add[data-token='7']").click()
    assert lab.locator(".cb-lab-input").input_value().split() == full.split()[:63] + ["t7"]


def _draw(page) -> list[str]:
    page.locator(".cb-lab-random").click()
    tokens = page.locator(".cb-lab-input").input_value().split()
    n = len(tokens) // 2
    assert tokens[:n] == tokens[n:] and 16 <= n <= 32, tokens
    return tokens


def test_lab_draws_a_fresh_sequence_on_each_click_and_each_load(browser, server):  # noqa: F811
    draws = []
    for _ in range(2):  # two readers opening the page
        context, page, log, rendered = _open(browser, server, LAB)
        try:
            assert rendered, f"{LAB}: the lab did not render"
            page.wait_for_function("() => document.querySelector('.cb-lab-random')", timeout=30_000)
            draws += [_draw(page), _draw(page)]
            assert not log.console, log.console
        finally:
            context.close()
    assert len({" ".join(d) for d in draws}) == 4, "two draws gave the same sequence"


def test_lab_says_when_its_weights_do_not_load(browser, server):  # noqa: F811
    context, page, log, _ = _open(browser, server, LAB, block="**/_static/lab/*.js")
    try:
        status = page.locator(".cb-lab .cb-lab-status")
        status.wait_for(timeout=30_000)
        page.wait_for_function("() => /could not load/.test(document.querySelector('.cb-lab-status').textContent)",
                               timeout=10_000)
        text = status.inner_text()
        assert re.search(r"could not load the model: the weights of toy-2l did not load from \S*_static/lab/toy-2l\.js",
                         text), text
    finally:
        context.close()


def test_toy_stepper_keeps_the_ids_a_reader_typed(browser, server):  # noqa: F811
    context, page, log, rendered = _open(browser, server, EXPLAINERS)
    try:
        assert rendered, f"{EXPLAINERS}: the widgets did not render"
        stepper = page.locator(".cb-stepper").nth(1)  # the toy model's (live) stepper
        words = stepper.locator("text.cb-label").evaluate_all("(ts) => ts.map((t) => t.textContent)")
        assert any(not re.fullmatch(r"t\d+", w) for w in words), "the toy stepper starts on the text's words"
        typed = [f"t{i}" for i in range(40)] + ["t5"]  # most of the text's ids are among t0 to t39
        _type(stepper.locator(".cb-stepper-input"), " ".join(typed))
        shown = stepper.locator("text.cb-label").evaluate_all("(ts) => ts.map((t) => t.textContent)")
        assert shown == typed, f"typed ids were relabelled: {[s for s, t in zip(shown, typed) if s != t][:5]}"
        assert stepper.locator(".cb-stepper-input").input_value() == " ".join(typed)
        for _ in range(4):
            stepper.locator(".cb-next").click()
        body = stepper.locator(".cb-body").inner_text()
        assert '"t6"' in body, body  # the token after the earlier t5, as typed
        # words are still read as words, and shown as typed
        _type(stepper.locator(".cb-stepper-input"), "Mr t1 Mr")
        assert stepper.locator("text.cb-label").evaluate_all("(ts) => ts.map((t) => t.textContent)") == \
            ["Mr", "t1", "Mr"]
        assert not log.console, log.console
    finally:
        context.close()


BACKGROUND_JS = """(selector) => [...document.querySelectorAll(selector)].map((root) => {
  // the colour the widget is drawn on: the first opaque background from it up to the page
  for (let n = root; n && n.nodeType === 1; n = n.parentElement) {
    const c = getComputedStyle(n).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (c.length === 3 || c[3] >= 0.99) return c.slice(0, 3);
  }
  return [255, 255, 255];
})"""


def _luminance(rgb) -> float:
    def f(v):
        v /= 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = rgb
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b)


@pytest.mark.parametrize("path, selector", [(LAB, ".cb-lab"), (EXPLAINERS, ".cb-stepper"), (EXPLAINERS, ".cb-builder")])
def test_widgets_follow_the_dark_theme(browser, server, path, selector):  # noqa: F811
    context, page, log, rendered = _open(browser, server, path, scheme="dark")
    try:
        assert rendered, f"{path}: the widgets did not render"
        assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
        backgrounds = page.evaluate(BACKGROUND_JS, selector)
        assert backgrounds, f"no {selector} on {path}"
        light = [bg for bg in backgrounds if _luminance(bg) > 0.2]
        assert not light, f"{selector} sits in a light box in the dark theme: {light}"
        if selector == ".cb-lab":  # zero attention (above the diagonal) shows the page through
            alpha = page.evaluate("""() => { const c = document.querySelector('.cb-lab-pattern');
              return c.getContext('2d').getImageData(c.width - 1, 0, 1, 1).data[3]; }""")
            assert alpha == 0, f"a zero of the attention map is painted (alpha {alpha})"
        # and back to light with the theme's own switch: the box follows
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        assert all(_luminance(bg) > 0.8 for bg in page.evaluate(BACKGROUND_JS, selector))
    finally:
        context.close()


WORDS_JS = """(root) => {
  // every word of the table's text whose letters sit on more than one line (the parts of a
  // hyphenated word count as words: a line may end at its hyphen)
  const broken = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    for (const m of t.textContent.matchAll(/[^\\s-]+-?/g)) {
      const r = document.createRange();
      r.setStart(t, m.index);
      r.setEnd(t, m.index + m[0].length);
      const tops = new Set([...r.getClientRects()].filter((b) => b.width > 0).map((b) => Math.round(b.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
  }
  return broken;
}"""


@pytest.mark.parametrize("width", [390, 1280])
def test_builder_table_reflows_without_breaking_words(browser, server, width):  # noqa: F811
    context, page, log, rendered = _open(browser, server, EXPLAINERS, width=width)
    try:
        assert rendered, f"{EXPLAINERS}: the widgets did not render"
        builder = page.locator(".cb-builder").first
        table = builder.locator(".cb-terms")
        scroll = builder.locator(".cb-table-scroll")
        overflow = scroll.evaluate("(e) => e.scrollWidth - e.clientWidth")
        assert overflow <= 1, f"at {width} px the builder's table scrolls sideways by {overflow} px"
        broken = table.evaluate(WORDS_JS)
        assert not broken, f"at {width} px words are broken across lines: {broken[:8]}"
        header = builder.locator(".cb-terms-head").evaluate("(e) => getComputedStyle(e).display")
        if width == 390:  # one card per term: the header is not shown, each cell says its column
            assert header == "none"
            label = builder.locator("td.cb-formula").first.evaluate(
                "(e) => getComputedStyle(e, '::before').content")
            assert "formula" in label, label
        else:
            assert header == "table-row"
        assert not log.console, log.console
    finally:
        context.close()
