"""The SmolLM2 lab on the built site, offline: SmolLM2 runs in the page and agrees with
TransformerLens (``load_pretrained("smollm2-135m")``).

- **Loading**: nothing of the model is fetched before the button is pressed; then only the
  site's own ``_static/smollm2/`` files, with a progress bar that reaches the end. No
  request leaves the site, and no other page of the site references or fetches any of it.
  From ``file://`` the button says why it cannot load (the browser forbids reading files).
- **Tokenizer**: the page's ids equal SmolLM2's Python tokenizer's on a few hundred strings
  (Shakespeare, whitespace runs, accents, CJK, emoji, special tokens, random code points).
- **Weights**: the page's dequantised weights equal TransformerLens's, bit for bit (the
  embedding, and every matrix of three layers).
- **Layer by layer**: on random and real sequences, each of the 30 layers run in the page on
  TransformerLens's own input stream gives TransformerLens's patterns, z, head outputs
  ``z W_O`` and output stream, within a first-order worst-case bound of float32 rounding
  (:func:`layer_bounds`: Higham's ``n u sum |x_i y_i|`` for every sum, with u = eps as
  ``circuitbook.book.rounding_bound`` counts, carried through RMSNorm, RoPE, the softmax,
  SiLU and the products, row by row). The unembedding likewise.
- **Whole model**: the page's free-running logits, within the house's whole-model bound
  (twice the roundings along the longest path, times the logits' accumulated size, as
  chapter 11 checks whole models; it leaves out error growth between layers, so it is
  loose: the layer-by-layer test is the sharp one, and the worst ratio is printed).
- **Ablation**: the exported means are ``heads.ablate``'s, within rounding; ablated heads'
  z in the page are those means (or zeros) exactly; layer by layer and end to end the page
  agrees with TransformerLens under ``heads.ablate``'s hooks.
- **The repeated passage**: the page's first- and second-copy losses, clean and after its
  "top k induction heads" button (k = 6, mean), equal the Python computation with
  ``heads.ablate`` on the same text and the same heads (ranked here by
  ``heads.induction_scores``), to the 0.01 nats the page prints (:data:`PRINTED`).
- **The widget**: a head click in "ablates it" mode cycles zero, mean, off; "k random heads"
  draws a fresh set each click; a token click moves the position; the top five shown are
  the model's.
- **Running the reader's text** (issue 40): the controls that need the model are off until it
  is loaded; the size in the prose and in the widget is one number, the manifest's files;
  Enter and Ctrl+Enter run the text (Shift+Enter is a new line), and so does a pause in
  typing (once, at least 600 ms after the last key); meanwhile the results are marked stale
  (a class, a visible note, dimmed) until the new run lands.
- **Repeats**: on a text with a repeated sentence the page finds the positions of
  ``repeated_spans`` of tests/smollm2_repeats.py (the JS agrees with it on random lists too) and prints the loss
  at their first occurrence and at the repeat as Python computes them, to the printed 0.01.
- **The loss chart**: labelled axes with ticks, the repeats and the copy boundary marked; at
  1280 and 390 px wide its text keeps 10 px or more and nothing of the lab sticks out.
- **Ablation**: each loss printed as "clean \u2192 ablated, change", both as Python computes them.
- **Random baseline**: its draws (BASELINE_DRAWS of k random heads, each a full pass), the mean,
  sd and range printed are theirs, one draw agrees with ``heads.ablate``, and what was shown
  before is shown again after.

The page is read from ``SITE_DIR`` when set (a partial build: ``build_site.py --out
_build/smollm2 --only book/induction/02_smollm2_lab``, then ``SITE_DIR=_build/smollm2/_build/html``).
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
import torch
from smollm2_repeats import repeat_lengths, repeated_spans, span_losses
from test_browser import SCROLL_TO_LAZY_JS, SITE, Log, offline_context, open_page, server, watch  # noqa: F401

LAB = "book/induction/02_smollm2_lab.html"
EPS = float(torch.finfo(torch.float32).eps)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not (SITE / LAB).exists(),
                       reason=f"SmolLM2 lab page not built at {SITE}: run `make book` (or set SITE_DIR)"),
]

HELPERS = """
window.cbTest = {
  lab: () => document.querySelector('.cb-smol').cbSmol,
  b64: (a) => { const u = new Uint8Array(a.buffer, a.byteOffset, a.byteLength); let s = '';
    for (let i = 0; i < u.length; i += 32768) s += String.fromCharCode.apply(null, u.subarray(i, i + 32768));
    return btoa(s); },
  f32: (s) => { const b = atob(s), u = new Uint8Array(b.length);
    for (let i = 0; i < b.length; i++) u[i] = b.charCodeAt(i); return new Float32Array(u.buffer); },
  cat: (arrays) => { const n = arrays.reduce((a, x) => a + x.length, 0), out = new Float32Array(n);
    let at = 0; for (const x of arrays) { out.set(x, at); at += x.length; } return out; },
};
"""

FORWARD_JS = """([tokens, ablate, heads]) => {
  const t = window.cbTest, cb = t.lab(), run = cb.forward(cb.net, tokens, ablate);
  return { logits: t.b64(run.logits), embed: t.b64(run.resid(0)),
           patterns: t.b64(t.cat(heads.map(([l, h]) => run.pattern(l, h)))) };
}"""

LAYER_JS = """([l, x, P, ablate]) => {
  const t = window.cbTest, cb = t.lab(), H = cb.net.cfg.n_heads;
  const run = cb.runLayer(cb.net, l, t.f32(x), P, ablate);
  const heads = [];
  for (let h = 0; h < H; h++) heads.push(run.headOutput(l, h).slice());
  return { patterns: t.b64(t.cat(Array.from({ length: H }, (_, h) => run.pattern(l, h)))),
           z: t.b64(run.z(l)), heads: t.b64(t.cat(heads)), resid: t.b64(run.resid(l + 1)) };
}"""

UNEMBED_JS = """([x, P]) => { const t = window.cbTest, cb = t.lab();
  return t.b64(cb.runUnembed(cb.net, t.f32(x), P).logits); }"""



def _f64(s: str, *shape) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(base64.b64decode(s), "<f4").astype(np.float64)).view(*shape)


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def smollm2():
    from circuitbook.models.pretrained import load_smollm2

    model, tok = load_smollm2("cpu", progress=False)
    return model, tok


@pytest.fixture(scope="module")
def lab_page(browser, server):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    assert open_page(page, server, LAB), f"{LAB}: widgets did not render"
    page.wait_for_selector(".cb-smol .cb-smol-load", timeout=30_000)
    before = list(requests)
    page.locator(".cb-smol .cb-smol-load").click()
    page.wait_for_function("() => { const r = document.querySelector('.cb-smol');"
                           " return r && r.dataset.loaded === 'true' && r.dataset.state === 'ready'; }",
                           timeout=600_000)
    page.evaluate(HELPERS)
    yield page, log, requests, before, server
    context.close()


@pytest.fixture(scope="module")
def reference(smollm2):
    """The page's reference run and induction ranking, recomputed here."""
    from circuitbook.heads import induction_scores
    from circuitbook.widgets.smollm2_export import induction_tokens, reference_tokens

    model, tok = smollm2
    scores = induction_scores(model, tokens=induction_tokens())
    order = [divmod(int(i), model.cfg.n_heads) for i in scores.flatten().argsort(descending=True)]
    return reference_tokens(tok), order


