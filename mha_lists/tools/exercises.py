"""Exercises that check themselves: the checks, student copies, and grading that cannot be fooled.

The exercise notebooks (``notebooks/exercises/NN_*.ipynb``, NN = the core notebook they practise;
02 to 06 are the parts of notebook 02-06) use nbgrader's format: a solution cell (a function whose
body sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``) followed by a locked check cell
worth some points. The check cell's visible lines call ``check_close`` on the running example; its
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` region calls the learner's function again on
inputs drawn from a seed that only the teacher's copy holds, and compares with the module's own
answer. A function that returns a copied expected value passes the visible check and fails the
hidden one.

    python -m mha_lists.tools.exercises student-copies student-copies/   # what students get
    python -m mha_lists.tools.exercises score alice/*.ipynb               # points per notebook
    python -m mha_lists.tools.exercises self-checks                       # after editing an exercise

``student-copies`` writes what nbgrader's ``generate_assignment`` hands out: every solution
region replaced by ``# YOUR CODE HERE`` / ``raise NotImplementedError()`` (indented like the
BEGIN line), every hidden-tests region removed, outputs and execution counts cleared.

``score`` grades a submission the way nbgrader's ``autograde`` does, with nothing but Python:

1. it finds the teacher's notebook (in ``--source``, default ``notebooks/exercises``) by what the
   submission holds, not by its file name: the one whose nbgrader cell ids (``grade_id``) it shares
   the most of (``exercise_of``), so a browser's download name (``exercises_04_softmax_and_masks
   (1).ipynb``) or a renamed file is graded as what it is. Then it compares every check cell, by
   ``grade_id``, with the one handed out. A check cell that is missing (deleted, or its ``grade_id`` edited), duplicated, turned
   into another cell type, moved away from its exercise, or whose source differs by one
   character, is worth 0 points, with that reason (nbgrader's checksums notice the same edits, and
   nbgrader puts the handed-out cell back and grades that: the edit gains nothing either way);
2. it runs the notebook's code cells top to bottom in a fresh Python process (plain Python: a
   line of IPython magic is a SyntaxError in its own cell), and in place of each check cell the
   teacher's (hidden tests included), in a second process (below); outputs stored in the file
   are ignored;
3. a check cell earns its points when it runs without an error. Anything else is 0 points, with
   the error's first line as the reason. An answer of more than a million lists and numbers earns
   nothing (it is refused before it is sent), and a notebook that writes a line of more than
   ``MAX_LINE`` characters to the grader's channel is stopped there, so neither fills the grader's
   memory.

The learner's code and the checks never share a process. The notebook's cells run in one
Python; the teacher's setup cells (as the teacher wrote them) and checks run in another, started
first, with the whole package imported before any of the learner's code runs. A check calls the
learner's functions (what the solution cells define) through the grader: the arguments go over
as a pickle, the answer comes back as JSON. So all a check ever holds of the learner's is lists
and numbers, or an error's first line; an answer that changes its input changes its own copy;
and nothing a notebook does to its own process (rebinding ``softmax``, patching ``math``,
walking frames, an exit hook, a thread) reaches a check. The cells run one at a time, each
answer carrying the nonce its request was sent with, and every line between the grader and the
checker carries an HMAC under a key the checker got before the learner's process existed.
Those lines are numbered, so none can be played again, and on Linux the checker closes its
memory and pipes to the user's other processes (``PR_SET_DUMPABLE``). The checker starts
isolated and without site-packages (``-I -S``), with the package's folder after the standard
library's, so a ``.pth`` file, a ``sitecustomize`` or a ``json.py`` a notebook writes cannot
run in it. ``score`` on the command line reads every file before it runs any notebook. A
notebook that changes a file the next checker would import (the package's source, one of the
standard library's modules a checker loads, or the ``.pyc`` either is run from) gets nothing, and
no notebook after it is graded; nor any after one that changes the teacher's notebooks.

The teacher's notebooks are closed to the learner's code. Before any of it runs, the learner's
process adds an audit hook (PEP 578: Python has no way to remove one), which raises
``PermissionError: score refuses this in a graded notebook: it reads the teacher's notebooks
(PATH)`` on any open, listing or removal of a file in the teacher's folder (``--source``, and
notebooks/exercises beside the package) or in the .git of the checkout it is in (whose objects
hold every version of them). A file is known by its device and inode, and every folder a path
names on its way is checked the same way, so a relative path, ``..``, /proc/self/root, a symbolic
or hard link made before grading, or a path object all come to the same refusal. The hook also
refuses what would get around it: opening a folder with os.open, or a relative path with ``..``
(a path checked from one folder, opened from another); entering a folder that holds the
teacher's; renaming a folder; making a link; starting or signalling a process (subprocess,
os.system, exec, spawn, fork); importing ctypes, cffi, _posixsubprocess (its fork_exec raises no
audit event) or subinterpreters (which have no hooks); writing a file named as a C extension
module, or loading one from a file named otherwise (C the notebook brings); making a code object
by hand; the network (a Jupyter server on the same machine serves the notebooks); reading /proc
(another process's memory, the grader's command line with its ``--term``); gc's lists of objects
and sys.settrace (ways to the hook's own variables). The hook holds only frozensets and C
functions taken before the learner's code runs. The learner's process starts without
site-packages (``-S``) and adds them after the hook, so a .pth file a notebook wrote runs under
it too. A read of the teacher's notebooks (or their .git) ends the learner's process there: the
answer that tried, and every later one, earns nothing, with that reason. An answer during which
something else was refused earns nothing even if it caught the error (bookkeeping the learner's
code could undo; the refusal itself it cannot).
Honest work is unaffected: a notebook may read and write its own files, and import the standard
library, the package and site-packages. (nbgrader's autograde runs a notebook in a Jupyter
kernel, with no such hook.) A ``--source`` that holds what grading reads (the package, Python,
the temporary folder) is refused.

Exit codes of ``score``: 0 when every file was graded; 2 when a file could not be graded (not
found, a symbolic link, a folder, a FIFO or a device, not JSON, not a notebook, no exercise's cells in it). Each such file
gets one line on stderr (``...: error: PATH is not JSON (...)``); the other files are still graded.

=====================================  =======================================================
check_close(name, got, expected, tol)  pass quietly-but-visibly, or say what is wrong: the
                                       type, the shape, which entry and by how much (never
                                       the expected value)
CheckFailed                            the AssertionError a failed check raises
NotebookError                          a file that is not a readable notebook (a ValueError)
read_notebook(path)                    a notebook file as JSON, its structure checked
student_copy(nb)                       a notebook (as JSON) with solutions and hidden tests
                                       removed
write_student_copies(source, out)      every exercise notebook of ``source`` into ``out``
exercise_of(nb, teachers)              which teacher's notebook nb is a copy of, by its cells
hidden_seed(task, default)             a hidden test's seed: from the teacher's term when graded
                                       with one (score --term, MHA_LISTS_TERM), else default
without(*names)                        a block in which the library's functions ``names`` raise:
                                       a hidden test that an answer is the student's own
tampering(nb, teacher)                 {grade_id: reason} for every check cell that is not as
                                       handed out (no code is run)
self_check(exercise, namespace)        in the student's notebook (JupyterLite too): every task's
                                       visible check again, a line per task, the total, and
                                       what to hand in; SelfCheck(earned, possible, tasks)
self_checks(source)                    what self_check runs, from the student copies (the
                                       package holds it: ``self-checks`` writes it)
score(nb, teacher, timeout, term,      Score(earned, possible, failed): runs the notebook;
      source)                          ``failed`` maps grade_id to the reason for 0 points
=====================================  =======================================================

An exercise that asks for a function the library has (``my_softmax``, ``concat``,
``my_attention``, ``my_softmax_backward``, ``cross_entropy_gradient``, ``my_adam_step``) runs the
student's answer in its hidden test inside ``without(...)``: an answer that calls the library's own
function, or another of the library's functions that computes the same answer (``TWINS``), fails that
check. Under ``score`` the learner's process sets the functions aside while the answer runs, with what
it found before the notebook's code ran (``learner_without``), so rebinding the module's names does not
undo it. It raises the bar, no more. An answer can still copy the library's code, or its code object
(``types.FunctionType``); put a function's own code back while it runs (``__code__``); or reload the
module that holds it. Under nbgrader, the learner's cells and the checks share one kernel, so an
answer can also switch ``without`` off there.

The limit: both processes run as the user who runs ``score``. What the hook does not stop: a
copy of the teacher's notebooks anywhere else on the machine (a backup, mutmut's mutants/ in a
developer's checkout; the package, its wheel, the JupyterLite site and the student copies hold no
solutions); C code in an installed extension module that opens files or starts processes itself
(ctypes and cffi are refused; others are not known to the hook); bytecode crafted to corrupt the
interpreter's memory (marshal.loads cannot be refused: every import uses it); a second thread
that changes what a path names between the check and the open by a way not refused above
(Python 3.11 raises no event when a thread starts); a way around it nobody has found yet (an
audit hook is not a sandbox, CPython's documentation says). So for an exam, run
``score`` as a user who cannot read the teacher's folder or write the course's files, in a
virtual environment holding only mha_lists, or in a container, as nbgrader advises. The
teacher's notebooks are in the repository, which a student can read before handing in, and a
learner can compute an answer with ``mha_lists`` itself instead of writing it: only reading the
solution cells shows either.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import csv
import hashlib
import hmac
import importlib
import io
import json
import math
import os
import pathlib
import queue
import re
import secrets
import stat
import sys
import tempfile
import threading
import time
from typing import Any, NamedTuple, Optional

from .cli import OneLineErrorParser
from .worksheet import check_term, term_argument
from ..core.checks import check_type, all_finite, quote_int, shorten

__all__ = ["check_close"]

CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
EXERCISES = pathlib.Path(__file__).resolve().parents[2] / "notebooks" / "exercises"


class CheckFailed(AssertionError):
    """A check cell's verdict: the learner's answer is not (yet) right."""


# === Checking an answer ===


# Exact types, never subclasses: a list whose __iter__ yields nothing would otherwise compare
# equal to anything of its length, and a learner's answer is checked by iterating it.
def _is_number(x: object) -> bool:
    return type(x) is int or type(x) is float


def _is_list(x: object) -> bool:
    return type(x) is list or type(x) is tuple


def _depth(x: Any) -> int:
    return 1 + _depth(x[0]) if _is_list(x) and x else 0


def _describe(x: Any) -> str:
    """What a value of the expected kind looks like, without its numbers."""
    depth = _depth(x)
    if depth == 0:
        return "a number"
    if depth == 1:
        return f"a list of {len(x)} numbers"
    if depth == 2:
        return f"a {len(x)}x{len(x[0])} matrix"
    return f"a list of {len(x)} matrices" if depth == 3 else f"a list of {len(x)} lists of matrices"


_PARTS = {1: "entries", 2: "rows", 3: "matrices"}


def _mismatches(path: str, got: Any, expected: Any, tol: float, found: list) -> None:
    """Raise at the first wrong type or shape; collect (path, got - expected) of wrong numbers."""
    if _is_number(expected):
        if not _is_number(got):
            raise CheckFailed(f"{path} should be a number, but it is {type(got).__name__}: {shorten(got)}")
        if not all_finite([[got]]) and type(got) is int:
            raise CheckFailed(f"{path} is {quote_int(got)}, too large for a float (about 1.8e308 at most)")
        if math.isnan(got):
            raise CheckFailed(f"{path} is nan (not a number); look for 0/0, inf - inf or a missing value")
        if math.isinf(expected) or math.isinf(got):
            if got != expected:
                found.append((path, math.inf if got > expected else -math.inf))
        elif not math.isclose(got, expected, rel_tol=tol, abs_tol=tol):
            found.append((path, got - expected))
        return
    if not _is_list(got):
        raise CheckFailed(f"{path} should be {_describe(expected)}, but it is {type(got).__name__}")
    if len(got) != len(expected):
        raise CheckFailed(f"{path} has {len(got)} {_PARTS.get(_depth(expected), 'parts')}; "
                          f"it should have {len(expected)} ({_describe(expected)})")
    for i, (g, e) in enumerate(zip(got, expected)):
        _mismatches(f"{path}[{i}]", g, e, tol, found)


MAX_DEPTH = 4  # lists in lists in an expected value: a list of matrices is 3
MAX_POINTS = 1_000_000  # points of one graded cell
MAX_NAME = 200  # characters of the name a check prints


def _shape(x: object) -> str:
    """How a part of an expected value looks in a message: 'a number', 'a list of 3', 'a 2x3 matrix'."""
    if _is_number(x):
        return "a number"
    if not _is_list(x[0]):
        return f"a list of {len(x)}"
    return f"a {len(x)}x{len(x[0])} matrix" if not _is_list(x[0][0]) else f"a list of {len(x)} matrices"


def check_answer(func: str, name: str, value: object) -> tuple[int, ...]:
    """The module's answer: a number, or a rectangular nest of non-empty lists of numbers (a vector, a
    matrix, a list of matrices of one shape), at most MAX_DEPTH lists deep, without nan; return its shape.

    >>> check_answer("demo", "expected", [[1.0, 2.0], [3.0]])
    Traceback (most recent call last):
    ...
    ValueError: demo: expected is ragged: expected[0] is a list of 2 but expected[1] is a list of 1; its parts must have one shape
    """
    def shape(x: object, where: str, depth: int) -> tuple[int, ...]:
        if _is_number(x):
            if not all_finite([[x]]) and type(x) is int:
                raise ValueError(f"{func}: {where} is {quote_int(x)}, too large for a float (about 1.8e308 at most)")
            if x != x:  # no answer is close to nan: every check would fail, saying "off by infinitely much"
                raise ValueError(f"{func}: {name} has nan in it; an expected value must be numbers (inf is allowed)")
            return ()
        if not _is_list(x) or not x or depth >= MAX_DEPTH:
            raise TypeError(f"{func}: {name} must be a number, a list of numbers, a matrix or a list of matrices "
                            f"(lists at most {MAX_DEPTH} deep, none empty), got {shorten(value)}")
        first = shape(x[0], f"{where}[0]", depth + 1)
        for i, part in enumerate(x[1:], 1):
            if shape(part, f"{where}[{i}]", depth + 1) != first:
                raise ValueError(f"{func}: {name} is ragged: {where}[0] is {_shape(x[0])} but {where}[{i}] is "
                                 f"{_shape(part)}; its parts must have one shape")
        return (len(x), *first)
    return shape(value, name, 0)


def check_tolerance(func: str, name: str, tol: object) -> float:
    """A finite number >= 0 (tol inf would pass every answer)."""
    if not _is_number(tol) or not all_finite([[tol]]) or tol < 0:
        raise ValueError(f"{func}: {name} must be a finite number >= 0, got {shorten(tol, 40)}")
    return tol


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
    if len(check_type("check_close", "name", name, str, "a str")) > MAX_NAME:
        raise ValueError(f"check_close: name is {len(name):,} characters long; a name has at most {MAX_NAME}")
    check_answer("check_close", "expected", expected)
    check_tolerance("check_close", "tol", tol)
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
        shape = f"{len(expected)} entr{'y' if len(expected) == 1 else 'ies'}"
    elif depth == 2:
        shape = f"{len(expected)}x{len(expected[0])}"
    else:
        shape = f"{len(expected)} matrices" if depth == 3 else f"{len(expected)} lists of matrices"
    print(f"{name}: correct ({shape}, every entry {within})")


# === Reading notebooks ===


class NotebookError(ValueError):
    """A file that is not a notebook this module can read; the message is one line."""


_CELL_TYPES = ("code", "markdown", "raw")


def _shown(text: object) -> str:
    """A path or a grade_id as a message shows it: as it is, or through ``shorten`` when long or not printable."""
    text = str(text)
    return text if len(text) <= 120 and text.isprintable() else shorten(text, 120)


def _printable(text: object) -> str:
    """Text as a terminal shows it: each character that is not printable (an escape, a newline) written as its
    escape, so a learner's error message or a file's name cannot move the cursor or hide a line of the grades."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


