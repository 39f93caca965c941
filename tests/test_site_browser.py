"""The web page in a real browser, and the module under Pyodide (CPython 3.14 on WebAssembly) in Node.

The page is built by the README's commands, exactly as written (``npm ci``, then the build, which
bundles Pyodide), and served by ``python -m http.server``, as the README says. In headless Chromium,
every host but 127.0.0.1 unreachable: the page computes, and its numbers are the CLI's; at a phone's
390 px every matrix fits or scrolls in its box with a cue, its row labels in view, no number split
from its minus sign; Back and Forward step through changes; example links change only what they
name, also while Python is still loading; every bad field is marked at once, its message beside it,
quoted as typed, and a 5,000-digit seed gets its limit without widening the page; no request fails
(the icon is in the page); the word buttons and the heatmap's reading work with the keyboard;
every score, weight and head-output entry, pointed at or focused, shows CPython's ``.explain(i, j)``
(its title, its accessible name, and the line under its table), at a phone's width too; the embedding
tables and every head's W_Q, W_K, W_V open from their folds and scroll in their boxes at 390 px;
progress shows while Python loads; and only the module files the page imports are fetched. In trained mode, any text (a capital, an emoji) shows every head of the trained model with
CPython's numbers and each head's job, a text too long gets the model's limit beside the field, the
shipped run is fetched once from the page's folder, and at 390 px each heatmap fits or scrolls in its
box with a cue. Screenshots go to build/screenshots/.

What these need, and where they get it (CI installs all of it, see .ci/run):
  - node and npm, and `npm ci` at the repository root (the `pyodide` npm package: the Node tests use
    it, and the README's `npm ci`, run in a scratch folder, fetches the same version);
  - Debian's chromium at /usr/bin/chromium (`apt-get install chromium`);
  - Playwright for Python (`pip install -e ".[browser]"`), driving that chromium; it never
    downloads a browser of its own.
Where one is missing each test skips and says which; with MHA_LISTS_REQUIRE_BROWSER=1 (set by
CI) the skip is a failure instead, so CI cannot pass without having run them.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from urllib.parse import quote, urlencode, urlsplit

import pytest

from mha_lists.teaching.display import format_number
from mha_lists.teaching.example import TRAINED_SENTENCE, VOCAB
from mha_lists.teaching.reading import head_jobs, read, trained_model
from mha_lists.teaching.model import check_model
from mha_lists.tools.site import (FIELDS, MAX_DIGITS, PYODIDE_FILES, Settings, job_text, layers_text, module_files,
                                   page_update, parse_query)
from no_install_helpers import (ROOT, chromium, cli_headings, cli_tables, need, need_node_and_pyodide, run_in_pyodide,
                                serve_as_the_readme_does)

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

def readme_page_commands() -> list[list[str]]:
    """The README's commands for the web page, as written: the words of each line of its code block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("**The web page.**", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line]


@pytest.fixture(scope="module")
def readme_site(tmp_path_factory):
    """The site the README's commands build, run as written, one after the other, in a fresh folder that
    holds what `npm ci` reads (the repository's package.json and package-lock.json): a checkout as a
    teacher has it, without touching the repository's own node_modules. Yields (site folder, what the
    build printed)."""
    need_node_and_pyodide()
    need(shutil.which("npm") is not None, "npm is not installed")
    commands = readme_page_commands()
    assert commands[-1][:3] == ["python", "-m", "mha_lists.tools.site"], commands  # the build, last
    work = tmp_path_factory.mktemp("readme")
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(ROOT / name, work / name)
    printed = ""
    for words in commands:
        argv = [sys.executable, *words[1:]] if words[0] == "python" else [shutil.which(words[0]) or words[0], *words[1:]]
        result = subprocess.run(argv, cwd=work, capture_output=True, text=True, encoding="utf-8", timeout=600)
        if words[0] == "npm":
            need(result.returncode == 0, f"`{shlex.join(words)}` failed here: {result.stderr.strip()[-300:]}")
        assert result.returncode == 0, (words, result.stderr)
        printed += result.stdout + result.stderr
    yield work / commands[-1][3], printed


