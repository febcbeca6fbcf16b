"""Accessibility of the built site (issue 40), offline, in headless Chromium.

- **axe-core** (installed from npm: ``npm ci``, which ``make test-js`` runs) checks every page of
  the site, in the light theme and in the dark one, against the WCAG 2 A and AA rules and its
  best practices, once every lazily loaded figure, view and widget is drawn. A violation of
  impact "serious" or "critical" fails, named by page, theme, rule and element; the milder
  ones (a missing landmark, a heading level skipped) are printed. Without axe-core the test
  skips, saying so. The two themes differ only in colours (the theme's CSS variables, the
  figures' and widgets' palettes), so the dark pass runs the rules that read colours.
- **What axe cannot see**, each a complaint of the issue:
  - the exercise index links each exercise to the exercise itself, and following the link
    brings it to the top of the window;
  - the search box's magnifier does not cover the first letter of the query;
  - the live-code button's offline message stays inside its box;
  - the header's buttons show a focus ring when reached with the keyboard;
  - the attention maps are as readable in the dark theme as in the light one, and their zeros
    show the page (no white squares on a dark page): the two labs' (their own paint(), weight by
    weight) and CircuitsVis's (on the first page that shows one, chapter 6's SmolLM2 heads: what
    the reader sees, pixel by pixel).
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager

import pytest
from test_browser import (ROOT, SITE, Log, chapter_pages, notebook_source, offline_context, open_page,  # noqa: F401
                          reader_pages, server, watch)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
needs_axe = pytest.mark.skipif(not AXE.exists(), reason=(
    "axe-core is not installed (node_modules/axe-core): run `npm ci` (make test-js does) to check the "
    "site's accessibility"))

# axe's rule sets: WCAG 2.0 and 2.1 (whose 2.5.3 asks that a control's spoken name hold its visible
# text: label-content-name-mismatch), levels A and AA, and its best practices
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
# the rules whose verdict can change with the theme: they read colours
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
FAIL_ON = {"serious", "critical"}

# Left out of the run: "region" (content outside a landmark), a best practice whose findings are
# always "moderate", so never fail here, and the slowest rule after the colours (a third of a
# chapter's run). The theme's layout puts its sidebars outside landmarks on every page.
SKIPPED_RULES = ["region"]

AXE_RUN_JS = """async ([tags, rules, skipped]) => {
  const options = { resultTypes: ['violations'],
                    rules: Object.fromEntries(skipped.map((r) => [r, { enabled: false }])) };
  options.runOnly = rules ? { type: 'rule', values: rules } : { type: 'tag', values: tags };
  const result = await axe.run(document, options);
  return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => ({ impact: n.impact, target: n.target.map(String).join(' '),
                                 html: n.html.slice(0, 160), summary: (n.failureSummary || '').slice(0, 300) })) }));
}"""

# Waits for the page's finite animations (CSS transitions, such as a theme change or a focus
# ring's) to end. An infinite one (a spinner: thebe's, the theme's placeholder glow) never
# finishes, and page.evaluate has no timeout of its own: awaiting every animation hung CI's run
# for an hour when a spinner happened to turn. So only finite ones are awaited, and at most 5 s.
SETTLE_JS = """(() => Promise.race([
  Promise.all(document.getAnimations()
    .filter((a) => (a.effect && a.effect.getComputedTiming().endTime) !== Infinity)
    .map((a) => a.finished.catch(() => null))),
  new Promise((ok) => setTimeout(ok, 5000))]))"""

def test_settling_waits_for_transitions_but_not_for_a_spinner(browser):
    """SETTLE_JS, which the theme and focus tests await: a 0.8 s transition is waited for, while
    a spinner that turns forever (what hung CI) neither holds it nor is waited for until the 5 s cap."""
    with offline_page(browser) as page:
        page.set_content("""<style>@keyframes spin { to { transform: rotate(360deg); } }
          #spinner { width: 20px; height: 20px; animation: spin 1s linear infinite; }
          #fade { width: 20px; height: 20px; background: red; transition: opacity 0.8s linear; }</style>
          <div id="spinner"></div><div id="fade"></div>""")
        elapsed = page.evaluate("""async () => {
          const fade = document.getElementById('fade');
          getComputedStyle(fade).opacity;  // the start of the transition, before it is changed
          fade.style.opacity = '0';
          const t0 = performance.now();
          await """ + SETTLE_JS + """();
          return { ms: performance.now() - t0, running: document.getAnimations().length,
                   opacity: getComputedStyle(fade).opacity };
        }""")
    assert elapsed["opacity"] == "0", f"the transition had not ended when settling returned: {elapsed}"
    assert 700 <= elapsed["ms"] < 4000, f"settling took {elapsed['ms']:.0f} ms, not the transition's 800 ms: {elapsed}"
    assert elapsed["running"] == 1, f"the spinner should still turn: {elapsed}"


# the theme's own switch, as pydata-sphinx-theme's button sets it; then wait for the page to
# settle: CSS transitions, and the figures and canvases that redraw on the change
DARK_JS = """async () => {
  document.documentElement.dataset.theme = 'dark';
  document.documentElement.dataset.mode = 'dark';
  const frame = () => new Promise((ok) => requestAnimationFrame(() => ok()));
  await frame(); await frame();
  await """ + SETTLE_JS + """();
  await new Promise((ok) => setTimeout(ok, 100));
  await frame();
  return document.documentElement.dataset.theme;
}"""


@contextmanager
def offline_page(browser, width: int = 1280, **kwargs):
    """A page in a fresh offline context (test_browser.offline_context) at ``width`` px, closed after."""
    log = Log()
    context = offline_context(browser, log, **kwargs)
    page = watch(context.new_page(), log)
    page.set_viewport_size({"width": width, "height": 900})
    try:
        yield page
    finally:
        context.close()



# axe runs in the page while the test drives another page: started here, in a task of its own
# (axe-core's run is one chain of promises, which would otherwise hold this call until it ends),
# and collected by FINISH_JS
START_JS = ("(args) => { window.cbAxe = new Promise((ok) => setTimeout(ok, 0)).then(() => (" + AXE_RUN_JS
            + ")(args)).catch((e) => ({ error: String(e) })); }")
FINISH_JS = "() => window.cbAxe"
TABS = 2  # pages checked at once: each page's axe-core runs in its own renderer process, on its own core


class _Tab:
    """One browser context walking its share of the pages: load a page and draw it, start axe in
    the light theme; collect that, switch to dark, start the colour rules; collect those."""

    def __init__(self, browser, server):
        self.log, self.server = Log(), server
        self.context = offline_context(browser, self.log, color_scheme="light")
        self.page = watch(self.context.new_page(), self.log)
        self.path, self.stage, self.start = None, None, 0.0

    def open(self, path: str) -> None:
        self.path, self.start = path, time.perf_counter()
        assert open_page(self.page, self.server, path), f"{path}: its figures or widgets did not render"
        self.page.add_script_tag(path=str(AXE))
        self.page.evaluate(START_JS, [TAGS, None, SKIPPED_RULES])
        self.stage = "light"

    def step(self, out: dict, seconds: dict) -> None:
        found = self.page.evaluate(FINISH_JS)
        assert isinstance(found, list), f"{self.path}: axe-core failed in the {self.stage} theme: {found}"
        out.setdefault(self.path, {})[self.stage] = found
        if self.stage == "light":
            assert self.page.evaluate(DARK_JS) == "dark", f"{self.path}: the page did not switch to its dark theme"
            self.page.evaluate(START_JS, [TAGS, COLOUR_RULES, SKIPPED_RULES])
            self.stage = "dark"
        else:
            seconds[self.path] = time.perf_counter() - self.start
            self.stage = None


@pytest.fixture(scope="module")
def axe_results(browser, server):  # noqa: F811
    """Every reader's page, drawn in full, checked by axe-core in the light theme (all rules of
    TAGS) and then in the dark (COLOUR_RULES): page -> theme -> axe's violations. TABS pages at a
    time, each tab driven while the others' axe-core runs. Prints the time it took."""
    todo, out, seconds, start = list(reader_pages()), {}, {}, time.perf_counter()
    tabs = [_Tab(browser, server) for _ in range(TABS)]
    try:
        for tab in tabs:
            if todo:
                tab.open(todo.pop(0))
        while any(tab.stage for tab in tabs):
            for tab in tabs:
                if tab.stage:
                    tab.step(out, seconds)
                    if tab.stage is None and todo:
                        tab.open(todo.pop(0))
    finally:
        for tab in tabs:
            tab.context.close()
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[:5]
    print(f"\naxe-core on {len(out)} pages in two themes: {time.perf_counter() - start:.0f} s; slowest: "
          + ", ".join(f"{p} {s:.1f} s" for p, s in slowest))
    return out


