"""Masks, softmax and multi-head attention itself, with every intermediate kept.

For each query head h (served by key/value head g = h // (num_heads // num_kv_heads)):

    Q_h = X W_Q[h] + b_Q[h]          K_g = C W_K[g] + b_K[g]      V_g = C W_V[g] + b_V[g]
    scores_h    = Q_h K_g^T * scale  (scale = 1 / sqrt(d_k); -inf where the mask is False)
    attention_h = softmax of each row of scores_h
    head_h      = attention_h V_g
    output      = [head_0 | head_1 | ...] W_O + b_O

C is X itself (self-attention) or the ``context`` (cross-attention).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, Optional

from .matrix import (
    Matrix,
    ShapeError,
    Vector,
    _matmul,
    check_matrix,
    check_vector,
    concat_heads,
    describe,
    matmul,
)
from .weights import Dims, MHAWeights, check_weights

Mask = list[list[bool]]

# === Softmax ===


def softmax(v: Vector) -> Vector:
    """Turn scores into weights that are positive and add up to 1.

    Stable form: subtract the largest score first, so exp never overflows (the
    result is the same in exact arithmetic). A score of -inf (a masked key)
    gets weight exactly 0.0. A row whose every score is -inf has no key to
    attend to, and is an error rather than a row of NaN.

    >>> softmax([0.0, 0.0])
    [0.5, 0.5]
    >>> softmax([1000.0, 1000.0, float("-inf")])
    [0.5, 0.5, 0.0]
    """
    check_vector("softmax", "v", v)
    return _softmax("softmax", v)


def _softmax(func: str, v: Sequence[float], where: str = "") -> Vector:
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


def softmax_rows(M: Matrix) -> Matrix:
    """Apply ``softmax`` to every row of M (n, m).

    >>> softmax_rows([[0.0, 0.0], [0.0, float("-inf")]])
    [[0.5, 0.5], [1.0, 0.0]]
    """
    check_matrix("softmax_rows", "M", M)
    return [_softmax("softmax_rows", row, f"row {i}: ") for i, row in enumerate(M)]


def entropy(p: Vector) -> float:
    """Entropy -sum p log p of a row of attention weights, in nats (0 log 0 counts as 0).

    log(n) for uniform weights over n keys, 0 when all weight is on one key.

    >>> round(entropy([0.25, 0.25, 0.25, 0.25]), 6) == round(math.log(4), 6)
    True
    >>> entropy([1.0, 0.0])
    0.0
    """
    check_vector("entropy", "p", p, finite=True)
    return -math.fsum(x * math.log(x) for x in p if x > 0) + 0.0


# === Masks ===


def causal_mask(seq_len: int) -> Mask:
    """(seq_len, seq_len) mask: query i may attend to key j when j <= i (no peeking ahead).

    True means "may attend", as in PyTorch's ``scaled_dot_product_attention``.

    >>> causal_mask(3)
    [[True, False, False], [True, True, False], [True, True, True]]
    """
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"causal_mask: seq_len must be a positive int, got {seq_len!r}")
    return [[j <= i for j in range(seq_len)] for i in range(seq_len)]


def padding_mask(token_ids: Sequence[int], pad_id: int, *, num_queries: Optional[int] = None) -> Mask:
    """(num_queries, len(token_ids)) mask: every query may attend to every key that is not padding.

    num_queries defaults to len(token_ids) (self-attention); pass the number of
    queries when the ids are a cross-attention context.

    >>> padding_mask([1, 3, 0], pad_id=0)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    if not isinstance(token_ids, (list, tuple)) or len(token_ids) == 0:
        raise ShapeError("padding_mask: token_ids must be a non-empty list of ints")
    keep = [t != pad_id for t in token_ids]
    if not any(keep):
        raise ValueError(
            f"padding_mask: every token id is the pad id {pad_id}; no key is left to attend to"
        )
    rows = len(token_ids) if num_queries is None else num_queries
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ValueError(f"padding_mask: num_queries must be a positive int, got {num_queries!r}")
    return [list(keep) for _ in range(rows)]


