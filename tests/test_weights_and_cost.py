"""Initialisation, parameter counts, multiply-add counts, and the KV cache."""

import copy
import math
import statistics

import pytest

from mha_lists import (ShapeError, attention_trace, causal_mask, concat_heads, decode_step,
                       init_mha_weights, multi_head_attention,
                       parameter_count, running_example)
from mha_lists.teaching.cost import MultiplyAddCounter
from mha_lists.teaching.decoding import KVCache
from mha_lists.teaching.weights import INIT_SCHEMES, init_matrix
from mha_lists.teaching.weights import derive_rng

# === Parameter counts against the published figures ===


def test_parameter_count_standard_layout():
    assert parameter_count(init_mha_weights(512, 8, seed=0)) == 1_048_576
    assert parameter_count(init_mha_weights(512, 8, seed=0, bias=True)) == 1_050_624


def test_parameter_count_gpt2_small_attention_block():
    # c_attn 768 x 2304 + 2304, c_proj 768 x 768 + 768
    w = init_mha_weights(768, 12, seed=0, bias=True, init="gpt2", n_layer=12)
    assert parameter_count(w) == 768 * 2304 + 2304 + 768 * 768 + 768 == 2_362_368


def test_parameter_count_gqa_and_small_by_hand():
    # d_model 16, 8 query heads of width 2, 2 kv heads: W_Q 16x16, W_K 16x4, W_V 16x4, W_O 16x16
    w = init_mha_weights(16, 8, seed=0, num_kv_heads=2)
    assert parameter_count(w) == 256 + 64 + 64 + 256
    assert parameter_count(running_example().weights) == 4 * 16 * 16


# === Initialisation ===


def sample_std(M):
    return statistics.pstdev([v for row in M for v in row])


@pytest.mark.parametrize(
    "scheme, expected_std",
    [
        ("xavier_uniform", math.sqrt(6 / 256) / math.sqrt(3)),  # U(-a, a) has std a / sqrt(3)
        ("xavier_normal", math.sqrt(2 / 256)),
        ("kaiming_normal", math.sqrt(2 / 128)),
        ("normal", 0.02),
        ("gpt2", 0.02),
    ],
)
def test_init_schemes_have_the_formula_spread(scheme, expected_std):
    M = init_matrix(128, 128, derive_rng(1, scheme), scheme)
    assert sample_std(M) == pytest.approx(expected_std, rel=0.02)


def test_xavier_uniform_stays_inside_its_bound():
    a = math.sqrt(6 / (16 + 16))
    w = init_mha_weights(16, 2, seed=42)
    assert all(-a <= v <= a for M in w.W_Q + [w.W_O] for row in M for v in row)


def test_init_uses_the_whole_layer_fans():
    # W_Q heads are column blocks of a (d_model, num_heads * d_k) matrix: fan_out 64, not 8.
    w = init_mha_weights(64, 8, seed=3, init="xavier_normal")
    assert sample_std(concat_heads(w.W_Q)) == pytest.approx(math.sqrt(2 / 128), rel=0.05)


def test_gpt2_scales_the_output_projection():
    w = init_mha_weights(64, 4, seed=3, init="gpt2", n_layer=12, bias=True)
    assert sample_std(w.W_O) == pytest.approx(0.02 / math.sqrt(24), rel=0.05)
    assert sample_std(concat_heads(w.W_Q)) == pytest.approx(0.02, rel=0.05)
    assert all(v == 0.0 for v in w.b_O)


def test_normal_uses_the_given_std():
    w = init_mha_weights(64, 4, seed=3, init="normal", std=0.5)
    assert sample_std(w.W_O) == pytest.approx(0.5, rel=0.05)


def test_init_is_deterministic_and_streams_are_independent():
    assert init_mha_weights(16, 2, seed=42) == init_mha_weights(16, 2, seed=42)
    assert init_mha_weights(16, 2, seed=42) != init_mha_weights(16, 2, seed=43)
    # W_O has a generator of its own: adding biases or changing num_kv_heads does not move it.
    assert init_mha_weights(16, 2, seed=42).W_O == init_mha_weights(16, 2, seed=42, bias=True).W_O
    assert init_mha_weights(16, 2, seed=42).W_Q == init_mha_weights(16, 2, seed=42, num_kv_heads=1).W_Q


def test_init_errors():
    with pytest.raises(ShapeError, match=r"init_mha_weights: d_model 16 is not divisible by num_heads 3"):
        init_mha_weights(16, 3, seed=0)
    with pytest.raises(ShapeError, match=r"init_mha_weights: num_kv_heads 3 does not divide num_heads 8"):
        init_mha_weights(16, 8, seed=0, num_kv_heads=3)
    with pytest.raises(ValueError, match=r"init_mha_weights: unknown init scheme 'he'; choose one of xavier_uniform"):
        init_mha_weights(16, 2, seed=0, init="he")
    with pytest.raises(ValueError, match=r"init_mha_weights: num_heads must be a positive int, got 0"):
        init_mha_weights(16, 0, seed=0)
    with pytest.raises(TypeError, match=r"init_mha_weights: seed must be an int"):
        init_mha_weights(16, 2, seed="42")
    assert set(INIT_SCHEMES) == {"xavier_uniform", "xavier_normal", "kaiming_normal", "normal", "gpt2"}


def test_d_k_given_lifts_the_divisibility_rule():
    w = init_mha_weights(16, 3, seed=0, d_k=4, d_v=5)
    assert len(w.W_O) == 15 and len(w.W_Q[0][0]) == 4