@pytest.fixture(scope="module")
def site_url(readme_site):
    """The README's site, served as the README says (python -m http.server -d _site) on 127.0.0.1."""
    with serve_as_the_readme_does(readme_site[0]) as port:
        yield f"http://127.0.0.1:{port}/"


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
  const tables = [...document.querySelectorAll("#walkthrough figure.matrix:not(.param)")].map((figure) => [
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


def test_the_readmes_commands_give_a_page_that_computes_offline_with_the_cli_numbers(readme_site, site_url,
                                                                                     browser_context):
    folder, printed = readme_site
    assert "WARNING" not in printed and "with Python (Pyodide) in pyodide/: works offline" in printed
    assert sorted(path.name for path in (folder / "pyodide").iterdir()) == sorted(PYODIDE_FILES)
    first, blocked = len(browser_context.requests), len(browser_context.blocked)
    page = browser_context.new_page()
    failed = []
    page.on("response", lambda response: response.status >= 400 and failed.append((response.url, response.status)))
    page.goto(site_url)  # every host but 127.0.0.1 is unreachable
    page.wait_for_function("['computed', 'error', 'failed'].includes(document.body.dataset.state)", timeout=180_000)
    assert page.evaluate("document.body.dataset.state") == "computed", page.inner_text("#status")
    assert page.inner_text("#status").startswith("Computed in your browser: 2 heads, d_model 16")
    assert_page_shows(page, cli())
    set_field(page, "seed", "7")
    recomputed(page, "seed = 7")
    assert_page_shows(page, cli("--seed", "7"))
    fetched = {urlsplit(url).path for url in browser_context.requests[first:]}
    assert {f"/pyodide/{name}" for name in PYODIDE_FILES} <= fetched  # Python came from the page's own folder
    assert browser_context.blocked[blocked:] == []  # nothing even tried to leave
    assert failed == [], failed  # every file the page asked for was there: no 404, the icon's included
    icon = page.evaluate("[...document.querySelectorAll('link[rel~=icon]')].map((link) => link.href)")
    assert len(icon) == 1 and icon[0].startswith("data:image/svg+xml,")  # in the page: no /favicon.ico to ask for
    assert "/favicon.ico" not in fetched
    page.close()
    assert_stayed_local(browser_context)


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
    assert expected.startswith("Heads: 3 heads cannot share d_model = 16 columns equally; choose heads among 1, 2, 4, 8")
    assert page.inner_text("#error") == expected
    assert page.inner_text("#heads-error") == expected.removeprefix("Heads: ")
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


MATRICES = """(selector) => [...document.querySelectorAll(selector)].map((figure) => {
  const box = figure.querySelector(".scroll"), cue = figure.querySelector(".scroll-cue");
  return {title: figure.querySelector("figcaption").textContent, scrolls: box.scrollWidth > box.clientWidth + 1,
          cue: cue.offsetParent !== null, cueText: cue.textContent,
          right: Math.max(figure.getBoundingClientRect().right, box.getBoundingClientRect().right)};
})"""

# Every number of every matrix on one line: a cell whose text the browser lays out on two lines has split it.
SPLIT_NUMBERS = """() => [...document.querySelectorAll("#walkthrough figure.matrix td")].filter((td) => {
  const range = document.createRange();
  range.selectNodeContents(td);
  return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size !== 1;
}).map((td) => td.textContent)"""


def test_at_phone_width_every_matrix_fits_or_scrolls_in_its_box_with_a_cue_and_its_row_labels(site_url,
                                                                                            browser_context):
    page = open_page(browser_context, site_url, viewport=PHONE)  # random weights, d_model 16, the weights shown
    assert page_width(page) <= PHONE["width"]  # the page itself never scrolls sideways
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "page-390.png"))
    boxes = page.evaluate(MATRICES, "#walkthrough figure.matrix:not(.param)")
    assert [box["title"] for box in boxes] == [caption for caption, _, _ in cli_tables(cli())]
    for box in boxes:
        assert box["right"] <= PHONE["width"], box  # nothing runs off the screen ...
        assert box["scrolls"] == box["cue"], box  # ... and a box that scrolls says so, one that fits does not
    scrolling = [box["title"] for box in boxes if box["scrolls"]]
    assert {"X (5x16)", "Q, head 0 (5x8)", "weights, head 0 (5x5)", "W_O (16x16)"} <= set(scrolling)
    cue = next(box["cueText"] for box in boxes if box["title"] == "X (5x16)")
    assert cue == "Wider than the screen: scroll sideways in the box to see all 16 columns \u21c6"
    assert page.evaluate(SPLIT_NUMBERS) == []
    assert page.locator("figure.matrix td", has_text="-0.").count() > 0  # there are minus signs to split
    for title, name in (("weights, head 0 (5x5)", "weights"), ("Q, head 0 (5x8)", "q"), ("W_O (16x16)", "w-o")):
        figure = page.locator("figure.matrix").filter(has=page.locator("figcaption", has_text=title)).first
        figure.scroll_into_view_if_needed()
        assert figure.evaluate("(f) => f.hasAttribute('data-scrolls') && !f.hasAttribute('data-at-end')")
        figure.screenshot(path=str(SCREENSHOTS / f"page-390-{name}.png"))
        box = figure.locator(".scroll")
        box.evaluate("(b) => { b.scrollLeft = b.scrollWidth; }")
        assert box.evaluate("(b) => b.scrollLeft") > 0
        page.wait_for_function("(f) => f.hasAttribute('data-at-end')", arg=figure.element_handle())  # no more fade
        left = box.bounding_box()["x"]
        labels = figure.locator("tbody th")
        for n in range(labels.count()):  # every row label still in view, at the box's left edge
            label = labels.nth(n).bounding_box()
            assert left - 0.5 <= label["x"] <= left + 2, (title, n, label, left)
        figure.screenshot(path=str(SCREENSHOTS / f"page-390-{name}-scrolled.png"))
    page.close()
    assert_stayed_local(browser_context)