def _sequences(tok, seed: int) -> dict[str, list[int]]:
    """Random ids (any of the 49,152, special tokens too), a Shakespeare passage, and the
    longest the page runs."""
    from circuitbook.data.corpus import shakespeare_scenes
    from circuitbook.widgets.smollm2_export import MAX_TOKENS

    g = torch.Generator().manual_seed(seed)
    scenes = shakespeare_scenes()
    text = scenes[len(scenes) // 3][1]
    return {"random 17": torch.randint(0, 49152, (17,), generator=g).tolist(),
            "Shakespeare 64": tok(text[:3000])["input_ids"][120:184],
            f"random {MAX_TOKENS}": torch.randint(0, 49152, (MAX_TOKENS,), generator=g).tolist()}


# --------------------------------------------------------------------------- the bounds


def layer_bounds(model, cache, layer: int, z: torch.Tensor | None = None, z_error: torch.Tensor | None = None):
    """First-order worst-case rounding bounds of one float32 layer run on an exact input.

    Every sum of n products is off by at most n eps sum |x_i y_i| (Higham, ch. 3, with
    eps = 2^-23 per rounding as ``rounding_bound`` counts); an elementwise operation adds
    one eps of its result; errors of a function's inputs carry through its first-order
    sensitivity (RMSNorm: 2 |w| / rms per unit of input error; softmax: the pattern moves by
    at most 2 max |score error| in total over a row, p_ab times that per entry; SiLU: slope
    at most 1.1). ``z``/``z_error``: the z used (an ablation's) and its own error, per head.

    Returns per row p: ``pattern`` [H, P] (each entry of row p), ``z`` [H, P], ``head``
    [H, P] (each entry of z_h W_O[h] at row p), ``resid`` [P] (resid_post)."""
    cfg = model.cfg
    D, E, H, F = cfg.d_model, cfg.d_head, cfg.n_heads, cfg.d_mlp
    d = lambda t: t[0].detach().double()  # noqa: E731
    blk = model.blocks[layer]
    n1 = d(cache[f"blocks.{layer}.ln1.hook_normalized"]) * blk.ln1.w.double()  # [P, D]
    P = n1.shape[0]
    absmm = lambda a, w: a.abs() @ w.abs()  # noqa: E731
    WQ, WK, WV = (getattr(model, n)[layer].double() for n in ("W_Q", "W_K", "W_V"))   # [H, D, E]
    Qa = torch.einsum("pd,hde->phe", n1.abs(), WQ.abs())
    Ka = torch.einsum("pd,hde->phe", n1.abs(), WK.abs())
    Va = torch.einsum("pd,hde->phe", n1.abs(), WV.abs())
    rot = lambda a: a + a.roll(E // 2, -1)  # noqa: E731  |x cos + rot(x) sin| <= |x_i| + |x_pair|
    S = torch.einsum("phe,bhe->hpb", rot(Qa), rot(Ka)) / 8
    causal = torch.ones(P, P, dtype=torch.bool).tril()
    S_max = S.masked_fill(~causal, 0).amax(-1)                       # [H, P]
    V_max = Va.amax(-1).T.cummax(-1).values                          # [H, P]: max over b <= p
    t_s = (D + 4) + (D + 1) + 3 + (E + 1)    # RMSNorm, projection, RoPE, score
    score_err = t_s * EPS * S_max
    pattern = 2 * score_err + (P + 3) * EPS                          # p_ab <= 1
    z_err = V_max * (2 * score_err + (P + 3 + P + 2 * D + 5) * EPS)
    z_used = d(cache[f"blocks.{layer}.attn.hook_z"]) if z is None else z        # [P, H, E]
    if z_error is not None:
        z_err = torch.where(torch.isnan(z_error), z_err, z_error)
    WO = model.W_O[layer].double()                                   # [H, E, D]
    col = WO.abs().sum(1).amax(-1)                                   # [H]: max_j sum_e |W_O|
    zWO = torch.einsum("phe,hed->hpd", z_used.abs(), WO.abs()).amax(-1)           # [H, P]
    head = z_err * col[:, None] + (E + 1) * EPS * zWO
    mid = d(cache[f"blocks.{layer}.hook_resid_mid"])
    attn_err = (z_err * col[:, None]).sum(0) + (H * E + 1) * EPS * zWO.sum(0) + EPS * mid.abs().amax(-1)
    # MLP on resid_mid (error attn_err per entry)
    rms = d(cache[f"blocks.{layer}.ln2.hook_scale"])[:, 0]
    w2 = blk.ln2.w.double()
    n2 = d(cache[f"blocks.{layer}.ln2.hook_normalized"]) * w2
    dn2 = 2 * attn_err / rms * w2.abs().max() + (D + 4) * EPS * n2.abs().amax(-1)      # [P]
    Wg, Wi, Wo2 = blk.mlp.W_gate.double(), blk.mlp.W_in.double(), blk.mlp.W_out.double()
    g, u = n2 @ Wg, n2 @ Wi                                          # [P, F]
    dg = dn2[:, None] * Wg.abs().sum(0) + (D + 1) * EPS * absmm(n2, Wg)
    du = dn2[:, None] * Wi.abs().sum(0) + (D + 1) * EPS * absmm(n2, Wi)
    post = torch.nn.functional.silu(g) * u
    dpost = 1.1 * dg * u.abs() + torch.nn.functional.silu(g).abs() * du + 5 * EPS * post.abs()
    out = d(cache[f"blocks.{layer}.hook_resid_post"])
    dout = (dpost @ Wo2.abs() + (F + 1) * EPS * absmm(post, Wo2)).amax(-1)
    resid = attn_err + dout + EPS * out.abs().amax(-1)
    return {"pattern": pattern, "z": z_err, "head": head, "resid": resid}


def forward_terms(cfg, n: int) -> int:
    """Roundings along the longest path of SmolLM2's forward pass over n positions: per
    layer two RMSNorms (d_model + 4 each), Q/K/V (d_model + 1), RoPE (3), scores
    (d_head + 1), softmax (n + 3), z (n), W_O over all heads (n_heads d_head + 1), the MLP
    (d_model + 1, SiLU 5, d_mlp + 1) and two residual additions; then the final RMSNorm and
    the unembedding (d_model + 1). Chapter 11 counts its models the same way."""
    D, E, H, F = cfg.d_model, cfg.d_head, cfg.n_heads, cfg.d_mlp
    layer = 2 * (D + 4) + (D + 1) + 3 + (E + 1) + (n + 3) + n + (H * E + 1) + (D + 1) + 5 + (F + 1) + 2
    return cfg.n_layers * layer + (D + 4) + (D + 1)


def logit_scale(model, cache) -> torch.Tensor:
    """Per row, the size of the numbers the logits add up: max_j sum_i |n_i| |W_U[i, j]|."""
    n = cache["ln_final.hook_normalized"][0].double() * model.ln_final.w.double()
    return (n.abs() @ model.W_U.double().abs()).amax(-1)


def _torch(model, tokens, hooks=()):
    with torch.no_grad(), model.hooks(fwd_hooks=list(hooks)):
        logits, cache = model.run_with_cache(torch.tensor([tokens]))
    return logits[0].double(), cache


# --------------------------------------------------------------------------- loading, offline


def test_loading_is_on_demand_offline_and_from_the_site(lab_page, smollm2):
    from circuitbook.widgets.smollm2_export import weight_bytes

    page, log, requests, before, base = lab_page
    assert not [r for r in before if "/_static/smollm2/" in r], "the model was fetched before the button"
    site = urlsplit(base).netloc
    elsewhere = [r for r in requests if urlsplit(r).scheme not in ("data", "blob") and urlsplit(r).netloc != site]
    assert not elsewhere and not log.external, f"requests left the site: {elsewhere or log.external}"
    model_files = {r.rsplit("/", 1)[1] for r in requests if "/_static/smollm2/" in r}
    assert {"manifest.json", "tokenizer.json", "tokenizers.mjs", "embed.bin", "tables.bin"} <= model_files
    assert {f"layer-{i:02d}.bin" for i in range(30)} <= model_files
    manifest = json.loads((SITE / "_static" / "smollm2" / "manifest.json").read_text())
    weights = sum(f["bytes"] for f in manifest["files"] if f["name"].startswith(("layer-", "embed")))
    assert weights == weight_bytes(smollm2[0].cfg)
    total = page.evaluate("() => window.cbTest.lab().net.bytes")
    assert total == sum(f["bytes"] for f in manifest["files"] if f["name"].endswith(".bin")) < 150e6
    assert page.locator(".cb-smol-progress").evaluate("p => p.value") == 1
    assert not log.console, log.console


def _other_pages() -> list[str]:
    """Every built page but the lab (a full build, or a partial one: ``--only``)."""
    return [p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html")
            if not p.relative_to(SITE).parts[0].startswith("_") and p.relative_to(SITE).as_posix() != LAB]


def test_no_other_page_pays_for_it():
    pages = _other_pages()
    assert pages, f"no other page built at {SITE} to compare with"
    for page in pages:
        text = (SITE / page).read_text(encoding="utf-8", errors="replace")
        # a page carries the lab if it loads the files (a src or href into _static/smollm2/) or
        # holds the widget's module (its kernels); the API reference may name the folder in prose
        loads = re.search(r'(?:src|href)="[^"]*_static/smollm2', text)
        assert not loads and "SMOLLM2_KERNELS" not in text, f"{page} carries the SmolLM2 lab"


def test_another_page_fetches_none_of_it(browser, server):  # noqa: F811
    """The toy lab (the page before it) where it is built, else the book's first page."""
    other = "book/induction/02_lab.html" if (SITE / "book/induction/02_lab.html").exists() else "book/intro.html"
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    open_page(page, server, other)
    page.wait_for_timeout(1000)
    assert requests and not [r for r in requests if "smollm2" in r], other
    context.close()


def test_from_file_the_button_says_why_it_cannot_load(browser):
    context = browser.new_context()
    context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
    page = context.new_page()
    page.goto((SITE / LAB).as_uri())
    page.evaluate(SCROLL_TO_LAZY_JS)  # widgets load as they come into view
    page.wait_for_selector(".cb-smol .cb-smol-load", timeout=60_000)
    page.locator(".cb-smol .cb-smol-load").click()
    status = page.locator(".cb-smol .cb-smol-status")
    page.wait_for_function("() => /could not load/.test(document.querySelector('.cb-smol-status').textContent)",
                           timeout=60_000)
    assert "serve the site" in status.text_content()
    context.close()


# --------------------------------------------------------------------------- tokenizer, weights


def _strings() -> list[str]:
    from circuitbook.data.corpus import shakespeare_scenes

    rng = random.Random(0)
    fixed = ["Hello world", "  leading spaces", "trailing   ", "tabs\tand\nnewlines\n\n\n", "12345 3.14159 1,000,000",
             "h\u00e9llo caf\u00e9 na\u00efve", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
             "emoji \U0001F600\U0001F44D\U0001F3FD family \U0001F468\u200d\U0001F469\u200d\U0001F467",
             "<|endoftext|>inside<|im_start|>user", "don't won't I'm we'll they've", "\u00a0nbsp\u2003em",
             "a" * 60, "   \n  \t ", "x\r\ny", "A\u0301\u0338 combining", "def f(x):\n    return x**2\n"]
    scenes = shakespeare_scenes()
    for _ in range(150):
        _, t = rng.choice(scenes)
        i = rng.randrange(max(1, len(t) - 300))
        fixed.append(t[i: i + rng.randint(1, 300)])
    for _ in range(100):
        fixed.append("".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xA0, 0x2FFF), rng.randint(0x3000, 0x9FFF),
                                             rng.randint(0x1F300, 0x1FAFF), 10, 9, 32])) for _ in range(rng.randint(1, 40))))
    return fixed


