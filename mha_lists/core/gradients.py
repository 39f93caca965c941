"""Gradients of multi-head attention: the backward pass, written like the forward one.

``grad_output`` G is the gradient of a loss with respect to the layer's output
(T, d_model); the functions here return the gradient of ``sum(output * G)``
with respect to every input and weight, by the chain rule read backwards
through the forward pass (query head h reads key/value head g = kv_head_for(h)):

    dW_O = concat^T G                 db_O = column sums of G
    d_concat = G W_O^T                d_head_h = head h's columns of d_concat
    dA_h = d_head_h V_g^T             dV_g += A_h^T d_head_h
    dS_h = each row p: p * (dp - p . dp)      (the softmax Jacobian diag(p) - p p^T)
    dQ_h = dS_h K_g * scale           dK_g += dS_h^T Q_h * scale
    dW_Q[h] = X^T dQ_h                db_Q[h] = column sums of dQ_h
    dW_K[g] = C^T dK_g, dW_V[g] = C^T dV_g (and their bias sums)
    dX = sum over heads of dQ_h W_Q[h]^T  (+ the K and V terms when C is X)
       = [dQ_0 | dQ_1 | ...] [W_Q[0] | W_Q[1] | ...]^T     (one matmul adds the heads)
    dC = sum over key/value heads of dK_g W_K[g]^T + dV_g W_V[g]^T  (cross-attention)

A shared key/value head (grouped-query or multi-query attention) gathers the
gradients of every query head that reads it: the "+=" above. Masked keys have
weight 0, so their dS entries are exactly 0 and they pass no gradient back.

=====================================  ============================================
softmax_backward(p, dp)                ds for one softmax row
softmax_jacobian(p)                    the matrix diag(p) - p p^T itself
column_sums(M), sum_matrices(Ms)       bias gradients; gradients that meet
attention_backward(Q, K, V, G)         one head: (dQ, dK, dV)
attention_backward_trace(x, w, G)      every backward intermediate, per head
multi_head_attention_backward(x, w, G) MHAGradients of every input and weight
MHAGradients, BackwardTrace            what the last two return
=====================================  ============================================

Every sum is a ``math.fsum`` (through ``matmul`` or directly), so the
gradients are the same bits on CPython 3.10 to 3.13. No argument is changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import mul
from typing import NamedTuple, Optional

from .attention import (LAYER_CONTRACT, ONE_HEAD_CONTRACT, AttentionTrace, MHAWeights, attention_steps,
                        attention_trace, default_scale, each_head, project_heads)
from .checks import check_same_shapes, checked
from .matrix import Matrix, Vector, concat_heads, matmul, split_heads, transpose
from .matrix import scale as scale_matrix  # the name ``scale`` is the attention scale here
from .softmax_and_masks import Mask

__all__ = ["softmax_backward", "softmax_jacobian", "column_sums", "attention_backward",
           "attention_backward_trace", "multi_head_attention_backward"]


# === Small pieces ===


@checked(p="finite vector n", dp="finite vector n", finite_result=True,
         why={"n": "p has {expected} entries and dp has {value}; they must have the same length"})
def softmax_backward(p: Vector, dp: Vector) -> Vector:
    """Gradient of one softmax row (n,): ds = p * (dp - p . dp), given p = softmax(s) and dp.

    This is ``dp`` times the Jacobian diag(p) - p p^T, without building the matrix.

    >>> softmax_backward([0.5, 0.5], [1.0, 0.0])
    [0.25, -0.25]
    """
    p_dot_dp = math.fsum(map(mul, p, dp))
    return [p_j * (dp_j - p_dot_dp) for p_j, dp_j in zip(p, dp)]


@checked(p="finite vector n", finite_result=True)
def softmax_jacobian(p: Vector) -> Matrix:
    """The (n, n) Jacobian of softmax at p = softmax(s): entry [i][j] = d p_i / d s_j = p_i (δ_ij - p_j).

    >>> softmax_jacobian([0.5, 0.5])
    [[0.25, -0.25], [-0.25, 0.25]]
    """
    return [[p_i * ((1.0 if i == j else 0.0) - p_j) for j, p_j in enumerate(p)] for i, p_i in enumerate(p)]


@checked(M="finite matrix n m")
def column_sums(M: Matrix) -> Vector:
    """Sum each column of M (n, m) with ``math.fsum``; the result is (m,). The gradient of a bias.

    >>> column_sums([[1, 2], [3, 4]])
    [4.0, 6.0]
    """
    return [math.fsum(column) for column in zip(*M)]


def _all_one_shape(func: str, arguments: dict, sizes: dict) -> None:
    check_same_shapes(func, "Ms", arguments["Ms"], finite=True, empty="Ms must be a non-empty list of matrices",
                      rule="every matrix must have the same shape")


@checked(also=_all_one_shape)
def sum_matrices(Ms: Sequence[Matrix]) -> Matrix:
    """Add matrices of the same shape entry by entry, each entry one ``math.fsum``.

    Where a value is used in several places (X feeds Q, K and V; a shared
    key/value head serves several query heads), its gradient is the sum.

    >>> sum_matrices([[[1, 2]], [[10, 20]], [[100, 200]]])
    [[111.0, 222.0]]
    """
    return [[math.fsum(entries) for entries in zip(*rows)] for rows in zip(*Ms)]


# === One head ===


class HeadGradients(NamedTuple):
    """One head's backward pass."""

    dA: Matrix  # (T, T_k): d_head V^T, the gradient of the attention weights
    dS: Matrix  # (T, T_k): dA through each softmax row, the gradient of the scores
    dQ: Matrix  # (T, d_k) = dS K * scale
    dK: Matrix  # (T_k, d_k) = dS^T Q * scale
    dV: Matrix  # (T_k, d_v) = A^T d_head


