// The SmolLM2 lab's front end (anywidget). The forward pass it imports
// (smollm2_forward.js) runs the model in the page; this part loads it when asked, draws
// and listens. Synced traits: text, repeat, tokens, ablated {"l.h": "zero" | "mean"},
// head ("l.h", the one shown), position, k, how, seed, examples.

import { forward, loadSmolLM2, logProbs, losses, runLayer, runUnembed, siteSource, topTokens }
  from "./smollm2_forward.js";
import { darkPage, el, onThemeChange } from "./dom.js";

// A seeded generator (mulberry32), so "k random heads" is one draw per seed
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NEXT_ABLATION = { undefined: "zero", zero: "mean", mean: undefined };
const MAX_TOKENS = 128;  // smollm2_export.MAX_TOKENS, before the manifest says it

// The site's folder of model files (the theme sets content_root), absolute: this module
// itself is loaded from a blob URL, against which a relative URL would not resolve
function siteBase() {
  const root = document.documentElement.dataset.content_root;
  return root === undefined ? null : new URL(`${root}_static/smollm2/`, document.baseURI).href;
}

// The kernel as a source of the files (live in Jupyter or Colab): smollm2_lab.py's answer()
function kernelSource(model) {
  const waiting = new Map();
  model.on("msg:custom", (msg, buffers) => {
    const key = msg.manifest ? "manifest.json" : msg.file;
    const w = waiting.get(key);
    if (!w) return;
    if (msg.manifest) { waiting.delete(key); w.resolve(msg.manifest); return; }
    if (msg.error) { waiting.delete(key); w.reject(new Error(msg.error)); return; }
    for (const b of buffers || [])
      w.put(b instanceof ArrayBuffer ? new Uint8Array(b) : new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
    if (msg.last) { waiting.delete(key); w.resolve(); }
  });
  const ask = (key, content, put) => new Promise((resolve, reject) => {
    waiting.set(key, { put, resolve, reject });
    model.send(content);
  });
  const file = (name, put) => ask(name, { ask: "file", name }, put);
  return {
    manifest: () => ask("manifest.json", { ask: "manifest" }),
    file,
    text: async (name) => {
      const parts = [];
      await file(name, (c) => parts.push(c.slice()));
      return new TextDecoder().decode(await new Blob(parts).arrayBuffer());
    },
  };
}

// Token ids -> text, from tokenizer.json's vocabulary (byte-level BPE: each byte is one
// printable character, GPT-2's bytes_to_unicode; a token may hold part of a character)
function decoder(tokenizerJson) {
  const toByte = new Map();
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    toByte.set(String.fromCodePoint(printable ? b : 256 + extra++), b);
  }
  const vocab = [];
  for (const [piece, id] of Object.entries(tokenizerJson.model.vocab)) vocab[id] = piece;
  for (const t of tokenizerJson.added_tokens) vocab[t.id] = t.content;
  const special = new Set(tokenizerJson.added_tokens.map((t) => t.id));
  const utf8 = new TextDecoder();
  return (ids) => ids.map((id) => (special.has(id) ? vocab[id]
    : utf8.decode(Uint8Array.from(Array.from(vocab[id] ?? ""), (c) => toByte.get(c) ?? 63)))).join("");
}

// what the lab runs for a text's ids (smollm2_lab.py's lab_tokens)
export function labTokens(ids, repeat, T) {
  return repeat ? [...ids.slice(0, T >> 1), ...ids.slice(0, T >> 1)] : ids.slice(0, T);
}

// m[i]: the length of the longest run of tokens ending at position i that also ends at an
// earlier position j < i (the runs may overlap); 0 where tokens[i] has not occurred before.
// tests/smollm2_repeats.py's repeat_lengths, the same rule.
export function repeatLengths(tokens) {
  const P = tokens.length, lengths = new Array(P).fill(0);
  let before = new Array(P).fill(0);  // before[j]: the common run ending at (i - 1, j)
  for (let i = 0; i < P; i++) {
    const now = new Array(P).fill(0);
    for (let j = 0; j < i; j++)
      if (tokens[i] === tokens[j]) now[j] = (j > 0 ? before[j - 1] : 0) + 1;
    for (let j = 0; j < i; j++) lengths[i] = Math.max(lengths[i], now[j]);
    before = now;
  }
  return lengths;
}

// Position i is a repeat when the minLen tokens ending at it occurred earlier as a run
// ending at some j < i (repeatLengths(tokens)[i] >= minLen); its first occurrence is the
// earliest such j, never itself a repeat. {repeat: [i...], first: [j...]}, sorted: the rule
// of tests/smollm2_repeats.py's repeated_spans, whose docstring says why.
export function repeatedSpans(tokens, minLen = 4) {
  const lengths = repeatLengths(tokens), repeat = [], first = new Set();
  const same = (a, b) => { for (let k = 0; k < minLen; k++) if (tokens[a - k] !== tokens[b - k]) return false; return true; };
  for (let i = minLen - 1; i < tokens.length; i++) {
    if (lengths[i] < minLen) continue;
    repeat.push(i);
    for (let j = minLen - 1; j < i; j++) if (same(i, j)) { first.add(j); break; }
  }
  return { repeat, first: [...first].sort((a, b) => a - b), lengths };
}

