"""The built site (run after scripts/build_site.py): every toc page exists, is executed,
and carries launch buttons that point at notebooks that exist in the repository."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
sys.path.insert(0, str(ROOT / "scripts"))

import execute_notebooks  # noqa: E402
import notebooks  # noqa: E402

NOTEBOOK_LIMIT_S = 200  # the executor's default notebook limit

pytestmark = pytest.mark.skipif(not (HTML / "index.html").exists(), reason="site not built: run make book")


def page(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix(".html")
    return (HTML / rel).read_text()


@pytest.mark.parametrize("path", execute_notebooks.toc_files(), ids=lambda p: p.name)
def test_every_toc_page_is_built(path):
    html = page(path)
    assert "<h1" in html


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_chapters_are_executed_without_errors(path):
    html = page(path)
    assert "cell_output" in html, "no executed output on the page"
    assert "Traceback (most recent call last)" not in html
    assert 'output traceback' not in html and 'output stderr' not in html, "a cell printed an error or to stderr"


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_launch_buttons_point_at_the_notebook_in_the_repository(path):
    html = page(path)
    url, branch = notebooks.repository()
    repo = url.removeprefix("https://github.com/")
    rel = path.relative_to(ROOT).as_posix()
    colab = re.findall(r'https://colab\.research\.google\.com/github/([^"]+)', html)
    binder = re.findall(r'https://mybinder\.org/v2/gh/([^"]+)', html)
    assert colab == [f"{repo}/blob/{branch}/{rel}"], colab
    assert binder and binder[0] == f"{repo}/{branch}?urlpath=tree/{rel}", binder
    assert (ROOT / rel).exists()


def test_each_notebook_ran_within_its_limit():
    report = json.loads((ROOT / "_build" / "execution_report.json").read_text())
    for path in execute_notebooks.toc_notebooks():
        entry = report[str(path.relative_to(ROOT))]
        assert entry["status"] != "failed", entry
        assert entry["seconds"] < NOTEBOOK_LIMIT_S, entry


def test_the_ledger_lists_every_checked_claim():
    import nbformat  # noqa: F401  (sphinx_ledger reads notebooks with it)
    import yaml

    import sphinx_ledger

    cache = str(ROOT / yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]["cache"])
    expected, kinds = 0, set()
    for path in execute_notebooks.toc_notebooks():
        nb = sphinx_ledger.executed(path, cache)
        assert nb is not None, f"{path.name} has no executed copy in the cache"
        claims = sphinx_ledger.claims_of(nb)
        expected += len(claims)
        kinds |= {claim.get("kind") for _, claim in claims}
    html = (HTML / "book" / "ledger.html").read_text()
    assert expected > 0
    assert f"{expected} statements in" in html
    # one table (tests/browser/test_ledger.py filters and sorts it): its header row, then a row a
    # statement, each row marked with its kind
    assert len(re.findall(r"<table", html)) == 1
    assert len(re.findall(r"<tr", html)) == expected + 1
    assert {kind for kind in re.findall(r'class="ledger-row ledger-(\w+)[ "]', html)} == kinds


def test_the_api_pages_match_the_package():
    import sphinx_api

    assert not sphinx_api.stale_pages(), "run `python scripts/sphinx_api.py write`"


def test_each_taught_in_chapter_links_to_its_page():
    import sphinx_api

    chapter_docs = sphinx_api.chapters()
    taught, linked = set(), set()
    for modname, doc, entries in sphinx_api.reference():
        for text in [doc] + [e.doc for e in entries]:
            for match in re.finditer(r"[Tt]aught in chapters? (\d+)", text):
                taught.add(Path(chapter_docs[int(match.group(1))]).name)
    for page in (HTML / "book" / "api").glob("*.html"):
        linked |= set(re.findall(r'<a class="reference internal" href="\.\./(\d\d_\w+)\.html">', page.read_text()))
    assert taught and taught <= linked, sorted(taught - linked)
    for name in linked:
        assert (HTML / "book" / f"{name}.html").exists(), name


def test_every_documented_function_and_class_has_an_entry_on_its_module_page():
    import sphinx_api

    for modname, _, entries in sphinx_api.reference():
        if not entries:
            continue
        html = (HTML / "book" / "api" / f"{modname}.html").read_text()
        for e in entries:  # autodoc lists what has a docstring (an undocumented CLI main() is left out)
            if e.kind in ("class", "function") and e.doc:
                assert f'id="{modname}.{e.qualname}"' in html, f"{modname}.{e.qualname}"
        # nn.Module's docstrings are not inherited, nor its members listed
        assert "Define the computation performed at every call" not in html, modname
        assert "register_forward_hook" not in html, modname


def test_the_pages_draw_their_icons_from_cut_down_fonts_not_fontawesome_js():
    from fontTools.ttLib import TTFont

    sys.path.insert(0, str(ROOT / "scripts"))
    import sphinx_site_fixes

    static = HTML / "_static"
    css = (static / "circuitbook-icons.css").read_text()
    assert not (static / "scripts" / "fontawesome.js").exists()
    for page in [HTML / "book" / "intro.html", HTML / "book" / "06_attention.html"]:
        html = page.read_text()
        assert "fontawesome.js" not in html and "circuitbook-icons.css" in html
    # every icon a page names is in the cut fonts, and they are small
    names = sphinx_site_fixes.fontawesome_codepoints(
        "\n".join(p.read_text() for p in (static / "styles").glob("*.css")))
    used = sphinx_site_fixes.icons_used([p.read_text() for p in HTML.rglob("*.html")])
    assert {"bars", "list", "github", "rocket", "download", "sun", "moon"} <= used
    covered = set()
    for name in ("fa-solid-900", "fa-regular-400", "fa-brands-400"):
        font = static / f"{name}-subset.woff"
        assert f"url({font.name})" in css and font.stat().st_size < 20_000
        covered |= set(TTFont(font).getBestCmap())
    assert {names[n] for n in used} <= covered


@pytest.mark.parametrize("path", execute_notebooks.toc_notebooks(), ids=lambda p: p.name)
def test_bookkeeping_cells_are_folded_and_say_what_they_do(path):
    # issue 40: a visible cell that mostly glues numbers and records claims buries the prose; such a
    # cell is folded, and its fold names what it does (scripts/sphinx_folds.py), never "Show code"
    from bs4 import BeautifulSoup

    import sphinx_folds

    soup = BeautifulSoup(page(path), "html.parser")
    shown, prompts = [], []
    for cell in soup.select("div.cell"):
        source = cell.select_one("div.cell_input")
        if source is None:
            continue
        code = source.get_text()
        if not sphinx_folds.is_bookkeeping(code):
            continue
        fold = source.find_parent("details", class_="hide")
        if fold is None:
            shown.append(code.splitlines()[0][:60])
        else:
            prompts.append((fold.select_one("summary").get_text(" ", strip=True), sphinx_folds.fold_prompt(code)))
    assert not shown, f"{path.name}: bookkeeping cells shown unfolded: {shown}"
    assert all(want in text for text, want in prompts), prompts
