"""The course site (``make course``, scripts/course.py) in headless Chromium: a chapter's page and
the problem set show each exercise's template and where its check runs, with no solution to
unfold. Offline (any request for another host is refused), with the ``browser`` and ``serve``
fixtures of tests/conftest.py. tests/site/test_course.py scans every file of the site.
"""

from __future__ import annotations

import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import course  # noqa: E402

PAGES = ["book/08_qk_ov.html", "book/induction/03_problems.html"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (course.OUT / "index.html").exists(), reason="course site not built: run make course"),
]

EXERCISES_JS = """() => ({
  exercises: [...document.querySelectorAll('div.cell.cb-exercise')].map((c) => ({
    template: c.querySelector('.cell_input pre').textContent,
    note: (c.querySelector('.cb-exercise-note') || {}).textContent || '',
    noteShown: !!c.querySelector('.cb-exercise-note') && c.querySelector('.cb-exercise-note').checkVisibility() })),
  solutions: document.querySelectorAll('div.cell.cb-solution, div.cell.tag_solution').length,
  toggles: [...document.querySelectorAll('summary, button, .toggle-button')]
    .map((e) => e.textContent).filter((t) => /solution/i.test(t)),
})"""


@pytest.fixture(scope="module")
def course_server(serve):
    return serve(course.OUT)


@pytest.mark.parametrize("path", PAGES)
def test_a_course_page_shows_templates_and_where_checks_run_but_no_solution(browser, course_server, path):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    external = []

    def route(r):
        if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
            return r.continue_()
        external.append(r.request.url)
        return r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.goto(f"{course_server}/{path}", wait_until="load", timeout=60_000)
    # what a reader can open: every folded cell
    page.evaluate("() => document.querySelectorAll('details').forEach((d) => d.open = true)")
    found = page.evaluate(EXERCISES_JS)
    text = page.inner_text("body")
    context.close()
    assert found["exercises"], f"{path}: no exercise"
    for ex in found["exercises"]:
        assert "NotImplementedError" in ex["template"] or "...  # your answer" in ex["template"], ex["template"]
        call = [line for line in ex["template"].splitlines() if line.startswith("checks.")][-1].strip()
        assert ex["noteShown"] and call in ex["note"] and "notebook" in ex["note"], ex["note"]
    assert found["solutions"] == 0 and not found["toggles"], found
    assert "Show the solution" not in text and "# @title Solution" not in text
    assert not external, external
