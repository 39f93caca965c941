"""The exercise notebooks and their grading: nbgrader's metadata, hidden checks, tampering scores 0.

nbval runs the stored teacher's notebooks (they pass). Here ``score`` grades submissions made from
them: the solutions get every point; the empty student copies, wrong answers, tampered check cells
and answers copied from the visible check get less, each with a named reason. ``score`` runs a
notebook in a fresh Python without a Jupyter kernel, about half a second each.
"""

import argparse
import contextlib
import copy
import csv
import io
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading

import pytest
import commands
from bad_inputs import assert_no_mutation, refused

from mha_lists import attention_trace, running_example, softmax
from mha_lists.tools.exercises import (CODE_STUB, MAX_NESTING, MAX_NOTEBOOK_BYTES, SELF_CHECKS, CheckFailed,
                                       NotebookError, check_close, read_notebook, score, self_check, self_checks,
                                       student_copy, tampering, write_self_checks, write_student_copies)
from mha_lists.tools import exercises as exercises_module
from mha_lists.tools.exercises import _Cell, _clear_hidden, _run

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
CORE = {p.name.split("_")[0]: p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
ANSWER_KINDS = "a number, a list of numbers, a matrix or a list of matrices (lists at most 4 deep, none empty)"

# Every message the module writes, once. Other tests match only the start ("func: argument").
MESSAGES = {
    # check_close's verdicts on a learner's answer (CheckFailed): what is wrong, never the expected value
    "should be a number": "{path} should be a number, but it is {type}: {value}",
    "int too large": "{path} is {int}, too large for a float (about 1.8e308 at most)",
    "nan": "{path} is nan (not a number); look for 0/0, inf - inf or a missing value",
    "should be": "{path} should be {what}, but it is {type}",
    "parts": "{path} has {n} {parts}; it should have {m} ({what})",
    "off by": "{path} is off by {size} ({how}; the tolerance is {tol})",
    "off by, more": "{path} is off by {size} ({how}; the tolerance is {tol}); {n} entries are off, this is the first",
    # check_close's own arguments
    "long name": "check_close: name is {n} characters long; a name has at most 200",
    "expected kind": "check_close: expected must be " + ANSWER_KINDS + ", got {value}",
    "expected nan": "check_close: expected has nan in it; an expected value must be numbers (inf is allowed)",
    "expected too large": "check_close: {where} is {int}, too large for a float (about 1.8e308 at most)",
    "expected ragged": "check_close: expected is ragged: {where}[0] is {first} but {where}[{i}] is {other}; "
                       "its parts must have one shape",
    "tol": "check_close: tol must be a finite number >= 0, got {value}",
    # notebooks as JSON
    "not an object": "{func}: {name} is not a notebook (its JSON is a {type}, not an object)",
    "too deep": "{func}: {name} nests lists and objects more than 100 deep; a notebook does not",
    "nbformat": "{func}: {name} is not an nbformat 4 notebook (nbformat is {value})",
    "no metadata": "{func}: {name} has no notebook metadata (an object under 'metadata')",
    "no cells": "{func}: {name} has no list of cells",
    "cell type": "{func}: {name} cell {n} is not a code, markdown or raw cell",
    "no source": "{func}: {name} cell {n} has no source text",
    "no cell metadata": "{func}: {name} cell {n} has no metadata (an object under 'metadata')",
    "grade_id": "{func}: {name} cell {n} has a grade_id that is not a str: {value}",
    "points": "{func}: {name} cell {n} has points {value}; points must be a number from 0 to 1,000,000",
    "not cells": "{func}: {name} must be a notebook as JSON (a dict with a list of cells)",
    # files
    "path": "{func}: {name} must be a str or a Path, got {type}",
    "folder": "read_notebook: {path} is a folder, not a notebook file",
    "not regular": "read_notebook: {path} is not a regular file (a FIFO, a device or a socket); a notebook is a file",
    "missing": "read_notebook: {path} does not exist",
    "cannot read": "read_notebook: cannot read {path}: {error}",
    "too big": "read_notebook: {path} is larger than 20,000,000 bytes, the limit",
    "not JSON": "read_notebook: {path} is not JSON ({error})",
    "JSON too deep": "read_notebook: {path} is JSON nested too deeply to be a notebook",
    # student copies
    "solution region": "student_copy: cell {n} has a solution region but is not a solution cell",
    "hidden region": "student_copy: cell {n} has a hidden-tests region but is not a graded cell",
    "no end": "{func}: {where} has a {begin} without its {end}",
    "inside another": "{func}: {where} has a {begin} inside another",
    "source folder": "write_student_copies: source {path} is not a folder",
    "no notebooks": "write_student_copies: no .ipynb files in {path}",
    "out is source": "write_student_copies: out must not be the source folder (it would overwrite the solutions)",
    "out in notebooks": "write_student_copies: out {out} is inside {notebooks}, where nbval would run the student "
                        "copies and fail; write them elsewhere, e.g. student-copies/",
    "out a file": "write_student_copies: out {out} is a file, not a folder",
    "target not regular": "write_student_copies: {path} is not a regular file (a folder, a FIFO or a device); "
                          "it cannot be written over",
    "copy failed": "write_student_copies: {name}: {error}",
    "cannot use": "write_student_copies: cannot use {path}: {why}",
    # score
    "timeout": "score: timeout must be more than 0 and at most 3600 seconds, got {value}",
    "no graded cells": "score: the teacher's notebook has no graded cells",
    # the command (after "python -m mha_lists.tools.exercises: error: ")
    "no exercise": "exercise_of: no cell of any exercise in it (no nbgrader cell id of the teacher's notebooks): "
                   "is it an exercise notebook?",
    "two exercises": "exercise_of: it holds as many cells of {a} and of {b}; hand in one exercise per file",
    "--source": "--source {path} is not a folder",
    "seconds": "{value} is not a number of seconds",
    "seconds range": "{value} must be more than 0 and at most 3600",
    "cannot write": "cannot write {path}: {why}",
}

SELF = []
SELF.append(SELF)  # a list inside itself
DEEP = {"nbformat": 4, "metadata": {}, "cells": []}
for _ in range(MAX_NESTING):
    DEEP = {"nbformat": 4, "metadata": {"x": DEEP}, "cells": []}
CELL = {"cell_type": "code", "metadata": {}, "source": "x = 1"}
TEACHER = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
    {"cell_type": "code", "source": "check_close('x', x, 1)",
     "metadata": {"nbgrader": {"grade": True, "grade_id": "a", "points": 1}}}]}
NOTEBOOK = {"nbformat": 4, "metadata": {}, "cells": []}


def cells(*items, **top):
    return {**NOTEBOOK, **top, "cells": list(items)}


def raising(error):
    def call():
        raise error
    return call


