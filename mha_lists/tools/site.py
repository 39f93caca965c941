"""``python -m mha_lists.tools.site OUTDIR``: the whole trace as a web page that recomputes in the browser.

The page shows what ``python -m mha_lists`` prints -- embeddings, each head's Q, K,
V, scores, softmax weights (as heatmaps), head outputs, the concatenation, W_O and
the output -- built from the CLI's own ``trace_items`` and ``format_number``, so
its numbers are the CLI's by construction. ``build_site`` writes:

    OUTDIR/index.html       the page, pre-rendered for the default example (reads without JavaScript)
    OUTDIR/style.css        projector-sized and printable
    OUTDIR/page.js          loads Pyodide (CPython on WebAssembly) and recomputes on every change
    OUTDIR/mha_lists/**.py  this module's source, written into Pyodide's file system and imported

In the browser, ``page_update(query)`` turns the query string
(``?seed=7&heads=4&causal=1&d_model=16&sentence=...``) into the HTML of every step,
or into the library's own error message. Pyodide comes from ``--pyodide-url``:
by default the official CDN; point it at a local copy (the ``pyodide`` npm package)
and the page fetches nothing from anywhere else.
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
from ..teaching.display import format_number
from ..teaching.example import D_MODEL, NUM_HEADS, SEED, SENTENCE, VOCAB, running_example
from ..core.softmax_and_masks import causal_mask
from ..teaching.pictures import pipeline

__all__ = []

PYODIDE_VERSION = "314.0.7"  # the version the browser tests run (package.json); CPython 3.14
PYODIDE_URL = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"
MAX_D_MODEL = 64  # the page draws every matrix; wider ones belong in the CLI
MAX_TOKENS = 16
MAX_DIGITS = 18  # seed, heads, d_model: a seed of 18 digits is plenty; a longer one is a mistake
MAX_SENTENCE_CHARS = 2 * MAX_TOKENS * max(map(len, VOCAB))  # 16 of the longest words fit, with spaces to spare
MAX_QUOTED = 40  # an error quotes at most this much of what was typed
SITE_FILES = pathlib.Path(__file__).resolve().parent / "site_files"
PACKAGE_DIR = pathlib.Path(__file__).resolve().parent.parent  # mha_lists/

_TRUE = ("1", "true", "on", "yes")
_FALSE = ("0", "false", "off", "no", "")


class Settings(NamedTuple):
    """One example: what the page's controls and the query string set (the CLI's options)."""

    sentence: str = SENTENCE
    seed: int = SEED
    heads: int = NUM_HEADS
    d_model: int = D_MODEL
    causal: bool = False
    digits: int = 4  # fixed: the page always shows 4 digits, like format_matrix


# === Settings <-> query string ===

def _quoted(text: str) -> str:
    """text as typed, in quotes; a long one cut, with its length, so a message stays one line."""
    if len(text) <= MAX_QUOTED:
        return repr(text)
    return f"{shorten(text, MAX_QUOTED)} ({len(text):,} characters)"


def _whole_number(name: str, text: str) -> int:
    """A whole number of at most MAX_DIGITS digits, or a ValueError that quotes what was typed."""
    digits = text.strip().lstrip("+-")
    if digits.isdigit() and len(digits) > MAX_DIGITS:  # before int(): CPython refuses > 4300 digits
        raise ValueError(f"parse_query: {name} has {len(digits):,} digits; this page takes at most {MAX_DIGITS}")
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"parse_query: {name}: {_quoted(text)} is not a whole number") from None


def parse_query(query: str) -> Settings:
    """Settings from a query string such as ``"?seed=7&heads=4&causal=1"``; unset ones keep their defaults.

    Keys: sentence, seed, heads, d_model, causal (1/0, true/false, on/off). Unknown
    keys are ignored. A value that is not what its key takes raises ValueError, quoting it
    as typed; so do sizes larger than the page draws (no pointer to the CLI: at those sizes
    it would print for minutes). The attention rules (heads divide d_model, words from the
    vocabulary) are checked by the library itself when the example is built.

    >>> parse_query("?seed=7&heads=4&causal=1")
    Settings(sentence='<BOS> I like transformers <EOS>', seed=7, heads=4, d_model=16, causal=True, digits=4)
    """
    if not isinstance(query, str):
        raise TypeError(f"parse_query: query must be a str, got {type(query).__name__}")
    values = dict(parse_qsl(query.lstrip("?"), keep_blank_values=True))
    settings = Settings()
    if "sentence" in values:
        if len(values["sentence"]) > MAX_SENTENCE_CHARS:
            raise ValueError(f"parse_query: the sentence has {len(values['sentence']):,} characters; this page "
                             f"takes at most {MAX_SENTENCE_CHARS}")
        settings = settings._replace(sentence=values["sentence"])
    for name in ("seed", "heads", "d_model"):
        if name in values:
            settings = settings._replace(**{name: _whole_number(name, values[name])})
    if "causal" in values:
        flag = values["causal"].strip().lower()
        if flag not in _TRUE + _FALSE:
            raise ValueError(f"parse_query: causal: {_quoted(values['causal'])} is not 1 (on) or 0 (off)")
        settings = settings._replace(causal=flag in _TRUE)
    if settings.d_model > MAX_D_MODEL:
        raise ValueError(f"parse_query: d_model is {settings.d_model}; this page draws at most {MAX_D_MODEL}")
    if len(settings.sentence.split()) > MAX_TOKENS:
        raise ValueError(f"parse_query: the sentence has {len(settings.sentence.split())} tokens; this page "
                         f"draws at most {MAX_TOKENS}")
    if settings.heads >= 1 and settings.d_model >= 1 and settings.d_model % settings.heads:
        fits = [h for h in range(1, settings.d_model + 1) if settings.d_model % h == 0]
        raise ValueError(f"parse_query: {settings.heads} heads cannot share d_model = {settings.d_model} columns "
                         f"equally; choose heads among {', '.join(map(str, fits))}, or another d_model")
    return settings


def check_settings(func: str, name: str, settings: object) -> Settings:
    """A Settings the page can draw: what parse_query lets through (the library checks the rest)."""
    if not isinstance(settings, Settings):
        raise TypeError(f"{func}: {name} must be a Settings (from parse_query), got {type(settings).__name__}")
    sentence = check_type(func, f"{name}.sentence", settings.sentence, str, "a str")
    if len(sentence) > MAX_SENTENCE_CHARS or len(sentence.split()) > MAX_TOKENS:
        raise ValueError(f"{func}: {name}.sentence has {len(sentence):,} characters and {len(sentence.split()):,} "
                         f"tokens; this page takes at most {MAX_SENTENCE_CHARS} and {MAX_TOKENS}")
    for option in ("seed", "heads", "d_model"):
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
    """
    check_settings("query_string", "settings", settings)
    return "?" + urlencode({"sentence": settings.sentence, "seed": settings.seed, "heads": settings.heads,
                            "d_model": settings.d_model, "causal": int(settings.causal)})