def length_mask(length: int, seq_len: int, *, num_queries: Optional[int] = None) -> Mask:
    """Padding mask from a length: the first ``length`` of ``seq_len`` keys are real.

    >>> length_mask(2, 3)
    [[True, True, False], [True, True, False], [True, True, False]]
    """
    for name, value in (("length", length), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"length_mask: {name} must be a positive int, got {value!r}")
    if length > seq_len:
        raise ValueError(f"length_mask: length {length} is longer than seq_len {seq_len}")
    return padding_mask([int(j < length) for j in range(seq_len)], 0, num_queries=num_queries)


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
    shapes = [_check_mask("combine_masks", f"masks[{t}]", M) for t, M in enumerate(masks)]
    for t, s in enumerate(shapes):
        if s != shapes[0]:
            raise ShapeError(
                f"combine_masks: masks[0] is {describe(shapes[0])} but masks[{t}] is "
                f"{describe(s)}; masks must have the same shape"
            )
    return [[all(M[i][j] for M in masks) for j in range(shapes[0][1])] for i in range(shapes[0][0])]


def _check_mask(func: str, name: str, mask: object) -> tuple[int, int]:
    if not isinstance(mask, (list, tuple)) or len(mask) == 0:
        raise ShapeError(f"{func}: {name} must be a non-empty list of rows of True/False")
    width = len(mask[0]) if isinstance(mask[0], (list, tuple)) else -1
    for i, row in enumerate(mask):
        if not isinstance(row, (list, tuple)) or len(row) != width:
            raise ShapeError(f"{func}: {name} is ragged at row {i}; every row must have the same length")
        for j, value in enumerate(row):
            if not isinstance(value, bool):
                raise TypeError(
                    f"{func}: {name}[{i}][{j}] is {value!r}; mask entries must be True "
                    "(may attend) or False (masked)"
                )
    return len(mask), width


# === Counting multiply-adds ===


class MultiplyAddCounter:
    """Multiplies matrices and counts, per named step, the multiply-adds it did.

    A (n, m) @ (m, p) product is n * p dot products of length m: n * m * p.

    >>> c = MultiplyAddCounter()
    >>> c.matmul("demo", [[1, 2]], [[3], [4]])
    [[11.0]]
    >>> c.counts
    {'demo': 2}
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def matmul(self, step: str, A: Matrix, B: Matrix) -> Matrix:
        """``matmul(A, B)``, adding its multiply-adds to ``counts[step]``."""
        return self._record(step, A, matmul(A, B))

    def _product(self, step: str, A: Matrix, B: Matrix) -> Matrix:
        """The same for shapes already checked (attention checks its inputs once, up front)."""
        return self._record(step, A, _matmul(A, B))

    def _record(self, step: str, A: Matrix, result: Matrix) -> Matrix:
        done = len(A) * len(A[0]) * len(result[0])
        self.counts[step] = self.counts.get(step, 0) + done
        return result

    @property
    def total(self) -> int:
        return sum(self.counts.values())


# === Multi-head attention ===


class AttentionTrace(NamedTuple):
    """Every intermediate of one multi-head attention pass (T queries, T_k keys)."""

    Q: list[Matrix]  # per query head, (T, d_k)
    K: list[Matrix]  # per key/value head, (T_k, d_k)
    V: list[Matrix]  # per key/value head, (T_k, d_v)
    scores: list[Matrix]  # per query head, (T, T_k): Q K^T * scale, -inf where masked
    attention: list[Matrix]  # per query head, (T, T_k): softmax of each row of scores
    head_outputs: list[Matrix]  # per query head, (T, d_v): attention @ V
    concat: Matrix  # (T, num_heads * d_v)
    output: Matrix  # (T, d_model)
    multiply_adds: dict[str, int]  # per step, counted as the products ran


def kv_head_for(h: int, num_heads: int, num_kv_heads: int) -> int:
    """The key/value head that query head h reads: h // (num_heads // num_kv_heads).

    >>> [kv_head_for(h, 8, 2) for h in range(8)]
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    return h // (num_heads // num_kv_heads)


