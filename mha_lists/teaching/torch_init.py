"""PyTorch's default initialisation, for readers who move weights between PyTorch and this module.

PyTorch stores a linear layer's weight as (out, in) and applies it as ``x W^T``;
here every weight is (in, out) and applied as ``matmul(x, W)``, so the matrices
below are the transposes of PyTorch's, with the same distribution per entry.

================================================  =============================================
kaiming_uniform_bound(fan_in, a=0.0)              ``nn.init.kaiming_uniform_``:
                                                  sqrt(2 / (1 + a^2)) * sqrt(3 / fan_in)
linear_bound(fan_in)                              ``nn.Linear``'s weight and bias, U(+-b):
                                                  b = 1 / sqrt(fan_in) (kaiming_uniform, a = sqrt(5))
xavier_uniform_bound(fan_in, fan_out)             ``nn.init.xavier_uniform_``:
                                                  sqrt(6 / (fan_in + fan_out))
mha_in_proj_bound(d_model)                        ``nn.MultiheadAttention``'s fused (3E, E)
                                                  in_proj_weight: sqrt(6 / (E + 3E))
torch_linear_weights(fan_in, fan_out, *, rng)     (W, b) drawn as ``nn.Linear(fan_in, fan_out)``
torch_mha_weights(d_model, num_heads, *, seed)    MHAWeights drawn as ``nn.MultiheadAttention``
================================================  =============================================

The draws come from Python's generator, not PyTorch's, so the numbers differ
from a PyTorch layer's; the bounds and the spread are the same.
"""

from __future__ import annotations

import math
import random

from ..core.checks import check_type, ShapeError, check_int, check_number, check_positive_int, quote_int
from ..core.matrix import Matrix, Vector
from .lists_as_matrices import split_heads
from ..core.attention import MHAWeights
from .weights import MAX_FAN, check_size, check_weight_count, derive_rng


__all__ = ["kaiming_uniform_bound", "linear_bound", "xavier_uniform_bound", "mha_in_proj_bound",
           "torch_linear_weights", "torch_mha_weights"]


# === Bounds ===


def kaiming_uniform_bound(fan_in: int, a: float = 0.0) -> float:
    """The bound b of ``kaiming_uniform_(W, a)`` (leaky_relu gain, fan-in mode): U(-b, b).

    gain = sqrt(2 / (1 + a^2)) and b = gain * sqrt(3 / fan_in). With a = sqrt(5)
    the gain is sqrt(1/3), so b = 1 / sqrt(fan_in): ``nn.Linear``'s default.

    >>> round(kaiming_uniform_bound(16), 12)  # sqrt(2) * sqrt(3 / 16) = sqrt(6) / 4
    0.612372435696
    >>> round(kaiming_uniform_bound(16, a=math.sqrt(5)), 12)   # 1 / sqrt(16)
    0.25
    """
    check_size("kaiming_uniform_bound", "fan_in", fan_in, MAX_FAN)
    check_number("kaiming_uniform_bound", "a", a)
    gain = math.sqrt(2 / (1 + a * a))
    return gain * math.sqrt(3 / fan_in)


def linear_bound(fan_in: int) -> float:
    """``nn.Linear(fan_in, fan_out)`` draws its weight and its bias from U(-b, b), b = 1 / sqrt(fan_in).

    >>> linear_bound(16)
    0.25
    """
    check_size("linear_bound", "fan_in", fan_in, MAX_FAN)
    return 1 / math.sqrt(fan_in)


def xavier_uniform_bound(fan_in: int, fan_out: int) -> float:
    """``xavier_uniform_`` (Glorot) on a (fan_out, fan_in) PyTorch weight: U(-a, a), a = sqrt(6 / (fan_in + fan_out)).

    >>> xavier_uniform_bound(16, 16)   # sqrt(6 / 32)
    0.4330127018922193
    """
    check_size("xavier_uniform_bound", "fan_in", fan_in, MAX_FAN)
    check_size("xavier_uniform_bound", "fan_out", fan_out, MAX_FAN)
    return math.sqrt(6 / (fan_in + fan_out))


