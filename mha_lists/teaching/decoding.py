"""Decoding one token at a time with a KV cache.

A decoder makes one token per step. Its new token's query needs the keys and
values of every token so far; the earlier ones have not changed, so they are
kept in a cache and only the new row is projected. The outputs are, bit for
bit, the rows of the full pass with ``causal_mask``.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

from ..core.attention import MHAWeights, affine, check_weights, head_loop, project
from ..core.checks import ShapeError, check_matrix, check_number, too_large
from ..core.matrix import Matrix, Vector, finite, joined

__all__ = ["decode_step"]


class KVCache(NamedTuple):
    """Keys and values of the tokens decoded so far, one matrix per key/value head."""

    K: list[Matrix]  # per key/value head, (t, d_k)
    V: list[Matrix]  # per key/value head, (t, d_v)


def check_cache(func: str, name: str, cache: object, num_kv_heads: int, d_k: int, d_v: int) -> None:
    """A KVCache for weights of these sizes: one finite (t, d_k) key matrix and (t, d_v) value matrix per
    key/value head, every head holding the same t tokens."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"{func}: {name} must be a KVCache (or None for the first token), got {type(cache).__name__}")
    for field, mats, width in (("K", cache.K, d_k), ("V", cache.V, d_v)):
        if not isinstance(mats, (list, tuple)) or len(mats) != num_kv_heads:
            n = len(mats) if isinstance(mats, (list, tuple)) else type(mats).__name__
            raise ShapeError(f"{func}: {name}.{field} has {n} matrices; it needs one per key/value head ({num_kv_heads})")
        for g, M in enumerate(mats):
            rows, cols = check_matrix(func, f"{name}.{field}[{g}]", M)
            if cols != width:
                raise ShapeError(f"{func}: {name}.{field}[{g}] is {rows}x{cols}; its rows must have {width} entries "
                                 f"(d_{field.lower()})")
            if rows != len(cache.K[0]):
                raise ShapeError(f"{func}: {name}.{field}[{g}] has {rows} rows but {name}.K[0] has "
                                 f"{len(cache.K[0])}; every head must hold the same tokens")


def decode_step(x_row: Vector, weights: MHAWeights, cache: Optional[KVCache] = None, *,
                scale: Optional[float] = None) -> tuple[Vector, KVCache]:  # (d_model,) -> (d_model,), cache + 1 row
    """Attend from one new token x_row to itself and every cached token.

    ``cache`` holds the keys and values of the t tokens before it (None for the
    first token). Returns the output row (d_model,) and a new cache with t + 1
    rows; the old cache is not changed. Only the new query is computed; the
    keys and values of earlier tokens are read from the cache.
    """
    d = check_weights("decode_step", "weights", weights, ("x_row", x_row, "d_model"))
    if cache is not None:
        check_cache("decode_step", "cache", cache, d["g"], d["d_k"], d["d_v"])
    c = 1 / math.sqrt(d["d_k"]) if scale is None else check_number("decode_step", "scale", scale, positive=True)
    try:
        Q, K, V = project([list(x_row)], weights, None)  # one row each: the new token's
        if cache is not None:
            K = [list(old) + new for old, new in zip(cache.K, K)]  # the old rows, shared, then the new one
            V = [list(old) + new for old, new in zip(cache.V, V)]  # (list(): the cache may hold tuples)
        heads = head_loop(Q, K, V, mask=None, scale=c)
        output = finite(affine(joined([head.output for head in heads]), weights.W_O, weights.b_O), "the outputs")
    except OverflowError as error:
        raise too_large("decode_step", error) from None
    return output[0], KVCache(K, V)
