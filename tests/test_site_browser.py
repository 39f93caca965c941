"""The web page in a real browser, and the module under Pyodide (CPython 3.14 on WebAssembly) in Node.

What these need, and where they get it (CI installs all of it, see .ci/run):
  - node, and `npm ci` at the repository root (the `pyodide` npm package, served locally);
  - Debian's chromium at /usr/bin/chromium (`apt-get install chromium`);
  - Playwright for Python (`pip install -e ".[browser]"`), driving that chromium; it never
    downloads a browser of its own.
Where one is missing each test skips and says which; with MHA_LISTS_REQUIRE_BROWSER=1 (set by
CI) the skip is a failure instead, so CI cannot pass without having run them.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
from urllib.parse import urlencode, urlsplit

import pytest

from mha_lists.tools.site import build_site, page_update
from no_install_helpers import (PYODIDE_DIR, ROOT, cli_headings, cli_tables, need, need_node_and_pyodide,
                                run_in_pyodide)

CHROMIUM = os.environ.get("MHA_LISTS_CHROMIUM", "/usr/bin/chromium")
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]

# Settings a teacher might share, none of them the default example's.
HIDDEN = {"seed": "7", "heads": "4", "causal": "1", "d_model": "12", "sentence": "<BOS> transformers like I <EOS>"}
HIDDEN_CLI = ["--seed", "7", "--heads", "4", "--causal", "--d-model", "12",
              "--sentence", "<BOS> transformers like I <EOS>"]


def cli(*args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT, capture_output=True,
                            text=True, encoding="utf-8", check=True)
    return result.stdout


# === CPython 3.14 on WebAssembly, in Node ===

PYODIDE_ARG_SETS = [
    [],
    ["--causal"],
    ["--heads", "4", "--seed", "7", "--digits", "6"],
    ["--d-model", "12", "--heads", "3", "--sentence", "<BOS> transformers like I <EOS>"],
    ["--heads", "3"],
    ["--sentence", "I like cats"],
]


RUN_CLI = """
import contextlib, io, json
from mha_lists.tools.cli import main

def run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:
            code = stop.code
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}

print(json.dumps({"version": "%d.%d.%d" % sys.version_info[:3], "runs": [run(a) for a in ARG_SETS]}))
"""


def test_the_cli_under_pyodide_prints_the_same_bytes_as_cpython():
    need_node_and_pyodide()
    code = f"ARG_SETS = {json.dumps(PYODIDE_ARG_SETS)}\n" + RUN_CLI
    report = json.loads(run_in_pyodide(ROOT, code))
    assert report["version"].startswith("3.14.")  # the engine behind the page: CPython 3.14 on WebAssembly
    for argv, run in zip(PYODIDE_ARG_SETS, report["runs"], strict=True):
        here = subprocess.run([sys.executable, "-m", "mha_lists", *argv], cwd=ROOT, capture_output=True,
                              text=True, encoding="utf-8")
        assert (run["code"], run["stdout"], run["stderr"]) == (here.returncode, here.stdout, here.stderr), argv


# === The page in headless Chromium ===

class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm",
                      ".json": "application/json", ".zip": "application/zip"}

    def log_message(self, *args):  # keep pytest's output clean
        pass


@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    """The site built with a local Pyodide (pyodide/ beside index.html), served on 127.0.0.1."""
    need_node_and_pyodide()
    site = tmp_path_factory.mktemp("site")
    build_site(site, "pyodide/")
    shutil.copytree(PYODIDE_DIR, site / "pyodide")
    handler = functools.partial(_Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """Headless Debian chromium through Playwright, fresh profile; every request recorded, none let out."""
    need(pathlib.Path(CHROMIUM).exists(), f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, 'Playwright for Python is not installed (pip install -e ".[browser]")')
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1600, "height": 1000})
        context.requests = []  # every URL any page asked for, in order

        def route(request_route):
            context.requests.append(request_route.request.url)
            if urlsplit(request_route.request.url).hostname == "127.0.0.1":
                request_route.continue_()
            else:
                request_route.abort()

        context.route("**/*", route)
        yield context
        context.close()


def open_page(context, url: str, state: str = "computed"):
    page = context.new_page()
    page.goto(url)
    page.wait_for_function(
        "['computed', 'error', 'failed'].includes(document.body.dataset.state)", timeout=180_000)
    assert page.evaluate("document.body.dataset.state") == state, page.inner_text("#status")
    return page


READ_PAGE = """() => {
  const text = (element) => element.textContent.split(/\\s+/).filter(Boolean).join(" ");
  const tables = [...document.querySelectorAll("#walkthrough figure.matrix")].map((figure) => [
    text(figure.querySelector("caption")),
    [...figure.querySelectorAll("thead th")].slice(1).map(text),
    [...figure.querySelectorAll("tbody tr")].map((tr) => [text(tr.querySelector("th")),
                                                         [...tr.querySelectorAll("td")].map(text)]),
  ]);
  const headings = [...document.querySelectorAll("#walkthrough h2, #walkthrough h3")].map(text);
  const summary = [...document.querySelectorAll("#walkthrough .summary li")].map(text);
  return {tables, headings, summary};
}"""


def assert_page_shows(page, cli_text: str) -> None:
    """Every table, heading and summary line on the page is the CLI's, character for character."""
    shown = page.evaluate(READ_PAGE)
    as_lists = [[caption, cols, [[label, cells] for label, cells in rows]]
                for caption, cols, rows in cli_tables(cli_text)]
    assert len(shown["tables"]) == len(as_lists) > 0
    for on_page, printed in zip(shown["tables"], as_lists):
        assert on_page == printed
    assert shown["headings"] == cli_headings(cli_text)
    assert shown["summary"] == cli_text.split("\n\n", 1)[0].splitlines()[1:]  # the lines above the first step


