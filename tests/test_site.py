"""tools/site.py, ``python -m mha_lists.tools.site``: the page's settings, its pre-rendered numbers, trained
mode (the model trained on Genesis reading any text) and the built files.

Every score, weight and head-output entry's title is display's ``.explain(i, j)``; the embedding
tables and each head's W_Q, W_K, W_V are on the page, folded. These need no browser: the
pre-rendered page is read with html.parser. The page in a real
browser, computing in Pyodide, is tests/test_site_browser.py.
"""

from __future__ import annotations

import html
import json
import os
import pathlib
import re
import subprocess
import sys

from html.parser import HTMLParser
from unittest import mock
from urllib.parse import unquote, urlencode
from xml.etree import ElementTree

import pytest
import commands
from bad_inputs import refused

from mha_lists import running_example
from mha_lists.teaching.display import format_number
from mha_lists.teaching.example import TRAINED_SENTENCE
from mha_lists.teaching.reading import HeadJob, head_jobs, read, trained_model
from mha_lists.tools import site
from mha_lists.tools.site import (
    FIELDS,
    LOOK_FOR,
    MAX_D_MODEL,
    MAX_DIGITS,
    PYODIDE_FILES,
    PYODIDE_URL,
    PYODIDE_VERSION,
    TRAINED_FILES,
    Settings,
    build_site,
    cli_command,
    job_text,
    module_files,
    page_update,
    parse_query,
    query_problems,
    query_string,
    trained_html,
    walkthrough_html,
)
from no_install_helpers import ROOT, cli_headings, cli_tables, page_parts

# Every message the module writes, once. Other tests match only the start.
MESSAGES = {
    "query": "parse_query: query must be a str, got {type}",
    "problems query": "query_problems: query must be a str, got {type}",
    "not a whole number": "parse_query: {name}: {value} is not a whole number",
    "long value": "{value} ({n} characters)",  # how a message quotes a long value typed
    "digits": "parse_query: {name}: {n} digits; this page takes at most 18",
    "causal": "parse_query: causal: {value} is not 1 (on) or 0 (off)",
    "trained flag": "parse_query: trained: {value} is not 1 (on) or 0 (off)",
    "too few": "parse_query: {name}: {value} is too few; give 1 or more",
    "d_model": "parse_query: d_model: {value} is more than this page draws; at most 64",
    "tokens": "parse_query: sentence: {n} words; this page draws at most 16",
    "characters": "parse_query: sentence: {n} characters; this page takes at most 384",
    "empty": "parse_query: sentence: it is empty; add at least one word with the buttons below",
    "vocabulary": "parse_query: sentence: {words} of the vocabulary; the buttons below add its words: <PAD> <BOS> "
                  "<EOS> I like transformers",
    "heads divide": "parse_query: heads: {h} heads cannot share d_model = {d} columns equally; choose heads among "
                    "{fits}, or another d_model",
    "settings": "{func}: {name} must be a Settings (from parse_query), got {type}",
    "settings sentence": "{func}: {name}.sentence has {chars} characters and {tokens} tokens; this page takes at "
                         "most 384 and 16",
    "settings digits": "{func}: {name}.{option} is {value}; this page takes at most 18 digits",
    "settings d_model": "{func}: {name}.d_model is {value}; this page draws at most 64",
    "settings fixed digits": "{func}: {name}.digits is {value}; the page always shows 4",
    "settings trained": "{func}: {name}.{option} is {value}; the trained model has its own sizes and reads causally: "
                        "with trained=True, leave seed, heads, d_model and causal as they are",
    "no trained command": "cli_command: settings.trained is True; no command prints the trained model's attention "
                          "(page_update gives the Python call that does)",
    "job": "job_text: job must be a HeadJob (from reading.head_jobs), got {type}",
    "explanations trained": "explanations: settings.trained is True; trained mode shows attention weights only, "
                            "as heatmaps",
    "trained run missing": "build_site: mha_lists/{name} (the trained model's weights) is missing; the page's trained "
                           "mode reads it (python -m mha_lists.tools.read_text --save writes a run)",
    "root": "module_files: root must name a .py file under mha_lists/, like 'tools/site.py'; got {value}",
    "outdir": "build_site: outdir must be a folder path, got {value}",
    "pyodide_url": "build_site: pyodide_url must be a non-empty URL of the folder holding pyodide.mjs",
    "outdir a file": "build_site: outdir {value} is a file, not a folder",
    "not regular": "build_site: {path} is not a regular file (a folder, a FIFO or a device); it cannot be written over",
    "empty url": "--pyodide-url is empty; give the folder URL holding pyodide.mjs, e.g. pyodide/",
    "empty outdir": "OUTDIR is empty; give a folder to write the page into",
    "cannot write": "cannot write {where}: {why}",
}
LONG = "x" + "y" * 5000

