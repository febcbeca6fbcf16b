// The induction lab's front end (anywidget). The forward pass (attn_only_forward.js) runs
// the model in the page; this module only draws and listens.
// Synced traits: tokens, ablated {"l.h": "zero" | "mean"}, position; weights when live.

import { bars, darkPage, el, onThemeChange, svg } from "./dom.js";
import { forward, loadModel, loadRecord, logProbs, losses, pathTerms } from "./attn_only_forward.js";
import { droppedNote, parseTokens } from "./token_input.js";

// What a click on a head does: not ablated -> zero -> mean -> not ablated
const ABLATIONS = [undefined, "zero", "mean"];

// `ablated` ({"l.h": how}) after a click on head `key`: a new object, the head's entry moved
// to the next ablation of ABLATIONS, or removed after "mean".
export function nextAblation(ablated, key) {
  const next = { ...ablated };
  const how = ABLATIONS[(ABLATIONS.indexOf(ablated[key]) + 1) % ABLATIONS.length];
  if (how) next[key] = how;
  else delete next[key];
  return next;
}

// A random segment of 16 to 32 tokens (toy-2l's training segments, at most half the context
// `nCtx`) of a vocabulary of `dVocab`, repeated. `random` () -> [0, 1): a fresh draw on every
// call with the default, so each click (and each page load) shows a new sequence.
export function repeatedRandom(dVocab, nCtx, random = Math.random) {
  const n = Math.min(Math.floor(nCtx / 2), 16 + Math.floor(random() * 17));
  const half = Array.from({ length: n }, () => Math.floor(random() * dVocab));
  return [...half, ...half];
}

function render({ model, el: root }) {
  root.classList.add("cb-lab", "cb-widget", "cb-box");
  const status = el("div", { class: "cb-lab-status", role: "status", text: "loading the model\u2026" });
  root.append(status);
  const failed = (message) => {
    status.classList.add("cb-error");
    status.textContent = `could not load the model: ${message}`;
  };
  loadRecord(model, { onSlow: failed }).then((record) => build(model, root, loadModel(record)),
    (err) => failed(err.message));
}

