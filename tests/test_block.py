"""LayerNorm and dropout (mha_lists/teaching/block.py): hand cases, invariants, bad input."""

import copy
import math
import random
import statistics

import pytest
from bad_inputs import assert_template

from mha_lists import ShapeError, add, multi_head_attention, running_example
from mha_lists.teaching.block import LAYER_NORM_EPS, dropout, layer_norm

OVERFLOW = "are too large: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Each message of block.py, pinned once; the tests below match only its start (function and argument).
MESSAGES = {
    "layer_norm width": "layer_norm: x is {T}x{d} and {name} has {n} entries; {name} needs one entry per column ({d})",
    "layer_norm deviations": "layer_norm: the squared deviations " + OVERFLOW,
    "layer_norm outputs": "layer_norm: the outputs " + OVERFLOW,
    "dropout p": "dropout: p must be a probability with 0 <= p < 1, got {value}; p = 1 would zero every entry and "
                 "1 / (1 - p) is undefined",
    "dropout overflow": "dropout: the scaled survivors " + OVERFLOW,
}

# === LayerNorm: small cases by hand ===


def test_layer_norm_by_hand():
    # row [1, 2, 3, 6]: mean 3, deviations -2 -1 0 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5
    y = layer_norm([[1, 2, 3, 6]], eps=1e-5)
    s = math.sqrt(3.5 + 1e-5)
    assert y == [[-2 / s, -1 / s, 0 / s, 3 / s]]


def test_layer_norm_uses_the_biased_variance_like_pytorch():
    # [0, 4]: biased variance 4 gives +-2 / 2 = +-1; the unbiased one (8) would give +-0.7071
    y = layer_norm([[0.0, 4.0]], eps=1e-300)
    assert y == [[-1.0, 1.0]]
    assert LAYER_NORM_EPS == 1e-5


def test_layer_norm_gain_and_bias_by_hand():
    # normalised row [-1, 1] (eps negligible), times gain [2, 3], plus bias [10, 20]
    assert layer_norm([[0.0, 4.0]], [2.0, 3.0], [10.0, 20.0], eps=1e-300) == [[8.0, 23.0]]


def test_layer_norm_ones_and_zeros_are_the_default():
    x = running_example().x
    d = len(x[0])
    assert layer_norm(x, [1.0] * d, [0.0] * d) == layer_norm(x)


def test_layer_norm_of_a_constant_row_is_zero_not_nan():
    # variance 0: (v - mean) / sqrt(0 + eps) = 0 / sqrt(eps)
    assert layer_norm([[3.0, 3.0, 3.0]]) == [[0.0, 0.0, 0.0]]


# === LayerNorm: invariants and an independent computation ===


def test_layer_norm_rows_have_mean_0_and_variance_var_over_var_plus_eps():
    ex = running_example()
    r = add(ex.x, multi_head_attention(ex.x, ex.weights))
    for row, y in zip(r, layer_norm(r)):
        var = statistics.pvariance(row)
        assert abs(statistics.fmean(y)) < 1e-15
        # exactly var / (var + eps) in exact arithmetic: "variance 1 up to eps"
        assert statistics.pvariance(y) == pytest.approx(var / (var + LAYER_NORM_EPS), rel=1e-13)
        assert statistics.pvariance(y) < 1


def test_layer_norm_matches_the_statistics_module():
    x = running_example(seed=7).x
    for row, y in zip(x, layer_norm(x)):
        mean, var = statistics.fmean(row), statistics.pvariance(row)
        expected = [(v - mean) / math.sqrt(var + LAYER_NORM_EPS) for v in row]
        assert y == pytest.approx(expected, rel=1e-13, abs=1e-15)


def test_layer_norm_is_nearly_scale_invariant_and_shift_invariant():
    x = running_example().x
    y = layer_norm(x)
    scaled = layer_norm([[10 * v for v in row] for row in x])
    shifted = layer_norm([[v + 5 for v in row] for row in x])
    for a, b, c in zip(y, scaled, shifted):
        assert a == pytest.approx(b, rel=1e-4)  # only eps breaks exact scale invariance
        assert a == pytest.approx(c, rel=1e-12, abs=1e-12)


def test_layer_norm_does_not_change_its_arguments():
    x, g, b = [[1.0, 2.0], [3.0, 5.0]], [1.5, 2.5], [0.1, 0.2]
    before = copy.deepcopy((x, g, b))
    layer_norm(x, g, b)
    assert (x, g, b) == before


# === LayerNorm: bad input ===


# === The messages, each once, word for word ===


