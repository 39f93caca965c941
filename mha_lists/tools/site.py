"""``python -m mha_lists.tools.site OUTDIR``: the whole trace as a web page that recomputes in the browser.

The page shows what ``python -m mha_lists`` prints -- embeddings, each head's Q, K,
V, scores, softmax weights (as heatmaps), head outputs, the concatenation, W_O and
the output -- built from the CLI's own ``trace_items`` and ``format_number``, so
its numbers are the CLI's by construction. Besides, folded in ``<details>``: the token and
position tables X is made of, and each head's W_Q, W_K and W_V. Every score, weight and
head-output entry explains itself: its cell's ``title`` (shown on hover, what a screen reader
reads for the focused number) and, when pointed at or focused, the line under its table say how it
was made, in the words of ``display.explained_scores``, ``explained_weights`` and
``explained_outputs`` (``explanations``), so the page says what ``.explain(i, j)`` says.
``build_site`` writes:

    OUTDIR/index.html       the page, pre-rendered for the default example (reads without JavaScript)
    OUTDIR/style.css        projector-sized and printable
    OUTDIR/page.js          loads Pyodide (CPython on WebAssembly) and recomputes on every change
    OUTDIR/mha_lists/**.py  this module's source, written into Pyodide's file system and imported
    OUTDIR/mha_lists/data/read_text_run.json   the shipped trained run, fetched only in trained mode
    OUTDIR/pyodide/*        Python itself: what the page needs of the npm ``pyodide`` package (``npm ci``)

In the browser, ``page_update(query)`` turns the query string
(``?seed=7&heads=4&causal=1&d_model=16&sentence=...``) into the HTML of every step,
or into a message for each field it cannot use (``query_problems``), to show beside the field.
By default the build copies Pyodide from node_modules/pyodide (``find_pyodide``), so the page
fetches nothing from anywhere else and works offline; with no such package it loads Pyodide
from its CDN and the build warns that the page needs the internet. ``--pyodide-url`` chooses.

Trained mode (``?trained=1&sentence=...``): the model of ``teaching/reading.py``, trained on
Genesis, reads any text of 1 to as many characters as its position table has rows (16 in the
shipped run), one token per character, and the page draws every head of both its layers as an attention heatmap
(``display.attention_heatmap``), named by its job on that text (``reading.head_jobs``). The
shipped weights are written beside the page and into Pyodide's file system at the same place
under ``mha_lists/``, so ``reading.trained_model()`` reads them unchanged.
"""

from __future__ import annotations

import ast
import html
import json
import pathlib
import shutil
import string
import sys
from typing import NamedTuple, Optional, Union
from urllib.parse import parse_qsl, urlencode

from .cli import OneLineErrorParser, Table, trace_items
from ..core.checks import check_type, check_int, quote_int, shorten
from ..core.attention import attention_trace
from ..teaching.display import (MAX_EXPLAINED_COLUMNS, POINT_NOTE, attention_heatmap, explained_outputs,
                                explained_scores, explained_weights, format_number)
from ..teaching.example import D_MODEL, NUM_HEADS, SEED, SENTENCE, TRAINED_SENTENCE, VOCAB, Example, running_example
from ..core.matrix import Matrix
from ..core.softmax_and_masks import causal_mask
from ..teaching.model import Sizes, check_model
from ..teaching.pictures import pipeline
from ..teaching.reading import RUN_FILE, HeadJob, head_jobs, read, trained_model

__all__ = []

PYODIDE_VERSION = "314.0.7"  # the version the browser tests run (package.json); CPython 3.14
PYODIDE_URL = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"  # only when asked for, or as a last resort
# What the page needs of the npm pyodide package: the loader, CPython in WebAssembly, its standard library
# and the lock loadPyodide reads. The build copies these into OUTDIR/pyodide/, nothing else of the package.
PYODIDE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")
BUNDLED_PYODIDE = "pyodide/"  # the page's own copy, beside index.html
REPOSITORY = pathlib.Path(__file__).resolve().parent.parent.parent  # where package.json pins pyodide, in a checkout
MAX_D_MODEL = 64  # the page draws every matrix; wider ones belong in the CLI
MAX_TOKENS = 16
MAX_DIGITS = 18  # seed, heads, d_model: a seed of 18 digits is plenty; a longer one is a mistake
MAX_SENTENCE_CHARS = 2 * MAX_TOKENS * max(map(len, VOCAB))  # 16 of the longest words fit, with spaces to spare
MAX_QUOTED = 40  # an error quotes at most this much of what was typed
SITE_FILES = pathlib.Path(__file__).resolve().parent / "site_files"
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent.parent  # mha_lists/
# What trained mode reads besides the module: the shipped run (genesis.txt is not needed to read a text).
TRAINED_FILES = [RUN_FILE.relative_to(PACKAGE_DIR).as_posix()]
RANDOM_ONLY = ("seed", "heads", "d_model", "causal")  # settings of the random weights; trained mode has its own
FIELDS = {"trained": "Weights", "sentence": "Sentence", "seed": "Seed", "heads": "Heads", "d_model": "d_model",
          "causal": "Causal mask"}  # the page's fields, in the form's order, by the labels the page shows

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no", "")


class Settings(NamedTuple):
    """One example: what the page's controls and the query string set (the CLI's options).

    ``trained=True``: the model trained on Genesis reads the sentence, any text, one token per
    character; seed, heads, d_model and causal keep their defaults (the model has its own sizes
    and always reads causally), and parse_query gives the sentence ``TRAINED_SENTENCE`` unless set.
    """

    sentence: str = SENTENCE
    seed: int = SEED
    heads: int = NUM_HEADS
    d_model: int = D_MODEL
    causal: bool = False
    digits: int = 4  # fixed: the page always shows 4 digits, like format_matrix
    trained: bool = False