// mean loss on the first occurrences and on the repeats (losses[p] predicts tokens[p + 1]);
// null when nothing repeats. tests/browser/test_smollm2_lab.py's span_losses.
export function spanLosses(ls, tokens, minLen = 4, spans = repeatedSpans(tokens, minLen)) {
  if (!spans.repeat.length) return null;
  const mean = (ps) => ps.reduce((a, p) => a + ls[p - 1], 0) / ps.length;
  return { first: mean(spans.first), repeat: mean(spans.repeat), n_first: spans.first.length, n_repeat: spans.repeat.length };
}

// the loss numbers the lab prints for one pass: the mean, the repeats', the copies' (with
// "repeat its tokens once": the first copy, and the second from its second token)
function lossStats(ls, tokens, minLen, spans) {
  const mean = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const stats = { mean: mean(ls) };
  const span = spanLosses(ls, tokens, minLen, spans);
  if (span) Object.assign(stats, { spanFirst: span.first, spanRepeat: span.repeat });
  const P = tokens.length, n = P >> 1;
  if (P % 2 === 0 && n > 1 && tokens.slice(0, n).every((t, i) => t === tokens[n + i]))
    Object.assign(stats, { copyFirst: mean(ls.slice(0, n - 1)), copySecond: mean(ls.slice(n)) });
  return stats;
}

// "0.91", or with a clean value beside it "0.91 \u2192 2.69, +1.78" (before, after, the change):
// the change is that of the two numbers printed, so that the three agree (the change of
// the unrounded values is within 0.01 of it)
function withChange(value, clean) {
  if (clean === undefined || clean === null) return value.toFixed(2);
  const d = Number(value.toFixed(2)) - Number(clean.toFixed(2)), sign = d <= -0.005 ? "\u2212" : "+";
  return `${clean.toFixed(2)} \u2192 ${value.toFixed(2)}, ${sign}${Math.abs(d).toFixed(2)}`;
}

