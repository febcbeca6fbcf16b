// The small DOM helpers every widget front end builds with (one copy: each widget imports
// them, and circuitbook.widgets.frontend.esm inlines this module into the widget's single
// ES module, as anywidget needs). Nothing here touches the document until it is called, so
// the module imports in Node for the tests.

// An HTML element: el("div", {class: "cb-row", text: "..."}, [children]). `html` sets
// innerHTML and is for trusted markup only (typeset by the book's own Python).
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k === "html") node.innerHTML = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

const SVG = "http://www.w3.org/2000/svg";

// Whether the page is dark: the book's site (pydata-sphinx-theme's data-theme on the root) or
// JupyterLab (data-jp-theme-light on the body); light where neither says (as circuitbook.viz's
// figures decide).
export function darkPage() {
  const root = document.documentElement, body = document.body;
  if (root.dataset.theme) return root.dataset.theme === "dark";
  if (body && body.dataset.jpThemeLight) return body.dataset.jpThemeLight === "false";
  return false;
}

// Call `redraw` whenever the page changes theme (the attributes darkPage reads), until `node`,
// once in the document, has left it (a re-run output: its closures are let go). For what a
// widget paints itself (a canvas), which CSS cannot recolour.
export function onThemeChange(node, redraw) {
  let attached = false;
  const watcher = new MutationObserver(() => {
    if (node.isConnected) attached = true;
    else if (attached) return watcher.disconnect();
    redraw();
  });
  watcher.observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
  if (document.body) watcher.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light"] });
  return watcher;
}

// An SVG element: svg("rect", {x: "1", ...}, [children]); `text` sets its text content.
export function svg(tag, attrs = {}, children = []) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, String(v));
  }
  for (const c of children) node.append(c);
  return node;
}

// The width, as a percentage of its track, of a bar for `value`: |value| / full, capped at
// 100. `full` is the value drawn full width: 1 for probabilities (a 0-1 scale, so 0.04 is
// drawn as 4%), or the largest |value| of the rows for quantities with no natural scale.
export function barWidth(value, full) {
  if (!(full > 0)) throw new Error(`barWidth: the full-width value must be positive, got ${full}`);
  return Math.min(100, (100 * Math.abs(value)) / full);
}

// A column of labelled horizontal bars: rows [label, value, marked]. Options: digits of the
// value shown, signed (a "+" on positive values), full (the value drawn full width; default
// the largest |value|, see barWidth). Negative values are drawn red (.cb-neg).
export function bars(rows, { digits = 2, signed = false, full = null } = {}) {
  const top = full ?? Math.max(1e-9, ...rows.map((r) => Math.abs(r[1])));
  const box = el("div", { class: "cb-bars" });
  for (const [label, value, mark] of rows) {
    const bar = el("div", { class: "cb-bar" + (value < 0 ? " cb-neg" : "") });
    bar.style.width = `${barWidth(value, top)}%`;
    const shown = (signed && value > 0 ? "+" : "") + value.toFixed(digits);
    box.append(el("div", { class: "cb-bar-row" + (mark ? " cb-mark" : "") }, [
      el("span", { class: "cb-bar-label", text: label }),
      el("div", { class: "cb-bar-track" }, [bar]),
      el("span", { class: "cb-bar-value", text: shown }),
    ]));
  }
  return box;
}