def test_folding_the_scale_into_w_q():
    ex = running_example()
    w = ex.weights
    folded = w._replace(W_Q=[[[v / math.sqrt(8) for v in row] for row in M] for M in w.W_Q])
    a = multi_head_attention(ex.x, w)
    b = multi_head_attention(ex.x, folded, scale=1.0)
    assert all(math.isclose(u, v, rel_tol=1e-12, abs_tol=1e-15) for r, s in zip(a, b) for u, v in zip(r, s))
    # With d_k = 4 the scale is 1/2, a power of two: multiplying by it is exact, so bit for bit.
    w4 = init_mha_weights(16, 4, seed=1)
    folded4 = w4._replace(W_Q=[[[v * 0.5 for v in row] for row in M] for M in w4.W_Q])
    assert multi_head_attention(ex.x, w4) == multi_head_attention(ex.x, folded4, scale=1.0)


# === Multiply-adds, counted as they run ===


def formula_counts(T, T_k, d_model, h, g, d_k, d_v):
    return {
        "Q": T * d_model * h * d_k,
        "K": T_k * d_model * g * d_k,
        "V": T_k * d_model * g * d_v,
        "scores": h * T * T_k * d_k,
        "weighted_sum": h * T * T_k * d_v,
        "W_O": T * h * d_v * d_model,
    }


@pytest.mark.parametrize("T, T_k, d_model, h, g, d_k, d_v", [
    (5, 5, 16, 2, 2, 8, 8), (3, 7, 12, 4, 2, 3, 5), (6, 6, 8, 8, 1, 1, 1)])
def test_counted_multiply_adds_match_the_formulas(T, T_k, d_model, h, g, d_k, d_v):
    w = init_mha_weights(d_model, h, seed=0, num_kv_heads=g, d_k=d_k, d_v=d_v)
    x = [[0.5] * d_model for _ in range(T)]
    ctx = [[0.25] * d_model for _ in range(T_k)]
    t = attention_trace(x, w, context=ctx)
    assert t.multiply_adds == formula_counts(T, T_k, d_model, h, g, d_k, d_v)


def test_standard_layout_totals():
    # projections 4 T d^2, scores and weighted sum T^2 d each
    T, d = 5, 16
    t = attention_trace(running_example().x, running_example().weights)
    m = t.multiply_adds
    assert m["Q"] + m["K"] + m["V"] + m["W_O"] == 4 * T * d * d
    assert m["scores"] == m["weighted_sum"] == T * T * d


def test_fused_qkv_costs_the_same_as_separate():
    ex = running_example()
    w = ex.weights
    c = MultiplyAddCounter()
    c.matmul("QKV", ex.x, concat_heads(w.W_Q + w.W_K + w.W_V))
    t = attention_trace(ex.x, w)
    assert c.total == t.multiply_adds["Q"] + t.multiply_adds["K"] + t.multiply_adds["V"] == 3 * 5 * 16 * 16


# === KV cache ===


@pytest.mark.parametrize("num_heads, num_kv_heads, bias", [(2, 2, False), (4, 1, True), (4, 2, False)])
def test_decoding_token_by_token_equals_the_full_causal_pass_bit_for_bit(num_heads, num_kv_heads, bias):
    ex = running_example()
    w = init_mha_weights(16, num_heads, seed=7, num_kv_heads=num_kv_heads, bias=bias)
    if bias:
        w = w._replace(b_Q=[[0.1] * 4] * 4, b_K=[[-0.2] * 4], b_V=[[0.3] * 4], b_O=[0.05] * 16)
    full = multi_head_attention(ex.x, w, mask=causal_mask(5))
    cache, rows = None, []
    for t, x_row in enumerate(ex.x):
        out, cache = decode_step(x_row, w, cache)
        rows.append(out)
        assert len(cache.K) == num_kv_heads and len(cache.K[0]) == t + 1
    assert rows == full


def test_decode_step_does_not_mutate_the_cache():
    ex = running_example()
    _, cache = decode_step(ex.x[0], ex.weights)
    before = copy.deepcopy(cache)
    _, grown = decode_step(ex.x[1], ex.weights, cache)
    assert cache == before and len(grown.K[0]) == 2


def test_decode_step_errors():
    ex = running_example()
    w = ex.weights
    _, cache = decode_step(ex.x[0], w)
    with pytest.raises(ShapeError, match=r"decode_step: x_row has 8 entries but the weights expect d_model = 16"):
        decode_step(ex.x[1][:8], w, cache)
    with pytest.raises(ShapeError, match=r"decode_step: cache.K has 1 matrices; it needs one per key/value head \(2\)"):
        decode_step(ex.x[1], w, KVCache(cache.K[:1], cache.V))
    with pytest.raises(ShapeError, match=r"decode_step: cache.V\[0\] is 1x4; its rows must have 8 entries \(d_v\)"):
        decode_step(ex.x[1], w, KVCache(cache.K, [[row[:4] for row in M] for M in cache.V]))
    with pytest.raises(TypeError, match=r"decode_step: cache must be a KVCache"):
        decode_step(ex.x[1], w, (cache.K, cache.V))


def test_counter_checks_shapes_at_its_public_entry_point():
    with pytest.raises(ShapeError, match=r"matmul: A is 1x2 and B is 3x1"):
        MultiplyAddCounter().matmul("demo", [[1.0, 2.0]], [[1.0], [2.0], [3.0]])