# key -> (error type, a real bad call, the fields of the template)
BAD_CALLS = {
    "should be a number": (CheckFailed, lambda: check_close("q", [[1.0, "2" * 1000]], [[1.0, 2.0]]),
                           dict(path="q[0][1]", type="str", value="'" + "2" * 55 + " ...")),
    "int too large": (CheckFailed, lambda: check_close("x", 10**400, 1.0), dict(path="x", int="an int of 401 digits")),
    "nan": (CheckFailed, lambda: check_close("Q", [[1.0, math.nan]], [[1.0, 2.0]]), dict(path="Q[0][1]")),
    "should be": (CheckFailed, lambda: check_close("Q", None, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                  dict(path="Q", what="a 2x3 matrix", type="NoneType")),
    "parts": (CheckFailed, lambda: check_close("Q", [[1.0], [2.0]], [[1.0, 2.0]]),
              dict(path="Q", n=2, parts="rows", m=1, what="a 1x2 matrix")),
    "off by": (CheckFailed, lambda: check_close("s", 1.0 - 1e-8, 1.0),
               dict(path="s", size="1e-08", how="too small", tol="1e-09")),
    "off by, more": (CheckFailed, lambda: check_close("Q", [[1.5, 2.0, 3.0], [4.0, 5.0, 5.0]],
                                                      [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                     dict(path="Q[0][0]", size="0.5", how="too large", tol="1e-09", n=2)),
    "long name": (ValueError, lambda: check_close("q" * 5000, 1.0, 1.0), dict(n="5,000")),
    "expected kind": (TypeError, lambda: check_close("x", [1.0], SELF), dict(value="[[...]]")),
    "expected nan": (ValueError, lambda: check_close("q", 1.0, [0.5, math.nan]), {}),
    "expected too large": (ValueError, lambda: check_close("q", 1.0, [[0.5], [-10**400]]),
                           dict(where="expected[1][0]", int="an int of 401 digits")),
    "expected ragged": (ValueError, lambda: check_close("q", [[1.0, 2.0], [3.0]], [[1.0, 2.0], [3.0]]),
                        dict(where="expected", first="a list of 2", i=1, other="a list of 1")),
    "tol": (ValueError, lambda: check_close("q", 1.0, 1.0, 10**400), dict(value="an int of 401 digits")),
    "not an object": (NotebookError, lambda: tampering([], TEACHER), dict(func="tampering", name="nb", type="list")),
    "too deep": (NotebookError, lambda: score(DEEP, TEACHER), dict(func="score", name="nb")),
    "nbformat": (NotebookError, lambda: score({"cells": []}, TEACHER), dict(func="score", name="nb", value="None")),
    "no metadata": (NotebookError, lambda: student_copy({"cells": [], "metadata": 3}),
                    dict(func="student_copy", name="nb")),
    "no cells": (NotebookError, lambda: tampering(TEACHER, {**TEACHER, "cells": {}}),
                 dict(func="tampering", name="teacher")),
    "cell type": (NotebookError, lambda: student_copy({"cells": [5]}), dict(func="student_copy", name="nb", n=0)),
    "no source": (NotebookError, lambda: student_copy({"cells": [{**CELL, "source": [1]}]}),
                  dict(func="student_copy", name="nb", n=0)),
    "no cell metadata": (NotebookError, lambda: student_copy({"cells": [{**CELL, "metadata": []}]}),
                         dict(func="student_copy", name="nb", n=0)),
    "grade_id": (NotebookError, lambda: tampering(TEACHER, json.loads(json.dumps(TEACHER).replace('"a"', '["a"]'))),
                 dict(func="tampering", name="teacher", n=0, value="['a']")),
    "points": (NotebookError, lambda: score(TEACHER, json.loads(json.dumps(TEACHER).replace(
        '"points": 1', '"points": 1' + "0" * 400))), dict(func="score", name="teacher", n=0,
                                                          value="an int of 401 digits")),
    "not cells": (TypeError, lambda: student_copy([]), dict(func="student_copy", name="nb")),
    "path": (TypeError, lambda: read_notebook(3), dict(func="read_notebook", name="path", type="int")),
    "folder": (NotebookError, lambda: read_notebook(ROOT / "notebooks"), dict(path=ROOT / "notebooks")),
    "not regular": (NotebookError, lambda: read_notebook("/dev/null"), dict(path="/dev/null")),
    "missing": (NotebookError, lambda: read_notebook(ROOT / "gone.ipynb"), dict(path=ROOT / "gone.ipynb")),
    "cannot read": (NotebookError, lambda: read_notebook("a\0b.ipynb"),
                    dict(path="'a\\x00b.ipynb'", error="the path has a NUL character in it")),
    "too big": (NotebookError, raising(NotebookError("read_notebook: big.ipynb is larger than 20,000,000 bytes, "
                                                     "the limit")), dict(path="big.ipynb")),  # called for real below
    "not JSON": (NotebookError, lambda: read_notebook(ROOT / "README.md"),
                 dict(path=ROOT / "README.md", error="Expecting value: line 1 column 1 (char 0)")),
    "JSON too deep": (NotebookError, raising(NotebookError("read_notebook: deep.ipynb is JSON nested too deeply to be "
                                                           "a notebook")), dict(path="deep.ipynb")),  # for real below
    "solution region": (ValueError, lambda: student_copy({"cells": [
        {"cell_type": "code", "metadata": {}, "source": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"}]}), dict(n=0)),
    "hidden region": (ValueError, lambda: student_copy({"cells": [
        {"cell_type": "code", "metadata": {}, "source": "### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS"}]}),
                      dict(n=0)),
    "no end": (ValueError, lambda: tampering(TEACHER, json.loads(json.dumps(TEACHER).replace(
        "check_close('x', x, 1)", "### BEGIN HIDDEN TESTS"))),
               dict(func="tampering", where="teacher's a", begin="BEGIN HIDDEN TESTS", end="END HIDDEN TESTS")),
    "inside another": (ValueError, lambda: student_copy({"cells": [
        {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}},
         "source": "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"}]}),
                       dict(func="student_copy", where="cell 0", begin="BEGIN SOLUTION")),
    "source folder": (NotebookError, lambda: write_student_copies(ROOT / "no-such-folder", ROOT / "x"),
                      dict(path=ROOT / "no-such-folder")),
    "no notebooks": (NotebookError, lambda: write_student_copies(ROOT / "tests" / "golden", ROOT / "x"),
                     dict(path=ROOT / "tests" / "golden")),
    "out is source": (ValueError, lambda: write_student_copies(EXERCISES[0].parent, EXERCISES[0].parent), {}),
    "out in notebooks": (ValueError, lambda: write_student_copies(EXERCISES[0].parent, ROOT / "notebooks" / "students"),
                         dict(out=ROOT / "notebooks" / "students", notebooks=ROOT / "notebooks")),
    "out a file": (NotebookError, lambda: write_student_copies(EXERCISES[0].parent, ROOT / "README.md"),
                   dict(out=ROOT / "README.md")),
    "target not regular": (NotebookError, raising(NotebookError(
        "write_student_copies: out/a.ipynb is not a regular file (a folder, a FIFO or a device); it cannot be "
        "written over")), dict(path="out/a.ipynb")),  # called for real below, with a FIFO
    "copy failed": (NotebookError, raising(NotebookError("write_student_copies: a.ipynb: b")),
                    dict(name="a.ipynb", error="b")),  # called for real below
    "cannot use": (NotebookError, lambda: write_student_copies("x" * 5000, "out"),
                   dict(path="'" + "x" * 115 + " ...", why="File name too long")),
    "cannot write": (NotebookError, raising(NotebookError("cannot write /proc/nope: No such file or directory")),
                     dict(path="/proc/nope", why="No such file or directory")),  # the command's own: run below
    "timeout": (ValueError, lambda: score(TEACHER, TEACHER, timeout=True), dict(value=True)),
    "no graded cells": (NotebookError, lambda: score(TEACHER, {**TEACHER, "cells": []}), {}),
    "no exercise": (NotebookError, lambda: exercises_module.exercise_of({**TEACHER, "cells": []}, {"t.ipynb": TEACHER}),
                    {}),
    "two exercises": (NotebookError, lambda: exercises_module.exercise_of(TEACHER, {"a.ipynb": TEACHER, "b.ipynb": TEACHER}),
                      dict(a="a.ipynb", b="b.ipynb")),
    "--source": (NotebookError, raising(NotebookError("--source no/such is not a folder")),
                 dict(path="no/such")),  # the command's own: run below
    "seconds": (argparse.ArgumentTypeError, lambda: exercises_module._seconds("soon"), dict(value="'soon'")),
    "seconds range": (argparse.ArgumentTypeError, lambda: exercises_module._seconds("0"), dict(value="0")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    error, call, fields = BAD_CALLS[key]
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, error)
    assert str(info.value) == MESSAGES[key].format(**fields)


def message(key, **fields):
    return MESSAGES[key].format(**fields)

# One wrong-but-plausible answer per solution cell (by grade_id): what replaces the solution region.
WRONG = {
    "00a_raw_score": "return sum(a * b for a, b in zip(x_i, x_j))",  # forgot the weights
    "00a_weights_row": "top = max(raw_row)\nexps = [math.exp(s - top) for s in raw_row]\n"
                       "return [e / sum(exps) for e in exps]",  # forgot / sqrt(d_k)
    "02_q_entry": "return sum(x[i][t] * W_Q[t][c] for t in range(1, len(x[0])))",  # skipped t = 0
    "02_keys": "return [[sum(row[t] * W_K[t][c] for t in range(len(W_K[0]))) for c in range(len(W_K[0]))] for row in x]",
    "02_V_heads": "return split_heads(matmul(x, concat_heads(W_V)), 1)",  # one head, not h
    "03_score": "return sum(a * b for a, b in zip(q, k))",  # forgot / sqrt(d_k)
    "03_S": "return [[sum(a * b for a, b in zip(q, k)) / len(q) for k in K] for q in Q]",  # / d_k
    "04_my_softmax": "exps = [math.exp(s - max(row)) for s in row]\nreturn exps",  # not normalised
    "04_causal": "return [softmax([s if j >= i else -math.inf for j, s in enumerate(row)]) for i, row in enumerate(scores)]",
    "05_out_row": "return [sum(A[j][i] * V[j][c] for j in range(len(V))) for c in range(len(V[0]))]",  # a column
    "05_head": "return [[sum(V[j][c] for j in range(len(V))) / len(V) for c in range(len(V[0]))] for a_row in A]",
    "06_concat": "return [row for H in head_outputs for row in H]",  # stacked, not side by side
    "06_by_blocks": "return matmul(head_outputs[0], W_O[:len(head_outputs[0][0])])",  # head 0 only
    "07_my_attention": "heads = [matmul(softmax_rows(scale(matmul(matmul(x, a), transpose(matmul(x, b))), "
                       "1 / math.sqrt(len(a[0])))), matmul(x, c)) for a, b, c in zip(weights.W_Q, weights.W_K, weights.W_V)]\n"
                       "return concat_heads(heads)",  # forgot W_O
    "07_count_parameters": "return 3 * d_model * d_model",  # forgot W_O
    "16_softmax_backward": "return [p_j * dp_j for p_j, dp_j in zip(p, dp)]",  # forgot - p . dp
    "16_dW": "return [[sum(dY[r][c] for r in range(len(X))) for c in range(len(dY[0]))] for a in range(len(X[0]))]",
    "16_dX": "return [[sum(row[c] * W[c][a] for c in range(len(row))) for a in range(len(W))] for row in dY]",  # W, not W^T
    "17_ce_grad": "top = max(z)\nexps = [math.exp(z_j - top) for z_j in z]\nreturn [e / sum(exps) for e in exps]",
    "17_adam": "m = [b1 * m_i + (1 - b1) * g for m_i, g in zip(m, grads)]\n"
               "v = [b2 * v_i + (1 - b2) * g * g for v_i, g in zip(v, grads)]\n"
               "return [p - lr * m_i / (math.sqrt(v_i) + eps) for p, m_i, v_i in zip(params, m, v)], m, v",  # no correction
}


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def named(name):
    return next(p for p in EXERCISES if p.name.startswith(name))


def source(cell):
    return "".join(cell["source"])


def nbgrader(cell):
    return cell.get("metadata", {}).get("nbgrader")


def exercise_pairs(nb):
    """(solution cell, check cell) for every solution cell; the check must come right after it."""
    cells = nb["cells"]
    return [(c, cells[n + 1]) for n, c in enumerate(cells) if (nbgrader(c) or {}).get("solution")]


def solution_ids(nb):
    return [nbgrader(c)["grade_id"] for c in nb["cells"] if (nbgrader(c) or {}).get("solution")]


def with_answers(nb, answers):
    """A copy of the notebook whose solution regions hold the given code (by grade_id); others stay."""
    new = json.loads(json.dumps(nb))
    for cell in new["cells"]:
        grade_id = (nbgrader(cell) or {}).get("grade_id")
        if grade_id in answers:
            text = source(cell)
            begin = re.search(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[^\n]*", text, re.S | re.M)
            answer = "\n".join(begin.group(1) + line for line in answers[grade_id].split("\n"))
            cell["source"] = text[:begin.start()] + answer + text[begin.end():]
    return new


def submitted(nb, answers=None):
    """What a student hands in: the student copy, with the teacher's answers or the given ones."""
    teacher = with_answers(nb, answers or {})
    handed_out = student_copy(nb)
    for mine, theirs in zip(handed_out["cells"], teacher["cells"]):
        if (nbgrader(mine) or {}).get("solution"):
            mine["source"] = source(theirs)
    return handed_out


def check_cell(nb, grade_id):
    return next(c for c in nb["cells"] if (nbgrader(c) or {}).get("grade_id") == grade_id)


# === The notebooks ===


def test_exercises_for_00a_02_to_07_16_and_17():
    assert [p.name.split("_")[0] for p in EXERCISES] == ["00a", "02", "03", "04", "05", "06", "07", "16", "17"]
    layer = "\n".join(source(c) for c in load(ROOT / "notebooks" / CORE["02-06"])["cells"] if c["cell_type"] == "markdown")
    for path in EXERCISES:
        number = path.name.split("_")[0]
        if number in CORE:
            assert path.name == CORE[number], "an exercise notebook is named after its core notebook"
        elif number == "07":  # the whole layer: 02-06's last part, All together (07 was its own notebook)
            assert f"Practice for the last part of [notebook 02-06](../{CORE['02-06']}), All together" in source(load(path)["cells"][0])
            assert re.search(r"^## All together", layer, re.M), "02-06 has no part All together"
        else:  # 02 to 06 keep their names: each practises one part of 02-06, and its first cell links to it
            assert f"Practice for part {number} of [notebook 02-06](../{CORE['02-06']})" in source(load(path)["cells"][0])
            assert re.search(rf"^## {number} · ", layer, re.M), f"02-06 has no part {number}"
        assert len(exercise_pairs(load(path))) >= 2


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_nbgrader_metadata_and_a_hidden_check_in_every_check_cell(path):
    nb = load(path)
    ids = [nbgrader(c)["grade_id"] for c in nb["cells"] if nbgrader(c)]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    for sol, chk in exercise_pairs(nb):
        assert nbgrader(sol) == {"grade": False, "grade_id": nbgrader(sol)["grade_id"], "locked": False,
                                 "schema_version": 3, "solution": True}
        text = source(sol)
        assert text.startswith("def ") and text.count("### BEGIN SOLUTION") == 1 and text.count("### END SOLUTION") == 1
        meta = nbgrader(chk)
        assert chk["cell_type"] == "code", "a check cell follows every solution cell directly"
        assert meta == {"grade": True, "grade_id": nbgrader(sol)["grade_id"] + "_check", "locked": True,
                        "points": meta["points"], "schema_version": 3, "solution": False}
        assert isinstance(meta["points"], int) and meta["points"] > 0
        visible, full = _clear_hidden(source(chk), "test"), source(chk)
        assert "check_close(" in visible and len(visible.splitlines()) <= 5
        hidden = full[full.index("### BEGIN HIDDEN TESTS"):full.index("### END HIDDEN TESTS")]
        assert "import check_close as _check" in hidden and "_check(" in hidden and "hidden" in hidden
        function = re.match(r"def (\w+)\(", text).group(1)
        assert function + "(" in hidden, "the hidden check calls the learner's function again"
        assert nbgrader(sol)["grade_id"] in WRONG, "every exercise needs a wrong answer in WRONG"


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_exercise_notebook_is_stored_executed_and_clean(path):
    nb = load(path)
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    for c in code:
        assert "execution" not in c["metadata"]
        assert all(o["output_type"] != "error" and o.get("name") != "stderr" for o in c["outputs"])
    for _, chk in exercise_pairs(nb):
        printed = "".join("".join(o.get("text", "")) for o in chk["outputs"])
        assert "correct" in printed and "hidden" in printed
    markdown = [source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert markdown[0].startswith("# ") and any("Try this" in m for m in markdown[-3:])
    total = sum(nbgrader(chk)["points"] for _, chk in exercise_pairs(nb))
    assert markdown[-2].endswith(f"This notebook is worth {total} points.")
    # It ends with the self-check, and how to hand the notebook in: full points on the teacher's solutions.
    assert markdown[-1].startswith("## Check your work, then hand it in") and "File > Download" in markdown[-1]
    assert source(code[-1]) == f'from mha_lists.tools.exercises import self_check\n\nresult = self_check("{path.stem}", globals())'
    printed = "".join("".join(o.get("text", "")) for o in code[-1]["outputs"])
    assert f"Total: {total} of {total} points on these checks" in printed and path.name in printed


# === Student copies ===


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_student_copy_removes_solutions_and_hidden_checks(path):
    nb = load(path)
    copy = student_copy(nb)
    assert nb == load(path), "the solution notebook is not changed"
    text = json.dumps(copy)
    assert "SOLUTION" not in text and "HIDDEN" not in text and not re.search(r"(?<!self)_check\(", text)
    for seed in re.findall(r"random\.Random\((\d+)\)|seed=(\d+)\)\n_trace", json.dumps(nb)):
        assert "".join(seed) not in text, "a hidden seed is not in the student copy"
    for (sol, chk), (new_sol, new_chk) in zip(exercise_pairs(nb), exercise_pairs(copy)):
        assert "# YOUR CODE HERE\n" in source(new_sol) and source(new_sol).endswith("raise NotImplementedError()")
        assert source(new_sol).startswith(source(sol).split("### BEGIN SOLUTION")[0]), "lines outside the region stay"
        assert source(new_chk) == _clear_hidden(source(chk), "test") and new_chk["metadata"] == chk["metadata"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in copy["cells"] if c["cell_type"] == "code")


def test_student_copy_clears_hidden_tests_as_nbgrader_does():
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "a", "points": 1}},
            "source": "check(1)\n    ### BEGIN HIDDEN TESTS\nsecret(2)\n### END HIDDEN TESTS\ncheck(3)"}
    assert student_copy({"cells": [cell]})["cells"][0]["source"] == "check(1)\ncheck(3)"


def test_student_copy_indents_the_stub_like_the_begin_line():
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}, "outputs": [], "execution_count": 1,
            "source": "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"}
    assert student_copy({"cells": [cell]})["cells"][0]["source"] == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")


@pytest.mark.parametrize("cell, key", [
    ({"cell_type": "code", "metadata": {}, "source": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"},
     "solution region"),
    ({"cell_type": "code", "metadata": {}, "source": "### BEGIN HIDDEN TESTS\nx = 1\n### END HIDDEN TESTS"},
     "hidden region"),
    ({"cell_type": "code", "metadata": {"nbgrader": {"grade": True}}, "source": "### BEGIN HIDDEN TESTS\nx = 1"},
     "no end"),
])
def test_student_copy_refuses_a_region_in_the_wrong_cell(cell, key):
    with pytest.raises(ValueError) as info:
        student_copy({"cells": [cell]})
    assert str(info.value) == message(key, n=0, func="student_copy", where="cell 0", begin="BEGIN HIDDEN TESTS",
                                      end="END HIDDEN TESTS")


# === Scores: full, empty, wrong ===


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_the_solutions_score_full_points_and_the_empty_copy_none(path):
    teacher = load(path)
    full = score(submitted(teacher), teacher)
    assert full.earned == full.possible > 0 and full.failed == {}
    empty = score(student_copy(teacher), teacher)
    assert empty.earned == 0 and empty.possible == full.possible
    assert list(empty.failed) == [i + "_check" for i in solution_ids(teacher)]
    assert all(why.startswith("not answered (NotImplementedError") for why in empty.failed.values())


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_every_check_fails_a_wrong_answer_with_a_message(path):
    teacher = load(path)
    result = score(submitted(teacher, WRONG), teacher)
    assert result.earned == 0 and list(result.failed) == [i + "_check" for i in solution_ids(teacher)]
    assert all(why.startswith("CheckFailed: ") and (" is off by " in why or " has " in why)
               for why in result.failed.values()), result.failed


@pytest.mark.parametrize("name, settings", [("07", "seed=7, num_heads=4"), ("16", "seed=123, num_heads=8")])
def test_solutions_pass_with_another_example(name, settings):
    teacher = load(named(name))
    nb = submitted(teacher)
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code" and "ex = running_example()" in source(c))
    setup["source"] = source(setup).replace("ex = running_example()", f"ex = running_example({settings})")
    result = score(nb, teacher)
    assert result.earned == result.possible and result.failed == {}


# === Tampering and copying ===

TEACHER_04 = load(named("04"))
POINTS_04 = {nbgrader(c)["grade_id"]: nbgrader(c)["points"] for c in TEACHER_04["cells"] if (nbgrader(c) or {}).get("grade")}


def tampered(edit, answers=None):
    """The 04 solutions as a student hands them in, then ``edit(nb)`` applied."""
    nb = submitted(TEACHER_04, answers)
    edit(nb)
    return nb


def replace_checks(nb, text):
    for cell in nb["cells"]:
        if (nbgrader(cell) or {}).get("grade"):
            cell["source"] = text


def edit_check(grade_id, old, new):
    def edit(nb):
        cell = check_cell(nb, grade_id)
        assert old in source(cell)
        cell["source"] = source(cell).replace(old, new)
    return edit


def insert_before(grade_id, cell):
    def edit(nb):
        n = nb["cells"].index(check_cell(nb, grade_id))
        nb["cells"].insert(n, cell)
    return edit


def code_cell(text, meta=None):
    return {"cell_type": "code", "execution_count": None, "metadata": meta or {}, "outputs": [], "source": text}


def test_checks_replaced_by_print_correct_score_0_with_a_reason():
    for answers in ({}, WRONG):
        result = score(tampered(lambda nb: replace_checks(nb, "print('correct')"), answers), TEACHER_04)
        assert result.earned == 0 and result.possible == sum(POINTS_04.values())
        assert all(why.startswith("changed: its source is not the teacher's") for why in result.failed.values())


def move_first_check_up(nb):
    cell = check_cell(nb, "04_my_softmax_check")
    nb["cells"].remove(cell)
    nb["cells"].insert(1, cell)


def make_markdown(nb):
    cell = check_cell(nb, "04_causal_check")
    cell["cell_type"] = "markdown"
    del cell["outputs"], cell["execution_count"]


@pytest.mark.parametrize("edit, grade_id, reason", [
    (edit_check("04_causal_check", "check_close(", "print("), "04_causal_check", "changed: its source"),  # deleted check
    (edit_check("04_causal_check", "masked_trace.attention[0])", "masked_trace.attention[0], tol=1.0)"),
     "04_causal_check", "changed: its source"),  # a looser tolerance
    (edit_check("04_my_softmax_check", "\n", "\n\n"), "04_my_softmax_check", "changed: its source"),  # one character
    (lambda nb: check_cell(nb, "04_causal_check")["metadata"]["nbgrader"].update(grade_id="04_causal_check_2"),
     "04_causal_check", "missing: no cell has this grade_id"),
    (lambda nb: nb["cells"].remove(check_cell(nb, "04_causal_check")), "04_causal_check", "missing"),
    (lambda nb: nb["cells"].append(json.loads(json.dumps(check_cell(nb, "04_causal_check")))),
     "04_causal_check", "duplicated: 2 cells have this grade_id"),
    (make_markdown, "04_causal_check", "changed: it is a markdown cell; it was handed out as a code cell"),
    (move_first_check_up, "04_my_softmax_check", "moved: it must come after 04_my_softmax, as handed out"),
], ids=["deleted check", "changed tolerance", "one character", "edited grade_id", "deleted cell", "duplicated cell",
        "changed cell type", "moved cell"])
def test_a_check_cell_not_as_handed_out_scores_0_with_a_reason(edit, grade_id, reason):
    nb = tampered(edit)
    assert list(tampering(nb, TEACHER_04)) == [grade_id] and tampering(nb, TEACHER_04)[grade_id].startswith(reason)
    result = score(nb, TEACHER_04)
    assert result.earned == result.possible - POINTS_04[grade_id] and list(result.failed) == [grade_id]
    assert result.failed[grade_id].startswith(reason)


def test_the_teachers_own_notebook_is_accepted_with_its_hidden_tests_inline():
    assert tampering(TEACHER_04, TEACHER_04) == {}
    assert score(TEACHER_04, TEACHER_04) == (4, 4, {})


def test_tampering_finds_nothing_in_the_solutions_or_the_empty_copy():
    for path in EXERCISES:
        teacher = load(path)
        assert tampering(teacher, teacher) == {} and tampering(student_copy(teacher), teacher) == {}


def copied(value_expr):
    return f"return {value_expr}"


def test_an_answer_copied_from_the_visible_checks_fails_the_hidden_ones():
    # my_softmax: a lookup table of the three rows the visible check shows, with the module's answers.
    rows = ([1.0, 2.0, 3.0], [1000.0, 1001.0, 999.0], [0.5, -math.inf, 0.5])
    table = {repr(row): softmax(row) for row in rows}
    result = score(submitted(TEACHER_04, {"04_my_softmax": copied(f"{table!r}.get(repr(row), [])")}), TEACHER_04)
    assert result.earned == result.possible - POINTS_04["04_my_softmax_check"]
    assert result.failed["04_my_softmax_check"].startswith("CheckFailed: my_softmax on a hidden row has ")
    # score: the one number the visible check asks for.
    teacher = load(named("03"))
    ex = running_example()
    value = attention_trace(ex.x, ex.weights).scores[0][ex.tokens.index("I")][ex.tokens.index("like")]
    nb = submitted(teacher, {"03_score": copied(repr(value))})
    visible = nb["cells"][:[n for n, c in enumerate(nb["cells"]) if (nbgrader(c) or {}).get("grade")][0] + 1]
    assert score({**nb, "cells": visible}, {**teacher, "cells": visible}).earned == 1, "it passes the visible check"
    result = score(nb, teacher)
    assert result.earned < result.possible and list(result.failed) == ["03_score_check"]
    assert result.failed["03_score_check"].startswith("CheckFailed: score on a hidden example")


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_every_hidden_check_asks_about_inputs_the_visible_check_never_shows(path, capsys):
    """Whatever table of visible inputs and answers a learner copies, the hidden check asks something else."""
    namespace, calls = {"__name__": "__main__"}, {}

    def recorded(name, function):
        def wrapper(*args):
            calls[name][phase].add(repr(args))
            return function(*args)
        return wrapper

    for cell in load(path)["cells"]:
        meta = nbgrader(cell) or {}
        if cell["cell_type"] != "code":
            continue
        if meta.get("grade"):
            full = source(cell)
            phase, name = "visible", solved
            exec(_clear_hidden(full, "test"), namespace)
            phase = "hidden"
            exec(full[full.index("### BEGIN HIDDEN TESTS"):], namespace)
            assert calls[name]["visible"] and calls[name]["hidden"], name
            assert not calls[name]["hidden"] & calls[name]["visible"], f"{name}: a hidden input is also a visible one"
            continue
        exec(source(cell), namespace)
        if meta.get("solution"):
            solved = re.match(r"def (\w+)\(", source(cell)).group(1)
            calls[solved] = {"visible": set(), "hidden": set()}
            namespace[solved] = recorded(solved, namespace[solved])
    assert len(calls) == len(exercise_pairs(load(path)))


def test_an_extra_cell_cannot_replace_the_checks():
    # The checks run in a process of their own: a check_close of the notebook's never reaches them.
    for fake in ("def check_close(*args, **kwargs):\n    print('correct')",
                 "import mha_lists.tools.exercises as grader\n"
                 "grader.check_close = check_close = lambda *args, **kwargs: None"):
        result = score(tampered(insert_before("04_my_softmax_check", code_cell(fake)), WRONG), TEACHER_04)
        assert result.earned == 0, "the checks use the module's check_close, not the notebook's"
        assert all(why.startswith("CheckFailed: ") for why in result.failed.values())
        result = score(tampered(insert_before("04_my_softmax_check", code_cell(fake))), TEACHER_04)
        assert result.earned == result.possible, "right answers earn their points whatever else the notebook does"


# Ways to earn points with no answer that the grader's red teams found while the notebook and the
# checks shared a process (each earned 34 of 34 then, in every exercise notebook): the frame of
# the grader's loop, the process's own channel, a lying exception, built-ins reached through
# allowed modules, code run from an annotation. In a process of its own, each changes nothing.
ESCAPES = {
    "frame": "from mha_lists.tools.exercises import sys\ng = sys._getframe(1).f_globals\ng['check'] = lambda c: None",
    "generator frame": "def _peek():\n    yield _gen.gi_frame.f_back\n_gen = _peek()\n"
                       "_g = next(_gen).f_back.f_globals\n_g['check'] = lambda cell: None",
    "exit hook": "import atexit, sys\n"
                 "atexit.register(lambda: sys.stdout.write('{\"nonce\": \"x\", \"error\": null}\\n'))",
    "main's exec": "import __main__\n__main__.exec = lambda *args, **kwargs: None",
    "patched math": "import math\nmath.isclose = lambda *args, **kwargs: True",
    "patched builtins": "import builtins\nbuiltins.isinstance = lambda *args: True",
    "a line on the channel": "import os\nos.write(1, b'{\"nonce\": \"x\", \"error\": null}\\n')",
    "thread answering": "import os, json, threading\n_fd = os.dup(0)\nos.dup2(os.open(os.devnull, os.O_RDONLY), 0)\n"
                        "def _answer():\n    for line in os.fdopen(_fd):\n"
                        "        os.write(1, (json.dumps({'nonce': json.loads(line)['nonce'], 'error': None})"
                        " + '\\n').encode())\nthreading.Thread(target=_answer).start()",
    "builtins through fractions": "import fractions\nrun = fractions.re.enum.bltns.exec\n"
                                  "run('import sys; sys.modules[\"math\"].isclose = lambda *a, **k: True')",
    "a lying exception": "class Falsy:\n    def __getitem__(self, key): return self\n"
                         "    def __radd__(self, other): return self\n    def __bool__(self): return False\n"
                         "class Text(str):\n    def strip(self): return self\n"
                         "    def splitlines(self): return [Falsy()]\n"
                         "class Quiet(Exception):\n    def __str__(self): return Text('x')\n"
                         "import mha_lists.tools.exercises as g\ng.NotImplementedError = Quiet",
    "patched random": "import random\nR = random.Random\nR.uniform = lambda self, a, b: 0.0",
}


@pytest.mark.parametrize("name", ESCAPES)
def test_what_a_notebook_does_to_its_own_process_cannot_earn_points(name):
    result = score(tampered(insert_before("04_my_softmax_check", code_cell(ESCAPES[name])), WRONG), TEACHER_04)
    assert result.earned == 0 and set(result.failed) == set(POINTS_04)


def test_an_answer_that_raises_anything_is_an_error():
    check = _Cell("from mha_lists.tools.exercises import check_close\ncheck_close('x', answer(), [1.0, 2.0])", "x",
                  answers=("answer",))
    for raising in ("raise type('', (Exception,), {})()", "raise SystemExit(0)", "raise KeyboardInterrupt"):
        ran, stopped = _run([_Cell(f"def answer():\n    {raising}"), check], 60)
        assert ran["x"] and stopped is None, raising
    assert _run([_Cell("def answer():\n    return [1.0, 2.0]"), check], 60) == ({"x": None}, None)
    assert _run([check], 60) == ({"x": "NameError: name 'answer' is not defined"}, None)


def test_a_notebook_that_changes_the_packages_files_stops_the_grading(tmp_path):
    # The checks of a notebook run on what the checker imported first; the next checker would
    # import the changed files, so nothing after it is graded. (On a copy of the package.)
    shutil.copytree(ROOT / "mha_lists", tmp_path / "mha_lists", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks" / "exercises", tmp_path / "notebooks" / "exercises")
    change = code_cell("import mha_lists.core.matrix as m, pathlib\np = pathlib.Path(m.__file__)\n"
                       "p.write_text(p.read_text() + '\\n# changed\\n')")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / named("04").name).write_text(json.dumps(tampered(insert_before("04_my_softmax_check", change))))
    shutil.copy(named("03"), tmp_path / "in" / named("03").name)
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", f"in/{named('04').name}",
                             f"in/{named('03').name}"], cwd=tmp_path, capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 2
    assert "0 points, did not run: the notebook changed the files a checker imports (mha_lists/core/matrix.py)" in result.stdout
    assert f"error: in/{named('03').name}: not graded, nor what follows" in result.stderr


def test_a_pyc_a_notebook_plants_beside_an_unchanged_module_is_not_run_by_the_next_checker(tmp_path):
    # Found by red-teaming: a notebook wrote mha_lists/__pycache__/__init__.*.pyc, its header matching the
    # unchanged __init__.py, with code that signed every later check as passed; the next notebooks, unanswered,
    # earned full points. The .pyc a checker runs from is now watched like the source. (On a copy of the package.)
    shutil.copytree(ROOT / "mha_lists", tmp_path / "mha_lists", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks" / "exercises", tmp_path / "notebooks" / "exercises")
    plant = code_cell(
        "import importlib.util, marshal, pathlib, mha_lists\n"
        "src = pathlib.Path(mha_lists.__file__); st = src.stat()\n"
        "extra = '\\nimport sys as _s, json as _j\\nif _s.flags.isolated:\\n    _d = _j.dumps\\n"
        "    def _dumps(o, **k):\\n        if isinstance(o, dict) and \"done\" in o: o = {**o, \"done\": None}\\n"
        "        return _d(o, **k)\\n    _j.dumps = _dumps\\n'\n"
        "code = compile(src.read_text() + extra, str(src), 'exec')\n"
        "header = (importlib.util.MAGIC_NUMBER + bytes(4) + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, 'little')\n"
        "          + (st.st_size & 0xFFFFFFFF).to_bytes(4, 'little'))\n"
        "cache = pathlib.Path(importlib.util.cache_from_source(str(src)))\n"
        "cache.parent.mkdir(exist_ok=True)\n"
        "cache.write_bytes(header + marshal.dumps(code))\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.ipynb").write_text(json.dumps(tampered(insert_before("04_my_softmax_check", plant), WRONG)))
    (tmp_path / "in" / "b.ipynb").write_text(json.dumps(student_copy(TEACHER_04)))  # unanswered
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", "in/a.ipynb", "in/b.ipynb"],
                            cwd=tmp_path, capture_output=True, text=True, encoding="utf-8")
    assert list((tmp_path / "mha_lists" / "__pycache__").glob("__init__.*.pyc")), result.stdout + result.stderr
    assert result.returncode == 2 and "in/b.ipynb" not in result.stdout, result.stdout
    assert "0 points, did not run: the notebook changed the files a checker imports (" in result.stdout
    assert "__init__." in result.stdout and ".pyc" in result.stdout
    assert "error: in/b.ipynb: not graded, nor what follows: an earlier notebook changed the files a checker imports" \
        in result.stderr


def test_the_files_a_checker_imports_are_watched_with_the_package(tmp_path):
    # A notebook that changes a standard-library module the checker loads (json's, when Python's folder is
    # writable) changes what the next checker runs, as a change to the package would.
    imported = exercises_module._checker_imports(str(ROOT), str(tmp_path))
    assert any(name.endswith(os.path.join("json", "__init__.py")) for name in imported)
    assert any(os.path.join("mha_lists", "__pycache__", "__init__.") in name for name in imported)
    standin = tmp_path / "json_stand_in.py"
    standin.write_text("x = 1\n")
    before = exercises_module._package_files((str(standin),))
    assert exercises_module._changed_files(before) == []
    standin.write_text("x = 2\n")
    assert exercises_module._changed_files(before) == [str(standin)]


def test_a_line_nested_past_the_recursion_limit_stops_only_its_notebook():
    # Found by red-teaming: one line of 100,000 "[" on the channel crashed the whole run (RecursionError).
    cells = [_Cell("import os\nos.write(1, b'[' * 100000 + b'\\n')"), _Cell("pass", "x")]
    assert _run(cells, 60) == ({}, "the grader's channel was written to (its answers can no longer be trusted)")


def test_what_a_notebook_writes_cannot_move_the_teachers_cursor(tmp_path):
    # Found by red-teaming: an answer's error message, or a hand-in's name, with terminal escapes erased the
    # lines of the real grade and drew a fake "4/4 points". Both are printed with each escape written out.
    fake = "\x1b[2K\x1b[1A\x1b[2K\x1b[1G" + "carol.ipynb (exercise 04_softmax_and_masks.ipynb): 4/4 points"
    liar = f"raise ValueError({fake!r})"
    name = "dave.ipynb: 4\u22154 points\n\x1b[8mzz.ipynb"
    (tmp_path / name).write_text(json.dumps(submitted(TEACHER_04, {"04_my_softmax": liar})))
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", name], cwd=tmp_path,
                            capture_output=True, text=True, encoding="utf-8")
    assert "\x1b" not in result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "dave.ipynb: 4\u22154 points\\n\\x1b[8mzz.ipynb (exercise 04_softmax_and_masks.ipynb): 2/4 points"
    assert lines[1].startswith("  04_my_softmax_check: 0 points, ValueError: \\x1b[2K\\x1b[1A"), lines[1]


def test_a_symbolic_link_is_not_graded(tmp_path):
    # Found by red-teaming: a hand-in that is a link to the teacher's notebook earned full points (an archive
    # of hand-ins keeps links). A link is refused; the files beside it are graded.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "grace.ipynb").symlink_to(named("04"))
    (tmp_path / "in" / "heidi.ipynb").write_text(json.dumps(student_copy(TEACHER_04)))
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", "in"], cwd=tmp_path,
                            capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 2
    assert "error: in/grace.ipynb is a symbolic link, not a notebook a student handed in" in result.stderr
    assert result.stdout.startswith("in/heidi.ipynb (exercise 04_softmax_and_masks.ipynb): 0/4 points")
    assert "grace" not in result.stdout


def test_the_checker_reads_no_site_packages_and_no_environment():
    # A .pth or sitecustomize file a notebook wrote would otherwise run in the next checker.
    check = _Cell("import sys\nassert sys.flags.isolated and sys.flags.no_site\n"
                  "assert not any('site-packages' in p for p in sys.path)", "x")
    assert _run([check], 60) == ({"x": None}, None)


def test_a_notebook_cannot_change_the_teachers_notebooks(tmp_path):
    # The learner's process may not open the teacher's notebooks (--source), to read or to write:
    # the notebook that tries earns nothing, the file stays as it was, and the next one is graded.
    shutil.copytree(ROOT / "notebooks" / "exercises", tmp_path / "teacher")
    target = tmp_path / "teacher" / named("03").name
    before = target.read_bytes()
    change = code_cell(f"import pathlib\np = pathlib.Path({str(target)!r})\n"
                       "p.write_text(p.read_text().replace('check_close(', 'print('))")
    (tmp_path / named("04").name).write_text(json.dumps(tampered(insert_before("04_my_softmax_check", change))))
    shutil.copy(named("03"), tmp_path / named("03").name)
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", "--source",
                             str(tmp_path / "teacher"), named("04").name, named("03").name], cwd=tmp_path,
                            capture_output=True, text=True, encoding="utf-8")
    assert result.returncode == 0 and target.read_bytes() == before, result.stdout + result.stderr
    assert f"{named('04').name}: 0/4 points" in result.stdout and f"{named('03').name}: 3/3 points" in result.stdout
    assert (f"04_my_softmax_check: 0 points, did not run: score refuses this in a graded notebook: it reads "
            f"the teacher's notebooks ({target})") in result.stdout


def test_teachers_notebooks_changed_between_two_submissions_stop_the_grading(tmp_path, monkeypatch, capsys):
    # What score does if the teacher's notebooks change anyway (by a way the learner's process is
    # not watched for, or by someone else): nothing after is graded. Here the change is made by hand.
    shutil.copytree(ROOT / "notebooks" / "exercises", tmp_path / "teacher")
    target = tmp_path / "teacher" / named("03").name
    real_score = exercises_module.score

    def score_then_change(*args, **kwargs):
        result = real_score(*args, **kwargs)
        target.write_text(target.read_text(encoding="utf-8") + "\n", encoding="utf-8")
        return result
    monkeypatch.setattr(exercises_module, "score", score_then_change)
    with pytest.raises(SystemExit) as stopped:
        exercises_module.main(["score", "--source", str(tmp_path / "teacher"), str(named("04")), str(named("03"))])
    out, err = capsys.readouterr()
    assert stopped.value.code == 2 and f"{named('04')}: 4/4 points" in out
    assert f"error: {named('03')}: not graded, nor what follows: an earlier notebook changed the teacher's" in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_the_checkers_memory_and_pipes_are_closed_to_the_users_other_processes():
    check = _Cell("import ctypes\nassert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0  # PR_GET_DUMPABLE", "x")
    assert _run([check], 60) == ({"x": None}, None)


def test_a_checker_line_played_again_is_refused():
    # A line with the right key but out of turn (one read from the pipe earlier, say) stops the grading.
    checker = object.__new__(exercises_module._Checker)
    checker.key, checker.seq, checker.deadline, checker.timeout, checker.who = b"k" * 32, 5, math.inf, 60, "checker"
    checker.lines = __import__("queue").Queue()
    for seq in (5, 5):
        text = json.dumps({"done": None, "seq": seq}, sort_keys=True)
        checker.lines.put(json.dumps({"body": text, "mac": checker._mac(text)}) + "\n")
    assert checker.line() == {"done": None}
    with pytest.raises(exercises_module._Stopped, match="a line out of turn"):
        checker.line()


def test_a_module_written_beside_the_package_is_not_imported_by_the_checker(tmp_path):
    # Found by red-teaming: a json.py beside mha_lists/ was the next checkers' json, and signed
    # every check as passed. The package's folder now comes after the standard library's.
    shutil.copytree(ROOT / "mha_lists", tmp_path / "mha_lists", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks" / "exercises", tmp_path / "notebooks" / "exercises")
    (tmp_path / "json.py").write_text(
        "import sys\nhere = sys.path.pop(next(i for i, p in enumerate(sys.path) if p.endswith(%r)))\n"
        "me = sys.modules.pop('json')\nimport json as real\nsys.modules['json'] = me\nsys.path.append(here)\n"
        "loads, JSONDecodeError = real.loads, real.JSONDecodeError\n"
        "def dumps(obj, **kwargs):\n    if isinstance(obj, dict) and 'done' in obj:\n"
        "        obj = {**obj, 'done': None}\n    return real.dumps(obj, **kwargs)\n" % tmp_path.name)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / named("04").name).write_text(json.dumps(student_copy(TEACHER_04)))
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", f"in/{named('04').name}"],
                            cwd=tmp_path, capture_output=True, text=True, encoding="utf-8")
    assert result.stdout.startswith(f"in/{named('04').name}: 0/4 points"), result.stdout + result.stderr


