"""Masks for padded batches: which keys are padding, and several masks at once.

A sentence shorter than the batch's longest is filled up with a pad token; no
query should attend to those keys. ``padding_mask`` marks them from the token
ids, ``length_mask`` from the sentence's length, and ``combine_masks`` ANDs
masks together (causal and padding, say). Like ``causal_mask``, each is a
(queries, keys) list of rows of booleans, True where a query may attend.
"""

from collections.abc import Sequence
from typing import Optional

from ..core.checks import ShapeError, check_int, check_list, check_positive_int, describe, quote_int
from ..core.softmax_and_masks import MAX_MASK_SIDE, Mask, causal_mask, check_mask  # noqa: F401 (causal_mask: the doctest)

__all__ = ["padding_mask", "length_mask", "combine_masks"]


def padding_mask(token_ids: Sequence[int], pad_id: int, *, num_queries: Optional[int] = None) -> Mask:  # (T_k,) -> (T, T_k)
    """(num_queries, len(token_ids)) mask: every query may attend to every key that is not padding.

    num_queries defaults to len(token_ids) (self-attention); pass the number of
    queries when the ids are a cross-attention context.

    >>> padding_mask([1, 3, 0], pad_id=0)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    check_list("padding_mask", "token_ids", token_ids, "ints")
    check_positive_int("padding_mask", "len(token_ids)", len(token_ids), most=MAX_MASK_SIDE)
    for j, t in enumerate(token_ids):
        check_int("padding_mask", f"token_ids[{j}]", t)
    check_int("padding_mask", "pad_id", pad_id)
    if num_queries is not None:
        check_positive_int("padding_mask", "num_queries", num_queries, most=MAX_MASK_SIDE)
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
    check_positive_int("length_mask", "seq_len", seq_len, most=MAX_MASK_SIDE)
    if num_queries is not None:
        check_positive_int("length_mask", "num_queries", num_queries, most=MAX_MASK_SIDE)
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
