"""The weights of one multi-head attention layer: their shapes, how they are drawn, how many.

Every weight is (d_in, d_out) and applied as ``X @ W`` -- W_O included.

- ``W_Q[h]`` (d_model, d_k) for each of the num_heads query heads;
- ``W_K[g]`` (d_model, d_k) and ``W_V[g]`` (d_model, d_v) for each of the
  num_kv_heads key/value heads (num_kv_heads = num_heads is plain multi-head
  attention, a smaller divisor is grouped-query attention, 1 is multi-query);
- ``W_O`` (num_heads * d_v, d_model);
- optional biases ``b_Q[h]``, ``b_K[g]``, ``b_V[g]`` and ``b_O``.

Random numbers come from ``derive_rng(seed, name)``: one local generator per
matrix, so drawing one more number for one matrix never shifts another.
"""

from __future__ import annotations

import math
import random
from typing import Optional

from ..core.attention import MHAWeights, check_weights
from ..core.checks import check_type, ShapeError, check_int, check_number, check_positive_int, \
    quote_int, shorten
from ..core.matrix import Matrix

__all__ = ["INIT_SCHEMES", "init_mha_weights", "init_matrix", "derive_rng", "parameter_count", "kv_head_for"]

INIT_SCHEMES = ("xavier_uniform", "xavier_normal", "kaiming_normal", "normal", "gpt2")

# Sizes have limits, so a typo (d_model=10**9) is refused at once instead of running for hours.
MAX_WEIGHTS = 5_000_000  # numbers drawn by one call; GPT-2 small's attention layer has 2,362,368
MAX_LAYERS = 1000  # n_layer, for the GPT-2 scaling of W_O
# random.gauss is Box-Muller on 53-bit floats: |z| <= sqrt(-2 ln 2^-53), about 8.6, so std * z stays finite.
MAX_STD = 1e300
MAX_FAN = 10**12  # fan_in, fan_out (here and in torch_init's bounds): far past any layer, well inside float64


def check_size(func: str, name: str, value: object, limit: int) -> int:
    """Check a size: a positive int of at most ``limit``; return it.

    >>> check_size("demo", "vocab_size", 10**7, 1000)
    Traceback (most recent call last):
    ...
    ValueError: demo: vocab_size is 10000000; at most 1000
    """
    if check_positive_int(func, name, value) > limit:
        raise ValueError(f"{func}: {name} is {quote_int(value)}; at most {limit}")
    return value


def check_std(func: str, name: str, std: object) -> float:
    """Check the spread of normal draws: a positive finite number of at most ``MAX_STD``; return it."""
    if check_number(func, name, std, positive=True) > MAX_STD:
        raise ValueError(f"{func}: {name} is {std}; at most {MAX_STD}, so that every draw stays inside float64")
    return std


def check_weight_count(func: str, count: int, sizes: str) -> None:
    """Refuse to draw more than ``MAX_WEIGHTS`` numbers; ``sizes`` says which arguments made ``count``."""
    if count > MAX_WEIGHTS:
        raise ValueError(f"{func}: {sizes} make {count:,} weights; at most {MAX_WEIGHTS:,}")


def derive_rng(seed: int, name: str) -> random.Random:
    """A generator of its own for one named thing, e.g. ``derive_rng(42, "W_Q/head0")``.

    Seeding with the string ``"mha-lists/42/W_Q/head0"`` gives each matrix a
    stream that does not depend on how many numbers other matrices drew.

    >>> derive_rng(42, "x").random() == derive_rng(42, "x").random()
    True
    """
    check_int("derive_rng", "seed", seed)
    check_type("derive_rng", "name", name, str, "a str")
    # As bytes, the same stream as the str itself; "surrogatepass" lets any str in, even a lone surrogate.
    return random.Random(f"mha-lists/{seed}/{name}".encode("utf-8", "surrogatepass"))


# === Drawing weights ===


