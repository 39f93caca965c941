"""Helpers for the no-install tests (the web page, Pyodide, JupyterLite).

``need`` skips a test whose tools are missing, or fails it where CI sets
MHA_LISTS_REQUIRE_BROWSER=1. ``run_in_pyodide`` runs Python code under Pyodide in Node.
``cli_tables`` and ``page_parts`` read the CLI's text and the page's HTML into the same
plain lists: a table is ``(caption, column_labels, rows)`` with rows
``[(row_label, [cell, ...]), ...]``, every cell the text shown, so two equal tables show
exactly the same numbers.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
REQUIRED = os.environ.get("MHA_LISTS_REQUIRE_BROWSER") == "1"


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
        elif tag in ("caption", "th", "td", "h2", "h3", "li"):
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
        if tag == "caption":
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
