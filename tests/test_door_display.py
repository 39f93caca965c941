"""The doors of display, pictures, worksheet and exercises: rules each now checks on entry.

Each case used to slip through (a raw error, a silent inf, a message under the wrong name,
an edited object drawn as if whole) or is a message that now names the argument the learner
passed. The older messages are pinned next to each module's own tests.
"""

import copy
import json
import math
import pathlib

import pytest

from mha_lists import ShapeError, causal_mask, running_example
from mha_lists.teaching import display, pictures
from mha_lists.tools import exercises, worksheet
from mha_lists.tools.exercises import CheckFailed, NotebookError, check_close

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOO_LARGE = "the values are too large"
EX = running_example()
WS = worksheet.worksheet(1)
EXAM = worksheet.exam(2)


def raises(error, message, call):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message, str(info.value)


# === display ===


@pytest.mark.parametrize("call, error, message", [
    (lambda: display.format_matrix([[1]], title=3), TypeError, "format_matrix: title must be a str, got 3 (int)"),
    (lambda: display.print_matrix([[1]], title=[]), TypeError, "print_matrix: title must be a str, got [] (list)"),
    (lambda: display.heatmap([[1]], title=1.5), TypeError, "heatmap: title must be a str, got 1.5 (float)"),
    (lambda: display.bar_chart(["a"], [1.0], title=0), TypeError, "bar_chart: title must be a str, got 0 (int)"),
    (lambda: display.Heatmap([[1]], note=1), TypeError, "Heatmap: note must be a str, got 1 (int)"),
    (lambda: display.attention_heatmap([[1, None]], ["a"]), TypeError,
     "attention_heatmap: weights[0][1] is None; entries must be numbers (or True/False)"),
    (lambda: display.attention_heatmap([[0.5, 0.5]], ["a"]), ShapeError,
     "attention_heatmap: weights has 2 columns but 1 tokens were given; give key_tokens, one per column"),
    (lambda: display.attention_heatmap([[1.0]], ["a", "b"]), ShapeError,
     "attention_heatmap: weights has 1 rows but 2 tokens were given"),
    (lambda: display.attention_heatmap([[1.0]], ["a"], 5), TypeError,
     "attention_heatmap: key_tokens must be a list of labels, got int"),
    (lambda: display.Heatmap([[10**400]]), ValueError,
     "Heatmap: M[0][0] is an int of 401 digits; an int here has at most 100 digits"),
    (lambda: display.BarChart(["a"], [-1.0]), ValueError, "BarChart: values must not be negative"),
])
def test_display_doors(call, error, message):
    raises(error, message, call)


def test_a_class_door_is_named_for_the_class_and_trusts_its_own_function():
    assert display.BarChart.__init__.__name__ == "__init__"
    with pytest.raises(ValueError, match="^bar_chart: values must not be negative$"):
        display.bar_chart(["a"], [-1.0])  # the function's door checks; the class's trusts it


def test_print_matrix_checks_its_options_as_format_matrix_does(capsys):
    display.print_matrix([[1, 2]], row_labels=("r",), digits=1, title="t")
    assert capsys.readouterr().out == display.format_matrix([[1, 2]], row_labels=("r",), digits=1, title="t") + "\n"
    raises(ShapeError, "print_matrix: M has 2 columns but 1 column labels were given",
           lambda: display.print_matrix([[1, 2]], col_labels=["c"]))


# === pictures ===


@pytest.mark.parametrize("call, error, message", [
    (lambda: pictures.pipeline(EX._replace(x=EX.x[:3])), ShapeError,
     "pipeline: ex.x has 3 rows but ex.tokens has 5; one row per token"),
    (lambda: pictures.pipeline(EX._replace(tokens="I like")), TypeError,
     "pipeline: ex.tokens must be a non-empty list of str, got 'I like'"),
    (lambda: pictures.pipeline(EX._replace(x=[row[:8] for row in EX.x])), ShapeError,
     "pipeline: ex.x has 8 columns but ex.weights expect d_model = 16"),
    (lambda: pictures.pipeline(EX._replace(weights=EX.weights._replace(W_O=[[1.0]]))), ShapeError,
     "pipeline: W_O is 1x1; it must be (num_heads * d_v) x d_model = 16x16 (2 heads of width 8)"),
    (lambda: pictures.pipeline(EX, mask=causal_mask(3)), ShapeError,
     "pipeline: mask is 3x3; it must be (queries, keys) = 5x5"),
    (lambda: pictures.query_key_arrows([[1e200, 1e200]], [[1e200, 1e200]], ["a"], query=0), ValueError,
     f"query_key_arrows: {TOO_LARGE}: a product or sum overflowed float64 (largest about 1.8e308); "
     "scale the inputs down"),
    (lambda: pictures.query_key_arrows([[1, 2]], [[1, 2]], ["a"], query=0, key_tokens=["a", "b"]), ShapeError,
     "query_key_arrows: key_tokens has 2 entries; it needs one per row (1)"),
    (lambda: pictures.line_chart([1e308, -1e308], title="t", x_label="x", y_label="y"), ValueError,
     f"line_chart: {TOO_LARGE}: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"),
    (lambda: pictures.line_chart([1.0, 2.0], title="t", x_label="x", y_label="y", x_values=[-1e308, 1e308]),
     ValueError,
     f"line_chart: {TOO_LARGE}: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"),
    (lambda: pictures.attention_lines(["a"], [[1.0]], heads="h"), TypeError,
     "attention_lines: heads must be a list of str, got 'h'"),
])
def test_picture_doors(call, error, message):
    raises(error, message, call)


