"""Scores to weights: masks say which keys a query may see, softmax turns scores into weights.

A mask is a (queries, keys) list of rows of booleans; **True means "may attend"**,
as in PyTorch's ``scaled_dot_product_attention``. Attention puts -inf where the
mask is False (``masked``), and softmax turns -inf into a weight of exactly 0.0.

softmax(s)_j = exp(s_j - max(s)) / sum_t exp(s_t - max(s)). Subtracting the
largest score changes nothing in exact arithmetic and keeps ``exp`` from
overflowing. Each row of weights is positive and adds up to 1.
"""

import math
from itertools import chain
from typing import Optional

from .checks import ShapeError, all_finite, check_matrix, check_positive_int, check_rows, check_vector, describe, \
    shorten
from .matrix import Matrix, Vector

Mask = list[list[bool]]

__all__ = ["causal_mask", "softmax", "softmax_rows"]

MAX_MASK_SIDE = 4096  # queries, and keys, of a mask: 4096 x 4096 is 16.8 million entries


# === Masks ===


def check_mask(func: str, name: str, mask: object, shape: Optional[tuple[int, int]] = None) -> tuple[int, int]:
    """A rectangular list of rows of True/False; return its shape. Given ``shape`` (queries, keys),
    the mask is about to be used: it must have that shape, and every row must allow some key."""
    if not (type(mask) is list and mask and set(map(type, mask)) == {list} and len(set(map(len, mask))) == 1
            and mask[0] and set(map(type, chain.from_iterable(mask))) == {bool}):  # the usual case, tested in C
        check_rows(func, name, mask, what="True/False")
        for i, row in enumerate(mask):
            for j, value in enumerate(row):
                if not isinstance(value, bool):
                    raise TypeError(f"{func}: {name}[{i}][{j}] is {shorten(value)}; mask entries must be True "
                                    "(may attend) or False (masked)")
    found = (len(mask), len(mask[0]))
    if shape is not None and found != tuple(shape):
        raise ShapeError(f"{func}: {name} is {describe(found)}; it must be (queries, keys) = {describe(shape)}")
    if shape is not None and not all(map(any, mask)):
        i = next(i for i, row in enumerate(mask) if not any(row))
        raise ValueError(f"{func}: {name} row {i} is all False, so query {i} may attend to no key; "
                         "every query needs at least one key")
    return found


def causal_mask(seq_len: int) -> Mask:  # () -> (T, T)
    """(seq_len, seq_len) mask: query i may attend to key j when j <= i (no peeking ahead).

    >>> causal_mask(3)
    [[True, False, False], [True, True, False], [True, True, True]]
    """
    check_positive_int("causal_mask", "seq_len", seq_len, most=MAX_MASK_SIDE)
    return [[j <= i for j in range(seq_len)] for i in range(seq_len)]


def masked(S: Matrix, mask: Optional[Mask]) -> Matrix:  # (T, T_k) -> (T, T_k), unchecked
    """S with -inf where the mask is False (S itself when there is no mask): what attention does to its scores.

    >>> masked([[1.0, 2.0]], [[True, False]])
    [[1.0, -inf]]
    """
    if mask is None:
        return S
    return [[s if keep else -math.inf for s, keep in zip(row, mask_row)] for row, mask_row in zip(S, mask)]


# === Softmax ===


def check_scores(func: str, name: str, S: object, *, vector: bool = False) -> tuple[int, int]:
    """Scores: a matrix (or, with ``vector``, one row) of numbers, each finite or -inf (a masked key),
    every row with a finite one; return the shape."""
    shape = (1, check_vector(func, name, S, finite=False)) if vector else check_matrix(func, name, S, finite=False)
    rows = [S] if vector else S
    for i, row in enumerate(rows):
        where = "" if vector else f"[{i}]"
        if not all_finite([[x for x in row if x != -math.inf]]):  # nan, inf, or an int too large for a float
            j, x = next((j, x) for j, x in enumerate(row) if x != -math.inf and not all_finite([[x]]))
            raise ValueError(f"{func}: {name}{where}[{j}] is {shorten(x)}; scores must be finite numbers or -inf (masked)")
        if max(row) == -math.inf:
            raise ValueError(f"{func}: {'' if vector else f'row {i}: '}every score is -inf, so there is no key to attend "
                             "to; softmax of an empty row is undefined (check the mask)")
    return shape


def softmax(v: Vector) -> Vector:  # (n,) -> (n,)
    """Turn scores into weights that are positive and add up to 1.

    A row whose every score is -inf has no key to attend to, and is an error
    rather than a row of NaN.

    >>> softmax([0.0, 0.0])
    [0.5, 0.5]
    >>> softmax([1000.0, 1000.0, float("-inf")])
    [0.5, 0.5, 0.0]
    """
    check_scores("softmax", "v", v, vector=True)
    return softmax_of_rows([v])[0]


def softmax_rows(M: Matrix) -> Matrix:  # (n, m) -> (n, m)
    """Apply ``softmax`` to every row of M.

    >>> softmax_rows([[0.0, 0.0], [0.0, float("-inf")]])
    [[0.5, 0.5], [1.0, 0.0]]
    """
    check_scores("softmax_rows", "M", M)
    return softmax_of_rows(M)


def softmax_of_rows(M: Matrix) -> Matrix:  # unchecked softmax_rows
    """exp(s - top) / fsum, row by row: the arithmetic."""
    weights = []
    for row in M:
        top = max(row)  # subtracting it changes nothing in exact arithmetic, and keeps exp from overflowing
        # float(s): two int scores that each fit a float may differ by more than a float holds
        exps = [math.exp(float(s) - top) for s in row]  # a masked key's -inf becomes exp(-inf) = 0.0
        total = math.fsum(exps)
        weights.append([e / total for e in exps])
    return weights