MAX_NESTING = 100  # lists and objects in one another: a notebook's outputs are about 10 deep


def _nested_over(value: object, limit: int) -> bool:
    """True when lists and dicts in ``value`` nest more than ``limit`` deep (counted without recursion,
    so that copying or writing it later cannot run out of stack)."""
    deepest: dict[int, int] = {}
    stack = [(value, 1)]
    while stack:
        x, depth = stack.pop()
        if not isinstance(x, (dict, list, tuple)) or deepest.get(id(x), 0) >= depth:
            continue
        if depth > limit:
            return True
        deepest[id(x)] = depth
        stack.extend((child, depth + 1) for child in (x.values() if isinstance(x, dict) else x))
    return False


def check_nesting(func: str, name: str, nb: object) -> None:
    """At most MAX_NESTING lists and objects in one another (deeper, copying or writing it could end in a
    RecursionError)."""
    if _nested_over(nb, MAX_NESTING):
        raise NotebookError(f"{func}: {name} nests lists and objects more than {MAX_NESTING} deep; "
                            "a notebook does not")


def check_notebook(func: str, name: str, nb: object) -> dict:
    """Raise NotebookError unless ``nb`` has the structure of an nbformat 4 notebook."""
    if not isinstance(nb, dict):
        raise NotebookError(f"{func}: {name} is not a notebook (its JSON is a {type(nb).__name__}, not an object)")
    check_nesting(func, name, nb)
    if nb.get("nbformat") != 4:
        raise NotebookError(f"{func}: {name} is not an nbformat 4 notebook "
                            f"(nbformat is {shorten(nb.get('nbformat'), 40)})")
    if not isinstance(nb.get("metadata"), dict):
        raise NotebookError(f"{func}: {name} has no notebook metadata (an object under 'metadata')")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{func}: {name} has no list of cells")
    for n, cell in enumerate(cells):
        if not isinstance(cell, dict) or cell.get("cell_type") not in _CELL_TYPES:
            raise NotebookError(f"{func}: {name} cell {n} is not a code, markdown or raw cell")
        check_cell(func, name, n, cell.get("source"), cell.get("metadata"))
    return nb


def check_cell(func: str, name: str, n: int, source: object, meta: object) -> None:
    """A cell's source is text (a str or a list of str); its metadata an object, nbgrader's too, with a
    str grade_id and a number of points when it has them."""
    if not (isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)):
        raise NotebookError(f"{func}: {name} cell {n} has no source text")
    if not isinstance(meta, dict) or not isinstance(meta.get("nbgrader", {}), dict):
        raise NotebookError(f"{func}: {name} cell {n} has no metadata (an object under 'metadata')")
    grader = meta.get("nbgrader", {})
    if not isinstance(grader.get("grade_id", ""), str):
        raise NotebookError(f"{func}: {name} cell {n} has a grade_id that is not a str: "
                            f"{shorten(grader['grade_id'], 40)}")
    points = grader.get("points", 0)
    if not _is_number(points) or not 0 <= points <= MAX_POINTS:
        raise NotebookError(f"{func}: {name} cell {n} has points {shorten(points, 40)}; points must be a number "
                            f"from 0 to {MAX_POINTS:,}")


def check_cells(func: str, name: str, nb: object) -> None:
    """A notebook as JSON, as much of it as student_copy reads: a dict with a list of cells, each a dict whose
    source (if any) is text and whose metadata (if any) is an object."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise TypeError(f"{func}: {name} must be a notebook as JSON (a dict with a list of cells)")
    check_nesting(func, name, nb)
    if not isinstance(nb.get("metadata", {}), dict):
        raise NotebookError(f"{func}: {name} has no notebook metadata (an object under 'metadata')")
    for n, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise NotebookError(f"{func}: {name} cell {n} is not a code, markdown or raw cell")
        check_cell(func, name, n, cell.get("source", ""), cell.get("metadata", {}))


def check_path(func: str, name: str, path: object) -> pathlib.Path:
    """A str or a Path; return it as a Path."""
    if not isinstance(path, (str, pathlib.PurePath)):
        raise TypeError(f"{func}: {name} must be a str or a Path, got {type(path).__name__}")
    return pathlib.Path(path)


def _why(error: Exception) -> str:
    """What went wrong, without the path an OSError repeats (it may be long)."""
    return getattr(error, "strerror", None) or str(error).splitlines()[0]


def _not_regular(func: str, path: pathlib.Path, mode: int) -> NotebookError:
    """The error for a path that is a folder, a FIFO, a device or a socket: reading one could wait forever."""
    if stat.S_ISDIR(mode):
        return NotebookError(f"{func}: {_shown(path)} is a folder, not a notebook file")
    return NotebookError(f"{func}: {_shown(path)} is not a regular file (a FIFO, a device or a socket); "
                         "a notebook is a file")


MAX_NOTEBOOK_BYTES = 20_000_000  # a submission larger than this is not read (outputs of a runaway loop)


def read_notebook(path: pathlib.Path) -> dict:
    """The notebook at ``path`` as JSON; NotebookError (one line) if it is missing, not a regular file, or malformed."""
    func = "read_notebook"
    path = check_path(func, "path", path)
    where = _shown(path)
    if "\0" in str(path):  # each CPython words its own error for this differently
        raise NotebookError(f"{func}: cannot read {where}: the path has a NUL character in it")
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):  # a FIFO or a device would make the read below wait, or never end
            raise _not_regular(func, path, mode)
        # Opened without waiting (a FIFO put in its place since would otherwise block the open), and
        # looked at again through the open file, which is what is read.
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as file:
            mode = os.fstat(file.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise _not_regular(func, path, mode)
            data = file.read(MAX_NOTEBOOK_BYTES + 1)
    except FileNotFoundError:
        raise NotebookError(f"{func}: {where} does not exist") from None
    except NotebookError:
        raise
    except OSError as e:
        raise NotebookError(f"{func}: cannot read {where}: {_why(e)}") from None
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{func}: {where} is larger than {MAX_NOTEBOOK_BYTES:,} bytes, the limit")
    try:
        nb = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise NotebookError(f"{func}: cannot read {where}: {str(e).splitlines()[0]}") from None
    except ValueError as e:
        raise NotebookError(f"{func}: {where} is not JSON ({str(e).splitlines()[0]})") from None
    except RecursionError:
        raise NotebookError(f"{func}: {where} is JSON nested too deeply to be a notebook") from None
    return check_notebook(func, where, nb)


# === Student copies (what nbgrader's ClearSolutions and ClearHiddenTests do) ===

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _nbgrader(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta if isinstance(meta, dict) else {}


def _clear_solution(source: str, where: str) -> str:
    """Replace each BEGIN/END SOLUTION region by the stub, at the BEGIN line's indentation."""
    return _clear_regions(source, where, BEGIN, END, CODE_STUB.split("\n"))