def test_a_picture_is_saved_to_a_path(tmp_path):
    picture = pictures.line_chart([1.0, 0.5], title="loss", x_label="step", y_label="loss")
    raises(TypeError, "save: path must be a str or a Path, got int", lambda: picture.save(5))
    picture.save(tmp_path / "loss.svg")
    assert (tmp_path / "loss.svg").read_text(encoding="utf-8") == picture.svg + "\n"


def test_pictures_do_not_change_the_example():
    ex = running_example()
    before = copy.deepcopy(ex)
    pictures.pipeline(ex, mask=causal_mask(ex.seq_len))
    assert ex == before


# === worksheet ===


EDITED_SHEETS = [
    WS._replace(x=[[1] * 4] * 3),  # X changed, the answers not
    WS._replace(steps=("bogus",)),
    WS._replace(steps=("softmax", "scores")),  # out of working order
    WS._replace(jobs=["one job"]),  # one job for two heads
    WS._replace(tokens=["a", "b"]),  # two tokens for three rows
    WS._replace(trace=WS.trace._replace(output=[[0.0]])),
    WS._replace(weights=WS.weights._replace(W_O=[[1.0]])),
]


@pytest.mark.parametrize("ws", EDITED_SHEETS)
@pytest.mark.parametrize("func", [worksheet.to_markdown, worksheet.as_json, worksheet.answer_cells,
                                  worksheet.degenerate, worksheet.page_heights, worksheet.fits_one_page])
def test_an_edited_worksheet_is_refused_by_name(func, ws):
    with pytest.raises(ValueError, match=rf"^{func.__name__}: ws is not as worksheet\(N\) or paper_worksheet\(\) made it"):
        func(ws)


def test_a_worksheet_with_other_words_is_still_a_worksheet():
    renamed = WS._replace(tokens=["x", "y", "z"])
    assert "Sentence: **x y z**." in worksheet.to_markdown(renamed)
    assert worksheet.answer_cells(worksheet.paper_worksheet()) > 0


@pytest.mark.parametrize("call, error, message", [
    (lambda: worksheet.fits_one_page(WS, paper=["a4"]), ValueError,
     "fits_one_page: paper must be one of a4, letter, got ['a4']"),
    (lambda: worksheet.to_html([WS, 5]), TypeError,
     "to_html: sheets[1] must be a Worksheet (from worksheet(N) or paper_worksheet()), got int"),
    (lambda: worksheet.exam_html([EXAM, None]), TypeError, "exam_html: exams[1] must be an Exam (from exam(N)), got NoneType"),
    (lambda: worksheet.exam_markdown(EXAM._replace(questions=EXAM.questions[:2])), ValueError,
     "exam_markdown: ex is not as exam(N) made it: its questions were edited; make it again"),
    (lambda: worksheet.exam_html([EXAM._replace(questions=[q._replace(given={"table": [[0, "x", 1.0]]})
                                                           for q in EXAM.questions])]), ValueError,
     "exam_html: exams[0] is not as exam(N) made it: its questions were edited; make it again"),
    (lambda: worksheet.render(None), TypeError,
     "render: args must be the parsed arguments (build_parser().parse_args(...)), got NoneType"),
    (lambda: worksheet.worksheet(1, steps=[["qkv"]]), ValueError,
     "worksheet: steps holds ['qkv']; each step must be one of qkv, scores, softmax, output"),
])
def test_worksheet_doors(call, error, message):
    raises(error, message, call)


def test_render_takes_what_the_parser_made():
    parser = worksheet.build_parser()
    args = parser.parse_args(["--student", "3"])
    worksheet._validate(parser, args)
    assert worksheet.render(args) == worksheet.to_markdown(worksheet.worksheet(3))
    with pytest.raises(ValueError, match=r"^render: args.heads must be 1-3"):
        worksheet.render(parser.parse_args(["--student", "3"]))  # not completed by _validate


# === exercises ===


SELF = []
SELF.append(SELF)  # a list inside itself


@pytest.mark.parametrize("expected", [None, [], [[]], "1", SELF, {"a": 1}])
def test_check_close_wants_an_expected_answer_it_can_compare(expected):
    with pytest.raises(TypeError, match=r"^check_close: expected must be a number, a list of numbers, a matrix"):
        check_close("x", [1.0], expected)


def test_check_close_still_judges_any_got():
    for got in (None, SELF, "1", {"a": 1}):
        with pytest.raises(CheckFailed):
            check_close("x", got, [[1.0]])
    with pytest.raises(ValueError, match=f"^check_close: {TOO_LARGE}"):
        check_close("x", 10**400, 1.0)