# key -> (error type, a real bad call, the fields of the template)
BAD_CALLS = {
    "query": (TypeError, lambda: parse_query(None), dict(type="NoneType")),
    "problems query": (TypeError, lambda: query_problems(None), dict(type="NoneType")),
    "not a whole number": (ValueError, lambda: parse_query("?seed=1.5"), dict(name="seed", value="'1.5'")),
    "long value": (ValueError, lambda: parse_query("?d_model=" + LONG),
                   dict(value="parse_query: d_model: 'xyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy ...", n="5,001")),
    "digits": (ValueError, lambda: parse_query("?seed=-" + "1" * 19), dict(name="seed", n=19)),
    "causal": (ValueError, lambda: parse_query("?causal=maybe"), dict(value="'maybe'")),
    "trained flag": (ValueError, lambda: parse_query("?trained=2&sentence=hi"), dict(value="'2'")),
    "too few": (ValueError, lambda: parse_query("?heads=-2"), dict(name="heads", value=-2)),
    "d_model": (ValueError, lambda: parse_query("?d_model=4096"), dict(value=4096)),
    "tokens": (ValueError, lambda: parse_query("?sentence=" + "+I" * 17), dict(n=17)),
    "characters": (ValueError, lambda: parse_query("?sentence=" + "I" * 385), dict(n=385)),
    "empty": (ValueError, lambda: parse_query("?sentence=++"), {}),
    "vocabulary": (ValueError, lambda: parse_query("?sentence=I+like+cats+and+cats"),
                   dict(words="'cats' and 'and' are not words")),
    "heads divide": (ValueError, lambda: parse_query("?heads=3"), dict(h=3, d=16, fits="1, 2, 4, 8, 16")),
    "settings": (TypeError, lambda: walkthrough_html({"seed": 1}), dict(func="walkthrough_html", name="settings",
                                                                        type="dict")),
    "settings sentence": (ValueError, lambda: cli_command(Settings(sentence="I " * 17)),
                          dict(func="cli_command", name="settings", chars=34, tokens=17)),
    "settings digits": (ValueError, lambda: query_string(Settings(seed=10**30)),
                        dict(func="query_string", name="settings", option="seed", value="an int of 31 digits")),
    "settings d_model": (ValueError, lambda: walkthrough_html(Settings(d_model=4096)),
                         dict(func="walkthrough_html", name="settings", value=4096)),
    "explanations trained": (ValueError, lambda: site.explanations(Settings(sentence="hi", trained=True)), {}),
    "settings fixed digits": (ValueError, lambda: walkthrough_html(Settings(digits=12)),
                              dict(func="walkthrough_html", name="settings", value=12)),
    "settings trained": (ValueError, lambda: walkthrough_html(Settings(sentence="hi", heads=4, trained=True)),
                         dict(func="walkthrough_html", name="settings", option="heads", value=4)),
    "no trained command": (ValueError, lambda: cli_command(Settings(sentence="hi", trained=True)), {}),
    "job": (TypeError, lambda: job_text((0, 1, 0.9, None, "previous character"), 5), dict(type="tuple")),
    "trained run missing": (ValueError, lambda: build_with_run_missing(), dict(name="data/nothing.json")),
    "root": (ValueError, lambda: module_files("../README.md"), dict(value="'../README.md'")),
    "outdir": (ValueError, lambda: build_site(3), dict(value=3)),
    "pyodide_url": (ValueError, lambda: build_site(pathlib.Path("unused"), " "), {}),
    "outdir a file": (ValueError, lambda: build_site(ROOT / "README.md"), dict(value=repr(str(ROOT / "README.md")))),
    "not regular": (ValueError, lambda: (_ for _ in ()).throw(ValueError(
        "build_site: 'out/index.html' is not a regular file (a folder, a FIFO or a device); it cannot be written "
        "over")), dict(path="'out/index.html'")),  # called for real below, with a FIFO
    "empty url": (SystemExit, ("out", "--pyodide-url", " "), {}),
    "empty outdir": (SystemExit, ("",), {}),
    "cannot write": (SystemExit, ("/proc/mha-lists-site",), dict(where="/proc/mha-lists-site",
                                                                 why="No such file or directory")),
}


def build_with_run_missing():
    with mock.patch.object(site, "TRAINED_FILES", ["data/nothing.json"]):
        build_site(pathlib.Path("unused"))  # refused before anything is written


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    error, call, fields = BAD_CALLS[key]
    if error is SystemExit:  # the command's own: one line, exit code 2
        result = site_command(*call)
        assert result.returncode == 2 and result.stdout == ""
        expected = MESSAGES[key].format(**fields)
        assert result.stderr == f"python -m mha_lists.tools.site: error: {expected} (see --help)\n"
        return
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert str(info.value).startswith(MESSAGES[key].format(**fields)) if key == "long value" else \
        str(info.value) == MESSAGES[key].format(**fields)


