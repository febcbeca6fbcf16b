// One problem's progress line: whether its checks have passed in this notebook, "n of N
// done" for the whole set, and the checks still open. The counts come from the kernel (the
// checks that passed there), never from clicks. With no kernel (the static site, or a saved
// notebook opened without running it) the counts saved with the page are the build's, not
// the reader's, so the line says that progress is tracked when the notebook runs instead.

import { el } from "./dom.js";

function render({ model, el: root }) {
  root.classList.add("cb-progress", "cb-widget");
  const mine = el("span", { class: "cb-mine" });
  const counter = el("span", { class: "cb-counter" });
  const open = el("span", { class: "cb-open" });
  root.append(mine, counter, open);
  let live = false;
  const code = (id) => el("code", { text: id });
  function draw() {
    const me = model.get("problem");
    const problems = model.get("problems");
    const stillOpen = model.get("still_open") || {};
    root.dataset.live = live ? "1" : "0";
    open.replaceChildren();
    if (!live) {
      mine.textContent = "Problem " + me + ":";
      counter.textContent = "progress is tracked when this notebook runs: a problem counts as done " +
        "once its checks pass in your kernel.";
      root.classList.remove("cb-all-passed");
      delete root.dataset.count;
      return;
    }
    const done = problems.filter((p) => !(p in stillOpen));
    const myOpen = stillOpen[me] || [];
    mine.textContent = myOpen.length ? "Problem " + me + ": not done yet" : "Problem " + me + ": \u2714 checks passed";
    counter.textContent = `${done.length} of ${problems.length} done`;
    root.dataset.count = String(done.length);
    root.classList.toggle("cb-all-passed", done.length === problems.length);
    const rest = problems.filter((p) => p in stillOpen);
    if (rest.length) {
      open.append("still open:");
      rest.forEach((p, i) => {
        open.append((i ? "; " : " ") + "problem " + p + " (");
        stillOpen[p].forEach((id, j) => { if (j) open.append(", "); open.append(code(id)); });
        open.append(")");
      });
    }
  }
  model.on("change:done", draw);
  model.on("change:still_open", draw);
  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "live" && !live) { live = true; draw(); }
  });
  draw();
  try { model.send({ type: "hello" }); } catch (e) { /* no kernel to greet */ }
}

export default { render };
