"""PyTorch's default initialisation (mha_lists/teaching/torch_init.py): bounds by hand, draws, bad input."""

import math
import random
import statistics

import pytest
from bad_inputs import assert_refused_unchanged, assert_template

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
from mha_lists.teaching.weights import MAX_FAN

# Each message of torch_init.py, pinned once; the tests below match only its start (function and argument).
MESSAGES = {
    "heads divide": "torch_mha_weights: d_model {d_model} is not divisible by num_heads {num_heads}; "
                    "nn.MultiheadAttention needs embed_dim divisible by num_heads",
    "linear count": "torch_linear_weights: fan_in {fan_in} and fan_out {fan_out} make {count} weights; "
                    "at most 5,000,000",
    "mha count": "torch_mha_weights: d_model {d_model} (4 * d_model^2) make {count} weights; at most 5,000,000",
}


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
    assert (dims["d_model"], dims["h"], dims["d_k"], dims["d_v"]) == (E, h, E // h, E // h)
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


MESSAGE_CASES = [
    ("heads divide", lambda: torch_mha_weights(16, 3, seed=0), ShapeError, dict(d_model=16, num_heads=3)),
    ("heads divide", lambda: torch_mha_weights(16, 10**50, seed=0), ShapeError,
     dict(d_model=16, num_heads="an int of 51 digits")),
    ("linear count", lambda: torch_linear_weights(10**6, 10, rng=random.Random(0)), ValueError,
     dict(fan_in=1000000, fan_out=10, count="10,000,010")),
    ("mha count", lambda: torch_mha_weights(2000, 1, seed=0), ValueError, dict(d_model=2000, count="16,000,000")),
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


def test_the_fused_bound_is_computed_for_any_d_model_up_to_max_fan():
    # 3 * d_model may pass MAX_FAN: the fused bound is not refused as if it were a fan_out given
    assert mha_in_proj_bound(MAX_FAN) == math.sqrt(6 / (4 * MAX_FAN))
    with pytest.raises(ValueError, match=r"^mha_in_proj_bound: d_model is"):
        mha_in_proj_bound(MAX_FAN + 1)


def test_bad_sizes_and_generators():
    with pytest.raises(ValueError, match="^linear_bound: fan_in must be a positive int, got 0"):
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


# === Bad input: a named error, one short line, the arguments unchanged ===

BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, "s" * 10_000]
R = random.Random(0)
BAD_CALLS = []  # (name the message must start with, function, arguments, keyword arguments)
for n in BAD_SIZES + [10**400, MAX_FAN + 1]:
    BAD_CALLS += [("kaiming_uniform_bound", kaiming_uniform_bound, (n,), {}), ("linear_bound", linear_bound, (n,), {}),
                  ("xavier_uniform_bound", xavier_uniform_bound, (n, 4), {}),
                  ("xavier_uniform_bound", xavier_uniform_bound, (4, n), {}),
                  ("mha_in_proj_bound", mha_in_proj_bound, (n,), {})]
for a in [None, "1", float("nan"), float("inf"), True, [1.0], 10**400]:
    BAD_CALLS.append(("kaiming_uniform_bound", kaiming_uniform_bound, (16, a), {}))
for n in BAD_SIZES + [10**9, 10**400]:
    BAD_CALLS += [("torch_linear_weights", torch_linear_weights, (n, 4), {"rng": R}),
                  ("torch_linear_weights", torch_linear_weights, (4, n), {"rng": R}),
                  ("torch_mha_weights", torch_mha_weights, (n, 2), {"seed": 0}),
                  ("torch_mha_weights", torch_mha_weights, (16, n), {"seed": 0})]
for rng in [None, 0, "rng", random]:
    BAD_CALLS.append(("torch_linear_weights", torch_linear_weights, (4, 4), {"rng": rng}))
BAD_CALLS += [("torch_linear_weights", torch_linear_weights, (10**9, 10**9), {"rng": R}),
              ("torch_mha_weights", torch_mha_weights, (16, 3), {"seed": 0}),
              ("torch_mha_weights", torch_mha_weights, (100_000, 1), {"seed": 0})]
for seed in [None, "x", 1.5, True, [1], 10**100, -10**5000]:
    BAD_CALLS.append(("torch_mha_weights", torch_mha_weights, (16, 2), {"seed": seed}))
for b in [None, 1, "yes"]:
    BAD_CALLS.append(("torch_mha_weights", torch_mha_weights, (16, 2), {"seed": 0, "bias": b}))


@pytest.mark.parametrize("name", sorted({case[0] for case in BAD_CALLS}))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(name):
    assert_refused_unchanged(name, BAD_CALLS, (ShapeError, ValueError, TypeError))