def _project(counter: MultiplyAddCounter, step: str, X: Matrix, W: Matrix, b: Optional[Vector]) -> Matrix:
    P = counter._product(step, X, W)
    return P if b is None else [[p + c for p, c in zip(row, b)] for row in P]


def _check_inputs(func: str, x: object, weights: object, context: object, mask: object, scale: object):
    dims = check_weights(func, weights)
    T, width = check_matrix(func, "x", x, finite=True)
    if width != dims.d_model:
        raise ShapeError(
            f"{func}: x is {T}x{width} but the weights expect d_model = {dims.d_model} columns"
        )
    T_k = T
    if context is not None:
        T_k, c_width = check_matrix(func, "context", context, finite=True)
        if c_width != dims.d_model:
            raise ShapeError(
                f"{func}: context is {T_k}x{c_width} but the weights expect d_model = "
                f"{dims.d_model} columns"
            )
    if mask is not None:
        mask_shape = _check_mask(func, "mask", mask)
        if mask_shape != (T, T_k):
            raise ShapeError(
                f"{func}: mask is {describe(mask_shape)}; it must be "
                f"(queries, keys) = {T}x{T_k}"
            )
        for i, row in enumerate(mask):
            if not any(row):
                raise ValueError(
                    f"{func}: mask row {i} is all False, so query {i} may attend to no key; "
                    "every query needs at least one key"
                )
    _check_scale(func, scale)
    return dims


def _check_scale(func: str, scale: object) -> None:
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not math.isfinite(scale) or scale <= 0):
        raise ValueError(f"{func}: scale must be a positive finite number, got {scale!r}")


def _attend(
    func: str,
    dims: Dims,
    weights: MHAWeights,
    Q: list[Matrix],
    K: list[Matrix],
    V: list[Matrix],
    mask: Optional[Mask],
    scale: float,
    counter: MultiplyAddCounter,
) -> AttentionTrace:
    """Scores, softmax, weighted sum and W_O, given each head's Q, K and V."""
    scores, attention, head_outputs = [], [], []
    for h in range(dims.num_heads):
        g = kv_head_for(h, dims.num_heads, dims.num_kv_heads)
        K_T = [list(col) for col in zip(*K[g])]
        S = [[s * scale for s in row] for row in counter._product("scores", Q[h], K_T)]
        if mask is not None:
            S = [[s if keep else -math.inf for s, keep in zip(row, mask_row)]
                 for row, mask_row in zip(S, mask)]
        A = [_softmax(func, row, f"head {h}, query {i}: ") for i, row in enumerate(S)]
        scores.append(S)
        attention.append(A)
        head_outputs.append(counter._product("weighted_sum", A, V[g]))
    concat = concat_heads(head_outputs)
    output = _project(counter, "W_O", concat, weights.W_O, weights.b_O)
    return AttentionTrace(Q, K, V, scores, attention, head_outputs, concat, output, dict(counter.counts))


def _heads_qkv(counter: MultiplyAddCounter, dims: Dims, weights: MHAWeights, x: Matrix, source: Matrix):
    """Each query head's Q from x, each key/value head's K and V from source."""
    b_Q = weights.b_Q or [None] * dims.num_heads
    b_K = weights.b_K or [None] * dims.num_kv_heads
    b_V = weights.b_V or [None] * dims.num_kv_heads
    Q = [_project(counter, "Q", x, W, b) for W, b in zip(weights.W_Q, b_Q)]
    K = [_project(counter, "K", source, W, b) for W, b in zip(weights.W_K, b_K)]
    V = [_project(counter, "V", source, W, b) for W, b in zip(weights.W_V, b_V)]
    return Q, K, V


def _default_scale(dims: Dims, scale: Optional[float]) -> float:
    return 1 / math.sqrt(dims.d_k) if scale is None else scale


def _run(func: str, x, weights, context, mask, scale) -> AttentionTrace:
    dims = _check_inputs(func, x, weights, context, mask, scale)
    counter = MultiplyAddCounter()
    Q, K, V = _heads_qkv(counter, dims, weights, x, x if context is None else context)
    return _attend(func, dims, weights, Q, K, V, mask, _default_scale(dims, scale), counter)


