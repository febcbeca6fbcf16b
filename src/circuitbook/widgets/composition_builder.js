// The composition builder (anywidget front end): toggle whether head H1's queries, keys and
// values read head H0's output, and see which path-expansion terms exist, what the
// configuration can compute, and how the number of terms grows with heads and layers.
// The terms, their typeset formulas (HTML made in Python by circuitbook.widgets.quiz.rich),
// the per-configuration sentences, the sizes for a real model and the term counts all come
// precomputed in the `data` trait; the page decides from the three toggles which apply.

import { el } from "./dom.js";

const PRESETS = { none: [], "induction: K-composition only": ["k"], "all three": ["q", "k", "v"] };

function slider(cls, label, max, value, onInput) {
  const input = el("input", { type: "range", min: "1", max: String(max), step: "1", value: String(value),
    class: cls, "aria-label": label });
  const readout = el("span", { class: "cb-counter" });
  input.addEventListener("input", onInput);
  return [el("label", { class: "cb-slider" }, [el("span", { text: label + " " }), input, readout]), input, readout];
}

function render({ model, el: root }) {
  root.classList.add("cb-builder", "cb-widget", "cb-box");
  const toggles = el("div", { class: "cb-row" });
  const presets = el("div", { class: "cb-row" });
  const summary = el("div", { class: "cb-summary" });
  const explain = el("div", { class: "cb-config" });
  const table = el("table", { class: "cb-terms" });
  const note = el("div", { class: "cb-caption" });
  const scale = el("div", { class: "cb-scale" });
  root.append(el("div", { class: "cb-title", text: "Which of H1's inputs read H0's output?" }), toggles,
    el("div", { class: "cb-caption", text: "Presets:" }), presets, summary, explain,
    el("div", { class: "cb-table-scroll" }, [table]), note, scale);

  const labels = { q: "queries (Q)", k: "keys (K)", v: "values (V)" };
  const buttons = {};
  for (const key of ["q", "k", "v"]) {
    const b = el("button", { class: "cb-btn cb-toggle-" + key });
    b.addEventListener("click", () => { model.set(key, !model.get(key)); model.save_changes(); draw(); });
    buttons[key] = b;
    toggles.append(b);
  }
  for (const [name, on] of Object.entries(PRESETS)) {
    const b = el("button", { class: "cb-btn cb-preset", text: name });
    b.dataset.preset = name;
    b.addEventListener("click", () => {
      for (const key of ["q", "k", "v"]) model.set(key, on.includes(key));
      model.save_changes();
      draw();
    });
    presets.append(b);
  }

  // how the count scales: n heads per layer, L layers (counts precomputed exactly in Python)
  const sc = model.get("data").scaling;
  const [nLabel, nInput, nOut] = slider("cb-heads", "heads per layer n", sc.max_heads, 1, drawScale);
  const [lLabel, lInput, lOut] = slider("cb-layers", "layers L", sc.max_layers, 2, drawScale);
  const scaleOut = el("div", { class: "cb-scale-out" });
  scale.append(el("div", { class: "cb-title", text: "Beyond one pair: how many terms?" }),
    el("div", { class: "cb-caption", html: sc.formula }), el("div", { class: "cb-row" }, [nLabel, lLabel]), scaleOut);

  function drawScale() {
    const n = nInput.value, L = lInput.value;
    nOut.textContent = n;
    lOut.textContent = L;
    const c = model.get("data").scaling.counts[`${n},${L}`];
    scale.dataset.n = n;
    scale.dataset.layers = L;
    scale.dataset.logits = c.logits[0];
    scaleOut.innerHTML = `${n} head${n === "1" ? "" : "s"} per layer, ${L} layer${L === "1" ? "" : "s"}: ` +
      `<b>${c.logits[1]}</b> logit terms (${c.virtual[1]} virtual head${c.virtual[0] === "1" ? "" : "s"}) and ` +
      `<b>${c.scores[1]}</b> attention-score terms.`;
  }

  function draw() {
    const data = model.get("data");
    const on = { q: model.get("q"), k: model.get("k"), v: model.get("v") };
    for (const key of ["q", "k", "v"]) {
      buttons[key].textContent = `${labels[key]}: ${on[key] ? "read H0" : "embeddings only"}`;
      buttons[key].classList.toggle("cb-on", on[key]);
    }
    const exists = (t) => t.needs.every((n) => on[n]);
    const present = data.terms.filter(exists);
    const virtual = present.filter((t) => t.id === "virtual").length;
    const logitTerms = present.filter((t) => t.kind === "logits").length;
    const scoreTerms = present.filter((t) => t.kind === "score").length;
    const config = ["q", "k", "v"].filter((k) => on[k]).join("");
    root.dataset.virtual = String(virtual);
    root.dataset.terms = present.map((t) => t.id).join(",");
    root.dataset.config = config;
    summary.textContent = `${logitTerms} terms in the logits, ${virtual} virtual head${virtual === 1 ? "" : "s"}; ` +
      `H1's attention score has ${scoreTerms} term${scoreTerms === 1 ? "" : "s"}.`;
    explain.innerHTML = data.configurations[config];

    table.replaceChildren();
    // the column names head the table, and label each cell where the table is laid out as
    // one card per term (explainers.css, on a narrow screen)
    const columns = ["term", "formula (row vectors)", "what it means", `size in ${data.model_name}`];
    table.append(el("tr", { class: "cb-terms-head" }, columns.map((t) => el("th", { text: t }))));
    for (const t of data.terms) {
      const row = el("tr", { class: exists(t) ? "cb-present" : "cb-absent", "data-term": t.id });
      const size = data.sizes[t.id];
      row.append(el("td", { text: t.name }), el("td", { class: "cb-formula", html: t.formula, "data-label": columns[1] }),
        el("td", { html: t.what }), el("td", { html: size === undefined ? "" : size, "data-label": columns[3] }));
      table.append(row);
    }
    note.innerHTML = data.note;
  }
  for (const key of ["q", "k", "v", "data"]) model.on("change:" + key, draw);
  draw();
  drawScale();
}

export default { render };
