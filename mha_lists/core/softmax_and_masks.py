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
from itertools import chain
from typing import Optional

from .checks import (ShapeError, check_int, check_positive_int, check_rows, check_same_shapes, checked,
                     describe, kind, quote_int)
from .matrix import Matrix, Vector

Mask = list[list[bool]]

__all__ = ["causal_mask", "padding_mask", "length_mask", "combine_masks", "softmax", "softmax_rows", "entropy"]


# === Masks ===


MAX_MASK_SIDE = 4096  # queries, and keys, of a mask made here: 4096 x 4096 is 16.8 million entries


def _mask_sides(func: str, arguments: dict, *_: object) -> None:
    """seq_len and num_queries, where given, within MAX_MASK_SIDE (a door's ``also``, or called by one)."""
    for name in ("seq_len", "num_queries"):
        n = arguments.get(name)
        if n is not None and n > MAX_MASK_SIDE:
            raise ValueError(f"{func}: {name} is {quote_int(n)}; a mask here has at most "
                             f"{MAX_MASK_SIDE:,} queries and {MAX_MASK_SIDE:,} keys")


@kind("mask", ("queries", "keys"))
def check_mask(func: str, name: str, mask: object, shape: Optional[tuple] = None) -> tuple[int, int]:
    """Check a rectangular list of rows of True/False (of ``shape``, if given); return its shape.

    With a ``shape`` (queries, keys) the mask is about to be used, so every row
    must also allow at least one key. It is the "mask T T_k" kind of ``checked``,
    which gives the shape once both sizes are known.
    """
    # The usual case, tested in C: a list of lists of one width, every entry True or False.
    if (type(mask) is list and mask and set(map(type, mask)) == {list} and len(set(map(len, mask))) == 1
            and mask[0] and set(map(type, chain.from_iterable(mask))) == {bool}):
        rows, cols = len(mask), len(mask[0])
    else:  # find the problem and name it
        rows, cols = check_rows(func, name, mask, what="True/False")
        for i, row in enumerate(mask):
            for j, value in enumerate(row):
                if not isinstance(value, bool):
                    raise TypeError(
                        f"{func}: {name}[{i}][{j}] is {value!r}; mask entries must be True "
                        "(may attend) or False (masked)"
                    )
    if shape is None or None in shape:
        return rows, cols
    if (rows, cols) != tuple(shape):
        raise ShapeError(
            f"{func}: {name} is {describe((rows, cols))}; it must be (queries, keys) = {describe(shape)}"
        )
    if not all(map(any, mask)):
        i = next(i for i, row in enumerate(mask) if not any(row))
        raise ValueError(
            f"{func}: {name} row {i} is all False, so query {i} may attend to no key; "
            "every query needs at least one key"
        )
    return rows, cols


@checked(seq_len="positive int", also=_mask_sides)
def causal_mask(seq_len: int) -> Mask:
    """(seq_len, seq_len) mask: query i may attend to key j when j <= i (no peeking ahead).

    >>> causal_mask(3)
    [[True, False, False], [True, True, False], [True, True, True]]
    """
    return [[j <= i for j in range(seq_len)] for i in range(seq_len)]


def _ids_and_pad(func: str, arguments: dict, sizes: dict) -> None:
    token_ids, pad_id = arguments["token_ids"], arguments["pad_id"]
    if not isinstance(token_ids, (list, tuple)) or len(token_ids) == 0:
        raise ShapeError(f"{func}: token_ids must be a non-empty list of ints")
    if len(token_ids) > MAX_MASK_SIDE:
        raise ValueError(f"{func}: token_ids has {len(token_ids):,} ids; a mask here has at most {MAX_MASK_SIDE:,} keys")
    for j, t in enumerate(token_ids):
        check_int(func, f"token_ids[{j}]", t)
    check_int(func, "pad_id", pad_id)
    if arguments["num_queries"] is not None:
        check_positive_int(func, "num_queries", arguments["num_queries"])
    _mask_sides(func, arguments)
    if all(t == pad_id for t in token_ids):
        raise ValueError(f"{func}: every token id is the pad id {pad_id}; no key is left to attend to")


@checked(also=_ids_and_pad)
def padding_mask(token_ids: Sequence[int], pad_id: int, *, num_queries: Optional[int] = None) -> Mask:
    """(num_queries, len(token_ids)) mask: every query may attend to every key that is not padding.

    num_queries defaults to len(token_ids) (self-attention); pass the number of
    queries when the ids are a cross-attention context.

    >>> padding_mask([1, 3, 0], pad_id=0)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    keep = [t != pad_id for t in token_ids]
    return [list(keep) for _ in range(len(token_ids) if num_queries is None else num_queries)]


def _length_fits(func: str, arguments: dict, sizes: dict) -> None:
    _mask_sides(func, arguments)
    if arguments["length"] > arguments["seq_len"]:
        raise ValueError(f"{func}: length {quote_int(arguments['length'])} is longer than seq_len {arguments['seq_len']}")


@checked(length="positive int", seq_len="positive int", num_queries="optional positive int", also=_length_fits)
def length_mask(length: int, seq_len: int, *, num_queries: Optional[int] = None) -> Mask:
    """Padding mask from a length: the first ``length`` of ``seq_len`` keys are real.

    >>> length_mask(2, 3)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    rows = seq_len if num_queries is None else num_queries
    return [[j < length for j in range(seq_len)] for _ in range(rows)]