function render({ model, el: root }) {
  root.classList.add("cb-smol");
  const lab = { net: null, tokenizer: null, decode: null, run: null, tokensRun: null, clean: null,
    shownText: null, shownRepeat: null, baseline: null, busy: false, baselines: 0 };
  const mb = (n) => `${(n / 1e6).toFixed(0)} MB`;
  const minRepeat = () => model.get("min_repeat") || 4;
  const key = (tokens) => tokens.join(",");

  // --- the controls ---------------------------------------------------------------------
  const size = model.get("download_bytes");
  const loadButton = el("button", { class: "cb-btn cb-smol-load",
    text: `Load SmolLM2 (${size ? mb(size) : "its weights"}) and run it in this page` });
  const progress = el("progress", { class: "cb-smol-progress", max: "1", value: "0" });
  const status = el("div", { class: "cb-smol-status", role: "status",
    text: `SmolLM2-135M-Instruct's weights and tables (${size ? mb(size) : "about 100 MB"}, from this site) load when you press the button; until then its controls are off.` });
  const textBox = el("textarea", { class: "cb-smol-text", rows: "4", "aria-label": "the text the model reads" });
  const runButton = el("button", { class: "cb-btn cb-smol-run", text: "Run" });
  const runHint = el("span", { class: "cb-smol-hint",
    text: `Enter or Run runs the text (Shift+Enter: a new line); so does a pause in typing (${(model.get("debounce_ms") / 1000).toFixed(1)} s).` });
  const staleNote = el("span", { class: "cb-smol-stalenote", role: "status", hidden: "",
    text: "stale: the results below are for the previous text" });
  const repeatBox = el("input", { type: "checkbox", class: "cb-smol-repeat" });
  const examples = el("div", { class: "cb-row cb-smol-examples" });
  const how = el("select", { class: "cb-smol-how", "aria-label": "how the buttons ablate" },
    ["mean", "zero"].map((v) => el("option", { value: v, text: `${v}-ablate` })));
  const kBox = el("input", { type: "number", class: "cb-smol-k", min: "1", max: "270", "aria-label": "k" });
  const topButton = el("button", { class: "cb-btn cb-smol-top", text: "the top k induction heads" });
  const randomButton = el("button", { class: "cb-btn cb-smol-random", text: "k random heads (one draw)" });
  const draws = model.get("baseline_draws") || 10;
  const baselineButton = el("button", { class: "cb-btn cb-smol-baseline", text: `random baseline (${draws} draws)` });
  const clearButton = el("button", { class: "cb-btn cb-smol-clear", text: "none" });
  const clickMode = el("select", { class: "cb-smol-mode", "aria-label": "what clicking a head does" },
    [el("option", { value: "show", text: "shows its pattern" }), el("option", { value: "ablate", text: "ablates it (zero, mean, off)" })]);
  const strip = el("div", { class: "cb-smol-strip" });
  const grid = el("div", { class: "cb-smol-grid" });
  const big = el("canvas", { class: "cb-smol-big", width: "1", height: "1" });
  const bigCaption = el("div", { class: "cb-caption cb-smol-bigcaption" });
  const predictions = el("div", { class: "cb-smol-predictions" });
  const loss = el("div", { class: "cb-smol-loss" });
  const summary = el("div", { class: "cb-smol-summary" });
  const chart = el("div", { class: "cb-smol-chart" });
  const legend = el("div", { class: "cb-smol-legend" });
  const baselineBox = el("div", { class: "cb-smol-baselineresult", role: "status" });
  loss.append(summary, chart, legend);
  const results = el("div", { class: "cb-smol-results" }, [strip,
    el("div", { class: "cb-smol-main" }, [grid, el("div", { class: "cb-smol-side" }, [big, bigCaption, predictions])]),
    loss, baselineBox]);
  root.replaceChildren(
    el("div", { class: "cb-row" }, [loadButton, progress]), status,
    textBox,
    el("div", { class: "cb-row" }, [runButton, runHint, staleNote]),
    el("div", { class: "cb-row" }, [el("label", {}, [repeatBox, document.createTextNode(" repeat its tokens once")]), examples]),
    el("div", { class: "cb-row" }, [el("span", { text: "Ablate:" }), how, kBox, topButton, randomButton, baselineButton, clearButton]),
    el("div", { class: "cb-row" }, [el("span", { text: "Clicking a head" }), clickMode]),
    results);
  // what needs the model: off until it is loaded, and while the random baseline runs
  const needModel = [runButton, how, kBox, topButton, randomButton, baselineButton, clearButton, clickMode];
  const enable = (on) => { for (const c of needModel) c.disabled = !on; };
  enable(false);

  for (const [label, ex] of Object.entries(model.get("examples") || {})) {
    const b = el("button", { class: "cb-btn cb-smol-example", text: label });
    b.addEventListener("click", () => { save({ text: ex.text, repeat: !!ex.repeat, position: -1 }, true); if (lab.tokenizer) schedule(); });
    examples.append(b);
  }

  function save(changes, retokenise = false) {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    if (retokenise && lab.tokenizer) {  // on the site; live, the kernel sets tokens
      const ids = lab.tokenizer.encode(model.get("text")).ids;
      model.set("tokens", labTokens(ids, model.get("repeat"), lab.net ? lab.net.T : MAX_TOKENS));
    }
    model.save_changes();  // reaches the kernel when there is one; harmless on a static page
  }

  // --- running the reader's text: Run, Enter, a pause in typing; stale results marked ---
  let typing = null;
  function stale() {
    return !!lab.run && (textBox.value !== lab.shownText || repeatBox.checked !== lab.shownRepeat);
  }
  function markStale() {
    const s = stale();
    root.classList.toggle("cb-smol-stale", s);
    staleNote.hidden = !s;
    root.dataset.stale = String(s);
  }
  // by: what ran it ("enter", "pause", "button", "change", "repeat"), for the tests
  function commit(by) {
    clearTimeout(typing);
    typing = null;
    if (!lab.net) return;
    root.dataset.committedBy = by;
    lab.committedAt = performance.now();
    save({ text: textBox.value, repeat: repeatBox.checked, position: -1 }, true);
    // on the site the tokens are set now: run them even when they did not change (a text
    // past the longest the page runs); live, the kernel's new tokens start the run
    if (lab.tokenizer) schedule();
  }
  textBox.addEventListener("input", () => {
    markStale();
    lab.lastInputAt = performance.now();
    clearTimeout(typing);
    typing = setTimeout(() => commit("pause"), model.get("debounce_ms") || 600);
  });
  textBox.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (!e.shiftKey || e.ctrlKey || e.metaKey) && !e.isComposing) {
      e.preventDefault();
      commit("enter");
    }
  });
  textBox.addEventListener("change", () => { if (textBox.value !== model.get("text")) commit("change"); });
  runButton.addEventListener("click", () => commit("button"));
  repeatBox.addEventListener("change", () => { markStale(); commit("repeat"); });
  how.addEventListener("change", () => save({ how: how.value }));
  kBox.addEventListener("change", () => save({ k: Math.max(1, Math.min(270, Number(kBox.value) || 1)) }));
  clearButton.addEventListener("click", () => save({ ablated: {} }));
  topButton.addEventListener("click", () => {
    const heads = ranking().slice(0, model.get("k"));
    save({ ablated: Object.fromEntries(heads.map((k) => [k, model.get("how")])) });
  });
  randomButton.addEventListener("click", () => {
    const seed = model.get("seed");
    save({ seed: seed + 1, ablated: Object.fromEntries(randomHeads(rng(seed), model.get("k")).map((k) => [k, model.get("how")])) });
  });
  baselineButton.addEventListener("click", () => baseline());

  // k heads drawn without replacement (Fisher-Yates on the ranking, then the first k)
  function randomHeads(next, k) {
    const pool = ranking().slice();
    for (let i = pool.length - 1; i > 0; i--) {
      const j = Math.floor(next() * (i + 1));
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    return pool.slice(0, k);
  }

  // every head, by induction score (the manifest's, chapter 17's test), best first
  function ranking() {
    const s = lab.net.manifest.induction.scores, keys = [];
    s.forEach((row, l) => row.forEach((_, h) => keys.push(`${l}.${h}`)));
    return keys.sort((a, b) => score(b) - score(a));
  }
  const score = (key) => { const [l, h] = key.split(".").map(Number); return lab.net.manifest.induction.scores[l][h]; };

  // --- loading -----------------------------------------------------------------------------
  loadButton.addEventListener("click", async () => {
    loadButton.disabled = true;
    try {
      const base = siteBase();
      const source = base ? siteSource(base) : kernelSource(model);
      status.textContent = "loading the tokenizer\u2026";
      const json = JSON.parse(await source.text("tokenizer.json"));
      lab.decode = decoder(json);
      if (base) {
        const { Tokenizer } = await import(`${base}tokenizers.mjs`);
        lab.tokenizer = new Tokenizer(json, {});
      }
      const t0 = performance.now();
      lab.net = await loadSmolLM2(source, (done, total) => {
        progress.value = done / total;
        status.textContent = `loading SmolLM2: ${mb(done)} of ${mb(total)}`;
      });
      lab.loadMs = performance.now() - t0;
      // for the browser tests: the lab's live state (net, run, tokensRun...) and its functions
      root.cbSmol = Object.assign(lab, { forward, runLayer, runUnembed, logProbs, topTokens, losses, labTokens, ranking,
        repeatedSpans, repeatLengths, spanLosses });
      status.textContent = `SmolLM2 loaded (${mb(lab.net.bytes)} in ${(lab.loadMs / 1000).toFixed(1)} s).`;
      root.dataset.loaded = "true";
      enable(true);
      // what the reader typed or ticked before the model came
      if (lab.tokenizer) save({ text: textBox.value, repeat: repeatBox.checked }, true);
      schedule();
    } catch (err) {
      status.textContent = `could not load SmolLM2: ${err.message}`;
      loadButton.disabled = false;
    }
  });

  // --- running and drawing -------------------------------------------------------------------
  let pending = false;
  function schedule() {
    if (!lab.net || pending) return;
    if (lab.busy) { lab.queued = true; return; }
    pending = true;
    root.dataset.state = "running";
    status.textContent = "running SmolLM2\u2026";
    // let the browser paint the status before the pass takes the thread
    requestAnimationFrame(() => setTimeout(() => { pending = false; compute(); }, 0));
  }

  function compute() {
    const tokens = model.get("tokens"), ablated = model.get("ablated"), any = Object.keys(ablated).length > 0;
    if (!tokens.length) { status.textContent = "no tokens: type a text"; root.dataset.state = "ready"; return; }
    let cleanMs = 0;
    try {
      // the clean losses of these tokens, for the change an ablation makes (one more pass,
      // once per text; the ablated pass then recomputes from its first ablated layer on)
      if (any && (!lab.clean || lab.clean.key !== key(tokens))) {
        const clean = forward(lab.net, tokens, {});
        lab.clean = { key: key(tokens), losses: losses(clean, tokens) };
        cleanMs = clean.ms;
      }
      lab.run = forward(lab.net, tokens, ablated);
    } catch (err) {
      status.textContent = `could not run: ${err.message}`;
      root.dataset.state = "error";
      return;
    }
    lab.tokensRun = tokens.slice();
    lab.passes = (lab.passes || 0) + 1;  // runs shown, for the tests
    lab.losses = losses(lab.run, tokens);
    if (!any) lab.clean = { key: key(tokens), losses: lab.losses };
    lab.spans = repeatedSpans(tokens, minRepeat());
    lab.shownText = model.get("text");
    lab.shownRepeat = model.get("repeat");
    if (lab.baseline && lab.baseline.key !== key(tokens)) { lab.baseline = null; baselineBox.replaceChildren(); }
    const from = lab.run.from, L = lab.net.cfg.n_layers, T = lab.net.T;
    status.textContent = `${tokens.length} tokens${tokens.length === T || (model.get("repeat") && tokens.length === 2 * (T >> 1)) ? ` (the most the page runs: ${T})` : ""}: ` +
      `${(lab.run.ms / 1000).toFixed(2)} s in this page` +
      (from === L ? " (nothing to recompute)" : from > 0 ? ` (layers ${from}\u2013${L - 1} recomputed: the ablations start there)` : "") +
      (cleanMs ? `, after a clean pass for the change (${(cleanMs / 1000).toFixed(2)} s)` : "");
    drawGrid();
    draw();
    root.dataset.ablated = Object.entries(ablated).map(([k, v]) => `${k}:${v}`).sort().join(" ");
    markStale();
    root.dataset.state = "ready";
  }

  // --- the random baseline: many draws of k random heads, each a full pass ---------------
  async function baseline() {
    if (!lab.net || lab.busy) return;
    const tokens = model.get("tokens"), k = model.get("k"), kind = model.get("how"), n = draws;
    if (!tokens.length) return;
    lab.busy = true;
    enable(false);
    root.dataset.state = "baseline";
    const next = rng(0x5eed + 7919 * lab.baselines++), rows = [], t0 = performance.now();
    const spans = repeatedSpans(tokens, minRepeat());
    try {
      for (let d = 0; d < n; d++) {
        baselineBox.textContent = `random baseline: draw ${d + 1} of ${n} (${k} heads, ${kind}-ablated, a full pass each)\u2026`;
        await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
        const heads = randomHeads(next, k), abl = Object.fromEntries(heads.map((h) => [h, kind]));
        const run = forward(lab.net, tokens, abl);
        rows.push({ heads, ...lossStats(losses(run, tokens), tokens, minRepeat(), spans) });
      }
    } finally {
      lab.busy = false;
      enable(true);
    }
    const ms = performance.now() - t0;
    lab.baseline = { key: key(tokens), k, how: kind, n, rows, ms };
    drawBaseline();
    // the page's buffers hold the last draw: run what is shown again (and anything queued)
    lab.queued = false;
    pending = false;
    compute();
  }

  function describe(values) {
    const n = values.length, mean = values.reduce((a, b) => a + b, 0) / n;
    const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, n - 1));
    return { mean, sd, min: Math.min(...values), max: Math.max(...values) };
  }

  function drawBaseline() {
    const b = lab.baseline;
    if (!b) { baselineBox.replaceChildren(); return; }
    const names = { spanRepeat: "repeats", spanFirst: "first occurrences", copySecond: "second copy", copyFirst: "first copy", mean: "mean loss" };
    const stats = {};
    const lines = Object.entries(names).filter(([s]) => b.rows[0][s] !== undefined).map(([s, name]) => {
      const d = describe(b.rows.map((r) => r[s]));
      stats[s] = d;
      return el("li", { class: "cb-smol-bstat", "data-stat": s,
        text: `${name}: ${d.mean.toFixed(2)} nats on average, sd ${d.sd.toFixed(2)}, from ${d.min.toFixed(2)} to ${d.max.toFixed(2)}` });
    });
    baselineBox.dataset.draws = String(b.n);
    baselineBox.dataset.rows = JSON.stringify(b.rows);
    baselineBox.dataset.stats = JSON.stringify(stats);
    baselineBox.replaceChildren(
      el("div", { class: "cb-caption", text: `Random baseline: ${b.n} draws of ${b.k} random heads, ${b.how}-ablated, ` +
        `each a full pass (${(b.ms / 1000).toFixed(1)} s in all). One draw can land far from the mean: compare an ablation with the spread.` }),
      el("ul", {}, lines));
  }

  const pieceText = (id) => lab.decode([id]).replace(/ /g, "\u2423").replace(/\n/g, "\u21b5");

  function selected() {
    const [l, h] = model.get("head").split(".").map(Number);
    return { l, h };
  }

  function position(P) {
    const p = model.get("position");
    return p < 0 || p >= P ? P - 1 : p;
  }

  // the 270 heads as small patterns, layers down; ablated heads framed
  function drawGrid() {
    const { n_layers: L, n_heads: H } = lab.net.cfg, run = lab.run, P = run.P, ablated = model.get("ablated");
    const shown = model.get("head");
    const blocks = [];
    for (const [lo, hi] of [[0, Math.ceil(L / 2)], [Math.ceil(L / 2), L]]) {
      const block = el("div", { class: "cb-smol-block" });
      block.append(el("div", { class: "cb-smol-gridrow" }, [el("span", { class: "cb-smol-lname" }),
        ...Array.from({ length: H }, (_, h) => el("span", { class: "cb-smol-hname", text: `H${h}` }))]));
      for (let l = lo; l < hi; l++) {
        const row = el("div", { class: "cb-smol-gridrow" }, [el("span", { class: "cb-smol-lname", text: `L${l}` })]);
        for (let h = 0; h < H; h++) {
          const key = `${l}.${h}`, kind = ablated[key];
          const canvas = el("canvas", { width: String(P), height: String(P) });
          paint(canvas, run.pattern(l, h), P, -1);
          const box = el("button", {
            class: "cb-smol-head" + (kind ? ` cb-ablated-${kind}` : "") + (key === shown ? " cb-shown" : ""),
            "data-head": key, title: `L${l}H${h}: induction score ${score(key).toFixed(2)}` + (kind ? `, ${kind}-ablated` : ""),
          }, [canvas]);
          box.addEventListener("click", () => {
            if (lab.busy) return;
            if (clickMode.value === "ablate") {
              const next = { ...model.get("ablated") };
              if (NEXT_ABLATION[kind]) next[key] = NEXT_ABLATION[kind]; else delete next[key];
              save({ ablated: next, head: key });
            } else save({ head: key });
          });
          row.append(box);
        }
        block.append(row);
      }
      blocks.push(block);
    }
    grid.replaceChildren(...blocks);
  }

  function draw() {
    repeatBox.checked = model.get("repeat");
    how.value = model.get("how");
    kBox.value = String(model.get("k"));
    markStale();
    if (!lab.run || lab.busy) return;
    const tokens = lab.tokensRun, run = lab.run, P = run.P, pos = position(P), V = run.V;
    const ls = lab.losses, chance = Math.log(V), spans = lab.spans;
    const rep = new Set(spans.repeat), first = new Set(spans.first);
    root.dataset.position = String(pos);

    strip.replaceChildren(...tokens.map((t, i) => {
      const b = el("button", { class: "cb-smol-tok" + (i === pos ? " cb-on" : "") + (rep.has(i) ? " cb-smol-rep" : first.has(i) ? " cb-smol-first" : ""),
        text: pieceText(t),
        title: `position ${i}, token ${t}` + (i > 0 ? `: loss ${ls[i - 1].toFixed(2)} nats` : "") +
          (rep.has(i) ? ` (repeats an earlier run of ${spans.lengths[i]} tokens)` : first.has(i) ? " (first occurrence of a run repeated later)" : "") });
      if (i > 0) b.style.setProperty("--loss", String(Math.min(1, ls[i - 1] / chance)));
      b.addEventListener("click", () => save({ position: i }));
      return b;
    }));

    for (const box of grid.querySelectorAll(".cb-smol-head"))
      box.classList.toggle("cb-shown", box.dataset.head === model.get("head"));
    const { l, h } = selected(), pattern = run.pattern(l, h);
    big.width = P;
    big.height = P;
    paint(big, pattern, P, pos);
    const row = Array.from(pattern.subarray(pos * P, pos * P + pos + 1), (v, j) => [j, v]).sort((a, b) => b[1] - a[1]).slice(0, 3);
    bigCaption.replaceChildren(
      el("div", { text: `L${l}H${h} (induction score ${score(`${l}.${h}`).toFixed(2)}): query down, key across; the row of position ${pos} is tinted.` }),
      el("div", { class: "cb-smol-attends", text: `From \u201c${pieceText(tokens[pos])}\u201d it attends most to: ` +
        row.map(([j, v]) => `\u201c${pieceText(tokens[j])}\u201d (${j}) ${v.toFixed(2)}`).join(", ") }));

    const top = topTokens(run, pos, 5);
    predictions.replaceChildren(el("div", { class: "cb-caption", text: `Top 5 next tokens after position ${pos}:` }),
      bars(top.map(([t, p]) => [pieceText(t), p, pos + 1 < P && t === tokens[pos + 1]])));
    predictions.dataset.top = JSON.stringify(top.map(([t]) => t));

    drawSummary(tokens, ls, V, chance);
    drawChart();
    loss.dataset.losses = JSON.stringify(ls.map((x) => +x.toFixed(5)));
  }

  // the loss numbers: mean, repeats (any text), copies (repeat its tokens once); with
  // heads ablated each as "clean -> ablated, change"
  function drawSummary(tokens, ls, V, chance) {
    if (!ls.length) { summary.replaceChildren(el("div", { class: "cb-caption", text: "One token: nothing to predict yet." })); return; }
    const ablated = Object.keys(model.get("ablated")).length > 0;
    const now = lossStats(ls, tokens, minRepeat(), lab.spans);
    const clean = ablated && lab.clean && lab.clean.key === key(tokens) ? lossStats(lab.clean.losses, tokens, minRepeat(), lab.spans) : null;
    const stat = (name, label, unit = " nats") => {
      const node = el("span", { class: "cb-smol-stat", "data-stat": name, "data-value": String(now[name]) },
        [document.createTextNode(`${label} `), el("b", { text: withChange(now[name], clean && clean[name]) }), document.createTextNode(unit)]);
      if (clean) node.dataset.clean = String(clean[name]);
      return node;
    };
    const lines = [el("div", {}, [stat("mean", `Mean loss over the ${ls.length} predicted tokens:`)])];
    for (const [k, v] of Object.entries({ first: now.copyFirst, second: now.copySecond, spanFirst: now.spanFirst, spanRepeat: now.spanRepeat, spanCount: now.spanRepeat === undefined ? undefined : lab.spans.repeat.length }))
      if (v === undefined) delete loss.dataset[k]; else loss.dataset[k] = String(v);
    if (now.spanRepeat !== undefined) {
      const s = lab.spans;
      lines.push(el("div", {}, [
        document.createTextNode(`Repeats: ${s.repeat.length} token${s.repeat.length === 1 ? "" : "s"} whose ${minRepeat()} tokens ending there came earlier in the same order. `),
        stat("spanFirst", `Loss at their first occurrence (${s.first.length} tokens):`, " nats;"), document.createTextNode(" "),
        stat("spanRepeat", "at the repeats:")]));
    } else lines.push(el("div", { class: "cb-smol-norepeat", text: `Nothing repeats: no run of ${minRepeat()} tokens occurs twice.` }));
    if (now.copySecond !== undefined)
      lines.push(el("div", {}, [stat("copyFirst", "The two copies: the first", " nats,"), document.createTextNode(" "),
        stat("copySecond", "the second from its second token (its first cannot be predicted):")]));
    if (clean) lines.push(el("div", { class: "cb-caption", text: "Each: clean \u2192 with the ablated heads, and the change." }));
    summary.replaceChildren(el("div", { class: "cb-caption", text: `Loss at each token (predicting it from the ones before; ln ${V} = ${chance.toFixed(1)} is a uniform guess).` }), ...lines);
  }

  // per-token loss against position, with axes, the clean loss under an ablation, the
  // repeats and their first occurrences shaded, the copy boundary; redrawn to its width
  function drawChart() {
    if (!lab.run) return;
    const tokens = lab.tokensRun, ls = lab.losses, V = lab.run.V, chance = Math.log(V);
    const ablated = Object.keys(model.get("ablated")).length > 0;
    const clean = ablated && lab.clean && lab.clean.key === key(tokens) ? lab.clean.losses : null;
    if (!ls.length) { chart.replaceChildren(); legend.replaceChildren(); return; }
    const P = tokens.length, n = P >> 1;
    const copies = P % 2 === 0 && n > 1 && tokens.slice(0, n).every((t, i) => t === tokens[n + i]);
    const width = Math.max(200, Math.floor(chart.clientWidth || 600));
    chart.dataset.width = String(Math.floor(chart.clientWidth));
    chart.replaceChildren(lossChart({ width, ls, clean, chance, spans: lab.spans, boundary: copies ? n : null, pieceText, tokens }));
    const items = [["cb-smol-key-bar", ablated ? "loss with the ablation" : "loss"]];
    if (clean) items.push(["cb-smol-key-clean", "clean loss"]);
    items.push(["cb-smol-key-chance", `uniform guess, ln ${V}`]);
    if (lab.spans.repeat.length) items.push(["cb-smol-key-first", "first occurrence"], ["cb-smol-key-rep", "repeat"]);
    if (copies) items.push(["cb-smol-key-boundary", "second copy starts"]);
    legend.replaceChildren(...items.map(([cls, text]) => el("span", { class: "cb-smol-key" }, [el("i", { class: cls }), document.createTextNode(text)])));
  }
  let resized = null;
  new ResizeObserver(() => {
    cancelAnimationFrame(resized);
    resized = requestAnimationFrame(() => { if (!lab.busy && lab.run && chart.dataset.width !== String(Math.floor(chart.clientWidth))) drawChart(); });
  }).observe(chart);

  model.on("change:tokens", schedule);
  model.on("change:ablated", schedule);
  model.on("change:head", draw);
  model.on("change:position", draw);
  model.on("change:text", () => { if (textBox.value !== model.get("text")) textBox.value = model.get("text"); markStale(); });
  for (const name of ["repeat", "how", "k"]) model.on(`change:${name}`, draw);
  textBox.value = model.get("text");
  // the patterns are painted in the theme's colours: again when it changes
  onThemeChange(root, () => { if (lab.run && !lab.busy) { drawGrid(); draw(); } });
  root.cbSmolPaint = paint;  // for the tests (tests/browser/test_a11y.py): the heat map's colours
  draw();
}

