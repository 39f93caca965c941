"""Per-student worksheets: one small integer attention problem per student, with its answer key.

    python -m mha_lists.tools.worksheet --student 7                      # student 7's sheet, Markdown
    python -m mha_lists.tools.worksheet --student 7 --key                # ... with every answer
    python -m mha_lists.tools.worksheet --students 1-30 --key --format html > class.html
    python -m mha_lists.tools.worksheet --student 7 --format json        # for your own tools
    python -m mha_lists.tools.worksheet --paper --key                    # the example of notebook 00a

Student N's problem is drawn from a generator of its own, ``derive_rng(N, "worksheet")``,
so the same N prints the same bytes on every machine and every CPython, and different
students get different problems. Every given number is an integer in -5..5; a sheet has
3 or 4 tokens, d_model 4 or 6 and 2 or 3 heads, and is redrawn until the pencil work stays
small: each column of a weight matrix has one or two non-zero entries, every entry of Q, K
and V is at most 6 in size, every raw score at most 16, the scores of one row differ by at
most 8, and the differences d = s - max(row) that occur fit a printed table of
e^(d * scale) with at most 8 lines. The answers are the
module's own: ``attention_trace`` computes them.

=========================  ==========================================================
worksheet(student)         the Worksheet: tokens, X, weights, scale, trace, raw scores,
                           the e^x table
paper_worksheet()          the same for the hand-chosen example of notebook 00a
as_json(ws)                the problem and every answer, as one JSON object
to_markdown(ws, key=...)   the sheet as Markdown (answers only with key=True)
to_html(sheets, key=...)   a print-ready page: one student per page, each key on its own
main(argv)                 the command line (bad arguments: one line, exit code 2)
=========================  ==========================================================
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
from collections.abc import Sequence
from typing import NamedTuple, Optional

from .cli import OneLineErrorParser
from ..teaching.display import format_matrix, format_number
from ..core.matrix import Matrix
from ..core.attention import AttentionTrace, attention_trace
from ..core.attention import MHAWeights
from ..teaching.weights import derive_rng
from ..teaching.paper import (PAPER_STORY, ExpRow, exp_table, integer_matrix, paper_example, raw_scores, score_differences)

__all__ = ["Worksheet", "worksheet", "paper_worksheet", "as_json", "to_markdown", "to_html", "SENTENCES", "SHAPES"]

SENTENCES = [
    "I like tea", "we read books", "cats chase mice", "you see stars", "birds sing songs",
    "they love maths", "dogs dig holes", "she writes code", "I like green tea", "we read old books",
    "cats chase small mice", "you see bright stars", "he plays the drums", "they love hard maths",
]
SHAPES = [(4, 2), (6, 2), (6, 3)]  # (d_model, num_heads): d_k = d_v = 2, 3, 2
MAX_QKV = 6  # largest size of an entry of Q, K or V
MAX_SCORE = 16  # largest size of a raw score
MAX_SPREAD = 8  # largest difference between two raw scores of one row
MAX_TABLE = 8  # most lines in the e^x table
MAX_STUDENT = 10**9
_X_VALUES = [-3, -2, -1, 1, 2, 3]
_W_VALUES = [-2, -1, 1, 2]
_WO_VALUES = [-1, 1]


class Worksheet(NamedTuple):
    """One student's problem and everything the key shows."""

    student: Optional[int]  # None for the hand-chosen example of notebook 00a
    tokens: list[str]
    features: list[str]  # labels of X's columns (and of the weights' rows)
    x: list[list[int]]  # (T, d_model)
    weights: MHAWeights  # integer W_Q, W_K, W_V per head and W_O
    d_k: int
    scale: float  # 1 / sqrt(d_k)
    raw_scores: list[list[list[int]]]  # per head, Q K^T before scaling (integers)
    table: list[ExpRow]  # e^(d * scale) for every difference d = s - max(row) that occurs
    trace: AttentionTrace  # every answer, from attention_trace


