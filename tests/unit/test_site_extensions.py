"""Two of the site's Sphinx extensions, without building the book (issue 40):

- scripts/sphinx_site_fixes.py's ``accessible_names`` on the markup the themes write: a fold's
  summary and the search button named by their visible text, the sidebar's expanders named
  after their page, a long signature's lines as <div>s, the bibliography's entries as list items;
  a second pass changes nothing;
- scripts/sphinx_exercises.py labels each exercise (``exercise-<id>``) on its page, its own
  section where it has one, else its cell: one small Sphinx build (MyST-NB, the extension, a
  notebook page) whose ``{ref}`` links land on those ids.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import sphinx_exercises  # noqa: E402
import sphinx_site_fixes  # noqa: E402

# as myst-nb, pydata-sphinx-theme, Sphinx 7.4 and docutils write them
FOLD = '<details class="hide above-input">\n<summary aria-label="Toggle hidden content">\n<span class="collapsed">Show code cell source</span>'
SEARCH = ('<button class="btn search-button-field search-button__button pst-js-only" title="Search" aria-label="Search" '
          'data-bs-placement="bottom" data-bs-toggle="tooltip">\n <i class="fa-solid fa-magnifying-glass"></i>\n'
          ' <span class="search-button__default-text">Search</span>')
SEARCH_ICON = ('<button class="btn btn-sm pst-navbar-icon search-button search-button__button pst-js-only" title="Search" '
               'aria-label="Search" data-bs-placement="bottom" data-bs-toggle="tooltip">')
EXPANDER = ('<li class="toctree-l1 has-children"><a class="reference internal" href="api.html">API <code>x</code> &amp; more</a>'
            '<details><summary><span class="toctree-toggle" role="presentation"><i class="fa-solid fa-chevron-down"></i>'
            '</span></summary><ul>\n<li class="toctree-l2"><a class="reference internal" href="api/a.html">a</a></li>')
SIGNATURE = ('<dt class="sig sig-object py" id="m.f">\n<span class="sig-name descname"><span class="pre">f</span></span>'
             '<span class="sig-paren">(</span>\n\n<dl>\n<dd><em class="sig-param">x</em>,</dd>\n<dd><em class="sig-param">y'
             '</em>,</dd>\n</dl>\n\n<span class="sig-paren">)</span></dt>\n<dd><dl class="field-list simple">\n<dt>a</dt>\n'
             '<dd>b</dd>\n</dl></dd>')
CITATIONS = ('<div role="list" class="citation-list">\n<div class="citation" id="id38" role="doc-biblioentry">\n'
             '<span class="label"><span class="fn-bracket">[</span>A+23<span class="fn-bracket">]</span></span>')


def test_controls_are_named_by_what_they_show():
    out = sphinx_site_fixes.accessible_names("\n".join([FOLD, SEARCH, SEARCH_ICON, EXPANDER, SIGNATURE, CITATIONS]))
    assert "Toggle hidden content" not in out and "<summary>\n<span class=\"collapsed\">" in out
    field = re.search(r'<button class="btn search-button-field[^>]*>', out)[0]
    assert "aria-label" not in field and 'title="Search"' in field
    assert SEARCH_ICON in out, "the icon-only search button keeps its name"
    assert '<summary aria-label="Pages under API x &amp; more"><span class="toctree-toggle"' in out
    signature = out[out.index('<dt class="sig'):out.index("</dt>")]
    assert "<dl>" not in signature and "<dd>" not in signature
    assert signature.count('<div class="cb-sig-param">') == 2 and '<div class="cb-sig-params">' in signature
    assert '<dl class="field-list simple">\n<dt>a</dt>\n<dd>b</dd>' in out, "a real definition list is left alone"
    assert 'role="doc-biblioentry"' not in out and '<div class="citation" id="id38" role="listitem">' in out
    assert sphinx_site_fixes.accessible_names(out) == out


def test_a_sidebar_expander_is_named_after_its_own_page_only():
    page = ('<a class="navbar-brand logo" href="intro.html"><p class="title">Book</p></a>\n<nav>'
            '<li class="toctree-l1"><a class="reference internal" href="a.html">A</a></li>\n' + EXPANDER)
    names = re.findall(r'<summary aria-label="([^"]*)"', sphinx_site_fixes.accessible_names(page))
    assert names == ["Pages under API x &amp; more"]


def _cell(source: str, tags: list[str]):
    return nbformat.v4.new_code_cell(source, metadata={"tags": tags})


def test_each_exercise_is_labelled_on_its_page(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# A chapter\n\n## Exercise 1.1: one\n\nWrite `f`."),
        _cell("def f():\n    raise NotImplementedError\n\nchecks.ch01_ex1(f)", ["exercise"]),
        _cell("# @title Solution\ndef f():\n    return 1\n\nchecks.ch01_ex1(f)", ["solution", "hide-input"]),
        nbformat.v4.new_markdown_cell("## Problem 2: two parts\n\nFirst, then second."),
        _cell("x = ...\nchecks.ps_p2a(x)", ["exercise"]),
        _cell("y = ...\nchecks.ps_p2b.record(y)", ["exercise"]),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "chapter.ipynb")
    links = " ".join(sphinx_exercises._link(title, ex) for title, ex in
                     [("one", "ch01_ex1"), ("part a", "ps_p2a"), ("part b", "PS_P2B")])
    (tmp_path / "index.md").write_text(f"# Index\n\n```{{toctree}}\nchapter\n```\n\n{links}\n")
    (tmp_path / "conf.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
                                      "extensions = ['myst_nb', 'sphinx_exercises']\nnb_execution_mode = 'off'\n")
    run = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", str(tmp_path), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    index, chapter = ((tmp_path / "out" / name).read_text() for name in ("index.html", "chapter.html"))
    hrefs = re.findall(r'href="chapter\.html#([^"]+)"><span class="std std-ref">', index)
    assert len(hrefs) == 3, index[-2000:]
    # the exercise alone in its section: the section (its heading); two in one section: each cell
    assert re.search(rf'<section id="{re.escape(hrefs[0])}">\s*<h2>Exercise 1.1', chapter), hrefs[0]
    for target, ex in zip(hrefs[1:], ["ps_p2a", "ps_p2b"]):
        cell = re.search(rf'<div class="cell tag_exercise[^"]*" id="{re.escape(target)}">(.*?)</div>\s*</div>', chapter, re.S)
        assert cell and f"checks.{ex}" in re.sub(r"<[^>]+>", "", cell[1]), (target, ex)
