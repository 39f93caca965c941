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
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional

from . import matrix
from .checks import (ShapeError, all_numbers, check_heads_divide, check_int, check_matrix, check_same_shapes, check_vector, checked,
                     kind)
from .matrix import Matrix, Vector, add_row, concat_heads, matmul, transpose
from .softmax_and_masks import Mask, apply_mask, softmax_rows

__all__ = ["attention", "multi_head_attention", "attention_trace", "kv_head_for", "MHAWeights"]


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


def _ungrouped_heads(func: str, h: int, g: int) -> ShapeError:
    """The error for h query heads that do not fall into g equal groups, one per key/value head."""
    return ShapeError(f"{func}: {h} query heads and {g} key/value heads; num_kv_heads must divide num_heads")


class _Checked(NamedTuple):
    """The weights checked last, a copy of every list in them (holding the same numbers), and their sizes."""

    weights: MHAWeights
    copy: tuple
    dims: Dims


_last_checked: list[Optional[_Checked]] = [None]


@kind("weights")
def check_weights(func: str, name: str, weights: object, expected: tuple = ()) -> Dims:
    """Check every shape in ``weights`` against the others, and every entry is finite; return the sizes.

    It is the "weights" kind of ``checked``: the sizes it returns are named d_model,
    num_heads, num_kv_heads, d_k and d_v.

    The same weights are checked once. When they come back with every list still
    equal to a copy taken when they passed, nothing in them has changed and their
    sizes are known: the comparison runs in C, much faster than checking every entry
    again. A learner who changes a number changes a list, and the next call checks it all.
    """
    if not isinstance(weights, MHAWeights):
        raise TypeError(f"{func}: {name} must be an MHAWeights, got {type(weights).__name__}")
    last = _last_checked[0]
    if last is not None and last.weights is weights and tuple(weights) == last.copy:
        return last.dims
    groups = (weights.W_Q, weights.W_K, weights.W_V)
    # Usually every entry is a finite number and each group's heads share one shape: tested in C.
    fine = all(type(group) is list and group for group in groups) and \
        all_numbers([*weights.W_Q, *weights.W_K, *weights.W_V, weights.W_O], finite=True)
    shapes = [{(len(M), len(M[0])) for M in group} for group in groups] if fine else []
    if fine and all(len(s) == 1 for s in shapes):
        h, g, g_v = map(len, groups)
        (d_model, d_k), (d_model_k, d_k_k), (d_model_v, d_v) = (shape.pop() for shape in shapes)
    else:  # find the problem and name it
        fine = False
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
        raise _ungrouped_heads(func, h, g)
    rows, cols = (len(weights.W_O), len(weights.W_O[0])) if fine else \
        check_matrix(func, "weights.W_O", weights.W_O, finite=True)
    if (rows, cols) != (h * d_v, d_model):
        raise ShapeError(
            f"{func}: W_O is {rows}x{cols}; it must be (num_heads * d_v) x d_model = "
            f"{h * d_v}x{d_model} ({h} heads of width {d_v})"
        )
    for label, biases, count, width in (("b_Q", weights.b_Q, h, d_k), ("b_K", weights.b_K, g, d_k),
                                        ("b_V", weights.b_V, g, d_v)):
        if biases is not None:
            _check_biases(func, label, biases, count, width)
    if weights.b_O is not None and check_vector(func, "weights.b_O", weights.b_O, finite=True) != d_model:
        raise ShapeError(f"{func}: weights.b_O has {len(weights.b_O)} entries; it must have d_model = {d_model}")
    dims = Dims(d_model, h, g, d_k, d_v)
    copy = (*([list(map(list, M)) for M in group] for group in groups), list(map(list, weights.W_O)),
            *(None if b is None else list(map(list, b)) for b in (weights.b_Q, weights.b_K, weights.b_V)),
            None if weights.b_O is None else list(weights.b_O))  # new lists, the same numbers in them
    _last_checked[0] = _Checked(weights, copy, dims)
    return dims


# === One head ===


class Head(NamedTuple):
    """One head's steps: scores, the weights softmax makes of them, and the output."""

    scores: Matrix  # (T, T_k): Q K^T / sqrt(d_k), -inf where the mask says no
    weights: Matrix  # (T, T_k): softmax of each row of scores
    output: Matrix  # (T, d_v): weights @ V, each row a weighted average of V's rows


ONE_HEAD_CONTRACT = dict(Q="finite matrix T d_k", K="finite matrix T_k d_k", V="finite matrix T_k d_v",
                 mask="optional mask T T_k", scale="optional positive number",
                 why={"d_k": "queries and keys must have the same width d_k to be multiplied",
                      "T_k": "there must be one value row per key row"})