# === Drawing a problem ===


def _sparse_matrix(rng, rows: int, cols: int, values: Sequence[int], per_column: Sequence[int]) -> list[list[int]]:
    """(rows, cols) integers, each column with a few non-zero entries from ``values``."""
    M = [[0] * cols for _ in range(rows)]
    for c in range(cols):
        for r in rng.sample(range(rows), rng.choice(per_column)):
            M[r][c] = rng.choice(values)
    return M


def _draw_x(rng, T: int, d_model: int) -> list[list[int]]:
    """(T, d_model): two non-zero entries per row, no two rows alike."""
    while True:
        x = [[0] * d_model for _ in range(T)]
        for row in x:
            for c in rng.sample(range(d_model), 2):
                row[c] = rng.choice(_X_VALUES)
        if len({tuple(row) for row in x}) == T:
            return x


def _draw(rng) -> tuple[list[str], list[list[int]], MHAWeights]:
    tokens = rng.choice(SENTENCES).split()
    d_model, num_heads = (4, 2) if len(tokens) == 4 else rng.choice(SHAPES)
    d_k = d_model // num_heads
    x = _draw_x(rng, len(tokens), d_model)
    W_Q, W_K, W_V = ([_sparse_matrix(rng, d_model, d_k, _W_VALUES, (1, 2)) for _ in range(num_heads)]
                     for _ in range(3))
    W_O = _sparse_matrix(rng, d_model, d_model, _WO_VALUES, (1, 2))
    return tokens, x, MHAWeights(W_Q, W_K, W_V, W_O)


def _pencil_friendly(trace: AttentionTrace, scores: list[list[list[int]]], scale: float) -> bool:
    """Small projections, small scores, a short e^x table, and every head with something to do."""
    for M in (*trace.Q, *trace.K, *trace.V):
        if max(abs(v) for row in M for v in row) > MAX_QKV:
            return False
    for S, V in zip(scores, trace.V):
        if max(abs(s) for row in S for s in row) > MAX_SCORE:
            return False
        if any(max(row) - min(row) > MAX_SPREAD for row in S):
            return False
        if all(max(row) == min(row) for row in S):  # a head whose every row is uniform
            return False
        if all(v == 0 for row in V for v in row):
            return False
    return len(score_differences(scores)) <= MAX_TABLE


def worksheet(student: int) -> Worksheet:
    """Student N's problem (T <= 4 tokens, d_model <= 6, >= 2 heads) and its answers.

    The same N always gives the same problem.

    >>> ws = worksheet(1)
    >>> ws == worksheet(1), len(ws.tokens) <= 4, len(ws.weights.W_Q) >= 2
    (True, True, True)
    >>> all(-5 <= v <= 5 for row in ws.x for v in row)
    True
    """
    if isinstance(student, bool) or not isinstance(student, int) or not 1 <= student <= MAX_STUDENT:
        raise ValueError(f"worksheet: student must be a whole number from 1 to {MAX_STUDENT}, got {student!r}")
    rng = derive_rng(student, "worksheet")
    while True:
        tokens, x, weights = _draw(rng)
        ws = _complete(student, tokens, _labels("d", len(x[0])), x, weights)
        if _pencil_friendly(ws.trace, ws.raw_scores, ws.scale):
            return ws


def paper_worksheet() -> Worksheet:
    """The hand-chosen example of notebook 00a (``mha_lists.teaching.paper``) as a worksheet.

    >>> ws = paper_worksheet()
    >>> ws.student, ws.tokens, [row.d for row in ws.table]
    (None, ['I', 'like', 'transformers'], [0, -4, -8])
    """
    ex = paper_example()
    return _complete(None, ex.tokens, ex.features, ex.x, ex.weights)


