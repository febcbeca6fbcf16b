"""The built site as a first-time reader meets it (issue 31), offline, in headless Chromium.

- the menu (☰) and the contents button open at 390 and at 1280 px, and a link from them works;
- on a phone (390 px, one walk of every reader's page): no page scrolls sideways (a failure
  names the elements that stick out), and plotly legends lie in rows under their plot;
- claim records are one line for readers, the numbers one click away, readable in both themes;
- the API reference renders its docstrings (no raw reST, no ``nn.Module`` boilerplate) and its
  pages and the chapters link to each other;
- plotly figures follow the dark theme; CircuitsVis shows tokens as text;
- "Live code" loads thebe from the site and says it needs mybinder.org.

The reader's checks at desktop width (code cells of 79 characters fit, set-up cells folded,
exercises with a note and a folded solution, no stray values or TeX-like text, each page's
weight) read test_browser.py's one visit of every page, and live there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from test_browser import (SITE, Log, chapter_pages, offline_context, open_page, reader_pages, server,  # noqa: F401
                          site_pages, watch)
from test_theme import CONTRAST_JS

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

OVERFLOW_JS = (Path(__file__).with_name("overflow.js")).read_text()
CHAPTER = "book/06_attention.html"  # a chapter with sections, exercises, claims and figures


def _page(browser, width, log=None, **kwargs):
    log = log or Log()
    context = offline_context(browser, log, **kwargs)
    page = watch(context.new_page(), log)
    page.set_viewport_size({"width": width, "height": 900})
    return context, page, log


def _pages_with(marker: str) -> list[str]:
    return [p for p in site_pages() if marker in (SITE / p).read_text(errors="replace")]


# --------------------------------------------------------------------------- navigation

@pytest.mark.parametrize("width", [390, 1280])
def test_the_menu_opens_and_a_link_from_it_navigates(browser, server, width):  # noqa: F811
    context, page, log = _page(browser, width)
    try:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        toggle = page.locator("button.primary-toggle:visible").first
        assert toggle.count() == 1, "no visible menu button"
        links = "#pst-primary-sidebar-modal .bd-links a.reference" if width < 960 else \
            ".bd-sidebar-primary .bd-links a.reference"
        if width < 960:  # a phone: the menu is a dialog
            assert not page.evaluate("() => document.getElementById('pst-primary-sidebar-modal').open")
            toggle.click()
            page.wait_for_function("() => document.getElementById('pst-primary-sidebar-modal').open", timeout=5000)
        else:  # a laptop: the sidebar is shown, and the button folds it away and back
            sidebar = page.locator(".bd-sidebar-primary")
            assert sidebar.is_visible()
            toggle.click()
            page.wait_for_timeout(400)
            assert not sidebar.is_visible() or sidebar.bounding_box()["width"] < 5, "the sidebar did not fold"
            toggle.click()
            page.wait_for_timeout(400)
            assert sidebar.is_visible() and sidebar.bounding_box()["width"] > 100, "the sidebar did not come back"
        target = page.locator(links, has_text=re.compile("Architecture at a glance")).first
        assert target.is_visible(), "the chapter list is not visible in the menu"
        href = target.get_attribute("href")
        target.click()
        page.wait_for_load_state("load")
        assert page.url.split("#")[0].endswith(href.split("#")[0].lstrip("./")), (page.url, href)
        assert not log.console, log.console
    finally:
        context.close()


@pytest.mark.parametrize("width", [390, 1280])
def test_the_contents_button_opens_the_page_toc_and_jumps(browser, server, width):  # noqa: F811
    context, page, log = _page(browser, width)
    try:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        if width >= 1200 and page.locator(".bd-sidebar-secondary .page-toc a").first.is_visible():
            entry = page.locator(".bd-sidebar-secondary .page-toc a").nth(1)  # always shown on wide screens
        else:
            toggle = page.locator("button.secondary-toggle:visible").first
            assert toggle.count() == 1, "no visible contents button"
            toggle.click()
            page.wait_for_function("() => document.getElementById('pst-secondary-sidebar-modal').open",
                                   timeout=5000)
            entry = page.locator("#pst-secondary-sidebar-modal .page-toc a").nth(1)
        assert entry.is_visible()
        fragment = entry.get_attribute("href").split("#")[1]
        entry.click()
        page.wait_for_timeout(600)
        assert urlsplit(page.url).fragment == fragment
        top = page.evaluate(f"() => document.getElementById({json.dumps(unquote(fragment))}).getBoundingClientRect().top")
        assert -5 < top < 450, f"the section is not on screen after the jump (top {top:.0f} px)"
        assert not log.console, log.console
    finally:
        context.close()


# --------------------------------------------------------------------------- a phone

LEGEND_JS = """() => [...document.querySelectorAll('.circuitbook-plotly.js-plotly-plot')].map((d) => {
  const leg = d.querySelector('g.legend');
  const title = d.querySelector('g.g-gtitle text');
  const box = (e) => { if (!e) return null; const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return { id: d.id, svg: box(d.querySelector('svg.main-svg')), legend: box(leg), plot: box(d.querySelector('.draglayer')),
           title: box(title) };
})"""


def _has_legend(path: str) -> bool:
    text = (SITE / path).read_text(errors="replace")
    return "circuitbook-plotly" in text and ('"showlegend"' in text or '"legendgroup"' in text)


@pytest.fixture(scope="module")
def phone(browser, server):  # noqa: F811
    """Every reader's page at 390 px, everything on it rendered (open_page), visited once: the
    page's overflow (OVERFLOW_JS), and on pages with plotly legends where each legend lies."""
    context, page, _ = _page(browser, 390)
    out = {}
    try:
        for path in reader_pages():
            ready = open_page(page, server, path)
            page.wait_for_timeout(200)
            out[path] = {"ready": ready, "overflow": page.evaluate(OVERFLOW_JS),
                         "legends": page.evaluate(LEGEND_JS) if _has_legend(path) else None}
    finally:
        context.close()
    return out


def test_no_page_scrolls_sideways_on_a_phone(phone):
    problems = []
    for path, seen in phone.items():
        found = seen["overflow"]
        if found["scrollWidth"] > found["clientWidth"] + 1:
            problems.append(f"{path}: {found['scrollWidth']} px wide at {found['clientWidth']} px:\n    "
                            + "\n    ".join(found["elements"] or ["(no single element found)"]))
    assert not problems, f"{len(problems)} page(s) scroll sideways at 390 px:\n" + "\n".join(problems)


# --------------------------------------------------------------------------- claim records

@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_claim_records_read_as_one_line_with_the_numbers_a_click_away(browser, server, scheme):  # noqa: F811
    context, page, _ = _page(browser, 1280, color_scheme=scheme)
    try:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        claims = page.locator("details.circuitbook-claim")
        assert claims.count() >= 3
        summary = claims.first.locator("summary").inner_text()
        assert re.match(r"^[≡✔·?] (identity|finding|observation|unfiled) ", summary), summary
        measured = claims.first.locator(".circuitbook-measured")
        assert not measured.is_visible()
        claims.first.locator("summary").click()
        assert measured.is_visible()
        bad = [r for r in page.evaluate(CONTRAST_JS, "details.circuitbook-claim")
               if "error" in r or r["ratio"] < (3.0 if r["large"] else 4.5)]
        assert not bad, f"claim text below WCAG AA contrast in the {scheme} theme: {bad[:4]}"
    finally:
        context.close()


def test_an_exercise_worked_out_is_folded_until_opened_and_its_maths_renders(browser, server):  # noqa: F811
    # the fold is a plain <details> (notebooks.ANSWER_FOLD), so that Jupyter and Colab fold it too;
    # on the site its body, display maths included, must stay out of sight until a click
    context, page, _ = _page(browser, 1280)
    try:
        page.goto(f"{server}/book/08_qk_ov.html", wait_until="load")
        fold = page.locator("details:has(> summary:has-text('Exercise 8.1 worked out'))")
        assert fold.count() == 1
        assert not fold.evaluate("d => d.open")
        body = fold.locator("p").first
        assert not body.is_visible()
        fold.locator("summary").click()
        assert body.is_visible() and "bias" in body.inner_text()
        maths = fold.locator("mjx-container")
        maths.first.wait_for(state="visible", timeout=15000)  # MathJax typeset the display formula
        assert "\\begin" not in fold.inner_text()
    finally:
        context.close()


# --------------------------------------------------------------------------- the API reference

def api_pages() -> list[str]:
    return [p for p in site_pages() if p.startswith("book/api/")]


def test_api_pages_render_their_docstrings(browser, server):  # noqa: F811
    pages = api_pages()
    assert len(pages) >= 20, pages
    context, page, log = _page(browser, 1280)
    problems = []
    try:
        for path in ["book/api.html", *pages]:
            page.goto(f"{server}/{path}", wait_until="load")
            text = page.locator("article").inner_text()
            for raw in ("``", ".. note::", ".. math::", ":class:`", ":func:`", ":doc:`",
                        "Define the computation performed at every call"):
                if raw in text:
                    problems.append(f"{path}: shows {raw!r}")
            found = page.evaluate(OVERFLOW_JS)
            wide = page.evaluate("""() => [...document.querySelectorAll('article dl.py dt, article dl.py dd')]
              .filter((e) => e.scrollWidth > e.clientWidth + 1).length""")
            if found["scrollWidth"] > found["clientWidth"] + 1 or wide:
                problems.append(f"{path}: {wide} entries scroll sideways at 1280 px; {found['elements'][:3]}")
        page.goto(f"{server}/book/api/circuitbook.heads.html", wait_until="load")
        assert page.locator("dl.py.function").count() >= 5
        # signatures are wrapped: a long one is written one parameter a line
        assert page.locator("dl.py dt .sig-param").count() > 0
        assert page.locator("dl.py dt dl, dl.py dt .sig-param-decl, dt.sig-wrap, dt.sig").first.count() == 1
        assert not log.console, log.console
    finally:
        context.close()
    assert not problems, "\n".join(problems)


def test_chapters_and_api_pages_link_each_other():
    linked_from_api = set()
    for path in api_pages():
        html = (SITE / path).read_text()
        linked_from_api |= set(re.findall(r'href="\.\./((?:induction/)?\d\d_\w+)\.html"', html))
    assert len(linked_from_api) >= 10, sorted(linked_from_api)
    to_api = [p for p in chapter_pages() if 'class="api-taught-here"' in (SITE / p).read_text()]
    assert len(to_api) >= 10, to_api
    for path in to_api:
        html = (SITE / path).read_text()
        block = re.search(r'<p class="api-taught-here">(.*?)</p>', html, re.S).group(1)
        hrefs = re.findall(r'href="([^"]+)"', block)
        assert hrefs and all("api/circuitbook." in h for h in hrefs), (path, hrefs[:3])


# --------------------------------------------------------------------------- figures

def _plot_colours(page) -> list[dict]:
    return page.evaluate("""() => [...document.querySelectorAll('.circuitbook-plotly.js-plotly-plot')].map((d) => {
      const bg = d.querySelector('svg.main-svg rect.bg');
      const text = d.querySelector('svg.main-svg text');
      return { paper: getComputedStyle(d.querySelector('svg.main-svg')).backgroundColor,
               text: text ? getComputedStyle(text).fill : null };
    })""")


def test_plotly_figures_follow_the_dark_theme(browser, server):  # noqa: F811
    from test_hover import plotly_pages

    path = plotly_pages()[0]
    context, page, _ = _page(browser, 1280, color_scheme="dark")
    try:
        assert open_page(page, server, path)
        dark = _plot_colours(page)
        assert dark and all(c["paper"] in ("rgba(0, 0, 0, 0)", "transparent") for c in dark), dark
        assert all(c["text"] and _luminance(c["text"]) > 0.5 for c in dark), dark
        page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
        page.wait_for_timeout(800)
        light = _plot_colours(page)
        assert all(c["paper"] == "rgb(255, 255, 255)" and _luminance(c["text"]) < 0.3 for c in light), light
    finally:
        context.close()


def _luminance(colour: str) -> float:
    r, g, b = (int(x) for x in re.findall(r"\d+", colour)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_plotly_legends_reflow_on_a_phone(phone):
    pages = [p for p, seen in phone.items() if seen["legends"] is not None]
    assert "book/19_training.html" in pages, pages
    problems = []
    for path in pages:
        if not phone[path]["ready"]:
            problems.append(f"{path}: its figures did not all render at 390 px")
        for fig in phone[path]["legends"]:
            if fig["legend"]:
                l, t, r, b = fig["legend"]
                if r > fig["svg"][2] + 1 or (fig["plot"] and t < fig["plot"][3] - 1 and l < fig["plot"][2]):
                    problems.append(f"{path} {fig['id']}: the legend {fig['legend']} sits over or beside the "
                                    f"plot {fig['plot']} in a {fig['svg'][2] - fig['svg'][0]:.0f} px figure")
            if fig["title"] and (fig["title"][0] < fig["svg"][0] - 1 or fig["title"][2] > fig["svg"][2] + 1):
                problems.append(f"{path} {fig['id']}: the title runs out of the figure {fig['title']}")
    assert not problems, "\n".join(problems)


def test_circuitsvis_shows_tokens_as_text(browser, server):  # noqa: F811
    pages = _pages_with("circuitbook-circuitsvis")
    assert pages
    for path in pages:
        for props in re.findall(r'cv\["AttentionHeads"\], (\{.*?\})\);', (SITE / path).read_text()):
            tokens = json.loads(props)["tokens"]
            assert not any(("\u0120" in t or "\u010a" in t) for t in tokens), f"{path}: {tokens[:12]}"
    context, page, _ = _page(browser, 1280)
    try:
        assert open_page(page, server, pages[0])
        shown = page.locator(".circuitbook-circuitsvis").first.inner_text()
        assert "\u0120" not in shown and "\u010a" not in shown, shown[:200]
    finally:
        context.close()


# --------------------------------------------------------------------------- Live code

def test_live_code_loads_thebe_from_the_site_and_names_mybinder(browser, server):  # noqa: F811
    context, page, log = _page(browser, 1280)
    requests = []
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        button = page.locator("button.btn-launch-thebe, .launch-thebe, button[title*='mybinder']").first
        assert button.count() == 1, "no Live code button"
        page.locator(".dropdown-launch-buttons button").first.click()
        label = button.inner_text()
        assert "mybinder.org" in label, label
        button.click()
        page.wait_for_function("() => typeof window.thebelab !== 'undefined'", timeout=30_000)
        page.wait_for_timeout(1500)
        thebe = [u for u in requests if "thebe" in u and u.endswith(".js")]
        assert thebe and all(u.startswith(server) for u in thebe), thebe
        assert not [u for u in log.external if "unpkg" in u or "jsdelivr" in u or "cdnjs" in u], log.external
        text = page.locator(".thebe-launch-button").first.inner_text()
        assert "mybinder.org" in text and "CDN" not in text, text
        # offline, mybinder.org cannot be reached: the button says so, plainly
        page.wait_for_function("() => /Could not reach mybinder.org/.test("
                               "document.querySelector('.thebe-launch-button').textContent)", timeout=30_000)
        assert not [e for e in log.console if "uncaught" in e], log.console
    finally:
        context.close()