# === Settings <-> query string ===

def _quoted(text: str) -> str:
    """text as typed, in quotes; a long one cut, with its length, so a message stays one line."""
    if len(text) <= MAX_QUOTED:
        return repr(text)
    return f"{shorten(text, MAX_QUOTED)} ({len(text):,} characters)"


def _whole_number(text: str) -> int:
    """A whole number of at most MAX_DIGITS digits, or a ValueError that quotes what was typed."""
    digits = text.strip().lstrip("+-")
    if digits.isdigit() and len(digits) > MAX_DIGITS:  # before int(): CPython refuses > 4300 digits
        raise ValueError(f"{len(digits):,} digits; this page takes at most {MAX_DIGITS}")
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{_quoted(text)} is not a whole number") from None


def _flag(text: str) -> bool:
    """A switch of the query string: 1/0, true/false, on/off, yes/no (or empty: off)."""
    flag = text.strip().lower()
    if flag not in _TRUE + _FALSE:
        raise ValueError(f"{_quoted(text)} is not 1 (on) or 0 (off)")
    return flag in _TRUE


def _listed(words: list[str]) -> str:
    """'a', 'a' and 'b', 'a', 'b' and 'c'."""
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _sentence_problem(sentence: str) -> Optional[str]:
    """What keeps a sentence of random mode from being drawn, in the page's words; None if nothing."""
    if len(sentence) > MAX_SENTENCE_CHARS:
        return f"{len(sentence):,} characters; this page takes at most {MAX_SENTENCE_CHARS}"
    words = sentence.split()
    if not words:
        return "it is empty; add at least one word with the buttons below"
    if len(words) > MAX_TOKENS:
        return f"{len(words)} words; this page draws at most {MAX_TOKENS}"
    unknown = list(dict.fromkeys(_quoted(word) for word in words if word not in VOCAB))
    if unknown:
        verb = "is not a word" if len(unknown) == 1 else "are not words"
        return f"{_listed(unknown)} {verb} of the vocabulary; the buttons below add its words: {' '.join(VOCAB)}"
    return None


def query_problems(query: str) -> dict[str, str]:
    """Every setting of a query string the page cannot draw, by field, in words for someone using the page.

    ``{}`` when there is none. Keys, in the form's order: trained, sentence, seed, heads, d_model,
    causal. Each message stands next to its field, so it does not repeat the field's name, and it
    gives only advice the page can follow (choose other heads; never "pass d_k"). In trained mode
    only the switch is checked here: the text's length is the trained model's to check.

    >>> problems = query_problems("?seed=x&heads=3&sentence=I+like+cats")
    >>> list(problems), problems["seed"]
    (['sentence', 'seed', 'heads'], "'x' is not a whole number")
    >>> problems["heads"]
    '3 heads cannot share d_model = 16 columns equally; choose heads among 1, 2, 4, 8, 16, or another d_model'
    """
    if not isinstance(query, str):
        raise TypeError(f"query_problems: query must be a str, got {type(query).__name__}")
    values = dict(parse_qsl(query.lstrip("?"), keep_blank_values=True))
    problems: dict[str, str] = {}
    if "trained" in values:
        try:
            if _flag(values["trained"]):
                return {}
        except ValueError as error:
            problems["trained"] = str(error)
    problem = _sentence_problem(values["sentence"]) if "sentence" in values else None
    if problem:
        problems["sentence"] = problem
    sizes = {}
    for name in ("seed", "heads", "d_model"):
        try:
            sizes[name] = _whole_number(values[name]) if name in values else getattr(Settings(), name)
        except ValueError as error:
            problems[name] = str(error)
    for name in ("heads", "d_model"):
        if name in sizes and sizes[name] < 1:
            problems[name] = f"{sizes.pop(name)} is too few; give 1 or more"
    if sizes.get("d_model", 0) > MAX_D_MODEL:
        problems["d_model"] = f"{sizes.pop('d_model')} is more than this page draws; at most {MAX_D_MODEL}"
    heads, d_model = sizes.get("heads"), sizes.get("d_model")
    if heads and d_model and d_model % heads:
        fits = [h for h in range(1, d_model + 1) if d_model % h == 0]
        problems["heads"] = (f"{heads} heads cannot share d_model = {d_model} columns equally; choose heads among "
                             f"{', '.join(map(str, fits))}, or another d_model")
    if "causal" in values:
        try:
            _flag(values["causal"])
        except ValueError as error:
            problems["causal"] = str(error)
    return {name: problems[name] for name in FIELDS if name in problems}


