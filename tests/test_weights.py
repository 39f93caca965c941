"""teaching/weights.py: drawing the weights of a layer, counting them, and the limits on their sizes."""

import math
import random
import statistics

import pytest

from mha_lists import ShapeError, concat_heads, init_mha_weights, multi_head_attention, parameter_count, running_example
from mha_lists.teaching import weights
from mha_lists.teaching.weights import (INIT_SCHEMES, MAX_STD, MAX_WEIGHTS, check_layer_settings, check_size,
                                        check_std, check_weight_count, derive_rng, init_matrix, kv_head_for)
from bad_inputs import assert_no_mutation, assert_template, refused

NAN, INF = math.nan, math.inf
R = random.Random(0)
SCHEMES = "xavier_uniform, xavier_normal, kaiming_normal, normal, gpt2"

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "size": "{func}: {name} is {value}; at most {limit}",
    "std": "{func}: {name} is {std}; at most 1e+300, so that every draw stays inside float64",
    "count": "{func}: {sizes} make {count} weights; at most 5,000,000",
    "scheme": "init_matrix: unknown scheme {scheme}; choose one of " + SCHEMES,
    "init scheme": "{func}: unknown init scheme {scheme}; choose one of " + SCHEMES,
    "divisible": "{func}: d_model {d_model} is not divisible by num_heads {h}; d_k = d_model / num_heads must be a "
                 "whole number (or pass d_k and d_v)",
    "kv divide": "{func}: num_kv_heads {g} does not divide num_heads {h}; each key/value head must serve the same "
                 "number of query heads",
    "kv_head_for h": "kv_head_for: h is {h}; a query head is numbered 0 to {last}",
}
MESSAGES["kv_head_for divide"] = MESSAGES["kv divide"]

