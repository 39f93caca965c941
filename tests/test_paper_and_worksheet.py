"""Attention on paper (mha_lists.teaching.paper) and the per-student worksheets (mha_lists.tools.worksheet).

Every answer a worksheet prints is recomputed here with plain loops, independently of the module.
"""

import json
import math
import pathlib
import subprocess
import sys

import pytest

from mha_lists import attention_trace, softmax
from mha_lists.teaching.paper import (
    exp_table,
    integer_matrix,
    paper_example,
    raw_scores,
    score_differences,
    table_softmax,
)
from mha_lists.tools.worksheet import MAX_QKV, MAX_SPREAD, MAX_TABLE, as_json, to_html, to_markdown, worksheet

ROOT = pathlib.Path(__file__).resolve().parent.parent


# === An independent forward pass: loops, no mha_lists ===


def loop_matmul(A, B):
    return [[math.fsum(A[i][t] * B[t][j] for t in range(len(B))) for j in range(len(B[0]))] for i in range(len(A))]


def loop_softmax(row):
    exps = [math.exp(s - max(row)) for s in row]
    return [e / math.fsum(exps) for e in exps]


def loop_attention(X, W_Q, W_K, W_V, W_O, scale):
    """Every intermediate of multi-head attention, as the worksheet's JSON names them."""
    out = {"Q": [], "K": [], "V": [], "scores": [], "attention": [], "head_outputs": []}
    for h in range(len(W_Q)):
        Q, K, V = loop_matmul(X, W_Q[h]), loop_matmul(X, W_K[h]), loop_matmul(X, W_V[h])
        S = [[math.fsum(q * k for q, k in zip(Q[i], K[j])) * scale for j in range(len(K))] for i in range(len(Q))]
        A = [loop_softmax(row) for row in S]
        for name, M in zip(out, (Q, K, V, S, A, loop_matmul(A, V))):
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


# === The example on paper ===


def test_paper_example_is_integers_up_to_the_raw_scores():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    for M in (ex.x, *ex.weights.W_Q, *ex.weights.W_K, *ex.weights.W_V, ex.weights.W_O):
        assert all(isinstance(v, int) and -5 <= v <= 5 for row in M for v in row)
    for h in range(2):
        for M in (t.Q[h], t.K[h], t.V[h], raw_scores(t.Q[h], t.K[h])):
            integer_matrix(M)  # raises if any entry is not whole


def test_paper_example_worked_by_hand():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    # head 0: queries ask for the position one step back; keys are the positions, doubled
    assert integer_matrix(t.Q[0]) == [[2, 0], [2, 0], [0, 2]]
    assert integer_matrix(t.K[0]) == [[2, 0], [0, 2], [-2, 0]]
    assert integer_matrix(raw_scores(t.Q[0], t.K[0])) == [[4, 0, -4], [4, 0, -4], [0, 4, 0]]
    # head 1: every query is (1, 1); only I (position 0, a noun) has a key
    assert integer_matrix(t.Q[1]) == [[1, 1]] * 3
    assert integer_matrix(raw_scores(t.Q[1], t.K[1])) == [[4, 0, 0]] * 3
    assert score_differences([raw_scores(t.Q[h], t.K[h]) for h in range(2)]) == [0, -4, -8]


def test_paper_heads_do_what_their_names_say():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    strongest = [[row.index(max(row)) for row in A] for A in t.attention]
    assert strongest[0] == [0, 0, 1]  # previous token: I -> I (nothing earlier), like -> I, transformers -> like
    assert strongest[1] == [0, 0, 0]  # subject: everyone -> I
    assert ex.head_names == ["previous token", "subject"]


def test_paper_example_returns_fresh_lists():
    a = paper_example()
    a.x[0][0] = 99
    a.weights.W_Q[0][0][0] = 99
    b = paper_example()
    assert b.x[0][0] == 1 and b.weights.W_Q[0][0][0] == 1