def _clear_hidden(source: str, where: str, func: str = "student_copy") -> str:
    """Remove each BEGIN/END HIDDEN TESTS region, marker lines included, as nbgrader does."""
    return _clear_regions(source, where, HIDDEN_BEGIN, HIDDEN_END, [], func)


def _clear_regions(source: str, where: str, begin: str, end: str, replacement: list[str],
                   func: str = "student_copy") -> str:
    """Cut every region from a ``begin`` line to an ``end`` line; put ``replacement`` (indented like
    the ``begin`` line) where each was."""
    out, inside = [], False
    for line in source.split("\n"):
        if begin in line:
            if inside:
                raise ValueError(f"{func}: {where} has a {begin} inside another")
            inside = True
            indent = re.match(r"\s*", line).group(0)
            out += [indent + stub for stub in replacement]
        elif end in line:
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{func}: {where} has a {begin} without its {end}")
    return "\n".join(out)


def student_copy(nb: dict) -> dict:
    """A notebook (nbformat 4 JSON) as students get it: solutions and hidden tests removed, outputs cleared.

    The original is not changed.

    >>> nb = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {"solution": True}},
    ...        "source": "def f():\\n    ### BEGIN SOLUTION\\n    return 1\\n    ### END SOLUTION",
    ...        "outputs": [], "execution_count": 3}], "metadata": {}}
    >>> print(student_copy(nb)["cells"][0]["source"])
    def f():
        # YOUR CODE HERE
        raise NotImplementedError()
    """
    check_cells("student_copy", "nb", nb)
    new = copy.deepcopy(nb)
    for n, cell in enumerate(new["cells"]):
        source = _source(cell)
        meta = _nbgrader(cell)
        is_solution = bool(meta.get("solution"))
        if BEGIN in source:
            if not is_solution:
                raise ValueError(f"student_copy: cell {n} has a solution region but is not a solution cell")
            source = _clear_solution(source, f"cell {n}")
        elif is_solution and cell.get("cell_type") == "code":
            source = CODE_STUB
        if HIDDEN_BEGIN in source:
            if not meta.get("grade"):
                raise ValueError(f"student_copy: cell {n} has a hidden-tests region but is not a graded cell")
            source = _clear_hidden(source, f"cell {n}")
        cell["source"] = source
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    new.get("metadata", {}).pop("celltoolbar", None)
    return new