@needs_axe
def test_axe_finds_no_serious_violation_on_any_page(axe_results):
    failures: dict[str, list[str]] = {}  # rule -> "page [theme] element ..."
    milder: dict[tuple, set] = {}
    for path, themes in axe_results.items():
        for theme, violations in themes.items():
            for v in violations:
                for node in v["nodes"]:
                    impact = node["impact"] or v["impact"]
                    if impact in FAIL_ON:
                        why = node["summary"].splitlines()[-1].strip() if node["summary"] else ""
                        failures.setdefault(f"{v['id']} ({impact}): {v['help']}", []).append(
                            f"{path} [{theme}] {node['target']}: {why}\n        {node['html'][:120]}")
                    else:
                        milder.setdefault((v["id"], impact), set()).add(path)
    if milder:
        print("axe-core's milder findings (not failing): " + "; ".join(
            f"{rule} ({impact}) on {len(pages)} page(s)" for (rule, impact), pages in sorted(milder.items())))
    assert not failures, "serious or critical accessibility violations, by rule:\n" + "\n".join(
        f"  {rule}: {len(found)} element(s)\n" + "\n".join(f"    {f}" for f in found[:8])
        + (f"\n    ... and {len(found) - 8} more" if len(found) > 8 else "") for rule, found in failures.items())


