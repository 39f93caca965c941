"""Matrices as lists of rows, and the few operations attention needs.

A matrix is a list of rows; ``shape(M)`` is ``(rows, columns)``. Each function
says above it what its arguments must be (``@checked``, see checks.py); its body
is the arithmetic and nothing else. No function changes its arguments: each
returns new lists. Every sum is a ``math.fsum``, which is correctly rounded,
so the numbers are the same on every CPython (notebook 07a says why).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import fsum
from operator import mul
from typing import Union

from .checks import ShapeError, all_finite, check_matrix, check_positive_int, checked, describe

Number = Union[int, float]
Vector = list[float]
Matrix = list[list[float]]

__all__ = ["shape", "dot", "matmul", "transpose", "add", "add_row", "scale", "split_heads", "concat_heads",
           "split_rows"]


# === Shapes ===


@checked(M="matrix n m")
def shape(M: Matrix) -> tuple[int, int]:
    """Return (rows, columns) of M (n, m).

    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    """
    return len(M), len(M[0])


# === Arithmetic ===


@checked(u="finite vector n", v="finite vector n", finite_result=True,
         why={"n": "u has {expected} entries and v has {value}; they must have the same length"})
def dot(u: Vector, v: Vector) -> float:
    """Dot product of two vectors of the same length, summed with ``math.fsum``.

    >>> dot([1, 2, 3], [4, 5, 6])
    32.0
    """
    return fsum(map(mul, u, v))


@checked(A="finite matrix n m", B="finite matrix m p", finite_result=True)
def matmul(A: Matrix, B: Matrix) -> Matrix:
    """Multiply A (n, m) by B (m, p); the result is (n, p).

    Entry ``[i][j]`` is row i of A times column j of B, ``fsum(A[i][t] * B[t][j])``:
    ``zip(*B)`` gives B's columns, ``map(mul, row, col)`` the products.

    >>> matmul([[1, 2]], [[3], [4]])
    [[11.0]]
    >>> matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    columns = list(zip(*B))
    return [[fsum(map(mul, row, col)) for col in columns] for row in A]


@checked(M="matrix n m")
def transpose(M: Matrix) -> Matrix:
    """Swap rows and columns: M (n, m) becomes (m, n).

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    return [list(col) for col in zip(*M)]


_SAME_SHAPE = "both must have the same shape"


@checked(A="finite matrix n m", B="finite matrix n m", finite_result=True, why={"n": _SAME_SHAPE, "m": _SAME_SHAPE})
def add(A: Matrix, B: Matrix) -> Matrix:
    """Add two matrices of the same shape, entry by entry.

    >>> add([[1, 2]], [[10, 20]])
    [[11, 22]]
    """
    return [[a + b for a, b in zip(row_a, row_b)] for row_a, row_b in zip(A, B)]


@checked(M="finite matrix n p", b="finite vector p", finite_result=True,
         why={"p": "M is {first_shape} and b has {value} entries; b needs one entry per column ({expected})"})
def add_row(M: Matrix, b: Vector) -> Matrix:
    """Add the vector b (p,) to every row of M (n, p): a bias, broadcast over rows.

    >>> add_row([[1, 2], [3, 4]], [10, 20])
    [[11, 22], [13, 24]]
    """
    return [[x + y for x, y in zip(row, b)] for row in M]


@checked(M="finite matrix n m", c="number", finite_result=True)
def scale(M: Matrix, c: Number) -> Matrix:
    """Multiply every entry of M by the finite number c.

    With |c| > 1 a product can leave float64's range, so then the result is looked
    at here, even inside attention: a score that overflowed to -inf would otherwise
    look like a masked key and get weight 0.

    >>> scale([[1, 2], [3, 4]], 0.5)
    [[0.5, 1.0], [1.5, 2.0]]
    """
    result = [[x * c for x in row] for row in M]
    if abs(c) > 1 and not all_finite(result):
        raise OverflowError("scale: a product left float64's range")  # the door names the function called
    return result


# === Heads: column blocks and row blocks ===


def _heads_divide_columns(func: str, arguments: dict, sizes: dict) -> None:
    if sizes["m"] % arguments["num_heads"]:
        raise ShapeError(
            f"{func}: M is {sizes['n']}x{sizes['m']}; its {sizes['m']} columns cannot be cut into "
            f"{arguments['num_heads']} blocks of equal width"
        )


@checked(M="matrix n m", num_heads="positive int", also=_heads_divide_columns)
def split_heads(M: Matrix, num_heads: int) -> list[Matrix]:
    """Cut M (n, num_heads * w) into num_heads matrices (n, w), left to right.

    This is how one wide projection becomes one matrix per head.

    >>> split_heads([[1, 2, 3, 4], [5, 6, 7, 8]], 2)
    [[[1, 2], [5, 6]], [[3, 4], [7, 8]]]
    """
    w = len(M[0]) // num_heads
    return [[list(row[b * w:(b + 1) * w]) for row in M] for b in range(num_heads)]


def _same_rows(func: str, arguments: dict, sizes: dict) -> None:
    heads = arguments["heads"]
    if not isinstance(heads, (list, tuple)) or len(heads) == 0:
        raise ShapeError(f"{func}: heads must be a non-empty list of matrices")
    shapes = [check_matrix(func, f"heads[{b}]", B) for b, B in enumerate(heads)]
    for b, (rows, _) in enumerate(shapes):
        if rows != shapes[0][0]:
            raise ShapeError(
                f"{func}: heads[0] is {describe(shapes[0])} but heads[{b}] is "
                f"{describe(shapes[b])}; every head must have the same number of rows"
            )


@checked(also=_same_rows)
def concat_heads(heads: Sequence[Matrix]) -> Matrix:
    """Join matrices with the same number of rows side by side: [head_0 | head_1 | ...].

    The inverse of ``split_heads``; it is how head outputs are concatenated.

    >>> concat_heads([[[1, 2], [5, 6]], [[3, 4], [7, 8]]])
    [[1, 2, 3, 4], [5, 6, 7, 8]]
    """
    return [[x for head in heads for x in head[i]] for i in range(len(heads[0]))]


def _sizes_add_up(func: str, arguments: dict, sizes_: dict) -> None:
    sizes = arguments["sizes"]
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError(f"{func}: sizes must be a non-empty list of positive ints, got {sizes!r}")
    for t, s in enumerate(sizes):
        check_positive_int(func, f"sizes[{t}]", s)
    if sum(sizes) != sizes_["n"]:
        raise ShapeError(
            f"{func}: M has {sizes_['n']} rows but the sizes {list(sizes)} add up to {sum(sizes)}; "
            "they must be positive and add up to the number of rows"
        )


@checked(M="matrix n m", also=_sizes_add_up)
def split_rows(M: Matrix, sizes: Sequence[int]) -> list[Matrix]:
    """Cut M into consecutive row blocks of the given sizes (they must add up to M's rows).

    >>> split_rows([[1], [2], [3]], [1, 2])
    [[[1]], [[2], [3]]]
    """
    blocks, start = [], 0
    for s in sizes:
        blocks.append([list(row) for row in M[start:start + s]])
        start += s
    return blocks