R = random.Random(0)
MESSAGE_CASES = [
    ("layer_norm width", lambda: layer_norm([[1.0, 2.0, 3.0]], gain=[1.0, 1.0]), ShapeError,
     dict(T=1, d=3, name="gain", n=2)),
    ("layer_norm width", lambda: layer_norm([[1.0, 2.0, 3.0]] * 2, bias=[0.0] * 4), ShapeError,
     dict(T=2, d=3, name="bias", n=4)),
    ("layer_norm deviations", lambda: layer_norm([[1e200, -1e200]]), ValueError, {}),  # a square past float64
    ("layer_norm deviations", lambda: layer_norm([[1.7e308, -1.7e308, -1.7e308]]), ValueError, {}),  # inf / inf
    ("layer_norm outputs", lambda: layer_norm([[0.0, 0.0, 0.0, 0.0, 1.0]], [1e308] * 5), ValueError, {}),  # y = 2.0
    ("layer_norm outputs", lambda: layer_norm([[1.0, 2.0]], [1e308] * 2, [1e308] * 2), ValueError, {}),
    ("dropout p", lambda: dropout([[1.0]], 1.0, rng=R), ValueError, dict(value="1.0")),
    ("dropout p", lambda: dropout([[1.0]], -1, rng=R), ValueError, dict(value="-1")),
    ("dropout overflow", lambda: dropout([[1e308] * 20], 0.5, rng=R), ValueError, {}),
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


# === LayerNorm: bad input ===


@pytest.mark.parametrize("eps", [0, -1e-5, float("nan"), float("inf")])
def test_layer_norm_rejects_a_bad_eps(eps):
    with pytest.raises(ValueError, match="^layer_norm: eps must be a (positive )?finite number"):
        layer_norm([[1.0, 2.0]], eps=eps)


@pytest.mark.parametrize("eps", [True, "1e-5", None])
def test_layer_norm_rejects_an_eps_that_is_not_a_number(eps):
    with pytest.raises(TypeError, match=r"^layer_norm: eps must be a positive finite number, got .* \(\w+\)$"):
        layer_norm([[1.0, 2.0]], eps=eps)


@pytest.mark.parametrize("x, gain", [([[1e200, -1e200]], None), ([[1e308, 1e308, -1e308]], None),
                                     ([[0.0, 0.0, 0.0, 0.0, 1.0]], [1e308] * 5)])  # y = 2.0 at the last entry
def test_layer_norm_says_when_the_values_are_too_large(x, gain):
    with pytest.raises(ValueError, match="^layer_norm: the (squared deviations|outputs) are too large"):
        layer_norm(x, gain)


def test_layer_norm_rejects_a_vector_and_nonfinite_entries():
    with pytest.raises(TypeError, match=r"layer_norm: x\[0\] must be a row"):
        layer_norm([1.0, 2.0])
    with pytest.raises(ValueError, match=r"layer_norm: x\[0\]\[1\] is nan"):
        layer_norm([[1.0, float("nan")]])


# === Dropout: by hand ===


def test_dropout_by_hand():
    # random.Random(3) draws 0.238, 0.544, 0.370, 0.604, 0.626, 0.066; with p = 0.5 an entry
    # survives when its draw is below 1 - p = 0.5, and survivors are doubled (1 / (1 - 0.5))
    M = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert dropout(M, 0.5, rng=random.Random(3)) == [[2.0, 0.0, 6.0], [0.0, 0.0, 12.0]]


def test_dropout_matches_the_same_draws_read_off_a_second_generator():
    p, M = 0.3, [[0.1 * (i + j) for j in range(7)] for i in range(5)]
    draws = random.Random(11)
    expected = [[v * (1 / (1 - p)) if draws.random() < 1 - p else 0.0 for v in row] for row in M]
    assert dropout(M, p, rng=random.Random(11)) == expected


def test_dropout_survivors_are_scaled_by_one_over_keep():
    out = dropout([[1.0] * 50], 0.5, rng=random.Random(0))
    assert set(out[0]) == {0.0, 2.0}


def test_dropout_with_p_zero_is_a_copy_and_draws_nothing():
    M = [[0.25, 0.75]]
    rng = random.Random(1)
    state = rng.getstate()
    out = dropout(M, 0.0, rng=rng)
    assert out == M and out is not M and out[0] is not M[0]
    assert rng.getstate() == state


def test_dropout_is_deterministic_for_a_seeded_generator():
    M = [[0.1, 0.2, 0.3, 0.4]] * 3
    assert dropout(M, 0.3, rng=random.Random(9)) == dropout(M, 0.3, rng=random.Random(9))


# === Dropout: invariants over many draws ===


def test_dropout_drops_about_p_and_keeps_the_mean():
    rng, p, n = random.Random(0), 0.1, 20_000
    out = dropout([[1.0] * n], p, rng=rng)[0]
    zeros = out.count(0.0) / n
    # binomial: std of the fraction is sqrt(p (1 - p) / n) = 0.0021
    assert abs(zeros - p) < 5 * math.sqrt(p * (1 - p) / n)
    # expected value 1: std of the mean is sqrt(p / (1 - p) / n) = 0.0024
    assert abs(math.fsum(out) / n - 1.0) < 5 * math.sqrt(p / (1 - p) / n)


def test_dropout_rows_of_attention_weights_no_longer_sum_to_one():
    A = [[0.25, 0.25, 0.5]] * 4
    for row, dropped in zip(A, dropout(A, 0.5, rng=random.Random(2))):
        kept = math.fsum(a for a, d in zip(row, dropped) if d != 0.0)
        assert math.fsum(dropped) == pytest.approx(kept / 0.5)
    assert any(math.fsum(r) != 1.0 for r in dropout(A, 0.5, rng=random.Random(2)))


def test_dropout_does_not_change_its_argument():
    M = [[1.0, 2.0], [3.0, 4.0]]
    before = copy.deepcopy(M)
    dropout(M, 0.5, rng=random.Random(0))
    assert M == before


# === Dropout: bad input ===


@pytest.mark.parametrize("p", [1, 1.0, -0.1, 1.5])
def test_dropout_rejects_a_p_outside_0_to_1(p):
    with pytest.raises(ValueError, match=r"^dropout: p must be a probability with 0 <= p < 1"):
        dropout([[1.0]], p, rng=random.Random(0))


@pytest.mark.parametrize("p", [float("nan"), True, "0.1", None])
def test_dropout_rejects_a_p_that_is_not_a_finite_number(p):
    with pytest.raises((TypeError, ValueError), match=r"^dropout: p must be a (finite )?number"):
        dropout([[1.0]], p, rng=random.Random(0))


def test_dropout_says_when_the_values_are_too_large():
    with pytest.raises(ValueError, match="^dropout: the scaled survivors are too large"):
        dropout([[1e308] * 20], 0.5, rng=random.Random(0))


@pytest.mark.parametrize("func, name", [(lambda M: dropout(M, 0.5, rng=random.Random(0)), "dropout: M"),
                                        (layer_norm, "layer_norm: x")])
def test_ints_too_large_for_a_float_are_named_even_when_they_cancel(func, name):
    # 10**400 - 10**400 is 0, so a quick sum of the entries looks finite; each entry is then looked at
    # (dropout used to raise a raw OverflowError here).
    with pytest.raises(ValueError, match=rf"^{name}\[0\]\[1\] is an int of 401 digits, too large for a float"):
        func([[1.0, 10**400, -10**400]])


def test_ints_that_fit_a_float_are_fine():
    assert dropout([[10**300, 1]], 0.0, rng=random.Random(0)) == [[10**300, 1]]
    assert layer_norm([[10**100, -10**100]]) == [[1.0, -1.0]]


def test_dropout_needs_a_local_generator():
    with pytest.raises(TypeError, match="dropout: rng must be a random.Random"):
        dropout([[1.0]], 0.1, rng=0)
    with pytest.raises(TypeError):
        dropout([[1.0]], 0.1)  # rng is keyword-only and required


def test_dropout_rejects_a_ragged_matrix():
    with pytest.raises(ShapeError, match="dropout: M is ragged"):
        dropout([[1.0, 2.0], [3.0]], 0.1, rng=random.Random(0))


# === Bad input: a named error, one short line, the arguments unchanged ===

NAN, INF = float("nan"), float("inf")
BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[True, 1.0]], ({1: 2},), [[[1.0]]], [["x" * 10_000]], [[10**400]], [[10**400, -10**400]]]
BAD_VECTORS = [5, "ab", [], [None], ["a"], [NAN], [INF], [True], [[1.0]], {1: 2}, [1.0], [1.0] * 3, ["x" * 10_000],
               [10**400, -10**400]]
