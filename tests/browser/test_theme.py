"""Every widget's text is readable in the light and the dark theme of the built site.

Each kind of widget (explore, quiz, progress, stepper, builder, lab, SmolLM2 lab) is rendered on
its page in three ways: the reader's system in light mode; in dark mode (``prefers-color-scheme: dark``,
which pydata-sphinx-theme's default "auto" mode follows with ``data-theme="dark"``); and a
light system with the theme's own switch set to dark (``data-theme="dark"`` on the root,
what its toggle does). For every piece of text in the widget, the WCAG 2 contrast ratio of
its colour against the background it is drawn on must be at least 4.5 (3 for large text:
24 px, or 18.66 px bold). The colours are the browser's computed ones; the text's colour is
blended with its alpha and the opacity of everything around it, the background is every
layer below it composited down to the page (an SVG label's background is the shape it sits
on). Disabled controls are exempt, as WCAG exempts inactive components.
"""

from __future__ import annotations

import pytest
from test_browser import EXPLAINERS, PROBLEMS, QUIZ, SITE, Log, offline_context, open_page, server, watch  # noqa: F401
from test_explore import explore_pages

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

WIDGETS = {  # kind: (page, selector of the widget's root)
    "explore": (lambda: explore_pages()[0], ".cb-explore"),
    "quiz": (lambda: QUIZ, ".cb-quiz"),
    "progress": (lambda: PROBLEMS, ".cb-progress"),
    "stepper": (lambda: EXPLAINERS, ".cb-stepper"),
    "builder": (lambda: EXPLAINERS, ".cb-builder"),
    "lab": (lambda: "book/induction/02_lab.html", ".cb-lab"),
    "smollm2 lab": (lambda: "book/induction/02_smollm2_lab.html", ".cb-smol"),  # before its model is loaded
}
THEMES = {"light": ("light", False), "dark": ("dark", False), "dark-toggle": ("light", True)}

CONTRAST_JS = """(selector) => {
  const parse = (c) => {
    const m = c && c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[ ,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, bottom) => {  // top (with alpha) composited over an opaque bottom
    const a = top[3];
    return [0, 1, 2].map((k) => top[k] * a + bottom[k] * (1 - a)).concat([1]);
  };
  const layers = (el) => {  // background colours from el down to the page, top first
    const out = [];
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      const s = getComputedStyle(n);
      if (n instanceof SVGElement) continue;
      const c = parse(s.backgroundColor);
      if (c && c[3] > 0) out.push(c);
      if (c && c[3] >= 1) return out;
    }
    out.push([255, 255, 255, 1]);  // the canvas
    return out;
  };
  const composite = (stack) => stack.reduceRight((below, c) => over(c, below));
  const opacity = (el) => {
    let o = 1;
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) o *= Number(getComputedStyle(n).opacity);
    return o;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const results = [];
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    const seen = new Set();
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      const el = t.parentElement;
      if (!t.textContent.trim() || seen.has(el)) continue;
      seen.add(el);
      if (!el.getClientRects().length || el.closest('[hidden], option, mjx-assistive-mml')) continue;
      const s = getComputedStyle(el);
      if (s.visibility === 'hidden' || s.display === 'none') continue;
      if (el.closest('button:disabled, input:disabled, select:disabled')) continue;
      let stack = layers(el);
      let fg;
      if (el instanceof SVGElement) {
        fg = parse(s.fill);
        const shape = el.previousElementSibling;
        if (shape && /^(rect|circle|path)$/.test(shape.tagName)) {
          const fill = parse(getComputedStyle(shape).fill);
          if (fill) stack = [[fill[0], fill[1], fill[2], fill[3] * Number(getComputedStyle(shape).fillOpacity)]].concat(stack);
        }
      } else {
        fg = parse(s.color);
      }
      if (!fg) { results.push({ text: t.textContent.trim().slice(0, 40), error: 'colour ' + (s.fill || s.color) }); continue; }
      const bg = composite(stack);
      const text = over([fg[0], fg[1], fg[2], fg[3] * opacity(el)], bg);
      const [a, b] = [lum(text), lum(bg)].sort((x, y) => y - x);
      const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
      results.push({ text: t.textContent.trim().slice(0, 40), ratio: (a + 0.05) / (b + 0.05),
                     large: size >= 24 || (size >= 18.66 && bold), fg: text.slice(0, 3).map(Math.round),
                     bg: bg.slice(0, 3).map(Math.round), cls: String(el.className && el.className.baseVal !== undefined
                       ? el.className.baseVal : el.className).slice(0, 40) });
    }
  }
  return results;
}"""


@pytest.mark.parametrize("theme", list(THEMES))
@pytest.mark.parametrize("kind", list(WIDGETS))
def test_widget_text_has_readable_contrast(browser, server, kind, theme):  # noqa: F811
    path, selector = WIDGETS[kind][0](), WIDGETS[kind][1]
    scheme, toggle = THEMES[theme]
    log = Log()
    context = offline_context(browser, log, color_scheme=scheme)
    page = watch(context.new_page(), log)
    try:
        assert open_page(page, server, path), f"{path}: widgets did not render"
        if toggle:
            page.evaluate("() => { document.documentElement.dataset.theme = 'dark'; "
                          "document.documentElement.dataset.mode = 'dark'; }")
        want = "dark" if theme != "light" else "light"
        assert page.evaluate("() => document.documentElement.dataset.theme") == want, \
            f"{path}: the site did not switch to its {want} theme"
        if kind == "quiz":  # the feedback too: answer every question and submit
            for group in page.locator(f"{selector} fieldset").all():
                group.locator("input").first.check()
            page.locator(f"{selector} button", has_text="Submit").first.click()
        found = page.evaluate(CONTRAST_JS, selector)
        assert found, f"{path}: no text in {selector}"
        bad: dict[tuple, list[str]] = {}  # one line per style: (class, colours, ratio) -> texts
        for r in found:
            if "error" in r or r["ratio"] < (3.0 if r["large"] else 4.5):
                key = (r.get("cls"), str(r.get("fg")), str(r.get("bg")), round(r.get("ratio", 0), 2), r.get("error"))
                bad.setdefault(key, []).append(r["text"])
        assert not bad, f"{kind} in the {theme} theme ({path}): text below the WCAG AA contrast:\n" + "\n".join(
            f"  class {c!r}: text {fg} on {bg}, ratio {ratio}{' ' + e if e else ''}: {texts[:5]}"
            + (f" and {len(texts) - 5} more" if len(texts) > 5 else "") for (c, fg, bg, ratio, e), texts in bad.items())
    finally:
        context.close()