def cli(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", check=True).stdout


def without_parameters(html_text: str) -> str:
    """The page without the folded tables of weights the CLI does not print (the embeddings, W_Q, W_K, W_V)."""
    return re.sub(r'<details class="params">.*?</details>', "", html_text, flags=re.S)


def assert_same_numbers(html_text: str, cli_text: str) -> None:
    tables, headings, summary = page_parts(without_parameters(html_text))
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
    weights = re.findall(r'style="--w:([0-9.]+)"><a tabindex="0" title="[^"]*">([0-9.]+)</a></td>', page)
    assert len(weights) == 2 * 5 * 5  # every weight of both heads carries its colour value
    assert all(0.0 <= float(w) <= 1.0 and abs(float(w) - float(shown)) < 6e-4 for w, shown in weights)
    masked = re.findall(r'<td class="masked"><a tabindex="0" title="([^"]*)">-inf</a></td>', page)
    assert len(masked) == 2 * 10  # 10 future keys per head
    assert all("= -inf: the mask hides this key from this query" in html.unescape(title) for title in masked)


def test_the_heatmap_is_explained_in_visible_text_not_a_hover_title():
    settings = Settings(seed=7)
    page = walkthrough_html(settings)
    titles = re.findall(r"<(\w+)([^>]*) title=", page)  # a title only on an entry: a focusable <a> in a cell
    assert titles and set(titles) == {("a", ' tabindex="0"')}
    caption, cols, rows = next(t for t in cli_tables(cli("--seed", "7")) if t[0].startswith("weights"))
    (row, cells) = rows[-1]  # the CLI's last row of the first head's weights, as printed: no key masked there
    j = max((k for k in range(len(cells)) if k != len(rows) - 1), key=lambda k: float(cells[k]))  # its strongest other
    expected = (f"How to read it: row {html.escape(row)}, column {html.escape(cols[j])} is {cells[j]}, "
                f"so token {html.escape(row)} takes that share of token {html.escape(cols[j])}'s value.")
    assert expected in page
    assert page.count('<p class="how">') == settings.heads


class _Explained(HTMLParser):
    """Each figure's caption, and the title of every entry of its table: {caption: [[title, ...], ...]}."""

    def __init__(self):
        super().__init__()
        self.figures, self._caption, self._text = {}, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "figcaption":
            self._text = []
        elif tag == "tr" and self._caption is not None:
            self.figures[self._caption].append([])
        elif tag == "a" and "title" in attrs:
            self.figures[self._caption][-1].append(attrs["title"])

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "figcaption":
            self._caption = " ".join("".join(self._text).split())
            self._text = None
            self.figures[self._caption] = []
        elif tag == "figure":
            self._caption = None


def explained_on_page(page: str) -> dict:
    reader = _Explained()
    reader.feed(page)
    return {caption: [row for row in rows if row] for caption, rows in reader.figures.items()}


@pytest.mark.parametrize("settings", [Settings(), Settings(seed=7, heads=4, causal=True),
                                      Settings(sentence="<BOS> I I like", d_model=12, heads=3, causal=True)])
def test_every_score_weight_and_output_says_what_displays_explain_says(settings):
    """The page's titles are display.explained_*'s .explain(i, j), computed here from the example itself."""
    from mha_lists import attention_trace, causal_mask
    from mha_lists.teaching.display import explained_outputs, explained_scores, explained_weights
    ex = running_example(sentence=settings.sentence, d_model=settings.d_model, num_heads=settings.heads,
                         seed=settings.seed)
    mask = causal_mask(len(ex.tokens)) if settings.causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    shown = explained_on_page(walkthrough_html(settings))
    T, d_k = len(ex.tokens), settings.d_model // settings.heads
    assert {caption for caption, rows in shown.items() if rows} == {
        f"{name}, head {h} ({T}x{size})" for h in range(settings.heads)
        for name, size in (("scores", T), ("weights", T), ("output", d_k))}  # nothing else has titles
    for h in range(settings.heads):
        views = {"scores": explained_scores(trace.Q[h], trace.K[h], ex.tokens, mask=mask),
                 "weights": explained_weights(trace.scores[h], ex.tokens, mask=mask),
                 "output": explained_outputs(trace.attention[h], trace.V[h], ex.tokens)}
        for name, view in views.items():
            titles = shown[f"{name}, head {h} ({T}x{view.m})"]
            assert titles == [[view.explain(i, j) for j in range(view.m)] for i in range(view.n)], (name, h)
        # The numbers explained are the trace's, bit for bit: each text ends in the number the page shows.
        assert views["scores"].M == trace.scores[h] and views["weights"].M == trace.attention[h]
        assert views["output"].M == trace.head_outputs[h]
    first = shown[f"scores, head 0 ({T}x{T})"][-1][0]
    assert first.startswith(f"score[{T - 1}][0], {ex.tokens[-1]} → {ex.tokens[0]} = (q{T - 1}·k0) / √{d_k}\n= ")
    assert first.endswith(" = " + format_number(trace.scores[0][-1][0], 4))


def test_a_few_titles_as_written_in_the_html_are_the_explain_text():
    """Read as a browser reads the attribute: html.unescape of the quoted title gives .explain's text."""
    from mha_lists import attention_trace
    from mha_lists.teaching.display import explained_scores, explained_weights
    page = walkthrough_html(Settings())
    ex = running_example()
    trace = attention_trace(ex.x, ex.weights)
    scores = explained_scores(trace.Q[1], trace.K[1], ex.tokens)
    weights = explained_weights(trace.scores[0], ex.tokens)
    for text in (scores.explain(2, 3), scores.explain(0, 4), weights.explain(4, 1)):
        assert f'<a tabindex="0" title="{html.escape(text, quote=True)}">' in page
    assert site.explanations(Settings())["scores, head 1"][2][3] == scores.explain(2, 3)


def test_a_head_output_wider_than_display_explains_has_no_titles_and_the_rest_do():
    said = site.explanations(Settings(heads=1, d_model=64, sentence="I like"))
    assert sorted(said) == ["scores, head 0", "weights, head 0"]
    page = walkthrough_html(Settings(heads=1, d_model=64, sentence="I like"))
    assert not explained_on_page(page)["output, head 0 (2x64)"]  # shown, as the CLI prints it, unexplained


def test_the_page_shows_every_weight_matrix_and_the_embedding_tables_folded():
    settings = Settings(seed=7, heads=4, d_model=12, causal=True)
    page = walkthrough_html(settings)
    ex = running_example(d_model=12, num_heads=4, seed=7)
    folded = re.findall(r'<details class="params"><summary>(.*?)</summary>(.*?)</details>', page, flags=re.S)
    assert [html.unescape(summary) for summary, _ in folded] == [
        "The tables X is made from: token (6x12), a row per word, and position (8x12), a row per place",
        *(f"Head {h}'s weights: W_Q, W_K and W_V, each (12x3)" for h in range(4))]
    tables = [page_parts(inside)[0] for _, inside in folded]
    d, k = [f"d{j}" for j in range(12)], [f"d{j}" for j in range(3)]

    def as_shown(caption, M, rows, cols):
        return (f"{caption} ({len(M)}x{len(M[0])})", cols, [(r, [format_number(x, 4) for x in row])
                                                          for r, row in zip(rows, M)])

    assert tables[0] == [as_shown("token table", ex.token_embeddings, ex.vocab, d),
                         as_shown("position table", ex.position_embeddings, [f"pos {i}" for i in range(8)], d)]
    for h in range(4):
        assert tables[1 + h] == [as_shown(f"{name}, head {h}", getattr(ex.weights, name)[h], d, k)
                                 for name in ("W_Q", "W_K", "W_V")]
    # Where they stand: the embeddings under X (step 1), each head's weights under its step 2.
    assert page.index("figcaption id=\"table-1\">X ") < page.index("The tables X is made from") < page.index(
        "Head 0</h2>") < page.index("Step 2. Projections") < page.index("Head 0&#x27;s weights") < page.index(
        "Q, head 0 <span")
    assert "W_O" in page and len(re.findall(r">W_O <span", page)) == 1  # W_O stays where step 7 shows it


def test_query_strings_round_trip():
    for settings in (Settings(), Settings(sentence="I like", seed=-5, heads=1, d_model=3, causal=True)):
        assert parse_query(query_string(settings)) == settings
    assert parse_query("") == Settings()
    assert parse_query("?seed=7&utm_source=x") == Settings(seed=7)
    assert parse_query("causal=on&sentence=I+like") == Settings(sentence="I like", causal=True)


def message(key, **fields):
    return MESSAGES[key].format(**fields)


@pytest.mark.parametrize("query, expected", [
    ("?seed=abc", message("not a whole number", name="seed", value="'abc'")),
    ("?heads=", message("not a whole number", name="heads", value="''")),
    ("?d_model=" + LONG, message("not a whole number", name="d_model",
                                 value=message("long value", value="'xyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy ...",
                                               n="5,001"))),
    ("?seed=" + "9" * 5000, message("digits", name="seed", n="5,000")),
    ("?d_model=" + "7" * 4400, message("digits", name="d_model", n="4,400")),
    (f"?d_model={MAX_D_MODEL * 2}", message("d_model", value=MAX_D_MODEL * 2)),
    ("?causal=" + LONG, message("causal", value=message("long value", value="'xyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy ...",
                                                         n="5,001"))),
    ("?d_model=0", message("too few", name="d_model", value=0)),
    ("?sentence=I+like+cats", message("vocabulary", words="'cats' is not a word")),
])
def test_bad_query_strings_are_refused_with_a_message(query, expected):
    with pytest.raises(ValueError) as refused_:
        parse_query(query)
    assert str(refused_.value) == expected
    # The page shows the message beside its field, without the function's name (the page, not the learner,
    # called it) and without the field's (the field is right there); the error box gives it after the field's label.
    field, problem = expected.removeprefix("parse_query: ").split(": ", 1)
    assert json.loads(page_update(query)) == {"ok": False, "errors": {field: problem},
                                              "error": f"{FIELDS[field]}: {problem}"}
    assert len(expected) < 150  # one line, whatever was typed


def test_no_message_points_to_a_command_that_would_run_for_minutes():
    for query in ("?d_model=4096", "?sentence=" + "+I" * 17, "?d_model=65"):
        assert "python -m" not in json.loads(page_update(query))["error"]


def test_the_largest_seed_the_page_takes_works():
    seed = 10 ** MAX_DIGITS - 1
    assert parse_query(f"?seed={seed}").seed == seed and parse_query(f"?seed=-{seed}").seed == -seed
    assert json.loads(page_update(f"?seed={seed}"))["command"] == f"python -m mha_lists --seed {seed}"


@pytest.mark.parametrize("query, options, field", [
    ("?heads=0", {"num_heads": 0}, "heads"),
    ("?sentence=I+like+cats", {"sentence": "I like cats"}, "sentence"),
    ("?sentence=+", {"sentence": " "}, "sentence"),
    ("?d_model=0", {"d_model": 0}, "d_model"),
    ("?heads=3", {"num_heads": 3}, "heads"),
])
def test_settings_the_library_refuses_are_named_in_the_pages_words(query, options, field):
    with pytest.raises(ValueError) as refused:
        running_example(**options)
    assert str(refused.value).startswith("running_example: ")
    result = json.loads(page_update(query))
    assert list(result["errors"]) == [field] and result["error"].startswith(FIELDS[field] + ": ")
    # no Python function's name, no argument the page has no field for, no advice the page cannot follow
    for word in ("running_example", "parse_query", "num_heads", "d_k", "pass ", "python"):
        assert word not in result["error"], word


def test_every_bad_field_is_reported_at_once_each_for_its_own_field():
    query = "?" + urlencode({"sentence": "<BOS> cats like dogs", "seed": "1.5", "heads": "5", "d_model": "12",
                             "causal": "maybe"})
    result = json.loads(page_update(query))
    assert result["errors"] == {
        "sentence": message("vocabulary", words="'cats' and 'dogs' are not words").split(": ", 2)[2],
        "seed": "'1.5' is not a whole number",
        "heads": "5 heads cannot share d_model = 12 columns equally; choose heads among 1, 2, 3, 4, 6, 12, or another "
                 "d_model",
        "causal": "'maybe' is not 1 (on) or 0 (off)"}
    assert result["error"].splitlines() == [f"{FIELDS[name]}: {text}" for name, text in result["errors"].items()]
    assert query_problems(query) == result["errors"]
    with pytest.raises(ValueError, match=r"^parse_query: sentence: 'cats' and 'dogs' are not words"):
        parse_query(query)  # the first of them
    # A size the page refuses is not checked against the other: one message, where the fix is.
    assert query_problems("?d_model=4096&heads=3") == {"d_model": "4096 is more than this page draws; at most 64"}
    assert query_problems("?d_model=x&heads=3") == {"d_model": "'x' is not a whole number"}
    assert query_problems("?trained=1&seed=x&heads=0") == {}  # the trained model has its own sizes
    assert list(query_problems("?trained=2&seed=x")) == ["trained", "seed"]
    trained = json.loads(page_update("?trained=1&sentence="))  # the model's own check, beside the text's field
    assert trained == {"ok": False, "errors": {"sentence": "the sentence is empty; give at least one character"},
                       "error": "Sentence: the sentence is empty; give at least one character"}


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
    assert PYODIDE_URL == f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"


def fake_pyodide(folder: pathlib.Path, version: str = PYODIDE_VERSION) -> pathlib.Path:
    """A stand-in for `npm ci`'s node_modules/pyodide in folder: package.json, every file the page needs, and more."""
    package = folder / "node_modules" / "pyodide"
    package.mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "pyodide", "version": version}), encoding="utf-8")
    for name in (*PYODIDE_FILES, "pyodide.js", "pyodide.mjs.map", "console.html", "ffi.d.ts"):
        (package / name).write_bytes(f"{version} {name}\n".encode())
    return package


