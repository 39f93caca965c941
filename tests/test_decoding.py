"""teaching/decoding.py: one token at a time with a KV cache, bit for bit the full causal pass."""

import copy
import math

import pytest

from mha_lists import ShapeError, causal_mask, decode_step, init_mha_weights, multi_head_attention, running_example
from mha_lists.teaching.decoding import KVCache
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
W4 = init_mha_weights(4, 2, seed=0)
ROW = [[0.1, 0.2]]

# Every message this module writes itself, once (the shared ones are in test_checks.py and test_attention.py).
MESSAGES = {
    "x_row": SHARED["sizes differ"],
    "not a cache": "decode_step: {name} must be a KVCache (or None for the first token), got {type}",
    "cache heads": "decode_step: {name}.{field} has {n} matrices; it needs one per key/value head ({g})",
    "cache width": "decode_step: {name}.{field}[{g}] is {shape}; its rows must have {width} entries (d_{which})",
    "cache rows": "decode_step: {name}.{field}[{g}] has {rows} rows but {name}.K[0] has {first}; "
                  "every head must hold the same tokens",
    "overflow": "decode_step: the products are too large: a product or sum overflowed float64 "
                "(largest about 1.8e308); scale the inputs down",
}

BAD_CALLS = {
    "x_row": (ShapeError, lambda: decode_step([0.1] * 3, W4),
              dict(func="decode_step", a="weights.W_Q", a_shape="2x4x2", b="x_row", b_shape="a vector of 3",
                   a_place="rows", b_place="entries", size="d_model", a_dims="h, d_model, d_k", b_dims="d_model", a_n=4, b_n=3)),
    "not a cache": (TypeError, lambda: decode_step([0.1] * 4, W4, (ROW, ROW)), dict(name="cache", type="tuple")),
    "cache heads": (ShapeError, lambda: decode_step([0.1] * 4, W4, KVCache([ROW], [ROW, ROW])),
                    dict(name="cache", field="K", n=1, g=2)),
    "cache width": (ShapeError, lambda: decode_step([0.1] * 4, W4, KVCache([ROW, ROW], [ROW, [[0.1]]])),
                    dict(name="cache", field="V", g=1, shape="1x1", width=2, which="v")),
    "cache rows": (ShapeError, lambda: decode_step([0.1] * 4, W4, KVCache([ROW, ROW], [ROW, ROW + ROW])),
                   dict(name="cache", field="V", g=1, rows=2, first=1)),
    "overflow": (ValueError, lambda: decode_step([1e200] * 4, W4), {}),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === The cache gives the full pass, bit for bit ===


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


def test_a_scale_reaches_the_step():
    ex = running_example()
    full = multi_head_attention(ex.x[:2], ex.weights, mask=causal_mask(2), scale=0.25)
    _, cache = decode_step(ex.x[0], ex.weights, scale=0.25)
    out, _ = decode_step(ex.x[1], ex.weights, cache, scale=0.25)
    assert out == full[1]


def test_the_first_token_attends_only_to_itself():
    # One key: its weight is 1, so the output is its value row through W_O.
    w = init_mha_weights(4, 1, seed=2)
    out, cache = decode_step([1.0, 0.0, 0.0, 0.0], w)
    V = cache.V[0][0]
    assert out == pytest.approx([math.fsum(V[t] * w.W_O[t][c] for t in range(4)) for c in range(4)])


def test_decode_step_does_not_mutate_the_cache():
    ex = running_example()
    _, cache = decode_step(ex.x[0], ex.weights)
    before = copy.deepcopy(cache)
    _, grown = decode_step(ex.x[1], ex.weights, cache)
    assert cache == before and len(grown.K[0]) == 2
    assert grown.K[0][0] == cache.K[0][0]


# === Errors name the function and the argument ===


def test_decode_step_errors():
    ex = running_example()
    w = ex.weights
    _, cache = decode_step(ex.x[0], w)
    with pytest.raises(ShapeError, match=r"^decode_step: weights.W_Q is 2x16x8 and x_row is a vector of 8"):
        decode_step(ex.x[1][:8], w, cache)
    with pytest.raises(ShapeError, match=r"^decode_step: cache.K has 1 matrices"):
        decode_step(ex.x[1], w, KVCache(cache.K[:1], cache.V))
    with pytest.raises(ShapeError, match=r"^decode_step: cache.V\[0\] is 1x4"):
        decode_step(ex.x[1], w, KVCache(cache.K, [[row[:4] for row in M] for M in cache.V]))
    with pytest.raises(TypeError, match=r"^decode_step: cache must be a KVCache"):
        decode_step(ex.x[1], w, (cache.K, cache.V))
    with pytest.raises(ValueError, match=r"^decode_step: cache.K\[0\]\[0\]\[1\] is nan"):
        decode_step(ex.x[1], w, KVCache([[[0.0, NAN] + [0.0] * 6], cache.K[1]], cache.V))
    with pytest.raises(ValueError, match=r"^decode_step: scale must be a positive finite number"):
        decode_step(ex.x[1], w, cache, scale=0)
    with pytest.raises(TypeError, match=r"^decode_step: weights must be an MHAWeights"):
        decode_step(ex.x[1], None)


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

BAD_VECTORS = [None, 5, "ab", [], [None], ["a"], [NAN], [INF], [True], [[1.0]], {1: 2}, [0.1] * 3, [0.1] * 5,
               [10**400, 0.0, 0.0, 0.0], [0.0] * 10**5]
BAD_WEIGHTS = [None, "w", [[1.0] * 4] * 4, W4._replace(W_O=[[NAN] * 4] * 4), W4._replace(W_V=[[[INF, 0.0]] * 4, W4.W_V[1]]),
               W4._replace(W_Q=[W4.W_Q[0]]), W4._replace(W_K=[]), W4._replace(W_Q=None),
               W4._replace(b_O=[NAN, 0.0, 0.0, 0.0]), W4._replace(b_Q=[[0.0, 0.0]]),
               W4._replace(b_K=[[0.0, 0.0], [0.0, "x"]])]
BAD_CACHES = ["cache", (ROW, ROW), KVCache([], []), KVCache(None, None), KVCache([ROW], [ROW]),
              KVCache([[[0.1]], [[0.1]]], [ROW, ROW]), KVCache([ROW, ROW], [[[0.1]], [[0.1]]]),
              KVCache([[[NAN, 0.0]], ROW], [ROW, ROW]), KVCache([ROW, ROW + ROW], [ROW, ROW]),
              KVCache([ROW, ROW], [ROW + ROW, ROW + ROW]), KVCache([ROW, [0.1, 0.2]], [ROW, ROW]),
              KVCache(["ab", ROW], [ROW, ROW]), KVCache([[[10**400, 0.0]], ROW], [ROW, ROW])]


def test_bad_arguments_are_refused_by_name():
    for x_row in BAD_VECTORS:
        refused("decode_step", lambda: decode_step(x_row, W4))
    for w in BAD_WEIGHTS:
        refused("decode_step", lambda: decode_step([0.1] * 4, w))
    for cache in BAD_CACHES:
        refused("decode_step", lambda: decode_step([0.1] * 4, W4, cache))
    for scale in ["1", NAN, INF, 0, -1.0, True, 10**400]:
        refused("decode_step", lambda: decode_step([0.1] * 4, W4, scale=scale))
    refused("decode_step", lambda: decode_step([1e200] * 4, W4), ValueError)


def test_results_are_finite_or_refused():
    out, cache = decode_step([1e100] * 4, W4)
    assert finite_everywhere((out, cache))


# === Nothing is changed ===


def test_every_call_leaves_its_arguments_alone():
    _, cache = decode_step([0.1, 0.2, 0.3, 0.4], W4)
    assert_no_mutation(decode_step, [0.5, 0.6, 0.7, 0.8], W4, cache, scale=0.5)
    assert_no_mutation(decode_step, [0.5, 0.6, 0.7], W4, cache)
    assert_no_mutation(decode_step, [0.5, 0.6, 0.7, 0.8], W4, KVCache(cache.K, cache.V[:1]))


def test_a_cache_of_tuples_is_read_like_one_of_lists():
    """check_cache takes tuple matrices, as every matrix argument does; the step then gives the same numbers
    and the same cache, its old rows shared with the old cache (notebook 12)."""
    weights = init_mha_weights(4, 2, seed=0)
    row = [0.1, 0.2, 0.3, 0.4]
    _, cache = decode_step(row, weights)
    as_tuples = KVCache([tuple(tuple(r) for r in M) for M in cache.K], [tuple(M) for M in cache.V])
    out_t, cache_t = decode_step(row, weights, as_tuples)
    out_l, cache_l = decode_step(row, weights, cache)
    assert out_t == out_l
    assert [[list(r) for r in M] for M in cache_t.K + cache_t.V] == cache_l.K + cache_l.V
    assert cache_t.K[0][0] is as_tuples.K[0][0] and type(cache_t.K[0]) is list