BAD_POSITIVE = [None, "1", NAN, INF, -INF, 0, -1.0, True, [1.0], 10**400, "s" * 10_000]

BAD_CALLS = []  # (name the message must start with, function, arguments, keyword arguments)
for M in BAD_MATRICES:
    BAD_CALLS += [("layer_norm", layer_norm, (M,), {}), ("dropout", dropout, (M, 0.5), {"rng": random.Random(0)})]
for v in BAD_VECTORS:  # gain=None and bias=None are the defaults
    BAD_CALLS += [("layer_norm", layer_norm, ([[1.0, 2.0]],), {"gain": v}),
                  ("layer_norm", layer_norm, ([[1.0, 2.0]],), {"bias": v})]
for e in BAD_POSITIVE:
    BAD_CALLS.append(("layer_norm", layer_norm, ([[1.0, 2.0]],), {"eps": e}))
BAD_CALLS += [("layer_norm", layer_norm, ([[1.7e308, -1.7e308, 1.7e308]],), {}),
              ("layer_norm", layer_norm, ([[1.0, 2.0]],), {"gain": [1e308, 1e308], "bias": [1e308, 1e308]})]
for p in [None, "0.5", NAN, INF, -0.1, 1, 1.0, 1.5, True, [0.5], 10**400, "p" * 10_000]:
    BAD_CALLS.append(("dropout", dropout, ([[1.0, 2.0]], p), {"rng": random.Random(0)}))
