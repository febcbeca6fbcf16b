"""The induction explainers on the built site, with no kernel: typeset mathematics, one
sentence per builder configuration, the term-count sliders, and both steppers.

- **Math is typeset**: no raw ``^{`` or ``_{`` (or a TeX command) is left in the text of any
  explainer, in every configuration of the builder; its formulas are HTML sub/superscripts.
- **Each configuration is explained**: the builder's sentence changes with each of the eight
  toggle configurations.
- **The counts scale**: the sliders set n heads per layer and L layers, and the readout gives
  (1 + n)^L logit terms, checked against the number computed here.
- **Two steppers**: SmolLM2 on the real sentence first, then the toy model; each one's random
  control shows different tokens from its text.
"""

from __future__ import annotations

import itertools
import re

import pytest
from test_browser import EXPLAINERS, SITE, Log, offline_context, open_page, server, watch  # noqa: F401

try:  # older trees define the browser fixture in test_browser, newer ones in tests/conftest.py
    from test_browser import browser  # noqa: F401
except ImportError:
    pass

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / "index.html").exists(),
                       reason=f"site not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

RAW_TEX = re.compile(r"[_^]\{|\\[A-Za-z]+")


@pytest.fixture
def page(browser, server):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    p = watch(context.new_page(), log)
    assert open_page(p, server, EXPLAINERS), f"{EXPLAINERS}: widgets did not render"
    yield p
    assert not log.console, log.console
    context.close()


def _set(builder, on: set[str]):
    for key in "qkv":
        button = builder.locator(f".cb-toggle-{key}")
        if ("cb-on" in (button.get_attribute("class") or "")) != (key in on):
            button.click()


def test_builder_math_is_typeset_and_each_configuration_explained(page):
    builder = page.locator(".cb-builder").first
    sentences = {}
    for r in range(4):
        for on in itertools.combinations("qkv", r):
            _set(builder, set(on))
            config = "".join(on)
            assert builder.get_attribute("data-config") == config
            text = builder.inner_text()
            assert not RAW_TEX.search(text), f"raw TeX in the builder ({config!r}): {RAW_TEX.search(text)[0]}"
            sentences[config] = builder.locator(".cb-config").inner_text()
    assert len(set(sentences.values())) == 8, "a configuration shares its sentence with another"
    assert "no virtual head" in sentences["k"]
    # formulas are typeset: sub/superscripts inside the formula cells
    assert builder.locator(".cb-formula .cb-math sup").count() >= 8
    assert builder.locator(".cb-formula .cb-math sub").count() >= 8


def test_stepper_text_has_no_raw_tex(page):
    steppers = page.locator(".cb-stepper")
    assert steppers.count() == 2, "the page has a SmolLM2 stepper and a toy-model stepper"
    for i in range(2):
        text = steppers.nth(i).inner_text()
        assert not RAW_TEX.search(text), text


def _slide(page, cls: str, value: int):
    page.locator(f".cb-builder .{cls}").first.evaluate(
        "(el, v) => { el.value = String(v); el.dispatchEvent(new Event('input', {bubbles: true})); }", value)


def test_term_count_sliders(page):
    scale = page.locator(".cb-builder .cb-scale").first
    assert scale.get_attribute("data-logits") == str((1 + 1) ** 2)  # the initial pair: n 1, L 2
    for n, layers in [(12, 12), (3, 2), (1, 2)]:
        _slide(page, "cb-heads", n)
        _slide(page, "cb-layers", layers)
        assert (scale.get_attribute("data-n"), scale.get_attribute("data-layers")) == (str(n), str(layers))
        assert scale.get_attribute("data-logits") == str((1 + n) ** layers)
        text = scale.locator(".cb-scale-out").inner_text()
        assert f"{n} head" in text and f"{layers} layer" in text
    _slide(page, "cb-heads", 12)
    _slide(page, "cb-layers", 12)
    assert "23,298,085,122,481" in scale.locator(".cb-scale-out").inner_text()


