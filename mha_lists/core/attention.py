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

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import chain
from typing import NamedTuple, Optional

from .checks import ShapeError, all_fine, check_int, check_matrices, check_matrix, check_number, check_positive_int, \
    check_vector, quote_int, too_large
from .matrix import MAX_WORK, Matrix, Vector, finite, joined, product
from .softmax_and_masks import MAX_MASK_SIDE, Mask, check_mask, masked, softmax_of_rows

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
    try:
        return one_head(Q, K, V, mask=mask, scale=c).output
    except OverflowError as error:
        raise too_large("attention", error) from None


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


def affine(X: Matrix, W: Matrix, b: Optional[Vector]) -> Matrix:  # unchecked linear
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
    try:
        Q, K, V = project(x, weights, context)
        heads = head_loop(Q, K, V, mask=mask, scale=c)
        return finite(affine(joined([head.output for head in heads]), weights.W_O, weights.b_O), "the outputs")
    except OverflowError as error:
        raise too_large("multi_head_attention", error) from None


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
    counts = multiply_adds(len(x), len(x[0]), len(Q), d_k=len(Q[0][0]), d_v=len(V[0][0]), num_kv_heads=len(K),
                           context_len=len(K[0]))
    return AttentionTrace(Q, K, V, [head.scores for head in heads], [head.weights for head in heads],
                          [head.output for head in heads], concat, output, counts)


def attention_trace(x: Matrix, weights: MHAWeights, *, context: Optional[Matrix] = None,
                    mask: Optional[Mask] = None, scale: Optional[float] = None) -> AttentionTrace:  # (T, d_model) -> trace
    """``multi_head_attention`` of x, keeping every intermediate (see AttentionTrace).

    The same steps, through the same head loop, so the output is the same, bit
    for bit. ``multiply_adds`` counts, per step, the multiply-adds of the
    products that ran.
    """
    c = check_layer("attention_trace", x, weights, context, mask, scale)
    try:
        return trace_layer(x, weights, context, mask, c)
    except OverflowError as error:
        raise too_large("attention_trace", error) from None


# === Smaller pieces ===


def linear(X: Matrix, W: Matrix, b: Optional[Vector] = None) -> Matrix:  # (n, d_in) @ (d_in, d_out) + (d_out,)
    """X W, plus b on every row when given.

    >>> linear([[1, 2]], [[1, 0], [0, 1]], [10, 20])
    [[11.0, 22.0]]
    """
    n, d_in = check_matrix("linear", "X", X)
    d_in_W, d_out = check_matrix("linear", "W", W)
    if d_in != d_in_W:
        raise ShapeError(f"linear: X is {n}x{d_in} and W is {d_in_W}x{d_out}; X's columns ({d_in}) must equal "
                         f"W's rows ({d_in_W})")
    if n * d_in * d_out > MAX_WORK:
        raise too_much_work("linear", n * d_in * d_out)
    if b is not None and check_vector("linear", "b", b) != d_out:
        raise ShapeError(f"linear: W is {d_in_W}x{d_out} and b has {len(b)} entries; b needs one entry per column "
                         f"of W ({d_out})")
    try:
        return finite(affine(X, W, b), "the products")
    except OverflowError as error:
        raise too_large("linear", error) from None


def kv_head_for(h: int, num_heads: int, num_kv_heads: int) -> int:
    """The key/value head that query head h reads: h // (num_heads // num_kv_heads).

    >>> [kv_head_for(h, 8, 2) for h in range(8)]
    [0, 0, 0, 0, 1, 1, 1, 1]
    """
    check_positive_int("kv_head_for", "num_heads", num_heads)
    check_positive_int("kv_head_for", "num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ShapeError(f"kv_head_for: num_kv_heads {num_kv_heads} does not divide num_heads {num_heads}; "
                         "each key/value head must serve the same number of query heads")
    if not 0 <= check_int("kv_head_for", "h", h) < num_heads:
        raise ValueError(f"kv_head_for: h is {quote_int(h)}; a query head is numbered 0 to {num_heads - 1}")
    return h // (num_heads // num_kv_heads)


