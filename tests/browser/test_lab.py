"""The induction lab on the built site, offline: the model runs in the page, and agrees with
TransformerLens.

- **Parity**: on 20 random sequences (lengths 2 to n_ctx) the page's forward pass gives
  toy-2l's logits, every head's pattern and every head's output ``z W_O`` as TransformerLens
  computes them here, within the worst-case float32 rounding of TransformerLens's own
  forward pass (``circuitbook.book.attn_only_forward_terms`` roundings x eps32 x the size
  of the numbers): the page accumulates in float64, so the difference is torch's rounding.
  toy-1l is checked on a few sequences too.
- **Ablation**: zero- and mean-ablating heads in the page changes the logits exactly as
  ``circuitbook.heads.ablate`` does (means from the same reference run, recomputed here).
- **Path expansion**: the page's terms for the last position equal
  ``circuitbook.paths.logit_attribution``'s, and they sum to the page's logits.
- **The widget**: clicking the previous-token head ablates it (zero, then mean, then back);
  its second-copy loss then rises, as the page's claim says; "random tokens, repeated" draws
  a repeated sequence.
- **Offline**: every request the page made was for the site itself (127.0.0.1); any other
  is blocked and recorded, and none was attempted.
"""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
import torch
from test_browser import SITE, Log, offline_context, open_page, server, watch  # noqa: F401

LAB = "book/induction/02_lab.html"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / LAB).exists(),
                       reason=f"lab page not built at {SITE}: run `make book` (or set SITE_DIR to a built site)"),
]

# The page's forward pass, called on the lab widget's own model (root.cbLab)
FORWARD_JS = """async ([name, sequences, ablate]) => {
  const root = document.querySelector('.cb-lab');
  const { forward, pathTerms, loadModel } = root.cbLab;
  const net = name === root.cbLab.net.name ? root.cbLab.net : loadModelFor(name);
  function loadModelFor(n) {
    return new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = document.documentElement.dataset.content_root + '_static/lab/' + n + '.js';
      s.onload = () => { try { resolve(loadModel(window.cbLabModels[n])); } catch (e) { reject(e); } };
      s.onerror = () => reject(new Error('could not load ' + s.src));
      document.head.append(s);
    });
  }
  const model = await net;
  return sequences.map((tokens) => {
    const run = forward(model, tokens, ablate);
    const terms = pathTerms(model, run, tokens.length - 1, ablate);
    return { logits: Array.from(run.logits),
             patterns: run.layers.map((l) => l.map((h) => Array.from(h.pattern))),
             scores: run.layers.map((l) => l.map((h) => Array.from(h.scores).map((x) => isFinite(x) ? x : null))),
             outs: run.layers.map((l) => l.map((h) => Array.from(h.out))),
             terms: Object.fromEntries(terms.map((t) => [t.label, Array.from(t.logits)])) };
  });
}"""


@pytest.fixture(scope="module")
def lab_page(browser, server):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    assert open_page(page, server, LAB), f"{LAB}: widgets did not render"
    page.wait_for_function("() => { const r = document.querySelector('.cb-lab'); return r && r.cbLab; }",
                           timeout=30_000)
    yield page, log, requests, server
    context.close()


def _models():
    from circuitbook.models import load

    return {name: load(name, device="cpu") for name in ("toy-1l", "toy-2l")}


@pytest.fixture(scope="module")
def models():
    return _models()


def _sequences(count: int, seed: int, n_ctx: int) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, n_ctx + 1, (count,), generator=g).tolist()
    lengths[0] = n_ctx  # the longest case, always
    return [torch.randint(0, 64, (n,), generator=g).tolist() for n in lengths]


def _f64(values) -> torch.Tensor:
    """What the page computed, as it computed it (float64)."""
    return torch.tensor(values, dtype=torch.float64)