def init_matrix(
    rows: int,
    cols: int,
    rng: random.Random,
    scheme: str = "xavier_uniform",
    *,
    fan_in: Optional[int] = None,
    fan_out: Optional[int] = None,
    std: float = 0.02,
) -> Matrix:
    """Draw a (rows, cols) matrix from ``rng`` with one of ``INIT_SCHEMES``.

    fan_in and fan_out default to rows and cols; pass the full layer's fans
    when the matrix is one head's column block of a wider one.

    - ``xavier_uniform``: U(-a, a), a = sqrt(6 / (fan_in + fan_out))
    - ``xavier_normal``: N(0, std = sqrt(2 / (fan_in + fan_out)))
    - ``kaiming_normal``: N(0, std = sqrt(2 / fan_in))
    - ``normal`` and ``gpt2``: N(0, std)
    """
    for name, size in (("rows", rows), ("cols", cols)):
        check_positive_int("init_matrix", name, size)
    check_type("init_matrix", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    check_std("init_matrix", "std", std)
    check_weight_count("init_matrix", rows * cols, f"rows {rows} and cols {cols}")
    for name, fan in (("fan_in", fan_in), ("fan_out", fan_out)):  # 1 / fan is a float: a huge fan would draw zeros
        if fan is not None:
            check_size("init_matrix", name, fan, MAX_FAN)
    if scheme not in INIT_SCHEMES:
        raise ValueError(f"init_matrix: unknown scheme {shorten(scheme)}; choose one of {', '.join(INIT_SCHEMES)}")
    fan_in = rows if fan_in is None else fan_in
    fan_out = cols if fan_out is None else fan_out
    if scheme == "xavier_uniform":
        a = math.sqrt(6 / (fan_in + fan_out))
        return [[rng.uniform(-a, a) for _ in range(cols)] for _ in range(rows)]
    if scheme == "xavier_normal":
        sigma = math.sqrt(2 / (fan_in + fan_out))
    elif scheme == "kaiming_normal":
        sigma = math.sqrt(2 / fan_in)
    else:  # "normal" and "gpt2"
        sigma = std
    return [[rng.gauss(0.0, sigma) for _ in range(cols)] for _ in range(rows)]


def check_layer_settings(func: str, d_model: object, num_heads: object, *, seed: object, bias: object = False,
                         d_k: object = None, d_v: object = None, num_kv_heads: object = None,
                         init: object = "xavier_uniform", std: object = 0.02, n_layer: object = 1) -> tuple:
    """Check the settings of ``init_mha_weights`` for ``func``; return (d_k, d_v, num_kv_heads, std) resolved.

    ``running_example`` and ``init_model`` check their settings with it, so a
    bad setting is named under the function the learner called.
    """
    check_positive_int(func, "d_model", d_model)
    check_positive_int(func, "num_heads", num_heads)
    check_positive_int(func, "n_layer", n_layer)
    check_int(func, "seed", seed)
    check_type(func, "bias", bias, bool, "True or False")
    check_std(func, "std", std)
    for name, size in (("d_k", d_k), ("d_v", d_v), ("num_kv_heads", num_kv_heads)):
        if size is not None:
            check_positive_int(func, name, size)
    _layer_rules(func, dict(d_model=d_model, num_heads=num_heads, d_k=d_k, d_v=d_v, num_kv_heads=num_kv_heads,
                            init=init, n_layer=n_layer), {})
    return (*_head_sizes(d_model, num_heads, d_k, d_v, num_kv_heads), 0.02 if init == "gpt2" else std)


def _layer_rules(func: str, arguments: dict, sizes: dict) -> None:
    """The rules between the settings of one layer; each setting is already of its kind."""
    d_model, num_heads, init = arguments["d_model"], arguments["num_heads"], arguments["init"]
    if arguments["d_k"] is None or arguments["d_v"] is None:
        if d_model % num_heads:
            raise ShapeError(
                f"{func}: d_model {d_model} is not divisible by num_heads {num_heads}; "
                "d_k = d_model / num_heads must be a whole number (or pass d_k and d_v)"
            )
    d_k, d_v, g = _head_sizes(d_model, num_heads, arguments["d_k"], arguments["d_v"], arguments["num_kv_heads"])
    if num_heads % g:
        raise ShapeError(f"{func}: num_kv_heads {g} does not divide num_heads {num_heads}; "
                         "each key/value head must serve the same number of query heads")
    if init not in INIT_SCHEMES:
        raise ValueError(f"{func}: unknown init scheme {shorten(init)}; choose one of {', '.join(INIT_SCHEMES)}")
    check_size(func, "n_layer", arguments["n_layer"], MAX_LAYERS)
    check_weight_count(func, num_heads * d_model * d_k + g * d_model * (d_k + d_v) + num_heads * d_v * d_model,
                       f"d_model {d_model}, num_heads {num_heads}, num_kv_heads {g}, d_k {d_k} and d_v {d_v}")


def _head_sizes(d_model: int, num_heads: int, d_k: Optional[int], d_v: Optional[int],
                num_kv_heads: Optional[int]) -> tuple[int, int, int]:
    """d_k and d_v (default d_model / num_heads) and num_kv_heads (default num_heads)."""
    return (d_model // num_heads if d_k is None else d_k, d_model // num_heads if d_v is None else d_v,
            num_heads if num_kv_heads is None else num_kv_heads)


def init_mha_weights(
    d_model: int,
    num_heads: int,
    *,
    seed: int,
    bias: bool = False,
    d_k: Optional[int] = None,
    d_v: Optional[int] = None,
    num_kv_heads: Optional[int] = None,
    init: str = "xavier_uniform",
    std: float = 0.02,
    n_layer: int = 1,
) -> MHAWeights:
    """Draw the weights of one layer from local generators seeded by ``seed``.

    d_k and d_v default to d_model / num_heads, num_kv_heads to num_heads.
    ``init`` is one of ``INIT_SCHEMES``; fans are those of the whole layer's
    matrix (W_Q is (d_model, num_heads * d_k), W_O is (num_heads * d_v, d_model)).
    ``normal`` uses ``std``; ``gpt2`` uses std 0.02 and scales W_O's std by
    1 / sqrt(2 * n_layer). Biases, when asked for, start at zero, as in
    PyTorch's ``nn.MultiheadAttention`` and GPT-2.

    >>> w = init_mha_weights(16, 2, seed=42)
    >>> len(w.W_Q), len(w.W_Q[0]), len(w.W_Q[0][0]), len(w.W_O), len(w.W_O[0])
    (2, 16, 8, 16, 16)
    """
    d_k, d_v, g, std = check_layer_settings("init_mha_weights", d_model, num_heads, seed=seed, bias=bias, d_k=d_k,
                                            d_v=d_v, num_kv_heads=num_kv_heads, init=init, std=std, n_layer=n_layer)

    def draw(name: str, rows: int, cols: int, fan_out: int, sigma: float = std) -> Matrix:
        return init_matrix(rows, cols, derive_rng(seed, name), init, fan_in=rows, fan_out=fan_out, std=sigma)

    W_Q = [draw(f"W_Q/head{h}", d_model, d_k, num_heads * d_k) for h in range(num_heads)]
    W_K = [draw(f"W_K/head{j}", d_model, d_k, g * d_k) for j in range(g)]
    W_V = [draw(f"W_V/head{j}", d_model, d_v, g * d_v) for j in range(g)]
    o_std = std / math.sqrt(2 * n_layer) if init == "gpt2" else std
    W_O = draw("W_O", num_heads * d_v, d_model, d_model, o_std)
    if not bias:
        return MHAWeights(W_Q, W_K, W_V, W_O)
    return MHAWeights(
        W_Q, W_K, W_V, W_O,
        b_Q=[[0.0] * d_k for _ in range(num_heads)],
        b_K=[[0.0] * d_k for _ in range(g)],
        b_V=[[0.0] * d_v for _ in range(g)],
        b_O=[0.0] * d_model,
    )


# === Counting ===


def parameter_count(weights: MHAWeights) -> int:
    """Count every weight and bias entry: 4 * d_model^2 (+ 4 * d_model) in the standard layout.

    Every slot counts: a matrix used in two places (``weights._replace(W_V=weights.W_K)``)
    is counted twice, though a model that ties them stores it once.

    >>> parameter_count(init_mha_weights(16, 2, seed=42))  # 4 * 16 * 16
    1024
    >>> parameter_count(init_mha_weights(16, 2, seed=42, bias=True))  # + 4 * 16
    1088
    """
    check_weights("parameter_count", "weights", weights)
    count = 0
    for group in (weights.W_Q, weights.W_K, weights.W_V, [weights.W_O]):
        count += sum(len(M) * len(M[0]) for M in group)
    for biases in (weights.b_Q or [], weights.b_K or [], weights.b_V or [], [weights.b_O or []]):
        count += sum(len(b) for b in biases)
    return count


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
