"""Per-student worksheets and exams: small integer attention problems, with their answer keys.

    python -m mha_lists.tools.worksheet --student 7                      # student 7's sheet, Markdown
    python -m mha_lists.tools.worksheet --student 7 --key                # ... with every answer
    python -m mha_lists.tools.worksheet --students 1-30 --term OAK-417 --key --format html > class.html
    python -m mha_lists.tools.worksheet --students 1-30 --term OAK-417 --steps scores,softmax --paper letter
    python -m mha_lists.tools.worksheet --students 1-30 --term OAK-417 --exam --key --format html > exam.html
    python -m mha_lists.tools.worksheet --student 7 --format json        # for your own tools
    python -m mha_lists.tools.worksheet --example --key                  # the example of notebook 00a
    python -m mha_lists.tools.worksheet --handout --paper letter > handout.html   # docs/handout.md, one page

**Who gets which problem.** Without ``--term``, student N's problem comes from
``derive_rng(N, ...)``: anyone can print it, key included. With ``--term WORD`` it comes
from HMAC-SHA256 keyed with the term, of the student's number and the sheet's settings:
the same term and student give the same sheet on every machine and CPython; another term,
another sheet; and without the teacher's term nobody can print the key in advance.

**What a problem looks like** (the story of notebook 00a). Each token is integers that mean
something: where it stands (``pos a, pos b``: a quarter turn per position) and what it is
(``noun, verb``; with 3 heads also ``first, last``). Each head is built for a job a reader
can name (the previous token, the next, itself, its own kind, the verb, the nouns, the first,
the last token); its queries and keys get a random strength and a random signed permutation
of their columns, which changes every number but not the job. V carries named features, W_O
is a sparse random +-1 matrix. The draw is repeated until the pencil work stays small
(every entry of Q, K, V at most 6, raw scores at most 16, the scores of a row within 8, an
e^x table of at most 8 lines) and has a floor: no all-zero column in any Q, K or V, and at
most one uniform softmax row per head.

**Size.** ``--heads`` 1-3, ``--tokens`` 2-4, ``--steps`` any of qkv, scores, softmax, output
(the results of the steps not asked are printed as given). The sheet says how many answer
cells it has and how long that takes at ``CELLS_PER_MINUTE``; the command refuses a size
whose page would not fit one sheet of the chosen ``--paper`` (a4 or letter).

=========================  ==========================================================
worksheet(student, ...)    the Worksheet: tokens, X, weights, scale, trace, raw scores,
                           the e^x table, the heads' jobs, the steps asked
paper_worksheet()          the same for the hand-chosen example of notebook 00a
answer_cells(ws)           how many cells the student fills in
degenerate(ws)             what falls below the floor (an empty list for every drawn sheet)
page_heights(ws)           the printed heights (mm) of the sheet and its key, worked out
fits_one_page(ws, paper)   both fit one page of a4 or letter
as_json(ws)                the problem and every answer, as one JSON object
to_markdown(ws, key=...)   the sheet as Markdown (answers only with key=True)
to_html(sheets, key=...)   a print-ready page: one student per page, each key on its own
exam(student, ...)         five short by-hand questions with their answers (an Exam)
exam_json, exam_markdown,  the exam in the same three formats; exam_html's keys come
exam_html                  several students to a page
handout_html(paper=...)    docs/handout.md as a page to print: one page of a4 or letter
main(argv)                 the command line (bad arguments: one line, exit code 2)
=========================  ==========================================================
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import html
import json
import math
import pathlib
import random
import re
import sys
from collections.abc import Sequence
from typing import NamedTuple, Optional

from .cli import OneLineErrorParser
from ..teaching.display import format_matrix, format_number
from ..core.checks import check_type, check_matrix, is_number, shorten
from ..core.matrix import Matrix
from ..core.attention import AttentionTrace, attention_trace, check_weights
from ..core.attention import MHAWeights
from ..core.softmax_and_masks import softmax
from ..teaching.weights import derive_rng
from ..teaching.paper import (PAPER_HEADS, PAPER_STORY, ExpRow, exp_table, integer_matrix, paper_example, raw_scores,
                              score_differences, table_softmax)

__all__ = []

# === Limits and settings ===

STEP_NAMES = ("qkv", "scores", "softmax", "output")
MAX_HEADS = 3  # more heads do not fit one page with the weights
MIN_TOKENS, MAX_TOKENS = 2, 4  # a quarter turn per position: four positions
MAX_QKV = 6  # largest size of an entry of Q, K or V
MAX_SCORE = 16  # largest size of a raw score
MAX_SPREAD = 8  # largest difference between two raw scores of one row
MAX_TABLE = 8  # most lines in the e^x table
MAX_STUDENT = 10**9
MAX_TERM = 200  # characters of a term secret
EXAMPLE_TERM = "OAK-417"  # the term the documentation prints: a key drawn with it is anyone's
MAX_SHEETS = 1000  # students in one command
MAX_DRAWS = 10_000  # redraws before giving up (the tests show a few suffice)
# The pace of the by-hand work. Issue 16's trial measured 108-162 answer cells in 35-45 minutes,
# 3.1-3.6 cells a minute; 3 a minute is the slower end, so the estimate errs long.
CELLS_PER_MINUTE = 3
PAPERS = {"a4": ("A4", 210.0, 297.0), "letter": ("letter", 215.9, 279.4)}  # @page size, width, height (mm)
_FORMATS = ("md", "html", "json")
MARGIN = 10.0  # mm on every side

# Sentences with the kind of each word (N noun or pronoun, V verb); words of at most 6 letters.
SENTENCES = {
    2: ["birds sing", "dogs bark", "time flies", "we win", "cats purr", "fish swim", "bees buzz", "I run"],
    3: ["I like tea", "we read books", "cats chase mice", "you see stars", "birds sing songs",
        "they love maths", "dogs dig holes", "she writes code", "owls eat mice", "kids fly kites"],
    4: ["I think cats sleep", "we say birds sing", "you know dogs bark", "they hope fish swim",
        "I hear owls hoot", "she sees kids play", "we think bees buzz", "I know cats purr"],
}
_KINDS = {2: "NV", 3: "NVN", 4: "NVNV"}
_POSITIONS = [(1, 0), (0, 1), (-1, 0), (0, -1)]  # a quarter turn per position
_WO_VALUES = [-1, 1]


# === Heads with a job ===


class Job(NamedTuple):
    """A head's job: what its queries ask for (W_Q rows) and what its keys offer (W_K rows)."""

    name: str  # "the previous token"
    query: dict  # feature -> (q0, q1)
    key: dict  # feature -> (k0, k1)
    needs: str = ""  # a feature the job needs beyond the four of 00a


_EVERY = {"noun": (1, 1), "verb": (1, 1)}  # every token is a noun or a verb: a constant query
_PLACE = {"pos a": (1, 0), "pos b": (0, 1)}
JOBS = [
    # position i's query is position i - 1 (a quarter turn back), its key its own position
    Job("the previous token", {"pos a": (0, -1), "pos b": (1, 0)}, _PLACE),
    Job("the next token", {"pos a": (0, 1), "pos b": (-1, 0)}, _PLACE),
    Job("itself", _PLACE, _PLACE),
    Job("tokens of its own kind", {"noun": (1, 0), "verb": (0, 1)}, {"noun": (1, 0), "verb": (0, 1)}),
    Job("the verbs", _EVERY, {"verb": (1, 1)}),
    Job("the nouns", _EVERY, {"noun": (1, 1)}),
    Job("the first token", _EVERY, {"first": (1, 1)}, "first"),
    Job("the last token", _EVERY, {"last": (1, 1)}, "last"),
]
_CARRIES = {"what it is (noun, verb)": ("noun", "verb"), "where it is (pos a, pos b)": ("pos a", "pos b"),
            "whether it is first or last": ("first", "last")}


def _features(heads: int) -> list[str]:
    return ["pos a", "pos b", "noun", "verb"] + (["first", "last"] if heads == 3 else [])


# === Who gets which problem ===


def _rng(purpose: str, student: int, term: Optional[str]) -> random.Random:
    """The generator of one student's problem: public without a term, keyed by the term with one."""
    if term is None:
        return derive_rng(student, purpose)
    digest = hmac.new(term.encode("utf-8"), f"mha-lists/{purpose}/{student}".encode("utf-8"), hashlib.sha256)
    return random.Random(int.from_bytes(digest.digest(), "big"))


# === The worksheet ===


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
    jobs: list[str]  # what each head was built to find
    carries: list[str]  # what each head's V carries
    steps: tuple  # the steps the student does, a subset of STEP_NAMES in order
    term: bool  # drawn with a term secret (the secret itself is never kept)


# === What the functions take ===


def check_student(func: str, name: str, student: object) -> int:
    """A student's number: a whole number from 1 to MAX_STUDENT."""
    if isinstance(student, bool) or not isinstance(student, int) or not 1 <= student <= MAX_STUDENT:
        raise ValueError(f"{func}: {name} must be a whole number from 1 to {MAX_STUDENT}, got {shorten(student)}")
    return student


def check_term(func: str, name: str, term: object) -> Optional[str]:
    """The teacher's secret word, or None: 1-MAX_TERM printable characters, not only spaces."""
    if term is None:
        return None
    if not isinstance(term, str):
        raise TypeError(f"{func}: {name} must be a str (the teacher's secret word) or None, got {type(term).__name__}")
    if not term.strip() or len(term) > MAX_TERM or not term.isprintable():
        raise ValueError(f"{func}: {name} must be 1-{MAX_TERM} printable characters, not only spaces, "
                         f"got {len(term)} characters")
    return term


def check_heads(func: str, name: str, heads: object) -> int:
    """Heads on the sheet: 1 to MAX_HEADS."""
    if isinstance(heads, bool) or not isinstance(heads, int) or not 1 <= heads <= MAX_HEADS:
        raise ValueError(f"{func}: {name} must be 1-{MAX_HEADS} (more do not fit one page), got {shorten(heads)}")
    return heads