# --------------------------------------------------------------------------- the exercise index's links

EXERCISES = "book/exercises.html"


# where an exercise's anchor stands in the window, and how far the page can scroll
WHERE_JS = """(id) => { const e = document.getElementById(id);
  return { found: !!e, top: e ? e.getBoundingClientRect().top : null, scrollY: window.scrollY,
           maxScroll: document.documentElement.scrollHeight - window.innerHeight, height: window.innerHeight,
           hash: location.hash, ready: document.readyState }; }"""
# in place: at the top of the window (within 200 px: the fixed header plus the theme's scroll padding),
# or, when the page has less than a screen below it, the page is scrolled to its end with it in view
IN_PLACE_JS = "(id) => { const w = (" + WHERE_JS + ")(id); if (!w.found) return false;" \
    " return w.top >= 0 && (w.top < 200 || (w.scrollY >= w.maxScroll - 1 && w.top < w.height - 100)); }"


def test_following_an_exercise_link_brings_the_exercise_to_the_top(browser, server):  # noqa: F811
    """A reader clicks an exercise's title in the index: the chapter opens at that exercise (its
    heading, or its cell on the problem set), just under the page's fixed header, whichever
    chapter it is in. Three links: the first, the last, and one to a cell (the problem set)."""
    with offline_page(browser) as page:
        page.goto(f"{server}/{EXERCISES}", wait_until="load")
        links = page.evaluate("""() => [...document.querySelectorAll('.exercise-index tbody tr')].map((tr) => {
          const a = tr.cells[2].querySelector('a');
          return { id: tr.cells[1].textContent.trim(), href: a ? a.getAttribute('href') : null };
        })""")
        assert len(links) >= 10, links
        linked = [i for i, link in enumerate(links) if link["href"]]
        cells = [i for i in linked if links[i]["id"].startswith("ps_")]
        for i in sorted({linked[0], linked[-1], *cells[:1]}):
            page.goto(f"{server}/{EXERCISES}", wait_until="load")
            page.locator(".exercise-index tbody tr").nth(i).locator("td").nth(2).locator("a").click()
            page.wait_for_load_state("load")
            fragment = links[i]["href"].split("#", 1)[1]
            # the browser scrolls to the fragment once the page is laid out; the theme's scroll is smooth.
            # Polled on a timer: requestAnimationFrame (Playwright's default) can stall on a page whose
            # lazy figures are still drawing, and the test then times out with the exercise in place.
            # The last exercise of a page may have less than a screen of page below it: the browser then
            # scrolls as far as the page goes, and the exercise stands lower in view (CI's build has a
            # shorter end to the problem set than this one, and p7b stood below 200 px there).
            try:
                page.wait_for_function(IN_PLACE_JS, arg=fragment, timeout=60_000, polling=100)
            except Exception as e:
                raise AssertionError(f"{links[i]}: the exercise never came to the top of the window: "
                                     f"{page.evaluate(WHERE_JS, fragment)}") from e
            where = page.evaluate("""(id) => {
              const e = document.getElementById(id);
              const header = document.querySelector('.bd-header-article, header.bd-header');
              const first = e.matches('.cb-exercise') ? e : (e.nextElementSibling && e.tagName === 'SPAN'
                ? e.nextElementSibling : e).querySelector('.cb-exercise');
              const pre = first && first.querySelector('.cell_input pre');
              const calls = pre ? [...pre.textContent.matchAll(/^checks\\.(\\w+)/gm)].map((m) => m[1]) : [];
              return { hash: location.hash, top: e.getBoundingClientRect().top, exercise: calls.pop() || null,
                       covered: header ? e.getBoundingClientRect().top < header.getBoundingClientRect().bottom - 1 : false };
            }""", fragment)
            assert where["hash"] == f"#{fragment}", where
            assert where["exercise"] == links[i]["id"], (links[i], where)
            assert not where["covered"], f"{links[i]}: the exercise's top lies under the fixed header: {where}"
        unlinked = [link["id"] for link in links if not link["href"] or "#" not in link["href"]]
        assert not unlinked, f"exercises whose title links to no exercise: {unlinked}"


