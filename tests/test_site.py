"""``python -m mha_lists.tools.site``: the page's settings, its pre-rendered numbers and the built files.

These need no browser: the pre-rendered page is read with html.parser. The page in a real
browser, computing in Pyodide, is tests/test_site_browser.py.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

from mha_lists import running_example
from mha_lists.tools.site import (
    MAX_D_MODEL,
    PYODIDE_URL,
    PYODIDE_VERSION,
    Settings,
    build_site,
    cli_command,
    page_update,
    parse_query,
    query_string,
    walkthrough_html,
)
from no_install_helpers import ROOT, cli_headings, cli_tables, page_parts


def cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", check=True).stdout


def assert_same_numbers(html_text: str, cli_text: str) -> None:
    tables, headings, summary = page_parts(html_text)
    assert tables == cli_tables(cli_text) and len(tables) > 0
    assert headings == cli_headings(cli_text)
    assert summary == cli_text.split("\n\n", 1)[0].splitlines()[1:]  # the lines above the first step


@pytest.mark.parametrize("settings, args", [
    (Settings(), ()),
    (Settings(seed=7, heads=4, causal=True), ("--seed", "7", "--heads", "4", "--causal")),
    (Settings(sentence="<BOS> transformers like I <EOS>", d_model=12, heads=3),
     ("--sentence", "<BOS> transformers like I <EOS>", "--d-model", "12", "--heads", "3")),
    (Settings(sentence="I", heads=1, d_model=2), ("--sentence", "I", "--heads", "1", "--d-model", "2")),
])
def test_the_walkthrough_shows_every_table_of_the_cli(settings, args):
    assert_same_numbers(walkthrough_html(settings), cli(*args))


def test_cli_command_prints_the_numbers_the_page_shows():
    settings = Settings(sentence="<BOS> like like I", seed=3, heads=8, causal=True)
    command = cli_command(settings)
    assert command == "python -m mha_lists --sentence '<BOS> like like I' --seed 3 --heads 8 --causal"
    args = ["--sentence", "<BOS> like like I", "--seed", "3", "--heads", "8", "--causal"]
    assert_same_numbers(walkthrough_html(settings), cli(*args))


def test_weights_are_a_heatmap_and_masked_scores_are_marked():
    page = walkthrough_html(Settings(causal=True))
    weights = re.findall(r'style="--w:([0-9.]+)" title="[^"]+ takes ([0-9.]+) of [^"]+&#x27;s value"', page)
    assert len(weights) == 2 * 5 * 5  # every weight of both heads carries its colour value
    assert all(0.0 <= float(w) <= 1.0 and abs(float(w) - float(shown)) < 6e-4 for w, shown in weights)
    assert page.count('<td class="masked">-inf</td>') == 2 * 10  # 10 future keys per head


def test_query_strings_round_trip():
    for settings in (Settings(), Settings(sentence="I like", seed=-5, heads=1, d_model=3, causal=True)):
        assert parse_query(query_string(settings)) == settings
    assert parse_query("") == Settings()
    assert parse_query("?seed=7&utm_source=x") == Settings(seed=7)
    assert parse_query("causal=on&sentence=I+like") == Settings(sentence="I like", causal=True)


@pytest.mark.parametrize("query, message", [
    ("?seed=abc", "parse_query: seed is 'abc'; it must be a whole number"),
    ("?heads=", "parse_query: heads is ''; it must be a whole number"),
    ("?causal=maybe", "parse_query: causal is 'maybe'; use 1 (on) or 0 (off)"),
    (f"?d_model={MAX_D_MODEL * 2}", f"parse_query: d_model is {MAX_D_MODEL * 2}; this page draws at most {MAX_D_MODEL}"),
    ("?sentence=" + "+I" * 17, "parse_query: the sentence has 17 tokens; this page draws at most 16"),
])
def test_bad_query_strings_are_refused_with_a_message(query, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_query(query)
    result = json.loads(page_update(query))
    assert result["ok"] is False and result["error"].startswith(message)


@pytest.mark.parametrize("query, options", [
    ("?heads=3", {"num_heads": 3}),
    ("?sentence=I+like+cats", {"sentence": "I like cats"}),
    ("?sentence=+", {"sentence": " "}),
    ("?d_model=0", {"d_model": 0}),
])
def test_settings_the_library_refuses_show_its_own_message(query, options):
    with pytest.raises(ValueError) as refused:
        running_example(**options)
    assert json.loads(page_update(query)) == {"ok": False, "error": str(refused.value)}
    assert str(refused.value).startswith("running_example: ")


def test_page_update_gives_html_settings_link_and_command():
    result = json.loads(page_update("?seed=7&heads=4&causal=1"))
    assert result["ok"] is True
    assert result["settings"] == Settings(seed=7, heads=4, causal=True)._asdict()
    assert parse_query(result["query"]) == Settings(seed=7, heads=4, causal=True)
    assert result["command"] == "python -m mha_lists --seed 7 --heads 4 --causal"
    assert_same_numbers(result["html"], cli("--seed", "7", "--heads", "4", "--causal"))


def test_build_writes_a_prerendered_page_the_module_and_its_assets(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.site", str(tmp_path / "out")], cwd=ROOT,
                            capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    page = (out / "index.html").read_text(encoding="utf-8")
    assert_same_numbers(page, cli())  # readable before, or without, WebAssembly
    for source in (ROOT / "mha_lists").glob("*.py"):
        assert (out / "mha_lists" / source.name).read_bytes() == source.read_bytes()
    assert (out / "style.css").exists() and (out / "page.js").exists()
    config = json.loads(re.search(r'<script id="mha-config" type="application/json">(.*?)</script>', page).group(1))
    assert config["pyodideUrl"] == PYODIDE_URL == f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"
    assert "tools/site.py" in config["moduleFiles"] and "__init__.py" in config["moduleFiles"]


def test_a_local_pyodide_url_leaves_no_other_address_in_the_site(tmp_path):
    build_site(tmp_path, "pyodide")  # the trailing slash is added
    text = "".join(path.read_text(encoding="utf-8") for path in tmp_path.rglob("*")
                   if path.suffix in (".html", ".js", ".css"))
    assert '"pyodideUrl": "pyodide/"' in text
    assert re.findall(r"https?://[^\s\"'<>)]+", text) == []


def test_pyodide_version_is_the_one_the_tests_install():
    package = json.loads((ROOT / "package.json").read_text(encoding="utf-8"))
    assert package["devDependencies"]["pyodide"] == PYODIDE_VERSION


def test_the_page_files_are_package_data():
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"mha_lists.tools" = ["site_files/*"]' in pyproject
    assert {p.name for p in (ROOT / "mha_lists" / "tools" / "site_files").iterdir()} == {"index.html", "style.css", "page.js"}


def test_bad_build_arguments():
    with pytest.raises(ValueError, match="build_site: pyodide_url must be a non-empty URL"):
        build_site(pathlib.Path("unused"), " ")
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.site"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "the following arguments are required: outdir" in result.stderr