// A pattern [P, P] as a heat map, with row `pos` tinted. On a light page: white 0, blue 1,
// the ink growing as the weight's square root. On a dark page the same ramp runs from the
// page's own background (transparent) to a light blue: white zeros there made the 270
// thumbnails a glaring grid in which the strongest attention was the darkest, least visible
// part. tests/browser/test_a11y.py compares the two themes pixel by pixel.
function paint(canvas, pattern, P, pos) {
  const dark = darkPage(), ctx = canvas.getContext("2d"), img = ctx.createImageData(P, P);
  for (let i = 0; i < P * P; i++) {
    const s = Math.sqrt(Math.min(1, Math.max(0, pattern[i]))), row = Math.floor(i / P) === pos;
    if (dark) img.data.set([...(row ? [255, 180, 120] : [190, 225, 255]), Math.round(255 * s)], 4 * i);
    else {
      const v = 255 - Math.round(255 * s);
      img.data.set(row ? [255, Math.min(255, v + 60), v, 255] : [v, v, 255, 255], 4 * i);
    }
  }
  ctx.putImageData(img, 0, 0);
}

function bars(rows) {
  const box = el("div", { class: "cb-bars" });
  for (const [name, value, mark] of rows) {
    const bar = el("div", { class: "cb-bar" });
    bar.style.width = `${100 * value}%`;
    box.append(el("div", { class: "cb-bar-row" + (mark ? " cb-mark" : "") }, [el("span", { class: "cb-bar-label", text: name }),
      el("div", { class: "cb-bar-track" }, [bar]), el("span", { class: "cb-bar-value", text: value.toFixed(3) })]));
  }
  return box;
}

