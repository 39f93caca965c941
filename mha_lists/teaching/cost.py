"""Counting the work: multiply-adds of every step, a pure function of the sizes.

A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p
multiply-adds. Attention's cost follows from the shapes alone (a mask changes
which scores are used, not how many are computed), so ``multiply_adds`` (in
core/attention.py, beside the trace that reports it) needs no matrices at all. ``MultiplyAddCounter`` counts products as they run, to
check the formula against real calls.
"""

from __future__ import annotations

from ..core.checks import checked
from ..core.matrix import Matrix, matmul

__all__ = ["MultiplyAddCounter"]


def _step_is_a_str(func: str, arguments: dict, sizes: dict) -> None:
    if not isinstance(arguments["step"], str):
        raise TypeError(f"{func}: step must be a str (the name to count under), got {arguments['step']!r}")


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

    # Its messages say "matmul:", as the product's own do: the counter stands in for matmul.
    @checked(A="finite matrix n m", B="finite matrix m p", also=_step_is_a_str, finite_result=True)
    def matmul(self, step: str, A: Matrix, B: Matrix) -> Matrix:
        """``matmul(A, B)``, adding its n * m * p multiply-adds to ``counts[step]``.

        A product that overflows float64 is refused after it was done: its
        multiply-adds are counted, as work done.
        """
        C = matmul(A, B)
        self.counts[step] = self.counts.get(step, 0) + len(A) * len(B) * len(C[0])
        return C

    @property
    def total(self) -> int:
        """All multiply-adds counted so far."""
        return sum(self.counts.values())