for rng in [None, 0, "rng", random]:
    BAD_CALLS.append(("dropout", dropout, ([[1.0, 2.0]], 0.5), {"rng": rng}))
BAD_CALLS.append(("dropout", dropout, ([[1.7e308] * 8], 0.5), {"rng": random.Random(0)}))


def snapshot(args, kwargs):
    return repr([args, {k: (v.getstate() if isinstance(v, random.Random) else v) for k, v in kwargs.items()}])


@pytest.mark.parametrize("name", sorted({case[0] for case in BAD_CALLS}))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(name):
    for func, args, kwargs in [case[1:] for case in BAD_CALLS if case[0] == name]:
        before = snapshot(args, kwargs)
        with pytest.raises((ShapeError, ValueError, TypeError)) as info:
            func(*args, **kwargs)
        message = str(info.value)
        assert message.startswith(f"{name}: "), message
        assert "\n" not in message and len(message) < 300, message
        assert snapshot(args, kwargs) == before, f"{name} changed its arguments"


# === The feed-forward layer and the whole block (PyTorch: tools/check_against_torch.py) ===

from mha_lists import causal_mask, init_mha_weights  # noqa: E402
from mha_lists.teaching.block import BlockWeights, encoder_layer, feed_forward, gelu, relu  # noqa: E402
from mha_lists.teaching.weights import derive_rng  # noqa: E402
from bad_inputs import assert_no_mutation, refused  # noqa: E402


def block_weights(d_model=8, h=2, d_ff=12, seed=0):
    rng = derive_rng(seed, "test/block")
    draw = lambda rows, cols: [[rng.gauss(0, 0.5) for _ in range(cols)] for _ in range(rows)]  # noqa: E731
    row = lambda d, mean=0.0: [mean + rng.gauss(0, 0.3) for _ in range(d)]  # noqa: E731
    return BlockWeights(init_mha_weights(d_model, h, seed=seed, bias=True), draw(d_model, d_ff), row(d_ff),
                        draw(d_ff, d_model), row(d_model), row(d_model, 1.0), row(d_model), row(d_model, 1.0),
                        row(d_model))


def test_activations_by_hand():
    assert [relu(v) for v in (-2.0, 0.0, 3.0)] == [0.0, 0.0, 3.0]
    assert gelu(0.0) == 0.0 and gelu(1.0) == pytest.approx(0.8413447460685429) and gelu(-1.0) == pytest.approx(-0.15865525393145707)
    assert gelu(10.0) == pytest.approx(10.0) and abs(gelu(-10.0)) < 1e-20  # Phi(10) = 1, Phi(-10) = 0 in float64