# --------------------------------------------------------------------------- the search field

# a chapter: any page built from a notebook has the same header, sidebar and launch buttons
CHAPTER = next((p for p in chapter_pages() if notebook_source(p)), "book/08_qk_ov.html")

ICON_JS = """() => [...document.querySelectorAll('form.bd-search')].filter((f) => f.checkVisibility()).map((f) => {
  const icon = f.querySelector('.fa-magnifying-glass, svg'), input = f.querySelector('input');
  const i = icon.getBoundingClientRect(), r = input.getBoundingClientRect(), s = getComputedStyle(input);
  return { where: f.closest('dialog') ? 'search dialog' : 'search page', icon: [i.left, i.right, i.width],
           text: r.left + parseFloat(s.paddingLeft) + parseFloat(s.borderLeftWidth) };
})"""


@pytest.mark.parametrize("where", ["search page", "search dialog"])
def test_the_search_icon_leaves_the_query_readable(browser, server, where):  # noqa: F811
    """The magnifier sits beside the query, not over its first letter: on the search page and
    in the dialog that Ctrl+K (or the sidebar's button) opens on any page."""
    with offline_page(browser) as page:
        if where == "search page":
            page.goto(f"{server}/search.html?q=circuit", wait_until="load")
        else:
            page.goto(f"{server}/{CHAPTER}", wait_until="load")
            page.locator(".search-button-field").first.click()
            page.wait_for_selector("#pst-search-dialog[open] input", timeout=10_000)
            page.keyboard.type("Wikipedia")
        boxes = [b for b in page.evaluate(ICON_JS) if b["where"] == where]
        assert len(boxes) == 1, f"no visible search field on the {where}: {boxes}"
        box = boxes[0]
        assert box["icon"][2] > 4, f"no magnifier drawn on the {where}: {box}"
        assert box["icon"][1] <= box["text"] + 0.5, (
            f"on the {where} the magnifier ({box['icon'][0]:.0f}-{box['icon'][1]:.0f} px) covers the query, "
            f"whose text starts at {box['text']:.0f} px")


# --------------------------------------------------------------------------- the live-code button offline