def test_page_tokenizer_is_the_models(lab_page, smollm2):
    page, tok = lab_page[0], smollm2[1]
    strings = _strings()
    got = page.evaluate("(ss) => ss.map((s) => window.cbTest.lab().tokenizer.encode(s).ids)", strings)
    bad = [(s, g, tok(s)["input_ids"]) for s, g in zip(strings, got) if g != tok(s)["input_ids"]]
    assert not bad, f"{len(bad)} of {len(strings)} strings tokenise differently, e.g. {bad[:2]}"


def test_page_weights_are_the_models_bit_for_bit(lab_page, smollm2):
    model = smollm2[0]
    js = """([ptr, nb, n, q8]) => { const cb = window.cbTest.lab(), k = cb.net.k;
      const out = cb.net.buf.logits;  // a buffer of max_tokens x d_vocab floats (25 MB)
      k.dequant_rows(ptr, nb, n, q8, out);
      return window.cbTest.b64(new Float32Array(k.memory.buffer, out, 32 * nb * n)); }"""
    ptrs = lab_page[0].evaluate("() => { const n = window.cbTest.lab().net; return {W_E: n.W_E, layers: n.layers}; }")
    rows = 8192  # of W_E's 49,152 rows at a time: 18.9 MB of float32, within that buffer
    for start in range(0, 49152, rows):
        got = _f64(lab_page[0].evaluate(js, [ptrs["W_E"] + start * 18 * 34, 18, rows, 1]), rows, 576)
        assert torch.equal(got, model.W_E[start: start + rows].double()), f"W_E rows {start}.."
    H, E = model.cfg.n_heads, model.cfg.d_head
    for layer in (0, 17, 29):
        b = model.blocks[layer]
        want = {"W_Q": b.attn.W_Q.permute(0, 2, 1).reshape(H * E, -1), "W_K": b.attn._W_K.permute(0, 2, 1).reshape(-1, 576),
                "W_V": b.attn._W_V.permute(0, 2, 1).reshape(-1, 576), "W_O": b.attn.W_O.reshape(H * E, -1).T,
                "W_gate": b.mlp.W_gate.T, "W_in": b.mlp.W_in.T, "W_out": b.mlp.W_out.T}
        for name, w in want.items():
            n, k = w.shape
            got = _f64(lab_page[0].evaluate(js, [ptrs["layers"][layer][name], k // 32, n, 0]), n, k)
            assert torch.equal(got, w.double()), f"L{layer} {name}"
    # the page stopped using its buffers mid-pass: the next forward starts afresh
    lab_page[0].evaluate("() => { window.cbTest.lab().net.state = null; }")


# --------------------------------------------------------------------------- parity


def _check_layers(page, model, tokens, hooks=(), ablate=None, means=None, mean_err=None, worst=None):
    """Each layer in the page on TransformerLens's input stream; returns the worst error/bound."""
    cfg = model.cfg
    H, E, D = cfg.n_heads, cfg.d_head, cfg.d_model
    P = len(tokens)
    logits, cache = _torch(model, tokens, hooks)
    worst = worst if worst is not None else {}
    for layer in range(cfg.n_layers):
        z_used, z_error = None, None
        if ablate:
            z_used = cache["z", layer][0].double().clone()
            z_error = torch.full((H, P), float("nan"), dtype=torch.float64)
            for key, how in ablate.items():
                l, h = map(int, key.split("."))
                if l == layer:
                    z_used[:, h] = 0 if how == "zero" else means[l, h].double()
                    z_error[h] = 0 if how == "zero" else mean_err[l, h]
        bounds = layer_bounds(model, cache, layer, z_used, z_error)
        got = page.evaluate(LAYER_JS, [layer, _b64(cache["resid_pre", layer][0]), P, ablate or {}])
        want_pattern = cache["pattern", layer][0].double()             # [H, P, P]
        checks = {
            "pattern": ((_f64(got["patterns"], H, P, P) - want_pattern).abs().amax(-1), bounds["pattern"]),
            "z": ((_f64(got["z"], P, H, E) - (z_used if z_used is not None else cache["z", layer][0].double()))
                  .abs().amax(-1).T, bounds["z"]),
            "head": ((_f64(got["heads"], H, P, D) - torch.einsum(
                "phe,hed->hpd", z_used if z_used is not None else cache["z", layer][0].double(),
                model.W_O[layer].double())).abs().amax(-1), bounds["head"]),
            "resid": ((_f64(got["resid"], P, D) - cache["resid_post", layer][0].double()).abs().amax(-1),
                      bounds["resid"]),
        }
        for name, (err, bound) in checks.items():
            # an ablated head's z is its substitute exactly: no error, and no bound either
            ratio = torch.where(err == 0, 0.0, err / bound).max().item()
            assert ratio <= 1, f"layer {layer} {name}: off by {err.max():.3g}, over its bound (ratio {ratio:.3g})"
            worst[name] = max(worst.get(name, 0.0), ratio)
    final = cache["resid_post", cfg.n_layers - 1][0]
    got = _f64(page.evaluate(UNEMBED_JS, [_b64(final), P]), P, -1)
    bound = (2 * D + 5) * EPS * logit_scale(model, cache)
    ratio = ((got - logits).abs().amax(-1) / bound).max().item()
    assert ratio <= 1, f"unembedding: ratio {ratio:.3g}"
    worst["unembed"] = max(worst.get("unembed", 0.0), ratio)
    return worst


def test_every_layer_matches_transformer_lens(lab_page, smollm2):
    page = lab_page[0]
    model, tok = smollm2
    worst = {}
    for name, tokens in _sequences(tok, seed=3).items():
        if len(tokens) <= 64:  # the longest one runs end to end in the next test
            _check_layers(page, model, tokens, worst=worst)
    print("\n[smollm2 lab] layer by layer, worst error / derived bound: "
          + ", ".join(f"{k} {v:.2g}" for k, v in worst.items()))


def test_whole_model_matches_transformer_lens(lab_page, smollm2):
    page = lab_page[0]
    model, tok = smollm2
    heads = [(18, 6), (17, 3), (0, 0), (29, 8)]
    worst = 0.0
    for name, tokens in _sequences(tok, seed=4).items():
        P = len(tokens)
        logits, cache = _torch(model, tokens)
        got = page.evaluate(FORWARD_JS, [tokens, {}, heads])
        # the embedding is a row of dequantised blocks: exact
        assert torch.equal(_f64(got["embed"], P, -1), cache["hook_embed"][0].double()), name
        bound = 2 * forward_terms(model.cfg, P) * EPS * logit_scale(model, cache)   # [P]
        err = (_f64(got["logits"], P, -1) - logits).abs().amax(-1)
        assert (err <= bound).all(), f"{name}: logits off by {err.max():.3g}"
        worst = max(worst, (err / bound).max().item())
        pats = _f64(got["patterns"], len(heads), P, P)
        for i, (l, h) in enumerate(heads):
            pat_bound = 2 * forward_terms(model.cfg, P) * EPS
            assert (pats[i] - cache["pattern", l][0, h].double()).abs().max() <= pat_bound
    print(f"\n[smollm2 lab] whole model, worst logit error / bound {worst:.2g}")


def test_means_are_heads_ablates(lab_page, smollm2, reference):
    from circuitbook.heads import ablate

    model = smollm2[0]
    cfg = model.cfg
    ref, _ = reference
    every = [(layer, head) for layer in range(cfg.n_layers) for head in range(cfg.n_heads)]
    want = ablate(model, every, "mean", reference_tokens=ref).means
    want = torch.stack([want[layer] for layer in range(cfg.n_layers)]).double()
    got = _f64(lab_page[0].evaluate("() => { const n = window.cbTest.lab().net;"
                                    " return window.cbTest.b64(n.f32.subarray(n.z_mean >> 2, (n.z_mean >> 2) + 30 * 9 * 64)); }"),
               cfg.n_layers, cfg.n_heads, cfg.d_head)
    # two float32 runs of the model up to each layer's z, then a mean over the reference's tokens
    n = ref.numel()
    for layer in range(cfg.n_layers):
        terms = 2 * (layer * (forward_terms(cfg, ref.shape[1]) // cfg.n_layers) + ref.shape[1] + n)
        scale = max(1.0, want[layer].abs().max().item())
        assert (got[layer] - want[layer]).abs().max() <= terms * EPS * scale, f"layer {layer}"


def test_ablation_matches_heads_ablate(lab_page, smollm2, reference):
    from circuitbook.heads import ablate

    page = lab_page[0]
    model, tok = smollm2
    cfg = model.cfg
    ref, order = reference
    means = _f64(page.evaluate("() => { const n = window.cbTest.lab().net;"
                               " return window.cbTest.b64(n.f32.subarray(n.z_mean >> 2, (n.z_mean >> 2) + 30 * 9 * 64)); }"),
                 cfg.n_layers, cfg.n_heads, cfg.d_head)
    tokens = _sequences(tok, seed=5)["Shakespeare 64"]
    for how, heads in [("mean", order[:6]), ("zero", [(0, 3), (18, 6)]), ("mean", [(2, 1), (11, 4), (29, 0)])]:
        keys = {f"{l}.{h}": how for l, h in heads}
        hooks = ablate(model, heads, how, reference_tokens=ref if how == "mean" else None)
        if how == "mean":  # heads.ablate's own means, and their distance from the page's
            for (l, h), m in zip([(l, h) for l in sorted(hooks.by_layer) for h in hooks.by_layer[l]],
                                 [m for l in sorted(hooks.by_layer) for m in hooks.means[l]]):
                assert (means[l, h] - m.double()).abs().max() <= 2 * (l + 1) * forward_terms(cfg, 64) // cfg.n_layers \
                    * EPS * max(1.0, m.abs().max().item())
        mean_err = torch.zeros(cfg.n_layers, cfg.n_heads, dtype=torch.float64)
        if how == "mean":
            for l in hooks.by_layer:
                for i, h in enumerate(hooks.by_layer[l]):
                    mean_err[l, h] = (means[l, h] - hooks.means[l][i].double()).abs().max()
        # in the page, an ablated head's z is its substitute, exactly
        got = page.evaluate("""([tokens, ablate, l, h]) => { const t = window.cbTest, cb = t.lab();
          return t.b64(cb.forward(cb.net, tokens, ablate).z(l)); }""", [tokens, keys, heads[0][0], heads[0][1]])
        z = _f64(got, len(tokens), cfg.n_heads, cfg.d_head)[:, heads[0][1]]
        want = torch.zeros_like(z) if how == "zero" else means[heads[0]].expand_as(z)
        assert torch.equal(z, want)
        _check_layers(page, model, tokens, hooks.fwd_hooks, keys, means, mean_err)
        logits, cache = _torch(model, tokens, hooks.fwd_hooks)
        clean, _ = _torch(model, tokens)
        got = _f64(page.evaluate(FORWARD_JS, [tokens, keys, []])["logits"], len(tokens), -1)
        bound = 2 * forward_terms(cfg, len(tokens)) * EPS * logit_scale(model, cache)
        assert ((got - logits).abs().amax(-1) <= bound).all(), f"{how}-ablating {heads}"


# --------------------------------------------------------------------------- the repeated passage


#: The page prints the copies' losses to 0.01 nats, as the chapter does: its numbers must be
#: Python's to the digits shown (half a unit of the last). The worst-case float32 bound of
#: the whole pass (``forward_terms``) is far looser here (over 10 nats on this passage:
#: 30 layers of n eps terms), so it could not catch a wrong ablation; the layer-by-layer
#: test holds the page to float32's rounding instead.
PRINTED = 0.005


def _copy_losses(model, tokens, hooks=()):
    logits, _ = _torch(model, tokens, hooks)
    logp = logits.log_softmax(-1)[:-1]
    loss = -logp.gather(-1, torch.tensor(tokens)[1:, None])[:, 0]
    n = len(tokens) // 2
    return loss[: n - 1].mean().item(), loss[n:].mean().item()


def test_repeated_passage_numbers_match_python(lab_page, smollm2, reference):
    from circuitbook.heads import ablate
    from circuitbook.widgets.smollm2_lab import lab_tokens

    page = lab_page[0]
    model, tok = smollm2
    ref, order = reference
    lab = page.locator(".cb-smol")
    page.locator(".cb-smol .cb-smol-example", has_text="Shakespeare").click()
    page.locator(".cb-smol .cb-smol-clear").click()
    page.wait_for_function("() => document.querySelector('.cb-smol').dataset.state === 'ready'")
    text = page.locator(".cb-smol .cb-smol-text").input_value()
    tokens = lab_tokens(tok(text)["input_ids"], True)
    assert page.evaluate("() => window.cbTest.lab().run.P") == len(tokens)
    loss = lab.locator(".cb-smol-loss")
    first, second = _copy_losses(model, tokens)
    diffs = [abs(float(loss.get_attribute("data-first")) - first), abs(float(loss.get_attribute("data-second")) - second)]
    # the page's top 6 are the heads ranked here; then its button, k = 6, mean
    top = [f"{l}.{h}" for l, h in order[:6]]
    assert page.evaluate("() => window.cbTest.lab().ranking().slice(0, 6)") == top
    page.locator(".cb-smol .cb-smol-k").fill("6")
    page.locator(".cb-smol .cb-smol-k").dispatch_event("change")
    page.locator(".cb-smol .cb-smol-how").select_option("mean")
    page.locator(".cb-smol .cb-smol-top").click()
    page.wait_for_function("(want) => { const r = document.querySelector('.cb-smol');"
                           " return r.dataset.state === 'ready' && r.dataset.ablated === want; }",
                           arg=" ".join(sorted(f"{k}:mean" for k in top)))
    hooks = ablate(model, order[:6], "mean", reference_tokens=ref).fwd_hooks
    first_top, second_top = _copy_losses(model, tokens, hooks)
    diffs += [abs(float(loss.get_attribute("data-first")) - first_top),
              abs(float(loss.get_attribute("data-second")) - second_top)]
    assert max(diffs) <= PRINTED, f"the page's copy losses differ from Python's by up to {max(diffs):.3g} nats"
    assert second_top - second > 100 * PRINTED, "the ablation should matter on this passage (the page says so)"
    print(f"\n[smollm2 lab] repeated passage, second copy: clean {second:.3f}, top 6 ablated {second_top:.3f}; "
          f"page vs Python at most {max(diffs):.2g} nats")


# --------------------------------------------------------------------------- the widget


def _ready(page, ablated=None):
    page.wait_for_function("(want) => { const r = document.querySelector('.cb-smol');"
                           " return r.dataset.state === 'ready' && (want === null || r.dataset.ablated === want); }",
                           arg=ablated)


def test_clicks(lab_page, smollm2):
    page, log = lab_page[0], lab_page[1]
    model, tok = smollm2
    lab = page.locator(".cb-smol")
    lab.locator(".cb-smol-clear").click()
    _ready(page, "")
    lab.locator(".cb-smol-mode").select_option("ablate")
    head = lab.locator('.cb-smol-head[data-head="18.6"]')
    for want in ("18.6:zero", "18.6:mean", ""):
        lab.locator('.cb-smol-head[data-head="18.6"]').click()
        _ready(page, want)
    assert head.count() == 1
    lab.locator(".cb-smol-mode").select_option("show")
    lab.locator('.cb-smol-head[data-head="3.2"]').click()
    assert "L3H2" in lab.locator(".cb-smol-bigcaption").text_content()
    assert lab.get_attribute("data-ablated") == ""
    drawn = []
    for _ in range(2):
        lab.locator(".cb-smol-random").click()
        _ready(page)
        drawn.append(lab.get_attribute("data-ablated"))
    assert drawn[0] != drawn[1] and all(len(d.split()) == 6 for d in drawn)
    lab.locator(".cb-smol-clear").click()
    _ready(page, "")
    lab.locator(".cb-smol-tok").nth(5).click()
    assert lab.get_attribute("data-position") == "5"
    tokens = page.evaluate("() => window.cbTest.lab().tokensRun")
    shown = json.loads(lab.locator(".cb-smol-predictions").get_attribute("data-top"))
    logits, cache = _torch(model, tokens)
    want = logits[5].topk(6)
    bound = 2 * forward_terms(model.cfg, len(tokens)) * EPS * logit_scale(model, cache)[5].item()
    # the five shown are the model's, wherever the model's ranking is not within rounding of a tie
    if (want.values[:-1] - want.values[1:]).min() > 2 * bound:
        assert shown == want.indices[:5].tolist()
    assert not log.console, log.console


# --------------------------------------------------------------------------- running, repeats, chart, baseline (issue 40)

OVERFLOW_JS = (Path(__file__).with_name("overflow.js")).read_text()
#: the controls that need the model: off until it is loaded
NEEDS_MODEL = [".cb-smol-run", ".cb-smol-how", ".cb-smol-k", ".cb-smol-top", ".cb-smol-random",
               ".cb-smol-baseline", ".cb-smol-clear", ".cb-smol-mode"]
SENTENCE = "The old clock in the hall struck nine, and the house fell silent."
REPEATED_TEXT = f"{SENTENCE} We waited by the fire for the rain to stop. {SENTENCE}"
CHANGE = re.compile(r"(\d+\.\d\d) \u2192 (\d+\.\d\d), ([+\u2212])(\d+\.\d\d)")


def _token_losses(model, tokens, hooks=()) -> list[float]:
    """losses[p]: -log p(tokens[p + 1] | tokens[:p + 1]), float64 from TransformerLens's float32 logits."""
    logits, _ = _torch(model, tokens, hooks)
    logp = logits.log_softmax(-1)[:-1]
    return (-logp.gather(-1, torch.tensor(tokens)[1:, None])[:, 0]).tolist()


def _shows(page, text: str, timeout: float = 120_000):
    """Wait until the lab's results are those of ``text``, and not stale."""
    page.wait_for_function("(text) => { const r = document.querySelector('.cb-smol'), cb = r.cbSmol;"
                           " return r.dataset.state === 'ready' && cb.shownText === text && r.dataset.stale === 'false'; }",
                           arg=text, timeout=timeout)


def _run_text(page, text: str, repeat: bool = False):
    lab = page.locator(".cb-smol")
    if lab.locator(".cb-smol-repeat").is_checked() != repeat:
        lab.locator(".cb-smol-repeat").set_checked(repeat)
    lab.locator(".cb-smol-text").fill(text)
    lab.locator(".cb-smol-run").click()
    _shows(page, text)


def _site_bin_bytes() -> int:
    manifest = json.loads((SITE / "_static" / "smollm2" / "manifest.json").read_text())
    return sum(f["bytes"] for f in manifest["files"] if f["name"].endswith(".bin"))


def test_controls_need_the_model_and_the_size_is_one_number(browser, server):  # noqa: F811
    log = Log()
    context = offline_context(browser, log)
    page = watch(context.new_page(), log)
    assert open_page(page, server, LAB), f"{LAB}: widgets did not render"
    page.wait_for_selector(".cb-smol .cb-smol-load", timeout=30_000)
    lab = page.locator(".cb-smol")
    assert not [c for c in NEEDS_MODEL if not lab.locator(c).is_disabled()], "a control works before the model"
    assert lab.locator(".cb-smol-text").is_enabled() and lab.locator(".cb-smol-load").is_enabled()
    # one number: the files the button loads (manifest), in the prose and in the widget alike
    size = f"{_site_bin_bytes() / 1e6:.0f}"
    widget = lab.locator(".cb-smol-status").text_content() + " " + lab.locator(".cb-smol-load").text_content()
    prose = page.evaluate("() => { const m = document.querySelector('main') || document.body, c = m.cloneNode(true);"
                          " c.querySelectorAll('.cb-smol').forEach((x) => x.remove()); return c.textContent; }")
    said = re.findall(r"(\d+(?:\.\d+)?)\s*MB", prose) + re.findall(r"(\d+(?:\.\d+)?)\s*MB", widget)
    assert said and set(said) == {size}, f"sizes on the page {said}, files {size} MB"
    assert len(re.findall(r"(\d+(?:\.\d+)?)\s*MB", widget)) == 2
    assert not log.console, log.console
    context.close()


def test_controls_on_once_loaded(lab_page):
    page = lab_page[0]
    lab = page.locator(".cb-smol")
    assert not [c for c in NEEDS_MODEL if lab.locator(c).is_disabled()]
    assert page.evaluate("() => window.cbTest.lab().net.bytes") == _site_bin_bytes()


def test_enter_runs_and_stale_results_are_marked(lab_page, smollm2):
    page, tok = lab_page[0], smollm2[1]
    lab = page.locator(".cb-smol")
    lab.locator(".cb-smol-clear").click()
    _ready(page, "")
    _run_text(page, "A first text, to have results.")
    box, note, results = lab.locator(".cb-smol-text"), lab.locator(".cb-smol-stalenote"), lab.locator(".cb-smol-results")
    opacity = lambda: float(results.evaluate("e => getComputedStyle(e).opacity"))  # noqa: E731
    assert lab.get_attribute("data-stale") == "false" and not note.is_visible() and opacity() == 1
    for keys, by in [("Enter", "enter"), ("Control+Enter", "enter")]:
        text = f"Pressing {keys} runs this text."
        box.fill(text)  # one input event: the results shown are now stale
        assert lab.get_attribute("data-stale") == "true" and "cb-smol-stale" in lab.get_attribute("class")
        assert note.is_visible() and "stale" in note.text_content() and opacity() < 0.6
        box.press("Shift+Enter")  # a new line, not a run
        assert box.input_value() == text + "\n"
        box.press(keys)
        assert box.input_value() == text + "\n"
        _shows(page, text + "\n")
        assert lab.get_attribute("data-committed-by") == by
        assert page.evaluate("() => window.cbTest.lab().tokensRun") == tok(text + "\n")["input_ids"]
        assert lab.get_attribute("data-stale") == "false" and "cb-smol-stale" not in lab.get_attribute("class")
        assert not note.is_visible() and opacity() == 1


def test_a_pause_in_typing_runs(lab_page, smollm2):
    page, tok = lab_page[0], smollm2[1]
    lab = page.locator(".cb-smol")
    _run_text(page, "Typing")
    passes = page.evaluate("() => window.cbTest.lab().passes")
    box = lab.locator(".cb-smol-text")
    box.click()
    box.press("End")
    box.press_sequentially(" goes on, then stops.", delay=60)  # keys 60 ms apart: under the pause
    assert lab.get_attribute("data-stale") == "true"
    _shows(page, "Typing goes on, then stops.")
    got = page.evaluate("() => { const cb = window.cbTest.lab(); return [cb.passes, cb.committedAt - cb.lastInputAt, cb.tokensRun]; }")
    assert lab.get_attribute("data-committed-by") == "pause"
    assert got[0] == passes + 1, "typing ran the text before the pause"
    assert 600 <= got[1] < 5000, f"ran {got[1]:.0f} ms after the last key"
    assert got[2] == tok("Typing goes on, then stops.")["input_ids"]


def test_repeats_in_the_readers_text_match_python(lab_page, smollm2):

    page = lab_page[0]
    model, tok = smollm2
    lab = page.locator(".cb-smol")
    lab.locator(".cb-smol-clear").click()
    _ready(page, "")
    _run_text(page, REPEATED_TEXT)
    tokens = page.evaluate("() => window.cbTest.lab().tokensRun")
    assert tokens == tok(REPEATED_TEXT)["input_ids"]
    spans = repeated_spans(tokens)
    assert spans["repeat"], "the repeated sentence should be found"
    assert page.evaluate("() => { const s = window.cbTest.lab().spans; return {repeat: s.repeat, first: s.first}; }") == spans
    want = span_losses(_token_losses(model, tokens), tokens)
    loss = lab.locator(".cb-smol-loss")
    diffs = {}
    for stat, key in [("spanFirst", "first"), ("spanRepeat", "repeat")]:
        node = lab.locator(f'.cb-smol-stat[data-stat="{stat}"]')
        value = float(node.get_attribute("data-value"))
        assert value == float(loss.get_attribute(f"data-{stat.replace('R', '-r').replace('F', '-f')}"))
        assert node.locator("b").text_content() == f"{value:.2f}"
        diffs[stat] = abs(value - want[key])
    assert max(diffs.values()) <= PRINTED, f"page vs Python: {diffs}"
    assert f"({want['n_first']} tokens)" in lab.locator(".cb-smol-summary").text_content()
    # the rule, in the page, on random and hand-built lists (the unit test runs it in Node too)
    rng = random.Random(7)
    lists = [[rng.randrange(rng.choice([2, 4, 50])) for _ in range(rng.randint(0, 70))] for _ in range(40)]
    lists += [[1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 9], [7] * 9, tokens]
    got = page.evaluate("(ls) => ls.map((t) => window.cbTest.lab().repeatedSpans(t, 4))", lists)
    for t, g in zip(lists, got):
        assert {"repeat": g["repeat"], "first": g["first"]} == repeated_spans(t) and g["lengths"] == repeat_lengths(t), t
    print(f"\n[smollm2 lab] repeated sentence ({len(spans['repeat'])} repeat tokens): first occurrence "
          f"{want['first']:.3f}, repeat {want['repeat']:.3f} nats; page vs Python at most {max(diffs.values()):.2g}")


def test_loss_chart_has_axes_and_fits_a_phone(lab_page):
    page = lab_page[0]
    lab = page.locator(".cb-smol")
    if page.evaluate("() => window.cbTest.lab().shownText") != REPEATED_TEXT:
        _run_text(page, REPEATED_TEXT)
    spans = page.evaluate("() => window.cbTest.lab().spans")
    chart = lab.locator(".cb-smol-chart")
    svg = chart.locator("svg.cb-smol-losschart")
    try:
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_function("() => { const c = document.querySelector('.cb-smol-chart'), s = c.querySelector('svg');"
                                   " return s && +s.getAttribute('width') === Math.max(200, Math.floor(c.clientWidth)); }")
            assert sorted(svg.locator(".cb-smol-axis-label").all_text_contents()) == ["loss (nats)", "position of the token predicted"]
            assert svg.locator(".cb-smol-yaxis .cb-smol-tick").count() >= 3
            assert svg.locator(".cb-smol-xaxis .cb-smol-tick").count() >= 3
            assert svg.locator(".cb-smol-repband").count() == len(spans["repeat"])
            assert svg.locator(".cb-smol-firstband").count() == len(spans["first"])
            assert svg.locator(".cb-smol-lossbar").count() == len(page.evaluate("() => window.cbTest.lab().losses"))
            sizes = svg.locator("text").evaluate_all("(ts) => ts.map((t) => parseFloat(getComputedStyle(t).fontSize))")
            assert min(sizes) >= 10, f"chart text {min(sizes)} px at {width} px"
            box, root = svg.bounding_box(), lab.bounding_box()
            assert box["x"] >= root["x"] - 0.5 and box["x"] + box["width"] <= root["x"] + root["width"] + 0.5
            if width == 1280:
                assert box["width"] >= 600, f"the chart is {box['width']:.0f} px wide at 1280"
            over = page.evaluate(OVERFLOW_JS)
            mine = [e for e in over["elements"] if "cb-smol" in e]
            assert not mine, f"at {width} px: {mine}"
            assert chart.evaluate("c => c.scrollWidth <= c.clientWidth"), f"the chart scrolls at {width} px"
        # the copy boundary, with "repeat its tokens once"
        _run_text(page, SENTENCE, repeat=True)
        assert svg.locator(".cb-smol-boundary").count() == 1
        assert lab.locator(".cb-smol-legend").text_content().count("second copy") == 1
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    _run_text(page, REPEATED_TEXT)
    assert svg.locator(".cb-smol-boundary").count() == 0


def test_ablation_prints_before_after_and_change(lab_page, smollm2, reference):
    from circuitbook.heads import ablate

    page = lab_page[0]
    model, _ = smollm2
    ref, order = reference
    lab = page.locator(".cb-smol")
    if page.evaluate("() => window.cbTest.lab().shownText") != REPEATED_TEXT:
        _run_text(page, REPEATED_TEXT)
    tokens = page.evaluate("() => window.cbTest.lab().tokensRun")
    lab.locator(".cb-smol-k").fill("6")
    lab.locator(".cb-smol-k").dispatch_event("change")
    lab.locator(".cb-smol-how").select_option("mean")
    lab.locator(".cb-smol-top").click()
    _ready(page, " ".join(sorted(f"{l}.{h}:mean" for l, h in order[:6])))
    clean = _token_losses(model, tokens)
    hurt = _token_losses(model, tokens, ablate(model, order[:6], "mean", reference_tokens=ref).fwd_hooks)
    want = {"mean": (np.mean(clean), np.mean(hurt)),
            "spanFirst": (span_losses(clean, tokens)["first"], span_losses(hurt, tokens)["first"]),
            "spanRepeat": (span_losses(clean, tokens)["repeat"], span_losses(hurt, tokens)["repeat"])}
    shown = []
    for stat, (c, a) in want.items():
        node = lab.locator(f'.cb-smol-stat[data-stat="{stat}"]')
        page_clean, page_value = float(node.get_attribute("data-clean")), float(node.get_attribute("data-value"))
        assert abs(page_clean - c) <= PRINTED and abs(page_value - a) <= PRINTED, (stat, page_clean, c, page_value, a)
        text = node.locator("b").text_content()
        m = CHANGE.fullmatch(text)
        assert m, f"{stat}: {text!r} is not 'before \u2192 after, change'"
        # the change is that of the numbers printed (within 0.01 of the unrounded one's)
        d = float(m[2]) - float(m[1])
        assert m[1] == f"{page_clean:.2f}" and m[2] == f"{page_value:.2f}" and m[4] == f"{abs(d):.2f}"
        assert m[3] == ("\u2212" if d <= -0.005 else "+")
        assert abs(float(m[4]) * (-1 if m[3] != "+" else 1) - (a - c)) <= 0.01 + 2 * PRINTED
        shown.append(f"{stat} {text}")
    assert lab.locator(".cb-smol-losschart .cb-smol-cleanmark").count() == len(tokens) - 1
    print("\n[smollm2 lab] top 6 mean-ablated on the repeated sentence: " + "; ".join(shown))


def test_random_baseline_averages_draws_with_their_spread(lab_page, smollm2, reference):
    from circuitbook.heads import ablate
    from circuitbook.widgets.smollm2_lab import BASELINE_DRAWS

    page = lab_page[0]
    model, _ = smollm2
    ref, _ = reference
    lab = page.locator(".cb-smol")
    if page.evaluate("() => window.cbTest.lab().shownText") != REPEATED_TEXT:
        _run_text(page, REPEATED_TEXT)
    tokens = page.evaluate("() => window.cbTest.lab().tokensRun")
    before = [lab.locator(".cb-smol-loss").get_attribute("data-losses"), lab.get_attribute("data-ablated")]
    lab.locator(".cb-smol-k").fill("6")
    lab.locator(".cb-smol-k").dispatch_event("change")
    lab.locator(".cb-smol-baseline").click()
    assert lab.locator(".cb-smol-top").is_disabled(), "the other controls wait for the baseline"
    page.wait_for_function(f"() => /draw \\d+ of {BASELINE_DRAWS}/.test(document.querySelector('.cb-smol-baselineresult').textContent)")
    page.wait_for_function("() => { const r = document.querySelector('.cb-smol');"
                           " return r.dataset.state === 'ready' && r.cbSmol.baseline; }", timeout=300_000)
    box = lab.locator(".cb-smol-baselineresult")
    rows = json.loads(box.get_attribute("data-rows"))
    assert box.get_attribute("data-draws") == str(BASELINE_DRAWS) == str(len(rows))
    assert f"{BASELINE_DRAWS} draws of 6 random heads" in box.text_content()
    assert all(len(set(r["heads"])) == 6 for r in rows) and len({tuple(sorted(r["heads"])) for r in rows}) == len(rows)
    # the spread printed is the draws' own
    for stat in ("spanRepeat", "spanFirst", "mean"):
        values = np.array([r[stat] for r in rows])
        text = box.locator(f'.cb-smol-bstat[data-stat="{stat}"]').text_content()
        nums = [float(x) for x in re.findall(r"\d+\.\d\d", text)]
        assert nums == [round(float(v), 2) for v in (values.mean(), values.std(ddof=1), values.min(), values.max())], text
    # one draw, recomputed in Python with heads.ablate
    heads = [tuple(map(int, k.split("."))) for k in rows[0]["heads"]]
    hurt = _token_losses(model, tokens, ablate(model, heads, "mean", reference_tokens=ref).fwd_hooks)
    assert abs(rows[0]["spanRepeat"] - span_losses(hurt, tokens)["repeat"]) <= PRINTED
    assert abs(rows[0]["mean"] - np.mean(hurt)) <= PRINTED
    # what was shown is shown again, and the controls are back
    assert [lab.locator(".cb-smol-loss").get_attribute("data-losses"), lab.get_attribute("data-ablated")] == before
    assert not [c for c in NEEDS_MODEL if lab.locator(c).is_disabled()]
    ms = page.evaluate("() => window.cbTest.lab().baseline.ms")
    values = np.array([r["spanRepeat"] for r in rows])
    print(f"\n[smollm2 lab] random baseline: {len(rows)} draws of 6 heads in {ms / 1000:.1f} s ({len(tokens)} tokens); "
          f"repeat loss {values.mean():.2f} sd {values.std(ddof=1):.2f} ({values.min():.2f}-{values.max():.2f})")
