"""What surrounds attention in a transformer block: LayerNorm, dropout, the feed-forward layer, the block.

The residual sum is plain ``add(x, f_x)``; the two places LayerNorm can go are

    post-norm (the original Transformer):  layer_norm(add(x, multi_head_attention(x, w)))
    pre-norm  (GPT-2):                     add(x, multi_head_attention(layer_norm(x), w))

=============================================  ===============================================
layer_norm(x, gain=None, bias=None, *, eps)    each row of x (T, d) to mean 0 and variance 1
                                               (biased: divide by d), then * gain + bias
dropout(M, p, *, rng)                          zero each entry with probability p and scale
                                               the survivors by 1 / (1 - p); p = 0 is a copy
feed_forward(x, W_1, b_1, W_2, b_2, *, act)    activation(x W_1 + b_1) W_2 + b_2, row by row
encoder_layer(x, weights, *, mask, norm_first)  the whole block: attention and the feed-forward
                                               layer, each with its residual sum and LayerNorm
=============================================  ===============================================

All follow PyTorch: ``nn.LayerNorm(d)`` (eps 1e-5, gain 1 and bias 0 at init), inverted
dropout as in ``nn.Dropout`` / ``nn.MultiheadAttention(dropout=p)`` in training mode, and
``nn.TransformerEncoderLayer`` (batch_first, dropout 0), whose forward pass is

    post-norm (norm_first=False):  x = LN_1(x + MHA(x));   x = LN_2(x + FFN(x))
    pre-norm  (norm_first=True):   x = x + MHA(LN_1(x));   x = x + FFN(LN_2(x))

with FFN(x) = activation(x W_1 + b_1) W_2 + b_2 (relu, or gelu with erf, PyTorch's exact one).
Multi-head attention in the block is the core's layer (``attention.trace_layer``), the same code
as ``multi_head_attention``. Random numbers come from the generator passed in, never from the
global one.
"""

from __future__ import annotations

import math
import random
from typing import NamedTuple, Optional

from ..core.attention import MHAWeights, affine, check_layer, trace_layer
from ..core.checks import check_type, ShapeError, all_finite, check_matrix, check_number, check_sizes, check_vector, \
    shorten, too_large
from ..core.matrix import MAX_WORK, Matrix, Vector, finite, overflow_named, too_much_work
from ..core.softmax_and_masks import Mask

__all__ = ["layer_norm", "dropout", "LAYER_NORM_EPS", "feed_forward", "encoder_layer", "BlockWeights"]

LAYER_NORM_EPS = 1e-5  # PyTorch's default for nn.LayerNorm and F.layer_norm


def check_floats(func: str, name: str, M: object) -> tuple[int, int]:
    """``check_matrix``, and every entry within float64's range: ints too large for a float that cancel
    each other (10**400 and -10**400) pass its quick test, a sum; here each row is then looked at."""
    shape = check_matrix(func, name, M)
    if not all_finite(M):
        for i, row in enumerate(M):
            check_vector(func, f"{name}[{i}]", row)
    return shape


# === LayerNorm ===