def parse_query(query: str) -> Settings:
    """Settings from a query string such as ``"?seed=7&heads=4&causal=1"``; unset ones keep their defaults.

    Keys: sentence, seed, heads, d_model, causal (1/0, true/false, on/off), trained (the same).
    Unknown keys are ignored. A value the page cannot draw raises ValueError naming the first field
    that ``query_problems`` finds (the page shows them all): a value that is not what its key takes,
    quoted as typed; sizes larger than the page draws (no pointer to the CLI: at those sizes it
    would print for minutes); heads that do not divide d_model; words not in the vocabulary.

    With trained=1 the sentence is any text, as typed (``TRAINED_SENTENCE`` if unset), and seed,
    heads, d_model and causal are ignored: the trained model has its own sizes and reads causally.
    Its length is the model's to check (``running_example(trained=True)``): the rows of its position table.

    >>> parse_query("?seed=7&heads=4&causal=1")
    Settings(sentence='<BOS> I like transformers <EOS>', seed=7, heads=4, d_model=16, causal=True, digits=4, trained=False)
    >>> parse_query("?trained=1&heads=3").sentence
    'in the beginning'
    """
    if not isinstance(query, str):
        raise TypeError(f"parse_query: query must be a str, got {type(query).__name__}")
    problems = query_problems(query)
    if problems:
        name, problem = next(iter(problems.items()))
        raise ValueError(f"parse_query: {name}: {problem}")
    values = dict(parse_qsl(query.lstrip("?"), keep_blank_values=True))
    if _flag(values.get("trained", "")):
        return Settings(sentence=values.get("sentence", TRAINED_SENTENCE), trained=True)
    settings = Settings(sentence=values.get("sentence", SENTENCE))
    for name in ("seed", "heads", "d_model"):
        if name in values:
            settings = settings._replace(**{name: _whole_number(values[name])})
    return settings._replace(causal=_flag(values.get("causal", "")))


def check_settings(func: str, name: str, settings: object) -> Settings:
    """A Settings the page can draw: what parse_query lets through (the library checks the rest)."""
    if not isinstance(settings, Settings):
        raise TypeError(f"{func}: {name} must be a Settings (from parse_query), got {type(settings).__name__}")
    sentence = check_type(func, f"{name}.sentence", settings.sentence, str, "a str")
    if check_type(func, f"{name}.trained", settings.trained, bool, "True or False"):
        for option in RANDOM_ONLY:  # the sentence's length is the trained model's to check
            value, default = getattr(settings, option), getattr(Settings(), option)
            if type(value) is not type(default) or value != default:
                raise ValueError(f"{func}: {name}.{option} is {shorten(value)}; the trained model has its own sizes "
                                 "and reads causally: with trained=True, leave seed, heads, d_model and causal as "
                                 "they are")
    elif len(sentence) > MAX_SENTENCE_CHARS or len(sentence.split()) > MAX_TOKENS:
        raise ValueError(f"{func}: {name}.sentence has {len(sentence):,} characters and {len(sentence.split()):,} "
                         f"tokens; this page takes at most {MAX_SENTENCE_CHARS} and {MAX_TOKENS}")
    for option in ("seed", "heads", "d_model"):  # trained or not: query_string and cli_command write them
        value = check_int(func, f"{name}.{option}", getattr(settings, option))
        if len(str(abs(value))) > MAX_DIGITS:
            raise ValueError(f"{func}: {name}.{option} is {quote_int(value)}; this page takes at most "
                             f"{MAX_DIGITS} digits")
    if settings.d_model > MAX_D_MODEL:
        raise ValueError(f"{func}: {name}.d_model is {settings.d_model}; this page draws at most {MAX_D_MODEL}")
    check_type(func, f"{name}.causal", settings.causal, bool, "True or False")
    if settings.digits != 4:
        raise ValueError(f"{func}: {name}.digits is {shorten(settings.digits)}; the page always shows 4")
    return settings


def query_string(settings: Settings) -> str:
    """The query string that gives these settings back: ``parse_query(query_string(s)) == s``.

    >>> query_string(Settings(seed=7, heads=4, causal=True))
    '?sentence=%3CBOS%3E+I+like+transformers+%3CEOS%3E&seed=7&heads=4&d_model=16&causal=1'
    >>> query_string(Settings(sentence="Hi there", trained=True))
    '?trained=1&sentence=Hi+there'
    """
    check_settings("query_string", "settings", settings)
    if settings.trained:
        return "?" + urlencode({"trained": 1, "sentence": settings.sentence})
    return "?" + urlencode({"sentence": settings.sentence, "seed": settings.seed, "heads": settings.heads,
                            "d_model": settings.d_model, "causal": int(settings.causal)})


def cli_command(settings: Settings) -> str:
    """The ``python -m mha_lists`` command that prints the same numbers (only non-default options).

    >>> cli_command(Settings(seed=7, heads=4, causal=True))
    'python -m mha_lists --seed 7 --heads 4 --causal'
    """
    check_settings("cli_command", "settings", settings)
    if settings.trained:
        raise ValueError("cli_command: settings.trained is True; no command prints the trained model's attention "
                         "(page_update gives the Python call that does)")
    default = Settings()
    words = ["python", "-m", "mha_lists"]
    if settings.sentence.split() != default.sentence.split():
        words += ["--sentence", "'" + " ".join(settings.sentence.split()) + "'"]
    for name, option in (("seed", "--seed"), ("heads", "--heads"), ("d_model", "--d-model")):
        if getattr(settings, name) != getattr(default, name):
            words += [option, str(getattr(settings, name))]
    if settings.causal:
        words.append("--causal")
    return " ".join(words)


# === The walkthrough as HTML ===

def _explanation(step: int, settings: Settings) -> str:
    """A sentence or two under each step's heading (the page's prose; numbers from the settings)."""
    d_model, h = settings.d_model, settings.heads
    d_k = d_model // h
    texts = {
        1: f"Each token's row of the token table plus its position's row of the position table: "
           f"one row per token, d_model = {d_model} columns.",
        2: f"This head's own W_Q, W_K and W_V, each ({d_model}, {d_k}), turn every row of X into "
           f"a query, a key and a value of d_k = {d_k} numbers.",
        3: f"Entry [i][j] is query row i dotted with key row j, divided by &radic;{d_k}: how well "
           "token i's query matches token j's key."
           + (" The causal mask hides later tokens: their score is &minus;inf." if settings.causal else ""),
        4: "Softmax turns each row of scores into weights that are positive and sum to 1. "
           "Row i says how much token i takes from each token: the darker, the more.",
        5: "Row i is the average of V's rows, weighted by row i of the weights: what token i gathers in this head.",
        6: f"The heads' outputs side by side: {h} &times; {d_k} = {h * d_k} columns per token.",
        7: f"W_O ({h * d_k}, {d_model}) mixes the heads' columns into d_model = {d_model} columns: "
           "output row i is the new vector of token i.",
    }
    return texts[step]