def _copies_to_write(func: str, source: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    """Notebooks to copy in ``source``; ``out`` a folder (or none yet) away from the source and from notebooks/;
    return the notebooks."""
    try:
        return _copies_allowed(func, source, out)
    except OSError as e:  # a name too long for the system, a folder that cannot be read
        raise NotebookError(f"{func}: cannot use {_shown(e.filename or out)}: {_why(e)}") from None


def _copies_allowed(func: str, source: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    if not source.is_dir():
        raise NotebookError(f"{func}: source {_shown(source)} is not a folder")
    paths = sorted(source.glob("*.ipynb"))
    if not paths:
        raise NotebookError(f"{func}: no .ipynb files in {_shown(source)}")
    real = pathlib.Path(os.path.realpath(out))  # realpath: a symlink loop is not an error here
    if real == pathlib.Path(os.path.realpath(source)):
        raise ValueError(f"{func}: out must not be the source folder (it would overwrite the solutions)")
    notebooks = pathlib.Path(os.path.realpath(EXERCISES.parent))
    if real == notebooks or notebooks in real.parents:
        raise ValueError(f"{func}: out {_shown(out)} is inside {notebooks}, where nbval would run the "
                         "student copies and fail; write them elsewhere, e.g. student-copies/")
    if out.exists() and not out.is_dir():
        raise NotebookError(f"{func}: out {_shown(out)} is a file, not a folder")
    for target in (out / path.name for path in paths):
        if target.exists() and not target.is_file():  # writing into a FIFO would wait for a reader
            raise NotebookError(f"{func}: {_shown(target)} is not a regular file (a folder, a FIFO or a device); "
                                "it cannot be written over")
    return paths


def write_student_copies(source: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    """Write ``student_copy`` of every ``*.ipynb`` in ``source`` into ``out`` (made if needed)."""
    func = "write_student_copies"
    source, out = check_path(func, "source", source), check_path(func, "out", out)
    paths = _copies_to_write(func, source, out)
    copies = []
    for path in paths:
        try:
            copies.append((out / path.name, student_copy(read_notebook(path))))
        except ValueError as e:  # NotebookError, or a solution region without its end
            raise NotebookError(f"{func}: {_shown(path.name)}: {e}") from e
    out.mkdir(parents=True, exist_ok=True)
    for target, nb in copies:
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return [target for target, _ in copies]


# === Is every check cell as handed out? ===


def _graded(nb: dict) -> list[tuple[int, str]]:
    """(cell index, grade_id) of every graded cell."""
    return [(n, _nbgrader(c).get("grade_id")) for n, c in enumerate(nb["cells"])
            if _nbgrader(c).get("grade") and isinstance(_nbgrader(c).get("grade_id"), str)]


def _neighbours(teacher: dict, n: int) -> tuple[Optional[str], Optional[str]]:
    """grade_ids of the nearest nbgrader cells before and after the teacher's cell n."""
    ids = [(m, _nbgrader(c).get("grade_id")) for m, c in enumerate(teacher["cells"]) if _nbgrader(c).get("grade_id")]
    before = [g for m, g in ids if m < n]
    after = [g for m, g in ids if m > n]
    return (before[-1] if before else None), (after[0] if after else None)


def _positions(nb: dict) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for n, cell in enumerate(nb["cells"]):
        grade_id = _nbgrader(cell).get("grade_id")
        if isinstance(grade_id, str):
            found.setdefault(grade_id, []).append(n)
    return found


def tampering(nb: dict, teacher: dict) -> dict[str, str]:
    """{grade_id: why it is worth 0} for each of the teacher's check cells not as handed out in ``nb``.

    A check cell must be there once, by its grade_id, still a code cell, between the same
    neighbours, with the source the students were given (or the teacher's, hidden tests and all).

    >>> cell = {"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "a", "points": 1}},
    ...         "source": "check_close('x', x, 1)"}
    >>> teacher = {"nbformat": 4, "metadata": {}, "cells": [cell]}
    >>> tampering(teacher, teacher)
    {}
    >>> tampering({**teacher, "cells": [{**cell, "source": "print('correct')"}]}, teacher)
    {'a': "changed: its source is not the teacher's (a check cell must stay as handed out)"}
    """
    check_notebook("tampering", "nb", nb)
    check_notebook("tampering", "teacher", teacher)
    where = _positions(nb)
    reasons = {}
    for n, grade_id in _graded(teacher):
        cells = where.get(grade_id, [])
        if not cells:
            reasons[grade_id] = "missing: no cell has this grade_id (the cell was deleted or its grade_id edited)"
            continue
        if len(cells) > 1:
            reasons[grade_id] = f"duplicated: {len(cells)} cells have this grade_id"
            continue
        mine, theirs = nb["cells"][cells[0]], teacher["cells"][n]
        if mine["cell_type"] != theirs["cell_type"]:
            reasons[grade_id] = f"changed: it is a {mine['cell_type']} cell; it was handed out as a {theirs['cell_type']} cell"
            continue
        full = _source(theirs)
        if _source(mine) not in (full, _clear_hidden(full, f"teacher's {_shown(grade_id)}", "tampering")):
            reasons[grade_id] = "changed: its source is not the teacher's (a check cell must stay as handed out)"
            continue
        before, after = _neighbours(teacher, n)
        if before in where and len(where[before]) == 1 and where[before][0] > cells[0]:
            reasons[grade_id] = f"moved: it must come after {before}, as handed out"
        elif after in where and len(where[after]) == 1 and where[after][0] < cells[0]:
            reasons[grade_id] = f"moved: it must come before {after}, as handed out"
    return reasons


# === Running a notebook the way autograde does, in two processes ===
#
# The learner's code and the checks never share a process. The notebook's cells run in one
# Python (the learner's); the teacher's setup cells and checks run in another (the checker's),
# started first, with the whole package imported before any of the learner's code runs. A check
# calls the learner's function through the grader: the arguments go over as a pickle, and the
# answer comes back as JSON, so all a check ever holds of the learner's is lists and numbers, or
# the first line of an error. What a notebook does to its own process (rebinding softmax,
# patching math, walking frames, exit hooks, threads) cannot reach a check. Every line between
# the grader and the checker carries an HMAC under a key the checker got before the learner's
# process existed, so a line written into those pipes from outside is refused.

class _Cell(NamedTuple):
    """One cell for the runner: a learner's (grade_id None), or a check with the teacher's setup before it."""

    source: str
    grade_id: Optional[str] = None
    setup: tuple = ()  # (index, source) of the teacher's setup cells above the check
    answers: tuple = ()  # names the solution cells above it define: the notebook's are put in


def _defined(source: str) -> list[str]:
    """The names a cell's top level defines (a solution cell: its function)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # a cell too deeply nested to parse
        return []
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    return names


def _role(cell: dict) -> Optional[str]:
    """What a code cell is to the checks: a "check" (graded, with a grade_id), an "answer" (a solution
    cell) or "setup" (any other code cell); None for markdown and raw cells."""
    if cell["cell_type"] != "code":
        return None
    meta = _nbgrader(cell)
    if meta.get("grade") and isinstance(meta.get("grade_id"), str):
        return "check"
    return "answer" if meta.get("solution") else "setup"


def _checks(teacher: dict) -> dict[str, _Cell]:
    """Each of the teacher's checks as the runner gets it: its source, the teacher's setup cells
    above it, and the names of the answers (what the solution cells above it define)."""
    checks, setup, answers = {}, [], []
    for n, cell in enumerate(teacher["cells"]):
        role = _role(cell)
        if role == "check":
            grade_id = _nbgrader(cell)["grade_id"]
            checks[grade_id] = _Cell(_source(cell), grade_id, tuple(setup), tuple(answers))
        elif role == "answer":
            answers += [name for name in _defined(_source(cell)) if name not in answers]
        elif role == "setup":
            setup.append((n, _source(cell)))
    return checks


# The learner's process: reads a job as a line of JSON on stdin, a cell to run in the notebook's
# namespace ({"source", "name", "nonce"}) or a call of one of its functions ({"call", "args" as
# a base64 pickle, "nonce"}), and answers with one line, {"nonce", "result" or "error"}; its
# output is swallowed. Whatever it answers is the learner's, and only read as data.
_LEARNER = r"""
import base64, contextlib, io, json, pickle, sys


def guard(teacher, git):
    # An audit hook (PEP 578), added before any of the notebook's code runs. Python has no way
    # to remove one, and this one holds nothing the notebook can change: frozensets, and
    # functions written in C taken before the notebook's code runs (the notebook may rebind
    # os.stat; the function it was here is the one the hook calls).
    import os, _stat, pathlib, importlib.machinery
    stat, fstat, is_folder, kind_of, text, data, number = os.stat, os.fstat, _stat.S_ISDIR, type, str, bytes, int
    Refused, Error, metatype = PermissionError, OSError, type
    Path, PurePath = type(pathlib.Path()), type(pathlib.PurePath())  # read only as pathlib writes them
    fspath, to_text, get_attribute, cached = (pathlib.PurePath.__fspath__, pathlib.PurePath.__str__,
                                              object.__getattribute__, pathlib.PurePath._str)
    files, folders, gits = set(), set(), set()
    for top in teacher:  # the folder (all in it, by the folders a path names) and its notebooks (by inode)
        folders.add((stat(top).st_dev, stat(top).st_ino))
        for name in os.listdir(top):
            try:
                found = stat(os.path.join(top, name))
                files.add((found.st_dev, found.st_ino))
            except OSError:
                pass
    for top in git:
        try:
            found = stat(top)
            gits.add((found.st_dev, found.st_ino))
        except OSError:
            pass
    above = set()  # the folders that hold theirs: the current folder may not become one (a relative path
    for top in (*teacher, *git):  # checked from one folder would be opened from another)
        while top != os.path.dirname(top):
            top = os.path.dirname(top)
            try:
                above.add((stat(top).st_dev, stat(top).st_ino))
            except OSError:
                pass
    files, folders, gits, above = frozenset(files), frozenset(folders), frozenset(gits), frozenset(above)
    unnamed_file = getattr(os, "O_TMPFILE", 0)
    writing = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    # C the notebook brings: a file named as an extension module is never written, and an extension
    # module is loaded only from a file so named.
    c_names = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    c_names = c_names, tuple(suffix.encode() for suffix in c_names)
    try:
        proc = stat("/proc").st_dev
    except OSError:
        proc = None
    PROCESSES = frozenset({"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                           "os.forkpty", "os.startfile", "os.kill", "os.killpg"})
    INSPECTING = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys.settrace",
                            "sys.setprofile"})
    LINKS = frozenset({"os.link", "os.symlink"})
    NETWORK = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg", "socket.bind"})
    # Modules that start processes or run native code where no audit event is raised (fork_exec,
    # a subinterpreter, which has no hooks of its own), and ctypes and cffi, which call C directly.
    NATIVE = frozenset({"_posixsubprocess", "ctypes", "_ctypes", "cffi", "_cffi_backend", "_xxsubinterpreters",
                        "_xxinterpchannels", "_interpreters", "_interpchannels", "_interpqueues"})
    NAMING = frozenset({"os.listdir", "os.scandir", "os.remove", "os.rmdir", "os.truncate"})
    count, last = 0, None
    write, leave = os.write, os._exit

    def fspath_of(path):
        return path if kind_of(path) is text else path.decode("utf-8", "replace")

    def shown(path):
        return path if len(path) <= 120 else path[:57] + "..." + path[-60:]

    def theirs(key, path):
        if key in files or key in folders:
            return f"it reads the teacher's notebooks ({shown(path)})", True
        if key in gits:
            return f"it reads the .git that holds the teacher's notebooks ({shown(path)})", True
        return None

    def judged(found, path):
        verdict = theirs((found.st_dev, found.st_ino), path)
        if verdict:
            return verdict
        if found.st_dev == proc:
            return (f"it reads {shown(path)} (what /proc shows of a process: its memory, command line, "
                    "environment)", False)
        return None

    def why(path, verb):
        # Why ``path`` may not be used, and whether it is one of the teacher's; None when it may.
        kind = kind_of(path)
        if path is None:
            path, kind = ".", text
        if kind is number:
            try:
                return judged(fstat(path), f"file descriptor {path}")
            except Error:
                return None
        if kind is Path or kind is PurePath:
            if (kind_of(kind) is not metatype or kind.__fspath__ is not fspath or kind.__str__ is not to_text
                    or kind.__getattribute__ is not get_attribute or kind._str is not cached):
                return "it names a file by a pathlib path after changing pathlib", False
            path = fspath(path)
            kind = kind_of(path)
        if kind is not text and kind is not data:
            return "it names a file by an object that is not a str, bytes or a pathlib path", False
        shown_path = path if kind is text else path.decode("utf-8", "replace")
        try:
            found = stat(path)
        except (Error, ValueError):
            found = None
        if found is not None:
            verdict = judged(found, shown_path)
            if verdict:
                return verdict
            if verb and is_folder(found.st_mode):  # no folder as an open file: nothing then opens relative to one
                return f"it {verb} a folder ({shown(shown_path)})", False
        sep, up = ("/", "/../") if kind is text else (b"/", b"/../")
        if verb and not path.startswith(sep) and (sep + path + sep).find(up) >= 0:  # from a folder's descriptor?
            return f"it {verb} a path with .. in it that is not absolute ({shown(shown_path)})", False
        while True:  # every folder the path names on its way, the current one for a relative path
            while len(path) > 1 and path.endswith(sep):
                path = path[:-1]
            cut = path.rfind(sep)
            path = path[:cut] if cut > 0 else sep if cut == 0 else "." if kind is text else b"."
            try:
                found = stat(path)
            except (Error, ValueError):
                found = None
            verdict = found and theirs((found.st_dev, found.st_ino), shown_path)
            if verdict:
                return verdict
            if cut <= 0:
                return None

    def entered(path):
        try:
            found = stat(path) if kind_of(path) is text or kind_of(path) is data else None
        except (Error, ValueError):
            found = None
        if found is not None and (found.st_dev, found.st_ino) in above:
            return f"it enters a folder that holds the teacher's notebooks ({shown(fspath_of(path))})", False
        return None

    def named_as_c(path):
        kind = kind_of(path)
        return (kind is text and path.endswith(c_names[0])) or (kind is data and path.endswith(c_names[1]))

    def hook(event, args):
        nonlocal count, last
        verdict = None
        if event == "open":  # os.open's mode is None; a folder through io.open is an error, or an opener's name
            unnamed = unnamed_file and args[2] & unnamed_file == unnamed_file  # O_TMPFILE: a file in that folder
            verdict = why(args[0], "opens" if args[1] is None and not unnamed else None)
            if not verdict and kind_of(args[2]) is number and args[2] & writing and named_as_c(args[0]):
                verdict = f"it writes a file named as a C extension module ({shown(fspath_of(args[0]))})", False
        elif event in NAMING:
            verdict = why(args[0] if args else None, None)
        elif event == "os.chdir":
            verdict = why(args[0], None) or entered(args[0])
        elif event == "os.rename":
            verdict = why(args[0], "renames") or why(args[1], None)
            if not verdict and named_as_c(args[1]):
                verdict = f"it writes a file named as a C extension module ({shown(fspath_of(args[1]))})", False
        elif event in NETWORK:
            verdict = f"it uses the network ({event}), where a server could hand it the teacher's notebooks", False
        elif event == "code.__new__":
            verdict = "it makes a code object by hand (code.__new__), which can break the interpreter's checks", False
        elif event in PROCESSES:
            verdict = f"it starts or signals a process ({event})", False
        elif event in LINKS:
            verdict = f"it makes a link ({event})", False
        elif event in INSPECTING:
            verdict = f"it inspects or traces the interpreter ({event})", False
        elif event.startswith("ctypes."):
            verdict = f"it calls C through ctypes ({event})", False
        elif event == "import" and kind_of(args[0]) is text:
            for part in args[0].split("."):
                if part in NATIVE or part.startswith("_test"):
                    verdict = f"it imports {shown(args[0])}, which can start processes or run C unseen", False
            if not verdict and args[1] is not None and not named_as_c(args[1]):  # C loaded from a file
                verdict = f"it loads C from a file not named as an extension module ({shown(str(args[1]))})", False
        if verdict:
            reason = "score refuses this in a graded notebook: " + verdict[0]
            if verdict[1]:  # the teacher's notebooks: the process ends, and nothing after it earns a point
                try:
                    write(2, ("\n" + reason + "\n").encode("utf-8", "replace"))
                finally:
                    leave(86)  # _REFUSED_EXIT
            count, last = count + 1, reason
            raise Refused(reason)

    sys.addaudithook(hook)
    return lambda: (count, last)  # what was refused, for the answer that caught it


refusals = guard([arg[8:] for arg in sys.argv[2:] if arg.startswith("teacher:")],
                 [arg[4:] for arg in sys.argv[2:] if arg.startswith("git:")])
del guard
sys.path.append(sys.argv[1])  # the package, after the standard library
import site  # site-packages, and any .pth file in them, only now that the hook is there
site.main()
from mha_lists.tools.exercises import learner_without
without = learner_without()  # every function a check may set aside, found before the notebook's code runs


def serve(refusals, without):
    read, write, flush = sys.stdin.readline, sys.stdout.write, sys.stdout.flush
    loads, dumps, unpickle, b64decode = json.loads, json.dumps, pickle.loads, base64.b64decode
    quiet, quiet_err, StringIO = contextlib.redirect_stdout, contextlib.redirect_stderr, io.StringIO
    namespace = {"__name__": "__main__"}
    is_a, containers, most = isinstance, (list, tuple, dict), 1_000_000  # MAX_ANSWER_ITEMS

    def oversized(value):  # more than `most` lists, numbers and keys in an answer, counted without recursion
        stack, count = [value], 0
        while stack:
            item = stack.pop()
            count += 1
            if count > most:
                return True
            if is_a(item, containers):
                stack.extend(item)
        return False

    def first_line(e):
        try:
            text = str(e).strip().splitlines()
            return (type(e).__name__ + (": " + text[0][:300] if text else "")) or "an exception"
        except BaseException:
            return "an exception"

    while True:
        line = read()
        if not line:
            break
        job = loads(line)
        answer = {"nonce": job["nonce"]}
        with quiet(StringIO()), quiet_err(StringIO()):
            try:
                if "call" in job:
                    if job["call"] not in namespace:
                        raise NameError(f"name {job['call']!r} is not defined")
                    before = refusals()[0]
                    with without(*job.get("forbid", [])):  # the library's own, set aside while the answer runs
                        result = namespace[job["call"]](*unpickle(b64decode(job["args"])))
                    count, last = refusals()
                    if count != before:  # refused, and the answer caught it: still refused
                        raise PermissionError(last)
                    if oversized(result):  # far past any exercise's answer: refused before it is written out
                        answer["error"] = f"{job['call']} returned more than {most:,} lists and numbers"
                    else:
                        try:
                            answer["result"] = loads(dumps(result))
                        except (TypeError, ValueError):
                            answer["error"] = f"{job['call']} returned a {type(result).__name__}, not numbers and lists"
                else:
                    exec(compile(job["source"], job["name"], "exec"), namespace)
            except BaseException as e:
                answer["error"] = first_line(e)
        write(dumps(answer) + "\n")
        flush()


serve(refusals, without)
"""

# The checker's process: first the key, then the package imported; then, per check, the teacher's
# setup cells above it (once each) and the check, with each of the learner's functions replaced
# by a call through the grader. Its lines, both ways, are {"body", "mac"}.
_CHECKER = r"""
import base64, contextlib, hashlib, hmac, importlib, io, json, os, pickle, pkgutil, sys
try:  # Linux: /proc/<pid>/mem and /proc/<pid>/fd of this process closed to the user's other processes
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
except Exception:
    pass
read, write, flush = sys.stdin.readline, sys.stdout.write, sys.stdout.flush
key = bytes.fromhex(read().strip())
seq = [0]  # every line, both ways, numbered: a line cannot be played again
import mha_lists
for found in pkgutil.walk_packages(mha_lists.__path__, "mha_lists."):  # all of it, before the learner's code runs
    if not found.name.endswith("__main__"):
        importlib.import_module(found.name)

def send(body):
    text = json.dumps({**body, "seq": seq[0]}, sort_keys=True)
    seq[0] += 1
    write(json.dumps({"body": text, "mac": hmac.new(key, text.encode(), hashlib.sha256).hexdigest()}) + "\n")
    flush()

def receive():
    line = read()
    if not line:
        raise SystemExit(0)
    message = json.loads(line)
    if not hmac.compare_digest(message["mac"], hmac.new(key, message["body"].encode(), hashlib.sha256).hexdigest()):
        raise SystemExit("a line without the grader's key")
    body = json.loads(message["body"])
    if body.pop("seq", None) != seq[0]:
        raise SystemExit("a line out of turn")
    seq[0] += 1
    return body

class AnswerFailed(Exception):  # the learner's function raised, in the learner's process
    pass

def answer(name):  # what a check calls: the learner's function, in the learner's process
    def call(*args):
        forbid = list(getattr(sys.modules.get("mha_lists.tools.exercises"), "FORBIDDEN", []))
        send({"call": name, "args": base64.b64encode(pickle.dumps(args)).decode(), "forbid": forbid})
        reply = receive()
        if "error" in reply:
            raise AnswerFailed(reply["error"])
        return reply["result"]
    return call

teacher = {"__name__": "__main__"}
set_up = set()
import importlib.util
imported = set()  # every module's file, and the bytecode cache a source file is run from
for name in [getattr(module, "__file__", None) for module in list(sys.modules.values())]:
    if isinstance(name, str):
        imported.add(name)
        if name.endswith(".py"):
            imported.add(importlib.util.cache_from_source(name))
send({"ready": True, "files": sorted(imported)})
while True:
    cell = receive()
    error = None
    if cell.get("term"):  # the teacher's term, for hidden_seed: only this process ever holds it
        os.environ["MHA_LISTS_TERM"] = cell["term"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for index, source in cell["setup"]:
                if index not in set_up:
                    set_up.add(index)
                    exec(compile(source, f"<teacher's cell {index}>", "exec"), teacher)
            for name in cell["answers"]:
                teacher[name] = answer(name)
            exec(compile(cell["source"], cell["name"], "exec"), teacher)
    except AnswerFailed as e:
        error = str(e)
    except Exception as e:
        text = str(e).strip().splitlines()
        error = type(e).__name__ + (": " + text[0][:300] if text else "")
    send({"done": error})
"""

MAX_TIMEOUT = 3600
_REFUSED_EXIT = 86  # the learner's process ends with it when it tried to read the teacher's notebooks


def _reason(error: str) -> str:
    if error.startswith("NotImplementedError"):
        return "not answered (NotImplementedError: the answer cell still holds the stub)"
    return error


_REFUSED = "score refuses this in a graded notebook: "


MAX_LINE = 50_000_000  # characters in one line from a process: far past any answer (the learner's process refuses
# an answer of more than a million lists and numbers before it writes it), short of filling the grader's memory
_TOO_LONG = object()  # what the reader puts in place of a longer line


class _Stopped(Exception):
    """Why the grading of a notebook ended before its last cell."""


class _Process:
    """A Python started with ``code``, spoken to in lines of JSON, each answer awaited until ``deadline``."""

    def __init__(self, command: list[str], folder: str, env: dict, deadline: float, timeout: float, who: str) -> None:
        # Imported here, not at the top: the learner's process imports this module (check_close,
        # without) and must never hold _posixsubprocess, whose fork_exec raises no audit event.
        import subprocess
        self.deadline, self.timeout, self.who = deadline, timeout, who
        self.stderr = open(pathlib.Path(folder) / f"{who}.stderr", "w+", encoding="utf-8", errors="replace")
        self.child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self.stderr, cwd=folder, env=env, text=True, encoding="utf-8",
                                      errors="replace")
        self.lines: queue.Queue = queue.Queue()  # its lines, then None when its stdout closes
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        """Its lines, each up to MAX_LINE characters; past that, _TOO_LONG and no more (it is killed at close)."""
        while True:
            line = self.child.stdout.readline(MAX_LINE + 1)
            if len(line) > MAX_LINE:
                self.lines.put(_TOO_LONG)
                return
            self.lines.put(line or None)
            if not line:
                return

    def send(self, body: dict) -> None:
        try:
            self.child.stdin.write(json.dumps(body) + "\n")
            self.child.stdin.flush()
        except OSError:  # it has gone; the next line says so
            pass

    def line(self) -> dict:
        try:
            line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except queue.Empty:
            raise _Stopped(f"the notebook ran longer than the time limit ({self.timeout:g} s)") from None
        if line is _TOO_LONG:
            raise _Stopped(f"the notebook wrote a line of more than {MAX_LINE:,} characters to the {self.who}'s "
                           f"channel (far larger than any answer)")
        if line is None:
            self.child.wait()
            self.stderr.seek(0)
            last = (self.stderr.read().strip().splitlines() or [f"exit code {self.child.returncode}"])[-1]
            if self.child.returncode == _REFUSED_EXIT:  # its hook's line, unless the notebook moved stderr
                raise _Stopped(last[:300] if last.startswith(_REFUSED) else
                               _REFUSED + "it reads the teacher's notebooks")
            raise _Stopped(f"the notebook stopped the {self.who} ({last[:200]})")
        try:
            body = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, or nested past what json.loads can read
            body = None
        if not isinstance(body, dict):
            raise _Stopped(f"the {self.who}'s channel was written to (its answers can no longer be trusted)")
        return body

    def close(self) -> None:
        self.child.kill()  # nothing the notebook left behind runs after the last cell
        self.child.wait()
        self.reader.join(timeout=10)
        for pipe in (self.child.stdin, self.child.stdout, self.stderr):
            try:
                pipe.close()
            except OSError:  # stdin's last write never reached the killed process
                pass


class _Checker(_Process):
    """The checker's process: every line both ways carries an HMAC under a key it got first."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.seq = 0  # every line, both ways, numbered: a line cannot be played again
        self.key = secrets.token_bytes(32)
        self.child.stdin.write(self.key.hex() + "\n")
        self.child.stdin.flush()

    def _mac(self, text: str) -> str:
        return hmac.new(self.key, text.encode(), hashlib.sha256).hexdigest()

    def send(self, body: dict) -> None:
        text = json.dumps({**body, "seq": self.seq}, sort_keys=True)
        self.seq += 1
        super().send({"body": text, "mac": self._mac(text)})

    def line(self) -> dict:
        message = super().line()
        text, mac = message.get("body"), message.get("mac")
        if not (isinstance(text, str) and isinstance(mac, str) and hmac.compare_digest(mac, self._mac(text))):
            raise _Stopped("the checker's channel was written to (its answers can no longer be trusted)")
        body = json.loads(text)
        if body.pop("seq", None) != self.seq:
            raise _Stopped("the checker's channel was written to (a line out of turn)")
        self.seq += 1
        return body


def _ask(learner: _Process, job: dict) -> dict:
    """Send the learner's process a job; its answer, which must carry the job's nonce."""
    nonce = secrets.token_hex(16)
    learner.send({**job, "nonce": nonce})
    answer = learner.line()
    if answer.get("nonce") != nonce:
        raise _Stopped("the notebook wrote to the grader's channel (its answers can no longer be trusted)")
    return answer


def _digest(path: pathlib.Path) -> bytes:
    """A file's SHA-256, or b"" when it is gone: how a run notices a file a notebook changed."""
    return hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b""


def _package_files(imported: tuple[str, ...] = ()) -> dict[str, bytes]:
    """What a checker imports, each file with its digest: the package's source files, and ``imported``, the files
    a checker had loaded when it was ready: every module's (the standard library's it uses too) and the
    bytecode cache (.pyc) it was run from, which a notebook could replace while leaving the source alone."""
    root = pathlib.Path(__file__).resolve().parents[1]
    sources = sorted(root.rglob("*.py"))
    files = {str(path.relative_to(root.parent)): _digest(path) for path in sources}
    return {**files, **{name: _digest(pathlib.Path(name)) for name in imported if pathlib.Path(name) not in sources}}


def _changed_files(before: dict[str, bytes]) -> list[str]:
    now = _package_files(tuple(name for name in before if os.path.isabs(name)))
    return sorted(name for name in set(before) | set(now) if before.get(name) != now.get(name))


def _checker_command(package_root: str) -> list[str]:
    """The checker's Python: isolated (-I: no environment variables, no user site, not the current folder)
    and without site-packages (-S), so no .pth or sitecustomize file a notebook might write can run in a later
    checker; the package's folder after the standard library's, so a json.py beside it is not json."""
    return [sys.executable, "-I", "-S", "-c", f"import sys\nsys.path.append({package_root!r})\n{_CHECKER}"]


def _checker_imports(package_root: str, folder: str) -> tuple[str, ...]:
    """The files of the modules a checker has loaded when it is ready: what the next checker would import."""
    checker = _Checker(_checker_command(package_root), folder, dict(os.environ), time.monotonic() + 120, 120,
                       "checker")
    try:
        ready = checker.line()
    finally:
        checker.close()
    return tuple(ready.get("files") or ())


def _guarded(source: Optional[pathlib.Path] = None) -> list[str]:
    """What the learner's process may not read, as its arguments: ``teacher:FOLDER`` for the teacher's
    notebooks (``source``, and this checkout's notebooks/exercises), and ``git:PATH`` for the .git of the
    checkout each is in, whose objects hold every version of them."""
    found = []
    needed = {"the package mha_lists": pathlib.Path(__file__).resolve().parents[2], "Python": sys.prefix,
              "Python's standard library": sys.base_prefix, "the temporary folder": tempfile.gettempdir()}
    for folder in (EXERCISES, source):
        if folder is None or not os.path.isdir(folder):
            continue
        folder = pathlib.Path(os.path.realpath(folder))
        for what, path in needed.items():
            path = pathlib.Path(os.path.realpath(path))
            if folder == path or folder in path.parents:
                raise ValueError(f"score: source {_shown(folder)} holds {what}, which grading reads; keep the "
                                 "teacher's notebooks in a folder of their own")
        found.append(f"teacher:{folder}")
        for parent in (folder, *folder.parents):
            git = parent / ".git"
            if git.is_dir():
                found.append(f"git:{git}")
                break
            if git.is_file():  # a worktree's: "gitdir: PATH", and that folder's commondir, where the objects are
                found.append(f"git:{git}")
                line = git.read_text(encoding="utf-8", errors="replace").partition("\n")[0]
                if line.startswith("gitdir: "):
                    gitdir = (parent / line[len("gitdir: "):].strip()).resolve()
                    found.append(f"git:{gitdir}")
                    common = gitdir / "commondir"
                    if common.is_file():
                        found.append(f"git:{(gitdir / common.read_text(encoding='utf-8').strip()).resolve()}")
                break
    return list(dict.fromkeys(found))


def _run(cells: list[_Cell], timeout: float, term: Optional[str] = None,
         source: Optional[pathlib.Path] = None) -> tuple[dict[str, Optional[str]],
                                                                                  Optional[str]]:
    """Run a notebook's cells, the learner's and the checks, each in its own process; one cell at a time.

    Returns ({grade_id: error or None}, why it stopped early or None).
    """
    package_root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               PYTHONHASHSEED="0")
    env.pop(TERM_VARIABLE, None)  # a term the teacher exported for nbgrader never reaches the learner's process
    # The learner's process starts without site-packages and without PYTHONPATH (-S), so nothing
    # of the notebook's (a .pth file, a json.py beside the package) runs before its audit hook;
    # it adds the package's folder, then site-packages, itself, after the hook (_LEARNER).
    learner_env = {name: value for name, value in env.items() if name != "PYTHONPATH"}
    learner_command = [sys.executable, "-S", "-c", _LEARNER, package_root, *_guarded(source)]
    # The checker needs nothing but the standard library and the package (_checker_command).
    deadline = time.monotonic() + timeout
    ran: dict[str, Optional[str]] = {}
    stopped = None
    files = _package_files()
    with tempfile.TemporaryDirectory(prefix="mha-score-") as folder:
        processes: list[_Process] = []
        try:
            checker = _Checker(_checker_command(package_root), folder, env, deadline, timeout, "checker")
            processes.append(checker)
            ready = checker.line()  # the package is imported before the learner's code starts
            if ready.get("ready") is not True or not isinstance(ready.get("files"), list):
                raise _Stopped("the checker did not start")
            files = _package_files(tuple(name for name in ready["files"] if isinstance(name, str)))
            learner = _Process(learner_command, folder, learner_env, deadline, timeout, "grader")
            processes.append(learner)
            for n, cell in enumerate(cells):
                if cell.grade_id is None:
                    _ask(learner, {"source": cell.source, "name": f"<cell {n}>"})
                    continue
                checker.send({"source": cell.source, "name": f"<cell {n}>", "setup": list(cell.setup),
                              "answers": list(cell.answers), "term": term})
                while True:
                    body = checker.line()
                    if "done" in body:
                        ran[cell.grade_id] = body["done"] if isinstance(body["done"], str) else None
                        break
                    answer = _ask(learner, {"call": body.get("call"), "args": body.get("args"),
                                            "forbid": body.get("forbid") or []})
                    error = answer.get("error")
                    if "result" in answer and error is None:
                        checker.send({"result": answer["result"]})
                    else:
                        checker.send({"error": error if isinstance(error, str) and error else "an exception"})
        except _Stopped as e:
            stopped = str(e)
        finally:
            for process in processes:
                process.close()
    changed = _changed_files(files)
    if changed:  # the checks ran on what was imported first, but what comes next would not
        return {}, (f"the notebook changed the files a checker imports ({', '.join(map(_shown, changed[:3]))}): "
                    "grade nothing after it")
    return ran, stopped


class Score(NamedTuple):
    """Points of one notebook."""

    earned: float
    possible: float
    failed: dict[str, str]  # grade_id of every check cell worth 0 -> the reason


TERM_VARIABLE = "MHA_LISTS_TERM"  # the teacher's term under nbgrader: export it before ``nbgrader autograde``


def hidden_seed(task: str, default: int) -> int:
    """The seed a hidden test draws its inputs from. Without a term it is ``default``, the number written in
    the teacher's notebook, which anyone can read in the repository; graded with the teacher's term
    (``score --term WORD``, or the ``MHA_LISTS_TERM`` environment variable under nbgrader) it is drawn from
    HMAC-SHA256 of the task under the term, so nobody who lacks the term knows the hidden inputs.

    >>> hidden_seed("04_my_softmax_check", 4404) == 4404 or "MHA_LISTS_TERM" in os.environ
    True
    """
    term = check_term("hidden_seed", f"the {TERM_VARIABLE} variable", os.environ.get(TERM_VARIABLE) or None)
    if term is None:
        return default
    return int.from_bytes(hmac.new(term.encode(), task.encode(), hashlib.sha256).digest()[:6], "big")


# A function an exercise asks for -> the other functions of the library that compute the same answer: the
# unchecked arithmetic it runs (one_head: every head of attention, multi_head_attention and attention_trace,
# through head_loop and trace_layer), and explained_weights, whose table of weights is softmax's, step by step.
TWINS = {
    "softmax": ("core.softmax_and_masks.softmax_of_rows", "teaching.display.explained_weights"),
    "softmax_rows": ("core.softmax_and_masks.softmax_of_rows", "teaching.display.explained_weights"),
    "concat_heads": ("core.matrix.joined",),
    "attention": ("core.attention.one_head",),
    "multi_head_attention": ("core.attention.one_head",),
    "attention_trace": ("core.attention.one_head",),
    "teaching.softmax_row.softmax_backward": ("core.gradients.softmax_rows_backward",),
    "teaching.model.cross_entropy": ("teaching.model.loss_of",),
    "teaching.model.adam_step": ("teaching.model.adam_update",),
}
FORBIDDEN: list[str] = []  # inside ``without``: the library functions named (score hands them to the learner's process)
_ASIDE = threading.RLock()  # one block sets functions aside at a time, in a process: another thread waits for it


def _library_function(name: str) -> Any:
    """``"softmax"`` -> mha_lists.softmax; ``"teaching.model.adam_step"`` -> that module's adam_step."""
    module, _, attribute = f"mha_lists.{name}".rpartition(".")
    try:
        function = getattr(importlib.import_module(module), attribute, None)
    except ImportError:
        function = None
    if not callable(function) or not hasattr(function, "__code__") or function.__code__.co_freevars:
        raise ValueError(f"without: {shorten(name)} is not a function of mha_lists that can be set aside")
    return function


def _with_twins(names: tuple, twins: dict) -> tuple:
    """``names`` and each one's twins, in order, each once."""
    return tuple(dict.fromkeys(part for name in names for part in (name, *twins.get(name, ()))))


@contextlib.contextmanager
def _set_aside(functions: dict[str, Any], lock: Any) -> Any:
    """Inside, each function of ``functions`` (name -> function) raises when called, in every thread; after,
    each has its own code back. Blocks nest, and a second thread's block waits for the first to end."""
    with lock:
        saved = [(function, function.__code__) for function in functions.values()]
        try:
            for name, function in functions.items():
                trap: dict = {}
                exec(f"def f(*args, **kwargs):\n    raise RuntimeError(\"calls the library's {name.rpartition('.')[2]}; "
                     f"the exercise asks for your own\")", trap)
                function.__code__ = trap["f"].__code__
            yield
        finally:
            for function, code in reversed(saved):
                function.__code__ = code


@contextlib.contextmanager
def without(*names: str) -> Any:
    """Inside, each of the library's functions ``names`` raises when called: a hidden test that an answer is the
    student's own work, not a call of the library's function that the exercise asks them to write. Compute the
    expected value outside the block (the check's own call of the library would raise too). Under ``score`` the
    learner's process sets the same functions aside while the answer runs. It raises the bar, no more: a
    student can still copy the library's code.

    >>> from mha_lists import softmax
    >>> with without("softmax"):
    ...     softmax([0.0])
    Traceback (most recent call last):
    ...
    RuntimeError: calls the library's softmax; the exercise asks for your own
    >>> softmax([0.0])
    [1.0]

    Each function's twins (``TWINS``: the library's other ways to the same answer) are set aside with it. The
    functions raise in every thread while a block is open; a block in a second thread waits for the first.
    """
    names = _with_twins(names, TWINS)
    functions = {name: _library_function(name) for name in names}
    with _ASIDE:
        FORBIDDEN[:] = names
        try:
            with _set_aside(functions, _ASIDE):
                yield
        finally:
            FORBIDDEN.clear()


def learner_without() -> Any:
    """``without`` as ``score``'s learner process uses it: every function a check may set aside (each in
    ``TWINS``) is found now, before the notebook's code runs, and held here with what sets it aside. So a
    notebook that rebinds this module's names (``_library_function``, ``TWINS``, ``_set_aside``) or a
    module's functions changes nothing: the functions set aside are the library's own.

    >>> from mha_lists import softmax
    >>> aside = learner_without()
    >>> with aside("softmax"):
    ...     softmax([0.0])
    Traceback (most recent call last):
    ...
    RuntimeError: calls the library's softmax; the exercise asks for your own
    """
    twins = {name: tuple(parts) for name, parts in TWINS.items()}
    functions = {name: _library_function(name) for key, parts in twins.items() for name in (key, *parts)}
    set_aside, lock, with_twins = _set_aside, _ASIDE, _with_twins

    @contextlib.contextmanager
    def without_in_learner(*names: str) -> Any:
        named = with_twins(names, twins)
        unknown = [name for name in named if name not in functions]
        if unknown:
            raise ValueError(f"without: {shorten(unknown[0])} is not a function a check may set aside (TWINS)")
        with set_aside({name: functions[name] for name in named}, lock):
            yield

    return without_in_learner


def exercise_of(nb: dict, teachers: dict[str, dict]) -> str:
    """Which teacher's notebook ``nb`` is a copy of, by what is in it, not by its file name: the one whose
    nbgrader cell ids (``grade_id``) it shares the most of. ``teachers`` maps a name to a notebook.

    >>> def nb(*ids):
    ...     cells = [{"cell_type": "code", "source": "", "metadata": {"nbgrader": {"grade_id": i}}} for i in ids]
    ...     return {"nbformat": 4, "metadata": {}, "cells": cells}
    >>> exercise_of(nb("05_a"), {"04.ipynb": nb("04_a", "04_b"), "05.ipynb": nb("05_a", "05_b")})
    '05.ipynb'
    """
    check_notebook("exercise_of", "nb", nb)
    if not isinstance(teachers, dict) or not teachers:
        raise TypeError(f"exercise_of: teachers must be a non-empty dict {{name: notebook}}, got {shorten(teachers)}")
    for name, teacher in teachers.items():
        check_notebook("exercise_of", f"teachers[{shorten(name)}]", teacher)
    ids = set(_positions(nb))
    shared = {name: len(ids & set(_positions(teacher))) for name, teacher in teachers.items()}
    best = max(shared.values(), default=0)
    if best == 0:
        raise NotebookError("exercise_of: no cell of any exercise in it (no nbgrader cell id of the teacher's "
                            "notebooks): is it an exercise notebook?")
    found = sorted(name for name, n in shared.items() if n == best)
    if len(found) > 1:
        raise NotebookError(f"exercise_of: it holds as many cells of {' and of '.join(map(_shown, found))}; "
                            "hand in one exercise per file")
    return found[0]


def check_timeout(func: str, name: str, timeout: object) -> float:
    """Seconds: a number more than 0 and at most MAX_TIMEOUT."""
    if not _is_number(timeout) or not 0 < timeout <= MAX_TIMEOUT:
        raise ValueError(f"{func}: {name} must be more than 0 and at most {MAX_TIMEOUT} seconds, "
                         f"got {shorten(timeout)}")
    return timeout


def score(nb: dict, teacher: dict, *, timeout: float = 60, term: Optional[str] = None,
          source: Optional[pathlib.Path] = None) -> Score:
    """Grade notebook ``nb`` against the teacher's: check cells as handed out, then run with hidden tests.

    Every code cell of ``nb`` runs in order in a fresh Python (its stored outputs are ignored);
    each check cell runs as the teacher wrote it, hidden tests included, in a Python of its own
    that calls the learner's functions through the grader (see the module's docstring). A check
    cell earns its points if ``tampering`` finds nothing wrong with it and it runs without an
    error. The learner's code may not read the teacher's notebooks: ``source`` (their folder, if
    not notebooks/exercises) and notebooks/exercises are closed to it (see the module's docstring).
    """
    check_notebook("score", "nb", nb)
    if source is not None:
        check_path("score", "source", source)
    check_notebook("score", "teacher", teacher)
    check_timeout("score", "timeout", timeout)
    check_term("score", "term", term)
    graded = _graded(teacher)
    if not graded:
        raise NotebookError("score: the teacher's notebook has no graded cells")
    theirs = {grade_id: teacher["cells"][n] for n, grade_id in graded}
    reasons = tampering(nb, teacher)
    checks = _checks(teacher)
    cells, seen = [], set()
    for cell in nb["cells"]:
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id in theirs:
            if grade_id not in seen and cell["cell_type"] == "code":  # run the teacher's check, hidden tests too
                cells.append(checks[grade_id])
            seen.add(grade_id)
        elif cell["cell_type"] == "code":
            cells.append(_Cell(_source(cell)))
    ran, stopped = _run(cells, timeout, term, source)
    earned, possible, failed = 0, 0, {}
    for n, grade_id in graded:
        points = _nbgrader(teacher["cells"][n]).get("points", 0)
        possible += points
        if grade_id in reasons:
            failed[grade_id] = reasons[grade_id]
        elif grade_id not in ran:
            failed[grade_id] = f"did not run: {stopped}" if stopped else "did not run"
        elif ran[grade_id] is not None:
            failed[grade_id] = _reason(ran[grade_id])
        else:
            earned += points
    return Score(earned, possible, failed)


# === A student's own check, in the notebook: every task's visible check again, and a total ===
#
# A kernel in JupyterLite cannot read the notebook it runs (without a service worker it sees no
# files beside it), so what self_check runs ships inside the package: each exercise's student copy,
# cut down to its code cells up to the last check (SELF_CHECKS, written by ``self-checks``).

SELF_CHECKS = pathlib.Path(__file__).resolve().parents[1] / "data" / "self_checks.json"


def _heading(source: str) -> str:
    """A markdown cell's first heading, without a trailing "(2 points)": "Exercise 1 — your own softmax"."""
    for line in source.split("\n"):
        if line.startswith("#"):
            return re.sub(r"\s*\(\d+ points?\)\s*$", "", line.lstrip("#").strip())
    return ""


def self_checks(source: pathlib.Path = EXERCISES) -> dict:
    """What ``self_check`` runs, for every exercise notebook in ``source``, from its student copy (no solution,
    no hidden test): {notebook name: {"title", "file", "cells": [...]}}, where each cell, in order up to the last
    check, is {"setup": source}, {"answers": [names a solution cell defines]} or {"check": grade_id, "points",
    "title" (the heading above it), "source" (its visible lines)}.

    >>> checks = self_checks()["04_softmax_and_masks"]
    >>> checks["title"], [(c["title"], c["points"]) for c in checks["cells"] if "check" in c]
    ('Exercises · 04 Softmax and masks', [('Exercise 1 — your own softmax', 2), ("Exercise 2 — a head's weights under the causal mask", 2)])
    """
    source = check_path("self_checks", "source", source)
    if not source.is_dir():
        raise NotebookError(f"self_checks: source {_shown(source)} is not a folder")
    found = {}
    for path in sorted(source.glob("*.ipynb")):
        nb = student_copy(read_notebook(path))
        graded = [n for n, _ in _graded(nb)]
        if not graded:
            continue
        cells, title, heading = [], "", ""
        for cell in nb["cells"][:graded[-1] + 1]:
            text, role = _source(cell), _role(cell)
            if cell["cell_type"] == "markdown":
                heading = _heading(text) or heading
                title = title or heading
            elif role == "check":
                meta = _nbgrader(cell)
                cells.append({"check": meta["grade_id"], "points": meta.get("points", 0), "title": heading,
                              "source": text})
            elif role == "answer":
                cells.append({"answers": _defined(text)})
            elif role == "setup":
                cells.append({"setup": text})
        found[path.stem] = {"title": title, "file": path.name, "cells": cells}
    if not found:
        raise NotebookError(f"self_checks: no exercise notebook (one with graded cells) in {_shown(source)}")
    return found


def write_self_checks(source: pathlib.Path = EXERCISES, out: pathlib.Path = SELF_CHECKS) -> pathlib.Path:
    """Write ``self_checks(source)`` as JSON to ``out`` (by default the package's, which a test compares with
    the exercise notebooks: run this after changing one)."""
    checks = self_checks(source)
    out = check_path("write_self_checks", "out", out)
    out.write_text(json.dumps(checks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


class SelfCheck(NamedTuple):
    """What ``self_check`` found: points earned on the visible checks, points possible, and each task's
    (title, points, reason it earned nothing, or "" when correct)."""

    earned: float
    possible: float
    tasks: list


def _self_reason(error: Exception, answers: list[str]) -> str:
    """Why a task earned nothing, in a learner's words."""
    if isinstance(error, NotImplementedError):
        return "not written yet: your function still raises NotImplementedError"
    if isinstance(error, NameError) and getattr(error, "name", None) in answers:
        return f"{error.name} is not defined: run the cell that defines it, then this one again"
    text = str(error).splitlines()[0] if str(error) else ""
    if isinstance(error, CheckFailed):
        return text
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def self_check(exercise: str, namespace: dict) -> SelfCheck:
    """Run every visible check of ``exercise`` (a notebook's name, "04_softmax_and_masks") on the answers in
    ``namespace`` (pass ``globals()``), print one line per task, the total and how to hand the notebook in.

    The checks run as handed out, on the notebook's own example (its setup cells as written), in a namespace
    of their own: ``namespace`` is only read, and an edit to the example does not change what is checked.
    A task whose function is missing or still raises NotImplementedError earns 0 points, with the reason.
    This is the visible checks only: the teacher's grading runs them again and hidden tests too.

    >>> answers = {}
    >>> exec("import math\\ndef my_softmax(row):\\n    e = [math.exp(s - max(row)) for s in row]\\n"
    ...      "    return [v / sum(e) for v in e]", answers)
    >>> result = self_check("04_softmax_and_masks", answers)  # doctest: +ELLIPSIS
    Exercises · 04 Softmax and masks: the checks, run again on your answers
      Exercise 1 — your own softmax: 2 of 2 points; correct
      Exercise 2 — a head's weights under the causal mask: 0 of 2 points; causal_weights is not defined: ...
    Total: 2 of 4 points on these checks; ...
    To hand in: save (Ctrl+S), then hand in this notebook's file, 04_softmax_and_masks.ipynb (in JupyterLite: ...
    >>> result.earned, result.possible
    (2, 4)
    """
    check_type("self_check", "exercise", exercise, str, "a str (a notebook's name, e.g. '04_softmax_and_masks')")
    check_type("self_check", "namespace", namespace, dict, "a dict (pass globals())")
    known = json.loads(SELF_CHECKS.read_text(encoding="utf-8"))
    if exercise not in known:
        raise ValueError(f"self_check: exercise is {shorten(exercise)}; it must be one of {', '.join(known)}")
    spec = known[exercise]
    own: dict = {"__name__": "__main__"}  # the checks' namespace: the handed-out setup, then your answers
    answers: list[str] = []
    tasks = []
    for cell in spec["cells"]:
        if "setup" in cell:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(cell["setup"], f"<{exercise}: setup>", "exec"), own)
        elif "answers" in cell:
            answers += cell["answers"]
            own.update({name: namespace[name] for name in cell["answers"] if name in namespace})
        else:
            reason = ""
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(cell["source"], f"<{exercise}: {cell['check']}>", "exec"), own)
            except Exception as error:  # the learner's answer: any error is a reason, never a crash
                reason = _self_reason(error, answers)
            tasks.append((cell["title"], cell["points"], reason))
    earned = sum(points for _, points, reason in tasks if not reason)
    possible = sum(points for _, points, _ in tasks)
    print(f"{spec['title']}: the checks, run again on your answers")
    for title, points, reason in tasks:
        print(f"  {title}: {_points(points if not reason else 0)} of {_points(points)} "
              f"point{'s' * (points != 1)}; {reason or 'correct'}")
    print(f"Total: {_points(earned)} of {_points(possible)} points on these checks; grading runs them again, "
          "with hidden ones on other inputs.")
    print(f"To hand in: save (Ctrl+S), then hand in this notebook's file, {spec['file']} (in JupyterLite: "
          "File > Download; the name the browser gives it is fine).")
    return SelfCheck(earned, possible, tasks)


# === Command line ===


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} is not a number of seconds") from None
    if not 0 < value <= MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be more than 0 and at most {MAX_TIMEOUT}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.exercises",
                                description="Student copies of the exercise notebooks, and their points.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    copies = sub.add_parser("student-copies", help="write the notebooks with solutions and hidden tests removed")
    copies.add_argument("outdir", type=pathlib.Path, help="folder to write into, e.g. student-copies/")
    copies.add_argument("--source", type=pathlib.Path, default=EXERCISES,
                        help="folder of the teacher's notebooks (default: notebooks/exercises)")
    checks = sub.add_parser("self-checks", help="write what self_check runs (after changing an exercise notebook)")
    checks.add_argument("--source", type=pathlib.Path, default=EXERCISES,
                        help="folder of the teacher's notebooks (default: notebooks/exercises)")
    checks.add_argument("--out", type=pathlib.Path, default=SELF_CHECKS,
                        help="file to write (default: the package's, mha_lists/data/self_checks.json)")
    points = sub.add_parser("score", help="grade submitted notebooks (they are run again, hidden tests included)",
                            epilog="Exit code 0: every file graded; 2: some file could not be graded (one line each).")
    points.add_argument("notebooks", type=pathlib.Path, nargs="+",
                        help="submitted .ipynb files, or folders of them (a class's hand-ins), under any file names")
    points.add_argument("--source", type=pathlib.Path, default=EXERCISES,
                        help="folder of the teacher's notebooks, closed to the learner's code; each submission "
                             "is matched to one by its cells (default: notebooks/exercises)")
    points.add_argument("--term", type=term_argument, default=None, metavar="WORD",
                        help="the teacher's secret word: the hidden tests draw their inputs from it (hidden_seed)")
    points.add_argument("--csv", type=pathlib.Path, default=None,
                        help="also write one row per task: file, exercise, task, points, possible, reason")
    points.add_argument("--timeout", type=_seconds, default=60.0,
                        help="seconds one notebook may run (default 60, at most 3600)")
    return parser


def _points(x: float) -> str:
    return f"{x:g}"


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "student-copies":
        try:
            written = write_student_copies(args.source, args.outdir)
        except OSError as e:  # out cannot be written
            parser.error(f"cannot write {_shown(e.filename or args.outdir)}: {_why(e)}")
        except ValueError as e:
            parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
        for path in written:
            print(path)
        return 0
    if args.command == "self-checks":
        try:
            print(write_self_checks(args.source, args.out))
        except OSError as e:
            parser.error(f"cannot write {_shown(e.filename or args.out)}: {_why(e)}")
        except ValueError as e:
            parser.error(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return 0
    if not os.path.isdir(args.source):  # os.path's: False for a name too long, where pathlib's raises
        parser.error(f"--source {_shown(args.source)} is not a folder")
    if args.csv is not None and (args.csv.is_dir() or not args.csv.parent.is_dir()):
        parser.error(f"--csv {_shown(args.csv)}: " + ("is a folder" if args.csv.is_dir() else "its folder does not exist"))
    total_earned = total_possible = 0
    unread = 0
    teacher_notebooks = {}  # every exercise a submission may be a copy of, by file name
    for path in sorted(args.source.glob("*.ipynb")):
        try:
            teacher_notebooks[path.name] = read_notebook(path)
        except (OSError, ValueError) as e:  # that exercise cannot be graded; the others can
            unread += 1
            why = str(e).splitlines()[0].removeprefix("read_notebook: ") if str(e) else type(e).__name__
            print(f"{parser.prog}: error: --source: {why}", file=sys.stderr)
    if not teacher_notebooks:
        parser.error(f"--source {_shown(args.source)} holds no readable .ipynb notebook")
    try:
        _guarded(args.source)  # closed to the learner's code: it must not hold what grading reads
    except ValueError as e:
        parser.error(str(e).removeprefix("score: ").replace("source", "--source", 1))
    submissions = []  # a folder stands for the notebooks in it, in name order
    for path in args.notebooks:
        inside = sorted(path.glob("*.ipynb")) if os.path.isdir(path) else [path]
        submissions += inside or [path]  # an empty folder is reported as the folder
    read: list = []  # every file is read before any notebook runs: none can change the next one or a teacher's
    for path in submissions:
        try:
            if os.path.islink(path):  # an archive of hand-ins keeps links, and a link may name the teacher's notebook
                raise ValueError(f"{_shown(path)} is a symbolic link, not a notebook a student handed in; grade "
                                 "the file itself")
            nb = read_notebook(path)
            exercise = exercise_of(nb, teacher_notebooks)
            read.append((path, exercise, (nb, teacher_notebooks[exercise])))
        except (OSError, ValueError) as e:
            read.append((path, "", e))
    with tempfile.TemporaryDirectory(prefix="mha-score-") as folder:
        files = _package_files(_checker_imports(str(pathlib.Path(__file__).resolve().parents[2]), folder))
    teachers = sorted({args.source / exercise for _, exercise, notebooks in read
                       if not isinstance(notebooks, Exception)})
    digests = [_digest(path) for path in teachers]
    rows = []  # for --csv: file, exercise, task, points, possible, reason
    for path, exercise, notebooks in read:
        if _changed_files(files):
            parser.error(f"{_shown(path)}: not graded, nor what follows: an earlier notebook changed the files "
                         "a checker imports")
        if [_digest(teacher) for teacher in teachers] != digests:
            parser.error(f"{_shown(path)}: not graded, nor what follows: an earlier notebook changed the teacher's "
                         f"notebooks in {_shown(args.source)} (restore them before grading again)")
        try:
            if isinstance(notebooks, Exception):
                raise notebooks
            result = score(*notebooks, timeout=args.timeout, term=args.term, source=args.source)
        except (OSError, ValueError) as e:
            unread += 1
            message = str(e).splitlines()[0] if str(e) else type(e).__name__
            if isinstance(e, OSError):  # its text repeats the path, which may be long
                message = f"cannot read {_shown(e.filename or path)}: {_why(e)}"
            message = message.removeprefix("read_notebook: ").removeprefix("exercise_of: ")
            if not message.startswith(str(path)):
                message = f"{_shown(path)}: {message}"
            print(f"{parser.prog}: error: {_printable(message)}", file=sys.stderr)
            rows.append([str(path), exercise, "", 0, "", f"not graded: {message}"])
            continue
        total_earned, total_possible = total_earned + result.earned, total_possible + result.possible
        named = "" if path.name == exercise else f" (exercise {exercise})"
        print(f"{_printable(path)}{named}: {_points(result.earned)}/{_points(result.possible)} points")
        for grade_id, why in result.failed.items():
            print(f"  {grade_id}: 0 points, {_printable(why)}")
        for n, grade_id in _graded(notebooks[1]):
            possible = _nbgrader(notebooks[1]["cells"][n]).get("points", 0)
            earned = 0 if grade_id in result.failed else possible
            rows.append([str(path), exercise, grade_id, _points(earned), _points(possible),
                         result.failed.get(grade_id, "")])
    if len(submissions) > 1:
        print(f"total: {_points(total_earned)}/{_points(total_possible)} points"
              + (f" ({unread} file{'s' * (unread > 1)} not graded)" if unread else ""))
    if args.term is None and not os.environ.get(TERM_VARIABLE) and len(rows) > unread:
        print("WARNING: graded without --term, so the hidden tests drew their inputs from the seeds written in the "
              "teacher's notebooks, which anyone can read in the repository. Grade with --term WORD, a secret "
              "word of yours, new each term.")
    if args.csv is not None:
        try:
            with open(args.csv, "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                writer.writerow(["file", "exercise", "task", "points", "possible", "reason"])
                writer.writerows(rows)
        except OSError as e:
            parser.error(f"cannot write {_shown(args.csv)}: {_why(e)}")
        print(f"wrote {args.csv}: {len(rows)} rows")
    return 2 if unread else 0


if __name__ == "__main__":
    sys.exit(main())