def _complete(student, tokens, features, x, weights) -> Worksheet:
    """A worksheet with its answers: the trace, the integer raw scores and the e^x table."""
    d_k = len(weights.W_Q[0][0])
    scale = 1 / math.sqrt(d_k)
    trace = attention_trace(x, weights)
    scores = [integer_matrix(raw_scores(Q, K)) for Q, K in zip(trace.Q, trace.K)]
    table = exp_table(score_differences(scores), scale)
    return Worksheet(student, list(tokens), list(features), x, weights, d_k, scale, scores, table, trace)


# === JSON ===


def as_json(ws: Worksheet) -> dict:
    """The problem and every answer as plain lists: scores already scaled, Q, K, V as ints.

    >>> sorted(as_json(worksheet(1))["answers"])
    ['K', 'Q', 'V', 'attention', 'concat', 'head_outputs', 'output', 'scores']
    """
    _check_worksheet("as_json", ws)
    t = ws.trace
    return {
        "student": ws.student,
        "tokens": list(ws.tokens),
        "X": [list(row) for row in ws.x],
        "W_Q": [[list(row) for row in W] for W in ws.weights.W_Q],
        "W_K": [[list(row) for row in W] for W in ws.weights.W_K],
        "W_V": [[list(row) for row in W] for W in ws.weights.W_V],
        "W_O": [list(row) for row in ws.weights.W_O],
        "scale": ws.scale,
        "answers": {
            "Q": [integer_matrix(M) for M in t.Q],
            "K": [integer_matrix(M) for M in t.K],
            "V": [integer_matrix(M) for M in t.V],
            "scores": t.scores,
            "attention": t.attention,
            "head_outputs": t.head_outputs,
            "concat": t.concat,
            "output": t.output,
        },
    }


def _check_worksheet(func: str, ws: object) -> None:
    if not isinstance(ws, Worksheet):
        raise TypeError(f"{func}: ws must be a Worksheet (from worksheet(N) or paper_worksheet()), "
                        f"got {type(ws).__name__}")


# === Markdown ===


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{j}" for j in range(n)]


def _block(M: Matrix, title: str, rows: Sequence[str], cols: Sequence[str], digits: int = 4) -> str:
    return "```\n" + format_matrix(M, row_labels=rows, col_labels=cols, digits=digits, title=title) + "\n```"


def _name(ws: Worksheet) -> str:
    return "the example of notebook 00a" if ws.student is None else f"student {ws.student}"


def _facts(ws: Worksheet) -> str:
    T, d_model, h = len(ws.x), len(ws.x[0]), len(ws.weights.W_Q)
    return (f"{T} tokens, d_model = {d_model}, {h} heads, d_k = d_v = {d_model} / {h} = {ws.d_k}, "
            f"scale = 1/sqrt({ws.d_k}) = {ws.scale:.4f}")


def _table_lines(ws: Worksheet) -> list[str]:
    lines = ["| d = s - max(row) | x = d * scale | e^x |", "|---:|---:|---:|"]
    lines += [f"| {row.d} | {row.x:.3f} | {row.exp:.4f} |" for row in ws.table]
    return lines


STEPS = [
    "For each head h: Q = X W_Q, K = X W_K, V = X W_V (integers).",
    "Raw scores S = Q K^T (integers): S[i][j] = row i of Q times row j of K.",
    "In each row of S, take d = s - (largest s of the row) for every entry and look up e^(d * scale) "
    "in the table. Each weight is its e^x divided by the row's total. Each row sums to 1.",
    "Head output = weights V: row i is the weighted average of V's rows.",
    "concat = [head 0 | head 1 | ...], then output = concat W_O.",
]


