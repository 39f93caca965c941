"""Attention: one head, then many -- the formula, written with the functions notebook 00 teaches.

    attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Q (T, d_k) holds one query per row, K (T_k, d_k) one key per row, V (T_k, d_v)
one value per row. Row i of the result (T, d_v) is an average of V's rows,
weighted by how well query i matches each key. M is 0 where the mask allows a
key and -inf where it does not.

Multi-head attention runs ``attention`` once per head: for each query head h
(reading key/value head g = h // (num_heads // num_kv_heads)),

    Q_h = X W_Q[h] + b_Q[h]          K_g = C W_K[g] + b_K[g]      V_g = C W_V[g] + b_V[g]
    head_h = attention(Q_h, K_g, V_g)
    output = [head_0 | head_1 | ...] W_O + b_O

C is X itself (self-attention) or the ``context`` (cross-attention).
``attention_trace`` runs the same steps and keeps every intermediate.

Every weight is (d_in, d_out) and applied as ``X @ W`` -- W_O included:
``W_Q[h]`` (d_model, d_k) per query head; ``W_K[g]`` (d_model, d_k) and ``W_V[g]``
(d_model, d_v) per key/value head (num_kv_heads = num_heads is plain multi-head
attention, a smaller divisor grouped-query attention, 1 multi-query); ``W_O``
(num_heads * d_v, d_model); optional biases.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

from . import matrix
from .checks import (ShapeError, check_int, check_matrix, check_number, check_positive_int, check_same_shapes, check_vector, reported_as)
from .matrix import Matrix, Vector, add_row, concat_heads, matmul, transpose
from .softmax_and_masks import Mask, apply_mask, check_mask, softmax_rows

__all__ = ["attention", "default_scale", "multi_head_attention", "attention_trace", "AttentionTrace",
           "kv_head_for", "linear", "project_heads", "check_inputs", "MHAWeights", "Dims", "check_weights",
           "multiply_adds"]


# === The weights ===


class MHAWeights(NamedTuple):
    """Weights of one multi-head attention layer (see the module docstring for shapes)."""

    W_Q: list[Matrix]  # one (d_model, d_k) matrix per query head
    W_K: list[Matrix]  # one (d_model, d_k) matrix per key/value head
    W_V: list[Matrix]  # one (d_model, d_v) matrix per key/value head
    W_O: Matrix  # (num_heads * d_v, d_model)
    b_Q: Optional[list[Vector]] = None  # one (d_k,) vector per query head
    b_K: Optional[list[Vector]] = None  # one (d_k,) vector per key/value head
    b_V: Optional[list[Vector]] = None  # one (d_v,) vector per key/value head
    b_O: Optional[Vector] = None  # (d_model,)


class Dims(NamedTuple):
    """The sizes a set of weights implies."""

    d_model: int
    num_heads: int
    num_kv_heads: int
    d_k: int
    d_v: int


def _check_biases(func: str, name: str, biases: object, count: int, width: int) -> None:
    if biases is None:
        return
    if not isinstance(biases, (list, tuple)) or len(biases) != count:
        n = len(biases) if isinstance(biases, (list, tuple)) else type(biases).__name__
        raise ShapeError(f"{func}: weights.{name} has {n} vectors; it needs one per head ({count})")
    for h, b in enumerate(biases):
        if check_vector(func, f"weights.{name}[{h}]", b, finite=True) != width:
            raise ShapeError(
                f"{func}: weights.{name}[{h}] has {len(b)} entries; it must have {width} "
                f"(the width of that head)"
            )


def check_weights(func: str, weights: object) -> Dims:
    """Check every shape in ``weights`` against the others, and every entry is finite; return the sizes."""
    if not isinstance(weights, MHAWeights):
        raise TypeError(f"{func}: weights must be an MHAWeights, got {type(weights).__name__}")
    h, d_model, d_k = check_same_shapes(func, "weights.W_Q", weights.W_Q, finite=True)
    g, d_model_k, d_k_k = check_same_shapes(func, "weights.W_K", weights.W_K, finite=True)
    g_v, d_model_v, d_v = check_same_shapes(func, "weights.W_V", weights.W_V, finite=True)
    if (d_model_k, d_k_k) != (d_model, d_k):
        raise ShapeError(
            f"{func}: W_Q heads are {d_model}x{d_k} but W_K heads are {d_model_k}x{d_k_k}; "
            "queries and keys must have the same width d_k to be multiplied"
        )
    if g_v != g or d_model_v != d_model:
        raise ShapeError(
            f"{func}: W_K has {g} heads of {d_model}x{d_k} but W_V has {g_v} heads of "
            f"{d_model_v}x{d_v}; keys and values need the same number of heads and d_model rows"
        )
    if h % g:
        raise ShapeError(
            f"{func}: {h} query heads and {g} key/value heads; num_kv_heads must divide num_heads"
        )
    rows, cols = check_matrix(func, "weights.W_O", weights.W_O, finite=True)
    if (rows, cols) != (h * d_v, d_model):
        raise ShapeError(
            f"{func}: W_O is {rows}x{cols}; it must be (num_heads * d_v) x d_model = "
            f"{h * d_v}x{d_model} ({h} heads of width {d_v})"
        )
    _check_biases(func, "b_Q", weights.b_Q, h, d_k)
    _check_biases(func, "b_K", weights.b_K, g, d_k)
    _check_biases(func, "b_V", weights.b_V, g, d_v)
    if weights.b_O is not None and check_vector(func, "weights.b_O", weights.b_O, finite=True) != d_model:
        raise ShapeError(f"{func}: weights.b_O has {len(weights.b_O)} entries; it must have d_model = {d_model}")
    return Dims(d_model, h, g, d_k, d_v)


# === One head ===


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


# === Many heads ===


def kv_head_for(h: int, num_heads: int, num_kv_heads: int) -> int:
    """The key/value head that query head h reads: h // (num_heads // num_kv_heads).

    >>> [kv_head_for(h, 8, 2) for h in range(8)]
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    func = "kv_head_for"
    check_positive_int(func, "num_heads", num_heads)
    check_positive_int(func, "num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ShapeError(
            f"{func}: num_kv_heads {num_kv_heads} does not divide num_heads {num_heads}; "
            "each key/value head must serve the same number of query heads"
        )
    if not 0 <= check_int(func, "h", h) < num_heads:
        raise ValueError(f"{func}: h is {h}; a query head is numbered 0 to {num_heads - 1}")
    return h // (num_heads // num_kv_heads)