def _head_backward(Q: Matrix, K: Matrix, V: Matrix, A: Matrix, d_head: Matrix, *, mask: Optional[Mask],
                   scale: float) -> HeadGradients:
    """One head's gradients, given its weights A and the gradient of its output (a ``step`` of each_head)."""
    dA = matmul(d_head, transpose(V))
    dS = [softmax_backward(p, dp) for p, dp in zip(A, dA)]
    dQ = scale_matrix(matmul(dS, K), scale)
    dK = scale_matrix(matmul(transpose(dS), Q), scale)
    return HeadGradients(dA, dS, dQ, dK, matmul(transpose(A), d_head))


@checked(**dict(ONE_HEAD_CONTRACT, grad_out="finite matrix T d_v",
                why=dict(ONE_HEAD_CONTRACT["why"], grad_out="{name} is {shape}; it must have the shape of the "
                                                            "output, (queries, d_v) = {T}x{d_v}"),
                finite_result=lambda grads: grads[0] + grads[1] + grads[2]))
def attention_backward(
    Q: Matrix,
    K: Matrix,
    V: Matrix,
    grad_out: Matrix,
    *,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> tuple[Matrix, Matrix, Matrix]:
    """Gradients (dQ, dK, dV) of one head, out = softmax(Q K^T * scale) V, given grad_out (T, d_v).

    Q is (T, d_k), K (T_k, d_k), V (T_k, d_v); ``mask`` (T, T_k) is True where
    query i may attend to key j; ``scale`` defaults to 1 / sqrt(d_k). The
    gradients are those of sum(out * grad_out), with the shapes of Q, K and V.

    One query, two equal keys (weights 1/2 each), values 1 and 3, scale 1. Each
    value row gets half of grad_out; the key whose value (3) is above the
    output (2) gets a positive gradient: raising its score raises the output.
    dQ is 0 because moving q changes both scores alike.

    >>> attention_backward([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], [[1.0]], scale=1.0)
    ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])
    """
    A = attention_steps(Q, K, V, mask=mask, scale=scale).weights  # the forward pass
    grads = _head_backward(Q, K, V, A, grad_out, mask=mask, scale=default_scale(len(K[0]), scale))
    return grads.dQ, grads.dK, grads.dV


# === Multi-head attention ===


class MHAGradients(NamedTuple):
    """Gradients of sum(output * grad_output), shaped like what they are the gradient of."""

    x: Matrix  # (T, d_model)
    context: Optional[Matrix]  # (T_k, d_model) for cross-attention, None for self-attention
    W_Q: list[Matrix]  # one (d_model, d_k) matrix per query head
    W_K: list[Matrix]  # one (d_model, d_k) matrix per key/value head
    W_V: list[Matrix]  # one (d_model, d_v) matrix per key/value head
    W_O: Matrix  # (num_heads * d_v, d_model)
    b_Q: Optional[list[Vector]] = None  # None when the weights have no biases
    b_K: Optional[list[Vector]] = None
    b_V: Optional[list[Vector]] = None
    b_O: Optional[Vector] = None


class BackwardTrace(NamedTuple):
    """Every intermediate of one backward pass, in the order they are computed."""

    forward: AttentionTrace  # the forward pass the gradients flow back through
    grad_output: Matrix  # (T, d_model): where the backward pass starts
    d_concat: Matrix  # (T, num_heads * d_v) = grad_output W_O^T
    d_heads: list[Matrix]  # per query head, (T, d_v): its columns of d_concat
    dA: list[Matrix]  # per query head, (T, T_k) = d_head V^T
    dS: list[Matrix]  # per query head, (T, T_k): dA through each softmax row
    dQ: list[Matrix]  # per query head, (T, d_k) = dS K * scale
    dK: list[Matrix]  # per key/value head, (T_k, d_k): summed over the query heads reading it
    dV: list[Matrix]  # per key/value head, (T_k, d_v): summed over the query heads reading it
    gradients: MHAGradients  # of every input and weight


def _backward(weights: MHAWeights, Q: list[Matrix], K: list[Matrix], V: list[Matrix], A: list[Matrix],
              concat: Matrix, x: Matrix, context: Optional[Matrix], G: Matrix, scale: Optional[float]) -> BackwardTrace:
    """The backward pass, from the forward pass's Q, K, V, attention weights A and concat (its output
    is not needed). The trace's ``forward`` is left None for the caller that has one."""
    h_count, g_count = len(Q), len(K)
    group = h_count // g_count  # query heads per key/value head

    # Output projection: output = concat W_O + b_O.
    dW_O = matmul(transpose(concat), G)
    d_concat = matmul(G, transpose(weights.W_O))
    d_heads = split_heads(d_concat, h_count)

    # Each head: head_h = softmax(Q_h K_g^T * c) V_g, through the forward pass's head loop.
    c = default_scale(len(K[0][0]), scale)
    heads = each_head(Q, K, V, scale=c, step=_head_backward, per_head=(A, d_heads))
    dQ = [head.dQ for head in heads]
    # A key/value head read by several query heads gathers their gradients (read by one: that head's).
    if group == 1:
        dK, dV = [head.dK for head in heads], [head.dV for head in heads]
    else:
        dK = [sum_matrices([head.dK for head in heads[g * group:(g + 1) * group]]) for g in range(g_count)]
        dV = [sum_matrices([head.dV for head in heads[g * group:(g + 1) * group]]) for g in range(g_count)]

    # Projections: Q_h = X W_Q[h] + b_Q[h], K_g = C W_K[g] + b_K[g], V_g = C W_V[g] + b_V[g].
    X_T = transpose(x)
    C_T = X_T if context is None else transpose(context)
    dW_Q = [matmul(X_T, dQ_h) for dQ_h in dQ]
    dW_K = [matmul(C_T, dK_g) for dK_g in dK]
    dW_V = [matmul(C_T, dV_g) for dV_g in dV]
    # X feeds every query head, C every key and value head: dX is the sum of
    # dQ_h W_Q[h]^T over the heads (plus the K and V terms when C is X). Joined
    # side by side, [dQ_0 | dQ_1 | ...] [W_Q[0] | W_Q[1] | ...]^T is that sum,
    # every entry one fsum over all the heads' products.
    if context is None:
        dx = matmul(concat_heads(dQ + dK + dV), transpose(concat_heads(weights.W_Q + weights.W_K + weights.W_V)))
        dcontext = None
    else:
        dx = matmul(concat_heads(dQ), transpose(concat_heads(weights.W_Q)))
        dcontext = matmul(concat_heads(dK + dV), transpose(concat_heads(weights.W_K + weights.W_V)))

    biases = {}
    if weights.b_Q is not None:
        biases["b_Q"] = [column_sums(dQ_h) for dQ_h in dQ]
    if weights.b_K is not None:
        biases["b_K"] = [column_sums(dK_g) for dK_g in dK]
    if weights.b_V is not None:
        biases["b_V"] = [column_sums(dV_g) for dV_g in dV]
    if weights.b_O is not None:
        biases["b_O"] = column_sums(G)
    grads = MHAGradients(dx, dcontext, dW_Q, dW_K, dW_V, dW_O, **biases)
    return BackwardTrace(None, [list(row) for row in G], d_concat, d_heads, [head.dA for head in heads],
                         [head.dS for head in heads], dQ, dK, dV, grads)


_BACKWARD = dict(LAYER_CONTRACT, grad_output="finite matrix T d_model", mask="optional mask T T_k",
                 scale="optional positive number", same={"T_k": "T"},
                 why=dict(LAYER_CONTRACT["why"], grad_output="{name} is {shape}; it must have the shape of the "
                                                              "output, (T, d_model) = {T}x{d_model}"))


def _every_gradient(g: MHAGradients) -> Matrix:
    """The rows of every weight's and input's gradient, for the door's finite check (a bias's gradient
    is an fsum of finite numbers, which raises OverflowError itself rather than return inf)."""
    return g.x + (g.context or []) + g.W_O + [row for M in g.W_Q + g.W_K + g.W_V for row in M]


@checked(**_BACKWARD, finite_result=lambda trace: _every_gradient(trace.gradients))
def attention_backward_trace(
    x: Matrix,
    weights: MHAWeights,
    grad_output: Matrix,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> BackwardTrace:
    """The backward pass of multi-head attention of x (T, d_model), keeping every intermediate.

    ``grad_output`` (T, d_model) is the gradient of a loss with respect to the
    output; the other arguments are those of ``attention_trace``, which runs
    first to give the forward intermediates. ``.gradients`` is what
    ``multi_head_attention_backward`` returns.
    """
    fwd = attention_trace(x, weights, context=context, mask=mask, scale=scale)
    back = _backward(weights, fwd.Q, fwd.K, fwd.V, fwd.attention, fwd.concat, x, context, grad_output, scale)
    return back._replace(forward=fwd)


@checked(**_BACKWARD, finite_result=_every_gradient)
def multi_head_attention_backward(
    x: Matrix,
    weights: MHAWeights,
    grad_output: Matrix,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> MHAGradients:
    """Gradients of sum(multi_head_attention(x, weights, ...) * grad_output); grad_output is (T, d_model).

    Returns ``MHAGradients`` shaped like x, context (None for self-attention)
    and every weight and bias (None where the weights have none). The other
    arguments are those of ``multi_head_attention``.

    With all-zero weights every head's output is 0, so only W_O (and b_O) feel
    a gradient, and that gradient is concat^T grad_output = 0:

    >>> from mha_lists import MHAWeights
    >>> zero = MHAWeights([[[0.0]]], [[[0.0]]], [[[0.0]]], [[0.0]], b_O=[0.0])
    >>> g = multi_head_attention_backward([[1.0], [2.0]], zero, [[1.0], [1.0]])
    >>> g.W_O, g.b_O, g.x
    ([[0.0]], [2.0], [[0.0], [0.0]])
    """
    # The forward pass up to the joined heads: the gradients do not need its output, concat W_O + b_O.
    Q, K, V = project_heads(x, weights, context)
    heads = each_head(Q, K, V, mask=mask, scale=scale)
    concat = concat_heads([head.output for head in heads])
    return _backward(weights, Q, K, V, [head.weights for head in heads], concat, x, context, grad_output,
                     scale).gradients