CELL = {"cell_type": "code", "metadata": {}, "source": "x = 1"}
TEACHER = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "source": "check_close('x', x, 1)",
     "metadata": {"nbgrader": {"grade": True, "grade_id": "a", "points": 1}}}]}


@pytest.mark.parametrize("call, error, message", [
    (lambda: exercises.student_copy({"cells": [5]}), NotebookError,
     "student_copy: nb cell 0 is not a code, markdown or raw cell"),
    (lambda: exercises.student_copy({"cells": [{**CELL, "source": [1]}]}), NotebookError,
     "student_copy: nb cell 0 has no source text"),
    (lambda: exercises.student_copy({"cells": [{**CELL, "metadata": []}]}), NotebookError,
     "student_copy: nb cell 0 has no metadata (an object under 'metadata')"),
    (lambda: exercises.student_copy({"cells": [], "metadata": 3}), NotebookError,
     "student_copy: nb has no notebook metadata (an object under 'metadata')"),
    (lambda: exercises.tampering(TEACHER, json.loads(json.dumps(TEACHER).replace('"a"', '["a"]'))), NotebookError,
     "tampering: teacher cell 0 has a grade_id that is not a str: ['a']"),
    (lambda: exercises.score(TEACHER, json.loads(json.dumps(TEACHER).replace('"points": 1', '"points": "1"'))),
     NotebookError, "score: teacher cell 0 has points '1'; points must be a number from 0 to 1,000,000"),
    (lambda: exercises.score(TEACHER, json.loads(json.dumps(TEACHER).replace('"points": 1', '"points": 1' + "0" * 400))),
     NotebookError, "score: teacher cell 0 has points 1000000000000000000000000000000000000000; points must be a "
                    "number from 0 to 1,000,000"),
    (lambda: exercises.read_notebook("a\0b.ipynb"), NotebookError, "read_notebook: cannot read a\0b.ipynb: embedded null byte"),
    (lambda: check_close("q", 1.0, [0.5, math.nan]), ValueError,
     "check_close: expected has nan in it; an expected value must be numbers (inf is allowed)"),
    (lambda: check_close("q", 1.0, 1.0, math.inf), ValueError, "check_close: tol must be a finite number >= 0, got inf"),
    (lambda: exercises.tampering(TEACHER, json.loads(json.dumps(TEACHER).replace(
        "check_close('x', x, 1)", "### BEGIN HIDDEN TESTS"))), ValueError,
     "tampering: teacher's a has a BEGIN HIDDEN TESTS without its END HIDDEN TESTS"),
    (lambda: exercises.score(TEACHER, TEACHER, timeout=True), ValueError,
     "score: timeout must be more than 0 and at most 3600 seconds, got True"),
    (lambda: exercises.write_student_copies(ROOT / "notebooks" / "exercises", 3), TypeError,
     "write_student_copies: out must be a str or a Path, got int"),
])
def test_exercise_doors(call, error, message):
    raises(error, message, call)


@pytest.mark.skipif(not pathlib.Path("/dev/zero").exists(), reason="no /dev/zero here")
def test_a_file_that_never_ends_is_read_to_the_limit_and_refused():
    raises(NotebookError, "read_notebook: /dev/zero is larger than 20,000,000 bytes, the limit",
           lambda: exercises.read_notebook("/dev/zero"))


def test_a_notebook_nested_too_deeply_is_refused_by_name(tmp_path):
    path = tmp_path / "deep.ipynb"
    path.write_text("[" * 100_000 + "]" * 100_000)
    raises(NotebookError, f"read_notebook: {path} is JSON nested too deeply to be a notebook",
           lambda: exercises.read_notebook(path))


def test_a_check_close_patched_behind_its_door_does_not_reach_the_checks():
    teacher = exercises.read_notebook(ROOT / "notebooks" / "exercises" / "04_softmax_and_masks.ipynb")
    nb = copy.deepcopy(teacher)
    for cell in nb["cells"]:  # wrong answers: every check fails, unless the patch reached it
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = cell["source"].split("(")[0] + "(*args):\n    return [0.0]\n" if isinstance(
                cell["source"], str) else "".join(cell["source"]).split("(")[0] + "(*args):\n    return [0.0]\n"
    patch = ("import mha_lists.tools.exercises as grader\n"
             "grader.check_close.__wrapped__.__code__ = (lambda name, got, expected, tol=1e-9: None).__code__")
    first = next(n for n, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade"))
    nb["cells"].insert(first, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                               "source": patch})
    result = exercises.score(nb, teacher, timeout=60)
    assert result.earned == 0 and all(why.startswith("CheckFailed: ") for why in result.failed.values())


def test_nothing_is_changed_by_a_door():
    nb = {"cells": [dict(CELL)], "metadata": {"celltoolbar": "x"}}
    before = copy.deepcopy(nb)
    exercises.student_copy(nb)
    assert nb == before
    assert math.isfinite(worksheet.page_heights(WS)[0])
