"""The ledger page (issue 40) in Chromium, offline: a reader can filter, search, sort and page
through it; it uses the column's width, stays a few screens tall on a phone, its links are
readable in both themes, and the site has a favicon.

Runs on a built site (``SITE_DIR``, as the other browser tests); a partial build is enough:
``build_site.py --out _build/ledger --only book/ledger`` and ``SITE_DIR=_build/ledger/_build/html``.
In a partial build the chapters are not pages of the site, so the ledger's chapter names are
not links; the contrast test then also measures a link put into a ledger cell, which takes the
ledger's link style exactly as the real ones do.
"""

from __future__ import annotations

import re

import pytest
from test_browser import SITE, Log, offline_context, server, watch  # noqa: F401
from test_theme import CONTRAST_JS

LEDGER = "book/ledger.html"
PAGE = 50  # rows shown at a time (scripts/ledger_static/claims-ledger.js)
# At 390 px a row is a card of at most about 12 lines (chapter and kind, a statement of up to
# ~60 words, the value, the null and its test) at 24 px a line: under 300 px. One page of 50
# cards is then at most 15,000 px, and the page's own text above the table (the introduction
# and the three kinds, at phone width) about 3,000 px more: 20,000 px bounds the page with
# room to spare, and is a tenth of the 175,900 px of the whole table as cards.
PHONE_HEIGHT_BOUND = 20_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / LEDGER).exists(),
                       reason=f"no ledger page at {SITE / LEDGER}: build the site (or set SITE_DIR)"),
]

ROWS_JS = """(all) => [...document.querySelectorAll('.claims-ledger table.ledger-table tbody tr')]
  .filter((tr) => all || !tr.hidden).map((tr) => {
    const t = (i) => tr.cells[i].textContent.replace(/\\s+/g, ' ').trim();
    const link = tr.cells[0].querySelector('a, .std-doc');
    return { chapter: link.textContent.trim(), kind: t(1), statement: t(2), value: t(3), text: t(0) + ' ' + t(1) + ' ' + t(2) + ' ' + t(3) + ' ' + t(4) };
  })"""


def open_ledger(browser, server, *, width=1280, scheme="light", js=True):  # noqa: F811
    log = Log()
    context = offline_context(browser, log, color_scheme=scheme, java_script_enabled=js)
    page = watch(context.new_page(), log)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{server}/{LEDGER}", wait_until="load")
    if js:
        page.wait_for_selector(".claims-ledger.ledger-enhanced", timeout=10_000)
    return context, page, log


def shown(page):
    return page.evaluate(ROWS_JS, False)


def status_numbers(page) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", page.locator(".ledger-status").inner_text())]


def show_all(page):
    button = page.locator(".ledger-pager button", has_text="Show all")
    if button.is_visible():
        button.click()


@pytest.fixture(scope="module")
def ledger(browser, server):  # noqa: F811
    context, page, log = open_ledger(browser, server)
    yield page, log, page.evaluate(ROWS_JS, True)
    context.close()


def test_the_page_loads_cleanly_and_shows_one_page_of_rows(ledger):
    page, log, rows = ledger
    assert len(rows) > 100, "the ledger has hardly any rows"
    assert not log.console and not log.http_errors and not log.external, (log.console, log.http_errors, log.external)
    assert len(shown(page)) == PAGE
    assert status_numbers(page) == [PAGE, len(rows)]
    page.locator(".ledger-pager button", has_text="more").click()
    assert len(shown(page)) == 2 * PAGE
    page.locator("#ledger-1-q").fill("")  # a filter change goes back to the first page
    page.locator(".ledger-controls button", has_text="Clear").click()
    assert len(shown(page)) == PAGE


def test_controls_are_labelled_and_sort_buttons_carry_aria_sort(ledger):
    page, _, _ = ledger
    controls = page.evaluate("""() => [...document.querySelectorAll('.ledger-controls select, .ledger-controls input')]
      .map((c) => ({ id: c.id, label: c.labels.length ? c.labels[0].textContent : '' }))""")
    assert [c["label"] for c in controls] == ["Chapter", "Kind", "Search"]
    headers = page.evaluate("""() => [...document.querySelectorAll('.ledger-table thead th')].map((th) => ({
      sort: th.getAttribute('aria-sort'), button: !!th.querySelector('button'), text: th.textContent.trim() }))""")
    sortable = {h["text"].strip(" \u25b2\u25bc"): h for h in headers if h["button"]}
    assert set(sortable) == {"chapter", "kind", "statement", "value"}
    assert all(h["sort"] in ("none", "ascending", "descending") for h in sortable.values())
    page.locator("button.ledger-sort[data-column=statement]").focus()
    page.keyboard.press("Enter")
    assert page.locator("th:has(button[data-column=statement])").get_attribute("aria-sort") == "ascending"
    page.keyboard.press("Enter")
    assert page.locator("th:has(button[data-column=statement])").get_attribute("aria-sort") == "descending"


