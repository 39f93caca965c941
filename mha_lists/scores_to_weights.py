"""Softmax: scores in, weights out (positive, each row adding up to 1).

softmax(s)_j = exp(s_j - max(s)) / sum_t exp(s_t - max(s)). Subtracting the
largest score changes nothing in exact arithmetic and keeps ``exp`` from
overflowing; a score of -inf (a masked key) gets a weight of exactly 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .checks import check_matrix, check_vector
from .matrix import Matrix, Vector

__all__ = ["softmax", "softmax_rows", "entropy"]


def _softmax(func: str, v: Sequence[float], where: str = "") -> Vector:
    """softmax of one row whose entries are numbers; ``where`` says which row, for errors."""
    for j, x in enumerate(v):
        if math.isnan(x) or x == math.inf:
            raise ValueError(f"{func}: {where}entry {j} is {x}; scores must be finite numbers or -inf (masked)")
    top = max(v)
    if top == -math.inf:
        raise ValueError(
            f"{func}: {where}every score is -inf, so there is no key to attend to; "
            "softmax of an empty row is undefined (check the mask)"
        )
    exps = [math.exp(x - top) for x in v]
    total = math.fsum(exps)
    return [e / total for e in exps]


def softmax(v: Vector) -> Vector:
    """Turn scores (n,) into weights (n,) that are positive and add up to 1.

    A row whose every score is -inf has no key to attend to, and is an error
    rather than a row of NaN.

    >>> softmax([0.0, 0.0])
    [0.5, 0.5]
    >>> softmax([1000.0, 1000.0, float("-inf")])
    [0.5, 0.5, 0.0]
    """
    check_vector("softmax", "v", v)
    return _softmax("softmax", v)


def softmax_rows(M: Matrix) -> Matrix:
    """Apply ``softmax`` to every row of M (n, m); the result is (n, m).

    >>> softmax_rows([[0.0, 0.0], [0.0, float("-inf")]])
    [[0.5, 0.5], [1.0, 0.0]]
    """
    check_matrix("softmax_rows", "M", M)
    return [_softmax("softmax_rows", row, f"row {i}: ") for i, row in enumerate(M)]


def entropy(p: Vector) -> float:
    """Entropy -sum p log p of a row of attention weights (n,), in nats (0 log 0 counts as 0).

    log(n) for uniform weights over n keys, 0 when all weight is on one key.

    >>> round(entropy([0.25, 0.25, 0.25, 0.25]), 6) == round(math.log(4), 6)
    True
    >>> entropy([1.0, 0.0])
    0.0
    """
    check_vector("entropy", "p", p, finite=True)
    if min(p) < 0:
        raise ValueError(f"entropy: p has the negative entry {min(p)}; weights must be >= 0")
    return -math.fsum(x * math.log(x) for x in p if x > 0) + 0.0