def test_exploring_in_a_cell_of_ones_own_costs_nothing():
    # What a learner might type in a scratch cell; none of it touches the grading.
    scratch = ("from typing import List\nimport copy, time\nfrom math import *\nfrom mha_lists import *\n"
               "help(softmax)\nprint(getattr(weights, 'W_O')[0][0], vars(trace).keys() if False else 0)\n"
               "class Store:\n    def __init__(self):\n        self._store = {}\nprint(my_softmax.__doc__)\n"
               "%timeit softmax([1.0, 2.0])")
    result = score(tampered(insert_before("04_my_softmax_check", code_cell(scratch))), TEACHER_04)
    assert result.earned == result.possible and result.failed == {}


def test_names_the_notebook_rebinds_do_not_reach_the_checks():
    # With softmax rebound to the learner's own and range made empty, the old grader compared a
    # wrong my_softmax with itself and skipped the hidden loop: full points. The checks now run
    # among the teacher's names, with only the learner's answers put in.
    cheat = code_cell("softmax = my_softmax\ndef range(*args):\n    return []")
    result = score(tampered(insert_before("04_my_softmax_check", cheat), WRONG), TEACHER_04)
    assert result.earned == 0 and all(why.startswith("CheckFailed: ") for why in result.failed.values())
    # The same cell after right answers: they stay right (the learner's own cells see the cell's names).
    rebind = code_cell("ex = running_example(seed=5)\nx, weights, tokens = ex.x, ex.weights, ex.tokens")
    result = score(tampered(insert_before("04_my_softmax_check", rebind)), TEACHER_04)
    assert result.earned == result.possible and result.failed == {}


