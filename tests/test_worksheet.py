"""tools/worksheet.py: per-student worksheets and exams, their answer keys, and the command.

Every answer a worksheet prints is recomputed here with plain loops, independently of the module.
"""

import argparse
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import commands
from bad_inputs import assert_no_mutation, assert_template, refused

from mha_lists.teaching.paper import integer_matrix, paper_example, table_softmax
from mha_lists.tools import worksheet as module
from mha_lists.tools.worksheet import (handout_html, MAX_QKV, MAX_SHEETS, MAX_SPREAD, MAX_TABLE, STEP_NAMES, answer_cells, as_json,
                                       build_parser, degenerate, exam, exam_html, exam_json, exam_markdown,
                                       fits_one_page, page_heights, paper_worksheet, render, to_html, to_markdown,
                                       worksheet)

ROOT = pathlib.Path(__file__).resolve().parent.parent
STEPS = "qkv, scores, softmax, output"
MADE = "worksheet(N) or paper_worksheet()"

# Every message the module writes, once. Other tests match only "func: argument".
MESSAGES = {
    "student": "{func}: {name} must be a whole number from 1 to 1000000000, got {value}",
    "term type": "{func}: {name} must be a str (the teacher's secret word) or None, got {type}",
    "term": "{func}: {name} must be 1-200 printable characters, not only spaces, got {n} characters",
    "heads": "{func}: {name} must be 1-3 (more do not fit one page), got {value}",
    "tokens": "{func}: {name} must be 2-4 (a quarter turn per position), got {value}",
    "steps": "{func}: {name} must be a non-empty list of " + STEPS + ", got {value}",
    "steps holds": "{func}: {name} holds {value}; each step must be one of " + STEPS,
    "steps twice": "{func}: {name} names a step twice: {step}",
    "paper": "{func}: {name} must be one of a4, letter, got {value}",
    "not a worksheet": "{func}: {name} must be a Worksheet (from " + MADE + "), got {type}",
    "edited worksheet": "{func}: {name} is not as " + MADE + " made it: its parts do not fit together, or its "
                        "answers do not follow from its X and weights; make it again",
    "no sheets": "{func}: {name} must be a non-empty list of Worksheets",
    "too many sheets": "{func}: {name} holds {n} Worksheets; at most 1,000 at a time",
    "not an exam": "{func}: {name} must be an Exam (from exam(N)), got {type}",
    "edited exam": "{func}: {name} is not as exam(N) made it: its questions were edited; make it again",
    "no exams": "{func}: {name} must be a non-empty list of Exams",
    "too many exams": "{func}: {name} holds {n} Exams; at most 1,000 at a time",
    "not arguments": "{func}: {name} must be the parsed arguments (build_parser().parse_args(...)), got {type}",
    "argument switch": "{func}: {name} must be True or False, got {value}",
    "argument format": "{func}: {name} must be one of md, html, json, got {value}",
    "argument students": "{func}: {name} must be a list of at most 1000 student numbers",
    "argument who": "{func}: {name} must name one of student, students, example and handout",
    "page overflow": "--heads {heads} --tokens {tokens} --steps {steps}: student {student}'s sheet needs about "
                     "{need} mm, more than one {paper} page ({limit} mm); ask fewer --steps, --heads or --tokens",
}

WS = worksheet(1)
EXAM = exam(2)


def parsed(*argv, complete=True):
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if complete:
        module._validate(parser, args)
    return args


