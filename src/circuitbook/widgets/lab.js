// The induction lab's front end (anywidget). The forward pass above this code
// (attn_only_forward.js) runs the model in the page; this part only draws and listens.
// Synced traits: tokens, ablated {"l.h": "zero" | "mean"}, position; weights when live.

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

// A seeded generator (mulberry32), so "random tokens" is the same draw for the same seed
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

function render({ model, el: root }) {
  root.classList.add("cb-lab");
  const status = el("div", { class: "cb-lab-status", text: "loading the model\u2026" });
  root.append(status);
  loadRecord(model).then((record) => build(model, root, loadModel(record)),
    (err) => { status.textContent = `could not load the model: ${err.message}`; });
}

function build(model, root, net) {
  const { n_layers: L, n_heads: H, d_vocab: V, n_ctx } = net.cfg;
  const label = (t) => `t${t}`;
  const input = el("input", { class: "cb-lab-input", type: "text", "aria-label": "token ids, separated by spaces" });
  const random = el("button", { class: "cb-btn cb-lab-random", text: "random tokens, repeated" });
  const palette = el("details", { class: "cb-lab-palette" }, [el("summary", { text: "click tokens to add them" })]);
  for (let t = 0; t < V; t++) {
    const b = el("button", { class: "cb-btn cb-lab-add", text: label(t), "data-token": String(t) });
    b.addEventListener("click", () => setTokens([...model.get("tokens"), t].slice(-n_ctx)));
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
  root.replaceChildren(el("div", { class: "cb-row" }, [input, random]), palette, strip,
    el("div", { class: "cb-caption", text: `Attention patterns of ${net.name} (query down, key across). Click a head to ablate it: zero, then mean, then back.` }),
    heads, predictions, loss, paths);

  // the page's own model, for readers who open the console (and for the tests)
  root.cbLab = { net, loadModel, forward, pathTerms, losses, logProbs };

  function setTokens(tokens) {
    const valid = tokens.filter((t) => Number.isInteger(t) && t >= 0 && t < V).slice(0, n_ctx);
    save({ tokens: valid, position: -1 });
  }
  function save(changes) {
    for (const [k, v] of Object.entries(changes)) model.set(k, v);
    model.save_changes(); // reaches the kernel when there is one; harmless on a static page
    draw();
  }
  input.addEventListener("change", () => setTokens(input.value.split(/[\s,]+/).filter(Boolean)
    .map((s) => Number(s.replace(/^t/, "")))));
  random.addEventListener("click", () => {
    const seed = model.get("seed"), next = rng(seed), n = 16 + Math.floor(next() * 17);  // 16..32, as trained
    const half = Array.from({ length: n }, () => Math.floor(next() * V));
    save({ seed: seed + 1 });
    setTokens([...half, ...half]);
  });

  function draw() {
    const tokens = model.get("tokens"), ablated = model.get("ablated");
    input.value = tokens.map(label).join(" ");
    if (!tokens.length) { strip.textContent = "no tokens yet"; heads.replaceChildren(); return; }
    const run = forward(net, tokens, ablated);
    const P = run.P, pos = model.get("position") < 0 || model.get("position") >= P ? P - 1 : model.get("position");
    root.dataset.position = String(pos);
    root.dataset.ablated = Object.entries(ablated).map(([k, v]) => `${k}:${v}`).sort().join(" ");

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
      box.addEventListener("click", () => {
        const next = { ...ablated };
        if (NEXT_ABLATION[how]) next[key] = NEXT_ABLATION[how]; else delete next[key];
        save({ ablated: next });
      });
      return box;
    }))));

    const logp = logProbs(run, pos);
    const top = logp.map((v, t) => [t, v]).sort((a, b) => b[1] - a[1]).slice(0, 5);
    predictions.replaceChildren(el("div", { class: "cb-caption", text: `Top predictions after position ${pos} (${label(tokens[pos])}):` }),
      bars(top.map(([t, v]) => [label(t), Math.exp(v), pos + 1 < P && t === tokens[pos + 1]]), 2));

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
      bars(terms.slice(0, 10), 2, true),
      el("div", { class: "cb-caption", text: terms.length > 10 ? `the other ${terms.length - 10} terms add ${terms.slice(10).reduce((a, [, v]) => a + v, 0).toFixed(3)}` : "" }));
  }

  model.on("change:tokens", draw);
  model.on("change:ablated", draw);
  model.on("change:position", draw);
  draw();
}

// a pattern [P, P] as a heat map (white 0, dark 1), with the chosen query row outlined
function paint(canvas, pattern, P, pos) {
  const ctx = canvas.getContext("2d"), img = ctx.createImageData(P, P);
  for (let i = 0; i < P * P; i++) {
    const v = 255 - Math.round(255 * pattern[i]), row = Math.floor(i / P) === pos;
    img.data.set(row ? [255, Math.min(255, v + 60), v, 255] : [v, v, 255, 255], 4 * i);
  }
  ctx.putImageData(img, 0, 0);
}

function bars(rows, digits, signed = false) {
  const box = el("div", { class: "cb-bars" });
  const maxAbs = Math.max(1e-9, ...rows.map((r) => Math.abs(r[1])));
  for (const [name, value, mark] of rows) {
    const bar = el("div", { class: "cb-bar" + (value < 0 ? " cb-neg" : "") });
    bar.style.width = `${(100 * Math.abs(value)) / maxAbs}%`;
    box.append(el("div", { class: "cb-bar-row" + (mark ? " cb-mark" : "") }, [el("span", { class: "cb-bar-label", text: name }),
      el("div", { class: "cb-bar-track" }, [bar]), el("span", { class: "cb-bar-value", text: (signed && value > 0 ? "+" : "") + value.toFixed(digits) })]));
  }
  return box;
}

// per-position loss as columns, with chance (ln V) as a line
function lossChart(ls, chance) {
  const NS = "http://www.w3.org/2000/svg", w = 6, h = 60, top = Math.max(chance, ...ls);
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("width", String(w * ls.length + 2));
  svg.setAttribute("height", String(h));
  svg.setAttribute("class", "cb-lab-losschart");
  ls.forEach((x, i) => {
    const r = document.createElementNS(NS, "rect"), y = h * (1 - x / top);
    Object.entries({ x: i * w + 1, y, width: w - 1, height: h - y, class: "cb-lab-lossbar" }).forEach(([k, v]) => r.setAttribute(k, String(v)));
    r.append(Object.assign(document.createElementNS(NS, "title"), { textContent: `position ${i}: ${x.toFixed(3)}` }));
    svg.append(r);
  });
  const line = document.createElementNS(NS, "line");
  Object.entries({ x1: 0, x2: w * ls.length + 2, y1: h * (1 - chance / top), y2: h * (1 - chance / top), class: "cb-lab-chance" }).forEach(([k, v]) => line.setAttribute(k, String(v)));
  svg.append(line);
  return el("div", { class: "cb-scroll" }, [svg]);
}

export default { render };
