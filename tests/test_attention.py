"""core/attention.py: one head and many. Hand-worked cases, invariants, an independent implementation,
the messages, the limits on length and work, and no mutation."""

import copy
import math
import time

import pytest

from mha_lists import (MHAWeights, ShapeError, attention, attention_trace, causal_mask, combine_masks, concat_heads,
                       init_mha_weights, matmul, multi_head_attention, padding_mask, running_example, softmax_rows,
                       split_heads)
from mha_lists.core import attention as attention_module
from mha_lists.core import matrix as matrix_module
from mha_lists.core.attention import MAX_WORK, check_weights, head_loop, one_head
from mha_lists.teaching.cost import multiply_adds
from mha_lists.teaching.weights import kv_head_for
from mha_lists.core.softmax_and_masks import MAX_MASK_SIDE
from mha_lists.teaching.weights import derive_rng
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
OVERFLOW = "a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"
W4 = init_mha_weights(4, 2, seed=0)  # d_model 4, 2 heads of width 2
X3 = [[0.1, 0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [0.0, 1.0, -1.0, 0.5]]
W_BIG_OUT = MHAWeights([[[1.0]]], [[[1.0]]], [[[1.0]]], [[1e308]], b_O=[1e308])  # d_model 1, one head

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "heads divide": "{func}: {h} query heads and {g} key/value heads; num_kv_heads must divide num_heads",
    "W_O": "{func}: {name}.W_O has {rows} rows; it must have num_heads * d_v = {need} ({h} heads of width {d_v})",
    "too many tokens": "{func}: {name} has {rows} rows; attention here takes at most 4,096 tokens",
    "too much work": "{func}: these sizes take {work} multiply-adds; one call here does at most 200,000,000 "
                     "(about ten seconds): use fewer tokens or smaller matrices",
    "scores overflow": "{func}: the scores Q K^T are too large: " + OVERFLOW,
    "products overflow": "{func}: the products are too large: " + OVERFLOW,
    "not weights": "{func}: {name} must be an MHAWeights, got {type}",
    # The context meets W_K and W_V, not W_Q (09's Step 7 read "weights.W_Q's rows (16) and context's columns (8)").
    "context width": "{func}: context is {T_k}x{d_context} and {name}.W_K is {g}x{d_model}x{d_k}; context's columns "
                     "({d_context}) and the rows of {name}.W_K and {name}.W_V ({d_model}) must be equal: the keys are "
                     "context @ W_K and the values context @ W_V",
    "outputs overflow": "{func}: the outputs are too large: " + OVERFLOW,
}
MESSAGES["outputs overflow (trace)"] = MESSAGES["outputs overflow"]
# The shapes each function declares, against each other: one shared message (pinned in test_checks.py).
SIZES_DIFFER = ["Q K widths", "K V rows", "x width", "W_Q W_K", "W_K W_V", "bias count", "bias width", "b_O width"]
MESSAGES.update({key: SHARED["sizes differ"] for key in SIZES_DIFFER})
# The argument's name in a shared message (its wording is pinned in test_checks.py).
MESSAGES.update({f"attention {name}": SHARED["entry not finite"] for name in "QKV"})
MESSAGES["bias not rows"] = SHARED["not rows"]


def differ(func, a, a_shape, b, b_shape, a_place, b_place, size, a_dims, b_dims):
    """The fields of check_sizes's message; each size read off the shape at its place."""
    def n(shape, place):
        if shape.startswith("a vector of"):
            return int(shape.split()[-1])
        dims = [int(d) for d in shape.split("x")]
        return dims[(["rows", "columns"] if len(dims) == 2 else ["length", "rows", "columns"]).index(place)]
    return dict(func=func, a=a, a_shape=a_shape, b=b, b_shape=b_shape, a_place=a_place, b_place=b_place, size=size,
                a_dims=a_dims, b_dims=b_dims, a_n=n(a_shape, a_place), b_n=n(b_shape, b_place))