def layer_norm(x: Matrix, gain: Optional[Vector] = None, bias: Optional[Vector] = None, *,
               eps: float = LAYER_NORM_EPS) -> Matrix:  # (T, d), (d,), (d,) -> (T, d)
    """Normalise each row of x (T, d) to mean 0 and variance 1; the result is (T, d).

    For each row: mean = sum / d, var = sum((v - mean)^2) / d (the biased
    variance, as PyTorch uses), then ``(v - mean) / sqrt(var + eps) * gain + bias``.
    ``gain`` and ``bias`` (d,) default to ones and zeros, PyTorch's initial
    values; eps keeps a constant row from dividing by zero.

    >>> y = layer_norm([[0, 4], [1, 3]])   # means 2 and 2, variances 4 and 1
    >>> [[round(v, 4) for v in row] for row in y]   # (+-2) / sqrt(4 + eps), (+-1) / sqrt(1 + eps)
    [[-1.0, 1.0], [-1.0, 1.0]]
    >>> [round(v, 4) for v in layer_norm([[0, 4]], gain=[2, 3], bias=[10, 20])[0]]  # -1*2+10, 1*3+20
    [8.0, 23.0]
    """
    T, d = check_floats("layer_norm", "x", x)
    for name, v in (("gain", gain), ("bias", bias)):
        if v is not None and check_vector("layer_norm", name, v) != d:
            raise ShapeError(f"layer_norm: x is {T}x{d} and {name} has {len(v)} entries; {name} needs one entry "
                             f"per column ({d})")
    check_number("layer_norm", "eps", eps, positive=True)
    with overflow_named("layer_norm"):
        return normed(x, gain, bias, eps)


def normed(x: Matrix, gain: Optional[Vector], bias: Optional[Vector], eps: float) -> Matrix:  # unchecked layer_norm
    """Each row to mean 0 and variance 1, then * gain + bias, on arguments already checked; a result past
    float64's range raises OverflowError naming what overflowed."""
    try:
        rows = [_normalise(row, eps) for row in x]
    except (OverflowError, ValueError):  # a square or fsum's running total past float64's range (inf - inf)
        rows = None
    if rows is None or not all_finite(rows):  # a deviation of inf makes inf / inf
        raise OverflowError("the squared deviations")
    if gain is not None:
        rows = [[y * g for y, g in zip(row, gain)] for row in rows]
    if bias is not None:
        rows = [[y + b for y, b in zip(row, bias)] for row in rows]
    return finite(rows, "the outputs")  # a gain or a bias near float64's largest


def _normalise(row: Vector, eps: float) -> Vector:
    """(row - mean) / sqrt(var + eps) for one row (d,); the result is (d,).

    A square, or fsum's running total, that leaves float64's range raises
    OverflowError (or fsum's ValueError for inf - inf); ``normed`` names it.
    """
    d = len(row)
    mean = math.fsum(row) / d
    var = math.fsum((v - mean) ** 2 for v in row) / d
    std = math.sqrt(var + eps)
    return [(v - mean) / std for v in row]


# === Dropout ===


def dropout(M: Matrix, p: float, *, rng: random.Random) -> Matrix:  # (n, m) -> (n, m)
    """Inverted dropout of M (n, m): each entry is zeroed with probability p, the rest scaled by 1/(1-p).

    The result is (n, m). One ``rng.random()`` per entry, row by row: an entry
    is kept when the draw is below 1 - p. Scaling the survivors keeps the
    expected value of every entry equal to the entry, so nothing needs
    rescaling at inference, where dropout is off: ``p = 0`` returns a copy of
    M and draws nothing.

    >>> dropout([[1.0, 2.0]], 0.0, rng=random.Random(0))
    [[1.0, 2.0]]
    >>> sorted({v for v in dropout([[1.0] * 8], 0.5, rng=random.Random(0))[0]})  # 0 or 1 / (1 - 0.5)
    [0.0, 2.0]
    """
    check_floats("dropout", "M", M)
    check_number("dropout", "p", p)
    check_type("dropout", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be a probability with 0 <= p < 1, got {shorten(p)}; "
                         "p = 1 would zero every entry and 1 / (1 - p) is undefined")
    if p == 0:
        return [list(row) for row in M]
    keep = 1 - p
    survivor_scale = 1 / keep
    if not all_finite([[max(abs(v) for row in M for v in row) * survivor_scale]]):  # as the body scales
        raise too_large("dropout", "the scaled survivors")  # an entry near float64's largest, divided by 1 - p
    return [[v * survivor_scale if rng.random() < keep else 0.0 for v in row] for row in M]


# === The feed-forward layer and the whole block ===