def to_markdown(ws: Worksheet, *, key: bool = False) -> str:
    """Student N's sheet as Markdown; with ``key=True`` every intermediate answer follows.

    >>> to_markdown(worksheet(1)).splitlines()[0]
    '# Multi-head attention on paper: student 1'
    >>> "## Answer key" in to_markdown(worksheet(1)), "## Answer key" in to_markdown(worksheet(1), key=True)
    (False, True)
    """
    _check_worksheet("to_markdown", ws)
    toks, dims = ws.tokens, ws.features
    h = len(ws.weights.W_Q)
    out = [f"# Multi-head attention on paper: {_name(ws)}", "",
           f"Sentence: **{' '.join(toks)}**. {_facts(ws)}.", ""]
    if ws.student is None:
        out += [PAPER_STORY, "",
                "To print it: `python -m mha_lists.tools.worksheet --paper --format html > paper.html` "
                "(add `--key` for the answers, on a page of their own). The answers are also at the "
                "end of this page: cover them until you have your own.", ""]
    out += ["## Given", "", _block(ws.x, "X", toks, dims), ""]
    for head in range(h):
        for name, W, p in (("W_Q", ws.weights.W_Q, "q"), ("W_K", ws.weights.W_K, "k"), ("W_V", ws.weights.W_V, "v")):
            out += [_block(W[head], f"{name}, head {head}", dims, _labels(p, ws.d_k)), ""]
    out += [_block(ws.weights.W_O, "W_O", _labels("c", h * ws.d_k), _labels("d", len(ws.x[0]))), "",
            "Table of e^x for every difference that occurs on this sheet:", "", *_table_lines(ws), "",
            "## Your steps", ""]
    out += [f"{n}. {step}" for n, step in enumerate(STEPS, 1)]
    out.append("")
    if key:
        out += ["## Answer key", "", _key_note(), ""]
        for title, M, rows, cols, digits in _key_items(ws):
            out += [_block(M, title, rows, cols, digits), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _key_note() -> str:
    return ("Weights and outputs are exact, to 4 decimals; an answer worked with the table agrees "
            "to about 0.001. Count an answer right when it is within 0.01.")


def _key_items(ws: Worksheet) -> list[tuple[str, Matrix, list[str], list[str], int]]:
    """(title, matrix, row labels, column labels, digits) of every answer, in working order."""
    t, toks, d_k = ws.trace, ws.tokens, ws.d_k
    h, d_model = len(t.Q), len(ws.x[0])
    items = []
    for head in range(h):
        items += [
            (f"Q, head {head}", integer_matrix(t.Q[head]), toks, _labels("q", d_k), 0),
            (f"K, head {head}", integer_matrix(t.K[head]), toks, _labels("k", d_k), 0),
            (f"V, head {head}", integer_matrix(t.V[head]), toks, _labels("v", d_k), 0),
            (f"raw scores Q K^T, head {head}", ws.raw_scores[head], toks, toks, 0),
            (f"scaled scores, head {head}", t.scores[head], toks, toks, 4),
            (f"attention weights, head {head}", t.attention[head], toks, toks, 4),
            (f"output, head {head}", t.head_outputs[head], toks, _labels("v", d_k), 4),
        ]
    items += [("concat", t.concat, toks, _labels("c", h * d_k), 4),
              ("output", t.output, toks, _labels("d", d_model), 4)]
    return items


# === HTML ===

_CSS = """
@page { size: A4; margin: 10mm; }
body { font: 9pt/1.25 Georgia, 'Times New Roman', serif; margin: 0; color: #000; }
.page + .page { break-before: page; page-break-before: always; }
@media screen { .page { max-width: 190mm; padding: 6mm; border-bottom: 2px dashed #999; } }
h1 { font-size: 13pt; margin: 0 0 1mm 0; }
h2 { font-size: 10pt; margin: 2mm 0 0.5mm 0; }
p { margin: 0.5mm 0; }
.name { float: right; }
.row { display: flex; flex-wrap: wrap; gap: 2mm 3mm; align-items: flex-start; }
.stack { display: flex; flex-direction: column; gap: 1.5mm; }
table.m { border-collapse: collapse; font: 8pt 'DejaVu Sans Mono', Menlo, Consolas, monospace; }
table.m caption { caption-side: top; text-align: left; font: bold 8pt Georgia, serif; padding-bottom: 0.5mm; white-space: nowrap; }
table.m th { font-weight: normal; color: #444; padding: 0 1mm; text-align: right; }
table.m td { border: 0.3mm solid #777; padding: 0 1mm; text-align: right; height: 3.6mm; min-width: 4mm; }
table.blank td { min-width: 6mm; height: 5mm; }
ol.steps { font-size: 8.5pt; margin: 1mm 0; padding-left: 5mm; columns: 2; column-gap: 6mm; }
"""


def _html_table(M, title: str, rows: Sequence[str], cols: Sequence[str], digits: int = 0, *,
                blank: bool = False) -> str:
    cls = "m blank" if blank else "m"
    out = [f'<table class="{cls}"><caption>{html.escape(title)}</caption>',
           "<tr><th></th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for i, label in enumerate(rows):
        cells = ("" if blank else _cell(M[i][j], digits) for j in range(len(cols)))
        out.append(f"<tr><th>{html.escape(label)}</th>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _cell(value, digits: int) -> str:
    return value if isinstance(value, str) else format_number(value, digits)


def _stack(*tables: str) -> str:
    return '<div class="stack">\n' + "\n".join(tables) + "\n</div>"


def _sheet_page(ws: Worksheet) -> str:
    toks, d_k, dims = ws.tokens, ws.d_k, ws.features
    h, out_dims = len(ws.weights.W_Q), _labels("d", len(ws.x[0]))
    out = ['<section class="page">',
           '<div class="name">Name: ____________________</div>',
           f"<h1>Multi-head attention on paper: {_name(ws)}</h1>",
           f"<p>Sentence: <b>{html.escape(' '.join(toks))}</b>. {html.escape(_facts(ws))}.</p>"]
    if ws.student is None:
        out += [f"<p>{html.escape(paragraph)}</p>" for paragraph in PAPER_STORY.split("\n\n")]
    out += ['<ol class="steps">' + "".join(f"<li>{html.escape(s)}</li>" for s in STEPS) + "</ol>",
            '<div class="row">',
            _html_table(ws.x, "X", toks, dims),
            _html_table(ws.weights.W_O, "W_O", _labels("c", h * d_k), out_dims),
            _html_table([[r.d, f"{r.x:.3f}", f"{r.exp:.4f}"] for r in ws.table], "table of e^x",
                        ["" for _ in ws.table], ["d = s - max", "x = d * scale", "e^x"]),
            "</div>"]
    for head in range(h):
        out.append(f"<h2>Head {head}</h2>")
        out.append('<div class="row">')
        head_output = _html_table(None, "output = weights V", toks, _labels("v", d_k), blank=True)
        for name, W, p in (("Q", ws.weights.W_Q, "q"), ("K", ws.weights.W_K, "k"), ("V", ws.weights.W_V, "v")):
            tables = [_html_table(W[head], f"W_{name}, head {head}", dims, _labels(p, d_k)),
                      _html_table(None, f"{name} = X W_{name}", toks, _labels(p, d_k), blank=True)]
            if name == "V" and d_k > 2:  # five columns of three-wide tables do not fit across A4
                tables.append(head_output)
            out.append(_stack(*tables))
        out.append(_stack(_html_table(None, "raw scores Q K^T", toks, toks, blank=True),
                          _html_table(None, "attention weights", toks, toks, blank=True)))
        if d_k <= 2:
            out.append(_stack(head_output))
        out.append("</div>")
    out += ["<h2>All heads</h2>", '<div class="row">',
            _html_table(None, "concat", toks, _labels("c", h * d_k), blank=True),
            _html_table(None, "output = concat W_O", toks, out_dims, blank=True),
            "</div>", "</section>"]
    return "\n".join(out)


def _key_page(ws: Worksheet) -> str:
    out = ['<section class="page key">',
           f"<h1>Answer key: {_name(ws)}</h1>",
           f"<p>Sentence: <b>{html.escape(' '.join(ws.tokens))}</b>. {html.escape(_facts(ws))}.</p>",
           f"<p>{html.escape(_key_note())}</p>"]
    items = _key_items(ws)
    h = len(ws.trace.Q)
    per_head = (len(items) - 2) // h
    for head in range(h):
        out += [f"<h2>Head {head}</h2>", '<div class="row">']
        out += [_html_table(M, title, rows, cols, digits)
                for title, M, rows, cols, digits in items[head * per_head:(head + 1) * per_head]]
        out.append("</div>")
    out += ["<h2>All heads</h2>", '<div class="row">']
    out += [_html_table(M, title, rows, cols, digits) for title, M, rows, cols, digits in items[h * per_head:]]
    out += ["</div>", "</section>"]
    return "\n".join(out)


def to_html(sheets: Sequence[Worksheet], *, key: bool = False) -> str:
    """A print-ready page: each student's sheet on its own page; with ``key=True`` the keys
    follow, each on its own page, after all the sheets (print the first pages for the class).

    >>> page = to_html([worksheet(1), worksheet(2)], key=True)
    >>> page.count('<section class="page">'), page.count('<section class="page key">')
    (2, 2)
    """
    if not isinstance(sheets, (list, tuple)) or not sheets:
        raise ValueError("to_html: sheets must be a non-empty list of Worksheets")
    for ws in sheets:
        _check_worksheet("to_html", ws)
    pages = [_sheet_page(ws) for ws in sheets]
    if key:
        pages += [_key_page(ws) for ws in sheets]
    first, last = sheets[0].student, sheets[-1].student
    who = _name(sheets[0]) if len(sheets) == 1 else f"students {first}-{last}"
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>Multi-head attention on paper: {who}{' with keys' if key else ''}</title>\n"
            f"<style>{_CSS}</style>\n</head>\n<body>\n" + "\n".join(pages) + "\n</body>\n</html>\n")


# === Command line ===


def _student(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_STUDENT:
        raise argparse.ArgumentTypeError(f"{value} is not a student number from 1 to {MAX_STUDENT}")
    return value


def _students(text: str) -> list[int]:
    first, sep, last = text.partition("-")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range like 1-30")
    a, b = _student(first), _student(last)
    if a > b:
        raise argparse.ArgumentTypeError(f"{text!r} runs backwards; write the smaller number first")
    if b - a >= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is {b - a + 1} students; print at most 1000 at a time")
    return list(range(a, b + 1))


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.worksheet",
                     description="Print one student's attention-on-paper worksheet (or a whole class's).")
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--student", type=_student, metavar="N", help="the student's number N: the problem is seeded from N")
    who.add_argument("--students", type=_students, metavar="A-B", help="every student from A to B, e.g. 1-30")
    who.add_argument("--paper", action="store_true", help="the hand-chosen example of notebook 00a instead")
    parser.add_argument("--key", action="store_true", help="add every intermediate answer")
    parser.add_argument("--format", choices=["md", "html", "json"], default="md",
                        help="md (default), html (print-ready, one student per page) or json "
                             "(always with the answers)")
    return parser


def render(args: argparse.Namespace) -> str:
    """What ``main`` prints for parsed arguments."""
    if args.paper:
        sheets = [paper_worksheet()]
    else:
        sheets = [worksheet(n) for n in ([args.student] if args.student is not None else args.students)]
    if args.format == "json":
        objects = [as_json(ws) for ws in sheets]
        return json.dumps(objects if args.students else objects[0]) + "\n"
    if args.format == "html":
        return to_html(sheets, key=args.key)
    return "\n---\n\n".join(to_markdown(ws, key=args.key) for ws in sheets)


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    sys.stdout.write(render(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
