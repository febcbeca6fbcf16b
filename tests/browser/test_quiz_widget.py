"""The quiz widget's script in headless Chromium, without building the site: quiz.js renders
from the state Python computes (as on the static site, no kernel), against a stand-in for
anywidget's model. Checks the flow (answer all, submit, feedback, try again, resubmit) and
the math: readable HTML with no MathJax on the page, typeset TeX where MathJax is there.
Chromium and the HTTP server are tests/conftest.py's ``browser`` and ``serve``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WIDGETS = ROOT / "src" / "circuitbook" / "widgets"

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><style>{css}</style>{mathjax}</head><body>
<div id="root"></div>
<script id="state" type="application/json">{state}</script>
<script type="module">
import quiz from "./quiz.js";
const state = JSON.parse(document.getElementById("state").textContent);
const listeners = {{}};
const model = {{
  cid: "test",
  get: (k) => state[k],
  set: (k, v) => {{ state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); }},
  save_changes: () => {{}},
  on: (event, f) => {{ (listeners[event] = listeners[event] || []).push(f); }},
}};
quiz.render({{ model, el: document.getElementById("root") }});
window.quizState = state;
</script></body></html>"""

FAKE_MATHJAX = """<script>
window.MathJax = {
  startup: { promise: Promise.resolve(), document: { clear() {}, updateDocument() { window.mjUpdated = true; } } },
  tex2chtmlPromise: (tex) => {
    const node = document.createElement("mjx-container");
    node.textContent = "[" + tex + "]";
    return Promise.resolve(node);
  },
};
</script>"""


def _questions():
    from circuitbook.widgets.quiz_questions import QUESTIONS

    return QUESTIONS


@pytest.fixture(scope="module")
def site(tmp_path_factory, serve):
    from circuitbook.widgets.quiz import Quiz

    quiz = Quiz(_questions())
    state = {k: getattr(quiz, k) for k in ("questions", "answers", "submitted", "attempts")}
    root = tmp_path_factory.mktemp("quiz")
    # the module as the widget ships it: quiz.js with the dom.js it imports inlined
    from circuitbook.widgets.frontend import esm

    (root / "quiz.js").write_text(esm("quiz.js", WIDGETS))
    for name, mathjax in (("plain.html", ""), ("mathjax.html", FAKE_MATHJAX)):
        (root / name).write_text(PAGE.format(css=Quiz._css, mathjax=mathjax,
                                             state=json.dumps(state).replace("</", "<\\/")))
    return serve(root), state


def _open(browser, url):
    page = browser.new_page()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url)
    page.wait_for_selector(".cb-quiz fieldset.cb-question")
    return page, errors


def test_answer_submit_feedback_retry_resubmit(browser, site):
    url, state = site
    page, errors = _open(browser, url + "/plain.html")
    quiz = page.locator(".cb-quiz")
    questions = quiz.locator("fieldset.cb-question")
    n = questions.count()
    assert n == len(state["questions"]) == 8
    submit, retry = quiz.locator(".cb-submit"), quiz.locator(".cb-retry")
    assert submit.is_disabled() and not retry.is_visible()
    for i in range(n):
        questions.nth(i).locator("input[type=radio]").nth(0).check()
    submit.click()
    assert quiz.locator(".cb-feedback").count() == n
    score = int(quiz.get_attribute("data-score"))
    assert score == sum(q["correct"] == 0 for q in state["questions"]) < n
    wrong = quiz.locator('.cb-feedback[data-right="false"]')
    assert wrong.count() == n - score
    text = wrong.first.inner_text()
    assert text.startswith("\u2718 Not quite.") and len(text) > 60  # says what is wrong with that option
    assert all(state["questions"][i]["options"][state["questions"][i]["correct"]] not in
               questions.nth(i).locator(".cb-feedback").inner_html()
               for i in range(n) if state["questions"][i]["correct"] != 0), "a wrong answer was shown the right one"
    retry.click()
    assert quiz.locator(".cb-feedback").count() == 0 and not retry.is_visible()
    assert questions.nth(3).locator("input[type=radio]").nth(0).is_checked(), "answers survive a retry"
    for i, q in enumerate(state["questions"]):
        questions.nth(i).locator("input[type=radio]").nth(q["correct"]).check()
    submit.click()
    assert quiz.get_attribute("data-score") == str(n)
    assert quiz.locator('.cb-feedback[data-right="true"]').count() == n
    assert "attempt 2" in quiz.locator(".cb-summary").inner_text()
    assert not errors, errors


def test_math_reads_as_html_without_mathjax(browser, site):
    url, _ = site
    page, errors = _open(browser, url + "/plain.html")
    quiz = page.locator(".cb-quiz")
    text = quiz.inner_text()
    assert "$" not in text and "\\" not in text and "_{" not in text
    assert quiz.locator("span.cb-math sub").count() > 5
    assert "W_QK" not in text and "W\nQK" not in text
    assert not errors, errors


def test_math_is_typeset_where_mathjax_is_on_the_page(browser, site):
    url, _ = site
    page, errors = _open(browser, url + "/mathjax.html")
    page.wait_for_function("document.querySelectorAll('span.cb-math:not([data-typeset])').length === 0")
    spans = page.locator(".cb-quiz span.cb-math")
    assert spans.count() > 5
    assert page.locator(".cb-quiz span.cb-math > mjx-container").count() == spans.count()
    assert "[W_{QK}" in page.locator(".cb-quiz legend").first.inner_text()
    assert page.evaluate("window.mjUpdated === true")
    assert not errors, errors
