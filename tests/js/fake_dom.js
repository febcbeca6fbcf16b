// The least of a browser page the widgets' pure parts touch, for Node: elements that hold
// their attributes, children, text and style; a document that makes them; an anywidget
// model with get/set/on/send. Not a DOM (no layout, no events beyond what a test fires by
// hand); a test that needs more belongs in tests/browser.

class FakeElement {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.attributes = {};
    this.children = [];
    this.style = {};
    this.dataset = {};
    this.className = "";
    this.textContent = "";
    this.listeners = {};
    const classes = new Set();
    this.classList = {
      add: (...names) => { names.forEach((n) => classes.add(n)); this.className = [...classes].join(" "); },
      remove: (...names) => { names.forEach((n) => classes.delete(n)); this.className = [...classes].join(" "); },
      toggle: (n, on = !classes.has(n)) => { if (on) classes.add(n); else classes.delete(n); this.className = [...classes].join(" "); },
      contains: (n) => classes.has(n),
    };
  }
  setAttribute(name, value) { this.attributes[name] = String(value); }
  getAttribute(name) { return this.attributes[name] ?? null; }
  append(...nodes) { this.children.push(...nodes); }
  replaceChildren(...nodes) { this.children = nodes; }
  addEventListener(type, fn) { (this.listeners[type] ||= []).push(fn); }
  // every element below this one (depth first) that has class `name`
  findAll(name) {
    const found = [];
    for (const c of this.children) {
      if (!(c instanceof FakeElement)) continue;
      if (c.className.split(" ").includes(name)) found.push(c);
      found.push(...c.findAll(name));
    }
    return found;
  }
}

// Installs globalThis.document and window; returns the document, whose `head.children`
// collects what a widget appends there (script tags).
export function installDocument({ contentRoot } = {}) {
  const document = {
    documentElement: { dataset: contentRoot === undefined ? {} : { content_root: contentRoot } },
    head: new FakeElement("head"),
    createElement: (tag) => new FakeElement(tag),
    createElementNS: (_ns, tag) => new FakeElement(tag),
  };
  globalThis.document = document;
  globalThis.window = {};
  return document;
}

export function removeDocument() {
  delete globalThis.document;
  delete globalThis.window;
}

// An anywidget model holding `traits`; `sent` collects what the front end sent the kernel.
export function fakeModel(traits) {
  const values = { ...traits }, handlers = {}, sent = [];
  return {
    sent,
    get: (k) => values[k],
    set: (k, v) => { values[k] = v; },
    save_changes: () => {},
    on: (event, fn) => { (handlers[event] ||= []).push(fn); },
    send: (msg) => sent.push(msg),
    // what the kernel does: set a trait and fire its change event
    kernelSets(k, v) { values[k] = v; (handlers[`change:${k}`] || []).forEach((fn) => fn()); },
  };
}

export { FakeElement };
