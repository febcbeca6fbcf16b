// explore(render, **controls): the controls and the figure, drawn in the page (anywidget).
// `frames` holds the figure drawn in Python for every state of the static grid, so the
// widget responds with no kernel. If a kernel answers the greeting, every control steps
// through all its values and each move asks Python (`selection`) for the figure (`live`).

import { el } from "./dom.js";

function render({ model, el: root }) {
  root.classList.add("circuitbook-explore", "cb-explore", "cb-widget", "cb-box");
  const controls = model.get("controls");
  let live = false;
  const selection = [...model.get("selection")];
  const row = el("div", { class: "cb-explore-controls" });
  const figure = el("img", { class: "cb-explore-figure" });
  const status = el("div", { class: "cb-explore-status" });
  const printed = el("pre", { class: "cb-explore-text" });
  const note = el("div", { class: "cb-explore-note" });
  root.append(row, figure, status, printed, note);

  // the indices a control can take here: its static grid, or every value when live
  const choices = (c) => (live ? c.labels.map((_, i) => i) : c.grid);

  const inputs = controls.map((c, k) => {
    const id = `cb-explore-${Math.random().toString(36).slice(2)}-${k}`;
    const box = el("label", { class: "cb-explore-control", "data-name": c.name, for: id });
    const name = el("span", { class: "cb-explore-name", text: c.name });
    const readout = el("output", { class: "cb-explore-readout" });
    const input = c.slider
      ? el("input", { type: "range", id, class: "cb-explore-input", min: "0", step: "1" })
      : el("select", { id, class: "cb-explore-input" });
    box.append(name, input, readout);
    row.append(box);
    return { c, box, input, readout };
  });

  function layout() {  // (re)build each control's range or options for the current mode
    for (const [k, { c, input }] of inputs.entries()) {
      const idx = choices(c);
      if (c.slider) {
        input.max = String(idx.length - 1);
        input.value = String(Math.max(0, idx.indexOf(selection[k])));
      } else {
        input.replaceChildren(...idx.map((i) => el("option", { value: String(i), text: c.labels[i] })));
        input.value = String(selection[k]);
      }
    }
    const coarse = controls.filter((c) => c.grid.length < c.labels.length);
    note.hidden = live || coarse.length === 0;
    note.textContent = "Without a kernel this figure steps more coarsely than in a notebook: " +
      coarse.map((c) => `${c.name} takes ${c.grid.length} of its ${c.labels.length} values`).join(", ") +
      ". Run the notebook to draw every value.";
  }

  function picked(k) {  // the value index the control's input shows now
    const { c, input } = inputs[k];
    const i = Number(input.value);
    return c.slider ? choices(c)[i] : i;
  }

  function show() {
    const key = selection.join(",");
    const values = {};
    for (const [k, { c, box, readout }] of inputs.entries()) {
      readout.textContent = c.labels[selection[k]];
      box.dataset.label = c.labels[selection[k]];
      values[c.name] = c.labels[selection[k]];
    }
    root.dataset.values = JSON.stringify(values);
    root.dataset.key = key;
    const current = model.get("live");
    const frame = live && current && current.key === key ? current : model.get("frames")[key];
    if (frame && frame.error) {
      status.textContent = frame.error;
      status.className = "cb-explore-status cb-explore-error";
      return;
    }
    status.className = "cb-explore-status";
    if (!frame) {  // only reachable live: Python is drawing this state
      status.textContent = "drawing\u2026";
      root.dataset.shown = "";
      return;
    }
    status.textContent = "";
    figure.src = frame.src;
    figure.alt = frame.label;
    figure.title = frame.label;
    figure.dataset.key = key;
    printed.textContent = frame.text || "";
    printed.hidden = !frame.text;
    root.dataset.shown = key;
    root.dataset.label = frame.label;
  }

  for (const [k, { input }] of inputs.entries()) {
    input.addEventListener("input", () => { selection[k] = picked(k); show(); });
    input.addEventListener("change", () => {
      selection[k] = picked(k);
      show();
      model.set("selection", [...selection]);
      model.save_changes();  // with no kernel there is no one to tell, and nothing happens
    });
  }
  model.on("change:live", show);
  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "live" && !live) { live = true; root.dataset.live = "1"; layout(); show(); }
  });
  layout();
  show();
  model.send({ type: "hello" });
}

export default { render };