function build(model, root, net) {
  const { d_vocab: V, n_ctx } = net.cfg;
  const label = (t) => `t${t}`;
  const input = el("input", { class: "cb-lab-input", type: "text", "aria-label": "token ids, separated by spaces" });
  const random = el("button", { class: "cb-btn cb-lab-random", text: "random tokens, repeated" });
  const note = el("div", { class: "cb-lab-note", role: "status" });
  const palette = el("details", { class: "cb-lab-palette" }, [el("summary", { text: "click tokens to add them" })]);
  for (let t = 0; t < V; t++) {
    const b = el("button", { class: "cb-btn cb-lab-add", text: label(t), "data-token": String(t) });
    b.addEventListener("click", () => {
      const tokens = model.get("tokens");
      // a full context refuses, and says so, rather than dropping the first token unseen
      if (tokens.length >= n_ctx) note.textContent = `the context is full (${n_ctx} tokens): remove one to add ${label(t)}`;
      else setTokens([...tokens, t]);
    });
    palette.append(b);
  }
  const back = el("button", { class: "cb-btn cb-lab-back", text: "\u232b remove last" });
  back.addEventListener("click", () => setTokens(model.get("tokens").slice(0, -1)));
  palette.append(back);
  const strip = el("div", { class: "cb-lab-strip" });
  const heads = el("div", { class: "cb-lab-heads" });
  const predictions = el("div", { class: "cb-lab-predictions" });
  const loss = el("div", { class: "cb-lab-loss" });
  const paths = el("div", { class: "cb-lab-paths" });
  root.replaceChildren(el("div", { class: "cb-row" }, [input, random]), note, palette, strip,
    el("div", { class: "cb-caption", text: `Attention patterns of ${net.name} (query down, key across). Click a head to ablate it: zero, then mean, then back.` }),
    heads, predictions, loss, paths);

  // the page's own model, for readers who open the console (and for the tests)
  root.cbLab = { net, loadModel, forward, pathTerms, losses, logProbs, paint };

  // tokens: ids the page itself made (clicks, draws); `said`: what was not read of the box
  function setTokens(tokens, said = "") {
    note.textContent = said;
    save({ tokens, position: -1 });
  }
  function save(changes) {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    model.save_changes(); // reaches the kernel when there is one; harmless on a static page
    draw();
  }
  input.addEventListener("change", () => {
    const read = parseTokens(input.value, { dVocab: V, nCtx: n_ctx });
    setTokens(read.ids, droppedNote(read, n_ctx));
  });
  random.addEventListener("click", () => setTokens(repeatedRandom(V, n_ctx)));

  function draw() {
    const tokens = model.get("tokens"), ablated = model.get("ablated");
    input.value = tokens.map(label).join(" ");
    root.dataset.ablated = Object.entries(ablated).map(([k, v]) => `${k}:${v}`).sort().join(" ");
    if (!tokens.length) {  // nothing to run: nothing of an earlier sequence stays on screen
      strip.textContent = "no tokens yet: type token ids, click tokens, or draw random ones";
      for (const part of [heads, predictions, loss, paths]) {
        part.replaceChildren();
        for (const key of Object.keys(part.dataset)) delete part.dataset[key];
      }
      delete root.dataset.position;
      return;
    }
    const run = forward(net, tokens, ablated);
    const P = run.P, pos = model.get("position") < 0 || model.get("position") >= P ? P - 1 : model.get("position");
    root.dataset.position = String(pos);

    strip.replaceChildren(...tokens.map((t, i) => {
      const b = el("button", { class: "cb-lab-tok" + (i === pos ? " cb-on" : ""), text: label(t), title: `position ${i}` });
      b.addEventListener("click", () => save({ position: i }));
      return b;
    }));

    heads.replaceChildren(...run.layers.map((layer, l) => el("div", { class: "cb-row" }, layer.map((head, h) => {
      const key = `${l}.${h}`, how = ablated[key];
      const canvas = el("canvas", { width: String(P), height: String(P), class: "cb-lab-pattern" });
      paint(canvas, head.pattern, P, pos);
      const box = el("button", { class: "cb-lab-head" + (how ? ` cb-ablated-${how}` : ""), "data-head": key },
        [canvas, el("span", { text: `L${l}H${h}` + (how ? ` (${how})` : "") })]);
      box.addEventListener("click", () => save({ ablated: nextAblation(ablated, key) }));
      return box;
    }))));

    const logp = logProbs(run, pos);
    const top = logp.map((v, t) => [t, v]).sort((a, b) => b[1] - a[1]).slice(0, 5);
    predictions.dataset.probabilities = JSON.stringify(top.map(([t, v]) => [t, Math.exp(v)]));
    predictions.replaceChildren(el("div", { class: "cb-caption", text: `Top predictions after position ${pos} (${label(tokens[pos])}), as probabilities (a full bar is 1):` }),
      bars(top.map(([t, v]) => [label(t), Math.exp(v), pos + 1 < P && t === tokens[pos + 1]]), { full: 1 }));

    const ls = losses(run), n = P / 2, repeat = P % 2 === 0 && tokens.slice(0, n).every((t, i) => t === tokens[n + i]);
    const mean = (xs) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const summary = repeat
      ? `Loss, first copy ${mean(ls.slice(0, n - 1)).toFixed(2)}, second copy ${mean(ls.slice(n)).toFixed(2)} nats (chance ${Math.log(V).toFixed(2)}; the second copy's first token cannot be predicted and is left out).`
      : `Mean loss ${mean(ls).toFixed(2)} nats (chance ${Math.log(V).toFixed(2)}).`;
    loss.replaceChildren(el("div", { class: "cb-caption", text: `Loss at each position (predicting the next token). ${summary}` }), lossChart(ls, Math.log(V)));
    loss.dataset.losses = JSON.stringify(ls.map((x) => +x.toFixed(4)));

    const target = top[0][0], terms = pathTerms(net, run, pos, ablated)
      .map((t) => [t.label, t.logits[target]]).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
    const sum = terms.reduce((a, [, v]) => a + v, 0), logit = run.logits[pos * V + target];
    paths.dataset.sum = String(sum);
    paths.dataset.logit = String(logit);
    paths.replaceChildren(el("div", { class: "cb-caption", text: `Path expansion of the logit of ${label(target)} at position ${pos}: ${terms.length} terms, patterns as above. They sum to ${sum.toFixed(3)}; the logit is ${logit.toFixed(3)}.` }),
      bars(terms.slice(0, 10), { signed: true }),
      el("div", { class: "cb-caption", text: terms.length > 10 ? `the other ${terms.length - 10} terms add ${terms.slice(10).reduce((a, [, v]) => a + v, 0).toFixed(3)}` : "" }));
  }

  model.on("change:tokens", draw);
  model.on("change:ablated", draw);
  model.on("change:position", draw);
  onThemeChange(root, draw);  // the patterns are painted in the theme's colours
  draw();
}

// A pattern [P, P] as a heat map: each entry's weight sets the opacity of the cell's colour
// (blue; orange on the chosen query row), so 0 shows the page's own background in either
// theme. On a dark page the colours are light ones and the opacity is the weight's square
// root: drawn as on a white page, a faint weight (0.1) nearly vanished there (1.1:1 against
// the page; 2:1 so). tests/browser/test_a11y.py compares the two themes pixel by pixel.
const HEAT = {
  light: { cell: [42, 122, 226], row: [226, 120, 42], alpha: (w) => w },
  dark: { cell: [150, 200, 255], row: [255, 180, 120], alpha: Math.sqrt },
};

function paint(canvas, pattern, P, pos) {
  const { cell, row, alpha } = HEAT[darkPage() ? "dark" : "light"];
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(P, P);
  for (let i = 0; i < P * P; i++) {
    const w = Math.min(1, Math.max(0, pattern[i]));
    img.data.set([...(Math.floor(i / P) === pos ? row : cell), Math.round(255 * alpha(w))], 4 * i);
  }
  ctx.putImageData(img, 0, 0);
}

// per-position loss as columns, with chance (ln V) as a line
function lossChart(ls, chance) {
  const w = 6, h = 60, top = Math.max(chance, ...ls), y = (x) => h * (1 - x / top);
  const pic = svg("svg", { width: w * ls.length + 2, height: h, class: "cb-lab-losschart" });
  ls.forEach((x, i) => pic.append(svg("rect", { x: i * w + 1, y: y(x), width: w - 1, height: h - y(x), class: "cb-lab-lossbar" },
    [svg("title", { text: `position ${i}: ${x.toFixed(3)}` })])));
  pic.append(svg("line", { x1: 0, x2: w * ls.length + 2, y1: y(chance), y2: y(chance), class: "cb-lab-chance" }));
  return el("div", { class: "cb-scroll" }, [pic]);
}

export default { render };