def multiply_adds(seq_len: int, d_model: int, num_heads: int, *, d_k: Optional[int] = None,
                  d_v: Optional[int] = None, num_kv_heads: Optional[int] = None,
                  context_len: Optional[int] = None) -> dict[str, int]:
    """Multiply-adds of one multi-head attention pass, per step, in the order the steps run.

    T = seq_len queries, T_k = context_len keys (default T), h heads, g = num_kv_heads:

    - Q: T * d_model * (h * d_k); K: T_k * d_model * (g * d_k); V: T_k * d_model * (g * d_v)
    - scores: h * T * d_k * T_k; weighted_sum: h * T * T_k * d_v
    - W_O: T * (h * d_v) * d_model

    >>> multiply_adds(5, 16, 2)
    {'Q': 1280, 'K': 1280, 'V': 1280, 'scores': 400, 'weighted_sum': 400, 'W_O': 1280}
    """
    T, d_model, h = (check_positive_int("multiply_adds", name, n) for name, n in
                     (("seq_len", seq_len), ("d_model", d_model), ("num_heads", num_heads)))
    for name, n in (("d_k", d_k), ("d_v", d_v), ("num_kv_heads", num_kv_heads), ("context_len", context_len)):
        if n is not None:
            check_positive_int("multiply_adds", name, n)
    if (d_k is None or d_v is None) and d_model % h:
        raise ShapeError(f"multiply_adds: d_model {d_model} is not divisible by num_heads {h}; pass d_k and d_v")
    d_k = d_model // h if d_k is None else d_k
    d_v = d_model // h if d_v is None else d_v
    g = h if num_kv_heads is None else num_kv_heads
    T_k = T if context_len is None else context_len
    return {"Q": T * d_model * h * d_k, "K": T_k * d_model * g * d_k, "V": T_k * d_model * g * d_v,
            "scores": h * T * d_k * T_k, "weighted_sum": h * T * T_k * d_v, "W_O": T * h * d_v * d_model}


# === The checks: each function above calls one at its top ===


def check_head(func: str, Q: object, K: object, V: object, mask: object, scale: object) -> float:
    """One head's Q, K, V, mask and scale against each other; return the scale to use."""
    T, d_k = check_matrix(func, "Q", Q)
    T_k, d_k_K = check_matrix(func, "K", K)
    T_k_V, d_v = check_matrix(func, "V", V)
    if d_k_K != d_k:
        raise ShapeError(f"{func}: Q is {T}x{d_k} and K is {T_k}x{d_k_K}; "
                         "queries and keys must have the same width d_k to be multiplied")
    if T_k_V != T_k:
        raise ShapeError(f"{func}: K is {T_k}x{d_k} and V is {T_k_V}x{d_v}; there must be one value row per key row")
    for name, rows in (("Q", T), ("K", T_k)):
        if rows > MAX_MASK_SIDE:
            raise ValueError(f"{func}: {name} has {rows:,} rows; attention here takes at most {MAX_MASK_SIDE:,} tokens")
    if T * T_k * (d_k + d_v) > MAX_WORK:
        raise too_much_work(func, T * T_k * (d_k + d_v))
    if mask is not None:
        check_mask(func, "mask", mask, (T, T_k))
    return check_scale(func, scale, d_k)


def check_layer(func: str, x: object, weights: object, context: object, mask: object, scale: object) -> float:
    """x, the weights, the context and the mask against each other; return the scale to use."""
    d_model, h, g, d_k, d_v = check_weights(func, "weights", weights)
    T, d_model_x = check_matrix(func, "x", x)
    T_k, d_model_C = (T, d_model_x) if context is None else check_matrix(func, "context", context)
    for name, rows, cols in (("x", T, d_model_x), ("context", T_k, d_model_C)):
        if cols != d_model:
            raise ShapeError(f"{func}: {name} is {rows}x{cols} but the weights expect d_model = {d_model} columns")
        if rows > MAX_MASK_SIDE:
            raise ValueError(f"{func}: {name} has {rows:,} rows; attention here takes at most {MAX_MASK_SIDE:,} tokens")
    work = (T * h * d_k + T_k * g * (d_k + d_v) + T * h * d_v) * d_model + h * T * T_k * (d_k + d_v)
    if work > MAX_WORK:
        raise too_much_work(func, work)
    if mask is not None:
        check_mask(func, "mask", mask, (T, T_k))
    return check_scale(func, scale, d_k)


