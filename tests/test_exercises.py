"""The exercise notebooks: nbgrader's metadata, checks that fail on empty and on wrong answers.

nbval runs the stored solution notebooks (they pass). Here every student copy is executed with
nbclient, once as handed out (each solution is ``raise NotImplementedError()``) and once with
every solution replaced by a wrong-but-plausible answer: every check cell must fail.
"""

import json
import pathlib
import re
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from mha_lists.tools.exercises import CODE_STUB, CheckFailed, check_close, score, student_copy, write_student_copies

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
CORE = {p.name[:2]: p.name for p in (ROOT / "notebooks").glob("0[2-7]_*.ipynb")}

# One wrong-but-plausible answer per solution cell (by grade_id): what replaces the solution region.
WRONG = {
    "02_q_entry": "q_entry = sum(x[i][t] * weights.W_K[0][t][c] for t in range(len(x[0])))",  # W_K for W_Q
    "02_K1": "K1 = [[sum(row[t] * weights.W_K[0][t][c] for t in range(len(row))) for c in range(len(row) // 2)] for row in x]",
    "02_V_heads": "V_heads = split_heads(matmul(x, concat_heads(weights.W_V)), 1)",  # one head, not h
    "03_score": "score = sum(a * b for a, b in zip(trace.Q[0][i], trace.K[0][j]))",  # forgot / sqrt(d_k)
    "03_S1": "S1 = [[sum(a * b for a, b in zip(q, k)) / len(q) for k in trace.K[1]] for q in trace.Q[1]]",  # / d_k
    "04_my_softmax": "exps = [math.exp(s - max(row)) for s in row]\nreturn exps",  # not normalised
    "04_A0_causal": "A0_causal = [softmax([s if j >= i else -math.inf for j, s in enumerate(row)])"
                    " for i, row in enumerate(scores)]",  # the future, not the past
    "05_out_row": "out_row = [sum(A[j][i] * V[j][c] for j in range(len(V))) for c in range(len(V[0]))]",  # column
    "05_H1": "H1 = [[sum(a * trace.V[0][j][c] for j, a in enumerate(r)) for c in range(len(trace.V[0][0]))]"
             " for r in trace.attention[1]]",  # head 0's values
    "06_concat": "concat = [row for H in trace.head_outputs for row in H]",  # stacked, not side by side
    "06_by_blocks": "output_by_blocks = matmul(trace.head_outputs[0], weights.W_O[:d_v])",  # head 0 only
    "07_my_attention": "heads = [matmul(softmax_rows(scale(matmul(matmul(x, a), transpose(matmul(x, b))), "
                       "1 / math.sqrt(len(a[0])))), matmul(x, c)) for a, b, c in zip(weights.W_Q, weights.W_K, weights.W_V)]\n"
                       "return concat_heads(heads)",  # forgot W_O
    "07_count_parameters": "return 3 * d_model * d_model",  # forgot W_O
}


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell):
    return "".join(cell["source"])


def nbgrader(cell):
    return cell.get("metadata", {}).get("nbgrader")


def exercise_pairs(nb):
    """(solution cell, check cell) for every solution cell; the check must come right after it."""
    cells = nb["cells"]
    return [(c, cells[n + 1]) for n, c in enumerate(cells) if (nbgrader(c) or {}).get("solution")]