def _masks_alike(func: str, arguments: dict, sizes: dict) -> None:
    check_same_shapes(func, "masks", arguments["masks"], check=check_mask, empty="give at least one mask",
                      rule="masks must have the same shape")


@checked(also=_masks_alike)
def combine_masks(*masks: Mask) -> Mask:
    """Entry-wise AND: a query may attend to a key only if every mask allows it.

    With left padding (``<PAD> <PAD> <BOS> ...``), causal AND padding leaves a pad
    query with no key at all, which attention refuses; let pad queries attend to
    themselves (their outputs are ignored anyway).

    >>> combine_masks(causal_mask(3), padding_mask([1, 3, 0], pad_id=0))
    [[True, False, False], [True, True, False], [True, True, False]]
    """
    return [[all(rows) for rows in zip(*mask_rows)] for mask_rows in zip(*masks)]


@checked(S="rows T T_k", mask="optional mask T T_k")
def apply_mask(S: Matrix, mask: Optional[Mask]) -> Matrix:
    """S (T, T_k) with -inf where ``mask`` is False; S itself (not a copy) when there is no mask.

    >>> apply_mask([[1.0, 2.0]], [[True, False]])
    [[1.0, -inf]]
    """
    if mask is None:
        return S
    return [[s if keep else -math.inf for s, keep in zip(row, mask_row)] for row, mask_row in zip(S, mask)]


# === Softmax ===


def _scores(func: str, rows: Sequence[Sequence[float]], name: str) -> None:
    """Scores are numbers, finite or -inf (a masked key), and every row has a finite one."""
    for i, row in enumerate(rows):
        where = f"row {i}: " if name == "M" else ""
        for j, x in enumerate(row):
            try:
                bad = math.isnan(x) or x == math.inf
            except OverflowError:  # an int too large for a float
                raise ValueError(f"{func}: {where}entry {j} is {quote_int(x)}, too large for a float; "
                                 "scores must be finite numbers or -inf (masked)") from None
            if bad:
                raise ValueError(f"{func}: {where}entry {j} is {x}; scores must be finite numbers or -inf (masked)")
        if max(row) == -math.inf:
            raise ValueError(
                f"{func}: {where}every score is -inf, so there is no key to attend to; "
                "softmax of an empty row is undefined (check the mask)"
            )


@checked(v="vector n", also=lambda func, arguments, sizes: _scores(func, [arguments["v"]], "v"))
def softmax(v: Vector) -> Vector:
    """Turn scores (n,) into weights (n,) that are positive and add up to 1.

    A row whose every score is -inf has no key to attend to, and is an error
    rather than a row of NaN.

    >>> softmax([0.0, 0.0])
    [0.5, 0.5]
    >>> softmax([1000.0, 1000.0, float("-inf")])
    [0.5, 0.5, 0.0]
    """
    return softmax_rows([v])[0]


@checked(M="matrix n m", also=lambda func, arguments, sizes: _scores(func, arguments["M"], "M"))
def softmax_rows(M: Matrix) -> Matrix:
    """Apply ``softmax`` to every row of M (n, m); the result is (n, m).

    >>> softmax_rows([[0.0, 0.0], [0.0, float("-inf")]])
    [[0.5, 0.5], [1.0, 0.0]]
    """
    weights = []
    for row in M:
        top = max(row)  # subtracting it changes nothing in exact arithmetic, and keeps exp from overflowing
        exps = [math.exp(s - top) for s in row]  # a masked key's -inf becomes exp(-inf) = 0.0
        total = math.fsum(exps)
        weights.append([e / total for e in exps])
    return weights


def _weights_not_negative(func: str, arguments: dict, sizes: dict) -> None:
    if min(arguments["p"]) < 0:
        raise ValueError(f"{func}: p has the negative entry {min(arguments['p'])}; weights must be >= 0")


@checked(p="finite vector n", also=_weights_not_negative, finite_result=True)
def entropy(p: Vector) -> float:
    """Entropy -sum p log p of a row of attention weights (n,), in nats (0 log 0 counts as 0).

    log(n) for uniform weights over n keys, 0 when all weight is on one key.

    >>> round(entropy([0.25, 0.25, 0.25, 0.25]), 6) == round(math.log(4), 6)
    True
    >>> entropy([1.0, 0.0])
    0.0
    """
    return -math.fsum(x * math.log(x) for x in p if x > 0) + 0.0
