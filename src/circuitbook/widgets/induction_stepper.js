// The induction circuit, one step at a time (anywidget front end).
// Precomputed: everything (tokens, the model's real attention patterns, predictions) is
// computed in Python and synced in the `data` trait. Live (`model_name` set): the forward pass
// (attn_only_forward.js) runs the toy model in the page on `tokens[mode]`, which the reader
// can retype, and `sequenceData` reads off the same numbers Python's
// explainers.sequence_data does. Either way it works on the static site with no kernel;
// `step`, `mode` and `tokens` are synced back to Python when a kernel is present.

import { bars, el, svg } from "./dom.js";
import { forward, loadModel, loadRecord, logProbs } from "./attn_only_forward.js";
import { droppedNote, parseTokens } from "./token_input.js";

// the width of a token label as the strip draws it (.cb-label: 12px system-ui), measured on
// a canvas made at the first call (none at import)
let measure = null;
function textWidth(text) {
  measure ??= document.createElement("canvas").getContext("2d");
  measure.font = "12px system-ui, sans-serif";
  return measure.measureText(text).width;
}

// which sentence of a step's `variants` fits the sequence shown (explainers._steps names them)
const PICK = {
  direct: (seq) => (seq.head_rank === 1 ? "top" : seq.head_rank <= 0.01 * seq.n_vocab ? "high" : "low"),
  match: (seq) => (seq.top_key === seq.target ? "top" : seq.top_key === 0 ? "first" : "low"),
};
PICK.lands = PICK.match;

// a step text's template filled from the sequence shown (explainers._steps says the syntax);
// variants: {name: {variant: template}} for this mode
function fill(template, seq, variants = {}) {
  const values = { ...seq, last: seq.tokens[seq.query].trim(), expected: seq.expected.trim(),
    top_token: seq.tokens[seq.top_key].trim() };
  for (const [name, texts] of Object.entries(variants)) values[name] = fill(texts[PICK[name](seq)] ?? texts.low, seq);
  return template.replace(/\{(\w+)(?::(%|\d|p|th))?\}/g, (whole, key, fmt) => {
    const v = values[key];
    if (v === undefined) return whole;
    if (fmt === "%") return percent(v);
    if (fmt === "p") return probability(v);
    if (fmt === "th") return ordinal(v);
    if (fmt) return v.toFixed(Number(fmt));
    return typeof v === "number" ? v.toLocaleString("en-US") : String(v);
  });
}

// a share as a percentage: whole percent, but one decimal from 99.5% (0.996 is not "100%"), and
// "> 99.9%" below 1 where even that rounds to 100 (explainers.percent does the same)
export function percent(x) {
  if (x < 0.995 || x >= 1) return `${Math.round(100 * x)}%`;
  return 100 * x < 99.95 ? `${(100 * x).toFixed(1)}%` : "> 99.9%";
}

// a probability as read: 2 decimals from 0.1, 3 from 0.001, below that 1.6e-6 (never "0.000")
export function probability(p) {
  if (p === 0) return "0";
  if (p >= 0.1) return p.toFixed(2);
  if (p >= 0.001) return p.toFixed(3);
  return p.toExponential(1);
}

// 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 24,164th
export function ordinal(n) {
  const tens = n % 100, ones = n % 10;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ones === 1 ? "st" : ones === 2 ? "nd" : ones === 3 ? "rd" : "th";
  return `${n.toLocaleString("en-US")}${suffix}`;
}

const r = (x, digits) => Number(x.toFixed(digits));
// to 3 significant digits, as explainers._significant keeps a probability
const sig = (x) => Number(x.toPrecision(3));

// What the stepper shows for `ids`, from one forward pass in the page: the same fields as
// explainers.sequence_data (toy models: no final normalisation, so a head's direct effect is
// its output z W_O times W_U). `labels`: how each position is shown (as the reader wrote
// it); `labelOf(id)`: how a predicted token is. null when the last token has no earlier
// occurrence.
export function sequenceData(net, ids, labels, labelOf, prevHead, indHead) {
  const [l0, h0] = prevHead.split(".").map(Number), [l1, h1] = indHead.split(".").map(Number);
  const query = ids.length - 1;
  let earlier = -1;
  for (let i = 0; i < query; i++) if (ids[i] === ids[query]) earlier = i;
  if (query < 1 || earlier < 0) return null;
  const { d_model: D, d_vocab: V } = net.cfg, run = forward(net, ids), P = run.P;
  const prevPat = run.layers[l0][h0].pattern, ind = run.layers[l1][h1];
  const prev_arcs = [];
  for (let q = 1; q <= query; q++) {
    let k = 0;
    for (let j = 1; j <= q; j++) if (prevPat[q * P + j] > prevPat[q * P + k]) k = j;
    prev_arcs.push([q, k, r(prevPat[q * P + k], 3)]);
  }
  const row = Array.from({ length: query + 1 }, (_, k) => ind.pattern[query * P + k]);
  const ranked = row.map((w, k) => [k, w]).sort((a, b) => b[1] - a[1]);
  const ind_arcs = ranked.slice(0, 3).map(([k, w]) => [query, k, r(w, 3)]);
  const headLogits = new Float64Array(V);
  for (let i = 0; i < D; i++) {
    const x = ind.out[query * D + i];
    for (let t = 0; t < V; t++) headLogits[t] += x * net.w.W_U[i * V + t];
  }
  const target = ids[earlier + 1], probs = logProbs(run, query).map(Math.exp);
  const top5 = (values) => Array.from(values, (v, t) => [t, v]).sort((a, b) => b[1] - a[1]).slice(0, 5)
    .map(([t, v]) => [labelOf(t), r(v, 3)]);
  return {
    tokens: labels.slice(), ids, query, earlier, target: earlier + 1, expected: labels[earlier + 1],
    matching: ids.map((_, k) => k).filter((k) => k >= 1 && ids[k - 1] === ids[query]),
    prev_arcs, ind_arcs, ind_scores: row.map((_, k) => r(ind.scores[query * P + k], 2)),
    head_top: top5(headLogits), model_top: top5(probs),
    attention_on_target: r(row[earlier + 1], 3), p_expected: sig(probs[target]),
    top_key: ranked[0][0], top_attention: r(ranked[0][1], 3),
    target_key_rank: row.filter((w) => w > row[earlier + 1]).length + 1,
    p_first: sig(Math.exp(logProbs(run, earlier)[target])),
    head_rank: headLogits.filter((v) => v > headLogits[target]).length + 1, n_vocab: V,
  };
}

