() => {
  // The elements that stick out past the right edge of the viewport, outermost first, skipping
  // those clipped by a scrolling (or clipping) ancestor that itself fits: sideways scroll
  // inside a code cell or a table is fine, sideways scroll of the page is not.
  const vw = document.documentElement.clientWidth;
  const name = (el) => {
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    const cls = String(el.className && el.className.baseVal !== undefined ? el.className.baseVal : el.className)
      .trim().split(/\s+/).filter(Boolean).slice(0, 3);
    if (cls.length) s += '.' + cls.join('.');
    return s;
  };
  const path = (el) => {
    const parts = [];
    for (let a = el; a && a !== document.body && parts.length < 4; a = a.parentElement) parts.unshift(name(a));
    return parts.join(' > ');
  };
  const out = [];
  const reported = new Set();
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width || r.right <= vw + 1) continue;
    const cs = getComputedStyle(el);
    if (cs.position === 'fixed') continue;  // hidden elements still widen the page: not skipped
    let ok = false;
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      if (reported.has(a)) { ok = true; break; }
      const acs = getComputedStyle(a);
      if (a.tagName === 'DIALOG' && !a.open) { ok = true; break; }
      if (acs.position === 'fixed') { ok = true; break; }
      if (/(auto|scroll|hidden|clip)/.test(acs.overflowX) && a.getBoundingClientRect().right <= vw + 1) { ok = true; break; }
    }
    if (ok) continue;
    reported.add(el);
    out.push(`${path(el)}: right edge ${Math.round(r.right)} px > viewport ${vw} px` +
             (el.textContent ? ` ("${el.textContent.trim().slice(0, 50)}")` : ''));
  }
  return { scrollWidth: document.documentElement.scrollWidth, clientWidth: vw, elements: out.slice(0, 12) };
}
