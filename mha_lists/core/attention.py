"""Attention: one head, then many -- the formula, in the arithmetic notebook 00 teaches.

    attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V

Q (T, d_k) holds one query per row, K (T_k, d_k) one key per row, V (T_k, d_v)
one value per row. Row i of the result (T, d_v) is an average of V's rows,
weighted by how well query i matches each key. M is 0 where the mask allows a
key and -inf where it does not.

Multi-head attention runs the one-head formula once per head: for each query
head h (reading key/value head g = h // (num_heads // num_kv_heads)),

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

Each public function checks its arguments at its top, then runs the formula:
``one_head`` (the formula for one head), ``head_loop`` (every head) and
``project`` (the projections), which trust what they are given. They multiply with
``matrix.product``, matmul's arithmetic without its checks: ``product(Q, list(zip(*K)))`` is
``matmul(Q, transpose(K))``, the same sums in the same order.
"""

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional

from .checks import ShapeError, check_number, check_sizes
from .matrix import MAX_WORK, Matrix, Vector, finite, joined, overflow_named, product, too_much_work
from .softmax_and_masks import MAX_MASK_SIDE, Mask, check_mask, masked, softmax_of_rows

__all__ = ["attention", "multi_head_attention", "attention_trace", "MHAWeights"]


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


# === One head: the formula ===


class Head(NamedTuple):
    """One head's steps: scores, the weights softmax makes of them, and the output."""

    scores: Matrix  # (T, T_k): Q K^T / sqrt(d_k), -inf where the mask says no
    weights: Matrix  # (T, T_k): softmax of each row of scores
    output: Matrix  # (T, d_v): weights @ V, each row a weighted average of V's rows


def one_head(Q: Matrix, K: Matrix, V: Matrix, *, mask: Optional[Mask], scale: float) -> Head:  # (T, d_k), (T_k, d_k), (T_k, d_v)
    """The formula for one head, on arguments already checked: softmax(Q K^T * scale + M) V."""
    scores = [[s * scale for s in row] for row in product(Q, list(zip(*K)))]  # Q K^T / sqrt(d_k)
    scores = masked(finite(scores, "the scores Q K^T"), mask)  # -inf where the mask says no
    weights = softmax_of_rows(scores)  # each row positive, adding up to 1; a masked key gets exactly 0.0
    return Head(scores, weights, product(weights, V))  # each row a weighted average of V's rows


def attention(Q: Matrix, K: Matrix, V: Matrix, *, mask: Optional[Mask] = None,
              scale: Optional[float] = None) -> Matrix:  # (T, d_k), (T_k, d_k), (T_k, d_v) -> (T, d_v)
    """One head of attention: softmax(Q K^T / sqrt(d_k) + M) V.

    ``mask`` (T, T_k) is True where query i may attend to key j; ``scale``
    defaults to 1 / sqrt(d_k). One query that matches two keys equally (both scores are 0) takes the
    average of their values; masking the second key leaves only the first value:

    >>> Q, K, V = [[1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]], [[1.0, 0.0], [3.0, 2.0]]
    >>> attention(Q, K, V)
    [[2.0, 1.0]]
    >>> attention(Q, K, V, mask=[[True, False]])
    [[1.0, 0.0]]
    """
    c = check_head("attention", Q, K, V, mask, scale)
    with overflow_named("attention"):
        return one_head(Q, K, V, mask=mask, scale=c).output


# === Many heads ===