def test_feed_forward_by_hand():
    # relu([1, -2] I + 0) = [1, 0]; [1, 0] (2 I) + 0.5 = [2.5, 0.5]; gelu keeps a little of the negative entry
    W_1, W_2 = [[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]
    assert feed_forward([[1.0, -2.0]], W_1, [0.0, 0.0], W_2, [0.5, 0.5]) == [[2.5, 0.5]]
    out = feed_forward([[1.0, -2.0]], W_1, [0.0, 0.0], W_2, [0.5, 0.5], activation="gelu")
    assert out[0] == pytest.approx([2 * gelu(1.0) + 0.5, 2 * gelu(-2.0) + 0.5])


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masked", [False, True])
def test_encoder_layer_is_the_public_functions_composed_bit_for_bit(norm_first, activation, masked):
    w = block_weights()
    x = [[0.3 * math.sin(i + 2 * j) for j in range(8)] for i in range(5)]
    mask = causal_mask(5) if masked else None

    def mha(h):
        return multi_head_attention(h, w.attention, mask=mask)

    def ffn(h):
        return feed_forward(h, w.W_1, w.b_1, w.W_2, w.b_2, activation=activation)

    if norm_first:  # GPT-2: x + MHA(LN_1(x)), then + FFN(LN_2(.))
        h = add(x, mha(layer_norm(x, w.gain_1, w.bias_1)))
        expected = add(h, ffn(layer_norm(h, w.gain_2, w.bias_2)))
    else:  # the original Transformer: LN_1(x + MHA(x)), then LN_2(. + FFN(.))
        h = layer_norm(add(x, mha(x)), w.gain_1, w.bias_1)
        expected = layer_norm(add(h, ffn(h)), w.gain_2, w.bias_2)
    assert encoder_layer(x, w, mask=mask, norm_first=norm_first, activation=activation) == expected


def test_post_norm_rows_have_mean_bias_and_pre_norm_keeps_the_residual():
    w = block_weights()._replace(gain_2=[1.0] * 8, bias_2=[0.25] * 8)
    x = [[0.1 * (i - j) for j in range(8)] for i in range(4)]
    for row in encoder_layer(x, w):  # the last step is LayerNorm: each row's mean is its bias
        assert statistics.fmean(row) == pytest.approx(0.25)
    zero = block_weights()._replace(W_2=[[0.0] * 8] * 12, b_2=[0.0] * 8)
    zero = zero._replace(attention=zero.attention._replace(W_O=[[0.0] * 8] * 8, b_O=[0.0] * 8))
    assert encoder_layer(x, zero, norm_first=True) == x  # both branches add 0: the residual stream is x


def test_encoder_layer_names_its_arguments():
    w, x = block_weights(), [[0.1] * 8] * 3
    cases = [
        (lambda: encoder_layer(x, w.attention), TypeError, r"^encoder_layer: weights must be a BlockWeights"),
        (lambda: encoder_layer(x, w, activation="tanh"), ValueError, r"^encoder_layer: activation is 'tanh'; it must be"),
        (lambda: encoder_layer(x, w, norm_first=1), TypeError, r"^encoder_layer: norm_first must be True or False"),
        (lambda: encoder_layer(x, w._replace(W_1=w.W_1[:7])), ShapeError,
         r"^encoder_layer: weights.attention.W_Q is 2x8x4 and weights.W_1 is 7x12"),
        (lambda: encoder_layer(x, w._replace(b_2=[0.0] * 3)), ShapeError, r"^encoder_layer: .*weights.b_2 is a vector of 3"),
        (lambda: encoder_layer(x, w, mask=causal_mask(4)), ShapeError, r"^encoder_layer: mask is 4x4"),
        (lambda: encoder_layer([[0.1] * 5] * 3, w), ShapeError, r"^encoder_layer: weights.attention.W_Q is 2x8x4 and x is 3x5"),
        (lambda: encoder_layer(x, w._replace(gain_1=[math.nan] * 8)), ValueError, r"^encoder_layer: weights.gain_1\[0\] is nan"),
        (lambda: feed_forward(x, w.W_1, w.b_1, w.W_2, w.b_2, activation=None), ValueError, r"^feed_forward: activation is None"),
        (lambda: feed_forward(x, w.W_1, w.b_1, w.W_1, w.b_2), ShapeError, r"^feed_forward: "),
    ]
    for call, error, start in cases:
        with pytest.raises(error, match=start):
            call()
    for bad in (None, 5, [[1.0], [2.0, 3.0]], [["a"] * 8], [[10**400] * 8]):
        refused("encoder_layer", lambda: encoder_layer(bad, w))
        refused("feed_forward", lambda: feed_forward(bad, w.W_1, w.b_1, w.W_2, w.b_2))


def test_an_overflow_in_the_block_is_named_after_it():
    w = block_weights()
    with pytest.raises(ValueError, match=r"^encoder_layer: the .* are too large"):
        encoder_layer([[0.5] * 4 + [-0.5] * 4] * 2, w._replace(W_1=[[1e300] * 12] * 8, W_2=[[1e300] * 8] * 12))
    with pytest.raises(ValueError, match=r"^feed_forward: the .* are too large"):
        feed_forward([[1e200] * 8], [[1e200] * 12] * 8, w.b_1, w.W_2, w.b_2)


def test_the_block_leaves_its_arguments_alone():
    w = block_weights()
    x = [[0.2 * j for j in range(8)]] * 3
    assert_no_mutation(encoder_layer, x, w, mask=causal_mask(3), norm_first=True, activation="gelu")
    assert_no_mutation(feed_forward, x, w.W_1, w.b_1, w.W_2, w.b_2)