MHA = "multi_head_attention"
BIG = [[1.0] * 100] * 4096
BAD_CALLS = {
    "Q K widths": (ShapeError, lambda: attention([[1.0]], [[1.0, 2.0]], [[1.0]]),
                   differ("attention", "Q", "1x1", "K", "1x2", "columns", "columns", "d_k", "T, d_k", "T_k, d_k")),
    "K V rows": (ShapeError, lambda: attention([[1.0]], [[1.0]], [[1.0], [2.0]]),
                 differ("attention", "K", "1x1", "V", "2x1", "rows", "rows", "T_k", "T_k, d_k", "T_k, d_v")),
    "x width": (ShapeError, lambda: multi_head_attention([row[:3] for row in X3], W4),
                differ(MHA, "weights.W_Q", "2x4x2", "x", "3x3", "rows", "columns", "d_model", "h, d_model, d_k",
                       "T, d_model")),
    "context width": (ShapeError, lambda: multi_head_attention(X3, W4, context=[[0.0] * 3] * 2),
                      dict(func=MHA, T_k=2, d_context=3, name="weights", g=2, d_model=4, d_k=2)),
    "W_Q W_K": (ShapeError, lambda: multi_head_attention(X3, W4._replace(W_K=[[[0.0] * 3] * 4] * 2)),
                differ(MHA, "weights.W_Q", "2x4x2", "weights.W_K", "2x4x3", "columns", "columns", "d_k",
                       "h, d_model, d_k", "g, d_model, d_k")),
    "W_K W_V": (ShapeError, lambda: attention_trace(X3, W4._replace(W_V=W4.W_V[:1])),
                differ("attention_trace", "weights.W_K", "2x4x2", "weights.W_V", "1x4x2", "length", "length", "g",
                       "g, d_model, d_k", "g, d_model, d_v")),
    "bias count": (ShapeError, lambda: multi_head_attention(X3, W4._replace(b_Q=[[0.0] * 2])),
                   differ(MHA, "weights.W_Q", "2x4x2", "weights.b_Q", "1x2", "length", "rows", "h", "h, d_model, d_k",
                          "h, d_k")),
    "bias width": (ShapeError, lambda: multi_head_attention(X3, W4._replace(b_V=[[0.0] * 3] * 2)),
                   differ(MHA, "weights.W_V", "2x4x2", "weights.b_V", "2x3", "columns", "columns", "d_v",
                          "g, d_model, d_v", "g, d_v")),
    "b_O width": (ShapeError, lambda: multi_head_attention(X3, W4._replace(b_O=[0.0] * 3)),
                  differ(MHA, "weights.W_Q", "2x4x2", "weights.b_O", "a vector of 3", "rows", "entries", "d_model",
                         "h, d_model, d_k", "d_model")),
    "bias not rows": (TypeError, lambda: multi_head_attention(X3, W4._replace(b_K="zeros")),
                      dict(func=MHA, name="weights.b_K", value="'zeros'")),
    "too many tokens": (ValueError, lambda: multi_head_attention([[0.0] * 4] * 4097, W4),
                        dict(func="multi_head_attention", name="x", rows="4,097")),
    "too much work": (ValueError, lambda: attention(BIG, BIG, BIG), dict(func="attention", work="3,355,443,200")),
    "scores overflow": (ValueError, lambda: attention([[1e200]], [[1e200]], [[1.0]]), dict(func="attention")),
    "products overflow": (ValueError, lambda: attention([[1e308, 1e308]], [[1.0, 1.0]], [[1.0]]),
                          dict(func="attention")),
    "not weights": (TypeError, lambda: multi_head_attention(X3, "w"),
                    dict(func="multi_head_attention", name="weights", type="str")),
    "heads divide": (ShapeError, lambda: multi_head_attention(X3, W4._replace(W_Q=W4.W_Q * 2, W_K=W4.W_K * 2 + W4.W_K[:1],
                                                                              W_V=W4.W_V * 2 + W4.W_V[:1])),
                     dict(func="multi_head_attention", h=4, g=5)),
    "W_O": (ShapeError, lambda: multi_head_attention(X3, W4._replace(W_O=W4.W_O[:3])),
            dict(func="multi_head_attention", name="weights", rows=3, need=4, h=2, d_v=2)),
    # W_O's product is 1e308, finite; b_O's 1e308 on top of it is not
    "outputs overflow": (ValueError, lambda: multi_head_attention([[1.0]], W_BIG_OUT),
                         dict(func="multi_head_attention")),
    "outputs overflow (trace)": (ValueError, lambda: attention_trace([[1.0]], W_BIG_OUT), dict(func="attention_trace")),
    "attention Q": (ValueError, lambda: attention([[NAN]], [[1.0]], [[1.0]]), dict(func="attention", name="Q[0][0]",
                                                                                 value="nan")),
    "attention K": (ValueError, lambda: attention([[1.0]], [[1.0], [INF]], [[1.0], [2.0]]),
                    dict(func="attention", name="K[1][0]", value="inf")),
    "attention V": (ValueError, lambda: attention([[1.0]], [[1.0]], [[1.0, -INF]]),
                    dict(func="attention", name="V[0][1]", value="-inf")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === An independent forward pass: explicit loops, builtin arithmetic, no shared code ===


def plain_mha(x, W_Q, W_K, W_V, W_O, mask=None, context=None):
    """Multi-head attention written out with index loops (numbers agree to rounding)."""
    src = x if context is None else context
    num_heads, num_kv = len(W_Q), len(W_K)
    d_model, d_k, d_v = len(x[0]), len(W_Q[0][0]), len(W_V[0][0])

    def project(X, W):
        return [[sum(X[r][t] * W[t][c] for t in range(len(W))) for c in range(len(W[0]))] for r in range(len(X))]

    heads = []
    for h in range(num_heads):
        g = h * num_kv // num_heads
        Q, K, V = project(x, W_Q[h]), project(src, W_K[g]), project(src, W_V[g])
        out_h = []
        for i in range(len(x)):
            s = []
            for j in range(len(src)):
                if mask is not None and not mask[i][j]:
                    s.append(None)
                else:
                    s.append(sum(Q[i][c] * K[j][c] for c in range(d_k)) / math.sqrt(d_k))
            top = max(v for v in s if v is not None)
            e = [0.0 if v is None else math.exp(v - top) for v in s]
            a = [v / sum(e) for v in e]
            out_h.append([sum(a[j] * V[j][c] for j in range(len(src))) for c in range(d_v)])
        heads.append(out_h)
    concat = [[v for h in range(num_heads) for v in heads[h][i]] for i in range(len(x))]
    return [[sum(concat[i][t] * W_O[t][c] for t in range(num_heads * d_v)) for c in range(d_model)]
            for i in range(len(x))]


def assert_close(A, B, tol=1e-12):
    assert len(A) == len(B) and all(len(a) == len(b) for a, b in zip(A, B))
    for a, b in zip(A, B):
        for u, v in zip(a, b):
            assert math.isclose(u, v, rel_tol=tol, abs_tol=tol), (u, v)


def random_x(T, d_model, seed=3, name="x"):
    rng = derive_rng(seed, name)
    return [[rng.gauss(0, 1) for _ in range(d_model)] for _ in range(T)]


# === Hand-worked attention ===


def identity(n):
    return [[float(r == c) for c in range(n)] for r in range(n)]


def test_one_head_identity_weights_by_hand():
    # x = I, W = I: scores = I / sqrt(2); row 0 weights (e^a, 1) / (e^a + 1) with a = 1/sqrt(2).
    w = MHAWeights([identity(2)], [identity(2)], [identity(2)], identity(2))
    out = multi_head_attention(identity(2), w)
    a = 1 / math.sqrt(2)
    p = math.exp(a) / (math.exp(a) + 1)
    assert_close(out, [[p, 1 - p], [1 - p, p]], 1e-15)


def test_cross_attention_by_hand_with_unit_scale():
    # One query q = [1, 0] over two context rows; W_Q = W_K = the first coordinate, W_V = diag(4, 8).
    # Scores: q·k = [0, ln 3]; weights 1/4 and 3/4.
    # Values: context row 0 -> [0, 8], row 1 -> [4 ln 3, 0]; output = 3/4 [4 ln 3, 0] + 1/4 [0, 8].
    w = MHAWeights([[[1.0], [0.0]]], [[[1.0], [0.0]]], [[[4.0, 0.0], [0.0, 8.0]]], [[1.0, 0.0], [0.0, 1.0]])
    t = attention_trace([[1.0, 0.0]], w, context=[[0.0, 1.0], [math.log(3), 0.0]], scale=1.0)
    assert t.attention[0][0] == pytest.approx([0.25, 0.75])
    assert t.output[0] == pytest.approx([3 * math.log(3), 2.0])


def test_single_head_identity_projections_is_plain_scaled_dot_product_attention():
    x = random_x(4, 3)
    w = MHAWeights([identity(3)], [identity(3)], [identity(3)], identity(3))
    out = multi_head_attention(x, w)
    # softmax(x x^T / sqrt(3)) x, written directly
    for i in range(4):
        s = [sum(a * b for a, b in zip(x[i], x[j])) / math.sqrt(3) for j in range(4)]
        e = [math.exp(v - max(s)) for v in s]
        p = [v / sum(e) for v in e]
        expect = [sum(p[j] * x[j][c] for j in range(4)) for c in range(3)]
        assert out[i] == pytest.approx(expect, rel=1e-12)


# === The full pass against the independent implementation ===


@pytest.mark.parametrize("num_heads, num_kv_heads", [(2, 2), (4, 4), (4, 2), (4, 1), (1, 1)])
def test_full_pass_matches_the_plain_implementation(num_heads, num_kv_heads):
    w = init_mha_weights(8, num_heads, seed=11, num_kv_heads=num_kv_heads)
    x = random_x(5, 8)
    assert_close(multi_head_attention(x, w), plain_mha(x, w.W_Q, w.W_K, w.W_V, w.W_O))


def test_running_example_matches_the_plain_implementation_with_and_without_the_causal_mask():
    ex = running_example()
    w = ex.weights
    assert_close(multi_head_attention(ex.x, w), plain_mha(ex.x, w.W_Q, w.W_K, w.W_V, w.W_O))
    mask = causal_mask(5)
    assert_close(multi_head_attention(ex.x, w, mask=mask), plain_mha(ex.x, w.W_Q, w.W_K, w.W_V, w.W_O, mask=mask))


def test_cross_attention_matches_the_plain_implementation():
    w = init_mha_weights(8, 2, seed=5)
    x, ctx = random_x(3, 8), random_x(6, 8, name="ctx")
    t = attention_trace(x, w, context=ctx)
    assert len(t.attention[0]) == 3 and len(t.attention[0][0]) == 6
    assert len(t.output) == 3 and len(t.output[0]) == 8
    assert_close(t.output, plain_mha(x, w.W_Q, w.W_K, w.W_V, w.W_O, context=ctx))


def test_d_v_different_from_d_k():
    w = init_mha_weights(8, 2, seed=5, d_k=3, d_v=5)
    assert len(w.W_V[0][0]) == 5 and len(w.W_O) == 10
    x = random_x(4, 8)
    t = attention_trace(x, w)
    assert len(t.head_outputs[0][0]) == 5 and len(t.concat[0]) == 10
    assert_close(t.output, plain_mha(x, w.W_Q, w.W_K, w.W_V, w.W_O))


def test_biases_are_added_after_each_projection():
    w = init_mha_weights(4, 2, seed=2, bias=True)
    w = w._replace(b_Q=[[0.1, -0.2], [0.3, 0.0]], b_K=[[0.0, 0.5], [-0.1, 0.2]],
                   b_V=[[1.0, 2.0], [3.0, 4.0]], b_O=[0.5, 0.0, -0.5, 1.0])
    x = random_x(3, 4)
    t = attention_trace(x, w)
    Q0 = [[q + b for q, b in zip(row, w.b_Q[0])] for row in matmul(x, w.W_Q[0])]
    assert t.Q[0] == Q0
    # Every weight row sums to 1, so a value bias passes straight through to the head output.
    no_bias = attention_trace(x, w._replace(b_V=None))
    assert_close([[a - b for a, b in zip(r, s)] for r, s in zip(t.head_outputs[1], no_bias.head_outputs[1])],
                 [[3.0, 4.0]] * 3)
    out = [[o + b for o, b in zip(row, w.b_O)] for row in matmul(t.concat, w.W_O)]
    assert t.output == out


# === Invariants of the trace ===


def test_trace_and_function_agree_exactly():
    ex = running_example()
    t = attention_trace(ex.x, ex.weights)
    assert multi_head_attention(ex.x, ex.weights) == t.output
    for h in range(2):
        raw = matmul(t.Q[h], [list(col) for col in zip(*t.K[h])])
        assert t.scores[h] == [[s * (1 / math.sqrt(8)) for s in row] for row in raw]
        assert t.attention[h] == softmax_rows(t.scores[h])
        assert t.head_outputs[h] == matmul(t.attention[h], t.V[h])
    assert t.concat == concat_heads(t.head_outputs)
    assert t.output == matmul(t.concat, ex.weights.W_O)


def test_fused_projection_equals_per_head():
    ex = running_example()
    w = ex.weights
    fused = concat_heads(w.W_Q + w.W_K + w.W_V)  # (16, 48)
    blocks = split_heads(matmul(ex.x, fused), 6)
    t = attention_trace(ex.x, w)
    assert blocks == t.Q + t.K + t.V  # bit for bit: the same products, the same fsum


def test_output_is_the_sum_of_per_head_contributions_through_w_o():
    ex = running_example()
    t = attention_trace(ex.x, ex.weights)
    W_O = ex.weights.W_O
    parts = [matmul(t.head_outputs[h], W_O[8 * h:8 * h + 8]) for h in range(2)]
    assert_close(t.output, [[a + b for a, b in zip(r0, r1)] for r0, r1 in zip(*parts)])


def test_causal_mask_gives_exact_zeros_to_the_future():
    ex = running_example()
    t = attention_trace(ex.x, ex.weights, mask=causal_mask(5))
    for h in range(2):
        for i in range(5):
            for j in range(5):
                if j > i:
                    assert t.attention[h][i][j] == 0.0 and t.scores[h][i][j] == -math.inf
            assert math.fsum(t.attention[h][i]) == pytest.approx(1.0)
    # the first token can only attend to itself
    assert t.attention[0][0][0] == 1.0


def test_gqa_with_as_many_kv_heads_as_query_heads_is_plain_mha():
    a = init_mha_weights(16, 4, seed=9)
    b = init_mha_weights(16, 4, seed=9, num_kv_heads=4)
    assert a == b
    x = random_x(3, 16)
    assert multi_head_attention(x, a) == multi_head_attention(x, b)


def test_gqa_query_heads_share_key_value_heads():
    assert [kv_head_for(h, 8, 2) for h in range(8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [kv_head_for(h, 8, 1) for h in range(8)] == [0] * 8
    w = init_mha_weights(16, 8, seed=1, num_kv_heads=2, d_k=2, d_v=2)
    assert len(w.W_K) == len(w.W_V) == 2 and len(w.W_Q) == 8
    # Making W_K/W_V per query head by repetition gives plain MHA with the same numbers.
    w_full = w._replace(W_K=[w.W_K[kv_head_for(h, 8, 2)] for h in range(8)],
                        W_V=[w.W_V[kv_head_for(h, 8, 2)] for h in range(8)])
    x = random_x(4, 16)
    assert multi_head_attention(x, w) == multi_head_attention(x, w_full)


# === Masks ===

def test_padding_does_not_change_real_tokens():
    ex = running_example()
    short = running_example(sentence="<BOS> I like <EOS>")
    padded = running_example(sentence="<BOS> I like <EOS> <PAD> <PAD>")
    w = ex.weights
    for extra in (None, causal_mask(6)):
        mask = padding_mask(padded.ids, 0) if extra is None else combine_masks(extra, padding_mask(padded.ids, 0))
        out_padded = multi_head_attention(padded.x, w, mask=mask)
        out_short = multi_head_attention(short.x, w, mask=None if extra is None else causal_mask(4))
        assert out_padded[:4] == out_short  # bit for bit: padded keys add exact zeros
    t = attention_trace(padded.x, w, mask=padding_mask(padded.ids, 0))
    assert all(row[4] == 0.0 and row[5] == 0.0 for h in range(2) for row in t.attention[h])



# === Bad input at the public entry points: the function and the argument ===


def test_mask_errors():
    ex = running_example()
    with pytest.raises(ShapeError, match=r"^multi_head_attention: mask is 4x5"):
        multi_head_attention(ex.x, ex.weights, mask=[[True] * 5] * 4)
    bad = causal_mask(5)
    bad[2] = [False] * 5
    with pytest.raises(ValueError, match=r"^multi_head_attention: mask row 2 is all False"):
        multi_head_attention(ex.x, ex.weights, mask=bad)
    with pytest.raises(TypeError, match=r"^attention_trace: mask\[0\]\[0\] is 1"):
        attention_trace(ex.x, ex.weights, mask=[[1] * 5] * 5)


def test_input_errors_name_the_function_and_the_argument():
    ex = running_example()
    w, x = ex.weights, ex.x
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_Q is 2x16x8 and x is 5x8"):
        multi_head_attention([row[:8] for row in x], w)
    with pytest.raises(ShapeError, match=r"^attention_trace: x is ragged"):
        attention_trace([x[0], x[1][:15]], w)
    with pytest.raises(ShapeError, match=r"^multi_head_attention: x must be a non-empty list of rows, got \[\]"):
        multi_head_attention([], w)
    with pytest.raises(ValueError, match=r"^multi_head_attention: x\[1\]\[3\] is nan"):
        multi_head_attention([x[0], x[1][:3] + [NAN] + x[1][4:]], w)
    with pytest.raises(ValueError, match=r"^multi_head_attention: x\[0\]\[0\] is inf"):
        multi_head_attention([[INF] + x[0][1:]], w)
    with pytest.raises(TypeError, match=r"^multi_head_attention: x\[0\]\[0\] is '1'"):
        multi_head_attention([["1"] + x[0][1:]], w)
    with pytest.raises(ShapeError, match=r"^attention_trace: context is 5x8 and weights.W_K is 2x16x8; context's columns"):
        attention_trace(x, w, context=[row[:8] for row in x])
    with pytest.raises(ShapeError, match=r"^attention_trace: context is 3x24 and weights.W_K is 1x16x4;"):
        attention_trace(x, init_mha_weights(16, 4, seed=0, num_kv_heads=1), context=[[0.0] * 24] * 3)
    assert len(attention_trace(x, w, context=x[:3]).output) == len(x)  # a context of the right width, any length
    with pytest.raises(TypeError, match=r"^multi_head_attention: weights must be an MHAWeights"):
        multi_head_attention(x, {"W_Q": w.W_Q})
    with pytest.raises(ValueError, match=r"^multi_head_attention: scale must be a positive finite number"):
        multi_head_attention(x, w, scale=0)


def test_weight_shape_errors():
    ex = running_example()
    w, x = ex.weights, ex.x
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_Q\[0\] is 16x8 and weights.W_Q\[1\]"):
        multi_head_attention(x, w._replace(W_Q=[w.W_Q[0], [row[:4] for row in w.W_Q[1]]]))
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_O has 15 rows"):
        multi_head_attention(x, w._replace(W_O=w.W_O[:15]))
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_Q is 2x16x8 and weights.W_K is 2x16x4"):
        multi_head_attention(x, w._replace(W_K=[[row[:4] for row in M] for M in w.W_K]))
    w3 = init_mha_weights(12, 3, seed=0)
    with pytest.raises(ShapeError, match=r"^multi_head_attention: 3 query heads and 2 key/value heads"):
        multi_head_attention([[0.0] * 12], w3._replace(W_K=w3.W_K[:2], W_V=w3.W_V[:2]))
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_Q is 2x16x8 and weights.b_O is a vector of 3"):
        multi_head_attention(x, w._replace(b_O=[0.0] * 3))
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_Q is 2x16x8 and weights.b_Q is 1x8"):
        multi_head_attention(x, w._replace(b_Q=[[0.0] * 8]))
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_K must be a non-empty list"):
        multi_head_attention(x, w._replace(W_K=[]))
    with pytest.raises(TypeError, match=r"^demo: weights must be an MHAWeights, got list$"):
        check_weights("demo", "weights", list(w))


def test_weight_groups_that_are_not_lists_are_named():
    # Not a list of matrices at all, in every group: named (W_Q first), never a raw "not iterable".
    for w in (W4._replace(W_Q=5), W4._replace(W_Q=5, W_K=5, W_V=5)):
        with pytest.raises(TypeError, match=r"^multi_head_attention: weights\.W_Q must be a non-empty list of "
                                            r"matrices, one per head, got 5"):
            multi_head_attention(X3, w)


def test_heads_of_two_shapes_in_every_group_are_refused():
    # W_Q, W_K and W_V each with a second head narrower than its first: the first is named, never taken for all.
    narrow = lambda Ms: [Ms[0], [row[:1] for row in Ms[1]]]  # noqa: E731
    w = W4._replace(W_Q=narrow(W4.W_Q), W_K=narrow(W4.W_K), W_V=narrow(W4.W_V))
    for func in (multi_head_attention, attention_trace):
        with pytest.raises(ShapeError, match=rf"^{func.__name__}: weights\.W_Q\[0\] is 4x2 and "
                                             r"weights\.W_Q\[1\] is 4x1"):
            func(X3, w)


W_ALL = init_mha_weights(4, 2, seed=0, bias=True, num_kv_heads=1)


def poisoned(field, value):
    """W_ALL with entry [0] of the last row of the field's last block replaced (copies; W_ALL unchanged)."""
    blocks = getattr(W_ALL, field)
    if field == "b_O":
        return W_ALL._replace(b_O=[value] + blocks[1:]), r"weights\.b_O\[0\]"
    if field == "W_O":
        return W_ALL._replace(W_O=[list(r) for r in blocks[:-1]] + [[value] + blocks[-1][1:]]), r"weights\.W_O\[3\]\[0\]"
    last = len(blocks) - 1
    if field.startswith("b_"):
        new = [list(b) for b in blocks[:-1]] + [[value] + blocks[-1][1:]]
        return W_ALL._replace(**{field: new}), rf"weights\.{field}\[{last}\]\[0\]"
    M = blocks[-1]
    new_M = [list(r) for r in M[:-1]] + [[value] + M[-1][1:]]
    return W_ALL._replace(**{field: list(blocks[:-1]) + [new_M]}), rf"weights\.{field}\[{last}\]\[3\]\[0\]"


@pytest.mark.parametrize("field", ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"])
@pytest.mark.parametrize("value, error, rule", [(NAN, ValueError, "is nan"), (INF, ValueError, "is inf"),
                                                ("x", TypeError, "is 'x'"), (10**400, ValueError, "is an int of 401")])
def test_a_bad_entry_in_any_weight_is_named(field, value, error, rule):
    bad, where = poisoned(field, value)
    with pytest.raises(error, match=rf"^multi_head_attention: {where} {rule}"):
        multi_head_attention(X3[:2], bad)


def test_weights_are_checked_again_after_any_change_in_place():
    w = init_mha_weights(4, 2, seed=3)
    x = [[1.0, 0.5, -0.5, 0.25], [0.0, 1.0, 2.0, -1.0]]
    before = multi_head_attention(x, w)
    w.W_K[1][2][0] = NAN  # one number, deep inside, changed in place
    with pytest.raises(ValueError, match=r"^multi_head_attention: weights\.W_K\[1\]\[2\]\[0\] is nan"):
        multi_head_attention(x, w)
    w.W_K[1][2][0] = True
    with pytest.raises(TypeError, match=r"^multi_head_attention: weights\.W_K\[1\]\[2\]\[0\] is True"):
        multi_head_attention(x, w)
    w.W_K[1][2][0] = init_mha_weights(4, 2, seed=3).W_K[1][2][0]
    assert multi_head_attention(x, w) == before
    w.W_O.append([1.0, 2.0, 3.0, 4.0])  # a row too many
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights.W_O has 5 rows"):
        multi_head_attention(x, w)
    w.W_O.pop()
    last = w.W_Q[0][0].pop()  # a ragged head
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights\.W_Q\[0\] is ragged"):
        multi_head_attention(x, w)
    w.W_Q[0][0].append(last)
    assert multi_head_attention(x, w) == before  # the weights as they were: the same bits


def test_equal_weights_in_another_object_give_the_same_bits():
    w = init_mha_weights(4, 2, seed=3)
    x = [[1.0, 0.5, -0.5, 0.25], [0.0, 1.0, 2.0, -1.0]]
    copied = MHAWeights(*[[[list(row) for row in M] for M in group] for group in w[:3]], [list(r) for r in w.W_O])
    assert multi_head_attention(x, w) == multi_head_attention(x, copied) == multi_head_attention(x, w)


def test_nothing_is_mutated():
    ex = running_example(bias=True)
    x, w = copy.deepcopy(ex.x), copy.deepcopy(ex.weights)
    mask = causal_mask(5)
    mask_before = copy.deepcopy(mask)
    attention_trace(ex.x, ex.weights, mask=mask)
    multi_head_attention(ex.x, ex.weights, context=ex.x, mask=mask)
    assert ex.x == x and ex.weights == w and mask == mask_before


# === One head: attention(Q, K, V), the formula ===



def test_one_head_attention_by_hand():
    # q = [2, 0] against k0 = [1, 0] and k1 = [0, 1]: raw scores [2, 0]. With scale ln(3)/2 the
    # scaled scores are [ln 3, 0], so the weights are [3/4, 1/4]: 3/4 * [4, 0] + 1/4 * [0, 8].
    Q, K, V = [[2.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[4.0, 0.0], [0.0, 8.0]]
    out = attention(Q, K, V, scale=math.log(3) / 2)
    assert out == [[pytest.approx(3.0), pytest.approx(2.0)]]
    # Masking key 0 leaves value 1 alone.
    assert attention(Q, K, V, mask=[[False, True]]) == [[0.0, 8.0]]
    # The default scale is 1/sqrt(d_k): identical to passing it.
    assert attention(Q, K, V) == attention(Q, K, V, scale=1 / math.sqrt(2))


def test_one_head_attention_takes_d_v_different_from_d_k_and_cross_lengths():
    Q = [[1.0, 0.0, 0.0]]  # T = 1, d_k = 3
    K = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]  # T_k = 2
    V = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]  # d_v = 4
    out = attention(Q, K, V, scale=1.0)
    w0 = math.e / (math.e + 1)
    assert out == [pytest.approx([w0 * a + (1 - w0) * b for a, b in zip(V[0], V[1])])]


def test_trace_multi_head_and_one_head_agree_bit_for_bit():
    ex = running_example(num_heads=4, seed=3)
    for mask in (None, causal_mask(len(ex.x))):
        t = attention_trace(ex.x, ex.weights, mask=mask)
        for h in range(4):
            assert attention(t.Q[h], t.K[h], t.V[h], mask=mask) == t.head_outputs[h]
        assert multi_head_attention(ex.x, ex.weights, mask=mask) == t.output


@pytest.mark.parametrize("T, T_k, d_model, h, g, d_k, d_v", [
    (5, 5, 16, 2, 2, 8, 8), (3, 7, 12, 6, 2, 5, 3), (1, 4, 8, 4, 1, 2, 6)])
def test_multiply_adds_formula_matches_the_products_that_run(T, T_k, d_model, h, g, d_k, d_v):
    from mha_lists.teaching.cost import MultiplyAddCounter

    w = init_mha_weights(d_model, h, seed=1, num_kv_heads=g, d_k=d_k, d_v=d_v)
    x, context = random_x(T, d_model, 1), random_x(T_k, d_model, 2)
    counter = MultiplyAddCounter()  # an independent count: the products, run one by one
    Q = [counter.matmul("Q", x, W) for W in w.W_Q]
    K = [counter.matmul("K", context, W) for W in w.W_K]
    V = [counter.matmul("V", context, W) for W in w.W_V]
    heads = []
    for head in range(h):
        kv = kv_head_for(head, h, g)
        scores = counter.matmul("scores", Q[head], [list(c) for c in zip(*K[kv])])
        heads.append(counter.matmul("weighted_sum", softmax_rows(scores), V[kv]))
    counter.matmul("W_O", concat_heads(heads), w.W_O)
    expected = multiply_adds(T, d_model, h, d_k=d_k, d_v=d_v, num_kv_heads=g, context_len=T_k)
    assert counter.counts == expected
    assert list(expected) == ["Q", "K", "V", "scores", "weighted_sum", "W_O"]
    assert attention_trace(x, w, context=context).multiply_adds == expected


# === Each argument of multi_head_attention reaches the computation ===


def test_multi_head_attention_with_context_and_mask_together_matches_the_plain_implementation():
    w = init_mha_weights(8, 4, seed=6, num_kv_heads=2)
    x, ctx = random_x(3, 8), random_x(5, 8, name="ctx")
    mask = [[True, False, True, True, False], [False, True, True, False, True], [True, True, False, False, False]]
    expected = plain_mha(x, w.W_Q, w.W_K, w.W_V, w.W_O, mask=mask, context=ctx)
    assert_close(multi_head_attention(x, w, context=ctx, mask=mask), expected)
    assert_close(attention_trace(x, w, context=ctx, mask=mask).output, expected)
    for weights in attention_trace(x, w, context=ctx, mask=mask).attention:
        assert [[a == 0.0 for a in row] for row in weights] == [[not m for m in row] for row in mask]


def test_scale_reaches_every_head():
    w = init_mha_weights(8, 2, seed=6)
    x = random_x(4, 8)
    t = attention_trace(x, w, scale=0.25)
    raw = matmul(t.Q[1], [list(col) for col in zip(*t.K[1])])
    assert t.scores[1] == [[s * 0.25 for s in row] for row in raw]
    assert multi_head_attention(x, w, scale=0.25) == t.output
    assert multi_head_attention(x, w, scale=0.25) != multi_head_attention(x, w)


def test_key_bias_is_in_k_but_cannot_change_the_weights():
    # q . (k_j + b) = q . k_j + q . b: the same shift for every key j of a row, and softmax
    # ignores a shift. So b_K moves K, but the attention weights only by rounding.
    w = init_mha_weights(4, 2, seed=2, bias=True)
    w = w._replace(b_K=[[0.5, -1.0], [2.0, 0.25]])
    x, ctx = random_x(3, 4), random_x(2, 4, name="ctx")
    t = attention_trace(x, w, context=ctx)
    assert t.K[1] == [[k + b for k, b in zip(row, w.b_K[1])] for row in matmul(ctx, w.W_K[1])]
    plain = attention_trace(x, w._replace(b_K=[[0.0, 0.0], [0.0, 0.0]]), context=ctx)
    assert_close(t.attention[1], plain.attention[1])




@pytest.mark.parametrize("options, error, start", [
    (dict(mask=[[True, True]]), ShapeError, r"attention: mask is 1x2"),
    (dict(mask=[[True, False], [False, False]]), ValueError, r"attention: mask row 1 is all False"),
    (dict(mask=[[1, 0], [1, 1]]), TypeError, r"attention: mask\[0\]\[0\] is 1"),
    (dict(scale=0.0), ValueError, r"attention: scale must be a positive finite number"),
    (dict(scale=NAN), ValueError, r"attention: scale must be a positive finite number, got nan \(float\)"),
    (dict(scale="1"), TypeError, r"attention: scale must be a positive finite number, got '1' \(str\)"),
])
def test_attention_names_its_mask_and_scale(options, error, start):
    Q = K = V = [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(error, match=f"^{start}"):
        attention(Q, K, V, **options)


# === The head loop and one head: the unchecked kernels ===


def test_head_loop_runs_step_for_every_query_head_with_its_key_value_head():
    Q = [[[1.0, 0.0]], [[0.0, 1.0]]]
    K = [[[1.0, 0.0], [0.0, 1.0]]]
    V = [[[1.0], [3.0]]]
    assert [h.output for h in head_loop(Q, K, V, mask=None, scale=100.0)] == [[[1.0]], [[3.0]]]
    seen = head_loop(Q, K, V, mask=None, scale=1.0, per_head=(["a", "b"],),
                     step=lambda q, k, v, extra, *, mask, scale: (extra, len(k), k is K[0]))
    assert seen == [("a", 2, True), ("b", 2, True)]
    Q4 = [[[float(h)]] for h in range(4)]
    K2 = [[[1.0]], [[2.0]]]
    reads = head_loop(Q4, K2, K2, mask=None, scale=1.0, step=lambda q, k, v, *, mask, scale: k[0][0])
    assert reads == [1.0, 1.0, 2.0, 2.0]  # h // (num_heads // num_kv_heads)


def test_one_head_keeps_its_steps():
    head = one_head([[1.0, 0.0]], [[0.0, 1.0], [0.0, -1.0]], [[1.0, 0.0], [3.0, 2.0]], mask=[[True, False]], scale=1.0)
    assert head.scores == [[0.0, -INF]] and head.weights == [[1.0, 0.0]] and head.output == [[1.0, 0.0]]


def test_a_score_that_overflows_to_minus_inf_is_not_taken_for_a_masked_key():
    Q, K, V = [[1e150, 0.0]], [[-1e150, 0.0], [1.0, 0.0]], [[1.0], [2.0]]  # q . k = -1e300: finite
    assert attention(Q, K, V, scale=1e-300) == [[1.731058578630005]]
    with pytest.raises(ValueError, match=r"^attention: the scores Q K\^T are too large"):
        attention(Q, K, V, scale=1e10)  # -1e310 is -inf: it would have looked masked
    w = MHAWeights([[[1e75, 0.0], [0.0, 1.0]]], [[[-1e75, 0.0], [0.0, 1.0]]], [[[1.0, 0.0], [0.0, 1.0]]],
                   [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"^multi_head_attention: the .* are too large"):
        multi_head_attention([[1e75, 0.0], [1e75, 1.0]], w, scale=1e10)


def test_too_large_values_say_so_and_are_not_blamed_on_the_mask():
    x = [[1e200] * 4 for _ in range(3)]
    for func in (multi_head_attention, attention_trace):
        error = refused(func.__name__, lambda: func(x, W4), ValueError)
        assert "too large" in str(error) and "mask" not in str(error)
    assert "too large" in str(refused("multi_head_attention", lambda: multi_head_attention(X3, W4, scale=1e308)))
    assert finite_everywhere(multi_head_attention([[1e100] * 4] * 3, W4))


def test_bad_context_and_mask_are_named_in_every_entry_point():
    w = init_mha_weights(4, 2, seed=0)
    x = random_x(2, 4)
    for func in (multi_head_attention, attention_trace):
        name = func.__name__
        with pytest.raises(ValueError, match=rf"^{name}: context\[1\]\[0\] is nan; entries must be finite"):
            func(x, w, context=[[0.0] * 4, [math.nan, 0.0, 0.0, 0.0]])
        with pytest.raises(ShapeError, match=rf"^{name}: mask is 2x2; it must be \(queries, keys\) = 2x3"):
            func(x, w, context=random_x(3, 4), mask=[[True, True], [True, True]])
        with pytest.raises(ValueError, match=rf"^{name}: scale must be a positive finite number, got -1"):
            func(x, w, scale=-1)


# === Limits: a length and a budget of work, refused at once (issue 21) ===


def refused_at_once(func, call):
    started = time.perf_counter()
    error = refused(func, call, ValueError)
    assert time.perf_counter() - started < 2.0, f"{func} took {time.perf_counter() - started:.1f} s to refuse"
    return str(error)


def test_attention_takes_at_most_max_mask_side_tokens():
    long = [[1.0]] * (MAX_MASK_SIDE + 1)
    assert "Q has 4,097 rows" in refused_at_once("attention", lambda: attention(long, [[1.0]], [[1.0]]))
    assert "K has 4,097 rows" in refused_at_once("attention", lambda: attention([[1.0]], long, long))
    wide = [[0.0] * 4] * (MAX_MASK_SIDE + 1)
    assert "x has 4,097 rows" in refused_at_once("multi_head_attention", lambda: multi_head_attention(wide, W4))
    assert "context has 4,097 rows" in refused_at_once(
        "multi_head_attention", lambda: multi_head_attention(X3, W4, context=wide))
    assert "x has 4,097 rows" in refused_at_once("attention_trace", lambda: attention_trace(wide, W4))


def test_attention_has_a_budget_of_work():
    assert MAX_WORK == 200_000_000
    big = [[1.0] * 100] * MAX_MASK_SIDE
    assert "multiply-adds" in refused_at_once("attention", lambda: attention(big, big, big))
    w = init_mha_weights(512, 8, seed=0)
    x = [[0.0] * 512] * 2048  # each size within its limit; together far past the budget
    assert "multiply-adds" in refused_at_once("multi_head_attention", lambda: multi_head_attention(x, w))
    assert "multiply-adds" in refused_at_once("attention_trace", lambda: attention_trace(x, w))
    assert "multiply-adds" in refused_at_once("multi_head_attention",
                                              lambda: multi_head_attention(x[:2], w, context=x))


def test_a_call_just_inside_the_budget_runs():
    Q = [[1.0]] * 1000
    assert len(attention(Q, Q, Q)) == 1000  # 1000 * 1000 * 2 = 2 million multiply-adds


# The budget and the length limit at their edge, made small: exactly at the limit runs, one past is refused
# with the count. (attention.py reads its own names MAX_WORK and MAX_MASK_SIDE: those are patched.)


def test_attention_at_the_edge_of_its_budget(monkeypatch):
    Q, K, V = [[1.0, 0.0]] * 2, [[0.0, 1.0]] * 3, [[1.0, 2.0, 3.0]] * 3  # T 2, T_k 3, d_k 2, d_v 3
    monkeypatch.setattr(attention_module, "MAX_WORK", 30)
    monkeypatch.setattr(matrix_module, "MAX_WORK", 30)  # T * T_k * (d_k + d_v) = 2 * 3 * 5
    assert attention(Q, K, V) == [[1.0, 2.0, 3.0]] * 2
    monkeypatch.setattr(attention_module, "MAX_WORK", 29)
    monkeypatch.setattr(matrix_module, "MAX_WORK", 29)
    with pytest.raises(ValueError, match=r"^attention: these sizes take 30 multiply-adds; one call here does "
                                         r"at most 29 "):
        attention(Q, K, V)


def test_a_layer_at_the_edge_of_its_budget(monkeypatch):
    # T 2 queries, T_k 3 keys, d_model 4, h 2 query heads, g 1 key/value head, d_k 3, d_v 5:
    # projections (T h d_k + T_k g (d_k + d_v) + T h d_v) d_model = (12 + 24 + 20) * 4 = 224,
    # heads h T T_k (d_k + d_v) = 2 * 2 * 3 * 8 = 96: 320 in all.
    w = init_mha_weights(4, 2, seed=0, num_kv_heads=1, d_k=3, d_v=5)
    x, context = X3[:2], X3
    monkeypatch.setattr(attention_module, "MAX_WORK", 320)
    monkeypatch.setattr(matrix_module, "MAX_WORK", 320)
    assert attention_trace(x, w, context=context).output == multi_head_attention(x, w, context=context)
    monkeypatch.setattr(attention_module, "MAX_WORK", 319)
    monkeypatch.setattr(matrix_module, "MAX_WORK", 319)
    for func in (multi_head_attention, attention_trace):
        with pytest.raises(ValueError, match=rf"^{func.__name__}: these sizes take 320 multiply-adds; one call here "
                                             r"does at most 319 "):
            func(x, w, context=context)


def test_the_length_limit_at_its_edge(monkeypatch):
    monkeypatch.setattr(attention_module, "MAX_MASK_SIDE", 3)
    assert len(attention([[1.0]] * 3, [[1.0]] * 3, [[1.0]] * 3)) == 3
    assert len(multi_head_attention(X3, W4, context=X3)) == 3
    X4 = X3 + [[0.0] * 4]
    for call, start in [(lambda: attention([[1.0]] * 4, [[1.0]], [[1.0]]), "attention: Q has 4 rows"),
                        (lambda: attention([[1.0]], [[1.0]] * 4, [[1.0]] * 4), "attention: K has 4 rows"),
                        (lambda: multi_head_attention(X4, W4), "multi_head_attention: x has 4 rows"),
                        (lambda: multi_head_attention(X3, W4, context=X4), "multi_head_attention: context has 4 rows")]:
        with pytest.raises(ValueError, match=f"^{start}; attention here takes at most 3 tokens"):
            call()


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

BAD_MATRICES = [None, 5, "ab", "x" * 10**6, [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[True, 1.0]], ({1: 2},), [[[1.0]]], [[1e200, 1e200]], [[10**400] * 4],
                [[10**400, -(10**400), 0, 0]], [[0.0] * 10**5]]
BAD_WEIGHTS = [None, "w", X3, W4._replace(W_O=[[NAN] * 4] * 4), W4._replace(W_V=[[[INF, 0.0]] * 4, W4.W_V[1]]),
               W4._replace(W_Q=[W4.W_Q[0]]), W4._replace(W_K=[]), W4._replace(W_Q=None),
               W4._replace(b_O=[NAN, 0.0, 0.0, 0.0]), W4._replace(b_Q=[[0.0, 0.0]]),
               W4._replace(b_K=[[0.0, 0.0], [0.0, "x"]]), W4._replace(W_O=[[10**400] * 4] * 4)]


@pytest.mark.parametrize("M", BAD_MATRICES, ids=range(len(BAD_MATRICES)))
def test_bad_x_and_context_are_refused_by_name(M):
    for func in (multi_head_attention, attention_trace):
        refused(func.__name__, lambda: func(M, W4))
        if M is not None and M != [[1e200, 1e200]]:  # context=None is self-attention
            refused(func.__name__, lambda: func(X3, W4, context=M))
    refused("attention", lambda: attention(M, [[1.0]], [[1.0]]))


@pytest.mark.parametrize("w", BAD_WEIGHTS, ids=range(len(BAD_WEIGHTS)))
def test_bad_weights_are_refused_by_name(w):
    for func in (multi_head_attention, attention_trace):
        refused(func.__name__, lambda: func(X3, w))


@pytest.mark.parametrize("mask", [None, 5, [], [[True] * 3] * 2, [[1] * 3] * 3, [[True] * 3, [False] * 3, [True] * 3],
                                  [[True, True, None]] * 3, "mask"], ids=range(8))
@pytest.mark.parametrize("scale", [None, 0, -1.0, NAN, INF, "1", True, 10**400], ids=range(8))
def test_bad_mask_and_scale_are_refused_by_name(mask, scale):
    if mask is None and scale is None:
        assert multi_head_attention(X3, W4) == attention_trace(X3, W4).output
        return
    for func in (multi_head_attention, attention_trace):
        refused(func.__name__, lambda: func(X3, W4, mask=mask, scale=scale))


# === Nothing is changed ===


@pytest.mark.parametrize("call, args, kwargs", [
    (attention, ([[1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]], [[1.0], [2.0]]), dict(mask=[[True, False]])),
    (attention, ([[1.0]], [[1.0, 2.0]], [[1.0]]), {}),
    (multi_head_attention, (X3, W_ALL), dict(context=X3[:2], mask=[[True, False]] * 3, scale=0.5)),
    (multi_head_attention, (X3, W4._replace(W_O=W4.W_O[:3])), {}),
    (attention_trace, (X3, W_ALL), dict(mask=causal_mask(3))),
    (check_weights, ("demo", "weights", W_ALL), {}),
])
def test_every_public_function_leaves_its_arguments_alone(call, args, kwargs):
    assert_no_mutation(call, *args, **kwargs)


def test_the_module_keeps_no_state():
    # Nothing at module level that a call could change and the next call read: no lists, dicts or sets.
    # (Under mutmut, the mutation tester, the module also holds its tables of mutants: "mutmut" in their names.)
    state = [name for name, value in vars(attention_module).items()
             if not name.startswith("__") and "mutmut" not in name and isinstance(value, (list, dict, set))]
    assert state == []


def test_every_bias_is_checked_against_its_heads():
    w = W4._replace(b_Q=[[0.0] * 2] * 2, b_K=[[0.0] * 2] * 2, b_V=[[0.0] * 2] * 2, b_O=[0.0] * 4)
    assert multi_head_attention(X3, w) == multi_head_attention(X3, W4)  # zero biases change nothing
    for part, wrong, start in [("b_K", [[0.0] * 2], r"weights\.W_K is 2x4x2 and weights\.b_K is 1x2; weights\.W_K's length"),
                               ("b_K", [[0.0] * 3] * 2, r"weights\.W_Q is 2x4x2 and weights\.b_K is 2x3; weights\.W_Q's columns"),
                               ("b_V", [[0.0] * 2] * 3, r"weights\.W_K is 2x4x2 and weights\.b_V is 3x2; weights\.W_K's length"),
                               ("b_Q", [[0.0] * 1] * 2, r"weights\.W_Q is 2x4x2 and weights\.b_Q is 2x1; weights\.W_Q's columns")]:
        with pytest.raises(ShapeError, match=rf"^multi_head_attention: {start}"):
            multi_head_attention(X3, w._replace(**{part: wrong}))