function render({ model, el: root }) {
  root.classList.add("cb-stepper", "cb-widget", "cb-box");
  if (!model.get("model_name")) { build(model, root, null); return; }
  const status = el("div", { class: "cb-stepper-status", role: "status", text: "loading the model\u2026" });
  root.append(status);
  const failed = (message) => {
    status.classList.add("cb-error");
    status.textContent = `could not load the model: ${message}`;
  };
  loadRecord(model, { onSlow: failed }).then((record) => { root.replaceChildren(); build(model, root, loadModel(record)); },
    (err) => failed(err.message));
}

// net: the toy model the page runs (live), or null (precomputed)
function build(model, root, net) {
  const header = el("div", { class: "cb-row" });
  const prev = el("button", { class: "cb-btn cb-prev", text: "\u2190 Prev" });
  const next = el("button", { class: "cb-btn cb-next", text: "Next \u2192" });
  const counter = el("span", { class: "cb-counter" });
  const toggle = el("button", { class: "cb-btn cb-toggle" });
  header.append(prev, counter, next, toggle);
  const title = el("div", { class: "cb-title" });
  const body = el("div", { class: "cb-body" });
  const tokensBox = el("div", { class: "cb-tokens" });
  const extra = el("div", { class: "cb-extra" });
  root.append(header);
  const input = el("input", { class: "cb-stepper-input", type: "text", "aria-label": "the sequence: words of the text or token ids t0, t1, ..." });
  const note = el("div", { class: "cb-stepper-note", role: "status" });
  // the reader's own spelling of the sequence each mode shows: {mode: {ids, labels}}
  const typed = {};
  if (net) {
    root.append(el("div", { class: "cb-caption", text: `${net.name} runs in this page on the sequence below: retype it (words of the text, or token ids t0 to t${net.cfg.d_vocab - 1}); the last token must occur earlier.` }), input, note);
    input.addEventListener("change", () => {
      const words = Object.fromEntries(Object.entries(model.get("words")).map(([i, w]) => [w, Number(i)]));
      const read = parseTokens(input.value, { dVocab: net.cfg.d_vocab, nCtx: net.cfg.n_ctx, words });
      const mode = model.get("mode");
      typed[mode] = { ids: read.ids, labels: read.labels };
      note.textContent = droppedNote(read, net.cfg.n_ctx);
      set("tokens", { ...model.get("tokens"), [mode]: read.ids });
    });
  }
  root.append(title, body, tokensBox, extra);

  // live: the sequence of `mode` with its labels. A sequence the reader typed keeps their
  // spelling ("t1" stays "t1" even where t1 is a word of the text); predicted tokens are
  // named as the sequence names them, else by the text's words if the sequence uses words.
  function current(data, mode) {
    if (!net) return data.sequences[mode];
    const words = model.get("words"), ids = model.get("tokens")[mode];
    const mine = typed[mode] && typed[mode].ids.join() === ids.join() ? typed[mode].labels : null;
    const labels = mine || ids.map((t) => (mode === "text" && words[t] !== undefined ? words[t] : `t${t}`));
    const spelled = new Map(ids.map((t, i) => [t, labels[i]]).reverse());  // the first spelling
    const byWords = labels.some((l, i) => l === words[ids[i]]);
    const labelOf = (t) => spelled.get(t) ?? (byWords && words[t] !== undefined ? words[t] : `t${t}`);
    input.value = labels.join(" ");
    return sequenceData(net, ids, labels, labelOf, data.prev_head, data.induction_head);
  }

  function draw() {
    const data = model.get("data");
    const mode = model.get("mode");
    const step = model.get("step");
    const seq = current(data, mode);
    const steps = data.steps;
    const s = steps[step];
    root.dataset.step = String(step);
    root.dataset.mode = mode;
    counter.textContent = `step ${step + 1} of ${steps.length}`;
    prev.disabled = step === 0;
    next.disabled = step === steps.length - 1;
    toggle.textContent = mode === "text" ? "Show the random-token control" : "Show the text";
    title.textContent = s.title;
    if (!seq) {
      body.textContent = "The last token of this sequence does not occur earlier: there is nothing for induction to copy. Retype it.";
      tokensBox.replaceChildren();
      extra.replaceChildren();
      return;
    }
    root.dataset.attention = String(seq.attention_on_target);
    root.dataset.pExpected = String(seq.p_expected);
    const variants = Object.fromEntries(Object.entries(s.variants || {}).map(([name, v]) => [name, v[mode] || v.text]));
    body.textContent = fill(s[mode] || s.text, seq, variants);

    // the token row, with arcs for this step drawn from the model's real attention
    tokensBox.replaceChildren();
    // each token is as wide as its text (none is cut); the strip scrolls inside its box
    const widths = seq.tokens.map((tok) => Math.max(34, Math.ceil(textWidth(tok)) + 16));
    const left = widths.map((_, i) => 5 + widths.slice(0, i).reduce((a, b) => a + b, 0));
    const centre = (i) => left[i] + widths[i] / 2;
    const h = 150, base = 118;
    const width = left[left.length - 1] + widths[widths.length - 1] + 5;
    const pic = svg("svg", { width: String(width), height: String(h), class: "cb-svg" });
    const arcs = s.arcs === "prev" ? seq.prev_arcs : s.arcs === "induction" ? seq.ind_arcs : [];
    for (const [q, k, weight] of arcs) {
      if (weight < 0.05 || q === k) continue;
      const x1 = centre(q), x2 = centre(k);
      const top = base - 18 - Math.min(90, Math.abs(x1 - x2) * 0.45);
      const path = svg("path", {
        d: `M ${x1} ${base - 14} Q ${(x1 + x2) / 2} ${top} ${x2} ${base - 14}`,
        class: s.arcs === "prev" ? "cb-arc cb-arc-prev" : "cb-arc cb-arc-ind",
        "stroke-width": String(1 + 5 * weight),
        "stroke-opacity": String(0.25 + 0.75 * weight),
      });
      path.append(svg("title", { text: `${seq.tokens[q]} (${q}) attends to ${seq.tokens[k]} (${k}): ${weight.toFixed(2)}` }));
      pic.append(path);
    }
    seq.tokens.forEach((tok, i) => {
      let cls = "cb-tok";
      if (s.highlight && s.highlight.includes("query") && i === seq.query) cls += " cb-query";
      if (s.highlight && s.highlight.includes("earlier") && i === seq.earlier) cls += " cb-earlier";
      if (s.highlight && s.highlight.includes("target") && i === seq.target) cls += " cb-target";
      const rect = svg("rect", { x: String(left[i] + 2), y: String(base - 12), width: String(widths[i] - 4), height: "26", rx: "4", class: cls });
      const label = svg("text", { x: centre(i), y: base + 6, class: "cb-label", text: tok });
      const pos = svg("text", { x: centre(i), y: base + 28, class: "cb-pos", text: String(i) });
      pic.append(rect, label, pos);
    });
    const scroller = el("div", { class: "cb-scroll" }, [pic]);
    tokensBox.append(scroller);

    // step-specific panel: key scores, or the head's and the model's predictions
    extra.replaceChildren();
    if (s.panel === "scores") {
      extra.append(el("div", { class: "cb-caption", text: `Induction head ${data.induction_head}: score of the last query on each key (before the softmax). Keys whose previous token is "${seq.tokens[seq.query]}" are outlined.` }));
      extra.append(bars(seq.ind_scores.map((v, i) => [`${i}:${seq.tokens[i]}`, v, seq.matching.includes(i)]), { digits: 1 }));
    } else if (s.panel === "prediction") {
      extra.append(el("div", { class: "cb-caption", text: `What head ${data.induction_head} writes, read through the unembedding (top tokens):` }));
      extra.append(bars(seq.head_top.map(([t, v]) => [t, v, t === seq.expected])));
      extra.append(el("div", { class: "cb-caption", text: "The whole model's prediction (probabilities; a full bar is 1):" }));
      extra.append(bars(seq.model_top.map(([t, p]) => [t, p, t === seq.expected]), { full: 1 }));
    }
  }

  function set(key, value) {
    model.set(key, value);
    model.save_changes(); // reaches the kernel when there is one; harmless on a static page
    draw();
  }
  prev.addEventListener("click", () => set("step", Math.max(0, model.get("step") - 1)));
  next.addEventListener("click", () => set("step", Math.min(model.get("data").steps.length - 1, model.get("step") + 1)));
  toggle.addEventListener("click", () => set("mode", model.get("mode") === "text" ? "random" : "text"));
  model.on("change:step", draw);
  model.on("change:mode", draw);
  model.on("change:data", draw);
  model.on("change:tokens", draw);
  draw();
}

export default { render };