def check_weights(func: str, name: str, weights: object) -> Dims:
    """Every shape in ``weights`` against the others, and every entry finite; return the sizes."""
    if not isinstance(weights, MHAWeights):
        raise TypeError(f"{func}: {name} must be an MHAWeights, got {type(weights).__name__}")
    groups = (weights.W_Q, weights.W_K, weights.W_V)
    if all(type(Ms) is list and Ms for Ms in groups) and all_fine([*chain.from_iterable(groups), weights.W_O]) \
            and all(len({(len(M), len(M[0])) for M in Ms}) == 1 for Ms in groups):  # the usual case, tested in C
        (h, d_model, d_k), (g, d_model_K, d_k_K), (g_V, d_model_V, d_v) = \
            ((len(Ms), len(Ms[0]), len(Ms[0][0])) for Ms in groups)
        shape_O = len(weights.W_O), len(weights.W_O[0])
    else:  # find the fault and name it
        h, d_model, d_k = check_matrices(func, f"{name}.W_Q", weights.W_Q)
        g, d_model_K, d_k_K = check_matrices(func, f"{name}.W_K", weights.W_K)
        g_V, d_model_V, d_v = check_matrices(func, f"{name}.W_V", weights.W_V)
        shape_O = check_matrix(func, f"{name}.W_O", weights.W_O)
    if (d_model_K, d_k_K) != (d_model, d_k):
        raise ShapeError(f"{func}: W_Q heads are {d_model}x{d_k} but W_K heads are {d_model_K}x{d_k_K}; "
                         "queries and keys must have the same width d_k to be multiplied")
    if (g_V, d_model_V) != (g, d_model):
        raise ShapeError(f"{func}: W_K has {g} heads of {d_model}x{d_k} but W_V has {g_V} heads of "
                         f"{d_model_V}x{d_v}; keys and values need the same number of heads and d_model rows")
    if h % g:
        raise ShapeError(f"{func}: {h} query heads and {g} key/value heads; num_kv_heads must divide num_heads")
    if shape_O != (h * d_v, d_model):
        raise ShapeError(f"{func}: W_O is {shape_O[0]}x{shape_O[1]}; it must be (num_heads * d_v) "
                         f"x d_model = {h * d_v}x{d_model} ({h} heads of width {d_v})")
    for part, count, width in (("b_Q", h, d_k), ("b_K", g, d_k), ("b_V", g, d_v), ("b_O", None, d_model)):
        biases = getattr(weights, part)
        if biases is None:
            continue
        if count is None:  # b_O: one vector
            biases, count = [biases], 1
        elif not isinstance(biases, (list, tuple)) or len(biases) != count:
            n = len(biases) if isinstance(biases, (list, tuple)) else type(biases).__name__
            raise ShapeError(f"{func}: {name}.{part} has {n} vectors; it needs one per head ({count})")
        for t, b in enumerate(biases):
            where = f"{name}.{part}" + (f"[{t}]" if part != "b_O" else "")
            if check_vector(func, where, b) != width:
                raise ShapeError(f"{func}: {where} has {len(b)} entries; it must have {width}")
    return Dims(d_model, h, g, d_k, d_v)


def check_scale(func: str, scale: object, d_k: int) -> float:
    """``scale`` (a positive finite number), or 1 / sqrt(d_k) when it is None."""
    return 1 / math.sqrt(d_k) if scale is None else check_number(func, "scale", scale, positive=True)


def too_much_work(func: str, multiply_adds: int) -> ValueError:
    """The error for a call whose arithmetic would run for minutes: a typo, not a lesson."""
    return ValueError(f"{func}: these sizes take {multiply_adds:,} multiply-adds; one call here does at most "
                      f"{MAX_WORK:,} (about ten seconds): use fewer tokens or a smaller d_model")