def test_both_steppers_switch_to_their_random_control(page):
    steppers = page.locator(".cb-stepper")
    labels = "(ts) => ts.map((t) => t.textContent)"
    for i in range(2):
        s = steppers.nth(i)
        text = s.locator("text.cb-label").evaluate_all(labels)
        s.locator(".cb-toggle").click()
        assert s.get_attribute("data-mode") == "random"
        rand = s.locator("text.cb-label").evaluate_all(labels)
        assert len(rand) == len(text) and rand != text
        assert rand[-1] in rand[:-1], "the control's last token repeats an earlier one"
        s.locator(".cb-toggle").click()
    # the SmolLM2 stepper shows the sentence in its own tokenizer's pieces: " Mr" ... " Mr"
    first = steppers.nth(0).locator("text.cb-label").evaluate_all(labels)
    assert first[-1].strip() == "Mr" and "Dursley" not in first and "D" in [t.strip() for t in first]


def test_toy_stepper_runs_the_model_on_the_readers_sequence(page):
    """The toy stepper's numbers come from the forward pass in the page: retype its sequence and
    step 4's attention and step 5's probability are TransformerLens's for the new sequence
    (to the three decimals shown, plus the derived float32 bound of the forward pass)."""
    import torch

    from circuitbook.book import attn_only_forward_terms, rounding_bound
    from circuitbook.models import load
    from circuitbook.widgets.explainers import pick_heads

    model = load("toy-2l")
    s = page.locator(".cb-stepper").nth(1)
    for _ in range(3):
        s.locator(".cb-next").click()
    assert s.get_attribute("data-step") == "3"
    before = s.get_attribute("data-attention")
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, model.cfg.d_vocab, (20,), generator=g).tolist()
    tokens = [t for t in tokens if t != tokens[9]] + [tokens[9]]   # the last token ...
    tokens.insert(4, tokens[-1])                                   # ... occurs once before, at 4
    s.locator(".cb-stepper-input").fill(" ".join(f"t{t}" for t in tokens))
    s.locator(".cb-stepper-input").dispatch_event("change")
    _, (l1, h1) = pick_heads(model)  # the heads the chapter's stepper shows
    assert f"head {l1}.{h1} puts" in s.locator(".cb-body").inner_text()
    with torch.no_grad():
        logits, cache = model.run_with_cache(torch.tensor([tokens]))
    query, earlier = len(tokens) - 1, 4
    want_att = float(cache["pattern", l1][0, h1, query, earlier + 1])
    want_p = float(logits[0, query].double().softmax(-1)[tokens[earlier + 1]])
    terms = attn_only_forward_terms(model.cfg, len(tokens))
    shown = 0.5e-3  # both are shown to three decimals
    bound_att = shown + rounding_bound(terms, 1.0)  # a pattern entry is at most 1
    bound_p = shown + 2 * rounding_bound(terms, logits.abs().max().item())  # softmax: |dp| <= 2 max|dlogit|
    got_att, got_p = float(s.get_attribute("data-attention")), float(s.get_attribute("data-p-expected"))
    assert abs(got_att - want_att) <= bound_att, (got_att, want_att, bound_att)
    assert abs(got_p - want_p) <= bound_p, (got_p, want_p, bound_p)
    print(f"\n[stepper] attention {got_att} vs {want_att:.6f} (bound {bound_att:.2g}), "
          f"p {got_p} vs {want_p:.6f} (bound {bound_p:.2g}); before the retyping {before}")
    assert s.get_attribute("data-attention") != before, "the sequence changed but the attention did not"
    assert f"{round(100 * got_att)}%" in s.locator(".cb-body").inner_text()
    labels = s.locator("text.cb-label").evaluate_all("(ts) => ts.map((t) => t.textContent)")
    assert len(labels) == len(tokens)
