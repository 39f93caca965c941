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

from ..core.checks import check_type, ShapeError, all_finite, check_matrix, check_number, check_vector, shorten, \
    too_large
from ..core.matrix import Matrix, Vector

__all__ = ["layer_norm", "dropout", "LAYER_NORM_EPS"]

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
    try:
        rows = [_normalise(row, eps) for row in x]
    except (OverflowError, ValueError):  # a square or fsum's running total past float64's range (inf - inf)
        rows = None
    if rows is None or not all_finite(rows):  # a deviation of inf makes inf / inf
        raise too_large("layer_norm", "the squared deviations")
    if gain is not None:
        rows = [[y * g for y, g in zip(row, gain)] for row in rows]
    if bias is not None:
        rows = [[y + b for y, b in zip(row, bias)] for row in rows]
    if not all_finite(rows):  # a gain or a bias near float64's largest
        raise too_large("layer_norm", "the outputs")
    return rows


def _normalise(row: Vector, eps: float) -> Vector:
    """(row - mean) / sqrt(var + eps) for one row (d,); the result is (d,).

    A square, or fsum's running total, that leaves float64's range raises
    OverflowError (or fsum's ValueError for inf - inf); ``layer_norm`` names it.
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
