"""Gradients of multi-head attention: the backward pass, written like the forward one.

``grad_output`` G is the gradient of a loss with respect to the layer's output
(T, d_model); the functions here return the gradient of ``sum(output * G)``
with respect to every input and weight, by the chain rule read backwards
through the forward pass (query head h reads key/value head g = h // (num_heads // num_kv_heads)):

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
softmax_rows_backward(A, dA)           ds for every row p of A, dp of dA (unchecked; one row,
                                       checked, and its Jacobian: teaching/softmax_row.py)
column_sums(M), summed(Ms)             bias gradients; gradients that meet
attention_backward(Q, K, V, G)         one head: (dQ, dK, dV)
attention_backward_trace(x, w, G)      every backward intermediate, per head
multi_head_attention_backward(x, w, G) MHAGradients of every input and weight
MHAGradients, BackwardTrace            what the last two return
head_backward, backward                the same, unchecked: a step of the head loop; the layer
=====================================  ============================================

Every sum is a ``math.fsum`` (through ``product`` or directly), so the
gradients are the same bits on CPython 3.10 to 3.13. No argument is changed.
"""

import math
from collections.abc import Sequence
from operator import mul
from typing import NamedTuple, Optional

from .attention import AttentionTrace, MHAWeights, check_head, check_layer, head_loop, one_head, trace_layer
from .checks import check_matrix
from .matrix import Matrix, Vector, columns_of, finite, joined, overflow_named, product
from .softmax_and_masks import Mask

__all__ = ["column_sums", "attention_backward", "attention_backward_trace", "multi_head_attention_backward"]


# === Small pieces ===


def softmax_rows_backward(A: Matrix, dA: Matrix) -> Matrix:  # unchecked softmax_backward, row by row
    """Each row p of A with its row dp of dA: p * (dp - p . dp)."""
    dS = []
    for p, dp in zip(A, dA):
        p_dot_dp = math.fsum(map(mul, p, dp))
        dS.append([p_j * (dp_j - p_dot_dp) for p_j, dp_j in zip(p, dp)])
    return dS


def column_sums(M: Matrix) -> Vector:  # (n, m) -> (m,)
    """Sum each column of M with ``math.fsum``: the gradient of a bias.

    >>> column_sums([[1, 2], [3, 4]])
    [4.0, 6.0]
    """
    check_matrix("column_sums", "M", M)
    with overflow_named("column_sums"):
        return sums_of_columns(M)  # fsum of finite numbers is finite, or raises OverflowError


def sums_of_columns(M: Matrix) -> Vector:  # unchecked column_sums
    try:
        return [math.fsum(column) for column in zip(*M)]
    except OverflowError:  # fsum's own: the running total left float64's range
        raise OverflowError("the column sums") from None


def summed(Ms: Sequence[Matrix]) -> Matrix:  # n x (r, c) -> (r, c), unchecked
    """Matrices of one shape added entry by entry, each entry one fsum: where a value is used in several
    places (a key/value head that several query heads read), its gradient is the sum."""
    return [[math.fsum(entries) for entries in zip(*rows)] for rows in zip(*Ms)]


# === One head ===


class HeadGradients(NamedTuple):
    """One head's backward pass."""

    dA: Matrix  # (T, T_k): d_head V^T, the gradient of the attention weights
    dS: Matrix  # (T, T_k): dA through each softmax row, the gradient of the scores
    dQ: Matrix  # (T, d_k) = dS K * scale
    dK: Matrix  # (T_k, d_k) = dS^T Q * scale
    dV: Matrix  # (T_k, d_v) = A^T d_head


def head_backward(Q: Matrix, K: Matrix, V: Matrix, A: Matrix, d_head: Matrix, *, mask: Optional[Mask],
                  scale: float) -> HeadGradients:
    """One head's gradients, given its weights A and the gradient of its output, unchecked (a step of the head loop)."""
    dA = finite(product(d_head, list(zip(*V))), "the gradients")  # d_head V^T; +inf and -inf would meet in fsum
    dS = softmax_rows_backward(A, dA)
    dS_T = list(zip(*dS))
    dQ = [[x * scale for x in row] for row in product(dS, K)]
    dK = [[x * scale for x in row] for row in product(dS_T, Q)]
    return HeadGradients(dA, dS, dQ, dK, product(list(zip(*A)), d_head))


def attention_backward(Q: Matrix, K: Matrix, V: Matrix, grad_out: Matrix, *, mask: Optional[Mask] = None,
                       scale: Optional[float] = None) -> tuple[Matrix, Matrix, Matrix]:  # -> (dQ, dK, dV)
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
    c = check_head("attention_backward", Q, K, V, mask, scale, ("grad_out", grad_out, "T d_v"))
    with overflow_named("attention_backward"):
        A = one_head(Q, K, V, mask=mask, scale=c).weights  # the forward pass
        grads = head_backward(Q, K, V, A, grad_out, mask=mask, scale=c)
        return finite(grads.dQ, "the gradients"), finite(grads.dK, "the gradients"), finite(grads.dV, "the gradients")


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
    values: Optional[Matrix] = None  # (T, d_model) when the values had an input of their own (see backward)


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


