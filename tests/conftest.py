"""Fixtures shared by the suites that drive a browser (tests/browser, tests/lab), and their
per-test time limit.

- ``browser``: one headless Chromium for the whole session, the system's (``/usr/bin/chromium``;
  ``CHROMIUM`` overrides), driven by Playwright, which never downloads a browser here. A
  missing Chromium fails the test instead of skipping it: ``make test`` installs it, so a
  browser suite that skipped would pass without having looked at anything.
- ``serve``: serves a folder over HTTP on 127.0.0.1 (a quiet ``http.server`` on a free port)
  and returns its base URL; every server started in the session stops at its end.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: `make env` installs it")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: `apt-get install -y --no-install-recommends chromium` "
                    "(make test does this), or set CHROMIUM")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="session")
def serve():
    servers = []

    def start(directory: Path | str) -> str:
        handler = functools.partial(_QuietHandler, directory=str(directory))
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


# A browser or JupyterLab test waits on a page; one that waits forever (a promise that never
# settles: page.evaluate has no timeout) fails here with its stack after 15 minutes, three times
# the slowest such test (the JupyterLab problem set, about 5 minutes on 2 busy cores), instead of
# holding the run until CI's limit. Other tests keep pyproject's longer limit.
_TIGHT_TIMEOUT_S = 900


def pytest_collection_modifyitems(config, items):
    for item in items:
        suite = Path(str(item.fspath)).relative_to(Path(__file__).parent).parts[0]
        if suite in ("browser", "lab") and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(_TIGHT_TIMEOUT_S))