def test_filtering_by_chapter_and_kind_leaves_only_such_rows(ledger):
    page, _, rows = ledger
    page.locator(".ledger-controls button", has_text="Clear").click()
    pairs = {}
    for r in rows:
        pairs[(r["chapter"], r["kind"])] = pairs.get((r["chapter"], r["kind"]), 0) + 1
    (chapter, kind), expected = max(((k, n) for k, n in pairs.items() if k[1] == "finding"), key=lambda kn: kn[1])
    page.locator("#ledger-1-chapter").select_option(chapter)
    page.locator("#ledger-1-kind").select_option(kind)
    show_all(page)
    visible = shown(page)
    assert len(visible) == expected > 0
    assert {(r["chapter"], r["kind"]) for r in visible} == {(chapter, kind)}
    assert status_numbers(page)[0] == expected, page.locator(".ledger-status").inner_text()
    page.locator(".ledger-controls button", has_text="Clear").click()


def test_search_narrows_the_rows(ledger):
    page, _, rows = ledger
    page.locator(".ledger-controls button", has_text="Clear").click()
    word = "rounding"
    expected = [r for r in rows if word in r["text"].lower()]
    assert 0 < len(expected) < len(rows)
    page.locator("#ledger-1-q").fill(word)
    show_all(page)
    visible = shown(page)
    assert len(visible) == len(expected)
    assert all(word in r["text"].lower() for r in visible)
    assert status_numbers(page)[0] == len(expected), page.locator(".ledger-status").inner_text()
    page.locator("#ledger-1-q").fill("rounding bound float32")  # every word must occur
    narrower = shown(page)
    assert 0 < len(narrower) < len(expected)
    page.locator("#ledger-1-q").fill("zzqx no such words")
    assert shown(page) == [] and "No statement matches" in page.locator(".ledger-status").inner_text()
    page.locator(".ledger-controls button", has_text="Clear").click()


def _number(value: str) -> float | None:
    m = re.match(r"[-+\u2212]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", value, re.I)
    return float(m.group(0).replace("\u2212", "-")) if m else None


def test_sorting_orders_the_rows(ledger):
    page, _, rows = ledger
    page.locator(".ledger-controls button", has_text="Clear").click()
    chapters = list(dict.fromkeys(r["chapter"] for r in rows))

    def sort(column, direction):
        button = page.locator(f"button.ledger-sort[data-column={column}]")
        for _ in range(2):
            if page.locator(f"th:has(button[data-column={column}])").get_attribute("aria-sort") == direction:
                break
            button.click()
        assert page.locator(f"th:has(button[data-column={column}])").get_attribute("aria-sort") == direction
        show_all(page)
        got = shown(page)
        assert len(got) == len(rows)
        return got

    got = sort("value", "ascending")
    numbers = [_number(r["value"]) for r in got]
    k = sum(n is not None for n in numbers)
    assert k > 0 and all(n is not None for n in numbers[:k]), "numbers come first"
    assert numbers[:k] == sorted(numbers[:k])
    got = sort("value", "descending")
    numbers = [_number(r["value"]) for r in got]
    assert numbers[:k] == sorted(numbers[:k], reverse=True)

    got = sort("chapter", "descending")
    order = [chapters.index(r["chapter"]) for r in got]
    assert order == sorted(order, reverse=True) and order[0] > order[-1]
    got = sort("kind", "ascending")
    assert [r["kind"] for r in got] == sorted(r["kind"] for r in rows)
    got = sort("statement", "ascending")
    # in the browser's own collation (what a reader's locale sorts by), pairwise
    unsorted = page.evaluate("""(xs) => xs.filter((x, i) => i > 0 &&
        xs[i - 1].localeCompare(x, undefined, { sensitivity: 'base', numeric: true }) > 0).length""",
                             [r["statement"] for r in got])
    assert unsorted == 0 and [r["statement"] for r in got] != [r["statement"] for r in rows]
    page.locator(".ledger-controls button", has_text="Clear").click()