def test_two_or_more_exercises_for_each_core_notebook_02_to_07():
    assert sorted(p.name[:2] for p in EXERCISES) == ["02", "03", "04", "05", "06", "07"]
    for path in EXERCISES:
        assert path.name == CORE[path.name[:2]], "an exercise notebook is named after its core notebook"
        assert len(exercise_pairs(load(path))) >= 2


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_nbgrader_metadata(path):
    nb = load(path)
    ids = [nbgrader(c)["grade_id"] for c in nb["cells"] if nbgrader(c)]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Za-z0-9_-]+", i) for i in ids)
    for sol, chk in exercise_pairs(nb):
        assert nbgrader(sol) == {"grade": False, "grade_id": nbgrader(sol)["grade_id"], "locked": False,
                                 "schema_version": 3, "solution": True}
        text = source(sol)
        assert text.count("### BEGIN SOLUTION") == 1 and text.count("### END SOLUTION") == 1
        meta = nbgrader(chk)
        assert chk["cell_type"] == "code", "a check cell follows every solution cell directly"
        assert meta == {"grade": True, "grade_id": meta["grade_id"], "locked": True, "points": meta["points"],
                        "schema_version": 3, "solution": False}
        assert isinstance(meta["points"], int) and meta["points"] > 0
        assert "check_close(" in source(chk) and len(source(chk).splitlines()) <= 3
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
        assert "correct" in "".join("".join(o.get("text", "")) for o in chk["outputs"])
    markdown = [source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert markdown[0].startswith("# ") and any("Try this" in m for m in markdown[-3:])


def test_student_copy_is_what_nbgrader_hands_out():
    nb = load(EXERCISES[0])
    copy = student_copy(nb)
    assert nb == load(EXERCISES[0]), "the solution notebook is not changed"
    for (sol, chk), (new_sol, new_chk) in zip(exercise_pairs(nb), exercise_pairs(copy)):
        text = source(new_sol)
        assert "SOLUTION" not in text and CODE_STUB in text
        before = source(sol).split("### BEGIN SOLUTION")[0]
        assert text.startswith(before), "lines outside the solution region stay"
        assert source(new_chk) == source(chk) and new_chk["metadata"] == chk["metadata"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in copy["cells"] if c["cell_type"] == "code")


def test_student_copy_indents_the_stub_like_the_begin_line():
    cell = {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}, "outputs": [], "execution_count": 1,
            "source": "def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"}
    assert student_copy({"cells": [cell]})["cells"][0]["source"] == (
        "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n")


def test_student_copy_refuses_a_solution_outside_a_solution_cell():
    cell = {"cell_type": "code", "metadata": {}, "source": "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"}
    with pytest.raises(ValueError, match="student_copy: cell 0 has a solution region but is not a solution cell"):
        student_copy({"cells": [cell]})


def with_answers(nb, answers):
    """A copy of the notebook whose solution regions hold the given code (by grade_id)."""
    new = json.loads(json.dumps(nb))
    for cell in new["cells"]:
        meta = nbgrader(cell) or {}
        if meta.get("solution"):
            text = source(cell)
            begin = re.search(r"^([ \t]*)### BEGIN SOLUTION.*?### END SOLUTION[^\n]*", text, re.S | re.M)
            indent = begin.group(1)
            answer = "\n".join(indent + line for line in answers[meta["grade_id"]].split("\n"))
            cell["source"] = text[:begin.start()] + answer + text[begin.end():]
    return new


def run_checks(nb, folder):
    """Execute every cell (errors allowed); return {check grade_id: error name or None}."""
    notebook = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(folder)}}).execute()
    result = {}
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            errors = [o for o in cell.outputs if o.output_type == "error"]
            result[meta["grade_id"]] = errors[0].ename if errors else None
    return result


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_every_check_fails_on_the_student_copy(path, tmp_path):
    outcome = run_checks(student_copy(load(path)), tmp_path)
    assert outcome and all(outcome.values()), f"checks that passed with no answer: {outcome}"


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_every_check_fails_on_a_wrong_answer_with_a_message(path, tmp_path):
    outcome = run_checks(with_answers(load(path), WRONG), tmp_path)
    assert outcome and all(name == "CheckFailed" for name in outcome.values()), outcome


def test_score_counts_the_points_of_checks_that_ran_clean(tmp_path):
    nb = with_answers(load(EXERCISES[0]), WRONG)
    notebook = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    result = score(json.loads(nbformat.writes(notebook)))
    assert result.earned == 0 and result.failed == ["02_q_entry_check", "02_K1_check", "02_V_heads_check"]
    assert score(load(EXERCISES[0])) == (result.possible, result.possible, [])


# === check_close's messages ===