def site_command_in(folder: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.site", *args], cwd=folder, capture_output=True,
                          text=True, encoding="utf-8", env=env, timeout=120)


def pyodide_url_of(out: pathlib.Path) -> str:
    page = (out / "index.html").read_text(encoding="utf-8")
    return json.loads(re.search(r'<script id="mha-config" type="application/json">(.*?)</script>', page).group(1))[
        "pyodideUrl"]


def test_the_build_bundles_the_npm_pyodide_it_finds_so_the_page_works_offline(tmp_path):
    package = fake_pyodide(tmp_path)  # where `npm ci` puts it, in the folder the command runs in
    result = site_command_in(tmp_path, "_site")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "with Python (Pyodide) in pyodide/: works offline" in result.stdout
    out = tmp_path / "_site"
    assert pyodide_url_of(out) == "pyodide/"
    assert sorted(p.name for p in (out / "pyodide").iterdir()) == sorted(PYODIDE_FILES)  # only what the page needs
    for name in PYODIDE_FILES:
        assert (out / "pyodide" / name).read_bytes() == (package / name).read_bytes()
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<code>pyodide/</code>" in page  # the footer says where from
    # The icon is in the page, so no browser asks the server for /favicon.ico (a 404 on every visit).
    icons = re.findall(r'<link rel="icon" href="data:image/svg\+xml,([^"]*)">', page)
    assert len(icons) == 1 and len(re.findall(r'rel="[^"]*icon', page)) == 1
    assert ElementTree.fromstring(unquote(icons[0])).tag == "{http://www.w3.org/2000/svg}svg"
    with mock.patch.object(site, "_pyodide_candidates", lambda: [package]):
        assert site.find_pyodide() == package


