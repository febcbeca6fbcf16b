"""How long does one 64-token forward pass of toy-2l take in the page (headless Chromium)?

The induction lab recomputes on every click (``circuitbook/widgets/attn_only_forward.js``),
so this is the latency a reader feels. A blank page served from 127.0.0.1 loads the forward
module and the weights as the site ships them (``circuitbook.widgets.lab_export``); the
script warms the JIT, then prints the median and the fastest of many passes, with and
without the path expansion the lab also computes. No network: the page is local and any
other request is refused. Expect under 10 ms a pass on a quiet core; on a shared, loaded
machine the numbers are upper bounds. Run: ``python benchmarks/bench_browser_forward.py [runs]``.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import sys
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlsplit

from circuitbook.widgets.lab import FORWARD_JS
from circuitbook.widgets.lab_export import write_site_files

PAGE = """<!doctype html><meta charset="utf-8"><script src="toy-2l.js"></script>
<script type="module">
import { loadModel, forward, pathTerms } from "./attn_only_forward.js";
window.bench = (runs) => {
  const net = loadModel(window.cbLabModels["toy-2l"]);
  const tokens = Array.from({ length: 64 }, (_, i) => (i * 37 + 11) % 64);
  const time = (fn) => { const t = performance.now(); fn(); return performance.now() - t; };
  for (let i = 0; i < 20; i++) forward(net, tokens);  // warm the JIT
  const fw = [], paths = [];
  for (let i = 0; i < runs; i++) {
    fw.push(time(() => forward(net, tokens)));
    const run = forward(net, tokens);
    paths.push(time(() => pathTerms(net, run, 63)));
  }
  const stats = (xs) => { xs.sort((a, b) => a - b); return [xs[Math.floor(xs.length / 2)], xs[0]]; };
  return { forward: stats(fw), paths: stats(paths) };
};
window.ready = true;
</script>"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the printed numbers alone
        pass


def main() -> None:
    from playwright.sync_api import sync_playwright

    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_site_files(folder)
        (folder / "attn_only_forward.js").write_text(FORWARD_JS.read_text())
        (folder / "index.html").write_text(PAGE)
        handler = functools.partial(_Quiet, directory=tmp)
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                        args=["--no-sandbox", "--disable-gpu"], headless=True)
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if urlsplit(r.request.url).hostname == "127.0.0.1"
                       else r.abort())
            page.goto(f"http://127.0.0.1:{httpd.server_address[1]}/index.html")
            page.wait_for_function("() => window.ready === true")
            result = page.evaluate("(runs) => window.bench(runs)", runs)
            browser.close()
        httpd.shutdown()
    print(f"toy-2l, 64 tokens, {runs} passes in headless Chromium (median, fastest):")
    print(f"  forward pass            {result['forward'][0]:7.2f} ms  {result['forward'][1]:7.2f} ms")
    print(f"  path expansion (1 pos)  {result['paths'][0]:7.2f} ms  {result['paths'][1]:7.2f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
