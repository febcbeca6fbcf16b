// The composition builder (anywidget front end): toggle whether head H1's queries, keys and
// values read head H0's output, and see which path-expansion terms exist. The term list is
// derived here from the three toggles (the logic is the point of the explainer); the sizes of
// the terms for a real model come precomputed from Python in the `data` trait.

function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.appendChild(c);
  return node;
}

// Every term that can appear, with the toggles it needs, in the row-vector convention of
// TransformerLens (the paper writes the same products right to left: W_U W_OV^{H1} W_OV^{H0} W_E).
// "E" is the token embedding path; A^{H} \u00b7 M means "mix positions by A^H, map each by M".
const TERMS = [
  { id: "direct", kind: "logits", needs: [], name: "direct path", formula: "W_E W_U",
    what: "bigram statistics: the embedding read straight out" },
  { id: "h0_ov", kind: "logits", needs: [], name: "H0's OV path", formula: "A^{H0} \u00b7 W_E W_OV^{H0} W_U",
    what: "H0 moves token information between positions" },
  { id: "h1_ov", kind: "logits", needs: [], name: "H1's OV path", formula: "A^{H1} \u00b7 W_E W_OV^{H1} W_U",
    what: "H1 moves token information between positions" },
  { id: "virtual", kind: "logits", needs: ["v"], name: "virtual head H1\u2218H0",
    formula: "A^{H1} A^{H0} \u00b7 W_E W_OV^{H0} W_OV^{H1} W_U",
    what: "V-composition: H1 moves what H0 already moved; a new head with its own OV and pattern" },
  { id: "qk_direct", kind: "score", needs: [], name: "H1 score: tokens \u00b7 tokens", formula: "E W_QK^{H1} E^T",
    what: "H1 attends by comparing raw tokens" },
  { id: "q_comp", kind: "score", needs: ["q"], name: "H1 score: Q-composition",
    formula: "(A^{H0} E W_OV^{H0}) W_QK^{H1} E^T", what: "H1's query carries what H0 found" },
  { id: "k_comp", kind: "score", needs: ["k"], name: "H1 score: K-composition",
    formula: "E W_QK^{H1} (A^{H0} E W_OV^{H0})^T", what: "H1's keys carry what H0 found (induction: 'my left neighbour was X')" },
  { id: "qk_comp", kind: "score", needs: ["q", "k"], name: "H1 score: Q- and K-composition",
    formula: "(A^{H0} E W_OV^{H0}) W_QK^{H1} (A^{H0} E W_OV^{H0})^T", what: "both sides carry H0's output" },
];

const PRESETS = { none: [], "induction: K-composition only": ["k"], "all three": ["q", "k", "v"] };

function render({ model, el: root }) {
  root.classList.add("cb-builder");
  const toggles = el("div", { class: "cb-row" });
  const presets = el("div", { class: "cb-row" });
  const summary = el("div", { class: "cb-summary" });
  const table = el("table", { class: "cb-terms" });
  const note = el("div", { class: "cb-caption" });
  root.append(el("div", { class: "cb-title", text: "Which of H1's inputs read H0's output?" }), toggles,
    el("div", { class: "cb-caption", text: "Presets:" }), presets, summary, table, note);

  const labels = { q: "queries (Q)", k: "keys (K)", v: "values (V)" };
  const buttons = {};
  for (const key of ["q", "k", "v"]) {
    const b = el("button", { class: "cb-btn cb-toggle-" + key });
    b.addEventListener("click", () => { model.set(key, !model.get(key)); model.save_changes(); draw(); });
    buttons[key] = b;
    toggles.appendChild(b);
  }
  for (const [name, on] of Object.entries(PRESETS)) {
    const b = el("button", { class: "cb-btn cb-preset", text: name });
    b.dataset.preset = name;
    b.addEventListener("click", () => {
      for (const key of ["q", "k", "v"]) model.set(key, on.includes(key));
      model.save_changes();
      draw();
    });
    presets.appendChild(b);
  }

  function draw() {
    const data = model.get("data");
    const on = { q: model.get("q"), k: model.get("k"), v: model.get("v") };
    for (const key of ["q", "k", "v"]) {
      buttons[key].textContent = `${labels[key]}: ${on[key] ? "read H0" : "embeddings only"}`;
      buttons[key].classList.toggle("cb-on", on[key]);
    }
    const exists = (t) => t.needs.every((n) => on[n]);
    const present = TERMS.filter(exists);
    const virtual = present.filter((t) => t.id === "virtual").length;
    const logitTerms = present.filter((t) => t.kind === "logits").length;
    const scoreTerms = present.filter((t) => t.kind === "score").length;
    root.dataset.virtual = String(virtual);
    root.dataset.terms = present.map((t) => t.id).join(",");
    summary.textContent = `${logitTerms} terms in the logits, ${virtual} virtual head${virtual === 1 ? "" : "s"}; ` +
      `H1's attention score has ${scoreTerms} term${scoreTerms === 1 ? "" : "s"}.`;

    table.replaceChildren();
    const head = el("tr", {}, ["term", "formula (row vectors)", "what it means",
      `size in ${data.model_name}`].map((t) => el("th", { text: t })));
    table.appendChild(head);
    for (const t of TERMS) {
      const row = el("tr", { class: exists(t) ? "cb-present" : "cb-absent" });
      row.dataset.term = t.id;
      const size = data.sizes[t.id];
      row.append(el("td", { text: t.name }), el("td", { class: "cb-formula", text: t.formula }),
        el("td", { text: t.what }), el("td", { text: size === undefined ? "" : size }));
      table.appendChild(row);
    }
    note.textContent = data.note;
  }
  for (const key of ["q", "k", "v", "data"]) model.on("change:" + key, draw);
  draw();
}

export default { render };