@checked(**ONE_HEAD_CONTRACT, finite_result=lambda head: head.output)
def attention_steps(Q: Matrix, K: Matrix, V: Matrix, *, mask: Optional[Mask] = None,
                    scale: Optional[float] = None) -> Head:
    """One head of attention, step by step: softmax(Q K^T / sqrt(d_k) + M) V.

    Q (T, d_k), K (T_k, d_k), V (T_k, d_v); ``mask`` (T, T_k) is True where query
    i may attend to key j; ``scale`` defaults to 1 / sqrt(d_k).

    >>> steps = attention_steps([[1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]], [[1.0, 0.0], [3.0, 2.0]])
    >>> steps.scores, steps.weights, steps.output
    ([[0.0, 0.0]], [[0.5, 0.5]], [[2.0, 1.0]])
    """
    c = 1 / math.sqrt(len(K[0])) if scale is None else scale  # default_scale, written out
    scores = apply_mask(matrix.scale(matmul(Q, transpose(K)), c), mask)  # Q K^T / sqrt(d_k); -inf where masked
    weights = softmax_rows(scores)  # each row positive, adding up to 1; a masked key gets exactly 0.0
    return Head(scores, weights, matmul(weights, V))  # each row a weighted average of V's rows


@checked(**ONE_HEAD_CONTRACT, finite_result=True)
def attention(Q: Matrix, K: Matrix, V: Matrix, *, mask: Optional[Mask] = None,
              scale: Optional[float] = None) -> Matrix:
    """One head of attention: Q (T, d_k), K (T_k, d_k), V (T_k, d_v); the result is (T, d_v).

    The output of ``attention_steps``, just above. One query that matches two
    keys equally (both scores are 0) takes the average of their values; masking
    the second key leaves only the first value:

    >>> Q, K, V = [[1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]], [[1.0, 0.0], [3.0, 2.0]]
    >>> attention(Q, K, V)
    [[2.0, 1.0]]
    >>> attention(Q, K, V, mask=[[True, False]])
    [[1.0, 0.0]]
    """
    return attention_steps(Q, K, V, mask=mask, scale=scale).output


# === Many heads ===


def _kv_heads_divide(func: str, arguments: dict, sizes: dict) -> None:
    h, g = sizes["num_heads"], sizes["num_kv_heads"]
    if h % g:
        raise _ungrouped_heads(func, h, g)
    if arguments["step"] is not None and not callable(arguments["step"]):
        raise TypeError(f"{func}: step must be a function of (Q, K, V, ..., mask=, scale=), got {arguments['step']!r}")
    for t, extra in enumerate(arguments["per_head"]):
        if not isinstance(extra, (list, tuple)) or len(extra) != h:
            raise ShapeError(f"{func}: per_head[{t}] must be a list with one entry per query head ({h})")


@checked(Q="finite matrices num_heads T d_k", K="finite matrices num_kv_heads T_k d_k",
         V="finite matrices num_kv_heads T_k d_v",
         mask="optional mask T T_k", scale="optional positive number", also=_kv_heads_divide,
         why=dict(ONE_HEAD_CONTRACT["why"], num_kv_heads="keys and values need the same number of heads"))
