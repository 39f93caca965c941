"""Attention for one head: the formula, written with the functions notebook 00 teaches.

    attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Q (T, d_k) holds one query per row, K (T_k, d_k) one key per row, V (T_k, d_v)
one value per row. Row i of the result (T, d_v) is an average of V's rows,
weighted by how well query i matches each key. M is 0 where the mask allows a
key and -inf where it does not.
"""

from __future__ import annotations

import math
from typing import Optional

from . import matrix
from .checks import ShapeError, check_matrix, check_number, reported_as
from .masks import Mask, apply_mask, check_mask
from .matrix import Matrix, matmul, transpose
from .scores_to_weights import softmax_rows

__all__ = ["attention", "default_scale"]


def default_scale(func: str, d_k: int, scale: Optional[float]) -> float:
    """``scale`` checked (a positive finite number), or 1 / sqrt(d_k) when it is None.

    >>> default_scale("demo", 4, None)
    0.5
    """
    if scale is None:
        return 1 / math.sqrt(d_k)
    return check_number(func, "scale", scale, positive=True)


def _check_qkv(func: str, Q: object, K: object, V: object) -> tuple[int, int, int, int]:
    T, d_k = check_matrix(func, "Q", Q, finite=True)
    T_k, d_k2 = check_matrix(func, "K", K, finite=True)
    T_v, d_v = check_matrix(func, "V", V, finite=True)
    if d_k2 != d_k:
        raise ShapeError(
            f"{func}: Q is {T}x{d_k} and K is {T_k}x{d_k2}; queries and keys must have the "
            f"same width d_k to be multiplied"
        )
    if T_v != T_k:
        raise ShapeError(
            f"{func}: K is {T_k}x{d_k2} and V is {T_v}x{d_v}; there must be one value row per key row"
        )
    return T, T_k, d_k, d_v


def attention(
    Q: Matrix,
    K: Matrix,
    V: Matrix,
    *,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> Matrix:
    """One head of attention: Q (T, d_k), K (T_k, d_k), V (T_k, d_v); the result is (T, d_v).

    ``scale`` defaults to 1 / sqrt(d_k); ``mask`` (T, T_k) is True where query i
    may attend to key j. One query that matches two keys equally (both scores
    are 0) takes the average of their values; masking the second key leaves
    only the first value:

    >>> Q, K, V = [[1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]], [[1.0, 0.0], [3.0, 2.0]]
    >>> attention(Q, K, V)
    [[2.0, 1.0]]
    >>> attention(Q, K, V, mask=[[True, False]])
    [[1.0, 0.0]]
    """
    T, T_k, d_k, _ = _check_qkv("attention", Q, K, V)
    c = default_scale("attention", d_k, scale)
    if mask is not None:
        check_mask("attention", "mask", mask, (T, T_k))
    with reported_as("attention"):
        scores = matrix.scale(matmul(Q, transpose(K)), c)  # (T, T_k): Q K^T / sqrt(d_k)
        weights = softmax_rows(apply_mask(scores, mask))  # masked keys get weight 0.0
        return matmul(weights, V)  # (T, d_v): each row a weighted average of V's rows