# key -> (error type, a real bad call, the fields of the template)
BAD_CALLS = {
    "student": (ValueError, lambda: worksheet(10**5000), dict(func="worksheet", name="student",
                                                              value="an int of about 5,000 digits")),
    "term type": (TypeError, lambda: exam(1, term=42), dict(func="exam", name="term", type="int")),
    "term": (ValueError, lambda: worksheet(1, term="a\nb"), dict(func="worksheet", name="term", n=3)),
    "heads": (ValueError, lambda: worksheet(1, heads=True), dict(func="worksheet", name="heads", value=True)),
    "tokens": (ValueError, lambda: worksheet(1, tokens=1.5), dict(func="worksheet", name="tokens", value=1.5)),
    "steps": (ValueError, lambda: worksheet(1, steps="qkv"), dict(func="worksheet", name="steps", value="'qkv'")),
    "steps holds": (ValueError, lambda: worksheet(1, steps=[["qkv"]]),
                    dict(func="worksheet", name="steps", value="['qkv']")),
    "steps twice": (ValueError, lambda: worksheet(1, steps=("qkv", "scores", "qkv")),
                    dict(func="worksheet", name="steps", step="qkv")),
    "paper": (ValueError, lambda: fits_one_page(WS, paper=["a4"]), dict(func="fits_one_page", name="paper",
                                                                      value="['a4']")),
    "not a worksheet": (TypeError, lambda: to_html([WS, 5]), dict(func="to_html", name="sheets[1]", type="int")),
    "edited worksheet": (ValueError, lambda: as_json(WS._replace(x=[[1] * 4] * 3)), dict(func="as_json", name="ws")),
    "no sheets": (ValueError, lambda: to_html(()), dict(func="to_html", name="sheets")),
    "too many sheets": (ValueError, lambda: to_html([WS] * (MAX_SHEETS + 1)),
                        dict(func="to_html", name="sheets", n="1,001")),
    "not an exam": (TypeError, lambda: exam_html([EXAM, None]), dict(func="exam_html", name="exams[1]",
                                                                     type="NoneType")),
    "edited exam": (ValueError, lambda: exam_markdown(EXAM._replace(questions=EXAM.questions[:2])),
                    dict(func="exam_markdown", name="ex")),
    "no exams": (ValueError, lambda: exam_html([]), dict(func="exam_html", name="exams")),
    "too many exams": (ValueError, lambda: exam_html([EXAM] * (MAX_SHEETS + 1)),
                       dict(func="exam_html", name="exams", n="1,001")),
    "not arguments": (TypeError, lambda: render(None), dict(func="render", name="args", type="NoneType")),
    "argument switch": (TypeError, lambda: render(argparse.Namespace(**{**vars(parsed("--student", "3")), "key": 1})),
                        dict(func="render", name="args.key", value=1)),
    "argument format": (ValueError, lambda: render(argparse.Namespace(**{**vars(parsed("--student", "3")),
                                                                        "format": "pdf" * 100})),
                        dict(func="render", name="args.format", value="'pdfpdfpdfpdfpdfpdfpdfpdfpdfpdfpdfpd ...")),
    "argument students": (ValueError, lambda: render(argparse.Namespace(**{**vars(parsed("--student", "3")),
                                                                          "students": (1, 2)})),
                          dict(func="render", name="args.students")),
    "argument who": (ValueError, lambda: render(argparse.Namespace(**{**vars(parsed("--student", "3")),
                                                                     "example": True})),
                     dict(func="render", name="args")),
    "page overflow": (ValueError, lambda: render(parsed("--student", "1", "--heads", "3", "--tokens", "4")),
                      dict(heads=3, tokens=4, steps="qkv,scores,softmax,output", student=1,
                           need=round(max(page_heights(worksheet(1, heads=3, tokens=4)))), paper="a4", limit=277)),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === An independent forward pass: loops, no mha_lists ===


def loop_matmul(A, B):
    return [[math.fsum(A[i][t] * B[t][j] for t in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def loop_softmax(row):
    exps = [math.exp(s - max(row)) for s in row]
    return [e / math.fsum(exps) for e in exps]


def loop_attention(X, W_Q, W_K, W_V, W_O, scale):
    """Every intermediate of multi-head attention, as the worksheet's JSON names them."""
    out = {"Q": [], "K": [], "V": [], "raw_scores": [], "scores": [], "attention": [], "head_outputs": []}
    for h in range(len(W_Q)):
        Q, K, V = loop_matmul(X, W_Q[h]), loop_matmul(X, W_K[h]), loop_matmul(X, W_V[h])
        R = [[math.fsum(q * k for q, k in zip(Q[i], K[j])) for j in range(len(K))] for i in range(len(Q))]
        S = [[r * scale for r in row] for row in R]
        A = [loop_softmax(row) for row in S]
        for name, M in zip(out, (Q, K, V, R, S, A, loop_matmul(A, V))):
            out[name].append(M)
    out["concat"] = [[v for H in out["head_outputs"] for v in H[i]] for i in range(len(X))]
    out["output"] = loop_matmul(out["concat"], W_O)
    return out


def assert_close(got, expected, tol=1e-12):
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_close(g, e, tol)
    else:
        assert math.isclose(got, expected, rel_tol=tol, abs_tol=tol), (got, expected)


# === Worksheets ===

STUDENTS = range(1, 61)


@pytest.mark.parametrize("n", STUDENTS)
def test_every_worksheet_answer_recomputed_independently(n):
    obj = as_json(worksheet(n))
    expected = loop_attention(obj["X"], obj["W_Q"], obj["W_K"], obj["W_V"], obj["W_O"], obj["scale"])
    assert set(obj["answers"]) == set(expected)
    for name, value in expected.items():
        assert_close(obj["answers"][name], value)
    assert obj["scale"] == 1 / math.sqrt(len(obj["W_Q"][0][0]))


@pytest.mark.parametrize("n", STUDENTS)
def test_worksheet_respects_the_classroom_limits(n):
    ws = worksheet(n)
    T, d_model, h = len(ws.x), len(ws.x[0]), len(ws.weights.W_Q)
    assert 1 <= T <= 4 and d_model <= 6 and h >= 2 and d_model % h == 0 and len(ws.tokens) == T
    given = [ws.x, *ws.weights.W_Q, *ws.weights.W_K, *ws.weights.W_V, ws.weights.W_O]
    assert all(isinstance(v, int) and -5 <= v <= 5 for M in given for row in M for v in row)
    for M in (*ws.trace.Q, *ws.trace.K, *ws.trace.V):
        assert all(abs(v) <= MAX_QKV for v in sum(integer_matrix(M), []))
    diffs = set()
    for S in ws.raw_scores:
        assert any(max(row) > min(row) for row in S), "every head has something to attend to"
        for row in S:
            assert max(row) - min(row) <= MAX_SPREAD
            diffs |= {s - max(row) for s in row}
    assert sorted(diffs, reverse=True) == [r.d for r in ws.table] and len(ws.table) <= MAX_TABLE
    # the table's numbers give the weights to within 0.001
    for S, A in zip(ws.raw_scores, ws.trace.attention):
        for row, exact in zip(S, A):
            assert max(abs(a - b) for a, b in zip(table_softmax(row, ws.scale), exact)) < 1e-3


def test_different_students_get_different_problems():
    problems = {json.dumps({k: v for k, v in as_json(worksheet(n)).items() if k not in ("student", "answers")})
                for n in STUDENTS}
    assert len(problems) == len(STUDENTS)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3", None, 10**9 + 1])
def test_worksheet_refuses_a_bad_student_number(bad):
    refused("worksheet", lambda: worksheet(bad))
    with pytest.raises(ValueError, match=r"^worksheet: student"):
        worksheet(bad)


def test_markdown_key_holds_every_answer_and_the_sheet_holds_none():
    ws = worksheet(3)
    sheet, key = to_markdown(ws), to_markdown(ws, key=True)
    assert key.startswith(sheet.rstrip("\n")) and "## Answer key" in key and "Answer key" not in sheet
    for h in range(len(ws.weights.W_Q)):
        for title in ("Q", "K", "V", "raw scores Q K^T", "scaled scores", "attention weights", "output"):
            assert f"{title}, head {h} (" in key
    assert "concat (" in key and "\noutput (" in key


def test_html_puts_each_student_and_each_key_on_its_own_page():
    sheets = [worksheet(n) for n in (1, 2, 3)]
    page = to_html(sheets, key=True)
    assert page.count('<section class="page">') == 3 and page.count('<section class="page key">') == 3
    assert "break-before: page" in page and "@page" in page
    assert page.index("Answer key: student 1") > page.index("student 3</h1>")


def test_as_json_hands_out_copies():
    ws = worksheet(4)
    obj = as_json(ws)
    obj["X"][0][0] = 99
    obj["W_Q"][0][0][0] = 99
    assert ws == worksheet(4), "changing the JSON object changed the worksheet"


# === A worksheet as made, and only as made ===


EDITED_SHEETS = [
    WS._replace(x=[[1] * 4] * 3),  # X changed, the answers not
    WS._replace(steps=("bogus",)),
    WS._replace(steps=("softmax", "scores")),  # out of working order
    WS._replace(jobs=["one job"]),  # one job for two heads
    WS._replace(tokens=["a", "b"]),  # two tokens for three rows
    WS._replace(trace=WS.trace._replace(output=[[0.0]])),
    WS._replace(weights=WS.weights._replace(W_O=[[1.0]])),
    WS._replace(x=[[10**400] * 4] * 3),  # an int past float range
    WS._replace(student=0),
]


@pytest.mark.parametrize("ws", EDITED_SHEETS)
@pytest.mark.parametrize("func", [to_markdown, as_json, answer_cells, degenerate, page_heights, fits_one_page])
def test_an_edited_worksheet_is_refused_by_name(func, ws):
    with pytest.raises(ValueError, match=rf"^{func.__name__}: ws is not as worksheet\(N\) or paper_worksheet\(\)"):
        func(ws)


@pytest.mark.parametrize("func", [to_markdown, as_json, answer_cells, degenerate, page_heights, fits_one_page])
def test_renderers_refuse_what_is_not_a_worksheet(func):
    for bad in (None, {"student": 1}, EXAM):
        with pytest.raises(TypeError, match=rf"^{func.__name__}: ws must be a Worksheet"):
            func(bad)


def test_a_worksheet_with_other_words_is_still_a_worksheet():
    renamed = WS._replace(tokens=["x", "y", "z"])
    assert "Sentence: **x y z**." in to_markdown(renamed)
    assert answer_cells(paper_worksheet()) > 0


def test_nothing_is_changed_by_a_call():
    sheets = [worksheet(1), worksheet(2)]
    for call, args in ((to_html, (sheets,)), (as_json, (sheets[0],)), (to_markdown, (sheets[1],)),
                       (exam_html, ([exam(1)],)), (page_heights, (sheets[0],)), (worksheet, (1,))):
        assert_no_mutation(call, *args)
    assert_no_mutation(worksheet, 1, steps=["softmax", "scores"])
    assert math.isfinite(page_heights(WS)[0])


def test_render_takes_what_the_parser_made():
    assert render(parsed("--student", "3")) == to_markdown(worksheet(3))
    with pytest.raises(ValueError, match=r"^render: args.heads"):
        render(parsed("--student", "3", complete=False))  # not completed by _validate


# === The commands a learner or a teacher types, and what they are told ===


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.worksheet", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")


# What the command says for bad arguments: one line, exit code 2 (argparse's words or the module's).
CLI_MESSAGES = [
    ((), "one of the arguments --student --students --example --handout is required"),
    (("--student", "0"), "0 is not a student number from 1 to"),
    (("--student", "x"), "'x' is not a whole number"),
    (("--student", "abc"), "'abc' is not a whole number from 1 to 1000000000"),
    (("--students", "0-5"), "0 is not a student number from 1 to"),
    (("--student", "9" * 5000), "is not a whole number from 1 to"),
    (("--students", "1-5000"), "print at most 1000 at a time"),
    (("--student", "1", "--term", ""), "the term must be 1-200 printable characters"),
    (("--student", "1", "--term", "   "), "not only spaces"),
    (("--student", "1", "--term", "x" * 201), "the term must be 1-200"),
    (("--student", "1", "--heads", "99"), "'99' is not 1-3"),
    (("--student", "1", "--heads", "0"), "'0' is not 1-3"),
    (("--student", "1", "--tokens", "5"), "'5' is not 2-4"),
    (("--student", "1", "--tokens", "9" * 5000), "is not 2-4"),
    (("--student", "1", "--steps", "qkv,foo"), "steps holds 'foo'"),
    (("--student", "1", "--steps", "qkv,qkv"), "names a step twice"),
    (("--student", "1", "--steps", "qkv," + "x" * 5000), "steps holds 'xxxxxxxx"),
    (("--student", "1", "--paper", "a5"), "'a5' is not a paper size; choose a4 or letter"),
    (("--student", "1", "--paper"), "a bare --paper (the example of 00a) is not allowed with --student"),
    (("--student", "1", "--heads", "3"), "more than one a4 page"),
    (("--student", "1", "--tokens", "4", "--paper", "letter"), "more than one letter page"),
    (("--example", "--term", "oak"), "it takes no --term"),
    (("--example", "--heads", "1"), "it takes no --heads"),
    (("--student", "1", "--exam", "--steps", "qkv"), "--exam has five fixed questions; it takes no --steps"),
    (("--paper", "letter"), "one of the arguments --student --students --example --handout is required"),
    (("--handout", "--key"), "--handout prints the handout as it is, a page of HTML; it takes no --key"),
    (("--handout", "--term", "oak", "--format", "json"), "--handout prints the handout as it is, a page of HTML; "
                                                         "it takes no --term, --format json"),
    (("--handout", "--paper"), "a bare --paper (the example of 00a) is not allowed with --student/--students/--handout"),
    (("--handout", "--example"), "argument --example: not allowed with argument --handout"),
    (("--students", "5-2"), "runs backwards"),
    (("--students", "7"), "is not a range like 1-30"),
    (("--student", "1", "--format", "pdf"), "argument --format: 'pdf' is not a format; choose md, html or json"),
    (("--student", "1", "--format", "x" * 5000), "argument --format: 'xxxxxxxxxxxxxxxxxxx ... is not a format"),
    (("--student", "1", "--students", "1-2"), "not allowed with argument"),
]


@pytest.mark.parametrize("args, message", CLI_MESSAGES)
def test_bad_arguments_give_one_line_and_exit_code_2(args, message):
    result = commands.completed(module.main, args)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert len(result.stderr) < 300, "a value typed is shown cut short"


def test_the_real_command_line_says_the_same_line():
    args = CLI_MESSAGES[1][0]
    real, in_process = run(*args), commands.completed(module.main, args)
    assert (real.returncode, real.stdout, real.stderr) == (2, "", in_process.stderr)
    assert in_process.stderr.startswith("python -m mha_lists.tools.worksheet: error: ")


def test_same_student_same_bytes_and_json_is_one_object():
    first, again = run("--student", "12", "--format", "json"), run("--student", "12", "--format", "json")
    assert first.returncode == 0 and first.stdout == again.stdout and first.stderr == ""
    obj = json.loads(first.stdout)
    assert list(obj) == ["student", "tokens", "X", "W_Q", "W_K", "W_V", "W_O", "scale", "answers", "features",
                         "head_jobs", "value_carries", "steps", "answer_cells", "with_term"]
    assert obj["student"] == 12 and obj == json.loads(json.dumps(as_json(worksheet(12))))


def test_a_class_in_one_html_file():
    result = run("--students", "1-30", "--key", "--format", "html")
    assert result.returncode == 0
    assert result.stdout.count('<section class="page">') == 30
    assert result.stdout.count('<section class="page key">') == 30


def test_the_printable_sheet_is_the_modules_own_output():
    # After a deliberate change: python -m mha_lists.tools.worksheet --example --key > docs/attention-on-paper.md
    # (a bare --paper, the older spelling, gives the same bytes)
    for args in (("--example", "--key"), ("--paper", "--key")):
        result = run(*args)
        assert result.returncode == 0
        assert result.stdout == (ROOT / "docs" / "attention-on-paper.md").read_text(encoding="utf-8")


def test_paper_sheet_in_every_format():
    obj = json.loads(run("--paper", "--format", "json").stdout)
    assert obj["student"] is None and obj["tokens"] == ["I", "like", "transformers"]
    expected = loop_attention(obj["X"], obj["W_Q"], obj["W_K"], obj["W_V"], obj["W_O"], obj["scale"])
    assert_close(obj["answers"]["attention"], expected["attention"])
    page = run("--paper", "--key", "--format", "html").stdout
    assert page.count('<section class="page">') == 1 and "Answer key: the example of notebook 00a" in page
    assert "pos a" in page and "circle the largest weight" in page


@pytest.mark.parametrize("args, golden", [
    (("--student", "7", "--key"), "worksheet_student_7_key.md"),
    (("--student", "7", "--format", "json"), "worksheet_student_7.json"),
])
def test_worksheet_matches_the_stored_output_byte_for_byte(args, golden):
    # The same bytes on CPython 3.10-3.13 (.ci/run also diffs the versions against each other).
    # After a deliberate change: python -m mha_lists.tools.worksheet [args] > tests/golden/<file>
    result = run(*args)
    assert result.returncode == 0 and result.stdout == (ROOT / "tests" / "golden" / golden).read_text(encoding="utf-8")


# === A term secret ===


def test_the_same_term_and_student_give_the_same_sheet_and_another_term_another():
    for n in range(1, 31):
        a, again = as_json(worksheet(n, term="OAK-417")), as_json(worksheet(n, term="OAK-417"))
        assert a == again and a["with_term"] is True
        for other in (as_json(worksheet(n, term="ELM-902")), as_json(worksheet(n))):
            assert (other["W_Q"], other["W_K"], other["W_V"], other["W_O"]) != (a["W_Q"], a["W_K"], a["W_V"], a["W_O"])


def test_a_term_gives_sixty_students_sixty_problems():
    problems = {json.dumps({k: v for k, v in as_json(worksheet(n, term="OAK-417")).items()
                            if k in ("tokens", "X", "W_Q", "W_K", "W_V", "W_O")}) for n in STUDENTS}
    assert len(problems) == len(STUDENTS)


def test_the_term_is_never_printed():
    secret = "a-secret-WORD-42"
    for args in (("--key",), ("--key", "--format", "html"), ("--format", "json"), ("--exam", "--key"),
                 ("--exam", "--format", "json")):
        result = run("--student", "3", "--term", secret, *args)
        assert result.returncode == 0 and secret not in result.stdout


def test_a_key_drawn_without_a_term_says_anyone_can_print_it():
    assert "anyone can print this key" in to_markdown(worksheet(2), key=True)
    assert "anyone can print this key" not in to_markdown(worksheet(2, term="oak"), key=True)
    assert "anyone can print this key" in exam_markdown(exam(2), key=True)


# === The floor: no degenerate problems ===


def uniform_rows_and_zero_columns(obj):
    """From the JSON, with plain loops: uniform raw-score rows per head; all-zero Q/K/V columns."""
    X = obj["X"]
    uniform, zero_columns = [], 0
    for h in range(len(obj["W_Q"])):
        Q, K, V = (loop_matmul(X, obj[name][h]) for name in ("W_Q", "W_K", "W_V"))
        for M in (Q, K, V):
            zero_columns += sum(all(row[c] == 0 for row in M) for c in range(len(M[0])))
        R = [[math.fsum(a * b for a, b in zip(q, k)) for k in K] for q in Q]
        uniform.append(sum(max(row) == min(row) for row in R))
    return uniform, zero_columns


@pytest.mark.parametrize("term", ["OAK-417", "ELM-902"])
def test_the_floor_holds_for_500_students(term):
    for n in range(1, 501):
        ws = worksheet(n, term=term)
        uniform, zero_columns = uniform_rows_and_zero_columns(as_json(ws))
        assert max(uniform) <= 1 and zero_columns == 0, (term, n, uniform, zero_columns)
        assert degenerate(ws) == []


@pytest.mark.parametrize("heads, tokens", [(h, t) for h in (1, 2, 3) for t in (2, 3, 4)])
def test_the_floor_and_the_limits_hold_at_every_size(heads, tokens):
    for n in range(1, 41):
        ws = worksheet(n, term="OAK-417", heads=heads, tokens=tokens, steps=["scores"])
        obj = as_json(ws)
        uniform, zero_columns = uniform_rows_and_zero_columns(obj)
        assert max(uniform) <= 1 and zero_columns == 0
        assert len(ws.tokens) == tokens and len(ws.weights.W_Q) == heads
        assert ws.d_k * heads == len(ws.x[0]), "the standard layout: d_k = d_model / heads"
        assert max(abs(v) for M in obj["answers"]["raw_scores"] for row in M for v in row) <= 16
        assert all(max(row) - min(row) <= MAX_SPREAD for M in ws.raw_scores for row in M)
        assert len(ws.table) <= MAX_TABLE


def test_degenerate_names_what_falls_below_the_floor():
    ex = paper_example()  # a hand-made bad problem, not one the generator draws
    zero = [[0, 0] for _ in range(4)]
    weights = ex.weights._replace(W_Q=[zero, ex.weights.W_Q[1]])
    ws = module._complete(None, ex.tokens, ex.features, ex.x, weights, ["a", "b"], ["c", "d"], STEP_NAMES, False)
    assert degenerate(ws) == ["Q, head 0: column 0 is all zero", "Q, head 0: column 1 is all zero",
                              "head 0: 3 uniform softmax rows"]
    assert degenerate(paper_worksheet()) == []


# === Heads with a job ===


def test_each_head_does_the_job_the_sheet_names():
    """Recomputed from the JSON: where each query's largest raw score lands."""
    for n in range(1, 61):
        obj = as_json(worksheet(n, term="OAK-417"))
        T = len(obj["tokens"])
        kinds = ["noun" if row[obj["features"].index("noun")] else "verb" for row in obj["X"]]
        for h, job in enumerate(obj["head_jobs"]):
            R = obj["answers"]["raw_scores"][h]
            best = [{j for j in range(T) if R[i][j] == max(R[i])} for i in range(T)]
            if job == "the previous token":
                assert all(best[i] == {i - 1} for i in range(1, T)), (n, h, R)
            elif job == "the next token":
                assert all(best[i] == {i + 1} for i in range(T - 1)), (n, h, R)
            elif job == "itself":
                assert all(best[i] == {i} for i in range(T))
            elif job == "tokens of its own kind":
                assert all(best[i] == {j for j in range(T) if kinds[j] == kinds[i]} for i in range(T))
            elif job in ("the verbs", "the nouns"):
                assert all(best[i] == {j for j in range(T) if kinds[j] + "s" == job[4:]} for i in range(T))
            elif job == "the first token":
                assert all(b == {0} for b in best)
            elif job == "the last token":
                assert all(b == {T - 1} for b in best)
            else:  # one head of d_k 4 does two jobs at once: its scores are the sum
                assert " and " in job and len(obj["W_Q"]) == 1


def test_the_sheet_says_what_the_features_and_heads_are():
    ws = worksheet(5, term="OAK-417")
    text = to_markdown(ws)
    assert "pos a, pos b say where it stands" in text and f"head 0 looks for {ws.jobs[0]}" in text
    page = to_html([ws])
    assert f"Head 1: {ws.jobs[1]}" in page


# === The JSON carries the raw scores the key prints ===


@pytest.mark.parametrize("n", range(1, 11))
def test_json_raw_scores_are_the_integers_the_key_prints(n):
    ws = worksheet(n, term="OAK-417")
    obj = as_json(ws)
    raw = obj["answers"]["raw_scores"]
    assert all(isinstance(v, int) for M in raw for row in M for v in row)
    key = to_markdown(ws, key=True)
    for h, M in enumerate(raw):
        block = key.split(f"raw scores Q K^T, head {h} (")[1].split("```")[0].splitlines()[2:]
        assert [[int(v) for v in line.split()[1:]] for line in block] == M
        assert_close(obj["answers"]["scores"][h], [[v * obj["scale"] for v in row] for row in M])


# === Size controls ===


def test_answer_cells_counted_by_hand():
    # 2 heads, 3 tokens, d_k 2: per head Q, K, V 3 * (3 * 2), scores 9, weights 9, output 6; concat 12, output 12
    assert answer_cells(worksheet(1)) == 2 * (18 + 9 + 9 + 6) + 12 + 12 == 108
    assert answer_cells(worksheet(1, steps=["softmax"])) == 2 * 9
    assert answer_cells(worksheet(1, heads=1, tokens=2, steps=["qkv"])) == 3 * 2 * 4
    assert answer_cells(worksheet(1, heads=3, tokens=4, steps=["scores", "softmax"])) == 3 * (16 + 16)


def test_the_sheet_states_its_size_and_time():
    ws = worksheet(1, steps=["scores", "softmax"])
    assert "This sheet: 36 answer cells, about 12 minutes at 3 cells a minute." in to_markdown(ws)
    assert "36 answer cells" in to_html([ws])


def test_steps_choose_what_is_asked_and_what_is_given():
    full, part = worksheet(4, term="oak"), worksheet(4, term="oak", steps=["softmax"])
    assert full.weights == part.weights, "steps change what is asked, not the problem"
    sheet, key = to_markdown(part), to_markdown(part, key=True)
    assert "raw scores Q K^T, head 0 (" in sheet and "W_Q, head 0" not in sheet  # given: the scores
    assert "Table of e^x" in sheet and "concat" not in sheet
    assert "attention weights, head 1 (" in key and "Q, head 0 (" not in key
    assert sheet.count("\n1. ") == 1 and "\n2. " not in sheet.split("## Your steps")[1]
    output_only = to_markdown(worksheet(4, term="oak", steps=["output"]))
    assert "attention weights, head 0 (" in output_only and "V, head 1 (" in output_only and "W_O (" in output_only


def test_sizes_that_do_not_fit_one_page_are_refused_and_the_defaults_fit():
    assert all(fits_one_page(worksheet(n), paper) for n in range(1, 21) for paper in ("a4", "letter"))
    assert not fits_one_page(worksheet(1, heads=3, tokens=4), "a4")
    assert fits_one_page(worksheet(1, heads=3, tokens=4, steps=["scores", "softmax"]), "letter")


@pytest.mark.parametrize("kwargs, start", [
    ({"heads": 0}, "worksheet: heads"),
    ({"heads": 4}, "worksheet: heads"),
    ({"heads": True}, "worksheet: heads"),
    ({"tokens": 1}, "worksheet: tokens"),
    ({"tokens": 10**100}, "worksheet: tokens"),
    ({"steps": []}, "worksheet: steps"),
    ({"steps": "qkv"}, "worksheet: steps"),
    ({"steps": ["qkv", "scores", "qkv"]}, "worksheet: steps"),
    ({"steps": ["attention"]}, "worksheet: steps"),
    ({"term": ""}, "worksheet: term"),
    ({"term": "a\nb"}, "worksheet: term"),
    ({"term": 42}, "worksheet: term"),
])
def test_worksheet_names_each_bad_argument(kwargs, start):
    refused("worksheet", lambda: worksheet(1, **kwargs))
    with pytest.raises((ValueError, TypeError), match=f"^{start}"):
        worksheet(1, **kwargs)


@pytest.mark.parametrize("call, start", [
    (lambda: to_html([worksheet(1)], paper="a5"), "to_html: paper"),
    (lambda: to_markdown(worksheet(1), key="yes"), "to_markdown: key"),
    (lambda: to_html([worksheet(1)], key=None), "to_html: key"),
    (lambda: exam(0), "exam: student"),
    (lambda: exam_markdown(worksheet(1)), "exam_markdown: ex"),
    (lambda: exam_markdown(EXAM, key=1), "exam_markdown: key"),
    (lambda: exam_json("exam"), "exam_json: ex"),
    (lambda: exam_html([EXAM], paper=None), "exam_html: paper"),
    (lambda: exam_html([EXAM._replace(questions=[q._replace(given={"table": [[0, "x", 1.0]]})
                                                 for q in EXAM.questions])]), "exam_html: exams[0]"),
    (lambda: answer_cells(None), "answer_cells: ws"),
    (lambda: to_html([]), "to_html: sheets"),
    (lambda: to_html("sheets"), "to_html: sheets"),
])
def test_bad_arguments_of_the_other_functions(call, start):
    refused(start.split(":")[0], call)
    with pytest.raises((ValueError, TypeError), match=f"^{re.escape(start)}"):
        call()


@pytest.mark.parametrize("func, call", [
    ("worksheet", lambda: worksheet(1, steps=["q" * 100_000])),
    ("worksheet", lambda: worksheet(1, steps=[["qkv"] * 100_000])),
    ("worksheet", lambda: worksheet(1, steps=["qkv"] * 100_000)),
    ("worksheet", lambda: worksheet(1, heads=10**100_000 // 7)),
    ("exam", lambda: exam(-10**5000)),
    ("to_html", lambda: to_html([WS], paper="a" * 100_000)),
])
def test_a_message_shows_a_long_value_cut_short(func, call):
    # The values used to be shown whole: a message a hundred kilobytes long.
    refused(func, call)


# === The exam ===


@pytest.mark.parametrize("n", range(1, 41))
def test_exam_keys_recomputed_independently(n):
    obj = exam_json(exam(n, term="OAK-417"))
    q = {item["id"]: item for item in obj["questions"]}
    assert list(q) == ["score", "softmax", "masked", "shape", "parameters"]
    given = q["score"]["given"]
    raw = sum(a * b for a, b in zip(given["q"], given["k"]))
    assert q["score"]["answer"] == {"raw": raw, "scaled": raw / math.sqrt(given["d_k"])}
    for name in ("softmax", "masked"):
        g, answer = q[name]["given"], q[name]["answer"]
        visible = g["raw_scores"][:g["visible"]]
        expected = loop_softmax([s * g["scale"] for s in visible]) + [0.0] * (len(g["raw_scores"]) - len(visible))
        assert_close(answer["weights"], expected)
        assert max(abs(a - b) for a, b in zip(answer["by_table"], expected)) < 0.01  # the table is good enough
        top = max(visible)
        assert [row[0] for row in g["table"]] == sorted({s - top for s in visible}, reverse=True)
        assert all(math.isclose(row[2], round(math.exp(row[0] * g["scale"]), 4)) for row in g["table"])
    masked = q["masked"]["given"]
    assert max(masked["raw_scores"]) > max(masked["raw_scores"][:masked["visible"]]), "the mask hides the largest"
    s = q["shape"]["given"]
    d_k = s["d_model"] // s["heads"]
    assert d_k * s["heads"] == s["d_model"]
    assert q["shape"]["answer"] == {"d_k": d_k, "Q_per_head": [s["batch"], s["heads"], s["tokens"], d_k],
                                    "scores": [s["batch"], s["heads"], s["tokens"], s["tokens"]],
                                    "W_O": [s["d_model"], s["d_model"]]}
    p = q["parameters"]["given"]
    D = p["d_model"]
    assert q["parameters"]["answer"]["count"] == 4 * D * D + (4 * D if p["bias"] else 0)


def test_exam_parameter_count_agrees_with_the_module():
    from mha_lists.teaching.weights import init_mha_weights, parameter_count
    for n in range(1, 21):
        p = exam_json(exam(n))["questions"][4]
        g = p["given"]
        weights = init_mha_weights(g["d_model"], g["heads"], seed=0, bias=g["bias"])
        assert parameter_count(weights) == p["answer"]["count"]


def test_exam_variants_and_formats():
    exams = [exam(n, term="OAK-417") for n in range(1, 31)]
    assert len({json.dumps(exam_json(e)["questions"]) for e in exams}) == 30
    text = exam_markdown(exams[0], key=True)
    assert text.count("\n1. ") == 2 and "## Answer key" in text and "## Answer key" not in exam_markdown(exams[0])
    page = exam_html(exams[:2], key=True, paper="letter")
    assert page.count('<section class="page">') == 2 and page.count('<section class="page keys">') == 1
    assert "size: letter" in page
    result = run("--students", "1-3", "--term", "OAK-417", "--exam", "--format", "json")
    assert [o["student"] for o in json.loads(result.stdout)] == [1, 2, 3]
    assert json.loads(result.stdout)[0] == json.loads(json.dumps(exam_json(exam(1, term="OAK-417"))))


@pytest.mark.parametrize("paper, per_page", [("a4", 9), ("letter", 8)])
def test_exam_keys_come_several_students_to_a_page_and_break_only_between_them(paper, per_page):
    exams = [exam(n, term="OAK-417") for n in range(1, 31)]
    page = exam_html(exams, key=True, paper=paper)
    keys = page.split('<section class="page keys">')[1:]
    assert page.count('<section class="page">') == 30 and len(keys) == math.ceil(30 / per_page)
    assert [key.count('<div class="keyblock">') for key in keys] == [per_page] * (30 // per_page) + [30 % per_page]
    numbers = [int(n) for key in keys for n in re.findall(r"<h2>Student (\d+)</h2>", key)]
    assert numbers == list(range(1, 31))  # each key once, in order, each page's heading naming its students
    assert re.findall(r"Exam answer keys: students (\d+)-(\d+)", page)[0] == ("1", str(per_page))
    # Page breaks: forced only between sections; a student's key is never split.
    assert ".page + .page { break-before: page;" in page and ".keyblock { break-inside: avoid;" in page
    _, _, limit = module._paper(paper)  # each page's worked-out height fits, and one more key would not
    heights = [module._exam_key_block(ex)[1] for ex in exams]
    top = module.H1 + module._text_height(module._EXAM_NOTE)
    assert top + sum(heights[:per_page]) <= limit < top + sum(heights[:per_page + 1])
    assert "anyone can print these keys" in exam_html([exam(1)], key=True) \
        and "anyone can print these keys" not in page
    assert '<div class="keyblock">' not in exam_html(exams, paper=paper)


# === Print: one page per sheet and per key, on A4 and on Letter ===


def test_answer_cells_are_at_least_8_mm_and_instructions_are_one_column():
    page = to_html([worksheet(1)])
    assert "table.blank td { height: 8.6mm; }" in page and "columns:" not in page
    assert "size: A4" in page and "size: letter" in to_html([worksheet(1)], paper="letter")


def pdf_pages(tmp_path, name, text):
    html_file = tmp_path / f"{name}.html"
    html_file.write_text(text, encoding="utf-8")
    pdf = tmp_path / f"{name}.pdf"
    subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                    f"--print-to-pdf={pdf}", str(html_file)], capture_output=True, timeout=180, check=True)
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(next(line.split()[1] for line in info.splitlines() if line.startswith("Pages:")))


PRINT_CASES = [  # (heads, tokens, steps): the default and the largest sizes that fit
    (2, 3, STEP_NAMES), (1, 3, STEP_NAMES), (2, 2, STEP_NAMES), (3, 3, ("qkv", "scores", "softmax")),
    (2, 4, ("scores", "softmax")), (3, 4, ("scores", "softmax")), (1, 4, ("qkv", "scores", "softmax")),
]


# A browser test, like tests/test_site_browser.py: it runs in .ci/run, where MHA_LISTS_REQUIRE_BROWSER=1.
@pytest.mark.skipif(os.environ.get("MHA_LISTS_REQUIRE_BROWSER") != "1",
                    reason="prints to PDF in headless Chromium; set MHA_LISTS_REQUIRE_BROWSER=1 to run")
@pytest.mark.parametrize("paper", ["a4", "letter"])
def test_each_sheet_and_each_key_is_one_printed_page(tmp_path, paper):
    assert shutil.which("chromium") and shutil.which("pdfinfo"), "needs Debian's chromium and poppler-utils"
    sheets = [worksheet(n, term="OAK-417", heads=h, tokens=t, steps=s)
              for h, t, s in PRINT_CASES for n in (1, 2)]
    sheets.append(paper_worksheet())
    assert all(fits_one_page(ws, paper) for ws in sheets)
    assert pdf_pages(tmp_path, "sheets", to_html(sheets, key=True, paper=paper)) == 2 * len(sheets)
    exams = [exam(n, term="OAK-417") for n in range(1, 21)]
    page = exam_html(exams, key=True, paper=paper)
    key_pages = page.count('<section class="page keys">')
    assert key_pages == 3  # 20 keys: 9, 9 and 2 on A4; 8, 8 and 4 on Letter
    assert pdf_pages(tmp_path, "exams", page) == len(exams) + key_pages


# === The handout, printed: python -m mha_lists.tools.worksheet --handout --paper letter > handout.html ===

HANDOUT_MD = (ROOT / "docs" / "handout.md").read_text(encoding="utf-8")


def after_style(page):
    return page.split("</style>", 1)[1]


def test_the_handout_command_prints_docs_handout_md_as_one_page_of_html():
    result = run("--handout", "--paper", "letter")
    assert result.returncode == 0 and result.stderr == "" and result.stdout.startswith("<!DOCTYPE html>")
    page = result.stdout
    assert "size: letter" in page and "size: A4" in run("--handout").stdout
    assert page.count('<section class="page handout">') == 1 and "break-before" not in page  # nothing forces a break
    # Every part of the Markdown is on the page, drawn: the table row by row, every bullet, the picture.
    for row in re.findall(r"^\| (\d) \| (.+?) \| (.+?) \|$", HANDOUT_MD, re.M):
        assert "".join(f"<td>{cell}</td>" for cell in row) in page.replace("<code>", "").replace("</code>", ""), row
    assert page.count("<li>") == len(re.findall(r"^- ", HANDOUT_MD, re.M)) == 4
    for label in re.findall(r"^- \*\*(.+?)\*\*", HANDOUT_MD, re.M):
        assert f"<li><b>{label}</b>" in page
    assert (ROOT / "docs" / "pipeline.svg").read_text(encoding="utf-8").strip() in page and page.count("<svg") == 1
    body = after_style(page)
    for markup in ("$", "**", "`", "\\", "](", "|---"):  # no Markdown or LaTeX left over
        assert markup not in body, markup
    formula = body.split('<div class="display">', 1)[1]
    assert body.count('<div class="display">') == 2 and body.count('class="frac"') == 2
    assert "softmax" in formula and "\u221a" in formula and "d<sub>k</sub>" in formula


def test_the_handouts_formulas_and_markdown_are_drawn_or_refused_by_name(tmp_path):
    assert module._latex(r"e^{s_j - m}") == "e<sup>s<sub>j</sub> \u2212 m</sup>"
    assert module._latex(r"W_Q^{(h)}") == 'W<span class="ss"><span>(h)</span><span>Q</span></span>'
    with pytest.raises(ValueError, match=r"^handout_html: a formula uses \\alpha, which the printed handout does not "
                                         "draw$"):
        module._latex(r"\alpha + 1")
    with pytest.raises(ValueError, match="^handout_html: a formula ends where a part of it was expected$"):
        module._latex(r"\frac{1}")
    mine = tmp_path / "mine.md"
    mine.write_text("# Mine\n\nSome *words* and `code` and $x_i$.\n\n- **one**: a\n  b\n- two\n", encoding="utf-8")
    page = handout_html(source=mine)
    assert "<h1>Mine</h1>" in page and "<i>words</i>" in page and "<code>code</code>" in page
    assert '<span class="math">x<sub>i</sub></span>' in page and "<li><b>one</b>: a b</li><li>two</li>" in page
    with pytest.raises(ValueError, match="^handout_html: paper must be one of a4, letter"):
        handout_html(paper="a5")
    with pytest.raises(ValueError, match=r"^handout_html: cannot read the handout .*nowhere.md \(No such file or "
                                         r"directory\); docs/handout.md is in the repository, beside the package$"):
        handout_html(source=tmp_path / "nowhere.md")


@pytest.mark.skipif(os.environ.get("MHA_LISTS_REQUIRE_BROWSER") != "1",
                    reason="prints to PDF in headless Chromium; set MHA_LISTS_REQUIRE_BROWSER=1 to run")
@pytest.mark.parametrize("paper", ["a4", "letter"])
def test_the_printed_handout_is_one_page(tmp_path, paper):
    assert shutil.which("chromium") and shutil.which("pdfinfo"), "needs Debian's chromium and poppler-utils"
    result = run("--handout", "--paper", paper)  # the documented command
    assert result.returncode == 0 and pdf_pages(tmp_path, "handout", result.stdout) == 1


def test_the_documentations_example_term_is_warned_about_loudly():
    # A teacher who pastes a documented command as it is would hand every student the keys.
    import subprocess
    import sys as _sys
    for argv, warned in ((["--student", "7", "--term", "OAK-417", "--key"], True),
                         (["--student", "7", "--term", "my-own-word", "--key"], False)):
        result = subprocess.run([_sys.executable, "-m", "mha_lists.tools.worksheet", *argv], capture_output=True,
                                text=True, timeout=120)
        assert result.returncode == 0 and result.stdout  # the documented commands still run as written
        assert ("warning: --term OAK-417 is the example term printed in this project's documentation" in result.stderr) \
            == warned, result.stderr


def test_a_student_who_keeps_3_decimals_as_the_sheet_says_lands_within_the_keys_001():
    """Found by a reviewer: the sheet said nothing of rounding, and weights kept to 2 decimals gave an output 0.017
    from the key, outside its 0.01 (21% of default sheets). The sheet now says to keep 3 decimals; a student doing
    so with the sheet's own table of e^x (its 4 decimals) lands within 0.01 of the key, on every sheet here."""
    assert "Keep 3 decimals." in to_markdown(worksheet(1))
    for term in ("t1", "t2"):
        for heads, tokens in ((2, 3), (3, 3), (1, 4), (2, 2)):
            for n in range(1, 41):
                ws = worksheet(n, term=term, heads=heads, tokens=tokens)
                lookup = {row.d: round(row.exp, 4) for row in ws.table}
                heads_out = []
                for h, raw in enumerate(ws.raw_scores):
                    V = ws.trace.V[h]
                    out = []
                    for row in raw:
                        exps = [lookup[s - max(row)] for s in row]
                        weights = [round(e / sum(exps), 3) for e in exps]
                        out.append([round(sum(w * V[j][c] for j, w in enumerate(weights)), 3) for c in range(len(V[0]))])
                    heads_out.append(out)
                concat = [[v for out in heads_out for v in out[i]] for i in range(len(ws.x))]
                W_O = ws.weights.W_O
                output = [[sum(r[k] * W_O[k][c] for k in range(len(r))) for c in range(len(W_O[0]))] for r in concat]
                worst = max(abs(a - b) for mine, key in zip(output, ws.trace.output) for a, b in zip(mine, key))
                assert worst <= 0.01, (term, heads, tokens, n, worst)


def test_the_example_promises_answers_only_when_it_prints_them():
    sheet, key = to_markdown(paper_worksheet()), to_markdown(paper_worksheet(), key=True)
    assert "cover them" not in sheet and "## Answer key" not in sheet
    assert "cover them" in key and "## Answer key" in key
