"""Multi-head attention: project, run ``attention`` once per head, concatenate, project again.

For each query head h (reading key/value head g = h // (num_heads // num_kv_heads)):

    Q_h = X W_Q[h] + b_Q[h]          K_g = C W_K[g] + b_K[g]      V_g = C W_V[g] + b_V[g]
    head_h = attention(Q_h, K_g, V_g) = softmax(Q_h K_g^T / sqrt(d_k) + M) V_g
    output = [head_0 | head_1 | ...] W_O + b_O

C is X itself (self-attention) or the ``context`` (cross-attention).
``attention_trace`` runs the same steps and keeps every intermediate.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from . import matrix
from .checks import ShapeError, check_int, check_matrix, check_positive_int, reported_as
from .cost import multiply_adds
from .masks import Mask, apply_mask, check_mask
from .matrix import Matrix, Vector, add_row, concat_heads, matmul, transpose
from .one_head import attention, default_scale
from .scores_to_weights import softmax_rows
from .weights import Dims, MHAWeights, check_weights

__all__ = ["multi_head_attention", "attention_trace", "AttentionTrace", "kv_head_for", "linear",
           "project_heads", "check_inputs"]


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
