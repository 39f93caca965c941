"""Multi-head attention: hand-worked cases, invariants, an independent implementation, errors."""

import copy
import math

import pytest

from mha_lists import (MHAWeights, ShapeError, attention_trace, causal_mask, combine_masks,
                       concat_heads, init_mha_weights, matmul,
                       multi_head_attention, padding_mask, running_example,
                       softmax, softmax_rows, split_heads)
from mha_lists.core.softmax_and_masks import length_mask
from mha_lists.core.attention import kv_head_for
from mha_lists.core.softmax_and_masks import entropy
from mha_lists.teaching.weights import derive_rng

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


# === Softmax ===


def test_softmax_by_hand():
    # exp(0) = 1 and exp(ln 3) = 3, so the weights are 1/4 and 3/4.
    p = softmax([0.0, math.log(3)])
    assert p[0] == pytest.approx(0.25) and p[1] == pytest.approx(0.75)
    assert softmax([2.0, 2.0, 2.0, 2.0]) == [0.25, 0.25, 0.25, 0.25]


def test_softmax_is_stable_and_shift_invariant():
    big = softmax([1000.0, 1001.0, 1002.0])
    small = softmax([0.0, 1.0, 2.0])
    assert big == pytest.approx(small)
    assert all(math.isfinite(p) for p in big)


def test_softmax_rows_sum_to_one():
    rows = softmax_rows(random_x(6, 9))
    for row in rows:
        assert math.fsum(row) == pytest.approx(1.0, abs=1e-15)
        assert all(p > 0 for p in row)


def test_softmax_masked_entries_are_exactly_zero():
    assert softmax([1.0, float("-inf"), 3.0])[1] == 0.0


def test_softmax_errors():
    with pytest.raises(ValueError, match=r"softmax: every score is -inf"):
        softmax([float("-inf")] * 3)
    with pytest.raises(ValueError, match=r"softmax_rows: row 1: every score is -inf"):
        softmax_rows([[0.0, 1.0], [float("-inf"), float("-inf")]])
    with pytest.raises(ValueError, match=r"softmax: v\[0\] is nan"):
        softmax([float("nan"), 1.0])
    with pytest.raises(ShapeError, match=r"softmax: v is empty"):
        softmax([])


def test_entropy():
    assert entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert entropy([1.0, 0.0, 0.0]) == 0.0


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


def test_mask_builders():
    assert causal_mask(2) == [[True, False], [True, True]]
    assert padding_mask([1, 3, 0, 0], 0)[2] == [True, True, False, False]
    assert padding_mask([1, 0], 0, num_queries=3) == [[True, False]] * 3
    assert length_mask(2, 4) == padding_mask([1, 3, 0, 0], 0)
    assert combine_masks(causal_mask(3), length_mask(2, 3)) == [
        [True, False, False], [True, True, False], [True, True, False]]


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


def test_mask_errors():
    ex = running_example()
    with pytest.raises(ShapeError, match=r"multi_head_attention: mask is 4x5; it must be \(queries, keys\) = 5x5"):
        multi_head_attention(ex.x, ex.weights, mask=[[True] * 5] * 4)
    bad = causal_mask(5)
    bad[2] = [False] * 5
    with pytest.raises(ValueError, match=r"multi_head_attention: mask row 2 is all False"):
        multi_head_attention(ex.x, ex.weights, mask=bad)
    with pytest.raises(TypeError, match=r"attention_trace: mask\[0\]\[0\] is 1; mask entries must be True"):
        attention_trace(ex.x, ex.weights, mask=[[1] * 5] * 5)
    with pytest.raises(ValueError, match=r"padding_mask: every token id is the pad id 0"):
        padding_mask([0, 0], 0)
    with pytest.raises(ShapeError, match=r"combine_masks: masks\[0\] is 2x2 but masks\[1\] is 3x3"):
        combine_masks(causal_mask(2), causal_mask(3))
    with pytest.raises(ValueError, match=r"causal_mask: seq_len must be a positive int"):
        causal_mask(0)


# === Bad input at the public entry points ===