def assert_stayed_local(context) -> None:
    assert context.requests, "the browser recorded no request at all"
    away = [url for url in context.requests if urlsplit(url).hostname != "127.0.0.1"]
    assert away == [], f"requests left 127.0.0.1: {away}"


def test_the_page_computes_a_shared_link_in_the_browser_with_the_cli_numbers(site_url, browser_context):
    page = open_page(browser_context, site_url + "?" + urlencode(HIDDEN))
    assert_page_shows(page, cli(*HIDDEN_CLI))
    assert "CPython 3.14." in page.inner_text("#status")
    assert page.inner_text("#command") == (
        "python -m mha_lists --sentence '<BOS> transformers like I <EOS>' --seed 7 --heads 4 --d-model 12 --causal")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page.png"))
    page.screenshot(path=str(SCREENSHOTS / "page-full.png"), full_page=True)
    page.emulate_media(media="print")
    page.screenshot(path=str(SCREENSHOTS / "page-print.png"), full_page=True)
    page.close()
    assert_stayed_local(browser_context)


def test_a_changed_control_recomputes_and_updates_the_link(site_url, browser_context):
    page = open_page(browser_context, site_url)
    assert_page_shows(page, cli())
    page.check("#causal")
    page.wait_for_function("document.querySelector('#walkthrough').textContent.includes('mask = causal')")
    assert_page_shows(page, cli("--causal"))
    assert "causal=1" in page.url
    page.click("#backspace")  # drop <EOS>
    page.wait_for_function("document.querySelector('#walkthrough').textContent.includes('seq_len = 4')")
    assert_page_shows(page, cli("--causal", "--sentence", "<BOS> I like transformers"))
    page.click("a.example[href='?heads=8']")  # a "Try" link: the default example with 8 heads, no reload
    page.wait_for_function("document.querySelector('#walkthrough').textContent.includes('num_heads = 8')")
    assert_page_shows(page, cli("--heads", "8"))
    assert "heads=8" in page.url and "causal=0" in page.url
    page.close()
    assert_stayed_local(browser_context)


def test_bad_settings_show_the_library_message(site_url, browser_context):
    page = open_page(browser_context, site_url + "?heads=3", state="error")
    expected = json.loads(page_update("?heads=3"))["error"]
    assert "d_model 16 is not divisible by num_heads 3" in expected
    assert page.inner_text("#error") == expected
    assert page.is_hidden("#walkthrough") and page.is_hidden("#command-line")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page-error.png"))
    page.fill("#heads", "4")
    page.dispatch_event("#heads", "change")
    page.wait_for_function("document.body.dataset.state === 'computed'")
    assert_page_shows(page, cli("--heads", "4"))
    page.close()
    assert_stayed_local(browser_context)


def test_without_javascript_the_page_shows_the_default_example(site_url, browser_context):
    page = browser_context.new_page()
    page.route("**/*.js", lambda blocked: blocked.abort())  # page.js never runs: no Pyodide, no WebAssembly
    page.goto(site_url)
    assert page.evaluate("document.body.dataset.state") == "prerendered"
    assert_page_shows(page, cli())
    page.close()
    assert_stayed_local(browser_context)
