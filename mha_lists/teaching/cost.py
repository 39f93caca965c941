"""Counting the work: multiply-adds of every step, a pure function of the sizes.

A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p
multiply-adds. Attention's cost follows from the shapes alone (a mask changes
which scores are used, not how many are computed), so ``multiply_adds`` (in
core/attention.py, beside the trace that reports it) needs no matrices at all. ``MultiplyAddCounter`` counts products as they run, to
check the formula against real calls.
"""

from __future__ import annotations

from typing import Optional

from ..core.checks import ShapeError, check_matrix, check_positive_int, shorten, too_large
from ..core.attention import step_counts
from ..core.matrix import MAX_WORK, Matrix, finite, product, too_much_work

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
        if n * m * p > MAX_WORK:  # as matmul refuses it, before any product is made
            raise too_much_work("matmul", n * m * p)
        self.counts[step] = self.counts.get(step, 0) + n * m * p
        try:
            return finite(product(A, B), "the products of A and B")
        except OverflowError:  # a product past float64's range, or an int product too large for a float
            raise too_large("matmul", "the products of A and B") from None

    @property
    def total(self) -> int:
        """All multiply-adds counted so far."""
        return sum(self.counts.values())


def multiply_adds(seq_len: int, d_model: int, num_heads: int, *, d_k: Optional[int] = None,
                  d_v: Optional[int] = None, num_kv_heads: Optional[int] = None,
                  context_len: Optional[int] = None) -> dict[str, int]:
    """Multiply-adds of one multi-head attention pass, per step, in the order the steps run.

    T = seq_len queries, T_k = context_len keys (default T), h heads, g = num_kv_heads:

    - Q: T * d_model * (h * d_k); K: T_k * d_model * (g * d_k); V: T_k * d_model * (g * d_v)
    - scores: h * T * d_k * T_k; weighted_sum: h * T * T_k * d_v
    - W_O: T * (h * d_v) * d_model

    >>> multiply_adds(5, 16, 2)
    {'Q': 1280, 'K': 1280, 'V': 1280, 'scores': 400, 'weighted_sum': 400, 'W_O': 1280}
    """
    T, d_model, h = (check_positive_int("multiply_adds", name, n) for name, n in
                     (("seq_len", seq_len), ("d_model", d_model), ("num_heads", num_heads)))
    for name, n in (("d_k", d_k), ("d_v", d_v), ("num_kv_heads", num_kv_heads), ("context_len", context_len)):
        if n is not None:
            check_positive_int("multiply_adds", name, n)
    if (d_k is None or d_v is None) and d_model % h:
        raise ShapeError(f"multiply_adds: d_model {d_model} is not divisible by num_heads {h}; pass d_k and d_v")
    d_k = d_model // h if d_k is None else d_k
    d_v = d_model // h if d_v is None else d_v
    g = h if num_kv_heads is None else num_kv_heads
    T_k = T if context_len is None else context_len
    return step_counts(T, T_k, d_model, h, g, d_k, d_v)  # what attention_trace counts, checked here
