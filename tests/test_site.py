"""``python -m mha_lists.tools.site``: the page's settings, its pre-rendered numbers and the built files.

These need no browser: the pre-rendered page is read with html.parser. The page in a real
browser, computing in Pyodide, is tests/test_site_browser.py.
"""

from __future__ import annotations

import html
import json
import pathlib
import re
import subprocess
import sys

import pytest

from mha_lists import running_example
from mha_lists.tools.site import (
    MAX_D_MODEL,
    MAX_DIGITS,
    PYODIDE_URL,
    PYODIDE_VERSION,
    Settings,
    build_site,
    cli_command,
    module_files,
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
    weights = re.findall(r'style="--w:([0-9.]+)">([0-9.]+)</td>', page)
    assert len(weights) == 2 * 5 * 5  # every weight of both heads carries its colour value
    assert all(0.0 <= float(w) <= 1.0 and abs(float(w) - float(shown)) < 6e-4 for w, shown in weights)
    assert page.count('<td class="masked">-inf</td>') == 2 * 10  # 10 future keys per head


def test_the_heatmap_is_explained_in_visible_text_not_a_hover_title():
    settings = Settings(seed=7)
    page = walkthrough_html(settings)
    assert "title=" not in page
    caption, cols, rows = next(t for t in cli_tables(cli("--seed", "7")) if t[0].startswith("weights"))
    (row, cells) = rows[0]  # the CLI's first row of the first head's weights, as printed
    expected = (f"How to read it: row {html.escape(row)}, column {cols[1]} is {cells[1]}, "
                f"so token {html.escape(row)} takes that share of token {cols[1]}'s value.")
    assert expected in page
    assert page.count('<p class="how">') == settings.heads


def test_query_strings_round_trip():
    for settings in (Settings(), Settings(sentence="I like", seed=-5, heads=1, d_model=3, causal=True)):
        assert parse_query(query_string(settings)) == settings
    assert parse_query("") == Settings()
    assert parse_query("?seed=7&utm_source=x") == Settings(seed=7)
    assert parse_query("causal=on&sentence=I+like") == Settings(sentence="I like", causal=True)


@pytest.mark.parametrize("query, message", [
    ("?seed=abc", "parse_query: seed: 'abc' is not a whole number"),
    ("?seed=1.5", "parse_query: seed: '1.5' is not a whole number"),
    ("?heads=", "parse_query: heads: '' is not a whole number"),
    ("?d_model=x" + "y" * 5000, "parse_query: d_model: 'xyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy'... (5,001 characters) "
                                "is not a whole number"),
    ("?seed=" + "9" * 5000, "parse_query: seed has 5,000 digits; this page takes at most 18"),
    ("?seed=-" + "1" * 19, "parse_query: seed has 19 digits; this page takes at most 18"),
    ("?d_model=" + "7" * 4400, "parse_query: d_model has 4,400 digits; this page takes at most 18"),
    ("?causal=maybe", "parse_query: causal: 'maybe' is not 1 (on) or 0 (off)"),
    (f"?d_model={MAX_D_MODEL * 2}", f"parse_query: d_model is {MAX_D_MODEL * 2}; this page draws at most {MAX_D_MODEL}"),
    ("?d_model=4096", "parse_query: d_model is 4096; this page draws at most 64"),
    ("?sentence=" + "+I" * 17, "parse_query: the sentence has 17 tokens; this page draws at most 16"),
    ("?sentence=" + "I" * 201, "parse_query: the sentence has 201 characters; this page takes at most 200"),
])
def test_bad_query_strings_are_refused_with_a_message(query, message):
    with pytest.raises(ValueError) as refused:
        parse_query(query)
    assert str(refused.value) == message
    assert json.loads(page_update(query)) == {"ok": False, "error": message}
    assert len(message) < 120  # one line, whatever was typed


def test_no_message_points_to_a_command_that_would_run_for_minutes():
    for query in ("?d_model=4096", "?sentence=" + "+I" * 17, "?d_model=65"):
        assert "python -m" not in json.loads(page_update(query))["error"]


def test_the_largest_seed_the_page_takes_works():
    seed = 10 ** MAX_DIGITS - 1
    assert parse_query(f"?seed={seed}").seed == seed and parse_query(f"?seed=-{seed}").seed == -seed
    assert json.loads(page_update(f"?seed={seed}"))["command"] == f"python -m mha_lists --seed {seed}"


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
    config = json.loads(re.search(r'<script id="mha-config" type="application/json">(.*?)</script>', page).group(1))
    assert config["moduleFiles"] == module_files()
    written = sorted(path.relative_to(out / "mha_lists").as_posix() for path in (out / "mha_lists").rglob("*.py"))
    assert written == module_files()  # only what the page imports
    for name in written:
        assert (out / "mha_lists" / name).read_bytes() == (ROOT / "mha_lists" / name).read_bytes()
    assert (out / "style.css").exists() and (out / "page.js").exists()
    assert config["pyodideUrl"] == PYODIDE_URL == f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"


def test_module_files_of_a_leaf_and_a_bad_root():
    leaf = module_files("core/checks.py")  # importing it runs mha_lists/__init__.py, which imports the core
    assert leaf[0] == "__init__.py" and "core/checks.py" in leaf and "tools/site.py" not in leaf
    with pytest.raises(ValueError, match="module_files: root must name a .py file under mha_lists/"):
        module_files("tools/nothing.py")


def test_the_module_files_are_what_python_imports_for_the_page():
    """ast's closure against an independent count: the modules a fresh CPython holds after the import."""
    code = "import sys, mha_lists.tools.site; print(' '.join(sorted(m for m in sys.modules if m.startswith('mha_lists'))))"
    loaded = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    as_files = sorted(name.replace("mha_lists", "", 1).lstrip(".").replace(".", "/") or "" for name in loaded)
    expected = sorted(f"{name}/__init__.py" if (ROOT / "mha_lists" / name / "__init__.py").exists() and name
                      else "__init__.py" if not name else f"{name}.py" for name in as_files)
    assert module_files() == expected
    assert {"tools/bench.py", "teaching/training.py", "tools/worksheet.py", "tools/exercises.py"}.isdisjoint(expected)
    assert len(expected) < len(list((ROOT / "mha_lists").rglob("*.py")))


def test_a_local_pyodide_url_leaves_no_other_address_in_the_site(tmp_path):
    build_site(tmp_path, "pyodide")  # the trailing slash is added
    text = "".join(path.read_text(encoding="utf-8") for path in tmp_path.rglob("*")
                   if path.suffix in (".html", ".js", ".css"))
    assert '"pyodideUrl": "pyodide/"' in text
    # The SVG namespace names a vocabulary and is never fetched; any other address would be.
    addresses = set(re.findall(r"https?://[^\s\"'<>)]+", text)) - {"http://www.w3.org/2000/svg"}
    assert addresses == set()


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
    with pytest.raises(ValueError, match="build_site: outdir must be a folder path, got 3"):
        build_site(3)


def site_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.site", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8")


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a folder\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("args, message", [
    ((), "the following arguments are required: outdir"),
    (("{tmp}/out", "--pyodide-url", ""), "--pyodide-url is empty; give the folder URL holding pyodide.mjs"),
    (("{tmp}/out", "--pyodide-url", "   "), "--pyodide-url is empty"),
    (("",), "OUTDIR is empty"),
    (("{file}",), "outdir '{file}' is a file, not a folder"),
    (("{file}/inside",), "cannot write {file}/inside"),
    (("/proc/mha-lists-site",), "cannot write /proc/mha-lists-site"),  # unwritable, even for root
])
def test_the_command_says_what_is_wrong_in_one_line_and_exits_2(args, message, tmp_path, a_file):
    def fill(text):
        return text.format(tmp=tmp_path, file=a_file)

    result = site_command(*map(fill, args))
    assert result.returncode == 2
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("python -m mha_lists.tools.site: error: ")
    assert fill(message) in result.stderr and "Traceback" not in result.stderr
    assert a_file.read_text(encoding="utf-8") == "not a folder\n"