@pytest.mark.parametrize("answer, error", [
    # An answer comes back from the learner's process as JSON: lists and numbers, whatever its class.
    ("class L(list):\n    def __iter__(self):\n        return iter(())\nL([0.0, 0.0])",
     "CheckFailed: x has 0 entries; it should have 2 (a list of 2 numbers)"),
    ("class F(float):\n    pass\n[F(1.0), 2.0]", None),  # the right numbers
    ("[True, 2.0]", "CheckFailed: x[0] should be a number, but it is bool: True"),
    ("iter([1.0, 2.0])", "answer returned a list_iterator, not numbers and lists"),
])
def test_an_answer_is_checked_as_plain_lists_and_numbers(answer, error):
    *body, value = answer.split("\n")
    cells = [_Cell("\n".join(body) + f"\ndef answer():\n    return {value}"),
             _Cell("from mha_lists.tools.exercises import check_close\ncheck_close('x', answer(), [1.0, 2.0])", "x",
                   answers=("answer",))]
    assert _run(cells, 60) == ({"x": error}, None)
    with pytest.raises(CheckFailed, match="^x should be a list of 2 numbers, but it is str"):
        check_close("x", "12", [1.0, 2.0])
    check_close("x", (1, 2.0), [1.0, 2.0])  # a tuple and an int are plain too


def test_an_answer_that_changes_its_input_changes_only_its_copy():
    # Found by red-teaming the grader: the check compared with softmax of the row the answer had
    # just set to zeros (uniform, as the answer returned). Answers now get their inputs as a pickle.
    cheat = "n = len(row)\nrow[:] = [0.0] * n\nreturn [1.0 / n] * n"
    result = score(submitted(TEACHER_04, {"04_my_softmax": cheat}), TEACHER_04)
    assert result.earned == result.possible - POINTS_04["04_my_softmax_check"]
    assert result.failed["04_my_softmax_check"].startswith("CheckFailed: my_softmax([1.0, 2.0, 3.0])[0] is off by")


def test_an_extra_graded_cell_earns_nothing():
    bonus = code_cell("print('correct')", {"nbgrader": {"grade": True, "grade_id": "bonus", "locked": True,
                                                         "points": 100, "schema_version": 3, "solution": False}})
    result = score(tampered(lambda nb: nb["cells"].append(bonus)), TEACHER_04)
    assert result.earned == result.possible == sum(POINTS_04.values()) and result.failed == {}


def test_stored_outputs_are_not_believed():
    nb = student_copy(TEACHER_04)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 1
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "correct\n"}]
    assert score(nb, TEACHER_04).earned == 0


# Slow: it waits out its 5-s time limit (two Pythons start first: room for a busy machine), on one worker.
@pytest.mark.slow
def test_a_notebook_that_hangs_scores_what_ran_before():
    loop = insert_before("04_causal_check", code_cell("while True:\n    pass"))
    result = score(tampered(loop), TEACHER_04, timeout=5)
    assert result.earned == POINTS_04["04_my_softmax_check"]
    assert result.failed == {"04_causal_check": "did not run: the notebook ran longer than the time limit (5 s)"}