def head_loop(Q: list[Matrix], K: list[Matrix], V: list[Matrix], *, mask: Optional[Mask], scale: float,
              step: Callable = one_head, per_head: Sequence = ()) -> list:
    """``step`` for every query head h, with the key/value head g = h // (num_heads // num_kv_heads) it reads,
    on arguments already checked: step(Q[h], K[g], V[g], per_head[0][h], ..., mask=, scale=)."""
    group = len(Q) // len(K)  # query heads per key/value head
    return [step(Q[h], K[h // group], V[h // group], *[extra[h] for extra in per_head], mask=mask, scale=scale)
            for h in range(len(Q))]


def project(x: Matrix, weights: MHAWeights, context: Optional[Matrix],
            values: Optional[Matrix] = None) -> tuple[list, list, list]:
    """Each query head's Q from x; each key/value head's K from context (default x) and V from values
    (default: K's input); unchecked. A model whose positions enter only queries and keys gives values."""
    source = x if context is None else context
    h, g = len(weights.W_Q), len(weights.W_K)
    Q = [affine(x, W, b) for W, b in zip(weights.W_Q, weights.b_Q or [None] * h)]
    K = [affine(source, W, b) for W, b in zip(weights.W_K, weights.b_K or [None] * g)]
    V = [affine(source if values is None else values, W, b) for W, b in zip(weights.W_V, weights.b_V or [None] * g)]
    return Q, K, V


def affine(X: Matrix, W: Matrix, b: Optional[Vector]) -> Matrix:  # unchecked: X W + b
    """X W, plus b on every row when b is given."""
    P = product(X, W)
    return P if b is None else [[x + y for x, y in zip(row, b)] for row in P]


def multi_head_attention(x: Matrix, weights: MHAWeights, *, context: Optional[Matrix] = None,
                         mask: Optional[Mask] = None, scale: Optional[float] = None) -> Matrix:  # (T, d_model) -> (T, d_model)
    """Multi-head attention of x; the result has x's shape.

    Queries come from x; keys and values from ``context`` (T_k, d_model) when
    given (cross-attention), else from x. ``mask`` (T, T_k) is True where query
    i may attend to key j. ``scale`` defaults to 1 / sqrt(d_k).

    >>> from mha_lists import init_mha_weights
    >>> w = init_mha_weights(4, 2, seed=0)
    >>> out = multi_head_attention([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], w)
    >>> len(out), len(out[0])
    (2, 4)
    """
    c = check_layer("multi_head_attention", x, weights, context, mask, scale)
    with overflow_named("multi_head_attention"):
        Q, K, V = project(x, weights, context)
        heads = head_loop(Q, K, V, mask=mask, scale=c)
        return finite(affine(joined([head.output for head in heads]), weights.W_O, weights.b_O), "the outputs")


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


def trace_layer(x: Matrix, weights: MHAWeights, context: Optional[Matrix], mask: Optional[Mask],
                scale: float, values: Optional[Matrix] = None) -> AttentionTrace:
    """multi_head_attention's steps, every intermediate kept, on arguments already checked (``values``: see project)."""
    Q, K, V = project(x, weights, context, values)
    heads = head_loop(Q, K, V, mask=mask, scale=scale)
    concat = joined([head.output for head in heads])
    output = finite(affine(concat, weights.W_O, weights.b_O), "the outputs")
    counts = step_counts(len(x), len(K[0]), len(x[0]), len(Q), len(K), len(Q[0][0]), len(V[0][0]))
    return AttentionTrace(Q, K, V, [head.scores for head in heads], [head.weights for head in heads],
                          [head.output for head in heads], concat, output, counts)


def step_counts(T: int, T_k: int, d_model: int, h: int, g: int, d_k: int, d_v: int) -> dict[str, int]:  # unchecked
    """Multiply-adds of each step of one layer: T queries, T_k keys, h query heads, g key/value heads."""
    return {"Q": T * d_model * h * d_k, "K": T_k * d_model * g * d_k, "V": T_k * d_model * g * d_v,
            "scores": h * T * d_k * T_k, "weighted_sum": h * T * T_k * d_v, "W_O": T * h * d_v * d_model}


def attention_trace(x: Matrix, weights: MHAWeights, *, context: Optional[Matrix] = None,
                    mask: Optional[Mask] = None, scale: Optional[float] = None) -> AttentionTrace:  # (T, d_model) -> trace
    """``multi_head_attention`` of x, keeping every intermediate (see AttentionTrace).

    The same steps, through the same head loop, so the output is the same, bit
    for bit. ``multiply_adds`` counts, per step, the multiply-adds of the
    products that ran.
    """
    c = check_layer("attention_trace", x, weights, context, mask, scale)
    with overflow_named("attention_trace"):
        return trace_layer(x, weights, context, mask, c)


# === The checks: each function above calls one at its top ===


def check_head(func: str, Q: object, K: object, V: object, mask: object, scale: object, *more: tuple) -> float:
    """One head's Q, K, V (and ``more`` arguments, as check_sizes takes them), the limits on tokens and on
    work, the mask and the scale; return the scale to use (1 / sqrt(d_k) when it is None)."""
    n = check_sizes(func, ("Q", Q, "T d_k"), ("K", K, "T_k d_k"), ("V", V, "T_k d_v"), *more)
    for name, rows in (("Q", n["T"]), ("K", n["T_k"])):
        if rows > MAX_MASK_SIDE:
            raise ValueError(f"{func}: {name} has {rows:,} rows; attention here takes at most {MAX_MASK_SIDE:,} tokens")
    if n["T"] * n["T_k"] * (n["d_k"] + n["d_v"]) > MAX_WORK:
        raise too_much_work(func, n["T"] * n["T_k"] * (n["d_k"] + n["d_v"]))
    if mask is not None:
        check_mask(func, "mask", mask, (n["T"], n["T_k"]))
    return 1 / math.sqrt(n["d_k"]) if scale is None else check_number(func, "scale", scale, positive=True)


def check_layer(func: str, x: object, weights: object, context: object, mask: object, scale: object,
                *more: tuple, name: str = "weights") -> float:
    """x, the weights (called ``name``), the context (and ``more`` arguments), the limits on tokens and on work,
    the mask and the scale; return the scale to use (1 / sqrt(d_k) when it is None)."""
    C = [] if context is None else [("context", context, "T_k d_context")]  # its width: against W_K's rows, below
    n = check_weights(func, name, weights, ("x", x, "T d_model"), *C, *more)
    T, T_k, d_model, h, g, d_k, d_v = n["T"], n.get("T_k", n["T"]), n["d_model"], n["h"], n["g"], n["d_k"], n["d_v"]
    if n.get("d_context", d_model) != d_model:  # the context meets W_K and W_V (x meets W_Q), so name those
        raise ShapeError(f"{func}: context is {T_k}x{n['d_context']} and {name}.W_K is {g}x{d_model}x{d_k}; context's "
                         f"columns ({n['d_context']}) and the rows of {name}.W_K and {name}.W_V ({d_model}) must be "
                         f"equal: the keys are context @ W_K and the values context @ W_V")
    for name, rows in (("x", T), ("context", T_k)):
        if rows > MAX_MASK_SIDE:
            raise ValueError(f"{func}: {name} has {rows:,} rows; attention here takes at most {MAX_MASK_SIDE:,} tokens")
    work = (T * h * d_k + T_k * g * (d_k + d_v) + T * h * d_v) * d_model + h * T * T_k * (d_k + d_v)
    if work > MAX_WORK:
        raise too_much_work(func, work)
    if mask is not None:
        check_mask(func, "mask", mask, (T, T_k))
    return 1 / math.sqrt(d_k) if scale is None else check_number(func, "scale", scale, positive=True)


def check_weights(func: str, name: str, weights: object, *more: tuple) -> dict[str, int]:
    """Every shape in ``weights`` against the others (and ``more`` arguments), every entry finite; return the
    sizes by name: d_model, h query heads, g key/value heads, d_k, d_v (and those ``more`` names)."""
    if not isinstance(weights, MHAWeights):
        raise TypeError(f"{func}: {name} must be an MHAWeights, got {type(weights).__name__}")
    shapes = ("h d_model d_k", "g d_model d_k", "g d_model d_v", "h*d_v d_model", "h d_k", "g d_k", "g d_v", "d_model")
    given = [(f"{name}.{part}", value, dims) for part, value, dims in zip(MHAWeights._fields, weights, shapes)
             if value is not None or part.startswith("W")]  # the biases are optional
    n = check_sizes(func, *given, *more)
    if n["h"] % n["g"]:
        raise ShapeError(f"{func}: {n['h']} query heads and {n['g']} key/value heads; num_kv_heads must divide num_heads")
    if n["h*d_v"] != n["h"] * n["d_v"]:
        raise ShapeError(f"{func}: {name}.W_O has {n['h*d_v']} rows; it must have num_heads * d_v = "
                         f"{n['h'] * n['d_v']} ({n['h']} heads of width {n['d_v']})")
    return n
