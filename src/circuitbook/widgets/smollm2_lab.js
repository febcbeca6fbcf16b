// The SmolLM2 lab's front end (anywidget). The forward pass above this code
// (smollm2_forward.js) runs the model in the page; this part loads it when asked, draws
// and listens. Synced traits: text, repeat, tokens, ablated {"l.h": "zero" | "mean"},
// head ("l.h", the one shown), position, k, how, seed, examples.

import { forward, loadSmolLM2, logProbs, losses, runLayer, runUnembed, siteSource, topTokens }
  from "./smollm2_forward.js";

function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

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
function labTokens(ids, repeat, T) {
  return repeat ? [...ids.slice(0, T >> 1), ...ids.slice(0, T >> 1)] : ids.slice(0, T);
}

function render({ model, el: root }) {
  root.classList.add("cb-smol");
  const lab = { net: null, tokenizer: null, decode: null, run: null, tokensRun: null };
  const mb = (n) => `${(n / 1e6).toFixed(0)} MB`;

  // --- the controls ---------------------------------------------------------------------
  const loadButton = el("button", { class: "cb-btn cb-smol-load", text: "Load SmolLM2 and run it in this page" });
  const progress = el("progress", { class: "cb-smol-progress", max: "1", value: "0" });
  const status = el("div", { class: "cb-smol-status", role: "status",
    text: "SmolLM2-135M-Instruct's weights (about 96 MB, from this site) load when you press the button." });
  const textBox = el("textarea", { class: "cb-smol-text", rows: "4", "aria-label": "the text the model reads" });
  const repeatBox = el("input", { type: "checkbox", class: "cb-smol-repeat" });
  const examples = el("div", { class: "cb-row cb-smol-examples" });
  const how = el("select", { class: "cb-smol-how", "aria-label": "how the buttons ablate" },
    ["mean", "zero"].map((v) => el("option", { value: v, text: `${v}-ablate` })));
  const kBox = el("input", { type: "number", class: "cb-smol-k", min: "1", max: "270", "aria-label": "k" });
  const topButton = el("button", { class: "cb-btn cb-smol-top", text: "the top k induction heads" });
  const randomButton = el("button", { class: "cb-btn cb-smol-random", text: "k random heads" });
  const clearButton = el("button", { class: "cb-btn cb-smol-clear", text: "none" });
  const clickMode = el("select", { class: "cb-smol-mode", "aria-label": "what clicking a head does" },
    [el("option", { value: "show", text: "shows its pattern" }), el("option", { value: "ablate", text: "ablates it (zero, mean, off)" })]);
  const strip = el("div", { class: "cb-smol-strip" });
  const grid = el("div", { class: "cb-smol-grid" });
  const big = el("canvas", { class: "cb-smol-big", width: "1", height: "1" });
  const bigCaption = el("div", { class: "cb-caption cb-smol-bigcaption" });
  const predictions = el("div", { class: "cb-smol-predictions" });
  const loss = el("div", { class: "cb-smol-loss" });
  root.replaceChildren(
    el("div", { class: "cb-row" }, [loadButton, progress]), status,
    textBox,
    el("div", { class: "cb-row" }, [el("label", {}, [repeatBox, document.createTextNode(" repeat its tokens once")]), examples]),
    el("div", { class: "cb-row" }, [el("span", { text: "Ablate:" }), how, kBox, topButton, randomButton, clearButton]),
    el("div", { class: "cb-row" }, [el("span", { text: "Clicking a head" }), clickMode]),
    strip,
    el("div", { class: "cb-smol-main" }, [grid, el("div", { class: "cb-smol-side" }, [big, bigCaption, predictions])]),
    loss);

  for (const [label, ex] of Object.entries(model.get("examples") || {})) {
    const b = el("button", { class: "cb-btn cb-smol-example", text: label });
    b.addEventListener("click", () => save({ text: ex.text, repeat: !!ex.repeat, position: -1 }, true));
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
  textBox.addEventListener("change", () => save({ text: textBox.value, position: -1 }, true));
  repeatBox.addEventListener("change", () => save({ repeat: repeatBox.checked, position: -1 }, true));
  how.addEventListener("change", () => save({ how: how.value }));
  kBox.addEventListener("change", () => save({ k: Math.max(1, Math.min(270, Number(kBox.value) || 1)) }));
  clearButton.addEventListener("click", () => save({ ablated: {} }));
  topButton.addEventListener("click", () => {
    const heads = ranking().slice(0, model.get("k"));
    save({ ablated: Object.fromEntries(heads.map((key) => [key, model.get("how")])) });
  });
  randomButton.addEventListener("click", () => {
    const seed = model.get("seed"), next = rng(seed), pool = ranking().slice();
    for (let i = pool.length - 1; i > 0; i--) {  // Fisher-Yates, then the first k
      const j = Math.floor(next() * (i + 1));
      [pool[i], pool[j]] = [pool[j], pool[i]];
    }
    const heads = pool.slice(0, model.get("k"));
    save({ seed: seed + 1, ablated: Object.fromEntries(heads.map((key) => [key, model.get("how")])) });
  });

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
      root.cbSmol = Object.assign(lab, { forward, runLayer, runUnembed, logProbs, topTokens, losses, labTokens, ranking });
      status.textContent = `SmolLM2 loaded (${mb(lab.net.bytes)} in ${(lab.loadMs / 1000).toFixed(1)} s).`;
      root.dataset.loaded = "true";
      if (lab.tokenizer) save({}, true);
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
    pending = true;
    root.dataset.state = "running";
    status.textContent = "running SmolLM2\u2026";
    // let the browser paint the status before the pass takes the thread
    requestAnimationFrame(() => setTimeout(() => { pending = false; compute(); }, 0));
  }

  function compute() {
    const tokens = model.get("tokens"), ablated = model.get("ablated");
    if (!tokens.length) { status.textContent = "no tokens: type a text"; root.dataset.state = "ready"; return; }
    try {
      lab.run = forward(lab.net, tokens, ablated);
    } catch (err) {
      status.textContent = `could not run: ${err.message}`;
      root.dataset.state = "error";
      return;
    }
    lab.tokensRun = tokens.slice();
    lab.losses = losses(lab.run, tokens);
    const from = lab.run.from, L = lab.net.cfg.n_layers;
    status.textContent = `${tokens.length} tokens: ${(lab.run.ms / 1000).toFixed(2)} s in this page` +
      (from === L ? " (nothing to recompute)" : from > 0 ? ` (layers ${from}\u2013${L - 1} recomputed: the ablations start there)` : "");
    drawGrid();
    draw();
    root.dataset.ablated = Object.entries(ablated).map(([k, v]) => `${k}:${v}`).sort().join(" ");
    root.dataset.state = "ready";
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
    textBox.value = model.get("text");
    repeatBox.checked = model.get("repeat");
    how.value = model.get("how");
    kBox.value = String(model.get("k"));
    if (!lab.run) return;
    const tokens = lab.tokensRun, run = lab.run, P = run.P, pos = position(P), V = run.V;
    const ls = lab.losses, chance = Math.log(V);
    root.dataset.position = String(pos);

    strip.replaceChildren(...tokens.map((t, i) => {
      const b = el("button", { class: "cb-smol-tok" + (i === pos ? " cb-on" : ""), text: pieceText(t),
        title: `position ${i}, token ${t}` + (i > 0 ? `: loss ${ls[i - 1].toFixed(2)} nats` : "") });
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

    const n = P >> 1, repeated = P % 2 === 0 && n > 1 && tokens.slice(0, n).every((t, i) => t === tokens[n + i]);
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    let summary;
    if (repeated) {
      const first = mean(ls.slice(0, n - 1)), second = mean(ls.slice(n));
      loss.dataset.first = String(first);
      loss.dataset.second = String(second);
      summary = `Loss on the first copy ${first.toFixed(2)} nats, on the second ${second.toFixed(2)} (from its second token: its first cannot be predicted).`;
    } else {
      delete loss.dataset.first;
      delete loss.dataset.second;
      summary = `Mean loss ${mean(ls).toFixed(2)} nats.`;
    }
    loss.replaceChildren(el("div", { class: "cb-caption", text: `Loss at each token (predicting it from the ones before; ln ${V} = ${chance.toFixed(1)} is a uniform guess). ${summary}` }),
      lossChart(ls, chance));
    loss.dataset.losses = JSON.stringify(ls.map((x) => +x.toFixed(5)));
  }

  model.on("change:tokens", schedule);
  model.on("change:ablated", schedule);
  model.on("change:head", draw);
  model.on("change:position", draw);
  for (const name of ["text", "repeat", "how", "k"]) model.on(`change:${name}`, draw);
  draw();
}

// a pattern [P, P] as a heat map (white 0, dark 1), with row `pos` tinted
function paint(canvas, pattern, P, pos) {
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(P, P);
  for (let i = 0; i < P * P; i++) {
    const v = 255 - Math.round(255 * Math.sqrt(pattern[i])), row = Math.floor(i / P) === pos;
    img.data.set(row ? [255, Math.min(255, v + 60), v, 255] : [v, v, 255, 255], 4 * i);
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

// per-token loss as columns, with a uniform guess (ln V) as a line
function lossChart(ls, chance) {
  const NS = "http://www.w3.org/2000/svg", w = 5, h = 60, top = Math.max(chance, ...ls);
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", String(w * ls.length + 2));
  svg.setAttribute("height", String(h));
  svg.setAttribute("class", "cb-smol-losschart");
  ls.forEach((x, i) => {
    const r = document.createElementNS(NS, "rect"), y = h * (1 - x / top);
    Object.entries({ x: i * w + 1, y, width: w - 1, height: h - y, class: "cb-smol-lossbar" }).forEach(([k, v]) => r.setAttribute(k, String(v)));
    r.append(Object.assign(document.createElementNS(NS, "title"), { textContent: `token ${i + 1}: ${x.toFixed(3)}` }));
    svg.append(r);
  });
  const line = document.createElementNS(NS, "line");
  Object.entries({ x1: 0, x2: w * ls.length + 2, y1: h * (1 - chance / top), y2: h * (1 - chance / top), class: "cb-smol-chance" }).forEach(([k, v]) => line.setAttribute(k, String(v)));
  svg.append(line);
  return el("div", { class: "cb-scroll" }, [svg]);
}

export default { render };