def relu(v: float) -> float:
    """max(0, v): PyTorch's ``F.relu``."""
    return v if v > 0 else 0.0


def gelu(v: float) -> float:
    """v * Phi(v), Phi the standard normal's distribution function: PyTorch's ``F.gelu`` (approximate="none")."""
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


ACTIVATIONS = ("relu", "gelu")  # what nn.TransformerEncoderLayer takes by name


class BlockWeights(NamedTuple):
    """One encoder layer's weights; every matrix is (d_in, d_out), applied as ``x @ W``."""

    attention: MHAWeights  # self-attention (biases optional, as in nn.MultiheadAttention)
    W_1: Matrix  # (d_model, d_ff): the feed-forward layer's first linear map, PyTorch's linear1.weight^T
    b_1: Vector  # (d_ff,)
    W_2: Matrix  # (d_ff, d_model): its second, linear2.weight^T
    b_2: Vector  # (d_model,)
    gain_1: Vector  # (d_model,): LayerNorm 1 (norm1), after attention's residual sum, or before attention
    bias_1: Vector  # (d_model,)
    gain_2: Vector  # (d_model,): LayerNorm 2 (norm2), around the feed-forward layer
    bias_2: Vector  # (d_model,)


FFN_SHAPES = (("W_1", "d_model d_ff"), ("b_1", "d_ff"), ("W_2", "d_ff d_model"), ("b_2", "d_model"))
NORM_SHAPES = (("gain_1", "d_model"), ("bias_1", "d_model"), ("gain_2", "d_model"), ("bias_2", "d_model"))


def check_activation(func: str, activation: object) -> None:
    """One of ACTIVATIONS, by name."""
    if activation not in ACTIVATIONS or not isinstance(activation, str):
        raise ValueError(f"{func}: activation is {shorten(activation)}; it must be "
                         f"{' or '.join(map(repr, ACTIVATIONS))}")


def ffn(x: Matrix, W_1: Matrix, b_1: Vector, W_2: Matrix, b_2: Vector, activation: str) -> Matrix:  # unchecked
    """activation(x W_1 + b_1) W_2 + b_2, on arguments already checked."""
    act = relu if activation == "relu" else gelu
    hidden = [[act(v) for v in row] for row in affine(x, W_1, b_1)]
    return finite(affine(hidden, W_2, b_2), "the feed-forward outputs")


def feed_forward(x: Matrix, W_1: Matrix, b_1: Vector, W_2: Matrix, b_2: Vector, *,
                 activation: str = "relu") -> Matrix:  # (T, d_model) -> (T, d_model)
    """The position-wise feed-forward layer: activation(x W_1 + b_1) W_2 + b_2, each row on its own.

    W_1 (d_model, d_ff) widens each token's row (the original Transformer's d_ff is 2048 for d_model 512,
    also nn.TransformerEncoderLayer's default dim_feedforward),
    the activation bends it, W_2 (d_ff, d_model) brings it back to d_model.

    >>> feed_forward([[1.0, -2.0]], [[1.0, 0.0], [0.0, 1.0]], [0.0, 0.0], [[2.0, 0.0], [0.0, 2.0]], [0.5, 0.5])
    [[2.5, 0.5]]
    """
    check_sizes("feed_forward", ("x", x, "T d_model"), *[(name, value, dims) for (name, dims), value in
                                                         zip(FFN_SHAPES, (W_1, b_1, W_2, b_2))])
    check_activation("feed_forward", activation)
    work = len(x) * len(W_1) * len(W_1[0]) * 2
    if work > MAX_WORK:
        raise too_much_work("feed_forward", work)
    with overflow_named("feed_forward"):
        return ffn(x, W_1, b_1, W_2, b_2, activation)