def cli_command(settings: Settings) -> str:
    """The ``python -m mha_lists`` command that prints the same numbers (only non-default options).

    >>> cli_command(Settings(seed=7, heads=4, causal=True))
    'python -m mha_lists --seed 7 --heads 4 --causal'
    """
    check_settings("cli_command", "settings", settings)
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


def _table_html(table: Table, digits: int, table_id: str) -> str:
    """One matrix: its title (a figcaption, which stays in view while a wide table scrolls), then the table."""
    n, m = len(table.matrix), len(table.matrix[0])
    out = [f'<figure class="matrix {table.kind}">',
           f'<figcaption id="{table_id}">{html.escape(table.title)} <span class="shape">({n}x{m})</span></figcaption>',
           f'<table aria-labelledby="{table_id}">',
           "<thead><tr><th></th>" + "".join(f'<th scope="col">{html.escape(c)}</th>' for c in table.col_labels)
           + "</tr></thead><tbody>"]
    for label, row in zip(table.row_labels, table.matrix):
        cells = []
        for key, x in zip(table.col_labels, row):
            text = format_number(x, digits)
            if text == "-inf":
                cells.append('<td class="masked">-inf</td>')
            elif table.kind == "weights":
                dark = " dark" if x > 0.55 else ""
                cells.append(f'<td class="w{dark}" style="--w:{x:.3f}">{text}</td>')
            else:
                cells.append(f"<td>{text}</td>")
        out.append(f'<tr><th scope="row">{html.escape(label)}</th>{"".join(cells)}</tr>')
    out.append("</tbody></table>")
    if table.kind == "weights":
        out.append(f'<p class="how">{_how_to_read(table, digits)}</p>')
    out.append("</figure>")
    return "".join(out)


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

    Raises the library's own ValueError/ShapeError for settings it refuses.

    >>> '>weights, head 1 <span class="shape">(5x5)</span></figcaption>' in walkthrough_html(Settings())
    True
    """
    check_settings("walkthrough_html", "settings", settings)
    items: list[Union[str, Table]] = trace_items(settings)
    header: list[str] = []
    body: list[str] = []
    open_tables = False
    in_section = False
    tables = 0

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
            body.append(_table_html(item, settings.digits, f"table-{tables}"))
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
            anchor = f"step-{step}" if step else title.lower().replace(" ", "-")
            body.append(f'<section id="{anchor}"><h2>{html.escape(title)}</h2>')
            if step:
                body.append(f'<p class="explain">{_explanation(step, settings)}</p>')
            in_section = True
        elif _step_number(line) and in_section:
            close_tables()
            body.append(f"<h3>{html.escape(line)}</h3>")
            body.append(f'<p class="explain">{_explanation(_step_number(line), settings)}</p>')
        elif not in_section:
            header.append(line)
        else:
            close_tables()
            body.append(f"<p>{html.escape(line)}</p>")
    close_tables()
    if in_section:
        body.append("</section>")
    summary = "".join(f"<li>{html.escape(line)}</li>" for line in header[1:])  # header[0] is the CLI's title
    ex = running_example(sentence=settings.sentence, d_model=settings.d_model, num_heads=settings.heads,
                         seed=settings.seed)
    mask = causal_mask(len(ex.x)) if settings.causal else None
    picture = (f'<div class="pipeline">{pipeline(ex, mask=mask).svg}<p class="explain">The whole layer with '
               "this example's shapes; each head's weights drawn as a grid (darker = more weight).</p></div>")
    return f'<ul class="summary">{summary}</ul>' + picture + "\n".join(body)


def page_update(query: str) -> str:
    """What the page shows for a query string, as JSON text (the browser calls this through Pyodide).

    ``{"ok": true, "html": ..., "settings": {...}, "query": ..., "command": ...}`` or
    ``{"ok": false, "error": "<the library's message>"}``.

    >>> json.loads(page_update("?sentence=I+like+cats"))["error"].split(";")[0]
    "running_example: 'cats' is not in the vocabulary"
    """
    try:
        settings = parse_query(query)
        fragment = walkthrough_html(settings)
    except (ValueError, TypeError) as error:  # ShapeError is a ValueError
        return json.dumps({"ok": False, "error": str(error).removeprefix("parse_query: ")})  # the page is the one asking
    return json.dumps({"ok": True, "html": fragment, "settings": settings._asdict(),
                       "query": query_string(settings), "command": cli_command(settings)})


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


def build_site(outdir: Union[str, pathlib.Path], pyodide_url: str = PYODIDE_URL) -> list[pathlib.Path]:
    """Write the static page into outdir (created if missing); return the files written.

    ``pyodide_url`` is the folder holding pyodide.mjs, absolute or relative to the page.
    Only the module files the page imports (``module_files()``) are written beside it.
    Raises ValueError for bad arguments, OSError where outdir cannot be written.
    """
    if not isinstance(outdir, (str, pathlib.Path)) or not str(outdir).strip():
        raise ValueError(f"build_site: outdir must be a folder path, got {shorten(outdir)}")
    if not isinstance(pyodide_url, str) or not pyodide_url.strip():
        raise ValueError("build_site: pyodide_url must be a non-empty URL of the folder holding pyodide.mjs")
    out = pathlib.Path(outdir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"build_site: outdir {shorten(str(outdir), 200)} is a file, not a folder")
    if not pyodide_url.endswith("/"):
        pyodide_url += "/"
    files = module_files()
    for target in [out / "mha_lists" / name for name in files] + [out / name for name in _PAGE_FILES]:
        if target.exists() and not target.is_file():  # writing into a FIFO would wait for a reader
            raise ValueError(f"build_site: {shorten(str(target), 200)} is not a regular file (a folder, a FIFO or "
                             "a device); it cannot be written over")
    written = []
    for name in files:
        (out / "mha_lists" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(PACKAGE_DIR / name, out / "mha_lists" / name)
        written.append(out / "mha_lists" / name)
    for name in _PAGE_FILES[:2]:
        shutil.copyfile(SITE_FILES / name, out / name)
        written.append(out / name)
    settings = Settings()
    config = {"pyodideUrl": pyodide_url, "pyodideVersion": PYODIDE_VERSION, "moduleFiles": files,
              "defaults": settings._asdict(), "vocab": VOCAB}
    template = string.Template((SITE_FILES / "index.html").read_text(encoding="utf-8"))
    page = template.substitute(
        config=_json_for_script(config),
        walkthrough=walkthrough_html(settings),
        command=html.escape(cli_command(settings)),
        sentence=html.escape(settings.sentence, quote=True),
        seed=settings.seed, heads=settings.heads, d_model=settings.d_model,
        max_d_model=MAX_D_MODEL, max_tokens=MAX_TOKENS,
        vocab_buttons="".join(f'<button type="button" class="word" disabled>{html.escape(w)}</button>'
                              for w in VOCAB),
        pyodide_url=html.escape(pyodide_url, quote=True),
        module_count=len(files),
    )
    (out / "index.html").write_text(page, encoding="utf-8")
    written.append(out / "index.html")
    return written


def main(argv: Optional[list[str]] = None) -> int:
    """The command: one line and exit code 2 for anything it cannot do, never a traceback."""
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.site",
                                description="Build the static web page of the whole trace into OUTDIR.")
    parser.add_argument("outdir", help="folder to write index.html and its files into (created if missing)")
    parser.add_argument("--pyodide-url", default=PYODIDE_URL,
                        help=f"folder URL holding pyodide.mjs, absolute or relative to the page (default: {PYODIDE_URL})")
    args = parser.parse_args(argv)
    if not args.pyodide_url.strip():
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
    print(f"wrote {len(written)} files to {args.outdir}; open {pathlib.Path(args.outdir) / 'index.html'} "
          "through a web server (python -m http.server -d OUTDIR)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