def test_a_build_with_no_local_pyodide_says_loudly_that_the_page_needs_the_internet(tmp_path, capsys):
    wrong = fake_pyodide(tmp_path / "old", version="0.26.4")
    with mock.patch.object(site, "_pyodide_candidates", lambda: [tmp_path / "nothing", wrong]):
        assert site.find_pyodide() is None
        assert site.main([str(tmp_path / "out")]) == 0
        warning = site.no_local_pyodide()
    out, err = capsys.readouterr()
    assert err == warning + "\n"
    assert err.startswith(f"WARNING: no local copy of Pyodide {PYODIDE_VERSION} (node_modules/pyodide, from npm): "
                          f"{wrong} is version 0.26.4.\n")
    assert f"from {PYODIDE_URL} and NEEDS THE INTERNET" in err and "run `npm ci` in " in err
    assert f"Python (Pyodide) from {PYODIDE_URL}" in out
    assert pyodide_url_of(tmp_path / "out") == PYODIDE_URL and not (tmp_path / "out" / "pyodide").exists()
    with mock.patch.object(site, "_pyodide_candidates", lambda: [tmp_path / "nothing"]):
        with pytest.raises(SystemExit) as stop:
            site.main(["/proc/mha-lists-site"])  # a build that fails says why, in one line, and only that
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("python -m mha_lists.tools.site: error: cannot") and err.count("\n") == 1


