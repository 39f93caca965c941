"""Matrices as lists of rows, and the few operations attention needs.

A matrix is a list of rows; ``shape(M)`` is ``(rows, columns)``. Every function
checks its arguments first and raises an error that names the function, the
shapes and the rule that was broken. No function changes its arguments: each
returns new lists.

Every sum goes through ``math.fsum``, which is correctly rounded. That is why
the numbers are the same on CPython 3.10 to 3.13 (3.12 changed ``sum()`` of
floats). (A masked key's weight is exactly 0.0, and any float sum, ``sum`` or
``fsum``, is unchanged by an exact zero; what ``fsum`` adds is the same
correctly rounded result on every version.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain, repeat
from operator import mul
from typing import Union

from .checks import (ShapeError, all_finite, check_rows, check_matrix, check_number, check_positive_int, check_vector, describe, too_large)

Number = Union[int, float]
Vector = list[float]
Matrix = list[list[float]]

__all__ = ["Matrix", "Vector", "Number", "ShapeError", "shape", "dot", "matmul", "transpose", "add",
           "add_row", "scale", "split_heads", "concat_heads", "split_rows"]


# === Shapes ===


def shape(M: Matrix) -> tuple[int, int]:
    """Return (rows, columns) of M (n, m).

    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    """
    return check_matrix("shape", "M", M)


# === Arithmetic ===
#
# A sum of finite numbers can still leave float64's range (about 1.8e308):
# ``fsum`` then raises OverflowError, or a product is already inf. Either way
# the caller learns "the values are too large", under its own name. An entry
# that is already nan or inf is named instead.


def _entry_problem(func: str, named: Sequence[tuple[str, object]]) -> ValueError:
    """The error for a result that is not finite: a non-finite input entry, else an overflow."""
    for name, M in named:
        is_matrix = isinstance(M[0], (list, tuple))
        for i, row in enumerate(M if is_matrix else [M]):
            for j, x in enumerate(row):
                if not all_finite([[x]]):
                    where = f"{name}[{i}][{j}]" if is_matrix else f"{name}[{j}]"
                    return ValueError(f"{func}: {where} is {x}; entries must be finite numbers")
    return too_large(func)


def dot(u: Vector, v: Vector) -> float:
    """Dot product of two vectors of the same length, summed with ``math.fsum``.

    >>> dot([1, 2, 3], [4, 5, 6])
    32.0
    """
    n, m = check_vector("dot", "u", u), check_vector("dot", "v", v)
    if n != m:
        raise ShapeError(f"dot: u has {n} entries and v has {m}; they must have the same length")
    try:
        total = math.fsum(map(mul, u, v))
    except (OverflowError, ValueError):
        total = math.inf
    if not all_finite([[total]]):
        raise _entry_problem("dot", [("u", u), ("v", v)])
    return total


def matmul(A: Matrix, B: Matrix) -> Matrix:
    """Multiply A (n, m) by B (m, p); the result is (n, p).

    Entry ``[i][j]`` is row i of A times column j of B: ``fsum(A[i][t] * B[t][j])``,
    the same products and the same correctly rounded sums as the textbook triple
    loop, about twice as fast (``python -m mha_lists.tools.bench``) for two reasons:
    B's columns are read once, and ``map`` multiplies in C. Entries must be
    finite ints or floats (a masked -inf score is never multiplied: softmax
    turns it into 0.0 first).

    >>> matmul([[1, 2]], [[3], [4]])
    [[11.0]]
    >>> matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    n, m = check_rows("matmul", "A", A)
    m2, p = check_rows("matmul", "B", B)
    if m != m2:
        raise ShapeError(
            f"matmul: A is {n}x{m} and B is {m2}x{p}; A's columns ({m}) must equal B's rows ({m2})"
        )
    if not set(map(type, chain.from_iterable(A))) <= {int, float}:
        check_matrix("matmul", "A", A)  # names the entry that is not a number
    columns = _float_columns(B)
    try:
        C = [[math.fsum(map(mul, row, col)) for col in columns] for row in A]
    except (OverflowError, ValueError):  # a sum left float64's range, or had inf - inf in it
        C = [[math.inf]]
    # A nan or inf anywhere in A or B shows up in the (n, p) result, which is
    # cheaper to check than A and B.
    if not all_finite(C):
        raise _entry_problem("matmul", [("A", A), ("B", B)])
    return C