def linear(X: Matrix, W: Matrix, b: Optional[Vector] = None) -> Matrix:
    """X (n, d_in) W (d_in, d_out), plus b (d_out,) on every row when given.

    >>> linear([[1, 2]], [[1, 0], [0, 1]], [10, 20])
    [[11.0, 22.0]]
    """
    with reported_as("linear"):
        P = matmul(X, W)
        return P if b is None else add_row(P, b)


def project_heads(x: Matrix, weights: MHAWeights, context: Optional[Matrix] = None):
    """Each query head's Q from x; each key/value head's K and V from context (default x).

    Returns three lists: Q (num_heads matrices), K and V (num_kv_heads each).
    """
    source = x if context is None else context
    h, g = len(weights.W_Q), len(weights.W_K)
    b_Q, b_K, b_V = (weights.b_Q or [None] * h), (weights.b_K or [None] * g), (weights.b_V or [None] * g)
    Q = [linear(x, W, b) for W, b in zip(weights.W_Q, b_Q)]
    K = [linear(source, W, b) for W, b in zip(weights.W_K, b_K)]
    V = [linear(source, W, b) for W, b in zip(weights.W_V, b_V)]
    return Q, K, V


def check_inputs(func: str, x: object, weights: object, context: object, mask: object,
                 scale: object) -> tuple[Dims, float]:
    """Check every argument of a multi-head call once; return the sizes and the scale to use."""
    dims = check_weights(func, weights)
    T, width = check_matrix(func, "x", x, finite=True)
    if width != dims.d_model:
        raise ShapeError(f"{func}: x is {T}x{width} but the weights expect d_model = {dims.d_model} columns")
    T_k = T
    if context is not None:
        T_k, c_width = check_matrix(func, "context", context, finite=True)
        if c_width != dims.d_model:
            raise ShapeError(
                f"{func}: context is {T_k}x{c_width} but the weights expect d_model = {dims.d_model} columns"
            )
    if mask is not None:
        check_mask(func, "mask", mask, (T, T_k))
    return dims, default_scale(func, dims.d_k, scale)


