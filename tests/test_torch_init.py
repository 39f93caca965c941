"""PyTorch's default initialisation (mha_lists/teaching/torch_init.py): bounds by hand, draws, bad input."""

import math
import random
import statistics

import pytest

from mha_lists import ShapeError, parameter_count
from mha_lists.teaching.torch_init import (
    kaiming_uniform_bound,
    linear_bound,
    mha_in_proj_bound,
    torch_linear_weights,
    torch_mha_weights,
    xavier_uniform_bound,
)
from mha_lists.core.attention import check_weights


def entries(*matrices):
    return [v for M in matrices for row in M for v in row]


# === Bounds by hand (and the figures PyTorch's own layers give) ===


def test_linear_bound_is_kaiming_uniform_with_a_sqrt5():
    # gain sqrt(2 / (1 + 5)) = sqrt(1/3); bound sqrt(1/3) * sqrt(3 / fan_in) = 1 / sqrt(fan_in)
    for fan_in in (1, 4, 16, 768):
        assert kaiming_uniform_bound(fan_in, a=math.sqrt(5)) == pytest.approx(1 / math.sqrt(fan_in), rel=1e-15)
        assert linear_bound(fan_in) == 1 / math.sqrt(fan_in)
    assert linear_bound(16) == 0.25
    assert kaiming_uniform_bound(6) == pytest.approx(1.0)  # sqrt(2) * sqrt(3 / 6) = 1


def test_mha_in_proj_bound_is_xavier_over_the_fused_matrix():
    assert mha_in_proj_bound(16) == math.sqrt(6 / 64)
    assert round(mha_in_proj_bound(16), 3) == 0.306
    assert round(xavier_uniform_bound(16, 16), 3) == 0.433  # Xavier over one (E, E) block
    assert xavier_uniform_bound(16, 16) / mha_in_proj_bound(16) == pytest.approx(math.sqrt(2))


# === Draws ===


def test_torch_mha_weights_shapes_bounds_and_spread():
    E, h = 64, 4
    w = torch_mha_weights(E, h, seed=0)
    dims = check_weights("test", "weights", w)
    assert (dims.d_model, dims.num_heads, dims.d_k, dims.d_v) == (E, h, E // h, E // h)
    assert parameter_count(w) == 4 * E * E
    qkv = entries(*w.W_Q, *w.W_K, *w.W_V)
    bound = mha_in_proj_bound(E)
    assert max(map(abs, qkv)) <= bound
    assert max(map(abs, qkv)) > 0.99 * bound  # 12,288 draws reach the edge
    # U(-b, b) has std b / sqrt(3); 12,288 draws: within 2 %
    assert statistics.pstdev(qkv) == pytest.approx(bound / math.sqrt(3), rel=0.02)
    out = entries(w.W_O)
    assert max(map(abs, out)) <= 1 / math.sqrt(E)
    assert statistics.pstdev(out) == pytest.approx(1 / math.sqrt(3 * E), rel=0.03)


def test_torch_mha_weights_heads_are_column_blocks_of_one_fused_draw():
    a, b = torch_mha_weights(16, 2, seed=5), torch_mha_weights(16, 4, seed=5)
    # the same fused matrix, cut differently: head 0 of 2 is heads 0 and 1 of 4 side by side
    assert a.W_Q[0] == [r0 + r1 for r0, r1 in zip(b.W_Q[0], b.W_Q[1])]
    assert a.W_O == b.W_O
    assert torch_mha_weights(16, 2, seed=6).W_Q != a.W_Q


def test_torch_mha_weights_biases_are_zero():
    w = torch_mha_weights(16, 2, seed=0, bias=True)
    assert set(entries(w.b_Q, w.b_K, w.b_V)) == {0.0} and set(w.b_O) == {0.0}
    assert parameter_count(w) == 4 * 16 * 16 + 4 * 16


def test_torch_linear_weights_draw_weight_and_bias_from_the_same_range():
    W, b = torch_linear_weights(16, 48, rng=random.Random(0))
    assert (len(W), len(W[0]), len(b)) == (16, 48, 48)
    assert max(map(abs, entries(W, [b]))) <= 0.25
    assert statistics.pstdev(entries(W)) == pytest.approx(0.25 / math.sqrt(3), rel=0.05)


# === Bad input ===


def test_bad_sizes_and_generators():
    with pytest.raises(ShapeError, match="torch_mha_weights: d_model 16 is not divisible by num_heads 3"):
        torch_mha_weights(16, 3, seed=0)
    with pytest.raises(ValueError, match="linear_bound: fan_in must be a positive int, got 0"):
        linear_bound(0)
    with pytest.raises(ValueError, match="kaiming_uniform_bound: a must be a finite number"):
        kaiming_uniform_bound(4, a=float("inf"))
    with pytest.raises(TypeError, match="^torch_mha_weights: seed must be an int"):
        torch_mha_weights(16, 2, seed="0")
    with pytest.raises(TypeError, match="^torch_mha_weights: bias must be True or False"):
        torch_mha_weights(16, 2, seed=0, bias="no")
    with pytest.raises(TypeError, match="^mha_in_proj_bound: d_model must be an int"):
        mha_in_proj_bound(16.0)
    with pytest.raises(TypeError, match="torch_linear_weights: rng must be a random.Random"):
        torch_linear_weights(4, 4, rng=42)
