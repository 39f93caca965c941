"""Scores to weights: masks say which keys a query may see, softmax turns scores into weights.

A mask is a (queries, keys) list of rows of booleans; **True means "may attend"**,
as in PyTorch's ``scaled_dot_product_attention``. Attention puts -inf where the
mask is False (``masked``), and softmax turns -inf into a weight of exactly 0.0.

softmax(s)_j = exp(s_j - max(s)) / sum_t exp(s_t - max(s)). Subtracting the
largest score changes nothing in exact arithmetic and keeps ``exp`` from
overflowing. Each row of weights is positive and adds up to 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from typing import Optional

from .checks import ShapeError, check_int, check_matrix, check_positive_int, check_rows, check_vector, describe, \
    quote_int, shorten
from .matrix import Matrix, Vector

Mask = list[list[bool]]

__all__ = ["causal_mask", "padding_mask", "length_mask", "combine_masks", "softmax", "softmax_rows", "entropy"]

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


def _side(func: str, name: str, n: object) -> int:
    """A mask's number of queries or keys: a positive int of at most MAX_MASK_SIDE."""
    if check_positive_int(func, name, n) > MAX_MASK_SIDE:
        raise ValueError(f"{func}: {name} is {quote_int(n)}; a mask here has at most "
                         f"{MAX_MASK_SIDE:,} queries and {MAX_MASK_SIDE:,} keys")
    return n


def causal_mask(seq_len: int) -> Mask:  # () -> (T, T)
    """(seq_len, seq_len) mask: query i may attend to key j when j <= i (no peeking ahead).

    >>> causal_mask(3)
    [[True, False, False], [True, True, False], [True, True, True]]
    """
    _side("causal_mask", "seq_len", seq_len)
    return [[j <= i for j in range(seq_len)] for i in range(seq_len)]


def padding_mask(token_ids: Sequence[int], pad_id: int, *, num_queries: Optional[int] = None) -> Mask:  # (T_k,) -> (T, T_k)
    """(num_queries, len(token_ids)) mask: every query may attend to every key that is not padding.

    num_queries defaults to len(token_ids) (self-attention); pass the number of
    queries when the ids are a cross-attention context.

    >>> padding_mask([1, 3, 0], pad_id=0)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    if not isinstance(token_ids, (list, tuple)) or len(token_ids) == 0:
        raise ShapeError(f"padding_mask: token_ids must be a non-empty list of ints, got {shorten(token_ids)}")
    _side("padding_mask", "len(token_ids)", len(token_ids))
    for j, t in enumerate(token_ids):
        check_int("padding_mask", f"token_ids[{j}]", t)
    check_int("padding_mask", "pad_id", pad_id)
    if num_queries is not None:
        _side("padding_mask", "num_queries", num_queries)
    if all(t == pad_id for t in token_ids):
        raise ValueError(f"padding_mask: every token id is the pad id {pad_id}; no key is left to attend to")
    keep = [t != pad_id for t in token_ids]
    return [list(keep) for _ in range(len(token_ids) if num_queries is None else num_queries)]


def length_mask(length: int, seq_len: int, *, num_queries: Optional[int] = None) -> Mask:  # () -> (T, T_k)
    """Padding mask from a length: the first ``length`` of ``seq_len`` keys are real.

    >>> length_mask(2, 3)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    check_positive_int("length_mask", "length", length)
    _side("length_mask", "seq_len", seq_len)
    if num_queries is not None:
        _side("length_mask", "num_queries", num_queries)
    if length > seq_len:
        raise ValueError(f"length_mask: length {quote_int(length)} is longer than seq_len {seq_len}")
    return [[j < length for j in range(seq_len)] for _ in range(seq_len if num_queries is None else num_queries)]


def combine_masks(*masks: Mask) -> Mask:  # n x (T, T_k) -> (T, T_k)
    """Entry-wise AND: a query may attend to a key only if every mask allows it.

    With left padding (``<PAD> <PAD> <BOS> ...``), causal AND padding leaves a pad
    query with no key at all, which attention refuses; let pad queries attend to
    themselves (their outputs are ignored anyway).

    >>> combine_masks(causal_mask(3), padding_mask([1, 3, 0], pad_id=0))
    [[True, False, False], [True, True, False], [True, True, False]]
    """
    if not masks:
        raise ShapeError("combine_masks: give at least one mask")
    shapes = [check_mask("combine_masks", f"masks[{t}]", mask) for t, mask in enumerate(masks)]
    for t, found in enumerate(shapes):
        if found != shapes[0]:
            raise ShapeError(f"combine_masks: masks[0] is {describe(shapes[0])} but masks[{t}] is "
                             f"{describe(found)}; masks must have the same shape")
    return [[all(rows) for rows in zip(*mask_rows)] for mask_rows in zip(*masks)]


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
    if vector:
        shape = (1, check_vector(func, name, S, finite=False))
    else:
        shape = check_matrix(func, name, S, finite=False)
    for i, row in enumerate([S] if vector else S):
        where = "" if vector else f"[{i}]"
        for j, x in enumerate(row):
            try:
                bad = math.isnan(x) or x == math.inf
            except OverflowError:  # an int too large for a float
                raise ValueError(f"{func}: {name}{where}[{j}] is {quote_int(x)}, too large for a float; "
                                 "scores must be finite numbers or -inf (masked)") from None
            if bad:
                raise ValueError(f"{func}: {name}{where}[{j}] is {x}; scores must be finite numbers or -inf (masked)")
        if max(row) == -math.inf:
            raise ValueError(f"{func}: {'' if vector else f'row {i}: '}every score is -inf, so there is no key to attend to; "
                             "softmax of an empty row is undefined (check the mask)")
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
        exps = [math.exp(s - top) for s in row]  # a masked key's -inf becomes exp(-inf) = 0.0
        total = math.fsum(exps)
        weights.append([e / total for e in exps])
    return weights


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