def check_block(func: str, x: object, weights: object, mask: object, norm_first: object, activation: object,
                eps: object) -> float:
    """x and every part of an encoder layer's weights against their declared shapes, the mask, the switches and
    the limit on work; return attention's scale."""
    if not isinstance(weights, BlockWeights):
        raise TypeError(f"{func}: weights must be a BlockWeights, got {type(weights).__name__}")
    parts = [(f"weights.{name}", getattr(weights, name), dims) for name, dims in FFN_SHAPES + NORM_SHAPES]
    scale = check_layer(func, x, weights.attention, None, mask, None, *parts, name="weights.attention")
    check_type(func, "norm_first", norm_first, bool, "True or False")
    check_activation(func, activation)
    check_number(func, "eps", eps, positive=True)
    if len(x) * len(weights.W_1) * len(weights.W_1[0]) * 2 > MAX_WORK:
        raise too_much_work(func, len(x) * len(weights.W_1) * len(weights.W_1[0]) * 2)
    return scale


def block_steps(x: Matrix, w: BlockWeights, mask: Optional[Mask], scale: float, norm_first: bool, activation: str,
                eps: float) -> list[tuple[str, Matrix]]:
    """Every intermediate of one encoder layer, named, in the order computed, on arguments already checked;
    the last is the layer's output. Attention is the core's layer (``attention.trace_layer``)."""
    steps = [("x", x)]

    def step(name: str, M: Matrix) -> Matrix:
        steps.append((name, M))
        return M

    def attend(h: Matrix) -> Matrix:
        return step("attention", trace_layer(h, w.attention, None, mask, scale).output)

    def plus(A: Matrix, B: Matrix) -> Matrix:  # the residual sum
        return step("+", finite([[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)], "the residual sums"))

    def feed(h: Matrix) -> Matrix:
        return step("feed-forward", ffn(h, w.W_1, w.b_1, w.W_2, w.b_2, activation))

    if norm_first:  # x + MHA(LN_1(x)), then + FFN(LN_2(.))
        h = plus(x, attend(step("LayerNorm 1", normed(x, w.gain_1, w.bias_1, eps))))
        plus(h, feed(step("LayerNorm 2", normed(h, w.gain_2, w.bias_2, eps))))
    else:  # LN_1(x + MHA(x)), then LN_2(. + FFN(.))
        h = step("LayerNorm 1", normed(plus(x, attend(x)), w.gain_1, w.bias_1, eps))
        step("LayerNorm 2", normed(plus(h, feed(h)), w.gain_2, w.bias_2, eps))
    return steps


def encoder_layer(x: Matrix, weights: BlockWeights, *, mask: Optional[Mask] = None, norm_first: bool = False,
                  activation: str = "relu", eps: float = LAYER_NORM_EPS) -> Matrix:  # (T, d_model) -> (T, d_model)
    """One transformer encoder layer, as PyTorch's ``nn.TransformerEncoderLayer`` (batch_first, dropout 0).

    Post-norm (``norm_first=False``, the original Transformer and PyTorch's default):
    ``x = LN_1(x + MHA(x)); x = LN_2(x + FFN(x))``. Pre-norm (``norm_first=True``, GPT-2):
    ``x = x + MHA(LN_1(x)); x = x + FFN(LN_2(x))``. ``mask`` (T, T) is True where query i may
    attend to key j, as everywhere in this package (PyTorch's boolean ``src_mask`` is its negation).

    >>> from mha_lists import init_mha_weights
    >>> w = BlockWeights(init_mha_weights(2, 1, seed=0), [[1.0], [1.0]], [0.0], [[1.0, -1.0]], [0.0, 0.0],
    ...                  [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0])
    >>> [[round(v, 4) for v in row] for row in encoder_layer([[1.0, 0.0], [0.0, 1.0]], w)]
    [[1.0, -1.0], [-1.0, 1.0]]
    """
    scale = check_block("encoder_layer", x, weights, mask, norm_first, activation, eps)
    with overflow_named("encoder_layer"):
        return block_steps(x, weights, mask, scale, norm_first, activation, eps)[-1][1]
