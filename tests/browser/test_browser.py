"""The built site in a real browser, offline: headless Chromium driven by Playwright.

Run after the site is built (``make book``); ``SITE_DIR`` points the tests at another build
(default ``_build/html``). The folder is served by a local ``http.server`` on 127.0.0.1, and
every request for any other host is blocked and recorded, so the pages see no network, as on
a laptop offline. One browser serves the whole module; a module-scoped fixture visits every
page once and records what the checks below need:

- (a) every page loads with no console error, no uncaught exception, no failed local request,
  and no request leaving localhost;
- (b) every internal link resolves to a file of the site, and its #fragment to an id there;
- (c) every launch link (Colab, Binder, download) points at the page's own notebook, which
  exists in this repository at that path, on the repository and branch of ``_config.yml``;
- (d) every saved widget view renders (a non-empty box), and every ``explore(...)`` widget
  shows its initial figure; a chapter that calls ``explore`` has widget state at all;
- (e) the induction module's explainers, quiz and progress tracker respond to clicks;
- (f) math is typeset by MathJax, with no raw TeX left in the text;
- (g) circuitsvis views render, from the site's one copy of the bundle;
- (h) a screenshot of each chapter's first screen goes to ``_build/screenshots/<page>.png``
  (beside the html folder; ``SCREENSHOT_DIR`` overrides);
- (i) the reader's pages (issue 31; test_reader.py has the checks at other widths): no stray
  values under cells and no TeX-like text outside MathJax; set-up cells folded under their
  caption; exercises with a template, a note saying where the check runs, and a folded solution
  whose passing check shows when unfolded, no red box anywhere; code cells of 79 characters fit
  the column at 1280 px; every page's compressed first load, printed, within budget (the median
  at most 2 MB).

Chromium comes from the system (``/usr/bin/chromium``; ``CHROMIUM`` overrides): Playwright
never downloads a browser here. The ``browser`` and ``serve`` fixtures are tests/conftest.py's.
"""

from __future__ import annotations

import gzip
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("SITE_DIR", ROOT / "_build" / "html")).resolve()
SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", SITE.parent / "screenshots"))
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
EXPLAINERS = "book/induction/02_explainers.html"
PROBLEMS = "book/induction/03_problems.html"
QUIZ = "book/induction/04_quiz.html"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

sys.path.insert(0, str(ROOT / "scripts"))


def site_pages() -> list[str]:
    """Every page of the built site (paths relative to its root), skipping Sphinx's asset folders."""
    if not SITE.is_dir():
        return []
    return sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
                  if not p.relative_to(SITE).parts[0].startswith("_"))


def notebook_source(page: str) -> str | None:
    """The repository path of the notebook a page was built from, if it was built from one."""
    rel = page.removesuffix(".html") + ".ipynb"
    return rel if (SITE / "_sources" / rel).exists() else None


def chapter_pages() -> list[str]:
    return [p for p in site_pages() if p.startswith("book/")]


# --------------------------------------------------------------------------- serving and browsing

@pytest.fixture(scope="module")
def server(serve):
    return serve(SITE)


@dataclass
class Log:
    """What one browser context saw: external requests (blocked), console errors, HTTP errors."""

    external: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)
    http_errors: list[str] = field(default_factory=list)