def _table_html(table: Table, digits: int, table_id: str, said: Optional[Matrix] = None) -> str:
    """One matrix: its title (a figcaption), then the table in a box that scrolls sideways when it is wider
    than the screen (its row labels stay in view, and a cue under it says so), then how to read it.

    With ``said`` (one text per entry, ``explanations``), each entry is a focusable ``<a>`` whose title
    says how it was made, and a line under the table shows the text of the entry pointed at or focused
    (page.js fills it; before that it says how to use it)."""
    n, m = len(table.matrix), len(table.matrix[0])
    out = [f'<figure class="matrix {table.kind}">',
           f'<figcaption id="{table_id}">{html.escape(table.title)} <span class="shape">({n}x{m})</span></figcaption>',
           f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{table_id}">',
           f'<table aria-labelledby="{table_id}">',
           "<thead><tr><th></th>" + "".join(f'<th scope="col">{html.escape(c)}</th>' for c in table.col_labels)
           + "</tr></thead><tbody>"]
    for i, (label, row) in enumerate(zip(table.row_labels, table.matrix)):
        cells = []
        for j, x in enumerate(row):
            shown = format_number(x, digits)
            text = shown if said is None else \
                f'<a tabindex="0" title="{html.escape(said[i][j], quote=True)}">{shown}</a>'
            if shown == "-inf":
                cells.append(f'<td class="masked">{text}</td>')
            elif table.kind == "weights":
                dark = " dark" if x > 0.55 else ""
                cells.append(f'<td class="w{dark}" style="--w:{x:.3f}">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        out.append(f'<tr><th scope="row">{html.escape(label)}</th>{"".join(cells)}</tr>')
    out.append("</tbody></table></div>")
    out.append(f'<p class="scroll-cue">Wider than the screen: scroll sideways in the box to see all {m} columns '
               "&#x21c6;</p>")
    if said is not None:
        out.append(f'<p class="said">{html.escape(POINT_NOTE[0].upper() + POINT_NOTE[1:])}.</p>')
    if table.kind == "weights":
        out.append(f'<p class="how">{_how_to_read(table, digits)}</p>')
    out.append("</figure>")
    return "".join(out)


def explanations(settings: Settings) -> dict[str, Matrix]:
    """How each score, weight and head-output entry of the page was made, by its table's title.

    ``{"scores, head 0": [[text, ...], ...], "weights, head 0": ..., "output, head 0": ..., ...}``: the
    text of ``display.explained_scores``, ``explained_weights`` and ``explained_outputs`` on this
    example's Q, K, scores, weights and V, the same arithmetic as the trace, so each text ends in the
    number the page shows. A head output wider than display explains (``MAX_EXPLAINED_COLUMNS``
    columns, d_model 64 with one head) has none.

    >>> said = explanations(Settings())
    >>> print(said["weights, head 1"][0][0].splitlines()[0])
    weight[0][0], <BOS> → <BOS> = e^(s - max) / total
    """
    check_settings("explanations", "settings", settings)
    if settings.trained:
        raise ValueError("explanations: settings.trained is True; trained mode shows attention weights only, "
                         "as heatmaps")
    return _explanations(_example(settings), settings.causal)


def _example(settings: Settings) -> Example:
    """The running example of the page's (random-weight) settings."""
    return running_example(sentence=settings.sentence, d_model=settings.d_model, num_heads=settings.heads,
                           seed=settings.seed)


def _explanations(ex: Example, causal: bool) -> dict[str, Matrix]:
    """``explanations`` of an example already built (walkthrough_html builds it once for everything)."""
    mask = causal_mask(len(ex.x)) if causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    said = {}
    for h in range(len(ex.weights.W_Q)):
        said[f"scores, head {h}"] = explained_scores(trace.Q[h], trace.K[h], ex.tokens, mask=mask).explanations
        said[f"weights, head {h}"] = explained_weights(trace.scores[h], ex.tokens, mask=mask).explanations
        if len(trace.V[h][0]) <= MAX_EXPLAINED_COLUMNS:
            said[f"output, head {h}"] = explained_outputs(trace.attention[h], trace.V[h], ex.tokens).explanations
    return said


def _parameters_html(summary: str, tables: list[Table], digits: int, table_id: str) -> str:
    """Tables of weights the trace is made from, folded under a summary line: open it to see them."""
    figures = [_table_html(table, digits, f"{table_id}-{n}") for n, table in enumerate(tables)]
    return (f'<details class="params"><summary>{html.escape(summary)}</summary>'
            f'<div class="tables">{"".join(figures)}</div></details>')


def _embedding_tables(ex, digits: int) -> str:
    """The token table (a row per word of the vocabulary) and the position table X's rows add up."""
    d_model = len(ex.x[0])
    dims = [f"d{j}" for j in range(d_model)]
    token = Table("token table", ex.token_embeddings, list(ex.vocab), dims, kind="param")
    position = Table("position table", ex.position_embeddings,
                     [f"pos {i}" for i in range(len(ex.position_embeddings))], dims, kind="param")
    summary = (f"The tables X is made from: token ({len(ex.token_embeddings)}x{d_model}), a row per word, and "
               f"position ({len(ex.position_embeddings)}x{d_model}), a row per place")
    return _parameters_html(summary, [token, position], digits, "embeddings")


def _head_weights(ex, head: int, digits: int) -> str:
    """One head's W_Q, W_K and W_V, each (d_model, d_k): what step 2 multiplies X by."""
    d_model, d_k = len(ex.x[0]), len(ex.weights.W_Q[head][0])
    dims, kdims = [f"d{j}" for j in range(d_model)], [f"d{j}" for j in range(d_k)]
    tables = [Table(f"{name}, head {head}", getattr(ex.weights, name)[head], dims, kdims, kind="param")
              for name in ("W_Q", "W_K", "W_V")]
    summary = f"Head {head}'s weights: W_Q, W_K and W_V, each ({d_model}x{d_k})"
    return _parameters_html(summary, tables, digits, f"weights-{head}")


def _how_to_read(table: Table, digits: int) -> str:
    """One entry of a weights table read out in words: visible, so no pointer or hover is needed."""
    i = len(table.matrix) - 1  # the last token: a causal mask hides none of its keys
    others = [k for k in range(len(table.matrix[i])) if k != i] or [i]
    j = max(others, key=lambda k: table.matrix[i][k])  # the other token it takes most from
    row, key = html.escape(table.row_labels[i]), html.escape(table.col_labels[j])
    return (f"How to read it: row {row}, column {key} is {format_number(table.matrix[i][j], digits)}, "
            f"so token {row} takes that share of token {key}'s value. Each row sums to 1; the darker, the more.")


def _step_number(line: str) -> Optional[int]:
    words = line.split()
    if len(words) >= 2 and words[0] == "Step" and words[1].rstrip(".").isdigit():
        return int(words[1].rstrip("."))
    return None


def walkthrough_html(settings: Settings) -> str:
    """Every step of the trace as an HTML fragment: the CLI's lines and tables, 4-digit entries.

    Raises the library's own ValueError/ShapeError for settings it refuses. With ``settings.trained``,
    every head of the trained model instead (``trained_html``).

    >>> '>weights, head 1 <span class="shape">(5x5)</span></figcaption>' in walkthrough_html(Settings())
    True
    """
    check_settings("walkthrough_html", "settings", settings)
    if settings.trained:
        return trained_html(settings.sentence)
    items: list[Union[str, Table]] = trace_items(settings)
    ex = _example(settings)
    said = _explanations(ex, settings.causal)
    header: list[str] = []
    body: list[str] = []
    open_tables = False
    in_section = False
    tables = 0
    head = 0

    def close_tables() -> None:
        nonlocal open_tables
        if open_tables:
            body.append("</div>")
            open_tables = False

    for item in items:
        if isinstance(item, Table):
            if not open_tables:
                body.append('<div class="tables">')
                open_tables = True
            tables += 1
            body.append(_table_html(item, settings.digits, f"table-{tables}", said.get(item.title)))
            if item.title == "X":
                close_tables()
                body.append(_embedding_tables(ex, settings.digits))
            continue
        line = item.strip()
        if not line:
            continue
        if item.startswith("\n=== "):
            close_tables()
            if in_section:
                body.append("</section>")
            title = line.strip("= ")
            step = _step_number(title)
            if title.startswith("Head "):
                head = int(title.split()[1])
            anchor = f"step-{step}" if step else title.lower().replace(" ", "-")
            body.append(f'<section id="{anchor}"><h2>{html.escape(title)}</h2>')
            if step:
                body.append(f'<p class="explain">{_explanation(step, settings)}</p>')
            in_section = True
        elif _step_number(line) and in_section:
            close_tables()
            body.append(f"<h3>{html.escape(line)}</h3>")
            body.append(f'<p class="explain">{_explanation(_step_number(line), settings)}</p>')
            if _step_number(line) == 2:
                body.append(_head_weights(ex, head, settings.digits))
        elif not in_section:
            header.append(line)
        else:
            close_tables()
            body.append(f"<p>{html.escape(line)}</p>")
    close_tables()
    if in_section:
        body.append("</section>")
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in header[1:])  # header[0] is the CLI's title
    mask = causal_mask(len(ex.x)) if settings.causal else None
    picture = (f'<div class="pipeline">{pipeline(ex, mask=mask).svg}<p class="explain">The whole layer with '
               "this example's shapes; each head's weights drawn as a grid (darker = more weight).</p></div>")
    return f'<ul class="summary">{summary}</ul>' + picture + "\n".join(body)