def explain_texts(settings: Settings) -> dict:
    """CPython's .explain(i, j) of display's explained views of this example, by table caption and entry."""
    from mha_lists import attention_trace, causal_mask, running_example
    from mha_lists.teaching.display import explained_outputs, explained_scores, explained_weights
    ex = running_example(sentence=settings.sentence, d_model=settings.d_model, num_heads=settings.heads,
                         seed=settings.seed)
    mask = causal_mask(len(ex.tokens)) if settings.causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    views = {}
    for h in range(settings.heads):
        views[f"scores, head {h}"] = explained_scores(trace.Q[h], trace.K[h], ex.tokens, mask=mask)
        views[f"weights, head {h}"] = explained_weights(trace.scores[h], ex.tokens, mask=mask)
        views[f"output, head {h}"] = explained_outputs(trace.attention[h], trace.V[h], ex.tokens)
    return views


def described(page, selector: str) -> dict:
    """What Chromium's accessibility tree says of an element: its name and description (through CDP)."""
    cdp = page.context.new_cdp_session(page)
    try:
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        ax = cdp.send("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False})["nodes"][0]
    finally:
        cdp.detach()
    return {key: ax.get(key, {}).get("value", "") for key in ("name", "description")}


@pytest.mark.parametrize("viewport", [PHONE, {"width": 1600, "height": 1000}], ids=["390px", "desktop"])
def test_pointing_at_or_focusing_a_number_shows_how_it_was_made_as_cpython_explains_it(site_url, browser_context,
                                                                                       viewport):
    settings = Settings(seed=7, heads=4, causal=True)
    views = explain_texts(settings)
    page = open_page(browser_context, site_url + "?seed=7&heads=4&causal=1", viewport=viewport)
    caption_of = "(figure) => figure.querySelector('figcaption').textContent.replace(/ \\(.*$/, '')"
    for title, (i, j) in (("scores, head 1", (4, 2)), ("weights, head 3", (3, 0)), ("output, head 0", (2, 1)),
                          ("scores, head 2", (1, 3))):  # the last: masked, -inf, and says why
        expected = views[title].explain(i, j)
        figure = page.locator("figure.matrix").filter(has=page.locator("figcaption", has_text=title + " (")).first
        assert figure.evaluate(caption_of) == title
        entry = figure.locator("tbody tr").nth(i).locator("td a").nth(j)
        assert entry.get_attribute("title") == expected  # the tooltip a pointer shows, CPython's text
        said = figure.locator(".said")
        assert said.inner_text().startswith("Point at a number (or Tab to it)")
        entry.hover()
        page.wait_for_function("(s) => s.textContent !== '' && !s.textContent.startsWith('Point at')",
                               arg=said.element_handle())
        assert said.text_content() == expected and said.is_visible()
        assert entry.evaluate("(a) => a.classList.contains('pointed')")
        page.mouse.move(0, 0)
        entry.evaluate("(a) => a.blur()")
    # The keyboard: Tab from a matrix's box to its first entry, and on to the next; each shows its text.
    figure = page.locator("figure.matrix").filter(has=page.locator("figcaption", has_text="scores, head 0 (")).first
    figure.locator(".scroll").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.title") == views["scores, head 0"].explain(0, 0)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.title") == views["scores, head 0"].explain(0, 1)
    assert figure.locator(".said").text_content() == views["scores, head 0"].explain(0, 1)
    # What a screen reader gets on focus: the title, lines joined (an <a> without href names itself by its title,
    # and the text ends in the number shown).
    ax = described(page, "figure.matrix td a[title]")
    assert " ".join(views["scores, head 0"].explain(0, 0).split()) in (ax["name"], ax["description"]), ax
    assert page_width(page) <= viewport["width"]  # the explanation wraps under its table; the page holds
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    suffix = "-390" if viewport is PHONE else ""
    figure.scroll_into_view_if_needed()
    figure.screenshot(path=str(SCREENSHOTS / f"page-explained{suffix}.png"))
    page.close()
    assert_stayed_local(browser_context)