def backward(weights: MHAWeights, fwd: AttentionTrace, x: Matrix, context: Optional[Matrix], G: Matrix,
             scale: float, values: Optional[Matrix] = None) -> BackwardTrace:
    """The backward pass through a forward pass's intermediates, on arguments already checked.

    With ``values`` (the values' own input, as in ``attention.project``), ``.x`` is the gradient of the
    query and key input alone and ``.values`` that of the values' input."""
    h_count, g_count = len(fwd.Q), len(fwd.K)
    group = h_count // g_count  # query heads per key/value head

    # Output projection: output = concat W_O + b_O.
    dW_O = product(list(zip(*fwd.concat)), G)
    d_concat = product(G, list(zip(*weights.W_O)))  # G W_O^T
    d_heads = columns_of(d_concat, [len(fwd.V[0][0])] * h_count)

    # Each head: head_h = softmax(Q_h K_g^T * c) V_g, through the forward pass's head loop.
    heads = head_loop(fwd.Q, fwd.K, fwd.V, mask=None, scale=scale, step=head_backward,
                      per_head=(fwd.attention, d_heads))
    dQ = [head.dQ for head in heads]
    # A key/value head read by several query heads gathers their gradients (read by one: that head's).
    dK, dV = ([getattr(head, d) for head in heads] if group == 1 else
              [summed([getattr(head, d) for head in heads[g * group:(g + 1) * group]]) for g in range(g_count)]
              for d in ("dK", "dV"))

    # Projections: Q_h = X W_Q[h] + b_Q[h], K_g = C W_K[g] + b_K[g], V_g = C W_V[g] + b_V[g] (C is the context,
    # or X; the values may have an input of their own). Each head's weights get input^T d_head.
    k_in = "x" if context is None else "context"
    feeds = (("x", dQ, weights.W_Q), (k_in, dK, weights.W_K), (k_in if values is None else "values", dV, weights.W_V))
    inputs_T = {name: list(zip(*M)) for name, M in (("x", x), ("context", context), ("values", values)) if M is not None}
    dW_Q, dW_K, dW_V = ([product(inputs_T[name], d) for d in ds] for name, ds, _ in feeds)
    # An input gets the sum over the heads it feeds of d_head W^T. Joined side by side,
    # [d_0 | d_1 | ...] [W_0 | W_1 | ...]^T is that sum, every entry one fsum over all the heads' products.
    d_heads_in, W_in = {}, {}
    for name, ds, Ws in feeds:
        d_heads_in[name], W_in[name] = d_heads_in.get(name, []) + ds, W_in.get(name, []) + Ws
    d_in = {name: product(joined(ds), list(zip(*joined(W_in[name])))) for name, ds in d_heads_in.items()}

    biases = {part: [sums_of_columns(M) for M in ds] for part, ds in (("b_Q", dQ), ("b_K", dK), ("b_V", dV))
              if getattr(weights, part) is not None}
    if weights.b_O is not None:
        biases["b_O"] = sums_of_columns(G)
    grads = MHAGradients(d_in["x"], d_in.get("context"), dW_Q, dW_K, dW_V, dW_O, **biases, values=d_in.get("values"))
    for M in (*d_in.values(), dW_O, *dW_Q, *dW_K, *dW_V):
        finite(M, "the gradients")
    return BackwardTrace(fwd, [list(row) for row in G], d_concat, d_heads, [head.dA for head in heads],
                         [head.dS for head in heads], dQ, dK, dV, grads)


def attention_backward_trace(x: Matrix, weights: MHAWeights, grad_output: Matrix, *, context: Optional[Matrix] = None,
                             mask: Optional[Mask] = None, scale: Optional[float] = None) -> BackwardTrace:
    """The backward pass of multi-head attention of x (T, d_model), keeping every intermediate.

    ``grad_output`` (T, d_model) is the gradient of a loss with respect to the
    output; the other arguments are those of ``attention_trace``, which runs
    first to give the forward intermediates. ``.gradients`` is what
    ``multi_head_attention_backward`` returns.
    """
    c = check_layer("attention_backward_trace", x, weights, context, mask, scale, ("grad_output", grad_output, "T d_model"))
    with overflow_named("attention_backward_trace"):
        return backward(weights, trace_layer(x, weights, context, mask, c), x, context, grad_output, c)


def multi_head_attention_backward(x: Matrix, weights: MHAWeights, grad_output: Matrix, *,
                                  context: Optional[Matrix] = None, mask: Optional[Mask] = None,
                                  scale: Optional[float] = None) -> MHAGradients:  # -> MHAGradients
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
    c = check_layer("multi_head_attention_backward", x, weights, context, mask, scale, ("grad_output", grad_output, "T d_model"))
    with overflow_named("multi_head_attention_backward"):
        return backward(weights, trace_layer(x, weights, context, mask, c), x, context, grad_output, c).gradients