def test_input_errors_name_the_function_the_shapes_and_the_rule():
    ex = running_example()
    w, x = ex.weights, ex.x
    with pytest.raises(ShapeError, match=r"multi_head_attention: x is 5x8 but the weights expect d_model = 16"):
        multi_head_attention([row[:8] for row in x], w)
    with pytest.raises(ShapeError, match=r"attention_trace: x is ragged: row 0 has 16 entries but row 1 has 15"):
        attention_trace([x[0], x[1][:15]], w)
    with pytest.raises(ShapeError, match=r"multi_head_attention: x is empty"):
        multi_head_attention([], w)
    with pytest.raises(ValueError, match=r"multi_head_attention: x\[1\]\[3\] is nan; entries must be finite"):
        multi_head_attention([x[0], x[1][:3] + [float("nan")] + x[1][4:]], w)
    with pytest.raises(ValueError, match=r"x\[0\]\[0\] is inf"):
        multi_head_attention([[float("inf")] + x[0][1:]], w)
    with pytest.raises(TypeError, match=r"multi_head_attention: x\[0\]\[0\] is '1'"):
        multi_head_attention([["1"] + x[0][1:]], w)
    with pytest.raises(ShapeError, match=r"attention_trace: context is 5x8 but the weights expect d_model = 16"):
        attention_trace(x, w, context=[row[:8] for row in x])
    with pytest.raises(TypeError, match=r"multi_head_attention: weights must be an MHAWeights"):
        multi_head_attention(x, {"W_Q": w.W_Q})
    with pytest.raises(ValueError, match=r"multi_head_attention: scale must be a positive finite number"):
        multi_head_attention(x, w, scale=0)


def test_weight_shape_errors():
    w = running_example().weights
    x = running_example().x
    with pytest.raises(ShapeError, match=r"weights.W_Q\[0\] is 16x8 but weights.W_Q\[1\] is 16x4; every head must have the same shape"):
        multi_head_attention(x, w._replace(W_Q=[w.W_Q[0], [row[:4] for row in w.W_Q[1]]]))
    with pytest.raises(ShapeError, match=r"W_O is 15x16; it must be \(num_heads \* d_v\) x d_model = 16x16"):
        multi_head_attention(x, w._replace(W_O=w.W_O[:15]))
    with pytest.raises(ShapeError, match=r"W_Q heads are 16x8 but W_K heads are 16x4"):
        multi_head_attention(x, w._replace(W_K=[[row[:4] for row in M] for M in w.W_K]))
    w3 = init_mha_weights(12, 3, seed=0)
    with pytest.raises(ShapeError, match=r"3 query heads and 2 key/value heads; num_kv_heads must divide num_heads"):
        multi_head_attention([[0.0] * 12], w3._replace(W_K=w3.W_K[:2], W_V=w3.W_V[:2]))
    with pytest.raises(ShapeError, match=r"weights.b_O has 3 entries; it must have 16"):
        multi_head_attention(x, w._replace(b_O=[0.0] * 3))
    with pytest.raises(ShapeError, match=r"weights.b_Q has 1 vectors; it needs one per head \(2\)"):
        multi_head_attention(x, w._replace(b_Q=[[0.0] * 8]))


def test_nothing_is_mutated():
    ex = running_example(bias=True)
    x, w = copy.deepcopy(ex.x), copy.deepcopy(ex.weights)
    mask = causal_mask(5)
    mask_before = copy.deepcopy(mask)
    attention_trace(ex.x, ex.weights, mask=mask)
    multi_head_attention(ex.x, ex.weights, context=ex.x, mask=mask)
    assert ex.x == x and ex.weights == w and mask == mask_before


# === One head: attention(Q, K, V), the formula ===

from mha_lists import attention  # noqa: E402
from mha_lists.core.attention import multiply_adds  # noqa: E402


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


def test_kv_head_for_groups_query_heads_in_order():
    assert [kv_head_for(h, 6, 3) for h in range(6)] == [0, 0, 1, 1, 2, 2]
    assert [kv_head_for(h, 4, 1) for h in range(4)] == [0, 0, 0, 0]
    assert [kv_head_for(h, 4, 4) for h in range(4)] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="kv_head_for: h is 6; a query head is numbered 0 to 5"):
        kv_head_for(6, 6, 3)


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