@pytest.mark.parametrize("width", [390, 1280])
def test_the_live_code_message_stays_in_its_box(browser, server, width):  # noqa: F811
    """Offline, "Live code" says that mybinder.org cannot be reached: the message wraps inside its
    button (which grows to hold it) and the spinner stops."""
    with offline_page(browser, width) as page:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        page.locator(".dropdown-launch-buttons button").first.click()
        page.locator("button.btn-launch-thebe, .launch-thebe, button[title*='mybinder']").first.click()
        page.wait_for_function("() => /Could not reach mybinder.org/.test("
                               "document.querySelector('.thebe-launch-button').textContent)", timeout=30_000)
        box = page.evaluate("""() => {
          const b = document.querySelector('.thebe-launch-button'), r = b.getBoundingClientRect();
          const t = b.querySelector('.loading-text') || b, q = t.getBoundingClientRect();
          const spinner = b.querySelector('.spinner');
          return { button: [r.left, r.top, r.right, r.bottom], text: [q.left, q.top, q.right, q.bottom],
                   overflow: [b.scrollWidth - b.clientWidth, b.scrollHeight - b.clientHeight],
                   spinning: !!spinner && spinner.checkVisibility(), page: document.documentElement.clientWidth };
        }""")
        (bl, bt, br, bb), (tl, tt, tr, tb) = box["button"], box["text"]
        assert bl - 0.5 <= tl and tr <= br + 0.5 and bt - 0.5 <= tt and tb <= bb + 0.5, \
            f"at {width} px the message ({box['text']}) spills out of its button ({box['button']})"
        assert max(box["overflow"]) <= 1, f"at {width} px the button's content overflows it by {box['overflow']} px"
        assert br <= box["page"] + 0.5, f"at {width} px the button sticks out of the page: {box}"
        assert not box["spinning"], "the spinner still turns after the message says nothing is loading"


# --------------------------------------------------------------------------- keyboard focus

FOCUS_JS = """async () => {  // once the ring's transition (the theme's search button has one) has ended
  await """ + SETTLE_JS + """();
  const e = document.activeElement;
  // the ring may be drawn on a part of the control (the sidebar's expanders draw it on their chevron)
  const styles = [e, ...e.querySelectorAll('*')].slice(0, 20).map((n) => getComputedStyle(n))
    .map((s) => ({ outline: [s.outlineStyle, s.outlineWidth, s.outlineColor], shadow: s.boxShadow }));
  return { tag: e.tagName, name: (e.getAttribute('aria-label') || e.getAttribute('title') || e.textContent).trim().slice(0, 40),
           cls: String(e.className).slice(0, 60), inArticle: !!e.closest('.bd-article'), visible: e.checkVisibility(),
           styles };
}"""

_SHADOW = re.compile(r"rgba?\(([^)]*)\)\s+(-?[\d.]+)px\s+(-?[\d.]+)px\s+(-?[\d.]+)px\s+(-?[\d.]+)px")


def _alpha(rgb: str) -> float:
    parts = [float(x) for x in re.split(r"[ ,/]+", rgb.strip()) if x]
    return parts[3] if len(parts) > 3 else 1.0


def has_ring(style: dict) -> bool:
    """A focus ring: an outline, or a box shadow's spread, at least 2 px wide and not transparent."""
    kind, width, colour = style["outline"]
    m = re.search(r"rgba?\(([^)]*)\)", colour)
    if kind != "none" and float(width.removesuffix("px") or 0) >= 2 and (not m or _alpha(m[1]) > 0):
        return True
    return any(_alpha(c) > 0 and float(spread) >= 2 for c, _, _, _, spread in _SHADOW.findall(style["shadow"]))


