"""Helpers for the no-install tests (the web page, Pyodide, JupyterLite).

``need`` skips a test whose tools are missing, or fails it where CI sets
MHA_LISTS_REQUIRE_BROWSER=1. ``run_in_pyodide`` runs Python code under Pyodide in Node.
``serve`` serves a folder on 127.0.0.1, ``serve_as_the_readme_does`` with
``python -m http.server -d FOLDER``; ``chromium`` opens Debian's headless chromium through
Playwright with every request recorded and every one that would leave the serving host aborted:
127.0.0.1, or a school server's name (``host="classroom.lan"``, resolved to 127.0.0.1), which
makes the page an insecure origin, as a lab's server reached over plain http is.
``cli_tables`` and ``page_parts`` read the CLI's text and the page's HTML into the same
plain lists: a table is ``(caption, column_labels, rows)`` with rows
``[(row_label, [cell, ...]), ...]``, every cell the text shown, so two equal tables show
exactly the same numbers.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
from html.parser import HTMLParser
from typing import Iterator
from urllib.parse import urlsplit

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
REQUIRED = os.environ.get("MHA_LISTS_REQUIRE_BROWSER") == "1"
CHROMIUM = os.environ.get("MHA_LISTS_CHROMIUM", "/usr/bin/chromium")
# The flags of a locked-down classroom machine: nothing but the page talks to the network.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def need(available: bool, reason: str) -> None:
    """Skip with the reason, or fail where MHA_LISTS_REQUIRE_BROWSER=1 says these tests must run."""
    if available:
        return
    if REQUIRED:
        pytest.fail(f"{reason}, and MHA_LISTS_REQUIRE_BROWSER=1 requires this test to run")
    pytest.skip(reason)


def need_node_and_pyodide() -> None:
    need(shutil.which("node") is not None, "node is not installed")
    need((PYODIDE_DIR / "pyodide.mjs").exists(),
         f"the pyodide npm package is not installed (run `npm ci` in {ROOT})")


def run_in_pyodide(folder: pathlib.Path, code: str) -> str:
    """What ``code`` prints under Pyodide in Node, with folder's mha_lists (and notebooks) in its file system."""
    result = subprocess.run(["node", str(ROOT / "tests" / "pyodide_run.mjs"), str(folder)], input=code,
                            cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                      ".json": "application/json", ".zip": "application/zip", ".whl": "application/zip"}

    def log_message(self, *args):  # keep pytest's output clean
        pass


@contextlib.contextmanager
def serve(folder: pathlib.Path) -> Iterator[str]:
    """Serve folder on 127.0.0.1 (a free port); yield its URL, ending in "/"."""
    handler = functools.partial(_Handler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def serve_as_the_readme_does(folder: pathlib.Path) -> Iterator[int]:
    """``python -m http.server -d folder``, the README's command (its MIME types, its handler), bound to
    127.0.0.1 on a free port; yield the port."""
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind", "127.0.0.1",
                               "--directory", str(folder)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 40123 (http://...) ..."
        port = re.search(r" port (\d+) ", line)
        assert port, f"python -m http.server said {line!r}"
        yield int(port.group(1))
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def chromium(profile: pathlib.Path, width: int = 1600, height: int = 1000, host: str = "127.0.0.1"):
    """Headless Debian chromium (Playwright), a fresh profile; ``context.requests`` records every URL
    asked for, ``context.blocked`` those not on host, which are aborted: the outside is unreachable.
    Any host but 127.0.0.1 resolves to 127.0.0.1 (``--host-resolver-rules``) and only it answers."""
    need(pathlib.Path(CHROMIUM).exists(), f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, 'Playwright for Python is not installed (pip install -e ".[browser]")')
    flags = CHROMIUM_FLAGS if host == "127.0.0.1" else [*CHROMIUM_FLAGS, f"--host-resolver-rules=MAP {host} 127.0.0.1"]
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=flags,
            viewport={"width": width, "height": height})
        context.requests, context.blocked = [], []

        def route(request_route):
            url = request_route.request.url
            context.requests.append(url)
            if urlsplit(url).hostname == host:
                request_route.continue_()
            else:
                context.blocked.append(url)
                request_route.abort()

        context.route("**/*", route)
        try:
            yield context
        finally:
            context.close()


TITLE = re.compile(r"^\S.* \(\d+x\d+\)$")


def cli_tables(text: str) -> list:
    """Every table of ``python -m mha_lists`` output: a title line "name (NxM)", a header, N rows."""
    lines = text.splitlines()
    tables = []
    i = 0
    while i < len(lines):
        if TITLE.match(lines[i]):
            n = int(re.search(r"\((\d+)x\d+\)$", lines[i]).group(1))
            cols = lines[i + 1].split()
            rows = []
            for line in lines[i + 2:i + 2 + n]:
                label, *cells = line.split()
                rows.append((label, cells))
            tables.append((lines[i], cols, rows))
            i += 2 + n
        else:
            i += 1
    return tables


def cli_headings(text: str) -> list:
    """The section and step lines: "=== Head 0 ===" as "Head 0", "Step 3. ..." as it is."""
    out = []
    for line in text.splitlines():
        if line.startswith("=== "):
            out.append(line.strip("= "))
        elif line.startswith("Step "):
            out.append(line)
    return out


class _PageReader(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.headings, self.summary = [], [], []
        self._text = None
        self._where = None
        self._row = None
        self._part = None

    def handle_starttag(self, tag, attrs):
        classes = dict(attrs).get("class", "") or ""
        if tag == "figure" and "matrix" in classes.split():
            self.tables.append(["", [], []])
        elif tag in ("figcaption", "th", "td", "h2", "h3", "li"):
            self._text = []
            self._where = tag
        elif tag in ("thead", "tbody"):
            self._part = tag

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if self._text is None or tag != self._where:
            return
        text = " ".join("".join(self._text).split())
        self._text = None
        if tag == "figcaption":
            self.tables[-1][0] = text
        elif tag == "th" and self._part == "thead":
            self.tables[-1][1].append(text)
        elif tag == "th":
            self._row = (text, [])
            self.tables[-1][2].append(self._row)
        elif tag == "td":
            self._row[1].append(text)
        elif tag in ("h2", "h3"):
            self.headings.append(text)
        elif tag == "li":
            self.summary.append(text)


def page_parts(html_text: str):
    """(tables, headings, summary lines) of a page or of ``walkthrough_html``, in page order."""
    reader = _PageReader()
    reader.feed(html_text)
    tables = [(caption, cols[1:] if cols and cols[0] == "" else cols, rows) for caption, cols, rows in reader.tables]
    return tables, reader.headings, reader.summary