def test_pyodide_url_chooses_where_python_comes_from_and_nothing_is_bundled(tmp_path):
    fake_pyodide(tmp_path)
    for url in (PYODIDE_URL, "https://school.example/pyodide/"):
        result = site_command_in(tmp_path, "out", "--pyodide-url", url)
        assert result.returncode == 0 and result.stderr == "", result.stderr  # asked for: no warning
        assert pyodide_url_of(tmp_path / "out") == url and not (tmp_path / "out" / "pyodide").exists()


def test_module_files_of_a_leaf_and_a_bad_root():
    leaf = module_files("core/checks.py")  # importing it runs mha_lists/__init__.py, which imports the core
    assert leaf[0] == "__init__.py" and "core/checks.py" in leaf and "tools/site.py" not in leaf
    # Only the package's own files: another .py file (that may not even parse) is not read.
    for root in ("tools/nothing.py", "../tests/conftest.py", str(ROOT / "tests" / "conftest.py"), "/etc/passwd", 3,
                 "x" * 10_000 + ".py"):
        with pytest.raises(ValueError, match=r"^module_files: root "):
            module_files(root)
        refused("module_files", lambda: module_files(root))


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


@pytest.mark.parametrize("call, error, start", [
    (lambda: build_site(pathlib.Path("unused"), " "), ValueError, "build_site: pyodide_url "),
    (lambda: build_site(pathlib.Path("unused"), 3), ValueError, "build_site: pyodide_url "),
    (lambda: build_site(3), ValueError, "build_site: outdir "),
    (lambda: build_site("x" * 100_000), OSError, None),  # a name too long for the system: build_site's OSError
    (lambda: walkthrough_html(None), TypeError, "walkthrough_html: settings "),
    (lambda: walkthrough_html(Settings(causal=1)), TypeError, "walkthrough_html: settings.causal "),
    (lambda: walkthrough_html(Settings(seed="7")), TypeError, "walkthrough_html: settings.seed "),
    (lambda: walkthrough_html(Settings(sentence=None)), TypeError, "walkthrough_html: settings.sentence "),
    (lambda: walkthrough_html(Settings(heads=3)), ValueError, "running_example: "),  # the library's own rule
    (lambda: query_string("?seed=7"), TypeError, "query_string: settings "),
    (lambda: cli_command(None), TypeError, "cli_command: settings "),
    (lambda: cli_command(Settings(d_model=10**100)), ValueError, "cli_command: settings.d_model "),
    (lambda: page_update(None), None, None),  # refused, as JSON
])
def test_bad_arguments_of_the_functions(call, error, start):
    if error is None:
        assert json.loads(call()) == {"ok": False, "errors": {},
                                      "error": message("query", type="NoneType").removeprefix("parse_query: ")}
    elif start is None:
        with pytest.raises(error):
            call()
    else:
        named = refused(start.split(":")[0], call, error)
        assert isinstance(named, error) and str(named).startswith(start)


def test_a_fifo_where_a_file_is_written_is_refused_not_waited_on(tmp_path):
    # Writing into a FIFO waits until something reads it: the command used to hang there.
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "index.html")
    with pytest.raises(ValueError) as info:
        build_site(out)
    assert str(info.value) == message("not regular", path=repr(str(out / "index.html")))
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.site", str(out)], cwd=ROOT, capture_output=True,
                            text=True, encoding="utf-8", timeout=120)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert message("not regular", path=repr(str(out / "index.html"))).removeprefix("build_site: ") in result.stderr
    assert list(out.iterdir()) == [out / "index.html"], "nothing is written when a target cannot be"


def site_command(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.site", *args], cwd=ROOT, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not a folder\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("args, expected", [
    ((), "the following arguments are required: outdir"),  # argparse's words
    (("{tmp}/out", "--pyodide-url", ""), MESSAGES["empty url"]),
    (("{tmp}/out", "--pyodide-url", "   "), MESSAGES["empty url"]),
    (("",), MESSAGES["empty outdir"]),
    (("{file}",), MESSAGES["outdir a file"].format(value="'{file}'").removeprefix("build_site: ")),
    (("{file}/inside",), "cannot write {file}/inside"),
    (("/proc/mha-lists-site",), "cannot write /proc/mha-lists-site"),  # unwritable, even for root
    (("/dev/null",), MESSAGES["outdir a file"].format(value="'/dev/null'").removeprefix("build_site: ")),
    (("{tmp}/" + "x" * 5000,), "cannot write '{tmp}/xxxxxxxx"),  # cut short
])
def test_the_command_says_what_is_wrong_in_one_line_and_exits_2(args, expected, tmp_path, a_file):
    def fill(text):
        return text.replace("{tmp}", str(tmp_path)).replace("{file}", str(a_file))

    result = commands.completed(site.main, list(map(fill, args)))
    assert result.returncode == 2
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("python -m mha_lists.tools.site: error: ")
    assert fill(expected) in result.stderr and "Traceback" not in result.stderr and len(result.stderr) < 400
    assert a_file.read_text(encoding="utf-8") == "not a folder\n"


def test_the_real_command_line_says_the_same_line(a_file):
    real, in_process = site_command(str(a_file)), commands.completed(site.main, [str(a_file)])
    assert (real.returncode, real.stdout, real.stderr) == (2, "", in_process.stderr)
    assert in_process.stderr.startswith("python -m mha_lists.tools.site: error: ")


