"""Lists as matrices: the operations notebook 00 teaches, each checking its arguments.

A matrix is a list of rows; ``shape(M)`` is ``(rows, columns)``. Each function
checks its own arguments at its top, then does its arithmetic, through the
core's (``matmul`` is ``core.matrix.product`` after its checks). No function
changes its arguments: each returns new lists. Every sum is a ``math.fsum``,
so the numbers are the same on every CPython.
"""

from collections.abc import Sequence
from math import fsum
from operator import mul

from ..core.checks import ShapeError, check_list, check_matrix, check_number, check_positive_int, check_rows, check_sizes, \
    shorten, too_large
from ..core.matrix import MAX_WORK, Matrix, Number, Vector, columns_of, finite, joined, overflow_named, product, \
    too_much_work

__all__ = ["shape", "dot", "matmul", "transpose", "add", "add_row", "scale", "split_heads", "concat_heads",
           "split_rows"]


def shape(M: Matrix) -> tuple[int, int]:  # (n, m) -> (n, m)
    """Return (rows, columns) of M.

    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    """
    return check_matrix("shape", "M", M, finite=False)


# === Arithmetic ===


def dot(u: Vector, v: Vector) -> float:  # (n,) . (n,) -> ()
    """Dot product of two vectors of the same length, summed with ``math.fsum``.

    >>> dot([1, 2, 3], [4, 5, 6])
    32.0
    """
    check_sizes("dot", ("u", u, "n"), ("v", v, "n"))
    try:  # every product u[t] * v[t], then one correctly rounded sum
        return finite([[fsum(map(mul, u, v))]], "the products of u and v")[0][0]
    except (OverflowError, ValueError):  # the sum past float64's range, or fsum's inf - inf
        raise too_large("dot", "the products of u and v") from None


def matmul(A: Matrix, B: Matrix) -> Matrix:  # (n, m) @ (m, p) -> (n, p)
    """Multiply A (n, m) by B (m, p); the result is (n, p).

    >>> matmul([[1, 2]], [[3], [4]])
    [[11.0]]
    >>> matmul([[1, 2], [3, 4]], [[5, 6], [7, 8]])
    [[19.0, 22.0], [43.0, 50.0]]
    """
    n, m, p = check_sizes("matmul", ("A", A, "n m"), ("B", B, "m p")).values()
    if n * m * p > MAX_WORK:
        raise too_much_work("matmul", n * m * p)
    with overflow_named("matmul"):
        return finite(product(A, B, "the products of A and B"), "the products of A and B")


def transpose(M: Matrix) -> Matrix:  # (n, m) -> (m, n)
    """Swap rows and columns.

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    check_matrix("transpose", "M", M)
    return [list(col) for col in zip(*M)]


def add(A: Matrix, B: Matrix) -> Matrix:  # (n, m) + (n, m) -> (n, m)
    """Add two matrices of the same shape, entry by entry.

    >>> add([[1, 2]], [[10, 20]])
    [[11, 22]]
    """
    check_sizes("add", ("A", A, "n m"), ("B", B, "n m"))
    with overflow_named("add"):
        return finite([[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)], "the sums of A and B")


def add_row(M: Matrix, b: Vector) -> Matrix:  # (n, p) + (p,) -> (n, p)
    """Add the vector b to every row of M: a bias, broadcast over rows.

    >>> add_row([[1, 2], [3, 4]], [10, 20])
    [[11, 22], [13, 24]]
    """
    check_sizes("add_row", ("M", M, "n p"), ("b", b, "p"))
    with overflow_named("add_row"):
        return finite([[x + y for x, y in zip(row, b)] for row in M], "the sums of M and b")


def scale(M: Matrix, c: Number) -> Matrix:  # (n, m) * () -> (n, m)
    """Multiply every entry of M by the finite number c.

    >>> scale([[1, 2], [3, 4]], 0.5)
    [[0.5, 1.0], [1.5, 2.0]]
    """
    check_matrix("scale", "M", M)
    check_number("scale", "c", c)
    with overflow_named("scale"):
        return finite([[x * c for x in row] for row in M], "the products of M and c")


def split_heads(M: Matrix, num_heads: int) -> list[Matrix]:  # (n, h * w) -> h x (n, w)
    """Cut M into num_heads matrices of equal width, left to right: one wide projection, one matrix per head.

    >>> split_heads([[1, 2, 3, 4], [5, 6, 7, 8]], 2)
    [[[1, 2], [5, 6]], [[3, 4], [7, 8]]]
    """
    n, m = check_matrix("split_heads", "M", M)
    if m % check_positive_int("split_heads", "num_heads", num_heads):
        raise ShapeError(f"split_heads: M is {n}x{m}; its {m} columns cannot be cut into "
                         f"{num_heads} blocks of equal width")
    return columns_of(M, [m // num_heads] * num_heads)


def concat_heads(heads: Sequence[Matrix]) -> Matrix:  # h x (n, w) -> (n, h * w)
    """Join matrices with the same number of rows side by side: [head_0 | head_1 | ...].

    The inverse of ``split_heads``; it is how head outputs are concatenated.

    >>> concat_heads([[[1, 2], [5, 6]], [[3, 4], [7, 8]]])
    [[1, 2, 3, 4], [5, 6, 7, 8]]
    """
    check_list("concat_heads", "heads", heads, "matrices")
    shapes = [check_matrix("concat_heads", f"heads[{b}]", B) for b, B in enumerate(heads)]
    for b, (rows, cols) in enumerate(shapes):
        if rows != shapes[0][0]:
            raise ShapeError(f"concat_heads: heads[0] is {shapes[0][0]}x{shapes[0][1]} but heads[{b}] is "
                             f"{rows}x{cols}; every head must have the same number of rows")
    return joined(heads)


def split_rows(M: Matrix, sizes: Sequence[int]) -> list[Matrix]:  # (sum(sizes), m) -> blocks of rows
    """Cut M into consecutive row blocks of the given sizes (they must add up to M's rows).

    >>> split_rows([[1], [2], [3]], [1, 2])
    [[[1]], [[2], [3]]]
    """
    n, _ = check_rows("split_rows", "M", M)
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError(f"split_rows: sizes must be a non-empty list of positive ints, got {shorten(sizes)}")
    for t, s in enumerate(sizes):
        check_positive_int("split_rows", f"sizes[{t}]", s)
    if sum(sizes) != n:
        raise ShapeError(f"split_rows: M has {n} rows but the sizes {shorten(list(sizes))} add up to {sum(sizes)}; "
                         "they must be positive and add up to the number of rows")
    starts = [sum(sizes[:t]) for t in range(len(sizes))]
    return [[list(row) for row in M[s:s + size]] for s, size in zip(starts, sizes)]
