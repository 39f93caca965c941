"""Counting the work: multiply-adds of every step, a pure function of the sizes.

A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p
multiply-adds. Attention's cost follows from the shapes alone (a mask changes
which scores are used, not how many are computed), so ``multiply_adds`` needs
no matrices at all. ``MultiplyAddCounter`` counts products as they run, to
check the formula against real calls.
"""

from __future__ import annotations

from ..core.attention import multiply_adds  # noqa: F401  (the formula MultiplyAddCounter is checked against)
from ..core.matrix import Matrix, matmul

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

    def matmul(self, step: str, A: Matrix, B: Matrix) -> Matrix:
        """``matmul(A, B)``, adding its n * m * p multiply-adds to ``counts[step]``."""
        if not isinstance(step, str):
            raise TypeError(f"matmul: step must be a str (the name to count under), got {step!r}")
        C = matmul(A, B)
        self.counts[step] = self.counts.get(step, 0) + len(A) * len(B) * len(C[0])
        return C

    @property
    def total(self) -> int:
        """All multiply-adds counted so far."""
        return sum(self.counts.values())