BAD_CALLS = {
    "size": (ValueError, lambda: init_mha_weights(16, 2, seed=0, n_layer=1001),
             dict(func="init_mha_weights", name="n_layer", value=1001, limit=1000)),
    "std": (ValueError, lambda: init_matrix(2, 2, R, std=1e301), dict(func="init_matrix", name="std", std=1e301)),
    "count": (ValueError, lambda: init_matrix(100_000, 100_000, R),
              dict(func="init_matrix", sizes="rows 100000 and cols 100000", count="10,000,000,000")),
    "scheme": (ValueError, lambda: init_matrix(2, 2, R, "he"), dict(scheme="'he'")),
    "init scheme": (ValueError, lambda: init_mha_weights(16, 2, seed=0, init="he"),
                    dict(func="init_mha_weights", scheme="'he'")),
    "divisible": (ShapeError, lambda: init_mha_weights(16, 3, seed=0, d_k=4), dict(func="init_mha_weights",
                                                                                    d_model=16, h=3)),
    "kv divide": (ShapeError, lambda: running_example(num_heads=8, num_kv_heads=3),
                  dict(func="running_example", g=3, h=8)),
    "kv_head_for divide": (ShapeError, lambda: kv_head_for(0, 8, 3), dict(func="kv_head_for", g=3, h=8)),
    "kv_head_for h": (ValueError, lambda: kv_head_for(-1, 2, 1), dict(h=-1, last=1)),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


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
    assert parameter_count(init_mha_weights(16, 2, seed=42, bias=True)) == 1088


# === Initialisation ===


def sample_std(M):
    return statistics.pstdev([v for row in M for v in row])


@pytest.mark.parametrize("scheme, expected_std", [
    ("xavier_uniform", math.sqrt(6 / 256) / math.sqrt(3)),  # U(-a, a) has std a / sqrt(3)
    ("xavier_normal", math.sqrt(2 / 256)),
    ("kaiming_normal", math.sqrt(2 / 128)),
    ("normal", 0.02),
    ("gpt2", 0.02),
])
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


def test_init_defaults_std_and_n_layer():
    w = init_mha_weights(4, 2, seed=3, init="normal")
    rng = derive_rng(3, "W_Q/head0")
    assert w.W_Q[0] == [[rng.gauss(0.0, 0.02) for _ in range(2)] for _ in range(4)]  # std defaults to 0.02
    gpt2 = init_mha_weights(4, 2, seed=3, init="gpt2")
    rng = derive_rng(3, "W_O")
    assert gpt2.W_O == [[rng.gauss(0.0, 0.02 / math.sqrt(2)) for _ in range(4)] for _ in range(4)]  # n_layer 1


def test_init_is_deterministic_and_streams_are_independent():
    assert init_mha_weights(16, 2, seed=42) == init_mha_weights(16, 2, seed=42)
    assert init_mha_weights(16, 2, seed=42) != init_mha_weights(16, 2, seed=43)
    # W_O has a generator of its own: adding biases or changing num_kv_heads does not move it.
    assert init_mha_weights(16, 2, seed=42).W_O == init_mha_weights(16, 2, seed=42, bias=True).W_O
    assert init_mha_weights(16, 2, seed=42).W_Q == init_mha_weights(16, 2, seed=42, num_kv_heads=1).W_Q


def test_any_str_names_a_stream_and_the_streams_are_the_ones_they_were():
    """derive_rng seeds with the name's UTF-8 bytes: the streams of the str itself, and a lone
    surrogate (which UTF-8 cannot encode) is let through rather than raising UnicodeEncodeError."""
    assert derive_rng(42, "W_Q/head0").random() == random.Random("mha-lists/42/W_Q/head0").random()
    odd = [derive_rng(1, name).random() for name in ["\udcff", "a\udc80b", "\udcff"]]
    assert odd[0] == odd[2] != odd[1]
    assert derive_rng(42, "x").random() == derive_rng(42, "x").random()


def test_d_k_given_lifts_the_divisibility_rule():
    w = init_mha_weights(16, 3, seed=0, d_k=4, d_v=5)
    assert (len(w.W_Q[0][0]), len(w.W_V[0][0]), len(w.W_O)) == (4, 5, 15)


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


def test_check_layer_settings_resolves_the_sizes():
    assert check_layer_settings("demo", 16, 2, seed=0) == (8, 8, 2, 0.02)
    assert check_layer_settings("demo", 16, 4, seed=0, d_k=3, d_v=5, num_kv_heads=2, init="gpt2", std=0.5) == (
        3, 5, 2, 0.02)


def test_a_limit_itself_is_allowed():
    assert check_size("demo", "n", 1000, 1000) == 1000
    check_weight_count("demo", MAX_WEIGHTS, "sizes")  # no error at the limit
    with pytest.raises(ValueError, match=r"^demo: sizes make 5,000,001 weights"):
        check_weight_count("demo", MAX_WEIGHTS + 1, "sizes")
    assert check_std("demo", "std", MAX_STD) == 1e300
    assert init_mha_weights(16, 2, seed=0, n_layer=1000, init="gpt2").W_O  # n_layer at its limit


# === Errors name the function and the argument ===


@pytest.mark.parametrize("call, error, start", [
    (lambda: derive_rng(1.5, "x"), TypeError, "derive_rng: seed must be an int"),
    (lambda: derive_rng(1, 5), TypeError, "derive_rng: name must be a str"),
    (lambda: init_matrix(0, 2, R), ValueError, "init_matrix: rows must be a positive int"),
    (lambda: init_matrix(2, 0, R), ValueError, "init_matrix: cols must be a positive int"),
    (lambda: init_matrix(2, 2, R, fan_in=0), ValueError, "init_matrix: fan_in must be a positive int"),
    (lambda: init_matrix(2, 2, R, fan_out=-3), ValueError, "init_matrix: fan_out must be a positive int"),
    (lambda: init_matrix(2, 2, R, fan_in=10**13), ValueError, "init_matrix: fan_in is 10000000000000; at most"),
    (lambda: init_matrix(2, 2, R, std=0.0), ValueError, "init_matrix: std must be a positive finite number"),
    (lambda: init_matrix(2, 2, R, std=NAN), ValueError, "init_matrix: std must be a positive finite number, got nan"),
    (lambda: init_matrix(2, 2, "rng"), TypeError, "init_matrix: rng must be a random.Random"),
    (lambda: init_matrix(2, 2, random), TypeError, "init_matrix: rng must be a random.Random"),
    (lambda: init_mha_weights(16, 2, seed=0, std=-1.0), ValueError, "init_mha_weights: std must be a positive"),
    (lambda: init_mha_weights(16, 2, seed=0, d_k=0), ValueError, "init_mha_weights: d_k must be a positive int"),
    (lambda: init_mha_weights(16, 2, seed=0, d_v=2.0), TypeError, "init_mha_weights: d_v must be an int"),
    (lambda: init_mha_weights(16, 2, seed=0, num_kv_heads=0), ValueError, "init_mha_weights: num_kv_heads must be"),
    (lambda: init_mha_weights(16, 2, seed=0, n_layer=0), ValueError, "init_mha_weights: n_layer must be a positive"),
    (lambda: init_mha_weights(16, 2, seed=0, bias=1), TypeError, "init_mha_weights: bias must be True or False"),
    (lambda: init_mha_weights(16, 2, seed=None), TypeError, "init_mha_weights: seed must be an int"),
    (lambda: init_mha_weights(16, 2, seed="42"), TypeError, "init_mha_weights: seed must be an int"),
    (lambda: init_mha_weights(0, 2, seed=0), ValueError, "init_mha_weights: d_model must be a positive int"),
    (lambda: init_mha_weights(16, 0, seed=0), ValueError, "init_mha_weights: num_heads must be a positive int"),
    (lambda: init_mha_weights(16, 3, seed=0), ShapeError, "init_mha_weights: d_model 16 is not divisible"),
    (lambda: init_mha_weights(16, 8, seed=0, num_kv_heads=3), ShapeError, "init_mha_weights: num_kv_heads 3"),
    (lambda: init_mha_weights(10**9, 1, seed=0), ValueError, "init_mha_weights: d_model 1000000000, num_heads 1"),
    (lambda: parameter_count("w"), TypeError, "parameter_count: weights must be an MHAWeights"),
])
def test_errors_name_the_function_and_the_argument(call, error, start):
    with pytest.raises(error, match=f"^{start}"):
        call()
    assert set(INIT_SCHEMES) == {"xavier_uniform", "xavier_normal", "kaiming_normal", "normal", "gpt2"}


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

HUGE = 10**9
BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, HUGE, 10**400, -10**5000]
BAD_POSITIVE = [None, "1", NAN, INF, -INF, 0, -1.0, True, [1.0], 1e301, 10**400]
BAD_SEEDS = [None, "x", 1.5, True, [1], 10**100, -10**5000]
GOOD_W = init_mha_weights(4, 2, seed=0)
BAD_WEIGHTS = [None, "w", [[1.0] * 4] * 4, GOOD_W._replace(W_O=[[NAN] * 4] * 4), GOOD_W._replace(W_Q=[GOOD_W.W_Q[0]]),
               GOOD_W._replace(W_K=[]), GOOD_W._replace(W_Q=None), GOOD_W._replace(b_O=[NAN, 0.0, 0.0, 0.0]),
               GOOD_W._replace(b_Q=[[0.0, 0.0]]), GOOD_W._replace(b_K=[[0.0, 0.0], [0.0, "x"]])]


