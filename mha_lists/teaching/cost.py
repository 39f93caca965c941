"""Counting the work: multiply-adds of every step, a pure function of the sizes.

A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p
multiply-adds. Attention's cost follows from the shapes alone (a mask changes
which scores are used, not how many are computed), so ``multiply_adds`` (in
core/attention.py, beside the trace that reports it) needs no matrices at all. ``MultiplyAddCounter`` counts products as they run, to
check the formula against real calls.
"""

from __future__ import annotations

from ..core.checks import ShapeError, check_matrix, shorten, too_large
from ..core.matrix import Matrix, finite, product

__all__ = ["MultiplyAddCounter"]


class MultiplyAddCounter:
    """Multiplies matrices and counts, per named step, the multiply-adds it did.

    >>> c = MultiplyAddCounter()
    >>> c.matmul("demo", [[1, 2]], [[3], [4]])
    [[11.0]]
    >>> c.counts
    {'demo': 2}
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def matmul(self, step: str, A: Matrix, B: Matrix) -> Matrix:  # (n, m) @ (m, p) -> (n, p)
        """``matmul(A, B)``, adding its n * m * p multiply-adds to ``counts[step]``.

        Its messages say "matmul:", as the product's own do: the counter stands
        in for matmul. A product that overflows float64 is refused after it was
        done: its multiply-adds are counted, as work done.
        """
        if not isinstance(step, str):
            raise TypeError(f"matmul: step must be a str (the name to count under), got {shorten(step)}")
        n, m = check_matrix("matmul", "A", A)
        m_B, p = check_matrix("matmul", "B", B)
        if m != m_B:
            raise ShapeError(f"matmul: A is {n}x{m} and B is {m_B}x{p}; A's columns ({m}) must equal B's rows ({m_B})")
        self.counts[step] = self.counts.get(step, 0) + n * m * p
        try:
            return finite(product(A, B), "the products of A and B")
        except OverflowError:  # a product past float64's range, or an int product too large for a float
            raise too_large("matmul", "the products of A and B") from None

    @property
    def total(self) -> int:
        """All multiply-adds counted so far."""
        return sum(self.counts.values())