def test_the_weight_matrices_and_embedding_tables_are_shown_folded_and_fit_a_phone(site_url, browser_context):
    page = open_page(browser_context, site_url, viewport=PHONE)
    from mha_lists import running_example
    ex = running_example()
    folds = page.locator("#walkthrough details.params")
    assert folds.count() == 3  # the embeddings, then head 0's and head 1's W_Q, W_K, W_V
    assert page.locator("#walkthrough figure.param").first.is_hidden()  # folded until opened
    for n in range(folds.count()):
        folds.nth(n).locator("summary").click()
    boxes = page.evaluate(MATRICES, "#walkthrough figure.param")
    assert [box["title"] for box in boxes] == [
        "token table (6x16)", "position table (8x16)",
        *(f"{name}, head {h} (16x8)" for h in range(2) for name in ("W_Q", "W_K", "W_V"))]
    for box in boxes:
        assert box["right"] <= PHONE["width"] and box["scrolls"] and box["cue"], box
    assert page_width(page) <= PHONE["width"]
    token = page.locator("figure.param").first
    assert token.locator("tbody th").all_inner_texts() == ex.vocab
    assert token.locator("tbody tr").first.locator("td").all_inner_texts() == [
        format_number(x, 4) for x in ex.token_embeddings[0]]
    w_q = page.locator("figure.param").nth(2)
    assert w_q.locator("tbody tr").nth(3).locator("td").all_inner_texts() == [
        format_number(x, 4) for x in ex.weights.W_Q[0][3]]
    w_q.scroll_into_view_if_needed()
    box = w_q.locator(".scroll")
    box.evaluate("(b) => { b.scrollLeft = b.scrollWidth; }")
    left = box.bounding_box()["x"]
    for label in w_q.locator("tbody th").all():  # row labels stay in view, as in every matrix
        assert left - 0.5 <= label.bounding_box()["x"] <= left + 2
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#step-1").screenshot(path=str(SCREENSHOTS / "page-390-embeddings.png"))
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


