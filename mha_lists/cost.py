"""Counting the work: multiply-adds of every step, a pure function of the sizes.

A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p
multiply-adds. Attention's cost follows from the shapes alone (a mask changes
which scores are used, not how many are computed), so ``multiply_adds`` needs
no matrices at all. ``MultiplyAddCounter`` counts products as they run, to
check the formula against real calls.
"""

from __future__ import annotations

from typing import Optional

from .checks import ShapeError, check_positive_int
from .matrix import Matrix, matmul

__all__ = ["multiply_adds", "MultiplyAddCounter"]


def multiply_adds(
    seq_len: int,
    d_model: int,
    num_heads: int,
    *,
    d_k: Optional[int] = None,
    d_v: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    context_len: Optional[int] = None,
) -> dict[str, int]:
    """Multiply-adds of one multi-head attention pass, per step, in the order the steps run.

    T = seq_len queries, T_k = context_len keys (default T), h heads, g = num_kv_heads:

    - Q: T * d_model * (h * d_k); K: T_k * d_model * (g * d_k); V: T_k * d_model * (g * d_v)
    - scores: h * T * d_k * T_k; weighted_sum: h * T * T_k * d_v
    - W_O: T * (h * d_v) * d_model

    >>> multiply_adds(5, 16, 2)
    {'Q': 1280, 'K': 1280, 'V': 1280, 'scores': 400, 'weighted_sum': 400, 'W_O': 1280}
    """
    func = "multiply_adds"
    T = check_positive_int(func, "seq_len", seq_len)
    check_positive_int(func, "d_model", d_model)
    h = check_positive_int(func, "num_heads", num_heads)
    if (d_k is None or d_v is None) and d_model % h:
        raise ShapeError(
            f"{func}: d_model {d_model} is not divisible by num_heads {h}; pass d_k and d_v"
        )
    d_k = d_model // h if d_k is None else check_positive_int(func, "d_k", d_k)
    d_v = d_model // h if d_v is None else check_positive_int(func, "d_v", d_v)
    g = h if num_kv_heads is None else check_positive_int(func, "num_kv_heads", num_kv_heads)
    T_k = T if context_len is None else check_positive_int(func, "context_len", context_len)
    return {
        "Q": T * d_model * h * d_k,
        "K": T_k * d_model * g * d_k,
        "V": T_k * d_model * g * d_v,
        "scores": h * T * d_k * T_k,
        "weighted_sum": h * T * T_k * d_v,
        "W_O": T * h * d_v * d_model,
    }


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
        C = matmul(A, B)
        self.counts[step] = self.counts.get(step, 0) + len(A) * len(B) * len(C[0])
        return C

    @property
    def total(self) -> int:
        """All multiply-adds counted so far."""
        return sum(self.counts.values())