@pytest.mark.parametrize("width", [390, 1280])
def test_the_header_and_sidebar_controls_show_a_focus_ring(browser, server, width):  # noqa: F811
    """Tabbing from the top of a chapter through everything before the article (the skip link,
    the sidebar's search and links, the toolbar's buttons): each control shows a focus ring, an
    outline or a box shadow at least 2 px wide (WCAG 2.4.7)."""
    with offline_page(browser, width) as page:
        page.goto(f"{server}/{CHAPTER}", wait_until="load")
        seen, missing = [], []
        for _ in range(60):
            page.keyboard.press("Tab")
            f = page.evaluate(FOCUS_JS)
            if f["inArticle"] or f["tag"] == "BODY":
                break
            seen.append(f["name"])
            if f["visible"] and not any(has_ring(style) for style in f["styles"]):
                own = f["styles"][0]
                missing.append(f"{f['tag']} {f['name']!r} (class {f['cls']!r}; outline {' '.join(own['outline'])}, "
                               f"shadow {own['shadow'][:80]})")
        assert len(seen) >= 5, f"at {width} px, only {seen} before the article"
        assert not missing, f"at {width} px, controls with no focus ring:\n" + "\n".join(missing)
        assert any("Download" in s or "download" in s for s in seen), f"the toolbar was not reached: {seen}"


# --------------------------------------------------------------------------- the labs' attention maps

LAB = "book/induction/02_lab.html"
SMOLLM2_LAB = "book/induction/02_smollm2_lab.html"
LABS = {"toy lab": (LAB, ".cb-lab", "root.cbLab.paint"), "SmolLM2 lab": (SMOLLM2_LAB, ".cb-smol", "root.cbSmolPaint")}
WEIGHTS = [0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0]
TINTED = 1  # the row drawn in the chosen query's colour

# The lab's own paint() draws a pattern whose every row holds WEIGHTS, one row tinted, on a canvas
# inside the widget; the colours come back with the background the widget is drawn on (every
# layer below it composited down to the page).
HEAT_JS = """([selector, getter, weights, tinted]) => {
  const root = document.querySelector(selector);
  const paint = eval(getter), P = weights.length, pattern = new Float32Array(P * P);
  for (let i = 0; i < P; i++) for (let j = 0; j < P; j++) pattern[i * P + j] = weights[j];
  const canvas = document.createElement('canvas');
  canvas.width = P; canvas.height = P;
  root.append(canvas);
  paint(canvas, pattern, P, tinted);
  const data = Array.from(canvas.getContext('2d').getImageData(0, 0, P, P).data);
  canvas.remove();
  const layers = [];
  for (let n = root; n && n.nodeType === 1; n = n.parentElement) {
    const m = getComputedStyle(n).backgroundColor.match(/[\\d.]+/g).map(Number);
    const c = m.length > 3 ? m : m.concat([1]);
    if (c[3] > 0) layers.push(c);
    if (c[3] >= 1) break;
  }
  let bg = [255, 255, 255];
  for (const c of layers.reverse()) bg = bg.map((v, k) => c[k] * c[3] + v * (1 - c[3]));
  return { data, bg, theme: document.documentElement.dataset.theme };
}"""


def _lin(v: float) -> float:
    v /= 255
    return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4


def contrast(a, b) -> float:
    """WCAG 2's contrast ratio of two sRGB colours."""
    la, lb = (0.2126 * _lin(c[0]) + 0.7152 * _lin(c[1]) + 0.0722 * _lin(c[2]) for c in (a, b))
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def heat_contrasts(found: dict) -> dict[str, list[float]]:
    """Each weight's contrast against the page, on a plain row and on the tinted one: the pixel
    (with its alpha) composited over the widget's background."""
    P, bg, data = len(WEIGHTS), found["bg"], found["data"]
    out = {}
    for name, row in (("cell", 0), ("tinted row", TINTED)):
        out[name] = []
        for j in range(P):
            r, g, b, a = data[4 * (row * P + j): 4 * (row * P + j) + 4]
            shown = [c * a / 255 + v * (1 - a / 255) for c, v in zip((r, g, b), bg)]
            out[name].append(contrast(shown, bg))
    return out