def _bound(cfg, n: int, scale: float) -> float:
    from circuitbook.book import attn_only_forward_terms, rounding_bound

    return rounding_bound(attn_only_forward_terms(cfg, n), scale)


def _page(page, name, sequences, ablate=None):
    return page.evaluate(FORWARD_JS, [name, sequences, ablate or {}])


def _torch_run(model, tokens, hooks=()):
    with torch.no_grad(), model.hooks(fwd_hooks=list(hooks)):
        logits, cache = model.run_with_cache(torch.tensor([tokens]))
    return logits[0], cache


@pytest.mark.parametrize("name, count", [("toy-2l", 20), ("toy-1l", 5)])
def test_page_forward_matches_transformer_lens(lab_page, models, name, count):
    page = lab_page[0]
    model = models[name]
    cfg = model.cfg
    sequences = _sequences(count, seed=21, n_ctx=cfg.n_ctx)
    got = _page(page, name, sequences)
    worst = {"logits": 0.0, "patterns": 0.0, "outs": 0.0}
    for tokens, mine in zip(sequences, got):
        n = len(tokens)
        logits, cache = _torch_run(model, tokens)
        err = (_f64(mine["logits"]).view(n, -1) - logits.double()).abs().max().item()
        bound = _bound(cfg, n, logits.abs().max().item())
        assert err <= bound, f"{name}, {n} tokens: logits differ by {err:.2g} > {bound:.2g}"
        worst["logits"] = max(worst["logits"], err / bound)
        for layer in range(cfg.n_layers):
            scores = cache["attn_scores", layer][0]
            finite = scores[torch.isfinite(scores)]
            for head in range(cfg.n_heads):
                pat = _f64(mine["patterns"][layer][head]).view(n, n)
                err = (pat - cache["pattern", layer][0, head].double()).abs().max().item()
                # the softmax moves by at most the error of the scores it reads
                bound = _bound(cfg, n, max(1.0, finite.abs().max().item()))
                assert err <= bound, f"{name} L{layer}H{head}, {n} tokens: pattern off by {err:.2g} > {bound:.2g}"
                worst["patterns"] = max(worst["patterns"], err / bound)
                out = cache["z", layer][0, :, head] @ model.W_O[layer, head]  # [pos, d_model]
                err = (_f64(mine["outs"][layer][head]).view(n, -1) - out.double()).abs().max().item()
                bound = _bound(cfg, n, max(1.0, out.abs().max().item()))
                assert err <= bound, f"{name} L{layer}H{head}, {n} tokens: output off by {err:.2g} > {bound:.2g}"
                worst["outs"] = max(worst["outs"], err / bound)
    print(f"\n[lab] {name}: worst error / derived bound over {count} sequences: "
          + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()))


@pytest.mark.parametrize("how", ["zero", "mean"])
def test_page_ablation_matches_heads_ablate(lab_page, models, how):
    from circuitbook.heads import ablate
    from circuitbook.widgets.lab_export import reference_tokens

    page = lab_page[0]
    model = models["toy-2l"]
    sequences = _sequences(4, seed=5, n_ctx=model.cfg.n_ctx)
    for heads in ([(0, 2)], [(1, 1)], [(0, 2), (1, 1), (1, 3)]):
        ref = reference_tokens(model) if how == "mean" else None
        hooks = ablate(model, heads, how, reference_tokens=ref).fwd_hooks
        got = _page(page, "toy-2l", sequences, {f"{l}.{h}": how for l, h in heads})
        for tokens, mine in zip(sequences, got):
            n = len(tokens)
            logits, _ = _torch_run(model, tokens, hooks)
            clean, _ = _torch_run(model, tokens)
            err = (_f64(mine["logits"]).view(n, -1) - logits.double()).abs().max().item()
            bound = _bound(model.cfg, n, logits.abs().max().item())
            assert err <= bound, f"{how}-ablating {heads}, {n} tokens: {err:.2g} > {bound:.2g}"
            assert (logits - clean).abs().max() > 100 * bound, "the ablation changed nothing measurable"


