"""What surrounds attention in a transformer block: LayerNorm and dropout.

The residual sum is plain ``add(x, f_x)``; the two places LayerNorm can go are

    post-norm (the original Transformer):  layer_norm(add(x, multi_head_attention(x, w)))
    pre-norm  (GPT-2):                     add(x, multi_head_attention(layer_norm(x), w))

=============================================  ===============================================
layer_norm(x, gain=None, bias=None, *, eps)    each row of x (T, d) to mean 0 and variance 1
                                               (biased: divide by d), then * gain + bias
dropout(M, p, *, rng)                          zero each entry with probability p and scale
                                               the survivors by 1 / (1 - p); p = 0 is a copy
=============================================  ===============================================

Both follow PyTorch: ``nn.LayerNorm(d)`` (eps 1e-5, gain 1 and bias 0 at init) and inverted
dropout as in ``nn.Dropout`` / ``nn.MultiheadAttention(dropout=p)`` in training mode. Random
numbers come from the generator passed in, never from the global one.
"""

from __future__ import annotations

import math
import random
from typing import Optional

from ..core.checks import all_finite, checked, too_large
from ..core.matrix import Matrix, Vector

__all__ = ["layer_norm", "dropout", "LAYER_NORM_EPS"]

LAYER_NORM_EPS = 1e-5  # PyTorch's default for nn.LayerNorm and F.layer_norm


# === LayerNorm ===


@checked(x="finite matrix T d", gain="optional finite vector d", bias="optional finite vector d", eps="positive number",
         why={"d": "x is {first_shape} and {name} has {value} entries; {name} needs one entry per column ({expected})"},
         finite_result=True)  # a gain or a bias too large for float64
def layer_norm(
    x: Matrix,
    gain: Optional[Vector] = None,
    bias: Optional[Vector] = None,
    *,
    eps: float = LAYER_NORM_EPS,
) -> Matrix:
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
    rows = [_normalise(row, eps) for row in x]
    if gain is not None:
        rows = [[y * g for y, g in zip(row, gain)] for row in rows]
    if bias is not None:
        rows = [[y + b for y, b in zip(row, bias)] for row in rows]
    return rows


def _normalise(row: Vector, eps: float) -> Vector:
    """(row - mean) / sqrt(var + eps) for one row (d,); the result is (d,).

    A square, or fsum's running total, that leaves float64's range raises
    OverflowError: the door of ``layer_norm`` reports it as too large.
    """
    d = len(row)
    mean = math.fsum(row) / d
    var = math.fsum((v - mean) ** 2 for v in row) / d
    std = math.sqrt(var + eps)
    return [(v - mean) / std for v in row]


# === Dropout ===


def _dropout_rules(func: str, arguments: dict, sizes: dict) -> None:
    """p is a probability below 1, rng a generator, and no survivor, scaled by 1 / (1 - p), leaves float64."""
    M, p = arguments["M"], arguments["p"]
    if not 0 <= p < 1:
        raise ValueError(
            f"{func}: p must be a probability with 0 <= p < 1, got {p!r}; "
            "p = 1 would zero every entry and 1 / (1 - p) is undefined"
        )
    if not all_finite([[max(abs(v) for row in M for v in row) * (1 / (1 - p))]]):  # as the body scales
        raise too_large(func)  # an entry near float64's largest, divided by 1 - p


@checked(M="finite matrix n m", p="number", rng="rng", also=_dropout_rules)
def dropout(M: Matrix, p: float, *, rng: random.Random) -> Matrix:
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
    if p == 0:
        return [list(row) for row in M]
    keep = 1 - p
    survivor_scale = 1 / keep
    return [[v * survivor_scale if rng.random() < keep else 0.0 for v in row] for row in M]