def test_a_notebook_that_exits_scores_what_ran_before():
    leave = [_Cell(f"answer_{n} = {n}") for n in range(3)] + [_Cell("raise ValueError('mine')"), _Cell("", "a"),
                                                                _Cell("import os\nos._exit(3)"), _Cell("", "b")]
    assert _run(leave, 60) == ({"a": None}, "the notebook stopped the grader (exit code 3)")
    result = score(tampered(insert_before("04_causal_check", code_cell("raise SystemExit(0)"))), TEACHER_04)
    assert result.earned == result.possible, "an error in a cell of the learner's is that cell's only"


def test_a_notebook_that_writes_a_line_past_the_limit_to_the_graders_channel_scores_what_ran_before():
    # a cell writes past the grader's line limit straight to the channel: the grader stops reading, not its memory
    flood = insert_before("04_causal_check", code_cell(
        "import os\nos.write(1, b'x' * 1024)\nfor _ in range(60):\n    os.write(1, b'x' * 1_000_000)"))
    result = score(tampered(flood), TEACHER_04)
    assert result.earned == POINTS_04["04_my_softmax_check"]
    assert result.failed == {"04_causal_check": "did not run: the notebook wrote a line of more than 50,000,000 "
                                                "characters to the grader's channel (far larger than any answer)"}


@pytest.mark.parametrize("call, error, start", [
    (lambda: score({"cells": []}, TEACHER_04), NotebookError, "score: nb "),
    (lambda: score(TEACHER_04, {**TEACHER_04, "metadata": None}), NotebookError, "score: teacher "),
    (lambda: score(TEACHER_04, TEACHER_04, timeout=0), ValueError, "score: timeout "),
    (lambda: score(TEACHER_04, TEACHER_04, timeout=math.nan), ValueError, "score: timeout "),
    (lambda: score(TEACHER_04, TEACHER_04, timeout=10**400), ValueError, "score: timeout "),
    (lambda: score(TEACHER_04, {**TEACHER_04, "cells": []}), NotebookError, "score: the teacher's notebook"),
    (lambda: score(TEACHER, json.loads(json.dumps(TEACHER).replace('"points": 1', '"points": "1"'))),
     NotebookError, "score: teacher cell 0 has points"),
    (lambda: score(TEACHER, json.loads(json.dumps(TEACHER).replace('"points": 1', '"points": NaN'))),
     NotebookError, "score: teacher cell 0 has points"),
    (lambda: tampering([], TEACHER_04), NotebookError, "tampering: nb "),
    (lambda: tampering(TEACHER_04, "teacher"), NotebookError, "tampering: teacher "),
    (lambda: read_notebook(3), TypeError, "read_notebook: path "),
    (lambda: read_notebook(None), TypeError, "read_notebook: path "),
    (lambda: student_copy(None), TypeError, "student_copy: nb "),
    (lambda: student_copy({"cells": [{**CELL, "metadata": {"nbgrader": []}}]}), NotebookError, "student_copy: nb "),
    (lambda: write_student_copies(ROOT / "no-such-folder", ROOT / "x"), NotebookError, "write_student_copies: source"),
    (lambda: write_student_copies(ROOT / "notebooks" / "exercises", 3), TypeError, "write_student_copies: out "),
    (lambda: write_student_copies(None, "x"), TypeError, "write_student_copies: source "),
    (lambda: self_check(4, {}), TypeError, "self_check: exercise "),
    (lambda: self_check("99_no_such_exercise", {}), ValueError, "self_check: exercise is '99_no_such_exercise'; "
                                                                 "it must be one of 00a_attention_on_paper, "),
    (lambda: self_check("04_softmax_and_masks", [("my_softmax", softmax)]), TypeError, "self_check: namespace "),
    (lambda: self_checks(ROOT / "no-such-folder"), NotebookError, "self_checks: source "),
    (lambda: self_checks(ROOT / "tests"), NotebookError, "self_checks: no exercise notebook"),
    (lambda: write_self_checks(ROOT / "notebooks" / "exercises", 3), TypeError, "write_self_checks: out "),
])
def test_public_functions_check_their_arguments(call, error, start):
    named = refused(start.split(":")[0], call, error)
    assert type(named) is error and str(named).startswith(start)


def test_a_notebook_nested_too_deeply_is_refused_whatever_reads_it():
    for call in (lambda: score(DEEP, TEACHER), lambda: tampering(TEACHER, DEEP), lambda: student_copy(DEEP)):
        with pytest.raises(NotebookError, match=r"^\w+: \w+ nests lists and objects more than 100 deep"):
            call()
    cyclic = copy.deepcopy(NOTEBOOK)
    cyclic["metadata"]["self"] = cyclic  # a loop is as deep as it goes
    with pytest.raises(NotebookError, match=r"^student_copy: nb nests"):
        student_copy(cyclic)
    shared = {"a": [1]}
    wide = cells(*[{**CELL, "metadata": {"x": shared}} for _ in range(5000)])  # one dict in many cells: fine
    assert len(student_copy(wide)["cells"]) == 5000


def test_nothing_is_changed_by_a_call():
    nb = {"cells": [dict(CELL), dict(TEACHER["cells"][0])], "metadata": {"celltoolbar": "x"}}
    for call in (student_copy, lambda nb: tampering({**nb, "nbformat": 4}, TEACHER),
                 lambda nb: check_close("x", nb["cells"], nb["cells"])):
        assert_no_mutation(call, nb)
    got, expected = [[1.0, 2.0]], [[1.0, 2.0]]
    assert_no_mutation(check_close, "q", got, expected)


# === Files that are not notebooks: refused in one line, never waited on ===


def read_in_time(path, seconds=20):
    """read_notebook(path) in a thread: its error, or a failure if it is still waiting after ``seconds``."""
    outcome = []

    def read():
        try:
            read_notebook(path)
        except Exception as error:  # noqa: BLE001
            outcome.append(error)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), f"read_notebook({path}) is still waiting after {seconds} s"
    return outcome[0]


def test_a_fifo_is_refused_at_once_not_waited_on(tmp_path):
    # A FIFO has no end until something writes to it: reading one waited forever (issue 21).
    fifo = tmp_path / "04_softmax_and_masks.ipynb"
    os.mkfifo(fifo)
    error = read_in_time(fifo)
    assert type(error) is NotebookError and str(error) == message("not regular", path=fifo)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_is_refused_at_once(device):
    error = read_in_time(device)
    assert type(error) is NotebookError and str(error) == message("not regular", path=device)


def test_a_file_past_the_size_limit_is_refused(tmp_path):
    path = tmp_path / "big.ipynb"
    with open(path, "wb") as file:
        file.truncate(MAX_NOTEBOOK_BYTES + 1)  # a sparse file: nothing written
    with pytest.raises(NotebookError) as info:
        read_notebook(path)
    assert str(info.value) == message("too big", path=path)
    path.write_bytes(b" " * MAX_NOTEBOOK_BYTES)  # the limit itself is read (and is not JSON)
    with pytest.raises(NotebookError, match=r"^read_notebook: .* is not JSON"):
        read_notebook(path)


def test_json_nested_too_deeply_for_the_parser_or_for_a_notebook(tmp_path):
    path = tmp_path / "deep.ipynb"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(NotebookError) as info:
        read_notebook(path)
    assert str(info.value) == message("JSON too deep", path=path)
    # Deep enough to copy or write with recursion (it used to end in a RecursionError's traceback),
    # not so deep that the JSON parser refuses it.
    path.write_text('{"nbformat": 4, "metadata": ' + '{"a": ' * 900 + "1" + "}" * 900 + ', "cells": []}')
    with pytest.raises(NotebookError) as info:
        read_notebook(path)
    assert str(info.value) == message("too deep", func="read_notebook", name=path)


def test_a_path_too_long_or_unprintable_is_shown_cut_short(tmp_path):
    for path in (tmp_path / ("x" * 200) / "a.ipynb", tmp_path / "a\nb.ipynb"):
        error = refused("read_notebook", lambda: read_notebook(path))
        assert str(path) not in str(error)


def test_a_check_close_patched_in_the_notebooks_process_does_not_reach_the_checks():
    teacher = read_notebook(ROOT / "notebooks" / "exercises" / "04_softmax_and_masks.ipynb")
    nb = copy.deepcopy(teacher)
    for cell in nb["cells"]:  # wrong answers: every check fails, unless the patch reached it
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = source(cell).split("(")[0] + "(*args):\n    return [0.0]\n"
    patch = ("import mha_lists.tools.exercises as grader\n"
             "grader.check_close.__code__ = (lambda name, got, expected, tol=1e-9: None).__code__")
    first = next(n for n, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade"))
    nb["cells"].insert(first, code_cell(patch))
    result = score(nb, teacher, timeout=60)
    assert result.earned == 0 and all(why.startswith("CheckFailed: ") for why in result.failed.values())


# === The command line ===


def run(*args, timeout=None):
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout)


# === The self-check: every visible check again in the student's notebook, a total, what to hand in ===


def test_the_package_holds_the_self_checks_of_the_exercise_notebooks_as_they_are(tmp_path):
    shipped = json.loads(SELF_CHECKS.read_text(encoding="utf-8"))
    assert shipped == self_checks(ROOT / "notebooks" / "exercises"), \
        "an exercise notebook changed: run python -m mha_lists.tools.exercises self-checks"
    assert list(shipped) == [p.stem for p in EXERCISES]
    text = json.dumps(shipped)  # what every student's kernel holds: no solution, no hidden test
    assert "SOLUTION" not in text and "HIDDEN" not in text and "hidden_seed" not in text and "without(" not in text
    result = run("self-checks", "--out", str(tmp_path / "checks.json"))
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads((tmp_path / "checks.json").read_text(encoding="utf-8")) == shipped


def answers_of(nb: dict) -> dict:
    """The namespace a student's kernel holds after running every cell but the checks and the self-check."""
    namespace = {"__name__": "__main__"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and not (nbgrader(cell) or {}).get("grade") and "self_check(" not in source(cell):
            with contextlib.suppress(NotImplementedError), contextlib.redirect_stdout(io.StringIO()):
                exec(source(cell), namespace)
    return namespace


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_the_self_check_gives_the_solutions_every_point_and_the_student_copy_none(path, capsys):
    teacher = load(path)
    points = [nbgrader(chk)["points"] for _, chk in exercise_pairs(teacher)]
    full = self_check(path.stem, answers_of(teacher))
    assert (full.earned, full.possible) == (sum(points), sum(points))
    assert [(p, why) for _, p, why in full.tasks] == [(p, "") for p in points]
    empty = self_check(path.stem, answers_of(student_copy(teacher)))
    assert (empty.earned, empty.possible) == (0, sum(points))
    assert {why for *_, why in empty.tasks} == {"not written yet: your function still raises NotImplementedError"}
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2:] == [f"Total: 0 of {sum(points)} points on these checks; grading runs them again, with "
                            "hidden ones on other inputs.",
                            f"To hand in: save (Ctrl+S), then hand in this notebook's file, {path.name} (in "
                            "JupyterLite: File > Download; the name the browser gives it is fine)."]


def test_the_self_check_says_why_each_task_earned_nothing(capsys):
    answers = answers_of(load(ROOT / "notebooks" / "exercises" / "04_softmax_and_masks.ipynb"))
    answers["my_softmax"] = lambda row: [math.exp(s) for s in row]  # forgets to divide by the total
    del answers["causal_weights"]  # its cell not run yet
    result = self_check("04_softmax_and_masks", answers)
    (_, _, wrong), (_, _, missing) = result.tasks
    assert wrong.startswith("my_softmax([1.0, 2.0, 3.0])[0] is off by ") and "the tolerance is 1e-09" in wrong
    assert missing == "causal_weights is not defined: run the cell that defines it, then this one again"
    answers["my_softmax"] = lambda row: row.sort()  # an answer that raises: its error's first line
    answers["causal_weights"] = lambda scores: [[1 / 0]]
    result = self_check("04_softmax_and_masks", answers)
    assert [why for *_, why in result.tasks] == ["my_softmax([1.0, 2.0, 3.0]) should be a list of 3 numbers, but "
                                                 "it is NoneType", "ZeroDivisionError: division by zero"]
    printed = capsys.readouterr().out
    assert "  Exercise 1 — your own softmax: 0 of 2 points; my_softmax([1.0, 2.0, 3.0])[0] is off by" in printed


def test_the_self_check_reads_the_namespace_and_checks_the_handed_out_example():
    answers = answers_of(load(ROOT / "notebooks" / "exercises" / "04_softmax_and_masks.ipynb"))
    answers["x"], answers["trace"] = [[0.0]], None  # the learner's edits to the example: the checks keep theirs
    before = dict(answers)
    result = self_check("04_softmax_and_masks", answers)
    assert result.earned == result.possible == 4
    assert answers == before and all(answers[k] is before[k] for k in before)


def test_student_copies_command_writes_one_copy_per_notebook(tmp_path):
    result = run("student-copies", str(tmp_path / "out"))
    assert result.returncode == 0 and result.stderr == ""
    written = sorted((tmp_path / "out").glob("*.ipynb"))
    assert [p.name for p in written] == [p.name for p in EXERCISES]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "HIDDEN" not in text and "raise NotImplementedError()" in text
        assert read_notebook(path) == student_copy(load(ROOT / "notebooks" / "exercises" / path.name))


def test_the_default_student_copies_folder_is_git_ignored():
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert "/student-copies/" in ignored
    with pytest.raises(ValueError, match="must not be the source folder"):
        write_student_copies(EXERCISES[0].parent, EXERCISES[0].parent)
    with pytest.raises(ValueError, match="where nbval would run the student copies"):
        write_student_copies(EXERCISES[0].parent, ROOT / "notebooks" / "students")
    assert not (ROOT / "notebooks" / "students").exists()