def offline_context(browser, log: Log, **kwargs):
    """A fresh context (empty storage) where every request not for localhost is blocked."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **kwargs)

    def route(route):
        url = route.request.url
        if urlsplit(url).hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            log.external.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", route)
    return context


def watch(page, log: Log):
    def on_console(msg):
        if msg.type == "error":
            where = msg.location.get("url", "") if msg.location else ""
            log.console.append(f"console.error: {msg.text}" + (f" ({where})" if where else ""))

    page.on("console", on_console)
    page.on("pageerror", lambda exc: log.console.append(f"uncaught: {exc}"))
    page.on("response", lambda r: log.http_errors.append(f"HTTP {r.status} {r.url}") if r.status >= 400 else None)
    return page


READY_JS = """() => {
  const state = document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]');
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')];
  const widgets = !state || views.every((s) => {
    const area = s.previousElementSibling;
    return area && area.classList.contains('widget-subarea') && area.querySelector('*');
  });
  const cv = [...document.querySelectorAll('.circuitbook-circuitsvis')].every((d) => d.children.length > 0);
  const plots = [...document.querySelectorAll('.circuitbook-plotly')].every((d) => d.classList.contains('js-plotly-plot'));
  return widgets && cv && plots;
}"""

MATHJAX_JS = """() => (window.MathJax && MathJax.startup && MathJax.startup.promise)
  ? MathJax.startup.promise.then(() => true) : null"""

COLLECT_JS = """() => {
  const box = (e) => { if (!e) return [0, 0]; const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  const views = [...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')].map((s) => {
    const prev = s.previousElementSibling;
    const area = prev && prev.classList.contains('widget-subarea') ? prev : null;
    const root = area && area.firstElementChild;
    const explore = area && area.querySelector('.circuitbook-explore');
    const pictures = explore ? [...explore.querySelectorAll('img, canvas')].filter((p) => {
      const [w, h] = box(p);
      return w > 50 && h > 50 && (p.tagName !== 'IMG' || (p.complete && p.naturalWidth > 0));
    }).length : 0;
    let model = null;
    try { model = JSON.parse(s.textContent).model_id; } catch (e) { /* reported as unrendered */ }
    return { model, rendered: !!root, descendants: area ? area.querySelectorAll('*').length : 0,
             size: box(root), rootClass: root ? String(root.className) : '', explore: !!explore, pictures };
  });
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .cell_input, .cell_output';
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    if (!/\\$\\$|\\\\\\(|\\\\\\[|\\\\begin\\{/.test(t)) continue;
    if (n.parentElement && n.parentElement.closest(skip)) continue;
    raw.push(t.trim().slice(0, 80));
  }
  return {
    url: location.href,
    title: document.title,
    hasWidgetState: !!document.querySelector('script[type="application/vnd.jupyter.widget-state+json"]'),
    views,
    links: [...document.querySelectorAll('a[href]')].map((a) => a.href),
    ids: [...document.querySelectorAll('[id]')].map((e) => e.id)
      .concat([...document.querySelectorAll('a[name]')].map((a) => a.name)),
    math: { elements: document.querySelectorAll('.math').length,
            untypeset: [...document.querySelectorAll('.math')].filter((m) => !m.querySelector('mjx-container')).length,
            containers: document.querySelectorAll('mjx-container').length, raw },
    circuitsvis: [...document.querySelectorAll('.circuitbook-circuitsvis')].map((d) => ({
      id: d.id, descendants: d.querySelectorAll('*').length, size: box(d),
      heads: d.querySelectorAll('canvas, svg, table').length, text: d.textContent.slice(0, 200) })),
  };
}"""


@dataclass
class Visit:
    page: str
    seconds: float
    console: list[str]
    external: list[str]
    http_errors: list[str]
    not_ready: bool
    data: dict
    first_load: list[str]          # the local URLs fetched before any scrolling (page weight)
    reader: dict = field(default_factory=dict)  # the reader probes (see ``visits``)


# Widgets, CircuitsVis views and plotly figures load their code when they come near the
# viewport (scripts/sphinx_site_fixes.py, circuitbook.viz): visit each, as a reader scrolling
# down would, then go back to the top.
# A reader scrolls to a figure and looks at it: each lazily loaded view (plotly, circuitsvis, a
# widget) is scrolled into view and given up to 10 s to start drawing before the next. A fixed
# pause of one frame and 30 ms was too short for the page's IntersectionObserver to fire: the
# widget loader never started, and every page with a widget waited out its 60 s.
SCROLL_TO_LAZY_JS = """async () => {
  const widgetsDrawn = (el) => [...el.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
    .every((s) => { const a = s.previousElementSibling;
                    return a && a.classList.contains('widget-subarea') && a.querySelector('*'); });
  const drawn = (el) => el.matches('.circuitbook-plotly') ? el.classList.contains('js-plotly-plot')
    : el.matches('.circuitbook-circuitsvis') ? el.children.length > 0 : widgetsDrawn(el);
  const lazy = [...document.querySelectorAll('.circuitbook-plotly, .circuitbook-circuitsvis')]
    .concat([...document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]')]
      .map((s) => s.parentElement));
  for (const el of lazy) {
    el.scrollIntoView({ block: 'center', behavior: 'instant' });  // the theme scrolls smoothly
    const end = performance.now() + 10000;
    while (!drawn(el) && performance.now() < end) await new Promise((ok) => setTimeout(ok, 50));
  }
  window.scrollTo({ top: 0, behavior: 'instant' });
  return lazy.length;
}"""


def settle(page, timeout_ms: int = 10_000) -> None:
    """Wait until the network has been idle for 500 ms, or ``timeout_ms`` (a page still busy is
    checked as it is)."""
    try:
        page.wait_for_load_state("networkidle", timeout=timeout_ms)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError
        pass


def render_lazy_views(page) -> bool:
    """Scroll past the loaded page's lazily loaded views, and wait until its widgets,
    circuitsvis views and math are rendered. Returns False if they did not all render in time
    (the checks then say what is missing)."""
    try:
        page.evaluate(SCROLL_TO_LAZY_JS)
    except Exception as e:  # noqa: BLE001 - a redirecting page (index.html) navigates meanwhile
        if "context was destroyed" not in str(e):
            raise
        page.wait_for_load_state("load", timeout=60_000)
        page.evaluate(SCROLL_TO_LAZY_JS)
    ready = True
    try:
        page.wait_for_function(READY_JS, timeout=60_000, polling=100)
    except Exception:  # noqa: BLE001 - playwright's TimeoutError; reported by the checks
        ready = False
    page.evaluate(MATHJAX_JS)
    settle(page)
    return ready


def open_page(page, base: str, path: str) -> bool:
    """Load ``path`` and render everything on it (:func:`render_lazy_views`)."""
    page.goto(f"{base}/{path}", wait_until="load", timeout=60_000)
    return render_lazy_views(page)


def screenshot_name(path: str) -> str:
    return path.removeprefix("book/").removesuffix(".html").replace("/", "-") + ".png"


# What a reader sees, probed on each visit (the checks are below, in "the reader's pages"):
# the text under cells and outside MathJax, the set-up cells, the exercises.
TEXTS_JS = """() => {
  const outs = [...document.querySelectorAll('div.cell')].map((c, i) => ({ i,
    texts: [...c.querySelectorAll('.cell_output .output.text_plain pre, .cell_output .output.stream pre')]
      .map((p) => p.textContent) }));
  const raw = [];
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .cell_input, .js-plotly-plot';
  const walker = document.createTreeWalker(document.querySelector('article') || document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest(skip)) continue;
    raw.push(n.textContent);
  }
  return { outs, raw };
}"""

SETUP_JS = """() => [...document.querySelectorAll('div.cell.tag_hide-input')]
  .filter((c) => !c.classList.contains('cb-solution')).map((c) => {
    const d = c.querySelector('details.hide');
    const pre = c.querySelector('.cell_input pre');
    return { folded: !!d && !d.open, visible: !!pre && pre.checkVisibility(),
             caption: !!c.previousElementSibling };
  })"""

# Shown means rendered, not merely laid out: Chromium now keeps a closed <details>'s content
# laid out under content-visibility: hidden, so getClientRects() finds boxes for what the reader
# cannot see; checkVisibility() asks whether it is rendered.
EXERCISE_JS = """() => {
  const shown = (e) => e.checkVisibility();
  const cells = [...document.querySelectorAll('div.cell.cb-exercise')];
  return { red: [...document.querySelectorAll('.circuitbook-check[data-passed="false"]')]
             .filter(shown).length,
           exercises: cells.map((c) => {
             const next = c.nextElementSibling;
             const fold = next && next.classList.contains('cb-solution') ? next.querySelector('details') : null;
             return { template: c.querySelector('.cell_input pre').textContent,
                      note: (c.querySelector('.cb-exercise-note') || {}).textContent || '',
                      folded: !!fold && !fold.open,
                      checkHidden: !!fold && [...fold.querySelectorAll('.circuitbook-check')]
                        .every((e) => !shown(e)) };
           }) };
}"""

CODE_JS = """() => [...document.querySelectorAll('div.cell div.cell_input pre')].map((pre, i) => {
  const lines = pre.textContent.replace(/\\n$/, '').split('\\n');
  return { i, longest: Math.max(...lines.map((l) => l.length)), scroll: pre.scrollWidth, client: pre.clientWidth,
           first: lines[0].slice(0, 60) };
})"""


def redirects(path: str) -> bool:
    """A page that only redirects (the root index.html), which no reader reads."""
    return 'http-equiv="Refresh"' in (SITE / path).read_text(errors="replace")[:2000]


def reader_pages() -> list[str]:
    """The site's pages, less those that only redirect."""
    return [p for p in site_pages() if not redirects(p)]


@pytest.fixture(scope="module")
def visits(browser, server) -> dict[str, Visit]:
    """Every page of the site, visited once, offline, at 1280 x 900, as a first-time reader:
    a fresh context (empty cache and storage) per page. Recorded, in this order:

    1. the first load: the local files fetched once the network is idle, before any scrolling
       (what the page weighs);
    2. everything rendered (:func:`render_lazy_views`): what COLLECT_JS reads, and a screenshot
       of a chapter's first screen;
    3. on a reader's page, what the reader sees untouched: text (TEXTS_JS), set-up cells
       (SETUP_JS) and exercises (EXERCISE_JS);
    4. then what a reader does to it: the first solution unfolded (is its passing check shown?),
       then every folded cell opened and its code measured (CODE_JS).

    One walk serves every check of this module and of the reader's pages: the site has about 80
    pages, and each walk of them took 2-4 minutes under CI's load."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out = {}
    for path in site_pages():
        log = Log()
        context = offline_context(browser, log)
        page = watch(context.new_page(), log)
        fetched: list[str] = []
        page.on("requestfinished", lambda r: fetched.append(r.url))
        start = time.perf_counter()
        page.goto(f"{server}/{path}", wait_until="load", timeout=60_000)
        settle(page)
        first_load = [u for u in fetched if u.startswith(server)]
        ready = render_lazy_views(page)
        data = page.evaluate(COLLECT_JS)
        reader = {}
        if path.startswith("book/"):
            page.evaluate("() => document.fonts.ready.then(() => true)")
            page.screenshot(path=str(SCREENSHOTS / screenshot_name(path)))
        if not redirects(path):
            reader = {"texts": page.evaluate(TEXTS_JS), "setup": page.evaluate(SETUP_JS),
                      "exercises": page.evaluate(EXERCISE_JS)}
            fold = page.locator("div.cell.cb-solution details").first
            if fold.count():
                fold.locator("summary").click()
                reader["unfolded_check_shown"] = fold.locator('.circuitbook-check[data-passed="true"]').first.is_visible()
            page.evaluate("() => document.querySelectorAll('details.hide').forEach((d) => d.open = true)")
            reader["code"] = page.evaluate(CODE_JS)
        out[path] = Visit(path, time.perf_counter() - start, list(log.console), list(log.external),
                          list(log.http_errors), not ready, data, first_load, reader)
        context.close()
    return out


def test_the_site_has_pages():
    pages = site_pages()
    assert "index.html" in pages and EXPLAINERS in pages, pages
    assert len(chapter_pages()) >= 5


# --------------------------------------------------------------------------- (a) offline, no errors

def test_every_page_loads_offline_without_errors(visits):
    problems = []
    for path, v in visits.items():
        for item in v.external:
            problems.append(f"{path}: request left localhost: {item}")
        for item in v.console + v.http_errors:
            problems.append(f"{path}: {item}")
    assert not problems, f"{len(problems)} problem(s):\n" + "\n".join(problems)


def test_every_page_finished_rendering(visits):
    slow = [f"{p} (widgets or circuitsvis views not rendered within 30 s)" for p, v in visits.items() if v.not_ready]
    assert not slow, "\n".join(slow)


# --------------------------------------------------------------------------- (b) internal links

def _ids_in_file(path: Path) -> set[str]:
    text = path.read_text(errors="replace")
    return set(re.findall(r'\bid="([^"]+)"', text)) | set(re.findall(r'\bname="([^"]+)"', text))


def test_every_internal_link_resolves(visits, server):
    base = urlsplit(server)
    ids_cache: dict[Path, set[str]] = {}
    for v in visits.values():
        ids_cache[SITE / v.page] = set(v.data["ids"])
    broken, checked = [], 0
    for path, v in visits.items():
        for href in sorted(set(v.data["links"])):
            url = urlsplit(href)
            if url.scheme not in ("http", "https") or url.hostname not in LOCAL_HOSTS or url.port != base.port:
                continue
            checked += 1
            target = SITE / unquote(url.path).lstrip("/")
            if url.path.endswith("/"):
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{path}: {href} -> no file {target.relative_to(SITE)}")
                continue
            fragment = unquote(url.fragment)
            if fragment and target.suffix == ".html":
                if target not in ids_cache:
                    ids_cache[target] = _ids_in_file(target)
                if fragment not in ids_cache[target]:
                    broken.append(f"{path}: {href} -> no id {fragment!r} in {target.relative_to(SITE)}")
    assert checked > 0
    assert not broken, f"{len(broken)} broken link(s) of {checked}:\n" + "\n".join(broken)


# --------------------------------------------------------------------------- (c) launch links

def _repository() -> tuple[str, str]:
    import notebooks

    url, branch = notebooks.repository(ROOT)
    return url.removeprefix("https://github.com/").strip("/"), branch


def launch_links(v: Visit, server: str) -> dict[str, list[str]]:
    out = {"colab": [], "binder": [], "download": []}
    for href in sorted(set(v.data["links"])):
        url = urlsplit(href)
        if url.hostname == "colab.research.google.com":
            out["colab"].append(href)
        elif url.hostname == "mybinder.org":
            out["binder"].append(href)
        elif href.startswith(server + "/_sources/"):
            out["download"].append(href)
    return out


def test_launch_links_point_at_notebooks_in_the_repository(visits, server):
    repo, branch = _repository()
    problems, n_notebooks = [], 0
    for path, v in visits.items():
        source = notebook_source(path)
        links = launch_links(v, server)
        for href in links["download"]:  # any page: the download button serves the page's source
            rel = unquote(urlsplit(href).path).removeprefix("/_sources/")
            if not (ROOT / rel).is_file():
                problems.append(f"{path}: download link {href} -> {rel} is not in the repository")
        if source is None:
            continue
        n_notebooks += 1
        if not links["colab"] or not links["binder"] or not any(h.endswith(".ipynb") for h in links["download"]):
            problems.append(f"{path}: missing launch links, found {links}")
        for href in links["colab"]:
            m = re.fullmatch(r"/github/([^/]+/[^/]+)/blob/([^/]+)/(.+)", urlsplit(href).path)
            if not m:
                problems.append(f"{path}: unexpected Colab link {href}")
                continue
            if (m.group(1), m.group(2)) != (repo, branch):
                problems.append(f"{path}: Colab link {href} is not on {repo}@{branch}")
            if m.group(3) != source or not (ROOT / m.group(3)).is_file():
                problems.append(f"{path}: Colab link opens {m.group(3)}, expected {source} (in the repository)")
        for href in links["binder"]:
            url = urlsplit(href)
            m = re.fullmatch(r"/v2/gh/([^/]+/[^/]+)/([^/]+)", url.path)
            urlpath = parse_qs(url.query).get("urlpath", [""])[0]
            opened = re.sub(r"^(tree|notebooks|lab/tree)/", "", urlpath)
            if not m or (m.group(1), m.group(2)) != (repo, branch):
                problems.append(f"{path}: Binder link {href} is not on {repo}@{branch}")
            if opened != source or not (ROOT / opened).is_file():
                problems.append(f"{path}: Binder link opens {opened!r}, expected {source} (in the repository)")
        for href in links["download"]:
            rel = unquote(urlsplit(href).path).removeprefix("/_sources/")
            if rel.endswith(".ipynb") and rel != source:
                problems.append(f"{path}: download link {href} is not this page's notebook {source}")
    assert n_notebooks > 0
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- (d) widgets

def test_widget_views_render(visits):
    problems, n_views = [], 0
    for path, v in visits.items():
        views = v.data["views"]
        if v.data["hasWidgetState"] and not views:
            problems.append(f"{path}: widget state saved but no widget views on the page")
        for view in views:
            n_views += 1
            w, h = view["size"]
            if not view["rendered"] or view["descendants"] == 0 or w < 1 or h < 1:
                problems.append(f"{path}: widget {view['model']} is an empty box "
                                f"(rendered={view['rendered']}, {view['descendants']} elements, {w:.0f}x{h:.0f})")
            if view["explore"] and view["pictures"] == 0:
                problems.append(f"{path}: explore widget {view['model']} shows no figure (no img/canvas)")
    assert n_views > 0, "no widget views anywhere on the site"
    assert not problems, "\n".join(problems)


def _calls_explore(source: Path) -> bool:
    import nbformat

    nb = nbformat.read(source, as_version=4)
    return any(c.cell_type == "code" and re.search(r"^explore\(|[=\s]explore\(", c.source, re.M) for c in nb.cells)


def test_chapters_with_explore_widgets_show_them(visits):
    missing, n = [], 0
    for path, v in visits.items():
        source = notebook_source(path)
        if source is None or not _calls_explore(SITE / "_sources" / source):
            continue
        n += 1
        if not any(view["explore"] and view["pictures"] for view in v.data["views"]):
            missing.append(f"{path}: calls explore(...) but shows no explore widget with a figure "
                           "(was the widget state saved? a failing cell drops it)")
    assert n > 0, "no chapter calls explore(...)"
    assert not missing, "\n".join(missing)


# --------------------------------------------------------------------------- (e) explainers

@pytest.fixture
def fresh(browser, server):
    """A new offline context and page (fresh localStorage), with its own log."""
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    yield page, log, server
    context.close()


def _visit(fresh, path):
    page, log, server = fresh
    if not (SITE / path).exists():
        pytest.fail(f"{path} is not in the built site")
    assert open_page(page, server, path), f"{path}: widgets did not render"
    return page, log


def test_stepper_steps_and_toggles(fresh):
    page, log = _visit(fresh, EXPLAINERS)
    stepper = page.locator(".cb-stepper").first
    title = stepper.locator(".cb-title")
    assert stepper.get_attribute("data-step") == "0"
    assert stepper.get_attribute("data-mode") == "text"
    first = title.inner_text()
    stepper.locator(".cb-next").click()
    assert stepper.get_attribute("data-step") == "1"
    assert title.inner_text() != first
    stepper.locator(".cb-prev").click()
    assert stepper.get_attribute("data-step") == "0" and title.inner_text() == first
    body = stepper.locator(".cb-body").inner_text()
    stepper.locator(".cb-toggle").click()
    assert stepper.get_attribute("data-mode") == "random"
    assert stepper.locator(".cb-body").inner_text() != body
    stepper.locator(".cb-toggle").click()
    assert stepper.get_attribute("data-mode") == "text"
    nxt, clicks = stepper.locator(".cb-next"), 0
    while nxt.is_enabled() and clicks < 20:  # Next walks to the last step, then disables itself
        nxt.click()
        clicks += 1
    assert clicks >= 2 and stepper.get_attribute("data-step") == str(clicks), clicks
    assert stepper.locator(".cb-counter").inner_text() == f"step {clicks + 1} of {clicks + 1}"
    assert not log.console, log.console


def _terms(builder) -> set[str]:
    return set(filter(None, (builder.get_attribute("data-terms") or "").split(",")))


def test_builder_toggles_and_presets(fresh):
    page, log = _visit(fresh, EXPLAINERS)
    b = page.locator(".cb-builder").first
    # initial state: K-composition only
    assert b.get_attribute("data-virtual") == "0"
    assert "k_comp" in _terms(b) and "virtual" not in _terms(b)
    b.locator(".cb-toggle-v").click()
    assert b.get_attribute("data-virtual") == "1" and "virtual" in _terms(b)
    b.locator(".cb-toggle-v").click()
    assert b.get_attribute("data-virtual") == "0" and "virtual" not in _terms(b)
    b.locator(".cb-toggle-q").click()
    assert {"q_comp", "qk_comp"} <= _terms(b)
    b.locator(".cb-toggle-k").click()
    assert "k_comp" not in _terms(b) and "qk_comp" not in _terms(b) and "q_comp" in _terms(b)
    b.locator('.cb-preset[data-preset="all three"]').click()
    assert b.get_attribute("data-virtual") == "1"
    assert {"virtual", "q_comp", "k_comp", "qk_comp"} <= _terms(b)
    b.locator('.cb-preset[data-preset="none"]').click()
    assert b.get_attribute("data-virtual") == "0"
    assert not _terms(b) & {"virtual", "q_comp", "k_comp", "qk_comp"}
    assert "direct" in _terms(b)
    b.locator('.cb-preset[data-preset="induction: K-composition only"]').click()
    assert "k_comp" in _terms(b) and b.get_attribute("data-virtual") == "0"
    assert not log.console, log.console


def test_quiz_needs_every_answer_then_gives_feedback_and_a_retry(fresh):
    page, log = _visit(fresh, QUIZ)
    quiz = page.locator(".cb-quiz").first
    questions = quiz.locator("fieldset.cb-question")
    n = questions.count()
    assert n >= 2
    submit, retry = quiz.locator(".cb-submit"), quiz.locator(".cb-retry")
    assert submit.is_disabled() and not retry.is_visible()
    for i in range(n - 1):
        questions.nth(i).locator("input[type=radio]").first.check()
    assert submit.is_disabled(), "submit is enabled before every question is answered"
    assert quiz.locator(".cb-feedback").count() == 0
    questions.nth(n - 1).locator("input[type=radio]").first.check()
    assert submit.is_enabled()
    submit.click()
    assert quiz.locator(".cb-feedback").count() == n
    for i in range(n):
        assert questions.nth(i).locator(".cb-feedback").count() == 1
    first_score = quiz.get_attribute("data-score")
    assert first_score is not None and 0 <= int(first_score) < n, "always picking option A must not score full marks"
    wrong = quiz.locator('.cb-feedback[data-right="false"]')
    assert wrong.count() >= 1
    assert "Not quite" in wrong.first.inner_text() and "the answer is" not in wrong.first.inner_text()
    # Try again: feedback goes, answers stay and can change, and the quiz can be resubmitted
    assert retry.is_visible()
    retry.click()
    assert quiz.locator(".cb-feedback").count() == 0 and not retry.is_visible()
    assert quiz.get_attribute("data-score") is None
    assert questions.nth(0).locator("input[type=radio]").first.is_checked()
    for i in range(n):
        questions.nth(i).locator("input[type=radio]").nth(1).check()
    assert submit.is_enabled()
    submit.click()
    assert quiz.locator(".cb-feedback").count() == n
    assert "attempt 2" in quiz.locator(".cb-summary").inner_text()
    # the math in the questions is typeset (MathJax on the page) or readable HTML, never raw TeX
    text = quiz.inner_text()
    assert "$" not in text and "\\top" not in text and "_{" not in text, text[:300]
    assert quiz.locator("span.cb-math").count() > 0
    assert not log.console, log.console


def test_progress_tracker_says_progress_is_tracked_when_the_notebook_runs(fresh):
    """With no kernel the counts saved at build time are the build's (its checks passed with
    the solutions in place), not the reader's: the trackers say so instead of counting, and
    offer nothing to click."""
    page, log = _visit(fresh, PROBLEMS)
    trackers = page.locator(".cb-progress")
    assert trackers.count() == 7
    texts = [trackers.nth(i).inner_text() for i in range(7)]
    assert all("tracked when this notebook runs" in t for t in texts), texts
    assert not any(re.search(r"\d+ of 7 done", t) for t in texts), texts
    assert [trackers.nth(i).get_attribute("data-live") for i in range(7)] == ["0"] * 7
    assert trackers.locator("button").count() == 0  # nothing self-reported
    assert not log.console, log.console


# --------------------------------------------------------------------------- (f) math

def test_math_is_typeset(visits):
    problems, pages_with_math = [], 0
    for path, v in visits.items():
        math = v.data["math"]
        if math["elements"]:
            pages_with_math += 1
            if not math["containers"]:
                problems.append(f"{path}: {math['elements']} math elements but no mjx-container")
            elif math["untypeset"]:
                problems.append(f"{path}: {math['untypeset']} of {math['elements']} math elements not typeset")
        if math["raw"]:
            problems.append(f"{path}: raw TeX left in the text: {math['raw'][:3]}")
    assert pages_with_math > 0, "no page with math"
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------- (g) circuitsvis

def test_circuitsvis_views_render_from_the_site_bundle(visits):
    bundle = SITE / "_static" / "circuitsvis" / "iife.js"
    assert bundle.is_file() and bundle.stat().st_size > 100_000, "the circuitsvis bundle is not served by the site"
    views = [(path, cv) for path, v in visits.items() for cv in v.data["circuitsvis"]]
    assert any(path == EXPLAINERS for path, _ in views), f"no circuitsvis view on {EXPLAINERS}"
    problems = []
    for path, cv in views:
        w, h = cv["size"]
        if cv["descendants"] < 5 or h < 50 or w < 50:
            problems.append(f"{path}: circuitsvis view {cv['id']} did not render "
                            f"({cv['descendants']} elements, {w:.0f}x{h:.0f}): {cv['text']!r}")
        if "Error" in cv["text"]:
            problems.append(f"{path}: circuitsvis view {cv['id']} shows an error: {cv['text']!r}")
    assert not problems, "\n".join(problems)


def test_no_page_inlines_the_circuitsvis_bundle():
    marker = "var CircuitsVis=(()=>"
    inlined = [p for p in site_pages() if marker in (SITE / p).read_text(errors="replace")]
    assert not inlined, f"pages that paste the 1.3 MB circuitsvis bundle: {inlined}"


# --------------------------------------------------------------------------- (h) screenshots

def test_every_chapter_has_a_screenshot(visits):
    shots = [SCREENSHOTS / screenshot_name(p) for p in chapter_pages()]
    missing = [s.name for s in shots if not (s.is_file() and s.stat().st_size > 1000)]
    assert not missing, f"no screenshot for {missing} in {SCREENSHOTS}"


# --------------------------------------------------------------------------- circuitbook.viz off the site

def test_viz_outside_the_site_loads_the_cdn_bundle_beside_require_js(fresh):
    """In Jupyter or Colab there is no _static/: the view loads the same circuitsvis version from
    unpkg (served here from the installed package). With require.js on the page, as in classic
    Jupyter and on every widget page, loading the bundle must leave AMD alone."""
    import importlib.util

    from circuitbook.viz import CDN_BUNDLE, attention_pattern_view

    torch = pytest.importorskip("torch")
    page, log, server = fresh
    bundle = Path(importlib.util.find_spec("circuitsvis").submodule_search_locations[0]) / "dist" / "cdn" / "iife.js"
    served = []

    def unpkg(route):
        served.append(route.request.url)
        route.fulfill(status=200, body=bundle.read_bytes(), content_type="application/javascript",
                      headers={"Access-Control-Allow-Origin": "*"})

    page.context.route(CDN_BUNDLE, unpkg)  # registered after the offline block, so it wins for this URL
    pattern = torch.softmax(torch.randn(2, 4, 4, generator=torch.Generator().manual_seed(0)), dim=-1)
    view = attention_pattern_view(["a", "b", "c", "d"], pattern, ["x", "y"])
    html = (f'<!doctype html><html><head><script src="{server}/_static/widgets/require.js"></script>'
            f'</head><body>{view.data}</body></html>')
    # a page outside the site (no documentation_options.js), on a local http origin
    page.route(f"{server}/__viz_outside_the_site.html", lambda route: route.fulfill(
        status=200, body=html, content_type="text/html"))
    page.goto(f"{server}/__viz_outside_the_site.html")
    page.wait_for_function("() => document.querySelector('.circuitbook-circuitsvis').children.length > 0",
                           timeout=30_000)
    assert served == [CDN_BUNDLE]
    assert page.evaluate("() => typeof define === 'function' && !!define.amd"), "require.js's define was lost"
    # a named AMD module still registers and loads after the bundle was evaluated
    assert page.evaluate("""() => new Promise((ok) => {
        define('cb-probe', [], () => 42); require(['cb-probe'], (v) => ok(v)); })""") == 42
    assert page.locator(".circuitbook-circuitsvis *").count() > 5
    assert not log.console, log.console
    assert log.external == []


# --------------------------------------------------------------------------- the reader's pages
# (issue 31; read on the same visits: test_reader.py holds the checks that need other widths,
# themes or clicks)

STRAY = re.compile(r"^\s*(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|True|False|None|tensor\([^()]*\))\s*$")
TEX_LIKE = re.compile(r"[A-Za-z]_\{|\^\{|\\(?:frac|mathrm|text|top|sqrt|sum)\b|_[A-Z]{2}\^")


def test_no_stray_values_and_no_tex_like_text_on_the_pages(visits):
    stray, tex = [], []
    for path, v in visits.items():
        if not v.reader:
            continue
        for cell in v.reader["texts"]["outs"]:
            for text in cell["texts"]:
                if STRAY.match(text):
                    stray.append(f"{path} cell {cell['i']}: {text.strip()[:60]!r}")
        for text in v.reader["texts"]["raw"]:
            if TEX_LIKE.search(text):
                tex.append(f"{path}: {text.strip()[:80]!r}")
    assert not stray + tex, ("stray values under cells:\n" + "\n".join(stray) if stray else "") + \
        ("\nTeX-like text outside MathJax:\n" + "\n".join(tex) if tex else "")


def test_set_up_cells_are_collapsed_under_their_caption(visits):
    problems, n = [], 0
    for path in chapter_pages():
        for cell in visits[path].reader["setup"]:
            n += 1
            if not cell["folded"] or cell["visible"]:
                problems.append(f"{path}: a hide-input cell shows its code")
            if not cell["caption"]:
                problems.append(f"{path}: a hide-input cell with nothing above it")
    assert n > 0, "no hide-input cell on any chapter"
    assert not problems, "\n".join(problems)


def test_exercises_show_the_prompt_a_note_and_a_folded_solution(visits):
    problems, pages, total = [], 0, 0
    for path, v in visits.items():
        if not v.reader:
            continue
        found = v.reader["exercises"]
        if found["red"]:
            problems.append(f"{path}: {found['red']} red check box(es) on an untouched page")
        if not found["exercises"]:
            continue
        pages += 1
        for ex in found["exercises"]:
            total += 1
            if not ("NotImplementedError" in ex["template"] or "your answer" in ex["template"]):
                problems.append(f"{path}: an exercise's template is not a template: {ex['template'][:200]!r}")
            if not ("Colab" in ex["note"] and "JupyterLab" in ex["note"]):
                problems.append(f"{path}: an exercise's note does not say where its check runs: {ex['note']!r}")
            if not (ex["folded"] and ex["checkHidden"]):
                problems.append(f"{path}: a solution is not folded away")
        # unfolding shows the reference solution and its passing check
        if not v.reader.get("unfolded_check_shown"):
            problems.append(f"{path}: the first solution, unfolded, shows no passing check")
    assert pages >= 20, f"exercises on only {pages} page(s)"
    assert total >= 45, total
    assert not problems, "\n".join(problems)


def test_code_of_79_characters_fits_the_column_at_desktop_width(visits, browser, server):
    scrolls, long_lines, n = [], [], 0
    for path in chapter_pages():
        for cell in visits[path].reader["code"]:
            n += 1
            if cell["longest"] > 79:
                long_lines.append(f"{path} cell {cell['i']}: {cell['longest']} characters ({cell['first']!r})")
            elif cell["scroll"] > cell["client"] + 1:
                scrolls.append(f"{path} cell {cell['i']}: {cell['longest']} characters scroll "
                               f"({cell['scroll']} px in {cell['client']} px)")
    if long_lines:  # the chapter sources' to fix, not the theme's: listed, not failed
        print(f"\n{len(long_lines)} code cell(s) with lines over 79 characters:\n" + "\n".join(long_lines))
    assert n > 100
    # and a line of exactly 79 characters, in a code cell of a chapter, does not scroll either
    context = offline_context(browser, Log())
    try:
        page = context.new_page()
        page.goto(f"{server}/{chapter_pages()[0]}", wait_until="load")
        probe = page.evaluate("""() => {
          const pre = document.querySelector('div.cell div.cell_input pre');
          pre.textContent = 'x'.repeat(79);
          return { scroll: pre.scrollWidth, client: pre.clientWidth };
        }""")
    finally:
        context.close()
    assert probe["scroll"] <= probe["client"], f"79 characters do not fit a code cell at 1280 px: {probe}"
    assert not scrolls, "cells of at most 79 characters that scroll sideways at 1280 px:\n" + "\n".join(scrolls)


MEDIAN_BUDGET = 2_000_000   # bytes, gzip-compressed, the median page's first load
PAGE_BUDGET = 4_000_000     # bytes, any one page's first load


def gzip_size(path: Path) -> int:
    data = path.read_bytes()
    # formats that are compressed already travel as they are
    return len(data) if path.suffix in (".woff2", ".woff", ".png", ".jpg", ".gif") else len(gzip.compress(data, 6))


def test_every_page_is_light(visits):
    """Each page's first load (1280 x 900, no scrolling) with an empty cache: every file it
    fetched, as gzip would send it. Printed as a table; fails past the budgets."""
    sizes: dict[Path, int] = {}
    rows = []
    for path, v in visits.items():
        if not v.reader:  # a page that only redirects
            continue
        files = {}
        for url in v.first_load:
            local = SITE / unquote(urlsplit(url).path).lstrip("/")
            if local.is_dir():
                local = local / "index.html"
            if local.is_file():
                if local not in sizes:
                    sizes[local] = gzip_size(local)
                files[local] = sizes[local]
        assert SITE / path in files, f"{path}: its own file is not among what its first load fetched"
        big = sorted(files.items(), key=lambda kv: -kv[1])[:3]
        rows.append((path, sum(files.values()), len(files),
                     ", ".join(f"{p.name} {s / 1e6:.2f}" for p, s in big)))
    print("\npage weight, gzip-compressed, first load (MB):")
    for path, total, n, big in sorted(rows, key=lambda r: -r[1]):
        print(f"  {total / 1e6:6.2f}  {n:3d} files  {path:45s} largest: {big}")
    median = statistics.median(r[1] for r in rows)
    print(f"  median {median / 1e6:.2f} MB over {len(rows)} pages")
    assert median <= MEDIAN_BUDGET, f"median page {median / 1e6:.2f} MB > {MEDIAN_BUDGET / 1e6} MB"
    heavy = [f"{p}: {t / 1e6:.2f} MB" for p, t, *_ in rows if t > PAGE_BUDGET]
    assert not heavy, f"pages over {PAGE_BUDGET / 1e6} MB: {heavy}"
