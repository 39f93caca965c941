"""The web page in a real browser, and the module under Pyodide (CPython 3.14 on WebAssembly) in Node.

In headless Chromium, every host but 127.0.0.1 unreachable: the numbers are the CLI's; a phone's
390 px keeps each wide table's title and row labels in view; Back and Forward step through
changes; example links change only what they name; a bad field is quoted as typed and a
5,000-digit seed gets its limit without widening the page; the word buttons and the heatmap's
reading work with the keyboard (no hover title); progress shows while Python loads; and only
the module files the page imports are fetched. In trained mode, any text (a capital, an emoji) shows
the trained model's 4 heads with CPython's numbers and each head's job, a text too long gets the
model's limit, the shipped run is fetched once from the page's folder, and at 390 px each heatmap
fits or scrolls in its box with a cue. Screenshots go to build/screenshots/.

What these need, and where they get it (CI installs all of it, see .ci/run):
  - node, and `npm ci` at the repository root (the `pyodide` npm package, served locally);
  - Debian's chromium at /usr/bin/chromium (`apt-get install chromium`);
  - Playwright for Python (`pip install -e ".[browser]"`), driving that chromium; it never
    downloads a browser of its own.
Where one is missing each test skips and says which; with MHA_LISTS_REQUIRE_BROWSER=1 (set by
CI) the skip is a failure instead, so CI cannot pass without having run them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from urllib.parse import quote, urlencode, urlsplit

import pytest

from mha_lists.teaching.display import format_number
from mha_lists.teaching.example import TRAINED_SENTENCE, VOCAB
from mha_lists.teaching.reading import head_jobs, read, trained_model
from mha_lists.tools.site import MAX_DIGITS, Settings, build_site, job_text, module_files, page_update, parse_query
from no_install_helpers import (PYODIDE_DIR, ROOT, chromium, cli_headings, cli_tables, need_node_and_pyodide,
                                run_in_pyodide, serve)

SCREENSHOTS = ROOT / "build" / "screenshots"
PHONE = {"width": 390, "height": 844}

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

@pytest.fixture(scope="module")
def site_url(tmp_path_factory):
    """The site built with a local Pyodide (pyodide/ beside index.html), served on 127.0.0.1."""
    need_node_and_pyodide()
    site = tmp_path_factory.mktemp("site")
    build_site(site, "pyodide/")
    shutil.copytree(PYODIDE_DIR, site / "pyodide")
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """Headless Debian chromium through Playwright, fresh profile; every request recorded, none let out."""
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as context:
        yield context


def open_page(context, url: str, state: str = "computed", viewport: dict = None):
    page = context.new_page()
    if viewport:
        page.set_viewport_size(viewport)
    page.goto(url)
    page.wait_for_function(
        "['computed', 'error', 'failed'].includes(document.body.dataset.state)", timeout=180_000)
    assert page.evaluate("document.body.dataset.state") == state, page.inner_text("#status")
    return page


READ_PAGE = """() => {
  const text = (element) => element.textContent.split(/\\s+/).filter(Boolean).join(" ");
  const tables = [...document.querySelectorAll("#walkthrough figure.matrix")].map((figure) => [
    text(figure.querySelector("figcaption")),
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
    assert not [url for url in browser_context.requests if url.endswith("favicon.ico")]  # the page names its icon


def test_one_head_is_one_head(site_url, browser_context):
    page = open_page(browser_context, site_url + "?heads=1")
    assert page.inner_text("#status").startswith("Computed in your browser: 1 head, d_model 16")
    page.close()


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
    page.click("a.example[href='?heads=8']")  # a "Try" link: 8 heads, everything else kept, no reload
    page.wait_for_function("document.querySelector('#walkthrough').textContent.includes('num_heads = 8')")
    assert_page_shows(page, cli("--causal", "--sentence", "<BOS> I like transformers", "--heads", "8"))
    assert "heads=8" in page.url and "causal=1" in page.url
    page.close()
    assert_stayed_local(browser_context)


def test_bad_settings_show_the_library_message(site_url, browser_context):
    page = open_page(browser_context, site_url + "?heads=3", state="error")
    expected = json.loads(page_update("?heads=3"))["error"]
    assert expected.startswith("3 heads cannot share d_model = 16 columns equally; choose heads among 1, 2, 4, 8")
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


# === A phone, the keyboard, the history ===

def recomputed(page, text: str) -> None:
    """Wait until the walkthrough shows text (Python has recomputed)."""
    page.wait_for_function(f"document.querySelector('#walkthrough').textContent.includes({json.dumps(text)})")


def set_field(page, field: str, value: str) -> None:
    page.fill(f"#{field}", value)
    page.dispatch_event(f"#{field}", "change")


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_at_phone_width_a_wide_table_scrolls_with_its_row_labels_in_view(site_url, browser_context):
    page = open_page(browser_context, site_url, viewport=PHONE)
    assert page_width(page) <= PHONE["width"]  # the page itself never scrolls sideways
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page-390.png"))
    figure = page.locator("figure.matrix").filter(has_text="W_O").first
    figure.scroll_into_view_if_needed()
    before = figure.evaluate("(f) => [f.scrollWidth, f.clientWidth]")
    assert before[0] > before[1]  # wider than the phone: it scrolls in its box
    figure.evaluate("(f) => { f.scrollLeft = f.scrollWidth; }")
    box = figure.bounding_box()
    assert figure.evaluate("(f) => f.scrollLeft") > 0
    labels = figure.locator("tbody th")
    for n in range(labels.count()):  # every row label still inside the box, at its left edge
        label = labels.nth(n).bounding_box()
        assert box["x"] - 0.5 <= label["x"] <= box["x"] + 2, (n, label, box)
    caption = figure.locator("figcaption").bounding_box()
    assert box["x"] - 0.5 <= caption["x"] <= box["x"] + 2
    page.screenshot(path=str(SCREENSHOTS / "page-390-scrolled.png"))
    page.close()
    assert_stayed_local(browser_context)


def test_back_and_forward_step_through_changes(site_url, browser_context):
    page = open_page(browser_context, site_url)
    page.check("#causal")
    recomputed(page, "mask = causal")
    set_field(page, "heads", "4")
    recomputed(page, "num_heads = 4")
    assert_page_shows(page, cli("--causal", "--heads", "4"))
    page.go_back()
    recomputed(page, "num_heads = 2")
    assert_page_shows(page, cli("--causal"))
    assert page.input_value("#heads") == "2" and page.is_checked("#causal")
    page.go_back()  # the page as it opened
    page.wait_for_function("!document.querySelector('#walkthrough').textContent.includes('mask = causal')")
    assert_page_shows(page, cli())
    assert not page.is_checked("#causal") and page.url == site_url
    page.go_forward()
    recomputed(page, "mask = causal")
    assert_page_shows(page, cli("--causal"))
    page.go_forward()
    recomputed(page, "num_heads = 4")
    assert_page_shows(page, cli("--causal", "--heads", "4"))
    assert page.input_value("#heads") == "4"
    page.close()
    assert_stayed_local(browser_context)


def test_example_links_change_only_what_they_name(site_url, browser_context):
    page = open_page(browser_context, site_url + "?seed=7&d_model=8")
    page.click("a.example[href='?causal=1']")
    recomputed(page, "mask = causal")
    assert_page_shows(page, cli("--seed", "7", "--d-model", "8", "--causal"))
    page.click("a.example[href='?heads=1']")
    recomputed(page, "num_heads = 1")
    assert_page_shows(page, cli("--seed", "7", "--d-model", "8", "--causal", "--heads", "1"))
    assert [page.input_value(f"#{name}") for name in ("seed", "heads", "d_model")] == ["7", "1", "8"]
    page.close()
    assert_stayed_local(browser_context)


@pytest.mark.parametrize("viewport", [PHONE, {"width": 1600, "height": 1000}], ids=["390px", "desktop"])
def test_an_invalid_field_is_quoted_as_typed_and_a_huge_seed_gets_its_limit(site_url, browser_context, viewport):
    page = open_page(browser_context, site_url, viewport=viewport)
    set_field(page, "seed", "abc")
    page.wait_for_function("document.body.dataset.state === 'error'")
    assert page.inner_text("#error") == "seed: 'abc' is not a whole number"
    assert page.input_value("#seed") == "abc"  # the field keeps what was typed
    set_field(page, "seed", "9" * 5000)
    page.wait_for_function("document.querySelector('#error').textContent.includes('digits')")
    assert page.inner_text("#error") == f"seed has 5,000 digits; this page takes at most {MAX_DIGITS}"
    assert page_width(page) <= viewport["width"]  # the layout holds
    name = "page-huge-seed-390.png" if viewport is PHONE else "page-huge-seed.png"
    page.screenshot(path=str(SCREENSHOTS / name))
    set_field(page, "d_model", "4096")
    set_field(page, "seed", "7")
    page.wait_for_function("document.querySelector('#error').textContent.includes('4096')")
    assert page.inner_text("#error") == "d_model is 4096; this page draws at most 64"
    assert page.is_hidden("#command-line")  # no command that would print for minutes
    page.close()
    assert_stayed_local(browser_context)


def test_explanations_and_word_buttons_work_with_the_keyboard(site_url, browser_context):
    page = open_page(browser_context, site_url)
    assert page.evaluate("document.querySelectorAll('body [title]').length") == 0  # nothing hides behind a hover
    how = page.locator("figure.weights .how").first
    assert how.is_visible() and how.inner_text().startswith("How to read it: row <EOS>, column ")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("figure.weights").first.screenshot(path=str(SCREENSHOTS / "heatmap.png"))
    words = page.get_by_role("group", name="Add a word:")
    assert words.get_by_role("button").all_inner_texts() == VOCAB + ["\u232b remove the last word"]
    page.focus("#sentence")
    page.keyboard.press("Tab")  # the next stop is the vocabulary's first word
    assert page.evaluate("document.activeElement.textContent") == VOCAB[0]
    for _ in range(VOCAB.index("I")):
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # adds "I"
    recomputed(page, "seq_len = 6")
    assert page.input_value("#sentence") == "<BOS> I like transformers <EOS> I"
    assert_page_shows(page, cli("--sentence", "<BOS> I like transformers <EOS> I"))
    page.close()
    assert_stayed_local(browser_context)


WATCH_PROGRESS = """
window.mhaProgress = [];  // every text the progress line shows, from before the page's script runs
new MutationObserver(() => {
  const text = document.getElementById("progress-text");
  const last = window.mhaProgress[window.mhaProgress.length - 1];
  if (text && text.textContent && text.textContent !== last) window.mhaProgress.push(text.textContent);
}).observe(document, {childList: true, characterData: true, subtree: true});
"""


def test_progress_is_shown_while_python_loads_and_only_the_pages_modules_are_fetched(site_url, browser_context):
    first = len(browser_context.requests)
    page = browser_context.new_page()
    page.add_init_script(WATCH_PROGRESS)
    page.goto(site_url + "?seed=3")
    page.wait_for_selector("#loading progress", state="visible")
    page.screenshot(path=str(SCREENSHOTS / "page-loading.png"))
    page.wait_for_function("document.body.dataset.state === 'computed'", timeout=180_000)
    assert page.is_hidden("#loading")
    steps = page.evaluate("window.mhaProgress")
    files = module_files()
    assert steps[0].startswith("Loading Python (Pyodide") and steps[0].endswith(f"(step 1 of {len(files) + 3})")
    loaded = [text.split()[1] for text in steps if text.startswith("Loading mha_lists/")]
    assert loaded == [f"mha_lists/{name}" for name in files]
    assert [s for s in steps if s.startswith(("Importing", "Python ready"))][:2] == [
        f"Importing mha_lists (step {len(files) + 2} of {len(files) + 3})", steps[-1]]
    assert steps[-1].startswith("Python ready in ")
    fetched = sorted(urlsplit(url).path.split("/mha_lists/", 1)[1] for url in browser_context.requests[first:]
                     if "/mha_lists/" in urlsplit(url).path)
    assert fetched == files and "tools/bench.py" not in fetched and "teaching/training.py" not in fetched
    page.close()
    assert_stayed_local(browser_context)


# === Trained mode: the model trained on Genesis reads any text ===

REPEAT = "The cat the cat\U0001F642"  # a phrase twice, a capital, and an emoji the book lacks (<unk>)

READ_HEADS = """() => [...document.querySelectorAll("#walkthrough figure.head-map")].map((figure) => {
  const text = (element) => element.textContent.split(/\\s+/).filter(Boolean).join(" ");
  const [header, ...rows] = figure.querySelectorAll("tr");
  return [text(figure.querySelector("h3")), [...header.querySelectorAll("th")].slice(1).map(text),
          rows.map((tr) => [text(tr.querySelector("th")), [...tr.querySelectorAll("td")].map(text)])];
})"""


def trained_expected(sentence: str) -> list:
    """What CPython computes for the trained model reading sentence, as the page must show it: per head
    (layer 0 first) its heading, its column labels and its rows of 2-digit weights."""
    model = trained_model()
    labels, attention = read(model, sentence)
    jobs = head_jobs(model, sentence)
    matrices = [A for layer in attention for A in layer]
    assert len(jobs) == len(matrices) == 4  # 2 layers of 2 heads
    return [[job_text(job, len(labels)), labels,
             [[label, [format_number(x, 2) for x in row]] for label, row in zip(labels, A)]]
            for job, A in zip(jobs, matrices)]


def trained_shown(page, sentence: str) -> None:
    """Wait until the page shows the trained model reading sentence (Python has recomputed), or an error."""
    page.wait_for_function("""(sentence) => ['error', 'failed'].includes(document.body.dataset.state)
        || document.body.dataset.state === 'computed' && document.body.dataset.mode === 'trained'
        && [...document.querySelectorAll('#walkthrough .summary li')].some((li) => li.textContent === 'text: ' + sentence)""",
                           arg=sentence, timeout=60_000)
    assert page.evaluate("document.body.dataset.state") == "computed", page.inner_text("#error")


def data_requests(context, first: int) -> list[str]:
    return [urlsplit(url).path for url in context.requests[first:] if "/mha_lists/data/" in url]


def test_trained_mode_shows_every_trained_head_of_any_text_offline(site_url, browser_context):
    first = len(browser_context.requests)
    page = open_page(browser_context, site_url)
    assert page.is_hidden("#trained-note") and page.is_enabled("#seed")
    page.check("input[name='trained'][value='1']")  # the switch: random weights -> trained on Genesis
    trained_shown(page, TRAINED_SENTENCE)
    assert page.input_value("#sentence") == TRAINED_SENTENCE
    for name in ("seed", "heads", "d_model", "causal"):  # off, and the note says why
        assert page.is_disabled(f"#{name}"), name
    note = page.inner_text("#trained-note")
    model = trained_model()
    assert page.is_visible("#trained-note") and note.startswith("Seed, heads, d_model and the causal mask are off")
    sizes = f"d_model {len(model.token_embeddings[0])}, {len(model.layers)} layers of {len(model.layers[0].W_Q)} heads"
    assert sizes in note  # the shipped run's own, read when the page was built
    assert page.is_hidden(".words")  # any text is read: no vocabulary to pick from
    hint = page.inner_text("#sentence-hint")
    assert hint.startswith(f"any text of 1 to {len(model.position_embeddings)} characters")

    set_field(page, "sentence", REPEAT)
    trained_shown(page, REPEAT)
    shown = page.evaluate(READ_HEADS)
    assert shown == trained_expected(REPEAT)  # 4 heatmaps, each head named by its job, CPython's numbers
    assert shown[0][1][-1] == "<unk>" and shown[0][1][3] == "\u2423"  # the emoji, and a space shown as ␣
    assert [heading.split(":")[0] for heading, _, _ in shown] == [
        "layer 0 head 0", "layer 0 head 1", "layer 1 head 0", "layer 1 head 1"]
    assert page.inner_text(".look").startswith("What to look for: a dark stripe just below the diagonal")
    assert page.inner_text("#status").startswith(
        f"Computed in your browser: the model trained on Genesis (2 layers of 2 heads, d_model 24) reading {len(REPEAT)} "
        "characters")
    assert parse_query(urlsplit(page.url).query) == Settings(sentence=REPEAT, trained=True)  # a link to share
    assert page.inner_text("#command-intro") == "Same numbers in Python:"
    assert page.inner_text("#command") == json.loads(page_update("?" + urlsplit(page.url).query))["command"]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page-trained.png"), full_page=True)

    too_long = "a" * (len(model.position_embeddings) + 1)
    set_field(page, "sentence", too_long)
    page.wait_for_function("document.body.dataset.state === 'error'")
    expected = json.loads(page_update("?" + urlencode({"trained": 1, "sentence": too_long})))["error"]
    window = len(model.position_embeddings)
    assert page.inner_text("#error") == expected == (
        f"running_example: the sentence has {window + 1} characters; the trained model reads at most {window} "
        f"(its position table has {window} rows)")
    assert page.input_value("#sentence") == too_long  # the box keeps what was typed

    page.go_back()
    trained_shown(page, REPEAT)
    page.go_back()
    trained_shown(page, TRAINED_SENTENCE)
    page.go_back()  # the page as it opened: random weights, every control back on
    page.wait_for_function("document.body.dataset.mode === 'random' && document.body.dataset.state === 'computed'")
    assert_page_shows(page, cli())
    assert page.input_value("#sentence") == "<BOS> I like transformers <EOS>" and page.is_enabled("#seed")
    assert page.is_visible(".words") and page.is_hidden("#trained-note")
    page.close()
    # The shipped run came from the page's own folder, once; the book itself is never needed.
    assert data_requests(browser_context, first) == ["/mha_lists/data/read_text_run.json"]
    assert_stayed_local(browser_context)


def test_a_trained_try_link_keeps_the_mode_and_random_links_switch_back(site_url, browser_context):
    page = open_page(browser_context, site_url + "?seed=7&heads=4")
    page.click("a.example[href='?trained=1']")
    trained_shown(page, TRAINED_SENTENCE)
    assert page.is_hidden("a.example[href='?heads=8']")  # the random weights' examples are hidden
    page.click("a.example:has-text('a phrase twice')")
    trained_shown(page, "the cat. the cat")
    assert page.evaluate(READ_HEADS) == trained_expected("the cat. the cat")
    page.click("a.example[href='?trained=0']")
    page.wait_for_function("document.body.dataset.mode === 'random' && document.body.dataset.state === 'computed'")
    assert_page_shows(page, cli("--seed", "7", "--heads", "4"))  # the random settings were kept
    page.close()
    assert_stayed_local(browser_context)


FIT = """() => [...document.querySelectorAll("#walkthrough figure.head-map")].map((figure) => {
  const box = figure.querySelector(".scroll"), cue = figure.querySelector(".scroll-cue");
  const right = (element) => element.getBoundingClientRect().right;
  return {scrolls: box.scrollWidth > box.clientWidth + 1, cue: cue.offsetParent !== null,
          right: Math.max(right(figure), right(box), right(figure.querySelector("h3")))};
})"""


def test_at_phone_width_trained_mode_fits_or_scrolls_in_its_box_with_a_cue(site_url, browser_context):
    page = open_page(browser_context, site_url + "?" + urlencode({"trained": 1, "sentence": REPEAT}),
                     viewport=PHONE)
    trained_shown(page, REPEAT)
    assert page.evaluate(READ_HEADS) == trained_expected(REPEAT)
    assert page_width(page) <= PHONE["width"]  # the page itself never scrolls sideways
    for selector in ("fieldset.mode", "#sentence", "#trained-note", ".look", "#status", "#command-line"):
        box = page.locator(selector).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], selector
    boxes = page.evaluate(FIT)
    assert len(boxes) == 4
    for n, box in enumerate(boxes):
        assert box["right"] <= PHONE["width"], (n, box)  # nothing runs off the screen ...
        assert box["scrolls"] and box["cue"], (n, box)  # ... 19 columns scroll in their box, and say so
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page-trained-390.png"), full_page=True)
    figure = page.locator("figure.head-map").nth(2)
    figure.scroll_into_view_if_needed()
    scroll = figure.locator(".scroll")
    scroll.evaluate("(box) => { box.scrollLeft = box.scrollWidth; }")
    assert scroll.evaluate("(box) => box.scrollLeft") > 0
    left = scroll.bounding_box()["x"]
    labels = figure.locator("tr > th:first-child")
    for n in range(1, labels.count()):  # every row label still in view, at the box's left edge
        assert left - 0.5 <= labels.nth(n).bounding_box()["x"] <= left + 2, n
    page.screenshot(path=str(SCREENSHOTS / "page-trained-390-scrolled.png"))

    set_field(page, "sentence", "hi")  # 2 columns fit: no cue
    trained_shown(page, "hi")
    assert [(box["scrolls"], box["cue"]) for box in page.evaluate(FIT)] == [(False, False)] * 4
    page.close()
    assert_stayed_local(browser_context)