def each_head(Q: list[Matrix], K: list[Matrix], V: list[Matrix], *, mask: Optional[Mask] = None,
              scale: Optional[float] = None, step: Optional[Callable] = None, per_head: Sequence = ()) -> list:
    """The head loop: ``attention_steps`` for every query head h, with the key/value head g it reads.

    With num_heads query heads and num_kv_heads key/value heads, head h reads
    g = h // (num_heads // num_kv_heads): each key/value head serves the same
    number of neighbouring query heads (all of them in multi-query attention).
    ``multi_head_attention``, ``attention_trace``, ``decode_step`` and the
    backward pass all run their heads through this one loop; the backward pass
    gives its own ``step``, and in ``per_head`` lists of what each head needs
    besides Q, K and V (step(Q[h], K[g], V[g], per_head[0][h], ..., mask=, scale=)).

    >>> heads = each_head([[[1.0, 0.0]], [[0.0, 1.0]]], [[[1.0, 0.0], [0.0, 1.0]]], [[[1.0], [3.0]]], scale=100.0)
    >>> [head.output for head in heads]  # query head 0 finds key 0, head 1 key 1: one K and V for both
    [[[1.0]], [[3.0]]]
    """
    step = attention_steps if step is None else step
    group = len(Q) // len(K)  # query heads per key/value head
    return [step(Q[h], K[h // group], V[h // group], *[extra[h] for extra in per_head], mask=mask, scale=scale)
            for h in range(len(Q))]


@checked(d_k="positive int", scale="optional positive number")
def default_scale(d_k: int, scale: Optional[float] = None) -> float:
    """``scale``, or 1 / sqrt(d_k) when it is None: the factor every score is multiplied by.

    >>> default_scale(4)
    0.5
    """
    return 1 / math.sqrt(d_k) if scale is None else scale


def _head_in_range(func: str, arguments: dict, sizes: dict) -> None:
    num_heads = arguments["num_heads"]
    check_heads_divide(func, num_heads, arguments["num_kv_heads"])
    h = check_int(func, "h", arguments["h"])
    if not 0 <= h < num_heads:
        raise ValueError(f"{func}: h is {h}; a query head is numbered 0 to {num_heads - 1}")


@checked(num_heads="positive int", num_kv_heads="positive int", also=_head_in_range)
def kv_head_for(h: int, num_heads: int, num_kv_heads: int) -> int:
    """The key/value head that query head h reads: h // (num_heads // num_kv_heads).

    >>> [kv_head_for(h, 8, 2) for h in range(8)]
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    return h // (num_heads // num_kv_heads)


@checked(X="finite matrix n d_in", W="finite matrix d_in d_out", b="optional finite vector d_out",
         finite_result=True, why={"b": "W is {first_shape} and b has {value} entries; b needs one entry per column "
                                       "of W ({expected})"})
def linear(X: Matrix, W: Matrix, b: Optional[Vector] = None) -> Matrix:
    """X (n, d_in) W (d_in, d_out), plus b (d_out,) on every row when given.

    >>> linear([[1, 2]], [[1, 0], [0, 1]], [10, 20])
    [[11.0, 22.0]]
    """
    P = matmul(X, W)
    return P if b is None else add_row(P, b)


LAYER_CONTRACT = dict(weights="weights", x="finite matrix T d_model", context="optional finite matrix T_k d_model",
              why={"d_model": "{name} is {shape} but the weights expect d_model = {expected} columns"})


@checked(**LAYER_CONTRACT)
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


_MULTI_HEAD = dict(LAYER_CONTRACT, mask="optional mask T T_k", scale="optional positive number", same={"T_k": "T"})


@checked(**_MULTI_HEAD, finite_result=True)
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
    Q, K, V = project_heads(x, weights, context)
    heads = each_head(Q, K, V, mask=mask, scale=scale)
    return linear(concat_heads([head.output for head in heads]), weights.W_O, weights.b_O)


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
    multiply_adds: dict[str, int]  # per step: multiply_adds of these sizes


@checked(**_MULTI_HEAD, finite_result=lambda trace: trace.output)
def attention_trace(
    x: Matrix,
    weights: MHAWeights,
    *,
    context: Optional[Matrix] = None,
    mask: Optional[Mask] = None,
    scale: Optional[float] = None,
) -> AttentionTrace:
    """``multi_head_attention`` of x (T, d_model), keeping every intermediate (see AttentionTrace).

    The same steps, through the same head loop, so the output is the same, bit
    for bit. ``multiply_adds`` counts, per step, the multiply-adds of the
    products that ran.
    """
    Q, K, V = project_heads(x, weights, context)
    heads = each_head(Q, K, V, mask=mask, scale=scale)
    concat = concat_heads([head.output for head in heads])
    output = linear(concat, weights.W_O, weights.b_O)
    counts = multiply_adds(len(x), len(x[0]), len(Q), d_k=len(Q[0][0]), d_v=len(V[0][0]),
                           num_kv_heads=len(K), context_len=len(K[0]))
    return AttentionTrace(Q, K, V, [head.scores for head in heads], [head.weights for head in heads],
                          [head.output for head in heads], concat, output, counts)


# === Counting the work ===


def _d_model_splits(func: str, arguments: dict, sizes: dict) -> None:
    d_model, h = arguments["d_model"], arguments["num_heads"]
    if (arguments["d_k"] is None or arguments["d_v"] is None) and d_model % h:
        raise ShapeError(f"{func}: d_model {d_model} is not divisible by num_heads {h}; pass d_k and d_v")


@checked(seq_len="positive int", d_model="positive int", num_heads="positive int", d_k="optional positive int",
         d_v="optional positive int", num_kv_heads="optional positive int", context_len="optional positive int",
         also=_d_model_splits)
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
    T, h = seq_len, num_heads
    d_k = d_model // h if d_k is None else d_k
    d_v = d_model // h if d_v is None else d_v
    g = h if num_kv_heads is None else num_kv_heads
    T_k = T if context_len is None else context_len
    return {
        "Q": T * d_model * h * d_k,
        "K": T_k * d_model * g * d_k,
        "V": T_k * d_model * g * d_v,
        "scores": h * T * d_k * T_k,
        "weighted_sum": h * T * T_k * d_v,
        "W_O": T * h * d_v * d_model,
    }