def test_the_table_fills_the_content_width_at_1280(ledger):
    page, _, _ = ledger
    m = page.evaluate("""() => {
      const article = document.querySelector('.bd-article');
      const s = getComputedStyle(article);
      const content = article.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
      return { content, table: document.querySelector('.ledger-table').getBoundingClientRect().width,
               page: document.documentElement.scrollWidth, viewport: innerWidth };
    }""")
    print(f"\nat 1280 px: table {m['table']:.0f} px, content column {m['content']:.0f} px")
    assert m["content"] > 700
    assert abs(m["table"] - m["content"]) <= 1, m
    assert m["page"] <= m["viewport"], m


def test_the_phone_page_is_a_few_screens_tall(browser, server):  # noqa: F811
    context, page, log = open_ledger(browser, server, width=390)
    try:
        m = page.evaluate("""() => ({ height: document.documentElement.scrollHeight,
                                       width: document.documentElement.scrollWidth })""")
        print(f"\nat 390 px: page {m['height']} px tall (bound {PHONE_HEIGHT_BOUND})")
        assert m["height"] <= PHONE_HEIGHT_BOUND
        assert m["width"] <= 390, "the page scrolls sideways on a phone"
        assert not log.console and not log.http_errors, (log.console, log.http_errors)
    finally:
        context.close()


def test_without_javascript_the_whole_table_shows(browser, server, ledger):  # noqa: F811
    _, _, rows = ledger
    context, page, _ = open_ledger(browser, server, js=False)
    try:
        assert page.locator(".ledger-controls").count() == 0
        assert len(shown(page)) == len(rows)
    finally:
        context.close()


@pytest.mark.parametrize("theme", ["light", "dark", "dark-toggle"])
def test_links_and_text_have_aa_contrast(browser, server, theme):  # noqa: F811
    """In the reader's light and dark system themes, and dark by the theme's own switch."""
    context, page, _ = open_ledger(browser, server, scheme="dark" if theme == "dark" else "light")
    try:
        if theme == "dark-toggle":
            page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; "
                          "document.documentElement.dataset.mode = 'dark'; }")
        assert page.evaluate("() => document.documentElement.dataset.theme") == theme.removesuffix("-toggle")
        show_all(page)  # every row's links, not only the first page's
        # a link in a table row and one in the text above it, styled as the ledger's links are
        # (in a partial build the chapter names are not links)
        page.evaluate("""() => {
          const add = (where) => { const a = document.createElement('a'); a.href = '#'; a.className = 'ledger-probe';
                                   a.textContent = 'a link'; where.appendChild(a); };
          add(document.querySelector('.ledger-table tbody tr:not([hidden]) td p'));
          add(document.querySelector('.ledger-summary'));
        }""")
        links = page.evaluate(CONTRAST_JS, ".claims-ledger a")
        real = [r for r in links if "ledger-probe" not in r.get("cls", "")]
        print(f"\n{theme}: {len(real)} ledger links, lowest ratio "
              f"{min(r['ratio'] for r in links):.2f}")
        assert len(links) >= 2
        low = [r for r in links if "error" in r or r["ratio"] < 4.5]
        assert not low, low[:5]
        text = page.evaluate(CONTRAST_JS, ".claims-ledger")
        low = [r for r in text if "error" in r or r["ratio"] < (3.0 if r["large"] else 4.5)]
        assert not low, low[:5]
    finally:
        context.close()


def test_the_site_has_a_favicon(browser, server):  # noqa: F811
    context, page, log = open_ledger(browser, server)
    try:
        href = page.evaluate("() => { const l = document.querySelector('link[rel~=icon]'); return l && l.href; }")
        assert href, "no <link rel=icon>"
        response = page.request.get(href)
        assert response.status == 200, (href, response.status)
        assert response.headers["content-type"].startswith("image/"), response.headers["content-type"]
        size = page.evaluate("""(src) => new Promise((ok) => { const i = new Image();
            i.onload = () => ok([i.naturalWidth, i.naturalHeight]); i.onerror = () => ok(null); i.src = src; })""", href)
        assert size and size[0] > 0, f"{href} does not decode as an image"
        # the site's root index.html is a bare redirect with no <link rel=icon>: a browser asks
        # for /favicon.ico there
        root = page.request.get(f"{server}/favicon.ico")
        assert root.status == 200 and root.body()[:4] == b"\x00\x00\x01\x00", "no favicon.ico at the root"
        page.goto(f"{server}/", wait_until="load")
        page.wait_for_url("**/book/intro.html")
        assert page.evaluate("() => !!document.querySelector('link[rel~=icon]')")
        assert not log.http_errors, log.http_errors
    finally:
        context.close()
