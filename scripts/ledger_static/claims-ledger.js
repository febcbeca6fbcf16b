/* The claims ledger (scripts/sphinx_ledger.py): filter by chapter and kind, search, sort by
   column and page through the rows, on the static site with no kernel. Plain JavaScript, no
   dependencies. Without it the page shows the whole table, as the build wrote it. */
(function () {
  "use strict";
  var PAGE = 50;  // rows shown at a time: a phone's page stays a few screens, not 600 cards
  var SORTABLE = ["chapter", "kind", "statement", "value"];
  var uid = 0;

  function text(el) { return el ? el.textContent.replace(/\s+/g, " ").trim() : ""; }

  function element(tag, attrs, children) {
    var el = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") el.textContent = attrs[k];
      else el.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) { el.appendChild(c); });
    return el;
  }

  function number(s) {  // the value's leading number, or NaN (sorted after the numbers)
    var m = /^[-+\u2212]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?/i.exec(s);
    return m ? parseFloat(m[0].replace("\u2212", "-")) : NaN;
  }

  function init(root) {
    var table = root.querySelector("table.ledger-table");
    if (!table || !table.tBodies.length || root.dataset.ledgerReady) return;
    root.dataset.ledgerReady = "1";
    var tbody = table.tBodies[0];
    var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
    var columns = headers.map(function (th) { return text(th); });
    var chapterOrder = {}, chapters = [], kinds = [];
    var rows = Array.prototype.slice.call(tbody.rows).map(function (tr, i) {
      var cell = function (name) { return tr.cells[columns.indexOf(name)]; };
      var link = cell("chapter").querySelector("a, .std-doc");
      var row = { tr: tr, index: i, chapter: text(link || cell("chapter")), kind: text(cell("kind")),
                  statement: text(cell("statement")), value: text(cell("value")),
                  search: text(tr).toLowerCase() };
      row.number = number(row.value);
      if (!(row.chapter in chapterOrder)) { chapterOrder[row.chapter] = chapters.length; chapters.push(row.chapter); }
      if (kinds.indexOf(row.kind) < 0) kinds.push(row.kind);
      return row;
    });
    var state = { chapter: "", kind: "", query: "", sort: null, dir: 1, limit: PAGE };
    var id = "ledger-" + (++uid);

    // ---- the controls, above the table
    function select(name, label, all, values) {
      var s = element("select", { id: id + "-" + name, name: name });
      s.appendChild(element("option", { value: "", text: all }));
      values.forEach(function (v) { s.appendChild(element("option", { value: v, text: v })); });
      return element("div", { "class": "ledger-control" }, [element("label", { "for": s.id, text: label }), s]);
    }
    var chapterBox = select("chapter", "Chapter", "All chapters", chapters);
    var kindBox = select("kind", "Kind", "All kinds", kinds);
    var search = element("input", { id: id + "-q", type: "search", name: "q", autocomplete: "off",
                                    placeholder: "words in any column" });
    var searchBox = element("div", { "class": "ledger-control ledger-search" },
                            [element("label", { "for": search.id, text: "Search" }), search]);
    var reset = element("button", { type: "button", "class": "ledger-button", text: "Clear" });
    var controls = element("form", { "class": "ledger-controls", role: "search", "aria-label": "Filter the ledger" },
                           [chapterBox, kindBox, searchBox, element("div", { "class": "ledger-control" }, [reset])]);
    controls.addEventListener("submit", function (e) { e.preventDefault(); });
    var status = element("p", { "class": "ledger-status", role: "status", "aria-live": "polite" });
    var wrapper = table.closest(".pst-scrollable-table-container, .table-wrapper") || table;
    wrapper.parentNode.insertBefore(controls, wrapper);
    wrapper.parentNode.insertBefore(status, wrapper);
    var more = element("button", { type: "button", "class": "ledger-button" });
    var all = element("button", { type: "button", "class": "ledger-button" });
    var pager = element("div", { "class": "ledger-pager" }, [more, all]);
    wrapper.parentNode.insertBefore(pager, wrapper.nextSibling);
    table.id = table.id || id + "-table";
    status.setAttribute("aria-controls", table.id);

    // ---- sorting: a button in each sortable header, aria-sort on the header
    headers.forEach(function (th, k) {
      var name = columns[k];
      if (SORTABLE.indexOf(name) < 0) return;
      var b = element("button", { type: "button", "class": "ledger-sort", "data-column": name });
      b.appendChild(element("span", { text: th.textContent.trim() }));
      b.appendChild(element("span", { "class": "ledger-arrow", "aria-hidden": "true" }));
      th.textContent = "";
      th.appendChild(b);
      th.setAttribute("aria-sort", "none");
      b.addEventListener("click", function () {
        if (state.sort === name) state.dir = -state.dir; else { state.sort = name; state.dir = 1; }
        update(false);
      });
    });

    function compare(a, b) {
      var c = 0, s = state.sort;
      if (s === "chapter") c = chapterOrder[a.chapter] - chapterOrder[b.chapter];
      else if (s === "value") {
        var na = isNaN(a.number), nb = isNaN(b.number);
        if (na !== nb) return na ? 1 : -1;  // numbers first, whichever the direction
        c = na ? a.value.localeCompare(b.value) : a.number - b.number;
      } else if (s) c = a[s].localeCompare(b[s], undefined, { sensitivity: "base", numeric: true });
      return state.dir * c || a.index - b.index;
    }

    function update(resetLimit) {
      if (resetLimit) state.limit = PAGE;
      var words = state.query.toLowerCase().split(/\s+/).filter(Boolean);
      var shown = rows.filter(function (r) {
        return (!state.chapter || r.chapter === state.chapter) && (!state.kind || r.kind === state.kind) &&
               words.every(function (w) { return r.search.indexOf(w) >= 0; });
      });
      var order = state.sort ? shown.slice().sort(compare) : shown, matched = new Set(shown);
      var visible = 0, frag = document.createDocumentFragment();
      var showing = new Set();
      order.forEach(function (r) { if (visible < state.limit) { showing.add(r); visible++; } frag.appendChild(r.tr); });
      rows.forEach(function (r) { if (!matched.has(r)) frag.appendChild(r.tr); });
      tbody.appendChild(frag);
      rows.forEach(function (r) { r.tr.hidden = !showing.has(r); });
      headers.forEach(function (th, k) {
        if (!th.hasAttribute("aria-sort")) return;
        var on = state.sort === columns[k];
        th.setAttribute("aria-sort", on ? (state.dir > 0 ? "ascending" : "descending") : "none");
        var arrow = th.querySelector(".ledger-arrow");
        if (arrow) arrow.textContent = on ? (state.dir > 0 ? " \u25b2" : " \u25bc") : "";
      });
      status.textContent = shown.length === rows.length
        ? (visible < shown.length ? "Showing " + visible + " of all " + rows.length + " statements."
                                  : "Showing all " + rows.length + " statements.")
        : (shown.length === 0 ? "No statement matches (of " + rows.length + ")."
           : "Showing " + visible + " of " + shown.length + " matching statements (of " + rows.length + ").");
      var left = shown.length - visible;
      pager.hidden = left <= 0;
      more.textContent = "Show " + Math.min(PAGE, left) + " more";
      all.textContent = "Show all " + shown.length;
    }

    chapterBox.querySelector("select").addEventListener("change", function (e) { state.chapter = e.target.value; update(true); });
    kindBox.querySelector("select").addEventListener("change", function (e) { state.kind = e.target.value; update(true); });
    search.addEventListener("input", function () { state.query = search.value; update(true); });
    reset.addEventListener("click", function () {
      state.chapter = state.kind = state.query = "";
      chapterBox.querySelector("select").value = kindBox.querySelector("select").value = search.value = "";
      update(true);
    });
    more.addEventListener("click", function () { state.limit += PAGE; update(false); });
    all.addEventListener("click", function () { state.limit = Infinity; update(false); });
    root.classList.add("ledger-enhanced");
    update(true);
  }

  function start() { document.querySelectorAll(".claims-ledger").forEach(init); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