def attention_trace(
    x: Matrix,
    weights: MHAWeights,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> AttentionTrace:
    """Multi-head attention of x (T, d_model), keeping every intermediate.

    Queries come from x; keys and values from ``context`` (T_k, d_model) when
    given (cross-attention), else from x. ``mask`` (T, T_k) is True where query
    i may attend to key j. ``scale`` defaults to 1 / sqrt(d_k); pass 1.0 to see
    what happens without it. ``multiply_adds`` counts, per step, the
    multiply-adds of the products that actually ran.
    """
    return _run("attention_trace", x, weights, context, mask, scale)


def multi_head_attention(
    x: Matrix,
    weights: MHAWeights,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> Matrix:
    """Multi-head attention of x (T, d_model); the result is (T, d_model).

    Exactly ``attention_trace(x, weights, ...).output``; see there for the arguments.

    >>> from mha_lists import init_mha_weights
    >>> w = init_mha_weights(4, 2, seed=0)
    >>> out = multi_head_attention([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], w)
    >>> len(out), len(out[0])
    (2, 4)
    """
    return _run("multi_head_attention", x, weights, context, mask, scale).output


# === Decoding one token at a time ===


class KVCache(NamedTuple):
    """Keys and values of the tokens decoded so far, one matrix per key/value head."""

    K: list[Matrix]  # per key/value head, (t, d_k)
    V: list[Matrix]  # per key/value head, (t, d_v)


def decode_step(
    x_row: Vector,
    weights: MHAWeights,
    cache: Optional[KVCache] = None,
    *,
    scale: Optional[float] = None,
) -> tuple[Vector, KVCache]:
    """Attend from one new token to itself and every earlier token; grow the cache by one row.

    x_row (d_model,) is the new token. ``cache`` holds the keys and values of
    the t tokens before it (None for the first token). Returns the output row
    (d_model,) and a new cache with t + 1 rows; the old cache is not changed.
    Decoding a sequence this way gives, bit for bit, the rows of the full pass
    with ``causal_mask``: only the new query is computed, the keys and values
    of earlier tokens are read from the cache instead of recomputed.
    """
    func = "decode_step"
    dims = check_weights(func, weights)
    if check_vector(func, "x_row", x_row, finite=True) != dims.d_model:
        raise ShapeError(f"{func}: x_row has {len(x_row)} entries but the weights expect d_model = {dims.d_model}")
    if cache is not None:
        _check_cache(func, cache, dims)
    _check_scale(func, scale)
    counter = MultiplyAddCounter()
    x = [list(x_row)]
    Q, new_K, new_V = _heads_qkv(counter, dims, weights, x, x)
    if cache is not None:
        new_K = [old + new for old, new in zip(cache.K, new_K)]
        new_V = [old + new for old, new in zip(cache.V, new_V)]
    trace = _attend(func, dims, weights, Q, new_K, new_V, None, _default_scale(dims, scale), counter)
    return trace.output[0], KVCache(new_K, new_V)


def _check_cache(func: str, cache: object, dims: Dims) -> None:
    if not isinstance(cache, KVCache):
        raise TypeError(f"{func}: cache must be a KVCache (or None for the first token), got {type(cache).__name__}")
    for name, mats, width in (("K", cache.K, dims.d_k), ("V", cache.V, dims.d_v)):
        if not isinstance(mats, (list, tuple)) or len(mats) != dims.num_kv_heads:
            n = len(mats) if isinstance(mats, (list, tuple)) else type(mats).__name__
            raise ShapeError(
                f"{func}: cache.{name} has {n} matrices; it needs one per key/value head ({dims.num_kv_heads})"
            )
        for g, M in enumerate(mats):
            rows, cols = check_matrix(func, f"cache.{name}[{g}]", M, finite=True)
            if cols != width:
                raise ShapeError(
                    f"{func}: cache.{name}[{g}] is {rows}x{cols}; its rows must have {width} entries "
                    f"(d_{'k' if name == 'K' else 'v'})"
                )
            if rows != len(cache.K[0]):
                raise ShapeError(f"{func}: cache.{name}[{g}] has {rows} rows but cache.K[0] has {len(cache.K[0])}; every head must hold the same tokens")