@pytest.mark.parametrize("got, message", [
    (None, "Q should be a 2x3 matrix, but it is NoneType"),
    ([[1.0, 2.0, 3.0]], "Q has 1 rows; it should have 2"),
    ([[1.0, 2.0, 3.0], [4.0, 5.0]], "Q[1] has 2 entries; it should have 3"),
    ([[1.0, 2.0, 3.0], [4.0, 5.0, "6"]], "Q[1][2] should be a number, but it is str"),
    ([[1.0, 2.0, 3.0], [4.0, float("nan"), 6.0]], "Q[1][1] is nan"),
    ([[1.0, 2.0, 3.0], [4.0, 5.25, 6.0]], "Q[1][1] is off by 0.25 (too large; the tolerance is 1e-09)"),
    ([[1.5, 2.0, 3.0], [4.0, 5.0, 5.0]], "Q[0][0] is off by 0.5 (too large; the tolerance is 1e-09); 2 entries are off"),
])
def test_check_close_says_what_is_wrong_but_not_the_answer(got, message):
    expected = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    with pytest.raises(CheckFailed) as info:
        check_close("Q", got, expected)
    assert message in str(info.value)
    assert "5.0" not in str(info.value) and "6.0" not in str(info.value), "the expected value is not shown"
    assert isinstance(info.value, AssertionError)


def test_check_close_allows_the_tolerance_and_no_more(capsys):
    check_close("s", 1.0 + 1e-10, 1.0)
    assert capsys.readouterr().out == "s: correct (within 1e-09)\n"
    with pytest.raises(CheckFailed, match="too small"):
        check_close("s", 1.0 - 1e-8, 1.0)
    check_close("masked", [float("-inf"), 1.0], [float("-inf"), 1.0])
    with pytest.raises(CheckFailed, match=r"masked\[0\] is off by infinitely much"):
        check_close("masked", [0.0, 1.0], [float("-inf"), 1.0])
    with pytest.raises(CheckFailed, match="off by 1 "):
        check_close("n", 3, 4, tol=0)


# === The command line ===


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")


def test_student_copies_command_writes_one_copy_per_notebook(tmp_path):
    result = run("student-copies", str(tmp_path / "out"))
    assert result.returncode == 0 and result.stderr == ""
    written = sorted((tmp_path / "out").glob("*.ipynb"))
    assert [p.name for p in written] == [p.name for p in EXERCISES]
    for path in written:
        text = path.read_text(encoding="utf-8")
        assert "BEGIN SOLUTION" not in text and "raise NotImplementedError()" in text
        nbformat.validate(nbformat.reads(text, as_version=4))


def test_the_default_student_copies_folder_is_git_ignored():
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert "/student-copies/" in ignored
    with pytest.raises(ValueError, match="must not be the source folder"):
        write_student_copies(EXERCISES[0].parent, EXERCISES[0].parent)
    with pytest.raises(ValueError, match="where nbval would run the student copies"):
        write_student_copies(EXERCISES[0].parent, ROOT / "notebooks" / "students")
    assert not (ROOT / "notebooks" / "students").exists()


@pytest.mark.parametrize("args, message", [
    ((), "the following arguments are required: command"),
    (("student-copies",), "the following arguments are required: outdir"),
    (("student-copies", "x", "--source", "no/such/folder"), "--source no/such/folder is not a folder"),
    (("score", "no/such.ipynb"), "cannot read no/such.ipynb"),
])
def test_bad_arguments_give_one_line_and_exit_code_2(args, message):
    result = run(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr


@pytest.mark.parametrize("settings", ["seed=7, num_heads=4", "seed=123, num_heads=8"])
@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_solutions_pass_with_another_example(path, settings, tmp_path):
    nb = load(path)
    setup = next(c for c in nb["cells"] if c["cell_type"] == "code" and "ex = running_example()" in source(c))
    setup["source"] = source(setup).replace("ex = running_example()", f"ex = running_example({settings})")
    outcome = run_checks(nb, tmp_path)
    assert outcome and not any(outcome.values()), outcome