@pytest.mark.parametrize("lab", list(LABS))
def test_the_labs_attention_maps_are_as_readable_in_the_dark_theme(browser, server, lab):  # noqa: F811
    """Each weight of an attention map, painted by the lab itself, against the page: in both
    themes zero is the page itself and the contrast grows with the weight, a weight of 1 reaching
    WCAG's 3:1 for graphics (1.4.11); and in the dark theme every weight stands out at least as
    much as in the light one (the reader's complaint: faint attention vanished in the toy lab, and
    SmolLM2's thumbnails stayed white, their zeros the brightest thing on a dark page)."""
    path, selector, getter = LABS[lab]
    if not (SITE / path).exists():
        pytest.skip(f"{path} is not in this build")
    with offline_page(browser, color_scheme="light") as page:
        assert open_page(page, server, path), f"{path}: its widgets did not render"
        page.wait_for_function(f"() => {{ const root = document.querySelector('{selector}'); return root && {getter}; }}",
                               timeout=30_000)
        light = heat_contrasts(page.evaluate(HEAT_JS, [selector, getter, WEIGHTS, TINTED]))
        page.evaluate(DARK_JS)
        found = page.evaluate(HEAT_JS, [selector, getter, WEIGHTS, TINTED])
        assert found["theme"] == "dark"
        dark = heat_contrasts(found)
        table = "\n".join(f"  {name:10} {theme:5}: " + " ".join(f"{w:g}:{c:.2f}" for w, c in zip(WEIGHTS, values))
                          for name in light for theme, values in (("light", light[name]), ("dark", dark[name])))
        problems = []
        for name in light:
            for theme, values in (("light", light[name]), ("dark", dark[name])):
                if values[0] > 1.05:
                    problems.append(f"{theme}, {name}: a weight of 0 is painted ({values[0]:.2f}:1 against the page)")
                if any(b < a - 0.01 for a, b in zip(values, values[1:])):
                    problems.append(f"{theme}, {name}: the contrast does not grow with the weight")
                if values[-1] < 3:
                    problems.append(f"{theme}, {name}: a weight of 1 stands at {values[-1]:.2f}:1, under 3:1")
            fainter = [f"{w:g} ({d:.2f} < {lt:.2f})" for w, lt, d in zip(WEIGHTS, light[name], dark[name]) if d < lt - 0.01]
            if fainter:
                problems.append(f"{name}: fainter in the dark theme than in the light one at weights {fainter}")
        print(f"\n{lab}'s attention map, contrast against the page:\n{table}")
        assert not problems, f"{lab}'s attention map:\n" + "\n".join(problems) + "\ncontrast against the page:\n" + table
        if lab == "toy lab":  # the patterns on the page follow the switch: painted again, in its colours
            pixels = """() => { const c = document.querySelector('.cb-lab-pattern');
              return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); }"""
            in_dark = page.evaluate(pixels)
            page.evaluate("() => { document.documentElement.dataset.theme = 'light'; }")
            page.wait_for_timeout(100)
            in_light = page.evaluate(pixels)
            assert in_dark != in_light, "the toy lab's patterns were not painted again when the theme changed"
            lost = sum(1 for d, lt in zip(in_dark[3::4], in_light[3::4]) if lt > 0 and d == 0)
            assert not lost, f"{lost} entries painted in the light theme are blank in the dark one"


# CircuitsVis's attention views (circuitbook.viz.attention_pattern_view) paint their canvases for
# a white page; the site's stylesheet inverts them in the dark theme. What the reader sees is
# compared, pixel by pixel, in the two themes: each canvas's rectangle captured at one scroll
# position, the heads' names (HTML laid over the canvases, checked by axe-core) hidden.
CANVAS_BACKGROUND_JS = """(el) => {
  for (let n = el; n; n = n.parentElement) {
    const c = getComputedStyle(n).backgroundColor.match(/[\\d.]+/g).map(Number);
    if (c.length === 3 || c[3] >= 1) return c.slice(0, 3);
  }
  return [255, 255, 255];
}"""


def _contrast_map(pixels, background):
    """WCAG contrast of every pixel (an [h, w, 3] array) against ``background``."""
    import numpy as np

    def lum(a):
        a = np.asarray(a, dtype=float) / 255
        a = np.where(a <= 0.03928, a / 12.92, ((a + 0.055) / 1.055) ** 2.4)
        return 0.2126 * a[..., 0] + 0.7152 * a[..., 1] + 0.0722 * a[..., 2]

    lp, lb = lum(pixels), lum(background)
    return (np.maximum(lp, lb) + 0.05) / (np.minimum(lp, lb) + 0.05)