def check_tokens(func: str, name: str, tokens: object) -> int:
    """Tokens on the sheet: MIN_TOKENS to MAX_TOKENS."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not MIN_TOKENS <= tokens <= MAX_TOKENS:
        raise ValueError(f"{func}: {name} must be {MIN_TOKENS}-{MAX_TOKENS} (a quarter turn per position), "
                         f"got {shorten(tokens)}")
    return tokens


def check_steps(func: str, name: str, steps: object) -> tuple:
    """Some of STEP_NAMES, each once; return them in working order."""
    if isinstance(steps, str) or not isinstance(steps, (list, tuple)) or not steps:
        raise ValueError(f"{func}: {name} must be a non-empty list of {', '.join(STEP_NAMES)}, got {shorten(steps)}")
    for s in steps:
        if not isinstance(s, str) or s not in STEP_NAMES:
            raise ValueError(f"{func}: {name} holds {shorten(s)}; each step must be one of {', '.join(STEP_NAMES)}")
    if len(set(steps)) != len(steps):
        twice = next(s for i, s in enumerate(steps) if s in steps[:i])
        raise ValueError(f"{func}: {name} names a step twice: {twice}")
    return _in_order(steps)


def _in_order(steps: Sequence[str]) -> tuple:
    return tuple(s for s in STEP_NAMES if s in steps)


def check_paper(func: str, name: str, paper: object) -> str:
    """A page size: one of PAPERS."""
    if not isinstance(paper, str) or paper not in PAPERS:
        raise ValueError(f"{func}: {name} must be one of {', '.join(PAPERS)}, got {shorten(paper)}")
    return paper


def check_worksheet(func: str, name: str, ws: object) -> None:
    """A Worksheet as worksheet(N) or paper_worksheet() made it (its answers are worked out again to see)."""
    if not isinstance(ws, Worksheet):
        raise TypeError(f"{func}: {name} must be a Worksheet (from worksheet(N) or paper_worksheet()), "
                        f"got {type(ws).__name__}")
    if not _as_made(ws):
        raise ValueError(f"{func}: {name} is not as worksheet(N) or paper_worksheet() made it: its parts do not "
                         "fit together, or its answers do not follow from its X and weights; make it again")


def _labels_list(labels: object, count: int) -> bool:
    return isinstance(labels, list) and len(labels) == count and all(isinstance(s, str) for s in labels)


def _as_made(ws: Worksheet) -> bool:
    """Every part of ws the sheet prints fits the others, and the answers are the ones its X and weights give."""
    try:
        T, d_model = check_matrix("worksheet", "x", ws.x, finite=True)
        dims = check_weights("worksheet", "weights", ws.weights)
        if ws.student is not None:
            check_student("worksheet", "student", ws.student)
        if check_steps("worksheet", "steps", ws.steps) != ws.steps:
            return False
    except (TypeError, ValueError):  # each of them says what is wrong; here it is enough to know that it is
        return False
    H = dims["h"]
    fits = (_labels_list(ws.tokens, T) and _labels_list(ws.features, d_model) and _labels_list(ws.jobs, H)
            and _labels_list(ws.carries, H) and isinstance(ws.term, bool) and dims["d_model"] == d_model
            and dims["g"] == H and dims["d_v"] == dims["d_k"]
            and all(b is None for b in (ws.weights.b_Q, ws.weights.b_K, ws.weights.b_V, ws.weights.b_O)))
    try:
        return fits and ws == _complete(ws.student, ws.tokens, ws.features, ws.x, ws.weights, ws.jobs, ws.carries,
                                        ws.steps, ws.term)
    except ValueError:  # raw scores that are not whole numbers, or numbers too large
        return False


# === Drawing a problem ===


def _signed_permutation(rng: random.Random, n: int) -> list[tuple[int, int]]:
    """(source column, sign) for each of n columns: a random reordering with random signs."""
    order = rng.sample(range(n), n)
    return [(c, rng.choice((-1, 1))) for c in order]


def _block(features: list[str], rows: dict, factor: int, columns: list[tuple[int, int]]) -> list[list[int]]:
    """(d_model, len(columns)) integers: row f is ``rows[f]`` times factor, columns reordered and signed."""
    out = []
    for f in features:
        base = rows.get(f, (0,) * 8)
        out.append([factor * sign * base[c] for c, sign in columns])
    return out


def _x(tokens: int, features: list[str]) -> list[list[int]]:
    kinds = _KINDS[tokens]
    rows = []
    for i in range(tokens):
        value = {"pos a": _POSITIONS[i][0], "pos b": _POSITIONS[i][1], "noun": int(kinds[i] == "N"),
                 "verb": int(kinds[i] == "V"), "first": int(i == 0), "last": int(i == tokens - 1)}
        rows.append([value[f] for f in features])
    return rows


def _draw_head(rng: random.Random, features: list[str], d_k: int,
               taken: Sequence[str]) -> tuple[str, str, Matrix, Matrix, Matrix]:
    """One head: its job(s) (none of the ``taken`` ones), what V carries, and W_Q, W_K, W_V (d_model, d_k)."""
    jobs = [j for j in JOBS if (not j.needs or j.needs in features) and j.name not in taken]
    chosen = rng.sample(jobs, d_k // 2)  # d_k 4 (one head): two jobs at once, scores add
    carries = [c for c, fs in _CARRIES.items() if all(f in features for f in fs)]
    carry = rng.sample(carries, d_k // 2)
    W_Q = [[] for _ in features]
    W_K = [[] for _ in features]
    W_V = [[] for _ in features]
    for job, what in zip(chosen, carry):
        q_factor, k_factor = rng.choice([(1, 1), (1, 2), (2, 1), (2, 2)])
        columns = _signed_permutation(rng, 2)  # the same for Q and K: the scores do not change
        value_rows = {f: (int(n == 0), int(n == 1)) for n, f in enumerate(_CARRIES[what])}
        for M, rows, factor, cols in ((W_Q, job.query, q_factor, columns), (W_K, job.key, k_factor, columns),
                                      (W_V, value_rows, 1, _signed_permutation(rng, 2))):
            for row, block_row in zip(M, _block(features, rows, factor, cols)):
                row.extend(block_row)
    return " and ".join(j.name for j in chosen), " and ".join(carry), W_Q, W_K, W_V


def _draw(rng: random.Random, heads: int, tokens: int) -> tuple[list[str], list[str], list[list[int]], MHAWeights,
                                                                 list[str], list[str]]:
    features = _features(heads)
    d_model = len(features)
    d_k = d_model // heads
    sentence = rng.choice(SENTENCES[tokens]).split()
    drawn = []
    for _ in range(heads):  # each head a job of its own
        drawn.append(_draw_head(rng, features, d_k, [job for head in drawn for job in head[0].split(" and ")]))
    W_O = [[0] * d_model for _ in range(heads * d_k)]
    for c in range(d_model):
        for r in rng.sample(range(heads * d_k), rng.choice((1, 2))):
            W_O[r][c] = rng.choice(_WO_VALUES)
    weights = MHAWeights([h[2] for h in drawn], [h[3] for h in drawn], [h[4] for h in drawn], W_O)
    return sentence, features, _x(tokens, features), weights, [h[0] for h in drawn], [h[1] for h in drawn]


def degenerate(ws: Worksheet) -> list[str]:
    """What falls below the floor: all-zero columns of Q, K, V; heads with two or more uniform rows.

    >>> degenerate(worksheet(1))
    []
    """
    check_worksheet("degenerate", "ws", ws)
    found = []
    for name, group in (("Q", ws.trace.Q), ("K", ws.trace.K), ("V", ws.trace.V)):
        for h, M in enumerate(group):
            for c in range(len(M[0])):
                if all(row[c] == 0 for row in M):
                    found.append(f"{name}, head {h}: column {c} is all zero")
    for h, S in enumerate(ws.raw_scores):
        uniform = sum(max(row) == min(row) for row in S)
        if uniform > 1:
            found.append(f"head {h}: {uniform} uniform softmax rows")
    return found


def _pencil_friendly(ws: Worksheet) -> bool:
    """Small projections, small scores, a short e^x table, and above the floor."""
    for M in (*ws.trace.Q, *ws.trace.K, *ws.trace.V):
        if max(abs(v) for row in M for v in row) > MAX_QKV:
            return False
    for S in ws.raw_scores:
        if max(abs(s) for row in S for s in row) > MAX_SCORE:
            return False
        if any(max(row) - min(row) > MAX_SPREAD for row in S):
            return False
    return len(ws.table) <= MAX_TABLE and not degenerate(ws)


def worksheet(student: int, *, term: Optional[str] = None, heads: int = 2, tokens: int = 3,
              steps: Sequence[str] = STEP_NAMES) -> Worksheet:
    """Student N's problem (``tokens`` tokens, ``heads`` heads, each with a job) and its answers.

    The same N (and term) always gives the same problem; ``steps`` only chooses what is asked.

    >>> ws = worksheet(1)
    >>> ws == worksheet(1), len(ws.tokens), len(ws.weights.W_Q), ws.features
    (True, 3, 2, ['pos a', 'pos b', 'noun', 'verb'])
    >>> worksheet(1, term="oak").x == ws.x, worksheet(1, term="oak").weights == ws.weights
    (True, False)
    """
    check_student("worksheet", "student", student)
    check_term("worksheet", "term", term)
    check_heads("worksheet", "heads", heads)
    check_tokens("worksheet", "tokens", tokens)
    steps = check_steps("worksheet", "steps", steps)
    rng = _rng(f"worksheet/{heads}-heads/{tokens}-tokens", student, term)
    for _ in range(MAX_DRAWS):
        sentence, features, x, weights, jobs, carries = _draw(rng, heads, tokens)
        ws = _complete(student, sentence, features, x, weights, jobs, carries, steps, term is not None)
        if _pencil_friendly(ws):
            return ws
    raise RuntimeError(f"worksheet: no problem within the limits in {MAX_DRAWS} draws")  # never seen in tests


def paper_worksheet() -> Worksheet:
    """The hand-chosen example of notebook 00a (``mha_lists.teaching.paper``) as a worksheet.

    >>> ws = paper_worksheet()
    >>> ws.student, ws.tokens, [row.d for row in ws.table], ws.jobs
    (None, ['I', 'like', 'transformers'], [0, -4, -8], ['previous token', 'subject'])
    """
    ex = paper_example()
    return _complete(None, ex.tokens, ex.features, ex.x, ex.weights, list(PAPER_HEADS),
                     ["what it is (noun, verb)"] * 2, STEP_NAMES, False)


def _complete(student, tokens, features, x, weights, jobs, carries, steps, term) -> Worksheet:
    """A worksheet with its answers: the trace, the integer raw scores and the e^x table."""
    d_k = len(weights.W_Q[0][0])
    scale = 1 / math.sqrt(d_k)
    trace = attention_trace(x, weights)
    scores = [integer_matrix(raw_scores(Q, K)) for Q, K in zip(trace.Q, trace.K)]
    table = exp_table(score_differences(scores), scale)
    return Worksheet(student, list(tokens), list(features), x, weights, d_k, scale, scores, table, trace,
                     list(jobs), list(carries), tuple(steps), term)


# === What is asked, what is given ===


def _asked(ws: Worksheet) -> list[tuple[str, Optional[int], int, int]]:
    """(name, head or None, rows, columns) of every matrix the student fills in, in working order."""
    T, h, d_k, d_model = len(ws.x), len(ws.weights.W_Q), ws.d_k, len(ws.x[0])
    out = []
    for head in range(h):
        if "qkv" in ws.steps:
            out += [("Q", head, T, d_k), ("K", head, T, d_k), ("V", head, T, d_k)]
        if "scores" in ws.steps:
            out.append(("raw scores", head, T, T))
        if "softmax" in ws.steps:
            out.append(("attention weights", head, T, T))
        if "output" in ws.steps:
            out.append(("output", head, T, d_k))
    if "output" in ws.steps:
        out += [("concat", None, T, h * d_k), ("output", None, T, d_model)]
    return out


def answer_cells(ws: Worksheet) -> int:
    """How many numbers the student writes: every cell of every matrix asked.

    >>> answer_cells(worksheet(1))  # 2 heads of (3 * 3 * 2 + 9 + 9 + 3 * 2) + 3 * 4 + 3 * 4
    108
    >>> answer_cells(worksheet(1, steps=["scores", "softmax"]))
    36
    """
    check_worksheet("answer_cells", "ws", ws)
    return sum(rows * cols for _, _, rows, cols in _asked(ws))


def _minutes(cells: int) -> int:
    return math.ceil(cells / CELLS_PER_MINUTE)


def _size_line(ws: Worksheet) -> str:
    cells = answer_cells(ws)
    return (f"This sheet: {cells} answer cells, about {_minutes(cells)} minutes "
            f"at {CELLS_PER_MINUTE} cells a minute.")


# === JSON ===


def as_json(ws: Worksheet) -> dict:
    """The problem and every answer as plain lists: Q, K, V and raw scores as ints, scores scaled.

    >>> sorted(as_json(worksheet(1))["answers"])
    ['K', 'Q', 'V', 'attention', 'concat', 'head_outputs', 'output', 'raw_scores', 'scores']
    """
    check_worksheet("as_json", "ws", ws)
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
            "raw_scores": [[list(row) for row in S] for S in ws.raw_scores],
            "scores": t.scores,
            "attention": t.attention,
            "head_outputs": t.head_outputs,
            "concat": t.concat,
            "output": t.output,
        },
        "features": list(ws.features),
        "head_jobs": list(ws.jobs),
        "value_carries": list(ws.carries),
        "steps": list(ws.steps),
        "answer_cells": answer_cells(ws),
        "with_term": ws.term,
    }


# === Markdown ===


def _labels(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{j}" for j in range(n)]


def _md_block(M: Matrix, title: str, rows: Sequence[str], cols: Sequence[str], digits: int = 4) -> str:
    return "```\n" + format_matrix(M, row_labels=rows, col_labels=cols, digits=digits, title=title) + "\n```"


def _name(ws) -> str:
    return "the example of notebook 00a" if ws.student is None else f"student {ws.student}"


def _facts(ws: Worksheet) -> str:
    T, d_model, h = len(ws.x), len(ws.x[0]), len(ws.weights.W_Q)
    return (f"{T} tokens, d_model = {d_model}, {h} head{'s' * (h > 1)}, d_k = d_v = {d_model} / {h} = {ws.d_k}, "
            f"scale = 1/sqrt({ws.d_k}) = {ws.scale:.4f}")


def _story(ws: Worksheet) -> list[str]:
    """What the features mean and what each head was built to do (a paragraph each)."""
    if ws.student is None:
        return PAPER_STORY.split("\n\n")
    places = ", ".join(f"({a}, {b})" for a, b in _POSITIONS[:len(ws.x)])
    features = (f"Each token is {len(ws.features)} integers. pos a, pos b say where it stands, a quarter turn "
                f"per position: {places}. noun, verb say what it is")
    features += ("; first, last mark the first and the last token." if "first" in ws.features else ".")
    jobs = [f"head {h} looks for {job} and carries {carry}" for h, (job, carry) in enumerate(zip(ws.jobs, ws.carries))]
    heads = ("The weights were built so that " + "; ".join(jobs) + ". Before you start, predict which token each "
             "token will look at in each head" + ("; after the softmax, circle the largest weight of each row (each "
                                                  "of them, when they tie) and compare." if "softmax" in ws.steps
                                                  else "."))
    return [features, heads]


STEP_TEXT = {
    "qkv": ["For each head h: Q = X W_Q, K = X W_K, V = X W_V (integers)."],
    "scores": ["Raw scores S = Q K^T (integers): S[i][j] = row i of Q times row j of K."],
    "softmax": ["In each row of S, take d = s - (largest s of the row) for every entry and look up e^(d * scale) "
                "in the table. Each weight is its e^x divided by the row's total. Each row sums to 1. Keep 3 "
                "decimals."],
    "output": ["Head output = weights V: row i is the weighted average of V's rows.",
               "concat = [head 0 | head 1 | ...], then output = concat W_O."],
}
STEPS = [line for name in STEP_NAMES for line in STEP_TEXT[name]]  # every step, in order


def _step_lines(ws: Worksheet) -> list[str]:
    return [line for name in ws.steps for line in STEP_TEXT[name]]


def _given(ws: Worksheet) -> list[tuple[str, Matrix, list[str], list[str], int]]:
    """(title, matrix, row labels, column labels, digits) of everything printed as given, sheet order.

    X always; the weights for the steps asked; the result of every step not asked that a
    later asked step needs (Q and K for the scores, raw scores for the softmax, ...).
    """
    toks, dims, d_k, s, t = ws.tokens, ws.features, ws.d_k, ws.steps, ws.trace
    h = len(ws.weights.W_Q)
    items = [("X", ws.x, toks, dims, 0)]
    for head in range(h):
        if "qkv" in s:
            items += [(f"{name}, head {head}", W[head], dims, _labels(p, d_k), 0)
                      for name, W, p in (("W_Q", ws.weights.W_Q, "q"), ("W_K", ws.weights.W_K, "k"),
                                         ("W_V", ws.weights.W_V, "v"))]
        else:
            if "scores" in s:
                items += [(f"Q, head {head}", integer_matrix(t.Q[head]), toks, _labels("q", d_k), 0),
                          (f"K, head {head}", integer_matrix(t.K[head]), toks, _labels("k", d_k), 0)]
            if "output" in s:
                items.append((f"V, head {head}", integer_matrix(t.V[head]), toks, _labels("v", d_k), 0))
        if "softmax" in s and "scores" not in s:
            items.append((f"raw scores Q K^T, head {head}", ws.raw_scores[head], toks, toks, 0))
        if "output" in s and "softmax" not in s:
            items.append((f"attention weights, head {head}", t.attention[head], toks, toks, 4))
    if "output" in s:
        items.append(("W_O", ws.weights.W_O, _labels("c", h * d_k), _labels("d", len(ws.x[0])), 0))
    return items


def to_markdown(ws: Worksheet, *, key: bool = False) -> str:
    """Student N's sheet as Markdown; with ``key=True`` every intermediate answer follows.

    >>> to_markdown(worksheet(1)).splitlines()[0]
    '# Multi-head attention on paper: student 1'
    >>> "## Answer key" in to_markdown(worksheet(1)), "## Answer key" in to_markdown(worksheet(1), key=True)
    (False, True)
    """
    check_worksheet("to_markdown", "ws", ws)
    check_type("to_markdown", "key", key, bool, "True or False")
    out = [f"# Multi-head attention on paper: {_name(ws)}", "",
           f"Sentence: **{' '.join(ws.tokens)}**. {_facts(ws)}.", ""]
    for paragraph in _story(ws):
        out += [paragraph, ""]
    if ws.student is None:
        out += ["To print it: `python -m mha_lists.tools.worksheet --example --format html > paper.html` "
                "(add `--key` for the answers, on a page of their own)." + (" The answers are also at the "
                "end of this page: cover them until you have your own." if key else ""), ""]
    out += [_size_line(ws), "", "## Given", ""]
    for title, M, rows, cols, digits in _given(ws):
        out += [_md_block(M, title, rows, cols, digits), ""]
    if "softmax" in ws.steps:
        out += ["Table of e^x for every difference that occurs on this sheet:", "", *_table_lines(ws), ""]
    out += ["## Your steps", ""]
    out += [f"{n}. {step}" for n, step in enumerate(_step_lines(ws), 1)]
    out.append("")
    if key:
        out += ["## Answer key", "", _key_note(ws), ""]
        for title, M, rows, cols, digits in _key_items(ws):
            out += [_md_block(M, title, rows, cols, digits), ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _table_lines(ws: Worksheet) -> list[str]:
    lines = ["| d = s - max(row) | x = d * scale | e^x |", "|---:|---:|---:|"]
    lines += [f"| {row.d} | {row.x:.3f} | {row.exp:.4f} |" for row in ws.table]
    return lines


def _key_note(ws: Worksheet) -> str:
    note = ("Weights and outputs are exact, to 4 decimals; an answer worked with the table agrees "
            "to about 0.001. Count an answer right when it is within 0.01.")
    if ws.student is not None and not ws.term:
        note += " Drawn without --term: anyone can print this key."
    return note


def _key_items(ws: Worksheet) -> list[tuple[str, Matrix, list[str], list[str], int]]:
    """(title, matrix, row labels, column labels, digits) of every answer asked, in working order."""
    t, toks, d_k, s = ws.trace, ws.tokens, ws.d_k, ws.steps
    h, d_model = len(t.Q), len(ws.x[0])
    items = []
    for head in range(h):
        if "qkv" in s:
            items += [(f"Q, head {head}", integer_matrix(t.Q[head]), toks, _labels("q", d_k), 0),
                      (f"K, head {head}", integer_matrix(t.K[head]), toks, _labels("k", d_k), 0),
                      (f"V, head {head}", integer_matrix(t.V[head]), toks, _labels("v", d_k), 0)]
        if "scores" in s:
            items.append((f"raw scores Q K^T, head {head}", ws.raw_scores[head], toks, toks, 0))
        if "softmax" in s:
            items += [(f"scaled scores, head {head}", t.scores[head], toks, toks, 4),
                      (f"attention weights, head {head}", t.attention[head], toks, toks, 4)]
        if "output" in s:
            items.append((f"output, head {head}", t.head_outputs[head], toks, _labels("v", d_k), 4))
    if "output" in s:
        items += [("concat", t.concat, toks, _labels("c", h * d_k), 4),
                  ("output", t.output, toks, _labels("d", d_model), 4)]
    return items


# === HTML ===
# Every size is in millimetres and fixed (table-layout: fixed), so the height of a page can be
# worked out before printing: _page_height adds up the same numbers the CSS uses.

ROW = 4.5  # a row of printed numbers, border included
BLANK_ROW = 8.6  # a row of answer cells, border included: 8.3 mm to write in
BLANK_CELL = 10.0  # width of an answer cell for a decimal: "0.94" by hand
INT_CELL = 8.0  # ... for a small integer (Q, K, V, raw scores): "-6" by hand
LABEL = 12.5  # the row-label column: six letters at 7.5pt
CAPTION = 4.5
HEAD_ROW = 4.5  # the column labels
GAP = 2.5  # between tables
CHAR = 1.6  # one character at 7.5pt monospace, with room
TEXT_LINE = 4.0  # a line of 9pt text
TEXT_CHARS = 115  # characters of 9pt text in one line across 190 mm (fewer than fit: errs high)
H1, H2 = 7.0, 6.5  # a title, a head's heading, with their margins

_CSS = """
@page { size: %(size)s; margin: 10mm; }
body { font: 9pt/4mm Georgia, 'Times New Roman', serif; margin: 0; color: #000; }
.page + .page { break-before: page; page-break-before: always; }
@media screen { .page { max-width: 190mm; padding: 6mm; border-bottom: 2px dashed #999; } }
h1 { font-size: 13pt; line-height: 6mm; margin: 0 0 1mm 0; }
h2 { font-size: 10pt; line-height: 5mm; margin: 1.5mm 0 0 0; }
p { margin: 0.5mm 0; }
.name { float: right; }
.row { display: flex; flex-wrap: wrap; gap: 2.5mm; align-items: flex-start; }
.heads { display: flex; gap: 2.5mm; align-items: flex-start; }
table.m { border-collapse: collapse; table-layout: fixed; font: 7.5pt/3.5mm 'DejaVu Sans Mono', Menlo, Consolas, monospace; }
table.m caption { caption-side: top; text-align: left; font: bold 8pt/4.5mm Georgia, serif; height: 4.5mm; white-space: nowrap; }
table.m th { font-weight: normal; color: #444; padding: 0 0.5mm; text-align: right; height: 4.5mm; overflow: hidden; white-space: nowrap; box-sizing: border-box; }
table.m td { border: 0.3mm solid #777; padding: 0 0.5mm; text-align: right; height: 4.5mm; white-space: nowrap; box-sizing: border-box; }
table.m td.start { border-left: 0.8mm solid #000; }
table.blank td { height: 8.6mm; }
ol.steps { margin: 1mm 0; padding-left: 5mm; }
ol.steps li, ol.q li { break-inside: avoid; }
ol.q { padding-left: 5mm; margin: 1mm 0; }
ol.q li { margin-bottom: 2mm; }
.keyblock { break-inside: avoid; page-break-inside: avoid; border-top: 0.3mm solid #999; }
ol.k { padding-left: 5mm; margin: 0 0 2mm 0; }
.line { display: inline-block; border-bottom: 0.3mm solid #000; width: 30mm; height: 8mm; vertical-align: bottom; }
"""


class _Table(NamedTuple):
    html: str
    width: float  # mm
    height: float  # mm


def _html_table(M, title: str, rows: Sequence[str], cols: Sequence[str], digits: int = 0, *,
                blank: bool = False, starts: Sequence[int] = (), cell: float = BLANK_CELL) -> _Table:
    """A labelled table of fixed size (mm); blank cells ``cell`` mm wide (or wider, for the labels);
    ``starts``: columns that open a new block (a thick line)."""
    texts = [] if blank else [_cell(v, digits) for row in M for v in row]
    longest = max([len(c) for c in cols] + [len(v) for v in texts] + [1])
    cell_w = max(cell if blank else 0.0, longest * CHAR + 1.0)
    label_w = max([LABEL] + [len(r) * CHAR + 1.0 for r in rows])
    width = label_w + cell_w * len(cols)
    out = [f'<table class="{"m blank" if blank else "m"}" style="width:{width:.1f}mm">'
           f"<caption>{html.escape(title)}</caption>",
           f'<colgroup><col style="width:{label_w:.1f}mm">' + f'<col style="width:{cell_w:.1f}mm">' * len(cols)
           + "</colgroup>",
           "<tr><th></th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
    for i, label in enumerate(rows):
        cells = ("" if blank else _cell(M[i][j], digits) for j in range(len(cols)))
        out.append(f"<tr><th>{html.escape(label)}</th>" + "".join(
            f'<td class="start">{c}</td>' if j in starts else f"<td>{c}</td>" for j, c in enumerate(cells)) + "</tr>")
    out.append("</table>")
    height = CAPTION + HEAD_ROW + len(rows) * (BLANK_ROW if blank else ROW)
    return _Table("\n".join(out), max(width, len(title) * 1.7), height)


def _cell(value, digits: int) -> str:
    return value if isinstance(value, str) else format_number(value, digits)


def _side_by_side(title: str, parts: Sequence[tuple[Optional[Matrix], list[str]]], rows: Sequence[str],
                  *, blank: bool = False) -> _Table:
    """Matrices with the same rows as one table, blocks side by side (Q | K | V)."""
    cols, starts, M = [], [], None if blank else [[] for _ in rows]
    for block, labels in parts:
        starts.append(len(cols))
        cols += labels
        if M is not None:
            for out_row, row in zip(M, block):
                out_row.extend(row)
    return _html_table(M, title, rows, cols, blank=blank, starts=starts[1:], cell=INT_CELL)


def _row(items: Sequence[_Table], width: float, cls: str = "row") -> tuple[str, float]:
    """A wrapping row of tables and its height: lines filled left to right, as flex-wrap does."""
    line_w, line_h, total = 0.0, 0.0, 0.0
    for t in items:
        if line_w and line_w + GAP + t.width > width:
            total += line_h + GAP
            line_w, line_h = 0.0, 0.0
        line_w = t.width if not line_w else line_w + GAP + t.width
        line_h = max(line_h, t.height)
    total += line_h
    return f'<div class="{cls}">\n' + "\n".join(t.html for t in items) + "\n</div>", total


def _text_height(text: str, chars: int = TEXT_CHARS, margin: float = 0.5) -> float:
    """Lines of text (an overestimate of how many) and the margin between paragraphs (they collapse)."""
    return TEXT_LINE * math.ceil(max(len(text), 1) / chars) + margin


def _paper(paper: str) -> tuple[str, float, float]:
    """The @page size of ``paper`` and the width and height (mm) inside its margins."""
    size, width, height = PAPERS[paper]
    return size, width - 2 * MARGIN, height - 2 * MARGIN


PAGE_WIDTH = min(w for _, w, _ in PAPERS.values()) - 2 * MARGIN  # the same layout on every paper


def _short(tokens: Sequence[str]) -> list[str]:
    """Token labels of at most 6 characters (``transformers`` -> ``trans.``), so tables stay narrow."""
    return [t if len(t) <= 6 else t[:5] + "." for t in tokens]


def _head_items(ws: Worksheet, head: int, width: float) -> list[_Table]:
    """The tables of one head, in an order that packs well: given weights and the head's output,
    then Q | K | V (as three tables when one is wider than ``width``), then the scores and the weights."""
    toks, d_k, dims, s, t, W = _short(ws.tokens), ws.d_k, ws.features, ws.steps, ws.trace, ws.weights
    q, k, v = _labels("q", d_k), _labels("k", d_k), _labels("v", d_k)
    first, middle, last = [], [], []
    if "qkv" in s:
        first.append(_side_by_side("W_Q | W_K | W_V", [(W.W_Q[head], q), (W.W_K[head], k), (W.W_V[head], v)], dims))
        together = _side_by_side("Q | K | V = X W_Q | X W_K | X W_V", [(None, q), (None, k), (None, v)], toks,
                                 blank=True)
        middle += [together] if together.width <= width else [
            _html_table(None, f"{name} = X W_{name}", toks, labels, blank=True, cell=INT_CELL)
            for name, labels in (("Q", q), ("K", k), ("V", v))]
    else:
        if "scores" in s:
            first.append(_side_by_side("Q | K", [(integer_matrix(t.Q[head]), q), (integer_matrix(t.K[head]), k)],
                                       toks))
        if "output" in s:
            first.append(_html_table(integer_matrix(t.V[head]), "V", toks, v))
    if "output" in s:
        first.append(_html_table(None, "output = weights V", toks, v, blank=True))
    if "scores" in s:
        last.append(_html_table(None, "raw scores Q K^T", toks, toks, blank=True, cell=INT_CELL))
    elif "softmax" in s:
        first.append(_html_table(ws.raw_scores[head], "raw scores Q K^T", toks, toks))
    if "softmax" in s:
        last.append(_html_table(None, "attention weights", toks, toks, blank=True))
    elif "output" in s:
        first.append(_html_table(t.attention[head], "attention weights", toks, toks, 4))
    return first + middle + last


def _sheet_page(ws: Worksheet) -> tuple[str, float]:
    """The student's page and its worked-out height in mm."""
    toks, d_k, s = ws.tokens, ws.d_k, ws.steps
    h = len(ws.weights.W_Q)
    head_line = f"Multi-head attention on paper: {_name(ws)}"
    facts = f"Sentence: {' '.join(toks)}. {_facts(ws)}. {_size_line(ws)}"
    out = ['<section class="page">', '<div class="name">Name: ____________________</div>',
           f"<h1>{html.escape(head_line)}</h1>", f"<p>{html.escape(facts)}</p>"]
    height = H1 + _text_height(facts)
    for paragraph in _story(ws):
        out.append(f"<p>{html.escape(paragraph)}</p>")
        height += _text_height(paragraph)
    steps = _step_lines(ws)
    out.append('<ol class="steps">' + "".join(f"<li>{html.escape(line)}</li>" for line in steps) + "</ol>")
    height += 2.0 + sum(_text_height(line, TEXT_CHARS - 5, margin=0.0) for line in steps)
    top = [_html_table(ws.x, "X", toks, ws.features)]
    if "softmax" in s:
        top.append(_html_table([[str(r.d) for r in ws.table], [f"{r.x:.3f}" for r in ws.table],
                                [f"{r.exp:.4f}" for r in ws.table]], "table of e^x",
                               ["d = s - max", "x = d * scale", "e^x"], [""] * len(ws.table)))
    html_row, row_h = _row(top, PAGE_WIDTH)
    out.append(html_row)
    height += row_h + GAP
    column = (PAGE_WIDTH - GAP * (h - 1)) / h  # one column per head, side by side
    columns, tallest = [], 0.0
    for head in range(h):
        html_row, row_h = _row(_head_items(ws, head, column), column)
        title = f"Head {head}: {ws.jobs[head]}"
        columns.append(f'<div style="width:{column:.1f}mm"><h2>{html.escape(title)}</h2>\n{html_row}</div>')
        tallest = max(tallest, H2 + row_h + _text_height(title, int(column / 2.2)) - TEXT_LINE - 1.0)
    out.append('<div class="heads">\n' + "\n".join(columns) + "\n</div>")
    height += tallest + GAP
    if "output" in s:
        out.append("<h2>All heads</h2>")
        html_row, row_h = _row([
            _html_table(ws.weights.W_O, "W_O", _labels("c", h * d_k), _labels("d", len(ws.x[0]))),
            _html_table(None, "concat", _short(toks), _labels("c", h * d_k), blank=True),
            _html_table(None, "output = concat W_O", _short(toks), _labels("d", len(ws.x[0])), blank=True)],
            PAGE_WIDTH)
        out.append(html_row)
        height += H2 + row_h
    out.append("</section>")
    return "\n".join(out), height


def _key_page(ws: Worksheet) -> tuple[str, float]:
    facts = f"Sentence: {' '.join(ws.tokens)}. {_facts(ws)}."
    note = _key_note(ws)
    out = ['<section class="page key">', f"<h1>Answer key: {html.escape(_name(ws))}</h1>",
           f"<p>{html.escape(facts)}</p>", f"<p>{html.escape(note)}</p>"]
    height = H1 + _text_height(facts) + _text_height(note)
    groups: dict = {}
    for title, M, rows, cols, digits in _key_items(ws):
        head = next((h for h in range(len(ws.jobs)) if title.endswith(f", head {h}")), None)
        cols = _short(cols) if cols == ws.tokens else cols
        groups.setdefault(head, []).append(_html_table(M, title.split(", head ")[0], _short(rows), cols, digits))
    for head, tables in groups.items():
        heading = "All heads" if head is None else f"Head {head}: {ws.jobs[head]}"
        html_row, row_h = _row(tables, PAGE_WIDTH)
        out += [f"<h2>{html.escape(heading)}</h2>", html_row]
        height += H2 + row_h
    out.append("</section>")
    return "\n".join(out), height


def _document(title: str, paper_size: str, pages: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n"
            f"<style>{_CSS % {'size': paper_size}}</style>\n</head>\n<body>\n" + "\n".join(pages)
            + "\n</body>\n</html>\n")


def page_heights(ws: Worksheet) -> tuple[float, float]:
    """The worked-out heights (mm) of the sheet's page and of its key's page (the same on every paper)."""
    check_worksheet("page_heights", "ws", ws)
    return _sheet_page(ws)[1], _key_page(ws)[1]


def fits_one_page(ws: Worksheet, paper: str = "a4") -> bool:
    """True when the sheet and its key each fit one page of ``paper`` (a4 or letter)."""
    check_worksheet("fits_one_page", "ws", ws)
    _, _, limit = _paper(check_paper("fits_one_page", "paper", paper))
    return max(page_heights(ws)) <= limit


def check_sheets(func: str, name: str, sheets: object) -> None:
    """A non-empty list of Worksheets, each as made (at most MAX_SHEETS of them)."""
    if not isinstance(sheets, (list, tuple)) or not sheets:
        raise ValueError(f"{func}: {name} must be a non-empty list of Worksheets")
    if len(sheets) > MAX_SHEETS:
        raise ValueError(f"{func}: {name} holds {len(sheets):,} Worksheets; at most {MAX_SHEETS:,} at a time")
    for i, ws in enumerate(sheets):
        check_worksheet(func, f"{name}[{i}]", ws)


def to_html(sheets: Sequence[Worksheet], *, key: bool = False, paper: str = "a4") -> str:
    """A print-ready page: each student's sheet on its own page; with ``key=True`` the keys
    follow, each on its own page, after all the sheets (print the first pages for the class).

    >>> page = to_html([worksheet(1), worksheet(2)], key=True, paper="letter")
    >>> page.count('<section class="page">'), page.count('<section class="page key">'), "size: letter" in page
    (2, 2, True)
    """
    check_sheets("to_html", "sheets", sheets)
    check_type("to_html", "key", key, bool, "True or False")
    size, _, _ = _paper(check_paper("to_html", "paper", paper))
    pages = [_sheet_page(ws)[0] for ws in sheets]
    if key:
        pages += [_key_page(ws)[0] for ws in sheets]
    first, last = sheets[0].student, sheets[-1].student
    who = _name(sheets[0]) if len(sheets) == 1 else f"students {first}-{last}"
    return _document(f"Multi-head attention on paper: {who}{' with keys' if key else ''}", size, pages)


# === The exam ===


class Question(NamedTuple):
    """One exam question: what the student reads and what the key says."""

    id: str  # "score", "softmax", "masked", "shape", "parameters"
    title: str
    prompt: str  # one paragraph
    given: dict  # the numbers of the question, by name
    answer: dict  # the key, by name
    answer_text: str  # the key in one line


class Exam(NamedTuple):
    """One student's five questions."""

    student: int
    questions: list[Question]
    term: bool


def _exp_lines(differences: Sequence[int], scale: float) -> list[ExpRow]:
    return exp_table(sorted(set(differences), reverse=True), scale)


def _q_score(rng: random.Random) -> Question:
    while True:
        q = [rng.randint(-3, 3) for _ in range(4)]
        k = [rng.randint(-3, 3) for _ in range(4)]
        raw = sum(a * b for a, b in zip(q, k))
        if raw and sum(v != 0 for v in q) >= 3 and sum(v != 0 for v in k) >= 3:
            break
    return Question("score", "One score",
                    f"A query q = {q} and a key k = {k}, d_k = 4. Write the raw score q . k and the "
                    "scaled score q . k / sqrt(d_k).",
                    {"q": q, "k": k, "d_k": 4}, {"raw": raw, "scaled": raw / 2},
                    f"q . k = {raw}; scaled: {raw} / 2 = {format_number(raw / 2, 1)}")


def _row_question(rng: random.Random, masked: bool) -> Question:
    while True:
        row = [rng.randint(-3, 3) * 2 for _ in range(4)]
        keep = rng.randint(1, 2) if masked else 3  # causal: position i sees keys 0..i
        seen = row[:keep + 1]
        if len(set(seen)) >= (2 if masked else 3) and max(seen) - min(seen) <= 8 \
                and (not masked or max(row) > max(seen)):  # a masked row hides a larger score
            break
    scale = 0.5
    table = _exp_lines([s - max(seen) for s in seen], scale)
    weights = softmax([s * scale for s in seen]) + [0.0] * (len(row) - len(seen))
    by_table = table_softmax(seen, scale) + [0.0] * (len(row) - len(seen))
    if masked:
        prompt = (f"Token {keep}'s raw scores against the keys at positions 0-3 are {row}, d_k = 4 (scale 1/2), "
                  f"with a causal mask: token {keep} may attend to positions 0-{keep} only. Write its {len(row)} "
                  "attention weights to 2 decimals, with the table of e^x.")
        qid, title = "masked", "A masked row"
    else:
        prompt = (f"Raw scores of one row are {row}, d_k = 4 (scale 1/2). Write the {len(row)} attention weights "
                  "to 2 decimals, with the table of e^x.")
        qid, title = "softmax", "One softmax row"
    return Question(qid, title, prompt,
                    {"raw_scores": row, "scale": scale, "visible": keep + 1, "table": [list(r) for r in table]},
                    {"weights": weights, "by_table": by_table},
                    "weights " + ", ".join(format_number(w, 2) for w in weights)
                    + (f" (positions after {keep} get 0: the mask)" if masked else ""))


def _q_shape(rng: random.Random) -> Question:
    d_model, heads = rng.choice([(64, 4), (96, 4), (96, 6), (128, 8), (128, 4), (256, 8), (384, 6), (512, 8),
                                 (768, 12), (192, 3)])
    d_k = d_model // heads
    while True:  # every size different, so each place of a shape can be told apart when marking
        T, B = rng.randint(5, 40), rng.randint(2, 16)
        if len({T, B, heads, d_k}) == 4:
            break
    answer = {"d_k": d_k, "Q_per_head": [B, heads, T, d_k], "scores": [B, heads, T, T], "W_O": [d_model, d_model]}
    return Question("shape", "A shape question",
                    f"A batch of {B} sequences of {T} tokens, d_model = {d_model}, {heads} heads. Write d_k, the shape "
                    "of Q split into heads [batch, heads, tokens, d_k], the shape of the attention scores, and the "
                    "shape of W_O.",
                    {"batch": B, "tokens": T, "d_model": d_model, "heads": heads}, answer,
                    f"d_k = {d_k}; Q [{B}, {heads}, {T}, {d_k}]; scores [{B}, {heads}, {T}, {T}]; "
                    f"W_O [{d_model}, {d_model}]")


def _q_parameters(rng: random.Random) -> Question:
    d_model, heads = rng.choice([(16, 2), (24, 3), (32, 4), (48, 4), (64, 8), (96, 6), (128, 8), (80, 5)])
    bias = rng.choice((False, True))
    count = 4 * d_model * d_model + (4 * d_model if bias else 0)
    return Question("parameters", "A parameter count",
                    f"Multi-head attention with d_model = {d_model} and {heads} heads, "
                    f"{'with' if bias else 'without'} biases. How many parameters do W_Q, W_K, W_V and W_O "
                    f"{'and their biases ' if bias else ''}hold in all? Does the answer depend on the number of heads?",
                    {"d_model": d_model, "heads": heads, "bias": bias}, {"count": count, "depends_on_heads": False},
                    f"4 * {d_model}^2{f' + 4 * {d_model}' if bias else ''} = {count:,}; no, not on the heads")


def exam(student: int, *, term: Optional[str] = None) -> Exam:
    """Student N's exam: one score, one softmax row, a masked row, a shape, a parameter count.

    >>> ex = exam(3)
    >>> [q.id for q in ex.questions], ex == exam(3), exam(3, term="oak") == ex
    (['score', 'softmax', 'masked', 'shape', 'parameters'], True, False)
    """
    check_student("exam", "student", student)
    check_term("exam", "term", term)
    rng = _rng("exam", student, term)
    questions = [_q_score(rng), _row_question(rng, False), _row_question(rng, True), _q_shape(rng),
                 _q_parameters(rng)]
    return Exam(student, questions, term is not None)


_QUESTION_IDS = ("score", "softmax", "masked", "shape", "parameters")


def check_exam(func: str, name: str, ex: object) -> None:
    """An Exam as exam(N) made it: five questions whose parts the pages print."""
    if not isinstance(ex, Exam):
        raise TypeError(f"{func}: {name} must be an Exam (from exam(N)), got {type(ex).__name__}")
    if not _exam_as_made(ex):
        raise ValueError(f"{func}: {name} is not as exam(N) made it: its questions were edited; make it again")


def _exam_as_made(ex: Exam) -> bool:
    if isinstance(ex.student, bool) or not isinstance(ex.student, int) or not 1 <= ex.student <= MAX_STUDENT:
        return False
    if not isinstance(ex.term, bool) or not isinstance(ex.questions, list) or \
            [getattr(q, "id", None) for q in ex.questions] != list(_QUESTION_IDS):
        return False
    for q in ex.questions:
        if not (isinstance(q, Question) and all(isinstance(t, str) for t in (q.title, q.prompt, q.answer_text))
                and isinstance(q.given, dict) and isinstance(q.answer, dict)):
            return False
        table = q.given.get("table", [])
        if not isinstance(table, list) or not all(isinstance(r, (list, tuple)) and len(r) == 3
                                                  and all(map(is_number, r)) for r in table):
            return False
        if not isinstance(q.answer.get("weights", []), list):
            return False
    return True


def exam_json(ex: Exam) -> dict:
    """The exam's questions and answers as plain lists and numbers."""
    check_exam("exam_json", "ex", ex)
    return {"student": ex.student, "with_term": ex.term,
            "questions": [{"id": q.id, "title": q.title, "prompt": q.prompt, "given": q.given, "answer": q.answer}
                          for q in ex.questions]}


_EXAM_NOTE = "Show your working. Weights to 2 decimals; count a weight right when it is within 0.01."


def exam_markdown(ex: Exam, *, key: bool = False) -> str:
    """The exam as Markdown; with ``key=True`` the answers follow.

    >>> exam_markdown(exam(1)).splitlines()[0]
    '# Multi-head attention exam: student 1'
    """
    check_exam("exam_markdown", "ex", ex)
    check_type("exam_markdown", "key", key, bool, "True or False")
    out = [f"# Multi-head attention exam: student {ex.student}", "", _EXAM_NOTE, ""]
    for n, q in enumerate(ex.questions, 1):
        out += [f"{n}. **{q.title}.** {q.prompt}", ""]
        if "table" in q.given:
            out += ["   | d = s - max | x = d * scale | e^x |", "   |---:|---:|---:|"]
            out += [f"   | {d} | {x:.1f} | {e:.4f} |" for d, x, e in q.given["table"]]
            out.append("")
    if key:
        out += ["## Answer key", ""]
        if not ex.term:
            out += ["Drawn without --term: anyone can print this key.", ""]
        out += [f"{n}. {q.title}: {q.answer_text}" for n, q in enumerate(ex.questions, 1)]
    return "\n".join(out).rstrip("\n") + "\n"


def _exam_page(ex: Exam) -> str:
    out = ['<section class="page">', '<div class="name">Name: ____________________</div>',
           f"<h1>Multi-head attention exam: student {ex.student}</h1>", f"<p>{html.escape(_EXAM_NOTE)}</p>",
           '<ol class="q">']
    for q in ex.questions:
        n = len(q.answer["weights"]) if "weights" in q.answer else 0
        boxes = _html_table(None, "weights", [""], [f"w{j}" for j in range(n)], blank=True).html if n else \
            "<p>Answer: " + '<span class="line"></span> ' * (4 if q.id == "shape" else 2) + "</p>"
        if "table" in q.given:
            rows = q.given["table"]
            boxes = '<div class="row">' + _html_table(
                [[str(d) for d, _, _ in rows], [f"{x:.1f}" for _, x, _ in rows], [f"{e:.4f}" for _, _, e in rows]],
                "table of e^x", ["d = s - max", "x = d * scale", "e^x"], [""] * len(rows)).html + boxes + "</div>"
        out.append(f"<li><b>{html.escape(q.title)}.</b> {html.escape(q.prompt)}<br>{boxes}"
                   '<div style="height:18mm"></div></li>')
    out += ["</ol>", "</section>"]
    return "\n".join(out)


KEY_BLOCK_GAP = 2.3  # mm under a student's key: the list's margin and the rule above the next


def _exam_key_block(ex: Exam) -> tuple[str, float]:
    """One student's key, a heading and five lines, and its height (mm, an overestimate); never split."""
    lines = [f"{q.title}. {q.answer_text}" for q in ex.questions]
    out = ['<div class="keyblock">', f"<h2>Student {ex.student}</h2>", '<ol class="k">']
    out += [f"<li><b>{html.escape(q.title)}.</b> {html.escape(q.answer_text)}</li>" for q in ex.questions]
    out += ["</ol>", "</div>"]
    return "\n".join(out), H2 + sum(_text_height(line, TEXT_CHARS - 5, 0) for line in lines) + KEY_BLOCK_GAP


def _exam_key_pages(exams: Sequence[Exam], paper: str) -> list[str]:
    """The keys, as many students to a page as fit ``paper`` by the worked-out heights: a page breaks
    only between two students' keys."""
    _, _, limit = _paper(paper)
    anyone = [] if all(ex.term for ex in exams) else ["Drawn without --term: anyone can print these keys."]
    top = H1 + sum(_text_height(text) for text in [_EXAM_NOTE, *anyone])
    pages: list[list[Exam]] = []
    used = limit
    for ex in exams:
        height = _exam_key_block(ex)[1]
        if used + height > limit:
            pages.append([])
            used = top
        pages[-1].append(ex)
        used += height
    out = []
    for group in pages:
        who = f"student {group[0].student}" if len(group) == 1 else \
            f"students {group[0].student}-{group[-1].student}"
        out.append("\n".join(['<section class="page keys">', f"<h1>Exam answer keys: {who}</h1>",
                              *(f"<p>{html.escape(text)}</p>" for text in [_EXAM_NOTE, *anyone]),
                              *(_exam_key_block(ex)[0] for ex in group), "</section>"]))
    return out


def check_exams(func: str, name: str, exams: object) -> None:
    """A non-empty list of Exams, each as made (at most MAX_SHEETS of them)."""
    if not isinstance(exams, (list, tuple)) or not exams:
        raise ValueError(f"{func}: {name} must be a non-empty list of Exams")
    if len(exams) > MAX_SHEETS:
        raise ValueError(f"{func}: {name} holds {len(exams):,} Exams; at most {MAX_SHEETS:,} at a time")
    for i, ex in enumerate(exams):
        check_exam(func, f"{name}[{i}]", ex)


def exam_html(exams: Sequence[Exam], *, key: bool = False, paper: str = "a4") -> str:
    """A print-ready page: one exam per page; with ``key=True`` the keys follow, several students to a
    page (9 on A4, 8 on Letter), a page breaking only between two students' keys.

    >>> page = exam_html([exam(n, term="oak") for n in range(1, 11)], key=True, paper="letter")
    >>> page.count('<section class="page">'), page.count('<section class="page keys">'), page.count('="keyblock"')
    (10, 2, 10)
    """
    check_exams("exam_html", "exams", exams)
    check_type("exam_html", "key", key, bool, "True or False")
    size, _, _ = _paper(check_paper("exam_html", "paper", paper))
    pages = [_exam_page(ex) for ex in exams] + (_exam_key_pages(exams, paper) if key else [])
    who = f"student {exams[0].student}" if len(exams) == 1 else f"students {exams[0].student}-{exams[-1].student}"
    return _document(f"Multi-head attention exam: {who}{' with keys' if key else ''}", size, pages)


# === The handout ===
#
# docs/handout.md, the one-page handout, as a page to print: its Markdown (the little of it the
# handout uses) and its LaTeX (the few commands its formulas use) drawn with the standard library,
# the picture it links to put inside the page. The Markdown stays the one source.

HANDOUT_FILE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "handout.md"

_HANDOUT_CSS = """
@page { size: %(size)s; margin: 12mm; }
body { font: 10pt/4.6mm Georgia, 'Times New Roman', serif; margin: 0; color: #000; }
@media screen { body { max-width: 190mm; margin: 6mm auto; } }
h1 { font-size: 15pt; line-height: 7mm; margin: 0 0 2mm 0; }
p { margin: 0 0 1.8mm 0; }
.display { text-align: center; margin: 1mm 0 2mm 0; font-size: 11pt; }
.math { font-style: italic; white-space: nowrap; }
.math .up { font-style: normal; }
.frac { display: inline-block; vertical-align: middle; text-align: center; line-height: 4.6mm; }
.frac > span { display: block; padding: 0 0.4mm; }
.frac > span + span { border-top: 0.25mm solid #000; }
.root { border-top: 0.25mm solid #000; padding-left: 0.3mm; }
.gap { display: inline-block; width: 8mm; }
.ss { display: inline-flex; flex-direction: column; vertical-align: 0.45em; font-size: 75%%; line-height: 1.05; }
figure { margin: 1mm 0 2mm 0; }
figure svg { width: 100%%; height: auto; display: block; }
table { border-collapse: collapse; margin: 0 0 2mm 0; width: 100%%; }
th, td { border: 0.25mm solid #777; padding: 0.4mm 1.5mm; text-align: left; vertical-align: top; }
code { font: 9pt 'DejaVu Sans Mono', Menlo, Consolas, monospace; }
ul { margin: 0; padding-left: 5mm; }
li { margin: 0 0 1.2mm 0; }
"""

_LATEX_WORDS = {"top": "\u22a4", "mid": "|", "dots": "\u2026", "sum": "\u03a3", "max": '<span class="up">max</span>',
                "qquad": '<span class="gap"></span>', ";": "\u2009", ",": "\u2009", "!": "", "left": "", "right": ""}
_LATEX_SIGNS = {"=": " = ", "-": " \u2212 ", "+": " + "}


def _latex(tex: str) -> str:
    """A formula of the handout as HTML: \\frac, \\sqrt, \\text, \\mathrm, sub- and superscripts and the
    few symbols it uses; ValueError naming any other command.

    >>> _latex(r"\\frac{Q K^\\top}{\\sqrt{d_k}}")
    '<span class="frac"><span>QK<sup>⊤</sup></span><span>√<span class="root">d<sub>k</sub></span></span></span>'
    """
    at = 0

    def command() -> str:
        nonlocal at
        name = re.match(r"[A-Za-z]+|.", tex[at:]).group(0)
        at += len(name)
        if name in ("text", "mathrm"):
            start = tex.index("{", at) + 1
            at = tex.index("}", start) + 1
            return f'<span class="up">{html.escape(tex[start:at - 1])}</span>'
        if name == "frac":
            top, bottom = atom(), atom()
            return f'<span class="frac"><span>{top}</span><span>{bottom}</span></span>'
        if name == "sqrt":
            return f'\u221a<span class="root">{atom()}</span>'
        if name in _LATEX_WORDS:
            return _LATEX_WORDS[name]
        raise ValueError(f"handout_html: a formula uses \\{name}, which the printed handout does not draw")

    def atom() -> str:
        nonlocal at
        while at < len(tex) and tex[at].isspace():
            at += 1
        if at == len(tex):
            raise ValueError("handout_html: a formula ends where a part of it was expected")
        char = tex[at]
        at += 1
        if char == "{":
            inner = run("}")
            at += 1
            return inner
        if char == "\\":
            return command()
        return _LATEX_SIGNS.get(char, html.escape(char))

    def run(end: Optional[str]) -> str:
        nonlocal at
        parts = []
        while at < len(tex) and tex[at] != end:
            if tex[at].isspace():
                at += 1
            elif tex[at] in "_^":
                scripts = {}
                while at < len(tex) and tex[at] in "_^" and tex[at] not in scripts:
                    mark = tex[at]
                    at += 1
                    scripts[mark] = atom()
                    while at < len(tex) and tex[at].isspace():
                        at += 1
                if len(scripts) == 2:  # both on one letter: one above the other, as LaTeX sets them
                    parts.append(f'<span class="ss"><span>{scripts["^"]}</span><span>{scripts["_"]}</span></span>')
                else:
                    tag = "sub" if "_" in scripts else "sup"
                    parts.append(f"<{tag}>{scripts.get('_', scripts.get('^'))}</{tag}>")
            else:
                parts.append(atom())
        return "".join(parts)

    return run(None)


def _inline(text: str) -> str:
    """A line of the handout's Markdown: `code`, $math$, **bold**, *italic*."""
    out = []
    for n, part in enumerate(re.split(r"(`[^`]*`|\$[^$]+\$)", text)):
        if n % 2:
            out.append(f"<code>{html.escape(part[1:-1])}</code>" if part[0] == "`" else
                       f'<span class="math">{_latex(part[1:-1])}</span>')
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", part)
        out.append(re.sub(r"\*(.+?)\*", r"<i>\1</i>", part))
    return "".join(out)


def _handout_blocks(text: str, folder: pathlib.Path) -> list[str]:
    """The handout's Markdown, block by block, as HTML."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.split("\n")
        if block.startswith("# "):
            out.append(f"<h1>{_inline(block[2:].strip())}</h1>")
        elif block.startswith("$$"):
            for formula in re.findall(r"\$\$(.+?)\$\$", block, re.S):
                out.append(f'<div class="display"><span class="math">{_latex(formula)}</span></div>')
        elif re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", block.strip()):
            alt, src = re.fullmatch(r"!\[([^\]]*)\]\(([^)]+)\)", block.strip()).groups()
            picture = (folder / src).read_text(encoding="utf-8") if src.endswith(".svg") else \
                f'<img src="{html.escape(src)}" alt="{html.escape(alt)}">'
            out.append(f"<figure>{picture}</figure>")
        elif block.startswith("|"):
            rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines
                    if not re.fullmatch(r"\|[\s:|-]+\|", line.strip())]
            head = "".join(f"<th>{_inline(cell)}</th>" for cell in rows[0])
            body = "".join("<tr>" + "".join(f"<td>{_inline(cell)}</td>" for cell in row) + "</tr>" for row in rows[1:])
            out.append(f"<table><tr>{head}</tr>{body}</table>")
        elif block.startswith("- "):
            items = re.split(r"\n(?=- )", block)
            out.append("<ul>" + "".join(f"<li>{_inline(' '.join(item[2:].split()))}</li>" for item in items) + "</ul>")
        else:
            out.append(f"<p>{_inline(' '.join(block.split()))}</p>")
    return out


def handout_html(*, paper: str = "a4", source: Optional[pathlib.Path] = None) -> str:
    """docs/handout.md (or ``source``) as a page to print, on one page of ``paper`` (a4 or letter).

    >>> page = handout_html(paper="letter")
    >>> "size: letter" in page, page.count("<svg"), "$" in page.split("</style>")[1]
    (True, 1, False)
    """
    check_paper("handout_html", "paper", paper)
    source = HANDOUT_FILE if source is None else pathlib.Path(source)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:  # an installed package has no docs/: they are the repository's
        why = getattr(e, "strerror", None) or str(e).splitlines()[0]
        where = str(source) if len(str(source)) <= 120 and str(source).isprintable() else shorten(str(source), 120)
        raise ValueError(f"handout_html: cannot read the handout {where} ({why}); "
                         "docs/handout.md is in the repository, beside the package") from None
    size, _, _ = _paper(paper)
    title = re.match(r"# (.+)", text)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title.group(1) if title else 'Handout')}</title>\n"
            f"<style>{_HANDOUT_CSS % {'size': size}}</style>\n</head>\n<body>\n<section class=\"page handout\">\n"
            + "\n".join(_handout_blocks(text, source.parent)) + "\n</section>\n</body>\n</html>\n")


# === Command line ===


def _student(text: str) -> int:
    try:
        value = int(text) if len(text) <= 12 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"{shorten(text, 24)} is not a whole number from 1 to {MAX_STUDENT}")
    if not 1 <= value <= MAX_STUDENT:
        raise argparse.ArgumentTypeError(f"{value} is not a student number from 1 to {MAX_STUDENT}")
    return value


def _students(text: str) -> list[int]:
    first, sep, last = text.partition("-")
    if not sep:
        raise argparse.ArgumentTypeError(f"{shorten(text, 24)} is not a range like 1-30")
    a, b = _student(first), _student(last)
    if a > b:
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} runs backwards; write the smaller number first")
    if b - a >= MAX_SHEETS:
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} is {b - a + 1} students; "
                                         f"print at most {MAX_SHEETS} at a time")
    return list(range(a, b + 1))


def term_argument(text: str) -> str:
    """``--term WORD`` as argparse reads it: check_term's rule, said in one line."""
    try:
        return check_term("--term", "term", text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the term must be 1-{MAX_TERM} printable characters, not only spaces "
                                         f"(got {len(text)})") from None


def _bounded(low: int, high: int, why: str):
    def parse(text: str) -> int:
        try:
            value = int(text) if len(text) <= 12 else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{shorten(text, 24)} is not {low}-{high} ({why})")
        return value
    return parse


def _steps(text: str) -> tuple:
    names = [s.strip() for s in text.split(",")]
    try:
        return check_steps("--steps", "steps", names)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--steps: ")) from None


_EXAMPLE = "00a"  # what a bare --paper means: the example of notebook 00a (its older spelling)


def _paper_size(text: str) -> str:
    if text not in PAPERS and text != _EXAMPLE:  # argparse passes the bare --paper's const through here too
        raise argparse.ArgumentTypeError(f"{shorten(text, 24)} is not a paper size; choose a4 or letter")
    return text


def _format(text: str) -> str:
    if text not in _FORMATS:
        raise argparse.ArgumentTypeError(f"{shorten(text, 24)} is not a format; choose md, html or json")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.worksheet",
                                description="Print per-student attention-on-paper worksheets or exams, "
                                            "with their keys.")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--student", type=_student, metavar="N", help="the student's number N")
    who.add_argument("--students", type=_students, metavar="A-B", help="every student from A to B, e.g. 1-30")
    who.add_argument("--example", action="store_true", help="the hand-chosen example of notebook 00a")
    who.add_argument("--handout", action="store_true",
                     help="docs/handout.md as a page to print (HTML), on one page of --paper")
    parser.add_argument("--term", type=term_argument, metavar="WORD",
                        help="the teacher's secret for this term: same term and student, same sheet; "
                             "nobody who lacks it can print the key (without --term, anyone can)")
    parser.add_argument("--exam", action="store_true", help="five short exam questions instead of a worksheet")
    parser.add_argument("--heads", type=_bounded(1, MAX_HEADS, "more do not fit one page"),
                        metavar="N", help=f"heads on the sheet, 1-{MAX_HEADS} (default 2)")
    parser.add_argument("--tokens", type=_bounded(MIN_TOKENS, MAX_TOKENS, "a quarter turn per position"),
                        metavar="N", help=f"tokens, {MIN_TOKENS}-{MAX_TOKENS} (default 3)")
    parser.add_argument("--steps", type=_steps, metavar="LIST",
                        help=f"the steps to do, comma-separated, from {','.join(STEP_NAMES)} (default: all)")
    parser.add_argument("--paper", nargs="?", const=_EXAMPLE, type=_paper_size, metavar="a4|letter",
                        help="the page size (default a4); a sheet and its key each fit one page of it. "
                             "A bare --paper, the older spelling of --example, prints the example of 00a")
    parser.add_argument("--key", action="store_true", help="add every answer")
    parser.add_argument("--format", type=_format, default="md", metavar="md|html|json",
                        help="md (default), html (print-ready, one student per page) or json "
                             "(always with the answers)")
    return parser


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The rules argparse cannot say: who is named once; options that do not go together; defaults."""
    if args.paper == _EXAMPLE:
        if args.student is not None or args.students or args.handout:
            parser.error("a bare --paper (the example of 00a) is not allowed with --student/--students/--handout; "
                         "write --paper a4 or --paper letter")
        args.example, args.paper = True, None
    if args.student is None and not args.students and not args.example and not args.handout:
        parser.error("one of the arguments --student --students --example --handout is required")
    if args.handout:
        given = [f"--{name}" for name in ("term", "heads", "tokens", "steps") if getattr(args, name) is not None]
        given += ["--exam"] * args.exam + ["--key"] * args.key + ["--format json"] * (args.format == "json")
        if given:
            parser.error(f"--handout prints the handout as it is, a page of HTML; it takes no {', '.join(given)}")
        args.format = "html"  # the handout's Markdown is docs/handout.md itself
    sizes = [name for name in ("heads", "tokens", "steps") if getattr(args, name) is not None]
    extra = [f"--{name}" for name in sizes] + ["--term"] * (args.term is not None) + ["--exam"] * args.exam
    if args.example and extra:
        parser.error(f"--example is the fixed sheet of notebook 00a; it takes no {', '.join(extra)}")
    if args.exam and sizes:
        parser.error(f"--exam has five fixed questions; it takes no {', '.join('--' + n for n in sizes)}")
    args.heads = 2 if args.heads is None else args.heads
    args.tokens = 3 if args.tokens is None else args.tokens
    args.steps = STEP_NAMES if args.steps is None else args.steps
    args.paper = args.paper or "a4"
    if args.term == EXAMPLE_TERM:  # loud, but the documented commands still run as written
        print(f"{parser.prog}: warning: --term {EXAMPLE_TERM} is the example term printed in this project's "
              "documentation, so anyone can print these sheets and their keys; for a class, choose a term of your "
              "own and keep it secret", file=sys.stderr)


def check_arguments(func: str, name: str, args: object) -> None:
    """What build_parser() parsed and _validate completed: one of --student, --students, --example; each
    option's value as the parser allows it."""
    if not isinstance(args, argparse.Namespace):
        raise TypeError(f"{func}: {name} must be the parsed arguments (build_parser().parse_args(...)), "
                        f"got {type(args).__name__}")
    given = {option: getattr(args, option, None) for option in ("student", "students", "example", "exam", "term",
                                                                "heads", "tokens", "steps", "paper", "key", "format")}
    given["handout"] = getattr(args, "handout", False)  # parsed arguments from before --handout existed lack it
    for option in ("example", "exam", "key", "handout"):
        if not isinstance(given[option], bool):
            raise TypeError(f"{func}: {name}.{option} must be True or False, got {shorten(given[option])}")
    if given["format"] not in _FORMATS:
        raise ValueError(f"{func}: {name}.format must be one of {', '.join(_FORMATS)}, "
                         f"got {shorten(given['format'], 40)}")
    students = given["students"] or []
    if not isinstance(students, list) or len(students) > MAX_SHEETS:
        raise ValueError(f"{func}: {name}.students must be a list of at most {MAX_SHEETS} student numbers")
    for n in students:
        check_student(func, f"{name}.students[]", n)
    if given["student"] is not None:
        check_student(func, f"{name}.student", given["student"])
    if (given["student"] is not None) + bool(students) + given["example"] + given["handout"] != 1:
        raise ValueError(f"{func}: {name} must name one of student, students, example and handout")
    check_term(func, f"{name}.term", given["term"])
    check_heads(func, f"{name}.heads", given["heads"])
    check_tokens(func, f"{name}.tokens", given["tokens"])
    check_steps(func, f"{name}.steps", given["steps"])
    check_paper(func, f"{name}.paper", given["paper"])


def render(args: argparse.Namespace) -> str:
    """What ``main`` prints for parsed (and validated) arguments; ValueError if a page would overflow."""
    check_arguments("render", "args", args)
    if getattr(args, "handout", False):
        return handout_html(paper=args.paper)
    numbers = [args.student] if args.student is not None else args.students
    many = bool(args.students)
    if args.exam:
        exams = [exam(n, term=args.term) for n in numbers]
        if args.format == "json":
            objects = [exam_json(ex) for ex in exams]
            return json.dumps(objects if many else objects[0]) + "\n"
        if args.format == "html":
            return exam_html(exams, key=args.key, paper=args.paper)
        return "\n---\n\n".join(exam_markdown(ex, key=args.key) for ex in exams)
    if args.example:
        sheets = [paper_worksheet()]
    else:
        sheets = [worksheet(n, term=args.term, heads=args.heads, tokens=args.tokens, steps=args.steps)
                  for n in numbers]
        _check_fit(sheets, args.paper)
    if args.format == "json":
        objects = [as_json(ws) for ws in sheets]
        return json.dumps(objects if many else objects[0]) + "\n"
    if args.format == "html":
        return to_html(sheets, key=args.key, paper=args.paper)
    return "\n---\n\n".join(to_markdown(ws, key=args.key) for ws in sheets)


def _check_fit(sheets: Sequence[Worksheet], paper: str) -> None:
    """Refuse a size whose sheet or key would run onto a second page (in every format, so a
    teacher sees it before printing)."""
    _, width, limit = _paper(paper)
    for ws in sheets:
        need = max(page_heights(ws))
        if need > limit:
            raise ValueError(
                f"--heads {len(ws.jobs)} --tokens {len(ws.tokens)} --steps {','.join(ws.steps)}: student "
                f"{ws.student}'s sheet needs about {need:.0f} mm, more than one {paper} page ({limit:.0f} mm); "
                "ask fewer --steps, --heads or --tokens")


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _validate(parser, args)
    try:
        text = render(args)
    except ValueError as e:
        parser.error(str(e))
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