def test_table_softmax_is_close_to_the_exact_softmax():
    scale = 1 / math.sqrt(2)
    for row in ([4, 0, -4], [0, 4, 0], [4, 0, 0], [0, 0, 0]):
        exact = softmax([s * scale for s in row])
        by_table = table_softmax(row, scale)
        assert max(abs(a - b) for a, b in zip(exact, by_table)) < 1e-3
        assert math.isclose(math.fsum(by_table), 1.0)


def test_exp_table_rounds_to_four_digits():
    rows = exp_table([0, -4, -8], 1 / math.sqrt(2))
    assert [r.exp for r in rows] == [1.0, 0.0591, 0.0035]
    assert [r.d for r in rows] == [0, -4, -8]
    with pytest.raises(ValueError, match="exp_table: scale"):
        exp_table([0], 0)


def test_integer_matrix_refuses_fractions():
    with pytest.raises(ValueError, match=r"integer_matrix: M\[1\]\[0\] is 0.5"):
        integer_matrix([[1.0], [0.5]])


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


def test_worksheet_refuses_a_bad_student_number():
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="worksheet: student must be"):
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


# === The command line ===


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.worksheet", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")


def test_same_student_same_bytes_and_json_is_one_object():
    first, again = run("--student", "12", "--format", "json"), run("--student", "12", "--format", "json")
    assert first.returncode == 0 and first.stdout == again.stdout and first.stderr == ""
    obj = json.loads(first.stdout)
    assert list(obj) == ["student", "tokens", "X", "W_Q", "W_K", "W_V", "W_O", "scale", "answers"]
    assert obj["student"] == 12 and obj == json.loads(json.dumps(as_json(worksheet(12))))


def test_a_class_in_one_html_file():
    result = run("--students", "1-30", "--key", "--format", "html")
    assert result.returncode == 0
    assert result.stdout.count('<section class="page">') == 30
    assert result.stdout.count('<section class="page key">') == 30


@pytest.mark.parametrize("args, message", [
    ((), "one of the arguments --student --students --paper is required"),
    (("--student", "0"), "0 is not a student number from 1 to"),
    (("--student", "x"), "'x' is not a whole number"),
    (("--students", "5-2"), "runs backwards"),
    (("--students", "7"), "is not a range like 1-30"),
    (("--student", "1", "--format", "pdf"), "invalid choice: 'pdf'"),
    (("--student", "1", "--students", "1-2"), "not allowed with argument"),
])
def test_bad_arguments_give_one_line_and_exit_code_2(args, message):
    result = run(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr


def test_the_printable_sheet_is_the_modules_own_output():
    # After a deliberate change: python -m mha_lists.tools.worksheet --paper --key > docs/attention-on-paper.md
    result = run("--paper", "--key")
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


def test_renderers_refuse_what_is_not_a_worksheet():
    with pytest.raises(TypeError, match="to_markdown: ws must be a Worksheet"):
        to_markdown({"student": 1})
    with pytest.raises(TypeError, match="as_json: ws must be a Worksheet"):
        as_json(None)
    with pytest.raises(ValueError, match="to_html: sheets must be a non-empty list"):
        to_html([])


def test_as_json_hands_out_copies():
    ws = worksheet(4)
    obj = as_json(ws)
    obj["X"][0][0] = 99
    obj["W_Q"][0][0][0] = 99
    assert ws == worksheet(4), "changing the JSON object changed the worksheet"


# === Notebook 00a survives its own "Try this" edits ===

TRY_THIS = [
    "weights.W_K[1][:] = [[0, 0], [1, 1], [0, 0], [1, 1]]",  # head 1 finds the verb
    "weights.W_K[0][:] = [[2 * w for w in row] for row in weights.W_K[0]]",  # sharper head 0
]


@pytest.mark.parametrize("edit", TRY_THIS)
def test_notebook_00a_runs_and_checks_after_a_try_this_edit(edit):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = ROOT / "notebooks" / "00a_attention_on_paper.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and "ex = paper_example()" in c.source)
    line = "tokens, features, x, weights = ex.tokens, ex.features, ex.x, ex.weights"
    assert line in cell.source
    cell.source = cell.source.replace(line, line + "\n" + edit)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert printed.count("True") >= 5 and "False" not in printed
