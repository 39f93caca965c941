"""Exercises that check themselves: the checks, student copies, and a points tally.

The exercise notebooks (``notebooks/exercises/NN_*.ipynb``, NN = the core notebook) use
nbgrader's format: a solution cell (code between ``### BEGIN SOLUTION`` and ``### END SOLUTION``)
followed by a locked check cell worth some points, whose one or two lines call ``check_close``.

    python -m mha_lists.tools.exercises student-copies student-copies/      # solutions removed
    python -m mha_lists.tools.exercises score graded/*.ipynb                 # points per notebook

``student-copies`` writes what nbgrader's ``generate_assignment`` would hand out: every
solution region replaced by ``# YOUR CODE HERE`` / ``raise NotImplementedError()`` (the stub
of nbgrader's ClearSolutions, indented like the BEGIN line), outputs and execution counts
cleared. ``score`` reads notebooks that were executed with errors allowed (``jupyter nbconvert
--to notebook --execute --allow-errors``) and adds up the points of the check cells that ran
without an error.

=====================================  =======================================================
check_close(name, got, expected, tol)  pass quietly-but-visibly, or say what is wrong: the
                                       type, the shape, which entry and by how much (never
                                       the expected value)
CheckFailed                            the AssertionError a failed check raises
student_copy(nb)                       a notebook (as JSON) with its solutions removed
write_student_copies(source, out)      every exercise notebook of ``source`` into ``out``
score(nb)                              (points earned, points possible, failed check ids)
=====================================  =======================================================
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import pathlib
import re
import sys
from typing import Any, NamedTuple, Optional

from .cli import OneLineErrorParser

__all__ = ["CheckFailed", "check_close", "student_copy", "write_student_copies", "score", "Score",
           "CODE_STUB", "EXERCISES"]

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
EXERCISES = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "exercises"


class CheckFailed(AssertionError):
    """A check cell's verdict: the learner's answer is not (yet) right."""


# === Checking an answer ===


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _depth(x: Any) -> int:
    return 1 + _depth(x[0]) if isinstance(x, (list, tuple)) and x else 0


def _describe(x: Any) -> str:
    """What a value of the expected kind looks like, without its numbers."""
    depth = _depth(x)
    if depth == 0:
        return "a number"
    if depth == 1:
        return f"a list of {len(x)} numbers"
    if depth == 2:
        return f"a {len(x)}x{len(x[0])} matrix"
    return f"a list of {len(x)} matrices"


_PARTS = {1: "entries", 2: "rows", 3: "matrices"}


def _mismatches(path: str, got: Any, expected: Any, tol: float, found: list) -> None:
    """Raise at the first wrong type or shape; collect (path, got - expected) of wrong numbers."""
    if _is_number(expected):
        if not _is_number(got):
            raise CheckFailed(f"{path} should be a number, but it is {type(got).__name__}: {got!r}"[:200])
        if math.isnan(got):
            raise CheckFailed(f"{path} is nan (not a number); look for 0/0, inf - inf or a missing value")
        if math.isinf(expected) or math.isinf(got):
            if got != expected:
                found.append((path, math.inf if got > expected else -math.inf))
        elif not math.isclose(got, expected, rel_tol=tol, abs_tol=tol):
            found.append((path, got - expected))
        return
    if not isinstance(got, (list, tuple)):
        raise CheckFailed(f"{path} should be {_describe(expected)}, but it is {type(got).__name__}")
    if len(got) != len(expected):
        raise CheckFailed(f"{path} has {len(got)} {_PARTS.get(_depth(expected), 'parts')}; "
                          f"it should have {len(expected)} ({_describe(expected)})")
    for i, (g, e) in enumerate(zip(got, expected)):
        _mismatches(f"{path}[{i}]", g, e, tol, found)


def check_close(name: str, got: Any, expected: Any, tol: float = 1e-9) -> None:
    """Check a learner's number, vector, matrix or list of matrices against the module's.

    Entries may differ by ``tol`` (absolute, or relative for large entries): a sum of products
    in your own loop is not bit-identical to ``math.fsum``. On success, print one line; on
    failure raise ``CheckFailed`` saying what is wrong (type, shape, which entry and by how
    much) but not what the answer is.

    >>> check_close("q", [[1.0, 2.0]], [[1.0, 2.0 + 1e-12]])
    q: correct (1x2, every entry within 1e-09)
    >>> check_close("q", [[1.0, 2.5]], [[1.0, 2.0]])
    Traceback (most recent call last):
    ...
    mha_lists.tools.exercises.CheckFailed: q[0][1] is off by 0.5 (too large; the tolerance is 1e-09)
    >>> check_close("q", [[1.0], [2.0]], [[1.0, 2.0]])
    Traceback (most recent call last):
    ...
    mha_lists.tools.exercises.CheckFailed: q has 2 rows; it should have 1 (a 1x2 matrix)
    """
    if not isinstance(name, str):
        raise TypeError(f"check_close: name must be a str, got {type(name).__name__}")
    if not _is_number(tol) or not tol >= 0:
        raise ValueError(f"check_close: tol must be a number >= 0, got {tol!r}")
    found: list = []
    _mismatches(name, got, expected, tol, found)
    if found:
        path, diff = found[0]
        how = "too large" if diff > 0 else "too small"
        size = f"{abs(diff):.3g}" if math.isfinite(diff) else "infinitely much"
        more = f"; {len(found)} entries are off, this is the first" if len(found) > 1 else ""
        raise CheckFailed(f"{path} is off by {size} ({how}; the tolerance is {tol:g}){more}")
    depth = _depth(expected)
    within = "exactly" if tol == 0 else f"within {tol:g}"
    if depth == 0:
        print(f"{name}: correct ({within})")
        return
    if depth == 1:
        shape = f"{len(expected)} entries"
    elif depth == 2:
        shape = f"{len(expected)}x{len(expected[0])}"
    else:
        shape = f"{len(expected)} matrices"
    print(f"{name}: correct ({shape}, every entry {within})")


# === Student copies (what nbgrader's ClearSolutions does) ===


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _clear_solution(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region by the stub, at the BEGIN line's indentation."""
    lines, out, inside = source.split("\n"), [], False
    for line in lines:
        if BEGIN in line:
            if inside:
                raise ValueError(f"student_copy: {where} has a BEGIN SOLUTION inside another")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            out += [indent + stub for stub in CODE_STUB.split("\n")]
        elif END in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"student_copy: {where} has a BEGIN SOLUTION without its END SOLUTION")
    return "\n".join(out)


