"""Checking arguments: one helper per rule, so every public function says the same thing the same way.

Each helper takes ``func`` (the public function the user called) and ``name``
(the argument), and raises an error whose message starts with ``func``:

    ShapeError: matmul: A is 5x16 and B is 8x8; A's columns (16) must equal B's rows (8)

===========================  ===============================================
check_matrix, check_vector   rectangular lists of numbers (finite, if asked)
check_positive_int           sizes and counts: 1, 2, 3, ...
check_bool                   a switch: True or False
check_number                 one real number (finite, positive, if asked)
check_same_shapes            a list of matrices that must all have one shape
all_finite, too_large         a sum or product that overflowed float64
reported_as                  errors of inner steps, reported under the name
                             of the public function the user called
===========================  ===============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain


class ShapeError(ValueError):
    """A matrix, vector or mask has the wrong shape for the operation."""


def describe(shape_: tuple[int, ...]) -> str:
    """Write a shape the way the error messages do: ``(5, 16)`` -> ``'5x16'``."""
    return "x".join(str(n) for n in shape_)


_NUMBER_TYPES = {int, float}


def is_number(value: object) -> bool:
    """True for an int or a float (True and False are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_entries(func: str, name: str, values: Sequence, finite: bool) -> None:
    """Check that every entry of one row is an int or a float (and finite, if asked)."""
    # Fast path in C for the usual case; the loop below only runs to name the bad entry.
    if set(map(type, values)) <= _NUMBER_TYPES and (not finite or all(map(math.isfinite, values))):
        return
    for j, value in enumerate(values):
        if not is_number(value):
            raise TypeError(
                f"{func}: {name}[{j}] is {value!r} ({type(value).__name__}); entries must be int or float"
            )
        if finite and not math.isfinite(value):
            raise ValueError(f"{func}: {name}[{j}] is {value}; entries must be finite numbers")


def check_vector(func: str, name: str, v: object, *, finite: bool = False) -> int:
    """Check that ``v`` is a non-empty list of numbers; return its length."""
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of numbers, got {type(v).__name__}")
    if len(v) == 0:
        raise ShapeError(f"{func}: {name} is empty; a vector needs at least one entry")
    check_entries(func, name, v, finite)
    return len(v)


def check_rows(func: str, name: str, M: object, what: str = "numbers") -> tuple[int, int]:
    """Check that ``M`` is a non-empty, rectangular list of non-empty rows; return its shape.

    The entries themselves are not looked at (``check_matrix`` checks numbers,
    masks check booleans).
    """
    if not isinstance(M, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of rows, got {type(M).__name__}")
    if len(M) == 0:
        raise ShapeError(f"{func}: {name} is empty (0 rows); a matrix needs at least one row")
    for i, row in enumerate(M):
        if not isinstance(row, (list, tuple)):
            raise TypeError(
                f"{func}: {name}[{i}] must be a row (a list of {what}), got {type(row).__name__}; "
                "a matrix is a list of rows, so write a vector v as [v] (one row)"
            )
    width = len(M[0])
    if width == 0:
        raise ShapeError(f"{func}: {name} has empty rows (0 columns); a matrix needs at least one column")
    for i, row in enumerate(M):
        if len(row) != width:
            raise ShapeError(
                f"{func}: {name} is ragged: row 0 has {width} entries but row {i} has "
                f"{len(row)}; every row must have the same length"
            )
    return len(M), width


def check_matrix(func: str, name: str, M: object, *, finite: bool = False) -> tuple[int, int]:
    """Check that ``M`` is a non-empty rectangular list of rows of numbers.

    Returns its shape. ``func`` and ``name`` go into the error message, so the
    reader learns which argument of which public function was wrong.

    >>> check_matrix("demo", "A", [[1, 2], [3, 4], [5, 6]])
    (3, 2)
    >>> check_matrix("demo", "A", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    mha_lists.core.checks.ShapeError: demo: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length
    """
    shape_ = check_rows(func, name, M)
    # Fast path in C for the usual case: every entry an int or a float and, if
    # asked, a finite sum (a nan or inf entry makes any sum nan or inf). The sum
    # is only a test, never a result; if it says no, the loop names the entry.
    if set(map(type, chain.from_iterable(M))) <= _NUMBER_TYPES and (not finite or _finite_total(M)):
        return shape_
    for i, row in enumerate(M):
        check_entries(func, f"{name}[{i}]", row, finite)
    return shape_


def _finite_total(M: Sequence[Sequence[float]]) -> bool:
    try:
        return math.isfinite(sum(map(sum, M)))
    except OverflowError:  # an int too large for a float
        return False


def check_positive_int(func: str, name: str, value: object) -> int:
    """Check a size or a count: an int of at least 1 (not a bool, not 2.0); return it.

    >>> check_positive_int("demo", "num_heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: demo: num_heads must be a positive int, got 0
    """
    if check_int(func, name, value) < 1:
        raise ValueError(f"{func}: {name} must be a positive int, got {value!r}")
    return value


def check_int(func: str, name: str, value: object) -> int:
    """Check for an int (a seed, an index); True and 1.0 are refused; return it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{func}: {name} must be an int, got {value!r} ({type(value).__name__})")
    return value


def check_bool(func: str, name: str, value: object) -> bool:
    """Check a switch: True or False, not 1 or "yes"; return it."""
    if not isinstance(value, bool):
        raise TypeError(f"{func}: {name} must be True or False, got {value!r}")
    return value


def check_number(func: str, name: str, value: object, *, positive: bool = False) -> float:
    """Check one finite real number (and > 0, if asked); return it.

    >>> check_number("scale", "c", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: scale: c must be a finite number, got nan
    """
    if not is_number(value):
        raise TypeError(f"{func}: {name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise ValueError(f"{func}: {name} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{func}: {name} must be a positive finite number, got {value!r}")
    return value


def check_same_shapes(func: str, name: str, mats: object, *, finite: bool = False) -> tuple[int, int, int]:
    """Check a non-empty list of per-head matrices that must share one shape; return (count, rows, cols)."""
    if not isinstance(mats, (list, tuple)) or len(mats) == 0:
        raise ShapeError(f"{func}: {name} must be a non-empty list with one matrix per head")
    shapes = [check_matrix(func, f"{name}[{h}]", M, finite=finite) for h, M in enumerate(mats)]
    for h, s in enumerate(shapes):
        if s != shapes[0]:
            raise ShapeError(
                f"{func}: {name}[0] is {describe(shapes[0])} but {name}[{h}] is "
                f"{describe(s)}; every head must have the same shape"
            )
    return len(mats), shapes[0][0], shapes[0][1]


def too_large(func: str) -> ValueError:
    """The error for a sum or product that left float64's range (about 1.8e308)."""
    return ValueError(
        f"{func}: the values are too large: a product or sum overflowed float64 "
        "(largest about 1.8e308); scale the inputs down"
    )


def all_finite(rows: Sequence[Sequence[float]]) -> bool:
    """True when every entry of every row is a finite number (an int too large for a float is not)."""
    try:
        return all(all(map(math.isfinite, row)) for row in rows)
    except OverflowError:
        return False


@contextmanager
def reported_as(func: str) -> Iterator[None]:
    """Report an error raised by an inner step as an error of ``func``, the function the user called.

    The inner step's own name at the start of the message is replaced:

    >>> with reported_as("multi_head_attention"):
    ...     raise ValueError("matmul: the values are too large")
    Traceback (most recent call last):
    ...
    ValueError: multi_head_attention: the values are too large
    """
    try:
        yield
    except (ValueError, TypeError) as error:
        message = str(error)
        inner, sep, rest = message.partition(": ")
        if sep and inner != func and " " not in inner:
            message = rest
        if message.startswith(f"{func}: "):
            raise
        raise type(error)(f"{func}: {message}") from None