def test_example_links_and_back_work_while_python_is_still_loading(site_url, browser_context):
    page = browser_context.new_page()
    held = []  # Python's WebAssembly, held back: the page stays "loading" until the test lets it through
    page.route("**/pyodide/pyodide.asm.wasm", lambda route: held.append(route))
    page.goto(site_url + "?seed=7")
    page.wait_for_function("document.body.dataset.state === 'loading'")
    page.evaluate("window.sameDocument = true")  # gone if the page reloads
    page.click("a.example[href='?causal=1']")
    assert "seed=7" in page.url and "causal=1" in page.url and page.is_checked("#causal")
    assert page.inner_text("#status").startswith("This example is computed as soon as Python has loaded")
    assert page.evaluate("document.getElementById('walkthrough').classList.contains('stale')")  # still the default's
    page.click("a.example[href='?heads=1']")
    assert "heads=1" in page.url and "causal=1" in page.url and page.input_value("#heads") == "1"
    page.go_back()
    page.wait_for_function("!location.search.includes('heads=1')")
    assert page.input_value("#heads") == "2" and page.is_checked("#causal")
    page.go_forward()
    page.wait_for_function("location.search.includes('heads=1')")
    assert page.input_value("#heads") == "1"
    page.wait_for_function("document.body.dataset.state === 'loading'")
    assert page.evaluate("window.sameDocument") is True  # no reload: one Python, still loading
    for _ in range(600):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "Pyodide never asked for its WebAssembly"
    held[0].continue_()
    page.wait_for_function("document.body.dataset.state === 'computed'", timeout=180_000)
    assert page.evaluate("window.sameDocument") is True
    assert_page_shows(page, cli("--seed", "7", "--causal", "--heads", "1"))  # the last link's example, computed
    assert not page.evaluate("document.getElementById('walkthrough').classList.contains('stale')")
    page.close()
    assert_stayed_local(browser_context)


READ_FIELDS = """() => Object.fromEntries(%s.map((name) => {
  const input = name === "trained" ? document.querySelector("input[name='trained']") : document.getElementById(name);
  const note = document.getElementById(name + "-error");
  return [name, {invalid: input.getAttribute("aria-invalid"), describedby: input.getAttribute("aria-describedby"),
                 shown: note.offsetParent !== null, text: note.textContent}];
}))""" % json.dumps(list(FIELDS))
DESCRIBED_BY = {"trained": None, "sentence": "sentence-hint", "seed": "trained-note", "heads": "heads-hint trained-note",
                "d_model": "d-model-hint trained-note", "causal": "trained-note"}


def assert_fields_marked(page, errors: dict) -> None:
    """Each field of errors marked invalid, described first by its message, shown beside it; no other field marked."""
    fields = page.evaluate(READ_FIELDS)
    for name, field in fields.items():
        if name in errors:
            assert field == {"invalid": "true", "describedby": " ".join(filter(None, [f"{name}-error",
                                                                                      DESCRIBED_BY[name]])),
                             "shown": True, "text": errors[name]}, name
        else:
            assert field == {"invalid": None, "describedby": DESCRIBED_BY[name], "shown": False, "text": ""}, name


@pytest.mark.parametrize("viewport", [PHONE, {"width": 1600, "height": 1000}], ids=["390px", "desktop"])
def test_every_bad_field_is_marked_at_once_with_its_message_beside_it(site_url, browser_context, viewport):
    settings = {"sentence": "<BOS> cats like dogs", "seed": "1.5", "heads": "5", "d_model": "12"}
    page = open_page(browser_context, site_url + "?" + urlencode(settings), state="error", viewport=viewport)
    expected = json.loads(page_update("?" + urlencode(settings)))
    assert list(expected["errors"]) == ["sentence", "seed", "heads"]  # three at once, d_model is fine
    assert page.inner_text("#error") == expected["error"]
    assert_fields_marked(page, expected["errors"])
    for word in ("parse_query", "running_example", "num_heads", "d_k", "pass "):  # the page's words only
        assert word not in page.inner_text("#error"), word
    assert page.inner_text("#status") == "These settings give no example: the 3 fields marked above need a change (or go Back)."
    assert page_width(page) <= viewport["width"]  # the messages wrap; the layout holds
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / ("page-errors-390.png" if viewport is PHONE else "page-errors.png")))
    set_field(page, "seed", "7")  # one fixed: its mark goes, the others stay
    page.wait_for_function("document.getElementById('seed-error').hidden")
    assert_fields_marked(page, {k: v for k, v in expected["errors"].items() if k != "seed"})
    set_field(page, "heads", "4")
    set_field(page, "sentence", "<BOS> like I")
    page.wait_for_function("document.body.dataset.state === 'computed'")
    assert_fields_marked(page, {})
    assert_page_shows(page, cli("--sentence", "<BOS> like I", "--seed", "7", "--heads", "4", "--d-model", "12"))
    page.close()
    assert_stayed_local(browser_context)


