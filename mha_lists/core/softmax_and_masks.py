"""Scores to weights: masks say which keys a query may see, softmax turns scores into weights.

A mask is a (queries, keys) list of rows of booleans; **True means "may attend"**,
as in PyTorch's ``scaled_dot_product_attention``. Attention puts -inf where the
mask is False (``apply_mask``), and softmax turns -inf into a weight of exactly 0.0.

softmax(s)_j = exp(s_j - max(s)) / sum_t exp(s_t - max(s)). Subtracting the
largest score changes nothing in exact arithmetic and keeps ``exp`` from
overflowing. Each row of weights is positive and adds up to 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

from .checks import (ShapeError, check_int, check_matrix, check_positive_int, check_rows, check_vector, describe)
from .matrix import Matrix, Vector

Mask = list[list[bool]]

__all__ = ["Mask", "causal_mask", "padding_mask", "length_mask", "combine_masks", "apply_mask", "check_mask",
           "softmax", "softmax_rows", "entropy"]


# === Masks ===


def check_mask(func: str, name: str, mask: object, shape: Optional[tuple[int, int]] = None) -> tuple[int, int]:
    """Check a rectangular list of rows of True/False (of ``shape``, if given); return its shape.

    With a ``shape`` (queries, keys) the mask is about to be used, so every row
    must also allow at least one key.
    """
    rows, cols = check_rows(func, name, mask, what="True/False")
    for i, row in enumerate(mask):
        for j, value in enumerate(row):
            if not isinstance(value, bool):
                raise TypeError(
                    f"{func}: {name}[{i}][{j}] is {value!r}; mask entries must be True "
                    "(may attend) or False (masked)"
                )
    if shape is None:
        return rows, cols
    if (rows, cols) != shape:
        raise ShapeError(
            f"{func}: {name} is {describe((rows, cols))}; it must be (queries, keys) = {describe(shape)}"
        )
    for i, row in enumerate(mask):
        if not any(row):
            raise ValueError(
                f"{func}: {name} row {i} is all False, so query {i} may attend to no key; "
                "every query needs at least one key"
            )
    return rows, cols


def causal_mask(seq_len: int) -> Mask:
    """(seq_len, seq_len) mask: query i may attend to key j when j <= i (no peeking ahead).

    >>> causal_mask(3)
    [[True, False, False], [True, True, False], [True, True, True]]
    """
    check_positive_int("causal_mask", "seq_len", seq_len)
    return [[j <= i for j in range(seq_len)] for i in range(seq_len)]


def padding_mask(token_ids: Sequence[int], pad_id: int, *, num_queries: Optional[int] = None) -> Mask:
    """(num_queries, len(token_ids)) mask: every query may attend to every key that is not padding.

    num_queries defaults to len(token_ids) (self-attention); pass the number of
    queries when the ids are a cross-attention context.

    >>> padding_mask([1, 3, 0], pad_id=0)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    func = "padding_mask"
    if not isinstance(token_ids, (list, tuple)) or len(token_ids) == 0:
        raise ShapeError(f"{func}: token_ids must be a non-empty list of ints")
    for j, t in enumerate(token_ids):
        check_int(func, f"token_ids[{j}]", t)
    check_int(func, "pad_id", pad_id)
    rows = len(token_ids) if num_queries is None else check_positive_int(func, "num_queries", num_queries)
    keep = [t != pad_id for t in token_ids]
    if not any(keep):
        raise ValueError(f"{func}: every token id is the pad id {pad_id}; no key is left to attend to")
    return [list(keep) for _ in range(rows)]


def length_mask(length: int, seq_len: int, *, num_queries: Optional[int] = None) -> Mask:
    """Padding mask from a length: the first ``length`` of ``seq_len`` keys are real.

    >>> length_mask(2, 3)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    func = "length_mask"
    check_positive_int(func, "length", length)
    check_positive_int(func, "seq_len", seq_len)
    if length > seq_len:
        raise ValueError(f"{func}: length {length} is longer than seq_len {seq_len}")
    rows = seq_len if num_queries is None else check_positive_int(func, "num_queries", num_queries)
    return [[j < length for j in range(seq_len)] for _ in range(rows)]


def combine_masks(*masks: Mask) -> Mask:
    """Entry-wise AND: a query may attend to a key only if every mask allows it.

    With left padding (``<PAD> <PAD> <BOS> ...``), causal AND padding leaves a pad
    query with no key at all, which attention refuses; let pad queries attend to
    themselves (their outputs are ignored anyway).

    >>> combine_masks(causal_mask(3), padding_mask([1, 3, 0], pad_id=0))
    [[True, False, False], [True, True, False], [True, True, False]]
    """
    if not masks:
        raise ValueError("combine_masks: give at least one mask")
    shapes = [check_mask("combine_masks", f"masks[{t}]", M) for t, M in enumerate(masks)]
    for t, s in enumerate(shapes):
        if s != shapes[0]:
            raise ShapeError(
                f"combine_masks: masks[0] is {describe(shapes[0])} but masks[{t}] is "
                f"{describe(s)}; masks must have the same shape"
            )
    return [[all(M[i][j] for M in masks) for j in range(shapes[0][1])] for i in range(shapes[0][0])]


def apply_mask(S: Matrix, mask: Optional[Mask]) -> Matrix:
    """S (T, T_k) with -inf where ``mask`` is False; S itself (not a copy) when there is no mask.

    >>> apply_mask([[1.0, 2.0]], [[True, False]])
    [[1.0, -inf]]
    """
    if mask is None:
        return S
    check_mask("apply_mask", "mask", mask, (len(S), len(S[0])))
    return [[s if keep else -math.inf for s, keep in zip(row, mask_row)] for row, mask_row in zip(S, mask)]


# === Softmax ===


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