def test_page_path_terms_match_logit_attribution(lab_page, models):
    from circuitbook.paths import logit_attribution

    page = lab_page[0]
    model = models["toy-2l"]
    sequences = _sequences(3, seed=8, n_ctx=model.cfg.n_ctx)
    for tokens, mine in zip(sequences, _page(page, "toy-2l", sequences)):
        n = len(tokens)
        with torch.no_grad():
            parts = dict(logit_attribution(model, torch.tensor([tokens])).parts())
        want = {label.replace("->", "\u2192"): t[0, -1].double() for label, t in parts.items()}
        assert set(mine["terms"]) == set(want), sorted(set(mine["terms"]) ^ set(want))
        scale = max(t.abs().max().item() for t in want.values())
        # the expansion's chain: the forward pass, then two heads' V and O products and sums
        from circuitbook.book import attn_only_forward_terms, rounding_bound

        terms = attn_only_forward_terms(model.cfg, n) + 2 * (model.cfg.d_model + model.cfg.d_head + n)
        bound = rounding_bound(terms, scale)
        for label, t in want.items():
            err = (_f64(mine["terms"][label]) - t).abs().max().item()
            assert err <= bound, f"path term {label}: {err:.2g} > {bound:.2g}"
        total = sum(_f64(v) for v in mine["terms"].values())
        logits = _f64(mine["logits"]).view(n, -1)[-1]
        assert (total - logits).abs().max().item() <= len(want) * 2.3e-16 * 64 * scale  # float64 sums


def test_clicking_the_previous_token_head_breaks_induction(lab_page):
    page, log, requests, base = lab_page
    lab = page.locator(".cb-lab")
    paths = lab.locator(".cb-lab-paths")

    def second_copy_loss():
        tokens = lab.locator(".cb-lab-input").input_value().split()
        n = len(tokens) // 2
        assert tokens[:n] == tokens[n:], "the lab starts on a repeated sequence"
        losses = json.loads(lab.locator(".cb-lab-loss").get_attribute("data-losses"))
        return sum(losses[n:]) / len(losses[n:])  # the second copy, from its second token

    clean = second_copy_loss()
    assert clean < 1.0
    assert abs(float(paths.get_attribute("data-sum")) - float(paths.get_attribute("data-logit"))) < 1e-9
    head = lab.locator('.cb-lab-head[data-head="0.2"]')
    head.click()
    assert lab.get_attribute("data-ablated") == "0.2:zero"
    head.click()
    assert lab.get_attribute("data-ablated") == "0.2:mean"
    assert second_copy_loss() > clean + 2.0, "ablating the previous-token head left induction working"
    assert abs(float(paths.get_attribute("data-sum")) - float(paths.get_attribute("data-logit"))) < 1e-9
    head.click()
    assert lab.get_attribute("data-ablated") == ""
    assert abs(second_copy_loss() - clean) < 1e-3
    # a new random sequence, repeated; a click on a token moves the position shown
    before = lab.locator(".cb-lab-input").input_value()
    lab.locator(".cb-lab-random").click()
    after = lab.locator(".cb-lab-input").input_value().split()
    assert " ".join(after) != before and after[: len(after) // 2] == after[len(after) // 2:]
    lab.locator(".cb-lab-tok").nth(3).click()
    assert lab.get_attribute("data-position") == "3"
    assert not log.console, log.console
    assert not log.external, f"requests left the site: {log.external}"
    # every request the page attempted (blocked ones included) was for this site
    site = urlsplit(base).netloc
    elsewhere = [r for r in requests if urlsplit(r).scheme not in ("data", "blob") and urlsplit(r).netloc != site]
    assert requests and not elsewhere, elsewhere
    assert any(r.endswith("/_static/lab/toy-2l.js") for r in requests), "the weights came from elsewhere"