# === The trained model, every head ===

LOOK_FOR = ("What to look for: a dark stripe just below the diagonal is a previous-character head (each character "
            "reads the one before it); type a phrase twice, and on its second copy layer 1's induction head reads "
            "the character after the same character in the first copy: a stripe parallel to the diagonal, about a "
            "phrase's length to its left.")


def _share(x: float) -> str:
    return format_number(x, 2)


def _job_parts(job: HeadJob, length: int) -> tuple[str, str]:
    """("layer L head H: its job", "the shares that show it") on a text of ``length`` characters."""
    before = ("a single character: none before it" if length < 2 else
              f"{_share(job.previous_token)} of each character's weight, on average, on the one before it")
    after = ("no character repeats" if job.induction is None else
             f"{_share(job.induction)} of a repeated character's weight, on average, on what followed its earlier "
             "copies")
    shares = f"{after}; {before}" if job.job == "copies what came next last time" else f"{before}; {after}"
    return f"layer {job.layer} head {job.head}: {job.job or 'no clear job on this text'}", shares


def job_text(job: HeadJob, length: int) -> str:
    """A head named by its job on a text of ``length`` characters, with the shares that show it.

    >>> print(job_text(HeadJob(0, 1, 0.9312, None, "previous character"), 17).replace("; ", ";\\n"))
    layer 0 head 1: previous character (0.93 of each character's weight, on average, on the one before it;
    no character repeats)
    """
    if not isinstance(job, HeadJob):
        raise TypeError(f"job_text: job must be a HeadJob (from reading.head_jobs), got {type(job).__name__}")
    check_int("job_text", "length", length)
    name, shares = _job_parts(job, length)
    return f"{name} ({shares})"