@pytest.mark.parametrize("n", BAD_SIZES, ids=range(len(BAD_SIZES)))
def test_bad_sizes_are_refused_by_name(n):
    refused("init_matrix", lambda: init_matrix(n, 2, R))
    refused("init_matrix", lambda: init_matrix(2, n, R))
    refused("init_mha_weights", lambda: init_mha_weights(n, 2, seed=0))
    refused("init_mha_weights", lambda: init_mha_weights(16, n, seed=0))
    refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, init="gpt2", n_layer=n))
    if n is not None:  # d_k, d_v, num_kv_heads, fan_in and fan_out default to None
        for option in ("d_k", "d_v", "num_kv_heads"):
            refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, **{option: n}))
    if n is not None and n != HUGE:  # a fan may be as large as 10**12
        refused("init_matrix", lambda: init_matrix(2, 2, R, fan_in=n))
        refused("init_matrix", lambda: init_matrix(2, 2, R, fan_out=n))


def test_other_bad_arguments_are_refused_by_name():
    for seed, name in [(1.5, "x"), ("x", "x"), (None, "x"), (True, "x"), (1, 5), (1, None), ([1], "x"),
                       (10**5000, "x")]:
        refused("derive_rng", lambda: derive_rng(seed, name))
    for rng in [None, 0, "rng", random]:
        refused("init_matrix", lambda: init_matrix(2, 2, rng))
    for scheme in ["he", None, 5, ["normal"], "x" * 10**6]:
        refused("init_matrix", lambda: init_matrix(2, 2, R, scheme))
        refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, init=scheme))
    for std in BAD_POSITIVE:
        refused("init_matrix", lambda: init_matrix(2, 2, R, "normal", std=std))
        refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, init="normal", std=std))
    for seed in BAD_SEEDS:
        refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=seed))
    for bias in [None, 1, "yes"]:
        refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, bias=bias))
    refused("init_mha_weights", lambda: init_mha_weights(16, HUGE, seed=0, d_k=1, d_v=1))
    refused("init_mha_weights", lambda: init_mha_weights(100_000, 1, seed=0))
    refused("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, d_k=HUGE, d_v=1))
    for w in BAD_WEIGHTS:
        refused("parameter_count", lambda: parameter_count(w))


# === Nothing is changed ===


def test_every_public_function_leaves_its_arguments_alone():
    rng = derive_rng(0, "t")
    state = rng.getstate()
    init_matrix(2, 2, derive_rng(0, "other"))
    assert rng.getstate() == state  # another generator: this one untouched
    w = init_mha_weights(4, 2, seed=0, bias=True)
    assert_no_mutation(parameter_count, w)
    assert_no_mutation(parameter_count, w._replace(b_O=[0.0]))
    assert_no_mutation(check_layer_settings, "demo", 16, 2, seed=0, d_k=4)
    assert_no_mutation(derive_rng, 1, "x")


def test_the_module_keeps_no_generator_of_its_own():
    assert not any(isinstance(value, random.Random) for value in vars(weights).values())
    before = random.getstate()
    init_mha_weights(8, 2, seed=1, init="xavier_normal")
    assert random.getstate() == before  # the global generator is never drawn from


# === Which key/value head a query head reads ===


def test_kv_head_for_groups_query_heads_in_order():
    assert [kv_head_for(h, 6, 3) for h in range(6)] == [0, 0, 1, 1, 2, 2]
    assert [kv_head_for(h, 4, 1) for h in range(4)] == [0, 0, 0, 0]
    assert [kv_head_for(h, 4, 4) for h in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="^kv_head_for: h is 6"):
        kv_head_for(6, 6, 3)



def test_kv_head_for_names_its_arguments():
    for args, error, start in [((9, 8, 2), ValueError, "kv_head_for: h is 9"),
                               ((0, 2, 0), ValueError, "kv_head_for: num_kv_heads must be a positive int"),
                               ((1.0, 2, 1), TypeError, "kv_head_for: h must be an int"),
                               ((0, 0, 0), ValueError, "kv_head_for: num_heads must be a positive int"),
                               (("0", 2, 1), TypeError, "kv_head_for: h must be an int"),
                               ((0, True, 1), TypeError, "kv_head_for: num_heads must be an int")]:
        with pytest.raises(error, match=f"^{start}"):
            kv_head_for(*args)


def test_kv_head_for_leaves_its_arguments_alone():
    assert_no_mutation(kv_head_for, 1, 4, 2)