def _float_columns(B: Matrix) -> Matrix:
    """B's columns, copied into new float objects.

    The copies sit next to each other in memory, so matmul's inner loop reads
    memory in order. ``float.__mul__(x, 1.0)`` is exact, and refuses anything
    that is not a float: an int is then converted with ``x * 1.0``, and
    anything else is named by ``check_matrix``.
    """
    try:
        return [list(map(float.__mul__, col, repeat(1.0))) for col in zip(*B)]
    except TypeError:
        check_matrix("matmul", "B", B)
    try:
        return [[x * 1.0 for x in col] for col in zip(*B)]
    except OverflowError:  # an int too large for a float
        raise too_large("matmul") from None


def transpose(M: Matrix) -> Matrix:
    """Swap rows and columns: M (n, m) becomes (m, n).

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    check_matrix("transpose", "M", M)
    return [list(col) for col in zip(*M)]


def _overflowed(func: str, inputs: Sequence[Matrix], result: Matrix) -> Matrix:
    """``result``, unless it has an inf or nan that its inputs did not have (an overflow)."""
    if not all_finite(result) and all(all_finite(M) for M in inputs):
        raise too_large(func)
    return result


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
    return _overflowed("add", [A, B], [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)])


def add_row(M: Matrix, b: Vector) -> Matrix:
    """Add the vector b (p,) to every row of M (n, p): a bias, broadcast over rows.

    >>> add_row([[1, 2], [3, 4]], [10, 20])
    [[11, 22], [13, 24]]
    """
    n, p = check_matrix("add_row", "M", M)
    q = check_vector("add_row", "b", b, finite=True)
    if p != q:
        raise ShapeError(f"add_row: M is {n}x{p} and b has {q} entries; b needs one entry per column ({p})")
    return _overflowed("add_row", [M, [b]], [[x + y for x, y in zip(row, b)] for row in M])


def scale(M: Matrix, c: Number) -> Matrix:
    """Multiply every entry of M by the finite number c.

    >>> scale([[1, 2], [3, 4]], 0.5)
    [[0.5, 1.0], [1.5, 2.0]]
    """
    check_matrix("scale", "M", M)
    check_number("scale", "c", c)
    return _overflowed("scale", [M], [[x * c for x in row] for row in M])


# === Heads: column blocks and row blocks ===


def split_heads(M: Matrix, num_heads: int) -> list[Matrix]:
    """Cut M (n, num_heads * w) into num_heads matrices (n, w), left to right.

    This is how one wide projection becomes one matrix per head.

    >>> split_heads([[1, 2, 3, 4], [5, 6, 7, 8]], 2)
    [[[1, 2], [5, 6]], [[3, 4], [7, 8]]]
    """
    n, m = check_matrix("split_heads", "M", M)
    check_positive_int("split_heads", "num_heads", num_heads)
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
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError(f"split_rows: sizes must be a non-empty list of positive ints, got {sizes!r}")
    for t, s in enumerate(sizes):
        check_positive_int("split_rows", f"sizes[{t}]", s)
    if sum(sizes) != n:
        raise ShapeError(
            f"split_rows: M has {n} rows but the sizes {list(sizes)} add up to {sum(sizes)}; "
            "they must be positive and add up to the number of rows"
        )
    blocks, start = [], 0
    for s in sizes:
        blocks.append([list(row) for row in M[start:start + s]])
        start += s
    return blocks