def _head_html(job: HeadJob, A: Matrix, tokens: list[str]) -> str:
    """One head: its job as a heading, its attention as display's heatmap in a box that scrolls sideways."""
    anchor = f"layer-{job.layer}-head-{job.head}"
    name, shares = _job_parts(job, len(tokens))
    table = attention_heatmap(A, tokens, title=f"layer {job.layer} head {job.head}, attention weights").table_html()
    return (f'<figure class="head-map" id="{anchor}"><figcaption><h3 class="job" id="{anchor}-job">'
            f'{html.escape(name)} <span class="shares">({html.escape(shares)})</span></h3></figcaption>'
            f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{anchor}-job">{table}</div>'
            '<p class="scroll-cue">Wider than the screen: scroll sideways in the box to see every column.</p>'
            "</figure>")


def trained_html(text: str) -> str:
    """Every head of the model trained on Genesis reading ``text``: a heatmap each, named by its job there.

    Any text is read (a character the book lacks is ``<unk>``); the library refuses an empty one,
    or one longer than the model's position table, with its own message.

    >>> page = trained_html("Hi, hi! 2")
    >>> page.count('<figure class="head-map"'), page.count(">&lt;unk&gt;</th>")  # the digit: a column and a row each
    (5, 10)
    """
    check_type("trained_html", "text", text, str, "a str")
    ex = running_example(trained=True, sentence=text)  # the library's checks: 1 to the rows of its position table
    model = trained_model()
    sizes = check_model("trained_html", "the shipped model", model)
    _, attention = read(model, text)
    jobs = {(job.layer, job.head): job for job in head_jobs(model, text)}
    summary = [f"text: {text}", f"characters (one token each): {' '.join(ex.tokens)}",
               f"seq_len = {len(ex.tokens)}, d_model = {sizes.d_model}, {layers_text(sizes)}, "
               f"at most {sizes.positions} characters (the rows of its position table)"]
    out = ['<ul class="summary">' + "".join(f"<li>{html.escape(line)}</li>" for line in summary) + "</ul>",
           f'<p class="look">{html.escape(LOOK_FOR)}</p>',
           '<p class="explain">Row i is character i reading: how much of each character\'s value it takes. The '
           "model reads left to right, so everything above the diagonal is 0. Weights to 2 digits; the darker, the "
           f"more. The model was trained on Genesis (<code>mha_lists/{TRAINED_FILES[0]}</code>), lowercased; "
           "a character the book lacks is &lt;unk&gt;.</p>"]
    for layer, matrices in enumerate(attention):
        out.append(f'<section id="layer-{layer}"><h2>Layer {layer}</h2><div class="head-maps">')
        out += [_head_html(jobs[layer, h], A, ex.tokens) for h, A in enumerate(matrices)]
        out.append("</div></section>")
    return "\n".join(out)


def _python_call(text: str) -> str:
    """The Python that gives trained mode's numbers (no command prints them)."""
    return f"from mha_lists.teaching.reading import read, trained_model; read(trained_model(), {text!r})"


# === The page's one call ===

def _without_function(message: str) -> str:
    """A library message in the page's words: without the name of the function the page called."""
    name, colon, rest = message.partition(": ")
    return rest if colon and name.isidentifier() else message


def page_update(query: str) -> str:
    """What the page shows for a query string, as JSON text (the browser calls this through Pyodide).

    ``{"ok": true, "html": ..., "settings": {...}, "query": ..., "command": ..., "command_intro": ...}``
    or ``{"ok": false, "errors": {field: message, ...}, "error": ...}``: every field the page cannot
    draw (``query_problems``; in trained mode the text the model refuses), each message for the page to
    show next to its field, and ``error`` all of them, a line each, after the field's label. In
    trained mode the command is Python.

    >>> print(json.loads(page_update("?sentence=I+like+cats&heads=5"))["error"])
    Sentence: 'cats' is not a word of the vocabulary; the buttons below add its words: <PAD> <BOS> <EOS> I like transformers
    Heads: 5 heads cannot share d_model = 16 columns equally; choose heads among 1, 2, 4, 8, 16, or another d_model
    """
    try:
        errors = query_problems(query)
    except TypeError as error:
        errors = {}
        fault = _without_function(str(error))
    else:
        fault = None
    if not errors and fault is None:
        settings = parse_query(query)
        try:
            fragment = walkthrough_html(settings)
        except (ValueError, TypeError, OSError) as error:  # ShapeError is a ValueError; OSError: no shipped run
            if settings.trained and not isinstance(error, OSError):  # the text the model refuses
                errors = {"sentence": _without_function(str(error))}
            else:
                fault = _without_function(str(error))
    if errors or fault is not None:
        lines = [f"{FIELDS[name]}: {message}" for name, message in errors.items()]
        return json.dumps({"ok": False, "errors": errors, "error": "\n".join(lines) if lines else fault})
    if settings.trained:
        intro, command = "Same numbers in Python:", _python_call(settings.sentence)
    else:
        intro, command = "Same numbers in a terminal:", cli_command(settings)
    return json.dumps({"ok": True, "html": fragment, "settings": settings._asdict(),
                       "query": query_string(settings), "command": command, "command_intro": intro})