def _neighbourhood(image, pick):
    """The elementwise ``pick`` (min or max) of a 2-D array over each pixel's 3x3 neighbourhood."""
    import numpy as np

    padded = np.pad(image, 1, mode="edge")
    h, w = image.shape
    stack = np.stack([padded[dy:dy + h, dx:dx + w] for dy in range(3) for dx in range(3)])
    return stack.min(0) if pick is min else stack.max(0)


def test_circuitsvis_patterns_are_readable_in_the_dark_theme(browser, server):  # noqa: F811
    """Where a CircuitsVis pattern shows the page in the light theme (zero attention), it shows the
    dark page in the dark theme (within 1.5:1), not white; and what stands out at 3:1 or more in
    the light theme (strong attention, the axes' labels drawn on the canvas) does in the dark too.
    Up to 0.5% of the pixels may differ: the anti-aliased edges of the page's own elements laid
    over a canvas, drawn on white in one theme and on black in the other. Each pixel is judged by
    its one-pixel neighbourhood in the dark capture, since the theme's fonts can move the page by
    a fraction of a pixel (a 0.16 px shift re-rounded the bottom row of a head's label, 0.9% of the
    strong pixels of chapter 6's largest view)."""
    import io

    import numpy as np
    from PIL import Image

    pages = [p for p in reader_pages() if "circuitbook-circuitsvis" in (SITE / p).read_text(errors="replace")]
    if not pages:
        pytest.skip("no CircuitsVis view in this build")
    with offline_page(browser, color_scheme="light") as page:
        assert open_page(page, server, pages[0]), f"{pages[0]}: its views did not render"
        page.mouse.move(0, 0)  # nothing hovered: CircuitsVis highlights the head under the mouse
        page.add_style_tag(content=".circuitbook-circuitsvis h4 { visibility: hidden !important; }")
        canvases = page.locator(".circuitbook-circuitsvis canvas")
        assert canvases.count() >= 2, f"{pages[0]}: no CircuitsVis canvas"
        problems = []
        for i in range(canvases.count()):
            canvas = canvases.nth(i)
            canvas.evaluate("(e) => { e.scrollIntoView({ block: 'center', behavior: 'instant' });"
                            " window.scrollTo({ top: Math.round(window.scrollY), behavior: 'instant' }); }")
            seen = {}
            for theme in ("light", "dark"):
                if theme == "dark":
                    assert page.evaluate(DARK_JS) == "dark"
                # measured in each theme: the dark theme's fonts can move the page by a pixel
                box = canvas.bounding_box()
                clip = {k: box[k] for k in ("x", "y", "width", "height")}
                shot = np.array(Image.open(io.BytesIO(page.screenshot(clip=clip))).convert("RGB"))
                seen[theme] = _contrast_map(shot, canvas.evaluate(CANVAS_BACKGROUND_JS))
            page.evaluate("() => { const root = document.documentElement;"
                          " root.dataset.theme = 'light'; root.dataset.mode = 'light'; }")
            page.evaluate("() => " + SETTLE_JS + "()")
            light, dark = seen["light"], seen["dark"]
            shown_page, strong = light < 1.05, light >= 3
            # the dark theme's fonts can move the page by a fraction of a pixel, which
            # re-rounds the edge rows of anything drawn over the canvas: a pixel is judged
            # by its neighbourhood of one pixel in the dark capture
            lit = float((_neighbourhood(dark, min)[shown_page] > 1.5).mean()) if shown_page.any() else 0.0
            faded = float((_neighbourhood(dark, max)[strong] < 3).mean()) if strong.any() else 0.0
            name = f"canvas {i} ({box['width']:.0f}x{box['height']:.0f} px)"
            if lit > 0.005:
                problems.append(f"{name}: {lit:.1%} of what shows the page in the light theme is drawn in the dark one")
            if faded > 0.005:
                problems.append(f"{name}: {faded:.1%} of what stands out at 3:1 in the light theme falls under it in the dark one")
        assert not problems, f"{pages[0]}, CircuitsVis in the dark theme:\n" + "\n".join(problems)
