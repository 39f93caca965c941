"""One row of attention weights taken apart: how spread it is, and softmax's derivative at it.

p = softmax(s) is a row of weights, each >= 0, adding up to 1. ``entropy(p)``
says how spread it is (log n over n keys when uniform, 0 on one key);
``softmax_jacobian(p)`` is the matrix of d p_i / d s_j; ``softmax_backward(p,
dp)`` is the gradient of the scores s given the gradient dp of the weights,
what the backward pass computes for every row (``gradients.softmax_rows_backward``).
"""

import math

from ..core.checks import ShapeError, check_vector, shorten, too_large
from ..core.gradients import softmax_rows_backward
from ..core.matrix import Matrix, Vector, finite
from ..core.softmax_and_masks import MAX_MASK_SIDE

__all__ = ["entropy", "softmax_backward", "softmax_jacobian"]


def check_weight_row(func: str, name: str, p: object) -> int:
    """A row of attention weights, as softmax makes them: finite, >= 0, adding up to 1 (within 1e-9)."""
    n = check_vector(func, name, p)
    if not 0 <= min(p) <= max(p) <= 1 or abs(math.fsum(p) - 1) > 1e-9:
        raise ValueError(f"{func}: {name} must be weights as softmax makes them (each >= 0, adding up to 1), "
                         f"got {shorten(list(p))}")
    return n


def entropy(p: Vector) -> float:  # (n,) -> ()
    """Entropy -sum p log p of a row of attention weights, in nats (0 log 0 counts as 0).

    log(n) for uniform weights over n keys, 0 when all weight is on one key.

    >>> round(entropy([0.25, 0.25, 0.25, 0.25]), 6) == round(math.log(4), 6)
    True
    >>> entropy([1.0, 0.0])
    0.0
    """
    check_weight_row("entropy", "p", p)
    return -math.fsum(x * math.log(x) for x in p if x > 0) + 0.0


def softmax_backward(p: Vector, dp: Vector) -> Vector:  # (n,), (n,) -> (n,)
    """Gradient of one softmax row: ds = p * (dp - p . dp), given p = softmax(s) and dp.

    This is ``dp`` times the Jacobian diag(p) - p p^T, without building the matrix.

    >>> softmax_backward([0.5, 0.5], [1.0, 0.0])
    [0.25, -0.25]
    """
    n = check_weight_row("softmax_backward", "p", p)
    if check_vector("softmax_backward", "dp", dp) != n:
        raise ShapeError(f"softmax_backward: p has {n} entries and dp has {len(dp)}; they must have the same length")
    try:
        return finite(softmax_rows_backward([p], [dp]), "the gradients")[0]
    except OverflowError as error:
        raise too_large("softmax_backward", error) from None


def softmax_jacobian(p: Vector) -> Matrix:  # (n,) -> (n, n)
    """The Jacobian of softmax at p = softmax(s): entry [i][j] = d p_i / d s_j = p_i (δ_ij - p_j).

    >>> softmax_jacobian([0.5, 0.5])
    [[0.25, -0.25], [-0.25, 0.25]]
    """
    n = check_weight_row("softmax_jacobian", "p", p)
    if n > MAX_MASK_SIDE:  # the Jacobian has n * n entries, as a mask of n tokens has
        raise ValueError(f"softmax_jacobian: p has {n:,} weights; its Jacobian is n x n, so at most "
                         f"{MAX_MASK_SIDE:,} here (a mask's largest side)")
    return [[p_i * ((1.0 if i == j else 0.0) - p_j) for j, p_j in enumerate(p)] for i, p_i in enumerate(p)]
