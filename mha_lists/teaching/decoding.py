"""Decoding one token at a time with a KV cache.

A decoder makes one token per step. Its new token's query needs the keys and
values of every token so far; the earlier ones have not changed, so they are
kept in a cache and only the new row is projected. The outputs are, bit for
bit, the rows of the full pass with ``causal_mask``.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..core.attention import MHAWeights, each_head, linear, project_heads
from ..core.checks import ShapeError, check_matrix, checked, kind
from ..core.matrix import Matrix, Vector, concat_heads

__all__ = ["decode_step"]


class KVCache(NamedTuple):
    """Keys and values of the tokens decoded so far, one matrix per key/value head."""

    K: list[Matrix]  # per key/value head, (t, d_k)
    V: list[Matrix]  # per key/value head, (t, d_v)


@kind("kv cache")
def _check_cache(func: str, name: str, cache: object, expected: tuple) -> None:
    """The "kv cache num_kv_heads d_k d_v" kind: a KVCache for weights of those sizes.

    One finite (t, d_k) key matrix and (t, d_v) value matrix per key/value head,
    every head holding the same t tokens.
    """
    num_kv_heads, d_k, d_v = expected
    if not isinstance(cache, KVCache):
        raise TypeError(f"{func}: {name} must be a KVCache (or None for the first token), got {type(cache).__name__}")
    for field, mats, width in (("K", cache.K, d_k), ("V", cache.V, d_v)):
        if not isinstance(mats, (list, tuple)) or len(mats) != num_kv_heads:
            n = len(mats) if isinstance(mats, (list, tuple)) else type(mats).__name__
            raise ShapeError(
                f"{func}: {name}.{field} has {n} matrices; it needs one per key/value head ({num_kv_heads})"
            )
        for g, M in enumerate(mats):
            rows, cols = check_matrix(func, f"{name}.{field}[{g}]", M, finite=True)
            if cols != width:
                raise ShapeError(
                    f"{func}: {name}.{field}[{g}] is {rows}x{cols}; its rows must have {width} entries "
                    f"(d_{field.lower()})"
                )
            if rows != len(cache.K[0]):
                raise ShapeError(
                    f"{func}: {name}.{field}[{g}] has {rows} rows but {name}.K[0] has {len(cache.K[0])}; "
                    "every head must hold the same tokens"
                )


@checked(weights="weights", x_row="finite vector d_model", scale="optional positive number",
         cache="optional kv cache num_kv_heads d_k d_v", finite_result=lambda result: result[0],
         why={"d_model": "x_row has {value} entries but the weights expect d_model = {expected}"})
def decode_step(
    x_row: Vector,
    weights: MHAWeights,
    cache: Optional[KVCache] = None,
    *,
    scale: Optional[float] = None,
) -> tuple[Vector, KVCache]:
    """Attend from one new token x_row (d_model,) to itself and every cached token.

    ``cache`` holds the keys and values of the t tokens before it (None for the
    first token). Returns the output row (d_model,) and a new cache with t + 1
    rows; the old cache is not changed. Only the new query is computed; the
    keys and values of earlier tokens are read from the cache.
    """
    Q, K, V = project_heads([list(x_row)], weights)  # one row each: the new token's
    if cache is not None:
        K = [old + new for old, new in zip(cache.K, K)]
        V = [old + new for old, new in zip(cache.V, V)]
    heads = each_head(Q, K, V, scale=scale)
    output = linear(concat_heads([head.output for head in heads]), weights.W_O, weights.b_O)
    return output[0], KVCache(K, V)