# === Building the site ===

def _module_of(path: str) -> str:
    """ "tools/site.py" -> "mha_lists.tools.site"; "core/__init__.py" -> "mha_lists.core"."""
    parts = ["mha_lists", *path[:-len(".py")].split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _file_of(module: str) -> Optional[str]:
    """ "mha_lists.core.matrix" -> "core/matrix.py" (or the package's __init__.py); None if not ours."""
    parts = module.split(".")
    if parts[0] != "mha_lists":
        return None
    relative = "/".join(parts[1:])
    for candidate in (f"{relative}.py", f"{relative}/__init__.py".lstrip("/")):
        if (PACKAGE_DIR / candidate).is_file():
            return candidate
    return None


def _imported_modules(path: str) -> set[str]:
    """Every mha_lists module one file imports, anywhere in it (inside functions too), read with ast."""
    tree = ast.parse((PACKAGE_DIR / path).read_text(encoding="utf-8"), filename=path)
    package = _module_of(path) if path.endswith("__init__.py") else _module_of(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # "from . import matrix"
    return found


def module_files(root: str = "tools/site.py") -> list[str]:
    """The files Python runs to import ``root`` (paths under mha_lists/), found from the source with ast.

    Importing a module runs its packages' ``__init__.py`` first, so those and what they
    import are in. The page fetches exactly these; nothing else of the package.

    >>> files = module_files()
    >>> "tools/site.py" in files and "__init__.py" in files and "tools/bench.py" not in files
    True
    """
    ours = {path.relative_to(PACKAGE_DIR).as_posix() for path in PACKAGE_DIR.rglob("*.py")}
    if not isinstance(root, str) or root not in ours:
        raise ValueError("module_files: root must name a .py file under mha_lists/, like 'tools/site.py'; "
                         f"got {shorten(root)}")
    needed: set[str] = set()
    todo = [root]
    while todo:
        path = todo.pop()
        if path in needed:
            continue
        needed.add(path)
        module = _module_of(path).split(".")
        parents = [".".join(module[:n]) for n in range(1, len(module))]  # mha_lists, mha_lists.tools
        for name in parents + sorted(_imported_modules(path)):
            file = _file_of(name)
            if file is not None:
                todo.append(file)
    return sorted(needed)


def _json_for_script(value: object) -> str:
    return json.dumps(value).replace("</", "<\\/")


_PAGE_FILES = ("style.css", "page.js", "index.html")


def layers_text(sizes: Sizes) -> str:
    """Each layer's heads in words: "layer 0: 3 heads, layer 1: 2 heads"."""
    return ", ".join(f"layer {i}: {layer['h']} head{'s' * (layer['h'] > 1)}" for i, layer in enumerate(sizes.layers))


def _trained_config() -> dict:
    """What the page knows of the shipped run before Python loads: its files, its sizes, its first text."""
    missing = [name for name in TRAINED_FILES if not (PACKAGE_DIR / name).is_file()]
    if missing:
        raise ValueError(f"build_site: mha_lists/{missing[0]} (the trained model's weights) is missing; the page's "
                         "trained mode reads it (python -m mha_lists.tools.read_text --save writes a run)")
    sizes = check_model("build_site", "the shipped model", trained_model())
    return {"files": TRAINED_FILES, "sentence": TRAINED_SENTENCE, "window": sizes.positions,
            "d_model": sizes.d_model, "layers": layers_text(sizes)}


def _npm_version(folder: pathlib.Path) -> Optional[str]:
    """The version an npm package's package.json gives, or None where there is none to read."""
    try:
        return str(json.loads((folder / "package.json").read_text(encoding="utf-8"))["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pyodide_candidates() -> list[pathlib.Path]:
    """Where ``npm ci`` puts the pyodide package: the current folder's node_modules, then the repository's."""
    places = [pathlib.Path.cwd() / "node_modules" / "pyodide", REPOSITORY / "node_modules" / "pyodide"]
    return list(dict.fromkeys(path.resolve() for path in places))


def find_pyodide() -> Optional[pathlib.Path]:
    """The npm pyodide package of ``PYODIDE_VERSION`` with every file the page needs, or None.

    It looks in ``node_modules/pyodide`` of the current folder, then of the repository
    (``npm ci`` installs it there: package.json pins the version).
    """
    for folder in _pyodide_candidates():
        if _npm_version(folder) == PYODIDE_VERSION and all((folder / name).is_file() for name in PYODIDE_FILES):
            return folder
    return None


def no_local_pyodide() -> str:
    """The build's warning when it finds no local Pyodide: the page will need the internet, and the fix."""
    wrong = [f"{folder} is version {_npm_version(folder)}" for folder in _pyodide_candidates()
             if _npm_version(folder) not in (None, PYODIDE_VERSION)]
    where = f"npm ci` in {REPOSITORY}" if (REPOSITORY / "package.json").is_file() else \
        f"npm install pyodide@{PYODIDE_VERSION}` in this folder"
    return (f"WARNING: no local copy of Pyodide {PYODIDE_VERSION} (node_modules/pyodide, from npm)"
            + (f": {'; '.join(wrong)}" if wrong else "") + ".\n"
            f"  The page will load Python from {PYODIDE_URL} and NEEDS THE INTERNET: offline it computes nothing.\n"
            f"  For a page that works offline, run `{where}, then build again.")


def build_site(outdir: Union[str, pathlib.Path], pyodide_url: Optional[str] = None) -> list[pathlib.Path]:
    """Write the static page into outdir (created if missing); return the files written.

    By default (``pyodide_url=None``) the page brings its own Python: the files it needs of the npm
    pyodide package (``find_pyodide()``, ``PYODIDE_FILES``) are copied into outdir/pyodide/, and the
    page loads them from there, so it computes with no internet. Where there is no such package,
    the page loads Pyodide from its CDN (``PYODIDE_URL``), and the build says so on stderr
    (``no_local_pyodide()``). ``pyodide_url``, the folder holding pyodide.mjs (absolute or
    relative to the page), chooses where it comes from instead, and nothing of Pyodide is copied.
    Only the module files the page imports (``module_files()``) are written beside it, and
    the shipped run trained mode reads (``TRAINED_FILES``), at the same place under mha_lists/.
    Raises ValueError for bad arguments, OSError where outdir cannot be written.
    """
    if not isinstance(outdir, (str, pathlib.Path)) or not str(outdir).strip():
        raise ValueError(f"build_site: outdir must be a folder path, got {shorten(outdir)}")
    if pyodide_url is not None and (not isinstance(pyodide_url, str) or not pyodide_url.strip()):
        raise ValueError("build_site: pyodide_url must be a non-empty URL of the folder holding pyodide.mjs")
    out = pathlib.Path(outdir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"build_site: outdir {shorten(str(outdir), 200)} is a file, not a folder")
    chosen = pyodide_url is not None
    bundled = None if chosen else find_pyodide()
    if not chosen:
        pyodide_url = BUNDLED_PYODIDE if bundled else PYODIDE_URL
    if not pyodide_url.endswith("/"):
        pyodide_url += "/"
    files = module_files()
    trained = _trained_config()
    copies = [(PACKAGE_DIR / name, out / "mha_lists" / name) for name in files + TRAINED_FILES]
    copies += [(SITE_FILES / name, out / name) for name in _PAGE_FILES[:2]]
    copies += [(bundled / name, out / BUNDLED_PYODIDE / name) for name in PYODIDE_FILES if bundled]
    for target in [target for _, target in copies] + [out / "index.html"]:
        if target.exists() and not target.is_file():  # writing into a FIFO would wait for a reader
            raise ValueError(f"build_site: {shorten(str(target), 200)} is not a regular file (a folder, a FIFO or "
                             "a device); it cannot be written over")
    written = []
    for source, target in copies:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    settings = Settings()
    config = {"pyodideUrl": pyodide_url, "pyodideVersion": PYODIDE_VERSION, "moduleFiles": files,
              "defaults": settings._asdict(), "vocab": VOCAB, "trained": trained}
    template = string.Template((SITE_FILES / "index.html").read_text(encoding="utf-8"))
    page = template.substitute(
        config=_json_for_script(config),
        walkthrough=walkthrough_html(settings),
        command=html.escape(cli_command(settings)),
        sentence=html.escape(settings.sentence, quote=True),
        seed=settings.seed, heads=settings.heads, d_model=settings.d_model,
        max_d_model=MAX_D_MODEL, max_tokens=MAX_TOKENS, window=trained["window"],
        trained_d_model=trained["d_model"], trained_layers=trained["layers"],
        vocab_buttons="".join(f'<button type="button" class="word" disabled>{html.escape(w)}</button>'
                              for w in VOCAB),
        pyodide_url=html.escape(pyodide_url, quote=True),
        module_count=len(files),
    )
    (out / "index.html").write_text(page, encoding="utf-8")
    written.append(out / "index.html")
    if not chosen and not bundled:  # once the page is written: a build that failed says only why
        print(no_local_pyodide(), file=sys.stderr)
    return written


def main(argv: Optional[list[str]] = None) -> int:
    """The command: one line and exit code 2 for anything it cannot do, never a traceback."""
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.site",
                                description="Build the static web page of the whole trace into OUTDIR.")
    parser.add_argument("outdir", help="folder to write index.html and its files into (created if missing)")
    parser.add_argument("--pyodide-url", default=None,
                        help="folder URL holding pyodide.mjs, absolute or relative to the page, e.g. the CDN's "
                             f"{PYODIDE_URL} (default: a copy of node_modules/pyodide, from npm ci, in "
                             "OUTDIR/pyodide/, so the page works offline; the CDN when there is none)")
    args = parser.parse_args(argv)
    if args.pyodide_url is not None and not args.pyodide_url.strip():
        parser.error("--pyodide-url is empty; give the folder URL holding pyodide.mjs, e.g. pyodide/")
    if not args.outdir.strip():
        parser.error("OUTDIR is empty; give a folder to write the page into")
    try:
        written = build_site(args.outdir, args.pyodide_url)
    except ValueError as error:
        parser.error(str(error).removeprefix("build_site: "))
    except OSError as error:
        where = str(error.filename or args.outdir)  # as it is, or cut short when long or not printable
        where = where if len(where) <= 200 and where.isprintable() else shorten(where, 200)
        parser.error(f"cannot write {where}: {error.strerror or type(error).__name__}")
    python = ("with Python (Pyodide) in pyodide/: works offline" if pathlib.Path(args.outdir, BUNDLED_PYODIDE,
              "pyodide.mjs") in written else f"Python (Pyodide) from {args.pyodide_url or PYODIDE_URL}")
    print(f"wrote {len(written)} files to {args.outdir}, {python}; open {pathlib.Path(args.outdir) / 'index.html'} "
          "through a web server (python -m http.server -d OUTDIR)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
