// "Mark done" for one problem, and the "n of N done" counter shared by all problems of a set.
// State lives in three places so it persists wherever the notebook runs: the synced `done`
// trait (saved with the notebook's widget state and, with a kernel, in a progress file),
// and the browser's localStorage (the static site and Colab, where there is no saved state).

function render({ model, el }) {
  el.classList.add("cb-progress");
  const key = "circuitbook-progress:" + model.get("set_id");
  const button = document.createElement("button");
  const label = document.createElement("span");
  button.className = "cb-btn cb-mark";
  label.className = "cb-counter";
  el.append(button, label);

  function stored() {
    try { return JSON.parse(window.localStorage.getItem(key) || "[]"); } catch (e) { return []; }
  }
  function doneSet() {
    return new Set([...model.get("done"), ...stored()]);
  }
  function draw() {
    const done = doneSet();
    const me = model.get("problem");
    const mine = done.has(me);
    button.textContent = mine ? "\u2714 Done (click to undo)" : "Mark problem " + me + " done";
    button.classList.toggle("cb-on", mine);
    const total = model.get("problems").length;
    const count = model.get("problems").filter((p) => done.has(p)).length;
    label.textContent = `${count} of ${total} done`;
    el.dataset.count = String(count);
  }
  button.addEventListener("click", () => {
    const done = doneSet();
    const me = model.get("problem");
    if (done.has(me)) done.delete(me); else done.add(me);
    const list = [...done].sort();
    try { window.localStorage.setItem(key, JSON.stringify(list)); } catch (e) { /* private mode */ }
    model.set("done", list);
    model.save_changes();
    window.dispatchEvent(new CustomEvent(key));
  });
  // every tracker of the same set on the page redraws when any of them changes
  window.addEventListener(key, draw);
  model.on("change:done", draw);
  draw();
}

export default { render };