// "nice" tick step: 1, 2 or 5 times a power of ten, so that span / step <= most
function niceStep(span, most) {
  const raw = span / Math.max(1, most), p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
}

// The loss chart: a column per predicted position (x: the position of the token predicted,
// 1 .. P-1; y: its loss in nats, from 0), a dash per position for the clean loss under an
// ablation, the uniform guess ln V as a line, the repeats and their first occurrences
// shaded behind, the copy boundary as a vertical line. Drawn in pixels at the given width,
// so its labels keep their size on a phone.
function lossChart({ width, ls, clean, chance, spans, boundary, pieceText, tokens }) {
  const NS = "http://www.w3.org/2000/svg";
  const node = (tag, attrs = {}, text) => {
    const n = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    return n;
  };
  const m = { left: 44, right: 8, top: 10, bottom: 40 }, height = width < 500 ? 180 : 220;
  const w = width - m.left - m.right, h = height - m.top - m.bottom, n = ls.length;
  const top = Math.max(chance, ...ls, ...(clean || [])) * 1.05;
  const band = w / n, x = (i) => m.left + (i - 1) * band, y = (v) => m.top + h * (1 - v / top);
  const svg = node("svg", { class: "cb-smol-losschart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": "loss in nats at each position" });
  const shade = (ps, cls) => ps.forEach((p) => svg.append(node("rect", { x: x(p), y: m.top, width: band, height: h, class: cls })));
  shade(spans.first, "cb-smol-firstband");
  shade(spans.repeat, "cb-smol-repband");
  // axes and ticks
  const yStep = niceStep(top, Math.max(2, Math.floor(h / 28)));
  const yAxis = node("g", { class: "cb-smol-axis cb-smol-yaxis" });
  yAxis.append(node("line", { x1: m.left, x2: m.left, y1: m.top, y2: m.top + h }));
  for (let v = 0; v <= top + 1e-9; v += yStep) {
    yAxis.append(node("line", { x1: m.left - 4, x2: m.left, y1: y(v), y2: y(v) }),
      node("line", { x1: m.left, x2: m.left + w, y1: y(v), y2: y(v), class: "cb-smol-grid-line" }),
      node("text", { x: m.left - 6, y: y(v) + 4, "text-anchor": "end", class: "cb-smol-tick" }, String(+v.toFixed(6))));
  }
  yAxis.append(node("text", { class: "cb-smol-axis-label", "text-anchor": "middle",
    transform: `translate(12 ${m.top + h / 2}) rotate(-90)` }, "loss (nats)"));
  const xStep = niceStep(n, Math.max(2, Math.floor(w / 36)));
  const xAxis = node("g", { class: "cb-smol-axis cb-smol-xaxis" });
  xAxis.append(node("line", { x1: m.left, x2: m.left + w, y1: m.top + h, y2: m.top + h }));
  for (let p = xStep; p <= n; p += xStep)
    xAxis.append(node("line", { x1: x(p) + band / 2, x2: x(p) + band / 2, y1: m.top + h, y2: m.top + h + 4 }),
      node("text", { x: x(p) + band / 2, y: m.top + h + 16, "text-anchor": "middle", class: "cb-smol-tick" }, String(p)));
  xAxis.append(node("text", { x: m.left + w / 2, y: height - 4, "text-anchor": "middle", class: "cb-smol-axis-label" },
    "position of the token predicted"));
  svg.append(yAxis, xAxis);
  ls.forEach((v, k) => {
    const p = k + 1, r = node("rect", { x: x(p) + band * 0.1, y: y(v), width: Math.max(1, band * 0.8), height: m.top + h - y(v), class: "cb-smol-lossbar" });
    r.append(node("title", {}, `position ${p} \u201c${pieceText(tokens[p])}\u201d: loss ${v.toFixed(3)} nats` +
      (clean ? ` (clean ${clean[k].toFixed(3)})` : "")));
    svg.append(r);
  });
  if (clean) clean.forEach((v, k) => svg.append(node("line", { x1: x(k + 1), x2: x(k + 1) + band, y1: y(v), y2: y(v), class: "cb-smol-cleanmark" })));
  svg.append(node("line", { x1: m.left, x2: m.left + w, y1: y(chance), y2: y(chance), class: "cb-smol-chance" }));
  if (boundary !== null) {
    const bx = x(boundary) + band / 2;  // between predicting the second copy's first token and the rest
    svg.append(node("line", { x1: bx, x2: bx, y1: m.top, y2: m.top + h, class: "cb-smol-boundary" }),
      node("text", { x: bx + 3, y: m.top + 11, class: "cb-smol-tick cb-smol-boundary-label" }, "second copy"));
  }
  return svg;
}

export default { render };