def test_score_command_grades_each_file_and_totals(tmp_path):
    alice = tmp_path / "alice"
    alice.mkdir()
    (alice / "04_softmax_and_masks.ipynb").write_text(json.dumps(submitted(TEACHER_04)), encoding="utf-8")
    (alice / "03_scores.ipynb").write_text(json.dumps(student_copy(load(named("03")))), encoding="utf-8")
    result = run("score", str(alice / "04_softmax_and_masks.ipynb"), str(alice / "03_scores.ipynb"))
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == f"{alice / '04_softmax_and_masks.ipynb'}: 4/4 points"
    assert lines[1] == f"{alice / '03_scores.ipynb'}: 0/3 points"
    assert lines[2].startswith("  03_score_check: 0 points, not answered") and lines[-2] == "total: 4/7 points"
    # Without the teacher's term the hidden inputs are the repository's: said loudly, at the end.
    assert lines[-1].startswith("WARNING: graded without --term, so the hidden tests drew their inputs from the "
                                "seeds written in the teacher's notebooks")
    termed = run("score", str(alice / "04_softmax_and_masks.ipynb"), "--term", "ELM-902")
    assert termed.stdout.splitlines() == [f"{alice / '04_softmax_and_masks.ipynb'}: 4/4 points"]


MALFORMED = {  # file name -> (what it holds, the message's key, its fields beyond the path)
    "not-json.ipynb": ("{cells: oops", "not JSON",
                       {"error": "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"}),
    "a-list.ipynb": ("[1, 2]", "not an object", {"type": "list"}),
    "old.ipynb": ('{"nbformat": 3, "worksheets": []}', "nbformat", {"value": 3}),
    "no-metadata.ipynb": ('{"nbformat": 4, "cells": []}', "no metadata", {}),
    "bad-cell.ipynb": ('{"nbformat": 4, "metadata": {}, "cells": [{"cell_type": "code"}]}', "no source", {"n": 0}),
    "no-cell-metadata.ipynb": ('{"nbformat": 4, "metadata": {}, "cells": [{"cell_type": "code", "source": ""}]}',
                               "no cell metadata", {"n": 0}),
    "deep.ipynb": ('{"nbformat": 4, "cells": [], "metadata": ' + '{"a": ' * 500 + "1" + "}" * 500 + "}",
                   "too deep", {}),
    "unknown.ipynb": (None, "no exercise", {}),
    "folder.ipynb": ("folder", "folder", {}),
    "fifo.ipynb": ("fifo", "not regular", {}),
    "missing.ipynb": ("missing", "missing", {}),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_score_says_in_one_line_why_a_file_cannot_be_graded_and_exits_2(name, tmp_path):
    text, key, fields = MALFORMED[name]
    path = tmp_path / name
    if text == "folder":
        path.mkdir()
    elif text == "fifo":
        os.mkfifo(path)
    elif text is None:  # a notebook, but none of the exercises' cells
        path.write_text(json.dumps({**TEACHER_04, "cells": TEACHER_04["cells"][:1]}), encoding="utf-8")
    elif text != "missing":
        path.write_text(text, encoding="utf-8")
    result = commands.completed(exercises_module.main, ["score", str(path)])
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    expected = message(key, **{"func": "read_notebook", "name": path, "path": path, **fields})
    expected = expected.removeprefix("read_notebook: ").removeprefix("exercise_of: ")
    if not expected.startswith(str(path)):
        expected = f"{path}: {expected}"
    assert result.stderr == f"python -m mha_lists.tools.exercises: error: {expected}\n"


def test_a_teachers_notebook_that_is_a_fifo_or_a_folder_is_refused(tmp_path):
    teachers = tmp_path / "teachers"
    teachers.mkdir()
    os.mkfifo(teachers / "04_softmax_and_masks.ipynb")
    (teachers / "03_scores.ipynb").mkdir()
    for name, key in (("04_softmax_and_masks.ipynb", "not regular"), ("03_scores.ipynb", "folder")):
        (tmp_path / name).write_text(json.dumps(student_copy(TEACHER_04)), encoding="utf-8")
        result = run("score", str(tmp_path / name), "--source", str(teachers), timeout=60)
        assert result.returncode == 2 and result.stdout == ""
        assert message(key, path=teachers / name).removeprefix("read_notebook: ") in result.stderr


def test_student_copies_refuse_a_fifo_to_read_or_to_write_over(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(named("04"), source)
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / named("04").name)  # writing into it would wait for a reader
    result = run("student-copies", str(out), "--source", str(source), timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert message("target not regular", path=out / named("04").name) in result.stderr
    os.mkfifo(source / "05_fifo.ipynb")
    result = run("student-copies", str(tmp_path / "elsewhere"), "--source", str(source), timeout=60)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert message("copy failed", name="05_fifo.ipynb", error=message("not regular", path=source / "05_fifo.ipynb")) \
        in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_score_grades_the_good_files_beside_a_bad_one(tmp_path):
    good = tmp_path / "04_softmax_and_masks.ipynb"
    good.write_text(json.dumps(submitted(TEACHER_04)), encoding="utf-8")
    result = run("score", str(tmp_path / "gone.ipynb"), str(good))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert message("missing", path=tmp_path / "gone.ipynb").removeprefix("read_notebook: ") in result.stderr
    assert result.stdout.splitlines()[:2] == [f"{good}: 4/4 points", "total: 4/4 points (1 file not graded)"]


@pytest.mark.parametrize("args, expected", [
    ((), "the following arguments are required: command"),  # argparse's words
    (("student-copies",), "the following arguments are required: outdir"),
    (("score",), "the following arguments are required: notebooks"),
    (("student-copies", "x", "--source", "no/such/folder"),
     message("source folder", path="no/such/folder").removeprefix("write_student_copies: ")),
    (("student-copies", "README.md"), message("out a file", out="README.md").removeprefix("write_student_copies: ")),
    (("score", "x.ipynb", "--timeout", "0"), "argument --timeout: " + message("seconds range", value="0")),
    (("score", "x.ipynb", "--timeout", "nan"), "argument --timeout: " + message("seconds range", value="nan")),
    (("score", "x.ipynb", "--timeout", "soon"), "argument --timeout: " + message("seconds", value="'soon'")),
    (("score", "x.ipynb", "--timeout", "9" * 5000), "argument --timeout: '999999999999999"),  # cut short
    (("score", "x.ipynb", "--source", "no/such/folder"), message("--source", path="no/such/folder")),
    (("score", "x.ipynb", "--source", "x" * 5000), message("--source", path="'" + "x" * 115 + " ...")),
    (("score", "x" * 5000 + ".ipynb"), message("cannot read", path="'" + "x" * 115 + " ...", error="File name too long")
     .removeprefix("read_notebook: ")),
    (("student-copies", "x" * 5000), message("cannot use", path="'" + "x" * 115 + " ...", why="File name too long")
     .removeprefix("write_student_copies: ")),
    (("student-copies", "/proc/nope/x"), message("cannot write", path="/proc/nope", why="No such file or directory")),
])
def test_bad_arguments_give_one_line_and_exit_code_2(args, expected, monkeypatch):
    monkeypatch.chdir(ROOT)  # the relative paths above are the repository's
    result = commands.completed(exercises_module.main, args)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and expected in result.stderr and len(result.stderr) < 400


def test_the_real_command_line_says_the_same_line():
    real, in_process = run("score"), commands.completed(exercises_module.main, ["score"])
    assert (real.returncode, real.stdout, real.stderr) == (2, "", in_process.stderr)
    assert in_process.stderr.startswith("python -m mha_lists.tools.exercises score: error: ")


def test_student_copies_of_a_malformed_source_give_one_line_and_exit_2(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    (source / "01_broken.ipynb").write_text("not json", encoding="utf-8")
    result = run("student-copies", str(tmp_path / "out"), "--source", str(source))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "01_broken.ipynb" in result.stderr and "is not JSON" in result.stderr
    assert not (tmp_path / "out").exists(), "nothing is written when a notebook cannot be read"


# === check_close's messages ===


@pytest.mark.parametrize("got, key, fields", [
    (None, "should be", dict(path="Q", what="a 2x3 matrix", type="NoneType")),
    ([[1.0, 2.0, 3.0]], "parts", dict(path="Q", n=1, parts="rows", m=2, what="a 2x3 matrix")),
    ([[1.0, 2.0, 3.0], [4.0, 5.0]], "parts", dict(path="Q[1]", n=2, parts="entries", m=3, what="a list of 3 numbers")),
    ([[1.0, 2.0, 3.0], [4.0, 5.0, "6"]], "should be a number", dict(path="Q[1][2]", type="str", value="'6'")),
    ([[1.0, 2.0, 3.0], [4.0, float("nan"), 6.0]], "nan", dict(path="Q[1][1]")),
    ([[1.0, 2.0, 3.0], [4.0, 5.25, 6.0]], "off by", dict(path="Q[1][1]", size="0.25", how="too large", tol="1e-09")),
    ([[1.0, 2.0, 3.0], [4.0, -10**400, 6.0]], "int too large", dict(path="Q[1][1]", int="an int of 401 digits")),
    ([[1.0, 2.0, 3.0], [4.0, 5.0, math.inf]], "off by",
     dict(path="Q[1][2]", size="infinitely much", how="too large", tol="1e-09")),
])
def test_check_close_says_what_is_wrong_but_not_the_answer(got, key, fields):
    expected = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    with pytest.raises(CheckFailed) as info:
        check_close("Q", got, expected)
    assert str(info.value) == message(key, **fields)
    assert "5.0" not in str(info.value) and "6.0" not in str(info.value), "the expected value is not shown"
    assert isinstance(info.value, AssertionError)


@pytest.mark.parametrize("expected", [None, [], [[]], "1", SELF, {"a": 1}, True, [[[[[1.0]]]]]])
def test_check_close_wants_an_expected_answer_it_can_compare(expected):
    with pytest.raises(TypeError, match=r"^check_close: expected must be a number, a list of numbers"):
        check_close("x", [1.0], expected)


@pytest.mark.parametrize("expected", [
    [[1.0, 2.0], [3.0]],  # a ragged matrix
    [1.0, [2.0]],  # a number beside a list
    [[[1.0]], [[1.0, 2.0]]],  # matrices of two shapes
    [[1.0], [[2.0]]],
])
def test_check_close_refuses_a_ragged_expected(expected):
    # It used to pass a learner's answer equal to it, and describe it by its first row.
    for got in (expected, [[0.0]]):
        with pytest.raises(ValueError, match=r"^check_close: expected is ragged: "):
            check_close("x", got, expected)


@pytest.mark.parametrize("call, error, start", [
    (lambda: check_close(3, 1.0, 1.0), TypeError, "check_close: name "),
    (lambda: check_close("x", 1.0, 1.0, -1e-9), ValueError, "check_close: tol "),
    (lambda: check_close("x", 1.0, 1.0, math.nan), ValueError, "check_close: tol "),
    (lambda: check_close("x", 1.0, 1.0, math.inf), ValueError, "check_close: tol "),
    (lambda: check_close("x", 1.0, 1.0, "0"), ValueError, "check_close: tol "),
    (lambda: check_close("x", 1.0, 10**400), ValueError, "check_close: expected "),
    (lambda: check_close("x", 1.0, [math.inf, -math.nan]), ValueError, "check_close: expected "),
])
def test_check_close_checks_its_own_arguments(call, error, start):
    named = refused("check_close", call, error)
    assert type(named) is error and str(named).startswith(start)


def test_check_close_still_judges_any_got():
    for got in (None, SELF, "1", {"a": 1}, [[True]], 10**400, [[1.0, 2.0]], [[[1.0]]]):
        with pytest.raises(CheckFailed):
            check_close("x", got, [[1.0]])


def test_check_close_allows_the_tolerance_and_no_more(capsys):
    check_close("s", 1.0 + 1e-10, 1.0)
    assert capsys.readouterr().out == "s: correct (within 1e-09)\n"
    with pytest.raises(CheckFailed, match="too small"):
        check_close("s", 1.0 - 1e-8, 1.0)
    check_close("masked", [float("-inf"), 1.0], [float("-inf"), 1.0])
    with pytest.raises(CheckFailed, match=r"^masked\[0\] is off by infinitely much"):
        check_close("masked", [0.0, 1.0], [float("-inf"), 1.0])
    with pytest.raises(CheckFailed, match=r"^n is off by 1 "):
        check_close("n", 3, 4, tol=0)
    check_close("big", 1e308, 1e308 * (1 + 1e-12))  # close, near the top of float's range
    with pytest.raises(CheckFailed, match=r"^big is off by infinitely much"):
        check_close("big", -1e308, 1e308)  # got - expected overflows: off by more than any float
    check_close("list of matrices", [[[1.0]], [[2.0]]], [[[1.0]], [[2.0]]])
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == "list of matrices: correct (2 matrices, every entry within 1e-09)"




# === Hand-ins under any name, a class's folder, a CSV ===


def test_a_submission_is_matched_to_its_exercise_by_its_cells_not_its_name(tmp_path):
    hand_in = tmp_path / "hand-in"
    hand_in.mkdir()
    # what a browser's File > Download saves, twice; a file renamed by hand; one of another exercise
    (hand_in / "exercises_04_softmax_and_masks.ipynb").write_text(json.dumps(submitted(TEACHER_04)), encoding="utf-8")
    (hand_in / "exercises_04_softmax_and_masks (1).ipynb").write_text(json.dumps(student_copy(TEACHER_04)),
                                                                      encoding="utf-8")
    (hand_in / "05_weighted_sum.ipynb").write_text(json.dumps(submitted(TEACHER_04)), encoding="utf-8")  # it is 04
    (hand_in / "notes.ipynb").write_text(json.dumps({**TEACHER_04, "cells": TEACHER_04["cells"][:1]}), encoding="utf-8")
    table = tmp_path / "class.csv"
    result = run("score", str(hand_in), "--csv", str(table))
    assert result.returncode == 2  # notes.ipynb holds no exercise
    lines = result.stdout.splitlines()
    assert f"{hand_in / '05_weighted_sum.ipynb'} (exercise 04_softmax_and_masks.ipynb): 4/4 points" in lines
    assert f"{hand_in / 'exercises_04_softmax_and_masks.ipynb'} (exercise 04_softmax_and_masks.ipynb): 4/4 points" in lines
    assert f"{hand_in / 'exercises_04_softmax_and_masks (1).ipynb'} (exercise 04_softmax_and_masks.ipynb): 0/4 points" \
        in lines
    assert "total: 8/12 points (1 file not graded)" in lines
    assert result.stderr == (f"python -m mha_lists.tools.exercises: error: {hand_in / 'notes.ipynb'}: "
                             + message("no exercise").removeprefix("exercise_of: ") + "\n")
    with open(table, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["file", "exercise", "task", "points", "possible", "reason"]
    checks = [n for n, g in exercises_module._graded(TEACHER_04)]
    assert len(rows) == 1 + 3 * len(checks) + 1  # a row per task of each graded file, one for the file not graded
    by_file = {}
    for file, exercise, task, points, possible, reason in rows[1:]:
        by_file.setdefault(pathlib.Path(file).name, []).append((exercise, task, points, possible, reason))
    assert all(points == possible and not reason for _, _, points, possible, reason in by_file["05_weighted_sum.ipynb"])
    assert all(points == "0" and reason.startswith("not answered")
               for _, _, points, _, reason in by_file["exercises_04_softmax_and_masks (1).ipynb"])
    assert by_file["notes.ipynb"] == [("", "", "0", "", "not graded: " + lines_of(result.stderr)[0].split("error: ", 1)[1])]


def lines_of(text):
    return text.splitlines()


def test_a_notebook_with_two_exercises_in_it_is_not_guessed(tmp_path):
    both = {**TEACHER_04, "cells": TEACHER_04["cells"] + load(named("03"))["cells"]}
    teachers = {"04.ipynb": TEACHER_04, "03.ipynb": load(named("03"))}
    counts = {name: len(set(exercises_module._positions(both)) & set(exercises_module._positions(nb)))
              for name, nb in teachers.items()}
    if counts["04.ipynb"] == counts["03.ipynb"]:
        with pytest.raises(NotebookError, match="^exercise_of: it holds as many cells of"):
            exercises_module.exercise_of(both, teachers)
    else:  # the one with more of its cells in it
        assert exercises_module.exercise_of(both, teachers) == max(counts, key=counts.get)


def test_csv_must_go_into_a_folder_that_exists(tmp_path):
    (tmp_path / "a.ipynb").write_text(json.dumps(submitted(TEACHER_04)), encoding="utf-8")
    for target, why in ((tmp_path, "is a folder"), (tmp_path / "no" / "such.csv", "its folder does not exist")):
        result = run("score", str(tmp_path / "a.ipynb"), "--csv", str(target))
        assert result.returncode == 2 and result.stdout == "" and why in result.stderr


# === Hidden tests drawn from the teacher's term ===


def test_hidden_seeds_come_from_the_term_when_there_is_one(monkeypatch):
    monkeypatch.delenv("MHA_LISTS_TERM", raising=False)
    assert exercises_module.hidden_seed("04_my_softmax_check:4404", 4404) == 4404  # the notebook's own, public
    monkeypatch.setenv("MHA_LISTS_TERM", "ELM-902")
    a = exercises_module.hidden_seed("04_my_softmax_check:4404", 4404)
    assert a != 4404 and a == exercises_module.hidden_seed("04_my_softmax_check:4404", 4404)  # the same every run
    assert a != exercises_module.hidden_seed("04_causal_check:90125", 90125)  # each task its own
    monkeypatch.setenv("MHA_LISTS_TERM", "OAK-417")
    assert exercises_module.hidden_seed("04_my_softmax_check:4404", 4404) != a  # another term, other inputs
    monkeypatch.setenv("MHA_LISTS_TERM", " ")
    with pytest.raises(ValueError, match="^hidden_seed: the MHA_LISTS_TERM variable must be 1-200 printable"):
        exercises_module.hidden_seed("x", 1)


def test_every_hidden_test_draws_its_inputs_through_hidden_seed():
    for path in sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb")):
        for cell in load(path)["cells"]:
            source = "".join(cell["source"])
            if "### BEGIN HIDDEN TESTS" in source:
                hidden = source.split("### BEGIN HIDDEN TESTS", 1)[1].split("### END HIDDEN TESTS", 1)[0]
                assert not re.search(r"random\.Random\(\d+\)|\bseed=\d+", hidden), (path.name, hidden)


def test_the_term_reaches_the_checks_and_never_the_students_code(tmp_path, monkeypatch):
    monkeypatch.setenv("MHA_LISTS_TERM", "exported-for-nbgrader")  # what a teacher may have left in the shell
    spy = submitted(TEACHER_04)
    for cell in spy["cells"]:
        if _grade_id(cell) == "04_my_softmax":  # the honest answer, if the term is nowhere in sight
            cell["source"] = ("import os\ndef my_softmax(row):\n    assert 'MHA_LISTS_TERM' not in os.environ\n"
                              "    top = max(row)\n    exps = [math.exp(s - top) for s in row]\n"
                              "    return [e / sum(exps) for e in exps]\n")
    result = score(spy, TEACHER_04, term="ELM-902")
    assert result.earned == result.possible, result.failed
    (tmp_path / "spy.ipynb").write_text(json.dumps(spy), encoding="utf-8")
    ran = run("score", str(tmp_path / "spy.ipynb"), "--term", "ELM-902")
    assert ran.returncode == 0 and ran.stdout.startswith(f"{tmp_path / 'spy.ipynb'} (exercise 04_softmax_and_masks.ipynb): 4/4")
    refused_term = run("score", str(tmp_path / "spy.ipynb"), "--term", " ")
    assert refused_term.returncode == 2 and "the term must be 1-200 printable characters" in refused_term.stderr


def _grade_id(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


# === An answer must be the student's own, not the library's function it was asked to write ===


def test_an_answer_that_calls_the_librarys_function_earns_nothing_for_that_task():
    cheat = submitted(TEACHER_04)
    for cell in cheat["cells"]:
        if _grade_id(cell) == "04_my_softmax":
            cell["source"] = "def my_softmax(row):\n    return softmax(row)\n"  # passes every visible check
    result = score(cheat, TEACHER_04)
    assert result.failed == {"04_my_softmax_check": "RuntimeError: calls the library's softmax; the exercise asks "
                                                    "for your own"}
    assert result.earned == result.possible - 2


# Found by red-teaming: each of these called the library's unchecked twin of the function the exercise asks
# for (the arithmetic it runs once its arguments are checked), and earned full points.
TWIN_ANSWERS = [
    ("04", "04_my_softmax", "from mha_lists.core.softmax_and_masks import softmax_of_rows\n"
     "def my_softmax(row):\n    return softmax_of_rows([row])[0]\n", "04_my_softmax_check", "softmax_of_rows"),
    ("06", "06_concat", "from mha_lists.core.matrix import joined\n"
     "def concat(head_outputs):\n    return joined(head_outputs)\n", "06_concat_check", "joined"),
    ("07", "07_my_attention", "import math\nfrom mha_lists.core.attention import trace_layer\n"
     "def my_attention(x, weights):\n"
     "    return trace_layer(x, weights, None, None, 1 / math.sqrt(len(weights.W_Q[0][0]))).output\n",
     "07_my_attention_check", "one_head"),
    ("16", "16_softmax_backward", "from mha_lists.core.gradients import softmax_rows_backward\n"
     "def my_softmax_backward(p, dp):\n    return softmax_rows_backward([p], [dp])[0]\n",
     "16_softmax_backward_check", "softmax_rows_backward"),
    ("17", "17_ce_grad", "from mha_lists.teaching.model import loss_of\n"
     "def cross_entropy_gradient(z, t):\n    return loss_of([z], [t])[1][0]\n", "17_ce_grad_check", "loss_of"),
    ("17", "17_adam", "from mha_lists.teaching.model import AdamState, adam_update\n"
     "def my_adam_step(params, grads, m, v, t, lr):\n"
     "    new, state = adam_update(params, grads, AdamState(t - 1, m, v), lr=lr)\n"
     "    return new, state.m, state.v\n", "17_adam_check", "adam_update"),
    # Found by a later red team: explained_weights's table of weights is softmax's, step by step.
    ("04", "04_my_softmax", "from mha_lists.teaching.display import explained_weights\n"
     "def my_softmax(row):\n    return explained_weights([row], ['q'], ['k'] * len(row)).M[0]\n",
     "04_my_softmax_check", "explained_weights"),
]


@pytest.mark.parametrize("exercise, solution, answer, check, twin", TWIN_ANSWERS, ids=[row[1] for row in TWIN_ANSWERS])
def test_an_answer_that_calls_the_librarys_unchecked_twin_earns_nothing_for_that_task(exercise, solution, answer,
                                                                                      check, twin):
    teacher = load(named(exercise))
    cheat = submitted(teacher)
    for cell in cheat["cells"]:
        if _grade_id(cell) == solution:
            cell["source"] = answer
    result = score(cheat, teacher)
    assert result.failed == {check: f"RuntimeError: calls the library's {twin}; the exercise asks for your own"}


def test_without_sets_functions_aside_and_always_puts_them_back():
    from mha_lists import softmax, softmax_rows
    with pytest.raises(RuntimeError, match="^calls the library's softmax_rows; the exercise asks for your own$"):
        with exercises_module.without("softmax", "softmax_rows"):
            assert exercises_module.FORBIDDEN == ["softmax", "core.softmax_and_masks.softmax_of_rows",
                                                  "teaching.display.explained_weights", "softmax_rows"]
            softmax_rows([[0.0]])
    assert softmax([0.0]) == [1.0] and softmax_rows([[0.0]]) == [[1.0]] and exercises_module.FORBIDDEN == []
    for bad in ("no_such_function", "teaching.nowhere.f", "VOCAB"):
        with pytest.raises(ValueError, match="^without: .* is not a function of mha_lists that can be set aside$"):
            with exercises_module.without(bad):
                pass
    assert exercises_module.FORBIDDEN == []


def test_without_puts_back_each_functions_own_code_when_blocks_nest_or_threads_overlap():
    # Found by red-teaming: thread A entered, thread B entered (saving A's trap as the "original"), A left, B
    # left, and the library's softmax raised for good.
    import threading
    from mha_lists import softmax
    own = softmax.__code__
    with exercises_module.without("softmax"):
        with exercises_module.without("softmax"):
            pass
        with pytest.raises(RuntimeError):
            softmax([0.0])  # the inner block's end leaves the outer block's trap in place
    inside, leave, first_done = threading.Event(), threading.Event(), threading.Event()

    def block(first: bool):
        with exercises_module.without("softmax"):
            if first:
                inside.set()
                leave.wait(5)
            else:
                first_done.wait(5)  # leaves only after the first block has left

    threads = [threading.Thread(target=block, args=(True,)), threading.Thread(target=block, args=(False,))]
    threads[0].start()
    inside.wait(5)
    threads[1].start()  # enters while the first block is open: it waits for it
    leave.set()
    threads[0].join(5)
    first_done.set()
    threads[1].join(5)
    assert not any(thread.is_alive() for thread in threads)
    assert softmax.__code__ is own and softmax([0.0]) == [1.0] and exercises_module.FORBIDDEN == []


def test_a_notebook_that_rebinds_the_graders_names_still_cannot_call_the_librarys_function():
    # Found by red-teaming: the learner's process looked up _library_function in this module each time it set
    # functions aside, so an answer cell that rebound it made every trap a no-op, and earned full points.
    cheat = submitted(TEACHER_04)
    for cell in cheat["cells"]:
        if _grade_id(cell) == "04_my_softmax":
            cell["source"] = ("import mha_lists.tools.exercises as E\n"
                              "E._library_function = lambda name: (lambda *args, **kwargs: None)\n"
                              "E.TWINS = {}\n"
                              "def my_softmax(row):\n    return softmax(row)\n")
    result = score(cheat, TEACHER_04)
    assert result.failed == {"04_my_softmax_check": "RuntimeError: calls the library's softmax; the exercise asks "
                                                    "for your own"}


def test_an_answer_far_too_large_earns_nothing_and_costs_no_other_task():
    # Found by red-teaming: an answer of 10**7 floats took 591 MB in the grader and ran into the time limit,
    # which also took the next, correct check's points.
    cheat = submitted(TEACHER_04)
    for cell in cheat["cells"]:
        if _grade_id(cell) == "04_my_softmax":
            cell["source"] = "def my_softmax(row):\n    return [0.0] * 10**7\n"
    result = score(cheat, TEACHER_04)
    assert result.failed == {"04_my_softmax_check": "my_softmax returned more than 1,000,000 lists and numbers"}
    assert result.earned == result.possible - 2


def test_exercise_of_names_a_bad_argument():
    for teachers, error in ((None, TypeError), ({}, TypeError), ([TEACHER_04], TypeError), ({"a.ipynb": "nb"}, NotebookError)):
        with pytest.raises(error, match="^exercise_of: teachers"):
            exercises_module.exercise_of(TEACHER_04, teachers)


# === An answer must not be the teacher's: the learner's process cannot read the teacher's notebooks ===

THEIR_04 = str(named("04"))  # the teacher's notebook, beside the package as a checkout has it
REFUSED = "score refuses this in a graded notebook: "
# The issue's cheat: find the teacher's notebook next to the installed package, run its solution.
RUN_THEIR_SOLUTION = (
    "def my_softmax(row):\n"
    "    import json, math, mha_lists, pathlib\n"
    "    folder = pathlib.Path(mha_lists.__file__).resolve().parents[1] / 'notebooks' / 'exercises'\n"
    "    nb = json.loads((folder / '04_softmax_and_masks.ipynb').read_text())\n"
    "    code = next(''.join(c['source']) for c in nb['cells']\n"
    "                if c['metadata'].get('nbgrader', {}).get('grade_id') == '04_my_softmax')\n"
    "    found = {'math': math}\n"
    "    exec(code, found)\n"
    "    return found['my_softmax'](row)\n")


def with_cell(grade_id, text):
    """The 04 solutions as handed in, the cell ``grade_id`` holding ``text``."""
    nb = submitted(TEACHER_04)
    for cell in nb["cells"]:
        if _grade_id(cell) == grade_id:
            cell["source"] = text
    return nb


def test_an_answer_that_runs_the_teachers_solution_earns_nothing_with_the_reason():
    result = score(with_cell("04_my_softmax", RUN_THEIR_SOLUTION), TEACHER_04)
    theirs = "did not run: score refuses this in a graded notebook: it reads the teacher's notebooks " \
             f"({THEIR_04})"
    # The learner's process ends there: that answer and every later one, the honest ones included.
    assert result.failed == {"04_my_softmax_check": theirs, "04_causal_check": theirs} and result.earned == 0


def test_a_refusal_the_answer_catches_still_earns_nothing():
    # linecache swallows the PermissionError and returns []; the answer then computes honestly.
    caught = ("def my_softmax(row):\n    import linecache, math\n"
              f"    linecache.getlines({THEIR_04!r})\n"
              "    top = max(row)\n    exps = [math.exp(x - top) for x in row]\n"
              "    return [e / math.fsum(exps) for e in exps]\n")
    result = score(with_cell("04_my_softmax", caught), TEACHER_04)
    assert result.failed["04_my_softmax_check"].startswith("did not run: " + REFUSED + "it reads the teacher's "
                                                           "notebooks (")


def test_an_answer_that_catches_another_refusal_earns_nothing_either():
    caught = ("def my_softmax(row):\n    import math\n    try:\n        import ctypes\n    except Exception:\n"
              "        pass\n    top = max(row)\n    exps = [math.exp(x - top) for x in row]\n"
              "    return [e / math.fsum(exps) for e in exps]\n")
    result = score(with_cell("04_my_softmax", caught), TEACHER_04)
    assert result.failed == {"04_my_softmax_check": "PermissionError: " + REFUSED + "it imports ctypes, which can "
                                                                                   "start processes or run C unseen"}
    assert result.earned == result.possible - 2  # the next answer still counts


def test_reading_the_teachers_notebooks_in_a_cell_of_its_own_costs_every_answer():
    cell = code_cell(f"try:\n    text = open({THEIR_04!r}).read()\nexcept OSError:\n    text = ''")
    result = score(tampered(insert_before("04_my_softmax_check", cell)), TEACHER_04)
    assert result.earned == 0 and set(result.failed) == set(POINTS_04)
    assert all(why.startswith("did not run: " + REFUSED + "it reads the teacher's notebooks")
               for why in result.failed.values())


FOLDER = os.path.dirname(THEIR_04)
# Ways to the teacher's notebooks (or to running something that reads them) from the learner's
# process, each as the body of a function an answer would call, and the start of its refusal.
ROUTES = {
    "open": (f"return open({THEIR_04!r}).read()", "it reads the teacher's notebooks"),
    "bytes path": (f"return open({THEIR_04!r}.encode(), 'rb').read()", "it reads the teacher's notebooks"),
    "os.open": (f"import os\nreturn os.read(os.open({THEIR_04!r}, os.O_RDONLY), 100)",
                "it reads the teacher's notebooks"),
    "io.FileIO": (f"import io\nreturn io.FileIO({THEIR_04!r}).read()", "it reads the teacher's notebooks"),
    "a module's loader": (f"import importlib.machinery as m\nreturn m.SourceFileLoader('nb', {THEIR_04!r})"
                          f".get_data({THEIR_04!r})", "it reads the teacher's notebooks"),
    "a path relative to the checkout": (f"import os\nos.chdir({str(ROOT)!r})\n"
                                        f"return open('notebooks/exercises/{named('04').name}').read()",
                                        "it enters a folder that holds the teacher's notebooks"),
    "a relative path, one folder up": (f"return open('../' * 40 + {THEIR_04[1:]!r}).read()",
                                       "it reads the teacher's notebooks"),
    "os.open, .. from a folder": ("import os\nos.mkdir('d')\nreturn os.open('d/../x', os.O_RDONLY | os.O_CREAT)",
                                  "it opens a path with .. in it that is not absolute"),
    "a path with ..": (f"return open({FOLDER + '/../exercises/' + named('04').name!r}).read()",
                       "it reads the teacher's notebooks"),
    "/proc/self/root": (f"return open('/proc/self/root' + {THEIR_04!r}).read()", "it reads the teacher's notebooks"),
    "a new file in their folder": (f"open({FOLDER + '/mine.txt'!r}, 'w').write('x')", "it reads the teacher's notebooks"),
    "chdir into their folder": (f"import os\nos.chdir({FOLDER!r})\nreturn open({named('04').name!r}).read()",
                                "it reads the teacher's notebooks"),
    "listing their folder": (f"import os\nreturn os.listdir({FOLDER!r})", "it reads the teacher's notebooks"),
    "a symbolic link": (f"import os\nos.symlink({THEIR_04!r}, 'link.ipynb')\nreturn open('link.ipynb').read()",
                        "it makes a link (os.symlink)"),
    "a hard link": (f"import os\nos.link({THEIR_04!r}, 'link.ipynb')\nreturn open('link.ipynb').read()",
                    "it makes a link (os.link)"),
    "a folder's descriptor": (f"import os\nfd = os.open({str(ROOT)!r}, os.O_RDONLY)\n"
                              f"return os.read(os.open('notebooks/exercises/{named('04').name}', os.O_RDONLY, "
                              "dir_fd=fd), 100)", "it opens a folder"),
    # A path object converted once to what is opened, and again (differently) to what is checked.
    "a path that changes": ("import os\nclass P(os.PathLike):\n    n = 0\n    def __fspath__(self):\n"
                            f"        P.n += 1\n        return {THEIR_04!r} if P.n == 1 else 'x'\n"
                            "return os.read(os.open(P(), os.O_RDONLY), 100)", "it reads the teacher's notebooks"),
    "pathlib changed": ("import os, pathlib\nn = []\n"
                        f"pathlib.PurePath.__fspath__ = lambda self: 'x' if n.append(1) or len(n) > 1 else {THEIR_04!r}\n"
                        "return os.read(os.open(pathlib.Path('x'), os.O_RDONLY), 100)",
                        "it reads the teacher's notebooks"),
    "os.system": (f"import os\nos.system('cat {THEIR_04} > copy.ipynb')\nreturn open('copy.ipynb').read()",
                  "it starts or signals a process (os.system)"),
    "subprocess": (f"import subprocess\nreturn subprocess.run(['cat', {THEIR_04!r}], capture_output=True).stdout",
                   "it imports _posixsubprocess"),
    "os.posix_spawn": ("import os\nreturn os.posix_spawn('/bin/true', ['true'], {})",
                       "it starts or signals a process (os.posix_spawn)"),
    "os.fork": ("import os\nreturn os.fork()", "it starts or signals a process (os.fork)"),
    "exec": ("import os\nos.execv('/bin/true', ['true'])", "it starts or signals a process (os.exec)"),
    "ctypes": ("import ctypes\nreturn ctypes.CDLL(None).system(b'true')", "it imports ctypes"),
    "cffi": ("import cffi\nreturn cffi.FFI().dlopen(None)", "it imports cffi"),
    "a subinterpreter": ("import _xxsubinterpreters\nreturn _xxsubinterpreters.create()",
                         "it imports _xxsubinterpreters"),
    "the grader's command line": ("import os\nreturn open(f'/proc/{os.getppid()}/cmdline').read()",
                                  "it reads /proc/"),
    "its own memory": ("return open('/proc/self/mem', 'rb').read(1)", "it reads /proc/self/mem"),
    "the garbage collector": ("import gc\nreturn len(gc.get_objects())",
                              "it inspects or traces the interpreter (gc.get_objects)"),
    "a tracer": ("import sys\nsys.settrace(lambda *args: None)", "it inspects or traces the interpreter (sys.settrace)"),
    "the network": ("import socket\nsocket.socket().connect(('127.0.0.1', 9))",
                    "it uses the network (socket.connect)"),
    "a code object by hand": ("return (lambda: 0).__code__.replace(co_consts=(1,))",
                              "it makes a code object by hand (code.__new__)"),
    "C it brings": ("open('mine.cpython-311-x86_64-linux-gnu.so', 'wb').write(b'x')",
                    "it writes a file named as a C extension module"),
    "C renamed into place": ("import os\nopen('mine.txt', 'w').write('x')\nos.rename('mine.txt', 'mine.so')",
                             "it writes a file named as a C extension module"),
    "C from a file of another name": ("import importlib.machinery as m, importlib.util as u\n"
                                      "open('mine.txt', 'wb').write(b'x')\n"
                                      "loader = m.ExtensionFileLoader('mine', 'mine.txt')\n"
                                      "return u.module_from_spec(u.spec_from_file_location('mine', 'mine.txt', "
                                      "loader=loader))", "it loads C from a file not named as an extension module"),
}


def answer_by(body):
    return "\n".join("    " + line for line in body.split("\n"))


# A refused read of the teacher's notebooks costs every later answer too, so each of those routes
# runs in a grading of its own; the others are refused one by one in one grading.
THEIRS = [name for name, (_, why) in ROUTES.items() if why == "it reads the teacher's notebooks"]


@pytest.mark.parametrize("name", THEIRS)
def test_no_route_from_the_learners_process_to_the_teachers_notebooks(name):
    body, why = ROUTES[name]
    try:
        ran, stopped = _run([_Cell("def answer():\n" + answer_by(body)), _Cell("answer()", "x", answers=("answer",))], 60)
    finally:
        written = os.path.exists(os.path.join(FOLDER, "mine.txt"))
        if written:  # by a grader that let it through: not left in the teacher's folder
            os.remove(os.path.join(FOLDER, "mine.txt"))
    assert ran == {} and not written, f"{name}: not refused"
    assert stopped.startswith(REFUSED + why), stopped  # the learner's process ended there


def test_no_process_no_c_no_link_no_proc_and_no_tracing_in_the_learners_process():
    others = [name for name in ROUTES if name not in THEIRS]
    cells = [_Cell("".join(f"def answer_{n}():\n{answer_by(ROUTES[name][0])}\n" for n, name in enumerate(others)))]
    cells += [_Cell(f"answer_{n}()", name, answers=(f"answer_{n}",)) for n, name in enumerate(others)]
    ran, stopped = _run(cells, 60)
    assert stopped is None
    for name in others:
        assert ran[name] is not None and ran[name].startswith("PermissionError: " + REFUSED + ROUTES[name][1]), \
            (name, ran[name])


def test_the_teachers_folder_given_as_source_and_its_checkouts_git_are_closed(tmp_path):
    # A checkout elsewhere: --source in it, and the .git beside it, whose objects hold every version.
    folder = tmp_path / "course" / "exercises"
    folder.mkdir(parents=True)
    (folder / "04.ipynb").write_text("{}")
    (tmp_path / "course" / ".git" / "objects" / "ab").mkdir(parents=True)
    (tmp_path / "course" / ".git" / "objects" / "ab" / "cdef").write_bytes(b"x")
    (tmp_path / "course" / "notes.txt").write_text("not the teacher's notebooks")
    answer = _Cell("def answer(path):\n    return open(path).read()")
    checks = [_Cell(f"answer({str(path)!r})", name, answers=("answer",)) for name, path in (
        ("notes", tmp_path / "course" / "notes.txt"),
        ("notebook", folder / "04.ipynb"),
        ("git", tmp_path / "course" / ".git" / "objects" / "ab" / "cdef"))]
    ran, stopped = _run([answer, *checks[:1], checks[2]], 60, source=folder)
    assert ran == {"notes": None} and stopped == REFUSED + (
        f"it reads the .git that holds the teacher's notebooks ({tmp_path / 'course' / '.git' / 'objects' / 'ab' / 'cdef'})")
    ran, stopped = _run([answer, checks[1]], 60, source=folder)
    assert ran == {} and stopped == REFUSED + f"it reads the teacher's notebooks ({folder / '04.ipynb'})"
    # Without source, that folder is open (only notebooks/exercises of this checkout is closed).
    assert _run([answer, checks[1]], 60) == ({"notebook": None}, None)


def test_an_honest_answer_may_read_and_write_its_own_files_and_import_the_standard_library():
    answer = _Cell("import json, os, pathlib, random, statistics, tempfile, fractions, decimal\n"
                   "def answer():\n"
                   "    pathlib.Path('mine.json').write_text(json.dumps([1.0, 2.0]))\n"
                   "    with tempfile.NamedTemporaryFile('w', suffix='.txt') as f:\n"
                   "        f.write('scratch')\n"
                   "    return json.loads(open(os.path.join(os.getcwd(), 'mine.json')).read())")
    check = _Cell("from mha_lists.tools.exercises import check_close\ncheck_close('x', answer(), [1.0, 2.0])", "x",
                  answers=("answer",))
    assert _run([answer, check], 60) == ({"x": None}, None)


def test_a_source_folder_that_holds_what_grading_reads_is_refused():
    # Closed to the learner's code, such a folder would refuse the package's own files to it.
    with pytest.raises(ValueError, match=r"^score: source .* holds the package mha_lists, which grading reads; "
                                         "keep the teacher's notebooks in a folder of their own$"):
        score(submitted(TEACHER_04), TEACHER_04, source=ROOT)
    with pytest.raises(ValueError, match=r"^score: source .* holds Python, which grading reads"):
        score(submitted(TEACHER_04), TEACHER_04, source=sys.prefix)
    with pytest.raises(TypeError, match="^score: source must be a str or a Path, got int$"):
        score(submitted(TEACHER_04), TEACHER_04, source=3)