def test_a_16_word_sentence_of_the_longest_words_fits_and_heads_that_do_not_divide_say_which_do():
    from mha_lists.teaching.example import VOCAB
    from mha_lists.tools.site import MAX_TOKENS
    longest = max(VOCAB, key=len)
    sentence = " ".join([longest] * MAX_TOKENS)
    assert parse_query("?sentence=" + sentence.replace(" ", "+")).sentence == sentence
    error = json.loads(page_update("?heads=5&d_model=12"))["error"]
    assert error == ("Heads: 5 heads cannot share d_model = 12 columns equally; choose heads among 1, 2, 3, 4, 6, 12, "
                     "or another d_model")


@pytest.mark.parametrize("query", ["", "?causal=1", "?causal=1&sentence=%3CBOS%3E+I", "?heads=1&seed=3"])
def test_how_to_read_it_reads_an_entry_that_is_not_masked(query):
    # The sentence quotes a weight the row really gives: never a key the causal mask hides (weight 0).
    import re
    html_text = json.loads(page_update(query))["html"]
    for row, key, value in re.findall(r"How to read it: row (.*?), column (.*?) is ([0-9.]+),", html_text):
        assert float(value) > 0, (row, key, value)


# === Trained mode: the model trained on Genesis reads any text ===

WINDOW = len(trained_model().position_embeddings)  # the most characters it reads: its position table's rows


class _HeadReader(HTMLParser):
    """Each head of trained mode's HTML: (its heading, its column labels, its rows (label, cells)), as shown."""

    def __init__(self):
        super().__init__()
        self.heads, self._text, self._row = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "figure" and "head-map" in (dict(attrs).get("class") or "").split():
            self.heads.append(["", [], []])
        elif tag == "tr" and self.heads:
            self._row = []
        elif tag in ("h3", "th", "td") and self.heads:
            self._text = []

    def handle_data(self, data):
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag in ("h3", "th", "td") and self._text is not None:
            text = " ".join("".join(self._text).split())
            self._text = None
            if tag == "h3":
                self.heads[-1][0] = text
            else:
                self._row.append(text)
        elif tag == "tr" and self._row is not None:
            if not self.heads[-1][1]:
                self.heads[-1][1] = self._row[1:]  # the header: an empty corner, then the keys
            else:
                self.heads[-1][2].append((self._row[0], self._row[1:]))
            self._row = None


def heads_shown(html_text: str) -> list:
    reader = _HeadReader()
    reader.feed(html_text)
    return reader.heads


def heads_computed(text: str) -> list:
    """What reading computes for text, as the page must show it: per head its job, keys and 2-digit rows."""
    model = trained_model()
    labels, attention = read(model, text)
    matrices = [A for layer in attention for A in layer]
    return [[job_text(job, len(text)), labels, [(label, [format_number(x, 2) for x in row])
                                                for label, row in zip(labels, A)]]
            for job, A in zip(head_jobs(model, text), matrices, strict=True)]


@pytest.mark.parametrize("text", ["The cat the cat\U0001F642", "Caf\u00e9 2024!", "A", "  x  ",
                                  "\u00c0\u00c9\u00ce\u00d5", "in the beginning god crea"[:WINDOW], "<BOS> I like",
                                  "\U0001F44D\U0001F3FD \u0416"])
def test_trained_mode_reads_any_text_and_draws_every_head_with_its_job(text):
    result = json.loads(page_update("?" + urlencode({"trained": 1, "sentence": text})))
    assert result["ok"] is True, result
    assert result["settings"] == Settings(sentence=text, trained=True)._asdict()
    shown = heads_shown(result["html"])
    assert shown == heads_computed(text)  # both layers' heads, each named by its job, reading's numbers
    assert [h[0].split(":")[0] for h in shown] == [  # every head of every layer: 3 and 2 in the shipped run
        "layer 0 head 0", "layer 0 head 1", "layer 0 head 2", "layer 1 head 0", "layer 1 head 1"]
    labels = shown[0][1]
    assert len(labels) == len(text)  # one token per character, as typed
    assert all(label == "<unk>" for label, c in zip(labels, text) if c.lower() not in " !'(),.:;?abcdefghijklmnopqrstuvwxyz")
    assert all(label == "\u2423" for label, c in zip(labels, text) if c == " ")  # a space is shown as ␣
    assert LOOK_FOR in html.unescape(result["html"])
    assert result["command_intro"] == "Same numbers in Python:"
    assert result["command"] == ("from mha_lists.teaching.reading import read, trained_model; "
                                 f"read(trained_model(), {text!r})")
    assert parse_query(result["query"]) == Settings(sentence=text, trained=True)


def test_trained_mode_refuses_an_empty_text_and_one_longer_than_the_position_table_naming_its_limit():
    assert WINDOW == 16  # the shipped run's; the messages below take it from the model, not from this number
    longest = "x" * WINDOW
    assert json.loads(page_update("?trained=1&sentence=" + longest))["ok"] is True
    for n in (WINDOW + 1, 5000):  # past the page's 384 characters of random mode too: the model's limit is named
        result = json.loads(page_update("?trained=1&sentence=" + "x" * n))
        assert result["errors"] == {"sentence": f"the sentence has {n:,} characters; the trained model reads at most "
                                                f"{WINDOW} (its position table has {WINDOW} rows)"}
        assert result["error"] == "Sentence: " + result["errors"]["sentence"]  # beside the field, in the page's words
    with mock.patch.object(site, "trained_model", lambda: trained_model()._replace(
            position_embeddings=trained_model().position_embeddings[:10])):
        with mock.patch("mha_lists.teaching.reading.trained_model", site.trained_model):
            error = json.loads(page_update("?trained=1&sentence=" + "x" * 11))["error"]
    assert error.endswith("reads at most 10 (its position table has 10 rows)")  # a smaller table, a smaller limit
    assert json.loads(page_update("?trained=1&sentence=")) == {
        "ok": False, "errors": {"sentence": "the sentence is empty; give at least one character"},
        "error": "Sentence: the sentence is empty; give at least one character"}


