"""Matrices as lists of rows, and the few operations attention needs.

A matrix is a list of rows; ``shape(M)`` is ``(rows, columns)``. Every function
checks its arguments first and raises an error that names the function, the
shapes and the rule that was broken. No function changes its arguments: each
returns new lists.

Every sum goes through ``math.fsum``, which is correctly rounded. That is why
the numbers are the same on CPython 3.10 to 3.13 (3.12 changed ``sum()`` of
floats) and why a zero added to a sum never changes it (masked keys drop out
exactly).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul
from typing import Union

Number = Union[int, float]
Vector = list[float]
Matrix = list[list[float]]


class ShapeError(ValueError):
    """A matrix, vector or mask has the wrong shape for the operation."""


# === Checking arguments ===


def describe(shape_: tuple[int, ...]) -> str:
    """Write a shape the way the error messages do: ``(5, 16)`` -> ``'5x16'``."""
    return "x".join(str(n) for n in shape_)


_NUMBER_TYPES = {int, float}


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_entries(func: str, name: str, values: Sequence, finite: bool) -> None:
    """Check that every entry of one row is an int or a float (and finite, if asked)."""
    # Fast path in C for the usual case; the loop below only runs to name the bad entry.
    if set(map(type, values)) <= _NUMBER_TYPES and (not finite or all(map(math.isfinite, values))):
        return
    for j, value in enumerate(values):
        if not _is_number(value):
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
    _check_entries(func, name, v, finite)
    return len(v)


def check_matrix(func: str, name: str, M: object, *, finite: bool = False) -> tuple[int, int]:
    """Check that ``M`` is a non-empty rectangular list of rows of numbers.

    Returns its shape. ``func`` and ``name`` go into the error message, so the
    reader learns which argument of which public function was wrong.

    >>> check_matrix("demo", "A", [[1, 2], [3, 4], [5, 6]])
    (3, 2)
    >>> check_matrix("demo", "A", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    mha_lists.matrix.ShapeError: demo: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length
    """
    if not isinstance(M, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of rows, got {type(M).__name__}")
    if len(M) == 0:
        raise ShapeError(f"{func}: {name} is empty (0 rows); a matrix needs at least one row")
    for i, row in enumerate(M):
        if not isinstance(row, (list, tuple)):
            raise TypeError(
                f"{func}: {name}[{i}] must be a row (a list of numbers), got {type(row).__name__}; "
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
        _check_entries(func, f"{name}[{i}]", row, finite)
    return len(M), width


# === Shapes ===


def shape(M: Matrix) -> tuple[int, int]:
    """Return (rows, columns) of M (n, m).

    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    """
    return check_matrix("shape", "M", M)


# === Arithmetic ===


def dot(u: Vector, v: Vector) -> float:
    """Dot product of two vectors of the same length, summed with ``math.fsum``.

    >>> dot([1, 2, 3], [4, 5, 6])
    32.0
    """
    n, m = check_vector("dot", "u", u), check_vector("dot", "v", v)
    if n != m:
        raise ShapeError(f"dot: u has {n} entries and v has {m}; they must have the same length")
    return math.fsum(map(mul, u, v))


def matmul(A: Matrix, B: Matrix) -> Matrix:
    """Multiply A (n, m) by B (m, p); the result is (n, p).

    Entry ``[i][j]`` is row i of A times column j of B: ``fsum(A[i][t] * B[t][j])``,
    the same products and the same correctly rounded sums as the textbook triple
    loop, about twice as fast (``python -m mha_lists.bench``) for two reasons:
    B's columns are read once, and ``map`` multiplies in C.

    >>> matmul([[1, 2]], [[3], [4]])
    [[11.0]]
    >>> matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    n, m = check_matrix("matmul", "A", A)
    m2, p = check_matrix("matmul", "B", B)
    if m != m2:
        raise ShapeError(
            f"matmul: A is {n}x{m} and B is {m2}x{p}; A's columns ({m}) must equal B's rows ({m2})"
        )
    return _matmul(A, B)


def _matmul(A: Matrix, B: Matrix) -> Matrix:
    """matmul without the checks, for callers that have checked the shapes."""
    # Each column is copied into new float objects (x * 1.0 is exact): they sit
    # next to each other in memory, so the inner loop reads memory in order.
    columns = [[x * 1.0 for x in col] for col in zip(*B)]
    return [[math.fsum(map(mul, row, col)) for col in columns] for row in A]


def transpose(M: Matrix) -> Matrix:
    """Swap rows and columns: M (n, m) becomes (m, n).

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    check_matrix("transpose", "M", M)
    return [list(col) for col in zip(*M)]


def add(A: Matrix, B: Matrix) -> Matrix:
    """Add two matrices of the same shape, entry by entry.

    >>> add([[1, 2]], [[10, 20]])
    [[11, 22]]
    """
    sa, sb = check_matrix("add", "A", A), check_matrix("add", "B", B)
    if sa != sb:
        raise ShapeError(
            f"add: A is {describe(sa)} and B is {describe(sb)}; both must have the same shape"
        )
    return [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]


def add_row(M: Matrix, b: Vector) -> Matrix:
    """Add the vector b (p,) to every row of M (n, p): a bias, broadcast over rows.

    >>> add_row([[1, 2], [3, 4]], [10, 20])
    [[11, 22], [13, 24]]
    """
    n, p = check_matrix("add_row", "M", M)
    q = check_vector("add_row", "b", b)
    if p != q:
        raise ShapeError(f"add_row: M is {n}x{p} and b has {q} entries; b needs one entry per column ({p})")
    return [[x + y for x, y in zip(row, b)] for row in M]


def scale(M: Matrix, c: Number) -> Matrix:
    """Multiply every entry of M by the number c.

    >>> scale([[1, 2], [3, 4]], 0.5)
    [[0.5, 1.0], [1.5, 2.0]]
    """
    check_matrix("scale", "M", M)
    if not _is_number(c):
        raise TypeError(f"scale: c must be a number, got {c!r}")
    return [[x * c for x in row] for row in M]


# === Heads: column blocks and row blocks ===


def split_heads(M: Matrix, num_heads: int) -> list[Matrix]:
    """Cut M (n, num_heads * w) into num_heads matrices (n, w), left to right.

    This is how one wide projection becomes one matrix per head.

    >>> split_heads([[1, 2, 3, 4], [5, 6, 7, 8]], 2)
    [[[1, 2], [5, 6]], [[3, 4], [7, 8]]]
    """
    n, m = check_matrix("split_heads", "M", M)
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads < 1:
        raise ValueError(f"split_heads: num_heads must be a positive int, got {num_heads!r}")
    if m % num_heads:
        raise ShapeError(
            f"split_heads: M is {n}x{m}; its {m} columns cannot be cut into {num_heads} "
            "blocks of equal width"
        )
    w = m // num_heads
    return [[list(row[b * w:(b + 1) * w]) for row in M] for b in range(num_heads)]


def concat_heads(heads: Sequence[Matrix]) -> Matrix:
    """Join matrices with the same number of rows side by side: [head_0 | head_1 | ...].

    The inverse of ``split_heads``; it is how head outputs are concatenated.

    >>> concat_heads([[[1, 2], [5, 6]], [[3, 4], [7, 8]]])
    [[1, 2, 3, 4], [5, 6, 7, 8]]
    """
    if not isinstance(heads, (list, tuple)) or len(heads) == 0:
        raise ShapeError("concat_heads: heads must be a non-empty list of matrices")
    shapes = [check_matrix("concat_heads", f"heads[{b}]", B) for b, B in enumerate(heads)]
    n = shapes[0][0]
    for b, (rows, _) in enumerate(shapes):
        if rows != n:
            raise ShapeError(
                f"concat_heads: heads[0] is {describe(shapes[0])} but heads[{b}] is "
                f"{describe(shapes[b])}; every head must have the same number of rows"
            )
    return [[x for B in heads for x in B[i]] for i in range(n)]


def split_rows(M: Matrix, sizes: Sequence[int]) -> list[Matrix]:
    """Cut M into consecutive row blocks of the given sizes (they must add up to M's rows).

    >>> split_rows([[1], [2], [3]], [1, 2])
    [[[1]], [[2], [3]]]
    """
    n, m = check_matrix("split_rows", "M", M)
    if sum(sizes) != n or any(s < 1 for s in sizes):
        raise ShapeError(
            f"split_rows: M has {n} rows but the sizes {list(sizes)} add up to {sum(sizes)}; "
            "they must be positive and add up to the number of rows"
        )
    blocks, start = [], 0
    for s in sizes:
        blocks.append([list(row) for row in M[start:start + s]])
        start += s
    return blocks