def mha_in_proj_bound(d_model: int) -> float:
    """Bound of ``nn.MultiheadAttention``'s in_proj_weight: Xavier over the fused (3E, E) matrix, sqrt(6 / 4E).

    One Xavier draw for W_Q, W_K and W_V stacked: fan_in = E, fan_out = 3E.

    >>> mha_in_proj_bound(16)          # sqrt(6 / 64)
    0.30618621784789724
    """
    check_size("mha_in_proj_bound", "d_model", d_model, MAX_FAN)
    # xavier_uniform_bound(d_model, 3 * d_model) written out: its own check would speak of a fan_out
    return math.sqrt(6 / (d_model + 3 * d_model))


# === Drawing weights the PyTorch way ===


def _uniform(rows: int, cols: int, bound: float, rng: random.Random) -> Matrix:
    return [[rng.uniform(-bound, bound) for _ in range(cols)] for _ in range(rows)]


def torch_linear_weights(fan_in: int, fan_out: int, *,
                         rng: random.Random) -> tuple[Matrix, Vector]:  # W (fan_in, fan_out), b (fan_out,)
    """W (fan_in, fan_out) and b (fan_out,) drawn as ``nn.Linear(fan_in, fan_out)`` draws them.

    Every entry of both is U(-1/sqrt(fan_in), 1/sqrt(fan_in)); W is in this
    module's (in, out) orientation, the transpose of PyTorch's ``weight``.

    >>> W, b = torch_linear_weights(4, 3, rng=random.Random(0))
    >>> len(W), len(W[0]), len(b), max(abs(v) for row in W + [b] for v in row) <= 0.5
    (4, 3, 3, True)
    """
    func = "torch_linear_weights"
    check_size(func, "fan_in", fan_in, MAX_FAN)
    check_size(func, "fan_out", fan_out, MAX_FAN)
    check_type(func, "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    check_weight_count(func, (fan_in + 1) * fan_out, f"fan_in {fan_in} and fan_out {fan_out}")
    bound = linear_bound(fan_in)
    return _uniform(fan_in, fan_out, bound, rng), _uniform(1, fan_out, bound, rng)[0]


def torch_mha_weights(d_model: int, num_heads: int, *, seed: int,
                      bias: bool = False) -> MHAWeights:  # W_Q[h] (d_model, d_model // num_heads)
    """MHAWeights drawn as ``nn.MultiheadAttention(d_model, num_heads, bias=bias)`` draws them.

    - W_Q, W_K, W_V: the column blocks of one fused (d_model, 3 * d_model)
      matrix, every entry U(+-sqrt(6 / (4 d_model))) (PyTorch's in_proj_weight,
      (3E, E), Xavier-uniform), then each cut into num_heads heads;
    - W_O (d_model, d_model): U(+-1 / sqrt(d_model)) (out_proj is an nn.Linear);
    - biases, when asked for, are zero: the layer resets in_proj_bias and out_proj.bias to 0.

    >>> w = torch_mha_weights(16, 2, seed=0)
    >>> len(w.W_Q), len(w.W_Q[0]), len(w.W_Q[0][0]), len(w.W_O), len(w.W_O[0])
    (2, 16, 8, 16, 16)
    """
    func = "torch_mha_weights"
    check_size(func, "d_model", d_model, MAX_FAN)
    check_positive_int(func, "num_heads", num_heads)
    check_int(func, "seed", seed)
    check_type(func, "bias", bias, bool, "True or False")
    check_weight_count(func, 4 * d_model * d_model, f"d_model {d_model} (4 * d_model^2)")
    if d_model % num_heads:
        raise ShapeError(f"{func}: d_model {d_model} is not divisible by num_heads {quote_int(num_heads)}; "
                         "nn.MultiheadAttention needs embed_dim divisible by num_heads")
    fused = _uniform(d_model, 3 * d_model, mha_in_proj_bound(d_model), derive_rng(seed, "torch/in_proj_weight"))
    W_Q_all, W_K_all, W_V_all = split_heads(fused, 3)
    W_O = _uniform(d_model, d_model, linear_bound(d_model), derive_rng(seed, "torch/out_proj.weight"))
    heads = [split_heads(W, num_heads) for W in (W_Q_all, W_K_all, W_V_all)]
    if not bias:
        return MHAWeights(*heads, W_O)
    d_k = d_model // num_heads
    zeros = [[0.0] * d_k for _ in range(num_heads)]
    return MHAWeights(*heads, W_O, b_Q=zeros, b_K=[list(b) for b in zeros],
                      b_V=[list(b) for b in zeros], b_O=[0.0] * d_model)