def test_trained_query_strings():
    assert parse_query("?trained=1") == Settings(sentence=TRAINED_SENTENCE, trained=True)
    # seed, heads, d_model and causal do not apply: ignored, even where random mode would refuse them
    assert parse_query("?trained=on&heads=3&d_model=4096&seed=x&sentence=Hi") == Settings(sentence="Hi", trained=True)
    assert parse_query("?trained=0&seed=7") == Settings(seed=7)
    for settings in (Settings(sentence=" a\u00e9\U0001F642 ", trained=True), Settings(sentence="x" * 500, trained=True)):
        assert parse_query(query_string(settings)) == settings  # as typed: the spaces are characters
    assert "trained" not in query_string(Settings(seed=3))  # random mode's links are as they were


def test_a_job_is_named_with_the_shares_that_show_it():
    assert job_text(HeadJob(0, 1, 0.9312, 0.1, "previous character"), 17) == (
        "layer 0 head 1: previous character (0.93 of each character's weight, on average, on the one before it; "
        "0.10 of a repeated character's weight, on average, on what followed its earlier copies)")
    assert job_text(HeadJob(1, 0, 0.05, 0.714, "copies what came next last time"), 17) == (
        "layer 1 head 0: copies what came next last time (0.71 of a repeated character's weight, on average, on what "
        "followed its earlier copies; 0.05 of each character's weight, on average, on the one before it)")
    assert job_text(HeadJob(1, 1, 0.2, None, ""), 6) == (
        "layer 1 head 1: no clear job on this text (0.20 of each character's weight, on average, on the one before "
        "it; no character repeats)")
    assert job_text(HeadJob(0, 0, 0.0, None, ""), 1) == (
        "layer 0 head 0: no clear job on this text (a single character: none before it; no character repeats)")


def test_trained_html_checks_its_text():
    refused("trained_html", lambda: trained_html(None), TypeError)
    assert trained_html("hi") == walkthrough_html(Settings(sentence="hi", trained=True))


def test_the_built_page_carries_the_shipped_run_and_computes_trained_mode_on_its_own(tmp_path):
    out = tmp_path / "out"
    written = build_site(out, "pyodide/")
    assert TRAINED_FILES == ["data/read_text_run.json"]
    assert out / "mha_lists" / "data" / "read_text_run.json" in written
    run = "mha_lists/data/read_text_run.json"
    assert (out / run).read_bytes() == (ROOT / run).read_bytes()
    assert not (out / "mha_lists/data/genesis.txt").exists()  # reading a text needs the weights, not the book
    page = (out / "index.html").read_text(encoding="utf-8")
    config = json.loads(re.search(r'<script id="mha-config" type="application/json">(.*?)</script>', page).group(1))
    model = trained_model()
    assert config["trained"] == {"files": TRAINED_FILES, "sentence": TRAINED_SENTENCE, "window": WINDOW,
                                 "d_model": len(model.token_embeddings[0]), "layers": "layer 0: 3 heads, layer 1: 2 heads"}
    assert config["defaults"]["trained"] is False
    assert f"any text of 1 to {WINDOW} characters" in " ".join(page.split())
    assert 'name="trained" value="1" disabled> trained on Genesis' in page  # the switch, on once Python is ready
    # Only what the page wrote, no site-packages (-S): the module files and the run compute trained mode.
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import mha_lists.tools.site as site; "
            "print(site.__file__); print(site.page_update('?trained=1&sentence=Hi+hi'))")
    result = subprocess.run([sys.executable, "-S", "-c", code, str(out)], cwd=tmp_path, capture_output=True,
                            text=True, encoding="utf-8", timeout=120)
    assert result.returncode == 0, result.stderr
    where, answer = result.stdout.splitlines()
    assert where == str(out / "mha_lists" / "tools" / "site.py")
    assert json.loads(answer) == json.loads(page_update("?trained=1&sentence=Hi+hi"))
    (out / "mha_lists/data/read_text_run.json").unlink()  # without the run, trained mode says so (no traceback)
    result = subprocess.run([sys.executable, "-S", "-c", code, str(out)], cwd=tmp_path, capture_output=True,
                            text=True, encoding="utf-8", timeout=120)
    error = json.loads(result.stdout.splitlines()[1])["error"]
    assert result.returncode == 0 and "No such file or directory" in error and "read_text_run.json" in error


def test_every_trained_try_link_of_the_page_is_read_by_the_shipped_model():
    """The page's example links in trained mode fit the model's position table (16 rows today)."""
    page = (site.SITE_FILES / "index.html").read_text(encoding="utf-8")
    links = [html.unescape(href) for href in re.findall(r'href="(\?trained=1[^"]*)"', page)]
    assert len(links) >= 4
    for link in links:
        result = json.loads(page_update(link))
        assert result["ok"] is True, (link, result)