def multi_head_attention(
    x: Matrix,
    weights: MHAWeights,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> Matrix:
    """Multi-head attention of x (T, d_model); the result is (T, d_model).

    Queries come from x; keys and values from ``context`` (T_k, d_model) when
    given (cross-attention), else from x. ``mask`` (T, T_k) is True where query
    i may attend to key j. ``scale`` defaults to 1 / sqrt(d_k).

    >>> from mha_lists import init_mha_weights
    >>> w = init_mha_weights(4, 2, seed=0)
    >>> out = multi_head_attention([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], w)
    >>> len(out), len(out[0])
    (2, 4)
    """
    func = "multi_head_attention"
    dims, c = check_inputs(func, x, weights, context, mask, scale)
    with reported_as(func):
        Q, K, V = project_heads(x, weights, context)
        heads = []
        for h in range(dims.num_heads):
            g = kv_head_for(h, dims.num_heads, dims.num_kv_heads)
            heads.append(attention(Q[h], K[g], V[g], mask=mask, scale=c))
        return linear(concat_heads(heads), weights.W_O, weights.b_O)


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
    multiply_adds: dict[str, int]  # per step: cost.multiply_adds of these sizes


def attention_trace(
    x: Matrix,
    weights: MHAWeights,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> AttentionTrace:
    """``multi_head_attention`` of x (T, d_model), keeping every intermediate (see AttentionTrace).

    The steps of ``attention`` are written out here so each can be kept; the
    output is the same, bit for bit. ``multiply_adds`` counts, per step, the
    multiply-adds of the products that ran (``cost.multiply_adds``).
    """
    func = "attention_trace"
    dims, c = check_inputs(func, x, weights, context, mask, scale)
    with reported_as(func):
        Q, K, V = project_heads(x, weights, context)
        scores, weights_per_head, head_outputs = [], [], []
        for h in range(dims.num_heads):
            g = kv_head_for(h, dims.num_heads, dims.num_kv_heads)
            S = apply_mask(matrix.scale(matmul(Q[h], transpose(K[g])), c), mask)
            A = softmax_rows(S)
            scores.append(S)
            weights_per_head.append(A)
            head_outputs.append(matmul(A, V[g]))
        concat = concat_heads(head_outputs)
        output = linear(concat, weights.W_O, weights.b_O)
    counts = multiply_adds(len(x), dims.d_model, dims.num_heads, d_k=dims.d_k, d_v=dims.d_v,
                           num_kv_heads=dims.num_kv_heads, context_len=len(K[0]))
    return AttentionTrace(Q, K, V, scores, weights_per_head, head_outputs, concat, output, counts)


# === Counting the work ===


def multiply_adds(
    seq_len: int,
    d_model: int,
    num_heads: int,
    *,
    d_k: Optional[int] = None,
    d_v: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    context_len: Optional[int] = None,
) -> dict[str, int]:
    """Multiply-adds of one multi-head attention pass, per step, in the order the steps run.

    T = seq_len queries, T_k = context_len keys (default T), h heads, g = num_kv_heads:

    - Q: T * d_model * (h * d_k); K: T_k * d_model * (g * d_k); V: T_k * d_model * (g * d_v)
    - scores: h * T * d_k * T_k; weighted_sum: h * T * T_k * d_v
    - W_O: T * (h * d_v) * d_model

    >>> multiply_adds(5, 16, 2)
    {'Q': 1280, 'K': 1280, 'V': 1280, 'scores': 400, 'weighted_sum': 400, 'W_O': 1280}
    """
    func = "multiply_adds"
    T = check_positive_int(func, "seq_len", seq_len)
    check_positive_int(func, "d_model", d_model)
    h = check_positive_int(func, "num_heads", num_heads)
    if (d_k is None or d_v is None) and d_model % h:
        raise ShapeError(
            f"{func}: d_model {d_model} is not divisible by num_heads {h}; pass d_k and d_v"
        )
    d_k = d_model // h if d_k is None else check_positive_int(func, "d_k", d_k)
    d_v = d_model // h if d_v is None else check_positive_int(func, "d_v", d_v)
    g = h if num_kv_heads is None else check_positive_int(func, "num_kv_heads", num_kv_heads)
    T_k = T if context_len is None else check_positive_int(func, "context_len", context_len)
    return {
        "Q": T * d_model * h * d_k,
        "K": T_k * d_model * g * d_k,
        "V": T_k * d_model * g * d_v,
        "scores": h * T * d_k * T_k,
        "weighted_sum": h * T * T_k * d_v,
        "W_O": T * h * d_v * d_model,
    }