def student_copy(nb: dict) -> dict:
    """A notebook (nbformat 4 JSON) as students get it: solutions removed, outputs cleared.

    The original is not changed.

    >>> nb = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True}},
    ...        "source": "def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION",
    ...        "outputs": [], "execution_count": 3}], "metadata": {}}
    >>> print(student_copy(nb)["cells"][0]["source"])
    def f():
        # YOUR CODE HERE
        raise NotImplementedError()
    """
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError("student_copy: nb must be a notebook as JSON (a dict with a list of cells)")
    new = copy.deepcopy(nb)
    for n, cell in enumerate(new["cells"]):
        source = _source(cell)
        is_solution = bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))
        if BEGIN in source:
            if not is_solution:
                raise ValueError(f"student_copy: cell {n} has a solution region but is not a solution cell")
            cell["source"] = _clear_solution(source, f"cell {n}")
        elif is_solution and cell.get("cell_type") == "code":
            cell["source"] = CODE_STUB
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    new.get("metadata", {}).pop("celltoolbar", None)
    return new


def write_student_copies(source: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    """Write ``student_copy`` of every ``*.ipynb`` in ``source`` into ``out`` (made if needed)."""
    source, out = pathlib.Path(source), pathlib.Path(out)
    paths = sorted(source.glob("*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"write_student_copies: no .ipynb files in {source}")
    if out.resolve() == source.resolve():
        raise ValueError("write_student_copies: out must not be the source folder (it would overwrite the solutions)")
    notebooks = EXERCISES.parent.resolve()
    if out.resolve() == notebooks or notebooks in out.resolve().parents:
        raise ValueError(f"write_student_copies: out {out} is inside {notebooks}, where nbval would run the "
                         "student copies and fail; write them elsewhere, e.g. student-copies/")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        target = out / path.name
        target.write_text(json.dumps(student_copy(nb), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(target)
    return written


# === Points ===


class Score(NamedTuple):
    """Points of one executed notebook."""

    earned: int
    possible: int
    failed: list[str]  # grade_id of every check cell that raised


def score(nb: dict) -> Score:
    """Add up the points of the check cells of an executed notebook that raised no error.

    >>> cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "points": 2, "grade_id": "a"}},
    ...         "outputs": [{"output_type": "error", "ename": "CheckFailed"}]}
    >>> score({"cells": [cell]})
    Score(earned=0, possible=2, failed=['a'])
    """
    earned = possible = 0
    failed = []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade"):
            continue
        points = meta.get("points", 0)
        possible += points
        ran = cell.get("execution_count") is not None or cell.get("outputs")
        if ran and not any(out.get("output_type") == "error" for out in cell.get("outputs", [])):
            earned += points
        else:
            failed.append(meta.get("grade_id", "?"))
    return Score(earned, possible, failed)


# === Command line ===


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.exercises",
                     description="Student copies of the exercise notebooks, and their points.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    copies = sub.add_parser("student-copies", help="write the notebooks with every solution removed")
    copies.add_argument("outdir", type=pathlib.Path, help="folder to write into, e.g. student-copies/")
    copies.add_argument("--source", type=pathlib.Path, default=EXERCISES,
                        help="folder of solution notebooks (default: notebooks/exercises)")
    points = sub.add_parser("score", help="points of notebooks executed with --allow-errors")
    points.add_argument("notebooks", type=pathlib.Path, nargs="+", help="executed .ipynb files")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "student-copies":
        if not args.source.is_dir():
            parser.error(f"--source {args.source} is not a folder")
        try:
            written = write_student_copies(args.source, args.outdir)
        except (OSError, ValueError) as e:
            parser.error(str(e))
        for path in written:
            print(path)
        return 0
    total_earned = total_possible = 0
    for path in args.notebooks:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            parser.error(f"cannot read {path}: {e}")
        result = score(nb)
        total_earned, total_possible = total_earned + result.earned, total_possible + result.possible
        failed = f"  (failed: {', '.join(result.failed)})" if result.failed else ""
        print(f"{path}: {result.earned}/{result.possible} points{failed}")
    if len(args.notebooks) > 1:
        print(f"total: {total_earned}/{total_possible} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