@pytest.mark.parametrize("viewport", [PHONE, {"width": 1600, "height": 1000}], ids=["390px", "desktop"])
def test_an_invalid_field_is_quoted_as_typed_and_a_huge_seed_gets_its_limit(site_url, browser_context, viewport):
    page = open_page(browser_context, site_url, viewport=viewport)
    set_field(page, "seed", "abc")
    page.wait_for_function("document.body.dataset.state === 'error'")
    assert page.inner_text("#error") == "Seed: 'abc' is not a whole number"
    assert page.inner_text("#seed-error") == "'abc' is not a whole number"
    assert page.input_value("#seed") == "abc"  # the field keeps what was typed
    set_field(page, "seed", "9" * 5000)
    page.wait_for_function("document.querySelector('#error').textContent.includes('digits')")
    assert page.inner_text("#error") == f"Seed: 5,000 digits; this page takes at most {MAX_DIGITS}"
    assert page_width(page) <= viewport["width"]  # the layout holds
    name = "page-huge-seed-390.png" if viewport is PHONE else "page-huge-seed.png"
    page.screenshot(path=str(SCREENSHOTS / name))
    set_field(page, "d_model", "4096")
    set_field(page, "seed", "7")
    page.wait_for_function("document.querySelector('#error').textContent.includes('4096')")
    assert page.inner_text("#error") == "d_model: 4096 is more than this page draws; at most 64"
    assert page.is_hidden("#command-line")  # no command that would print for minutes
    page.close()
    assert_stayed_local(browser_context)


def test_explanations_and_word_buttons_work_with_the_keyboard(site_url, browser_context):
    page = open_page(browser_context, site_url)
    # What has a title is an entry that also says it in the line under its table (pointed at or focused).
    assert page.evaluate("[...document.querySelectorAll('body [title]')].every((e) => e.matches("
                         "'figure td > a[tabindex=\"0\"]') && e.closest('figure').querySelector('.said'))")
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
    assert len(jobs) == len(matrices) == sum(len(layer.W_Q) for layer in model.layers)  # every head of every layer
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
    sizes = f"d_model {len(model.token_embeddings[0])}, {layers_text(check_model('test', 'model', model))}"
    assert sizes in note  # the shipped run's own, read when the page was built
    assert page.is_hidden(".words")  # any text is read: no vocabulary to pick from
    hint = page.inner_text("#sentence-hint")
    assert hint.startswith(f"any text of 1 to {len(model.position_embeddings)} characters")

    set_field(page, "sentence", REPEAT)
    trained_shown(page, REPEAT)
    shown = page.evaluate(READ_HEADS)
    assert shown == trained_expected(REPEAT)  # a heatmap per head, each named by its job, CPython's numbers
    assert shown[0][1][-1] == "<unk>" and shown[0][1][3] == "\u2423"  # the emoji, and a space shown as ␣
    assert [heading.split(":")[0] for heading, _, _ in shown] == [
        f"layer {layer} head {head}" for layer, weights in enumerate(model.layers) for head in range(len(weights.W_Q))]
    assert page.inner_text(".look").startswith("What to look for: a dark stripe just below the diagonal")
    assert page.inner_text("#status").startswith(
        f"Computed in your browser: the model trained on Genesis (layer 0: 3 heads, layer 1: 2 heads, d_model 24) reading {len(REPEAT)} "
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
        f"Sentence: the sentence has {window + 1} characters; the trained model reads at most {window} "
        f"(its position table has {window} rows)")
    assert page.inner_text("#sentence-error") == expected.removeprefix("Sentence: ")
    assert page.get_attribute("#sentence", "aria-invalid") == "true"
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
    heads = sum(len(layer.W_Q) for layer in trained_model().layers)
    assert len(boxes) == heads
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
    assert [(box["scrolls"], box["cue"]) for box in page.evaluate(FIT)] == [(False, False)] * heads
    page.close()
    assert_stayed_local(browser_context)
