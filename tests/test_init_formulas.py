"""Initialisation, redrawn independently from the published formulas, with unequal fans.

Every test matrix has fan_in != fan_out, so swapping them (or using one for the other) fails.
"""

import math
import random

import pytest

from mha_lists import init_mha_weights
from mha_lists.teaching.weights import derive_rng, init_matrix


def uniform(rng, rows, cols, a):
    return [[rng.uniform(-a, a) for _ in range(cols)] for _ in range(rows)]


def gauss(rng, rows, cols, std):
    return [[rng.gauss(0.0, std) for _ in range(cols)] for _ in range(rows)]


@pytest.mark.parametrize("scheme, expected", [
    ("xavier_uniform", lambda rng: uniform(rng, 3, 5, math.sqrt(6 / (7 + 11)))),
    ("xavier_normal", lambda rng: gauss(rng, 3, 5, math.sqrt(2 / (7 + 11)))),
    ("kaiming_normal", lambda rng: gauss(rng, 3, 5, math.sqrt(2 / 7))),  # fan_in only
    ("normal", lambda rng: gauss(rng, 3, 5, 0.3)),
    ("gpt2", lambda rng: gauss(rng, 3, 5, 0.3)),
])
def test_init_matrix_draws_each_scheme_from_its_formula(scheme, expected):
    got = init_matrix(3, 5, random.Random(1), scheme, fan_in=7, fan_out=11, std=0.3)
    assert got == expected(random.Random(1))


def test_init_matrix_fans_default_to_rows_and_cols():
    assert init_matrix(3, 5, random.Random(2)) == uniform(random.Random(2), 3, 5, math.sqrt(6 / (3 + 5)))
    assert init_matrix(3, 5, random.Random(2), "kaiming_normal") == gauss(random.Random(2), 3, 5, math.sqrt(2 / 3))


def test_kaiming_uses_fan_in_not_fan_out():
    a = init_matrix(4, 4, random.Random(3), "kaiming_normal", fan_in=2, fan_out=50)
    b = init_matrix(4, 4, random.Random(3), "kaiming_normal", fan_in=50, fan_out=2)
    assert a == gauss(random.Random(3), 4, 4, 1.0)  # sqrt(2 / 2)
    assert a != b


@pytest.mark.parametrize("init", ["xavier_uniform", "xavier_normal", "kaiming_normal"])
def test_layer_fans_are_the_whole_layers(init):
    # d_model 6, 4 query heads of d_k 2 (h * d_k = 8 != d_model), 2 key/value heads, d_v 3.
    d_model, h, g, d_k, d_v, seed = 6, 4, 2, 2, 3, 9
    w = init_mha_weights(d_model, h, seed=seed, d_k=d_k, d_v=d_v, num_kv_heads=g, init=init)

    def expected(name, rows, cols, fan_out):
        rng = derive_rng(seed, name)
        if init == "xavier_uniform":
            return uniform(rng, rows, cols, math.sqrt(6 / (rows + fan_out)))
        std = math.sqrt(2 / (rows + fan_out)) if init == "xavier_normal" else math.sqrt(2 / rows)
        return gauss(rng, rows, cols, std)

    assert w.W_Q == [expected(f"W_Q/head{i}", d_model, d_k, h * d_k) for i in range(h)]
    assert w.W_K == [expected(f"W_K/head{j}", d_model, d_k, g * d_k) for j in range(g)]
    assert w.W_V == [expected(f"W_V/head{j}", d_model, d_v, g * d_v) for j in range(g)]
    assert w.W_O == expected("W_O", h * d_v, d_model, d_model)


def test_gpt2_scales_only_w_o_by_the_number_of_layers():
    w = init_mha_weights(4, 2, seed=5, init="gpt2", n_layer=3, std=0.5)  # gpt2 ignores std: 0.02
    assert w.W_Q[1] == gauss(derive_rng(5, "W_Q/head1"), 4, 2, 0.02)
    assert w.W_O == gauss(derive_rng(5, "W_O"), 4, 4, 0.02 / math.sqrt(2 * 3))
    normal = init_mha_weights(4, 2, seed=5, init="normal", n_layer=3, std=0.5)
    assert normal.W_O == gauss(derive_rng(5, "W_O"), 4, 4, 0.5)  # n_layer changes only gpt2


def test_biases_start_at_zero_with_one_vector_per_head():
    w = init_mha_weights(6, 3, seed=0, bias=True, num_kv_heads=1, d_v=4)
    assert w.b_Q == [[0.0, 0.0]] * 3 and w.b_K == [[0.0, 0.0]] and w.b_V == [[0.0] * 4]
    assert w.b_O == [0.0] * 6
    assert init_mha_weights(6, 3, seed=0).b_Q is None


def test_derive_rng_streams_are_named_and_seeded():
    assert derive_rng(1, "a").random() == random.Random("mha-lists/1/a").random()
    assert derive_rng(1, "a").random() != derive_rng(2, "a").random()
    assert derive_rng(1, "a").random() != derive_rng(1, "b").random()
