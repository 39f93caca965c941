"""core/gradients.py: the backward pass, checked three ways: by hand, by invariants, and by central finite
differences; then its messages, bad inputs of every kind, and no mutation."""

import copy
import math

import pytest

from mha_lists import MHAWeights, ShapeError, causal_mask, init_mha_weights, multi_head_attention, padding_mask
from mha_lists.core.attention import attention_trace, trace_layer
from mha_lists.core.gradients import (
    attention_backward,
    attention_backward_trace,
    backward,
    column_sums,
    head_backward,
    multi_head_attention_backward,
    summed,
)
from mha_lists.teaching.softmax_row import softmax_backward, softmax_jacobian
from mha_lists.teaching.weights import derive_rng
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
OVERFLOW = "a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"
W4 = init_mha_weights(4, 2, seed=0)
X3 = [[0.1, 0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [0.0, 1.0, -1.0, 0.5]]
G3 = [[1.0, -1.0, 0.5, 0.0]] * 3

# Every message this module writes itself, once (the shared ones are in test_checks.py and test_attention.py).
MESSAGES = {
    "gradients overflow": "{func}: the gradients are too large: " + OVERFLOW,
    "column sums overflow": "column_sums: the column sums are too large: " + OVERFLOW,
}
for _where in ("dK", "trace", "layer"):
    MESSAGES[f"gradients overflow ({_where})"] = MESSAGES["gradients overflow"]
MESSAGES.update({key: SHARED["sizes differ"] for key in ("grad_out shape", "grad_output shape")})

# scores x_i x_j (W_Q's 1e-9 times scale 1e9), but the keys' second column 1e300 times the scale is past float64
W_BIG_DQ = MHAWeights([[[1e-9, 0.0]]], [[[1.0, 1e300]]], [[[1.0]]], [[1.0]])

BAD_CALLS = {
    "grad_out shape": (ShapeError, lambda: attention_backward([[1.0]], [[1.0]], [[1.0, 2.0, 3.0]], [[1.0, 2.0]]),
                       dict(func="attention_backward", a="V", a_shape="1x3", b="grad_out", b_shape="1x2",
                            a_place="columns", b_place="columns", size="d_v", a_dims="T_k, d_v", b_dims="T, d_v", a_n=3, b_n=2)),
    "grad_output shape": (ShapeError, lambda: attention_backward_trace(X3, W4, G3[:2]),
                          dict(func="attention_backward_trace", a="x", a_shape="3x4", b="grad_output", b_shape="2x4",
                               a_place="rows", b_place="rows", size="T", a_dims="T, d_model", b_dims="T, d_model", a_n=3, b_n=2)),
    "gradients overflow": (ValueError, lambda: attention_backward([[1.0]], [[1.0]], [[1e308]], [[1e308]]),
                           dict(func="attention_backward")),
    "column sums overflow": (ValueError, lambda: column_sums([[1e308], [1e308]]), {}),
    # dQ = dS K * scale is small; dK = dS^T Q * scale is not: Q's 1e300 times the scale 1e9
    "gradients overflow (dK)": (ValueError, lambda: attention_backward([[1e-9, 1e300]], [[1.0, 0.0], [0.0, 0.0]],
                                                                       [[1.0], [0.0]], [[1.0]], scale=1e9),
                                dict(func="attention_backward")),
    "gradients overflow (trace)": (ValueError, lambda: attention_backward_trace([[1.0], [2.0]], W_BIG_DQ,
                                                                                [[1.0], [1.0]], scale=1e9),
                                   dict(func="attention_backward_trace")),
    "gradients overflow (layer)": (ValueError, lambda: multi_head_attention_backward([[1.0], [2.0]], W_BIG_DQ,
                                                                                     [[1.0], [1.0]], scale=1e9),
                                   dict(func="multi_head_attention_backward")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === Hand-worked cases ===


def test_column_sums_and_summed_by_hand():
    assert column_sums([[1, 2, 3], [4, 5, 6]]) == [5.0, 7.0, 9.0]
    assert summed([[[1, 2]], [[3, 4]]]) == [[4.0, 6.0]]
    # fsum: 1e16 + 1 - 1e16 is exactly 1 entry by entry
    assert summed([[[1e16]], [[1.0]], [[-1e16]]]) == [[1.0]]


def test_one_key_passes_grad_out_to_v_and_nothing_to_q_and_k():
    # With a single key, every weight is 1 whatever the score: dV = grad_out, dQ = dK = 0.
    dQ, dK, dV = attention_backward([[3.0, 1.0]], [[2.0, -1.0]], [[5.0, 7.0, 9.0]], [[1.0, 2.0, 3.0]])
    assert dV == [[1.0, 2.0, 3.0]]
    assert dQ == [[0.0, 0.0]] and dK == [[0.0, 0.0]]


def test_two_tied_keys_by_hand():
    # Scores 0 and 0: A = (1/2, 1/2), out = 2. dA = grad_out V^T = (1, 3);
    # dS = p (dA - p . dA) = (1/2 (1 - 2), 1/2 (3 - 2)) = (-1/2, 1/2);
    # dK = dS^T Q = (-1/2, 1/2) (q = 1), dQ = dS K = 0 (both keys are 0), dV = A^T grad_out = (1/2, 1/2).
    dQ, dK, dV = attention_backward([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], [[1.0]], scale=1.0)
    assert (dQ, dK, dV) == ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])


def test_multi_head_backward_by_hand():
    # d_model 1, one head, W_Q = W_K = 0: every score is 0, so each query averages the
    # values: output = (x0 + x1) / 2 * W_V * W_O on both rows. With x = (1, 2), W_V = 3,
    # W_O = 5, grad_output = (1, 1): loss = 2 * 1.5 * 15 = 45.
    w = MHAWeights([[[0.0]]], [[[0.0]]], [[[3.0]]], [[5.0]], b_Q=[[0.0]], b_K=[[0.0]], b_V=[[0.0]], b_O=[0.0])
    x, G = [[1.0], [2.0]], [[1.0], [1.0]]
    assert multi_head_attention(x, w) == [[22.5], [22.5]]
    g = multi_head_attention_backward(x, w, G)
    assert g.W_O == [[9.0]]  # concat = (4.5, 4.5): concat^T G = 9
    assert g.W_V == [[[15.0]]]  # dV = A^T d_head = (5, 5); x^T dV = 5 + 10
    assert g.x == [[15.0], [15.0]]  # loss = (x0 + x1) * 15: each x_i feeds both rows with weight 1/2
    assert g.b_V == [[10.0]] and g.b_O == [2.0]
    assert g.W_Q == [[[0.0]]] and g.W_K == [[[0.0]]]  # scores stay 0 to first order
    assert g.b_Q == [[0.0]] and g.b_K == [[0.0]]
    assert g.context is None


# === Invariants ===


def _config(seed, *, d_model=6, T=4, num_heads=2, num_kv_heads=None, d_k=None, d_v=None, bias=False,
            cross=None, mask=None):
    """Weights with random (non-zero) biases, x, optional context, grad_output and a mask."""
    rng = derive_rng(seed, "test-gradients")
    w = init_mha_weights(d_model, num_heads, seed=seed, bias=bias, d_k=d_k, d_v=d_v, num_kv_heads=num_kv_heads,
                         init="xavier_normal")
    if bias:
        w = w._replace(**{name: [[rng.gauss(0, 0.5) for _ in b] for b in getattr(w, name)]
                          for name in ("b_Q", "b_K", "b_V")}, b_O=[rng.gauss(0, 0.5) for _ in w.b_O])
    rows = lambda n: [[rng.gauss(0, 1) for _ in range(d_model)] for _ in range(n)]  # noqa: E731
    x = rows(T)
    context = None if cross is None else rows(cross)
    T_k = T if cross is None else cross
    G = [[rng.gauss(0, 1) for _ in range(d_model)] for _ in range(T)]
    if mask == "causal":
        mask = causal_mask(T)
    elif mask == "random":
        mask = [[rng.random() < 0.6 for _ in range(T_k)] for _ in range(T)]
        for i, row in enumerate(mask):
            row[i % T_k] = True
    elif mask == "padding":
        mask = padding_mask([1] * (T_k - 1) + [0], 0, num_queries=T)
    return x, w, context, G, mask


def test_a_key_bias_gets_no_gradient():
    # b_K shifts every score of a query by the same q . b_K: softmax ignores that, so db_K = 0.
    x, w, context, G, mask = _config(3, bias=True, mask="causal")
    g = multi_head_attention_backward(x, w, G, mask=mask)
    assert all(abs(v) < 1e-12 for b in g.b_K for v in b)
    assert any(abs(v) > 1e-3 for b in g.b_Q for v in b)


def test_bias_of_the_output_is_the_column_sums_of_grad_output():
    x, w, context, G, mask = _config(4, bias=True)
    assert multi_head_attention_backward(x, w, G).b_O == column_sums(G)


def test_masked_keys_get_exactly_zero_gradient():
    # Key 3 is padding: no query reads it, so its K and V rows (and its share of dX through them) are 0.
    x, w, context, G, mask = _config(5, mask="padding")
    trace = attention_backward_trace(x, w, G, mask=mask)
    for dK, dV in zip(trace.dK, trace.dV):
        assert all(v == 0.0 for v in dK[3]) and all(v == 0.0 for v in dV[3])
    assert all(row[3] == 0.0 for dS in trace.dS for row in dS)


def test_gradients_are_linear_in_grad_output():
    x, w, context, G, mask = _config(6, bias=True, num_kv_heads=1, cross=3)
    g1 = multi_head_attention_backward(x, w, G, context=context)
    g2 = multi_head_attention_backward(x, w, [[2 * v for v in row] for row in G], context=context)
    for field in ("x", "context", "W_O"):
        assert getattr(g2, field) == [[2 * v for v in row] for row in getattr(g1, field)]
    assert g2.W_K == [[[2 * v for v in row] for row in M] for M in g1.W_K]


def test_cross_attention_on_x_itself_splits_the_self_attention_gradient():
    # context = x: the gradient to x splits into the query part (x) and the key/value part (context).
    x, w, _, G, mask = _config(7, bias=True, mask="causal")
    self_g = multi_head_attention_backward(x, w, G, mask=mask)
    cross_g = multi_head_attention_backward(x, w, G, context=x, mask=mask)
    both = summed([cross_g.x, cross_g.context])
    assert all(a == pytest.approx(b, abs=1e-13) for ra, rb in zip(both, self_g.x) for a, b in zip(ra, rb))
    assert cross_g.W_K == self_g.W_K and cross_g.W_O == self_g.W_O


def test_a_shared_kv_head_gathers_the_gradients_of_its_query_heads():
    # GQA with 2 query heads reading 1 key/value head, both with the same W_Q: the shared
    # head's gradients are the sum of what each query head would send it alone.
    x, w1, _, G, _ = _config(8, d_model=4, num_heads=1, d_k=3, d_v=2)
    half_O = [[v / 2 for v in row] for row in w1.W_O]  # two identical heads, each with half of W_O
    w2 = MHAWeights(w1.W_Q * 2, w1.W_K, w1.W_V, half_O + half_O)
    flat = lambda M: [v for row in M for v in row]  # noqa: E731
    assert flat(multi_head_attention(x, w2)) == pytest.approx(flat(multi_head_attention(x, w1)), abs=1e-15)
    g1 = multi_head_attention_backward(x, w1, G)
    g2 = multi_head_attention_backward(x, w2, G)
    assert flat(g2.W_K[0]) == pytest.approx(flat(g1.W_K[0]), abs=1e-13)
    assert flat(g2.W_V[0]) == pytest.approx(flat(g1.W_V[0]), abs=1e-13)
    assert flat(g2.W_Q[0]) == pytest.approx([v / 2 for v in flat(g1.W_Q[0])], abs=1e-13)
    assert flat(g2.x) == pytest.approx(flat(g1.x), abs=1e-13)


def test_the_trace_and_the_one_head_function_agree():
    x, w, context, G, mask = _config(9, d_model=6, num_heads=3, d_k=2, d_v=4, cross=5, mask="random")
    trace = attention_backward_trace(x, w, G, context=context, mask=mask)
    assert trace.gradients == multi_head_attention_backward(x, w, G, context=context, mask=mask)
    for h in range(3):
        dQ, dK, dV = attention_backward(trace.forward.Q[h], trace.forward.K[h], trace.forward.V[h],
                                        trace.d_heads[h], mask=mask)
        assert (dQ, dK, dV) == (trace.dQ[h], trace.dK[h], trace.dV[h])
    assert [len(trace.dA[0]), len(trace.dA[0][0])] == [4, 5]
    assert [len(trace.d_concat[0]), len(trace.dV[0][0])] == [12, 4]


@pytest.mark.parametrize("kwargs", [dict(), dict(bias=True, mask="causal"), dict(num_kv_heads=1, cross=3),
                                    dict(num_heads=3, d_k=2, d_v=4, bias=True, cross=5, mask="random"),
                                    dict(num_heads=6, num_kv_heads=2, d_k=1, d_v=1, mask="padding")])
def test_the_gradients_alone_are_the_traces_bit_for_bit(kwargs):
    # multi_head_attention_backward stops its forward pass at concat (the gradients do not need the
    # output); attention_backward_trace runs the whole of it. The gradients must not differ in a bit.
    x, w, context, G, mask = _config(11, **kwargs)
    trace = attention_backward_trace(x, w, G, context=context, mask=mask)
    assert multi_head_attention_backward(x, w, G, context=context, mask=mask) == trace.gradients
    assert trace.forward.output == multi_head_attention(x, w, context=context, mask=mask)


def test_arguments_are_not_changed():
    x, w, context, G, mask = _config(10, bias=True, num_kv_heads=1, cross=3)
    before = copy.deepcopy((x, w, context, G))
    multi_head_attention_backward(x, w, G, context=context)
    attention_backward(x, context, context, G)
    assert (x, w, context, G) == before


def test_no_biases_means_none():
    x, w, context, G, mask = _config(11)
    g = multi_head_attention_backward(x, w, G)
    assert (g.b_Q, g.b_K, g.b_V, g.b_O, g.context, g.values) == (None, None, None, None, None, None)


def test_values_with_an_input_of_their_own_split_the_gradient_of_x():
    # backward(..., values=v) (the values read v, the queries and keys x): with v = x, .x + .values is the
    # self-attention gradient of x, and there is no context.
    x, w, _, G, mask = _config(15, bias=True)
    c = 1 / math.sqrt(len(w.W_Q[0][0]))
    g = backward(w, trace_layer(x, w, None, None, c, values=x), x, None, G, c, values=x).gradients
    assert g.context is None
    both = summed([g.x, g.values])
    self_g = multi_head_attention_backward(x, w, G)
    assert all(a == pytest.approx(b, abs=1e-13) for ra, rb in zip(both, self_g.x) for a, b in zip(ra, rb))
    assert g.W_V == self_g.W_V


def test_attention_backward_uses_the_scale_it_is_given():
    # d_k 4, so the default scale is 1/2; with scale 1 the scores are (0, ln 3): weights (1/4, 3/4), dV = A^T G.
    Q, K, V = [[1.0, 0.0, 0.0, 0.0]], [[0.0] * 4, [math.log(3), 0.0, 0.0, 0.0]], [[1.0], [3.0]]
    dQ, dK, dV = attention_backward(Q, K, V, [[1.0]], scale=1.0)
    assert dV == [[pytest.approx(0.25)], [pytest.approx(0.75)]]
    # dS = p (dA - p . dA) with dA = V^T = (1, 3), p . dA = 5/2: (1/4 * -3/2, 3/4 * 1/2); dQ = dS K
    assert dQ == [[pytest.approx(0.375 * math.log(3)), 0.0, 0.0, 0.0]]


def test_the_backward_trace_uses_its_mask_and_scale():
    x, w, _, G, mask = _config(16, mask="causal")
    trace = attention_backward_trace(x, w, G, mask=mask, scale=0.25)
    assert trace.forward == attention_trace(x, w, mask=mask, scale=0.25)
    assert trace.gradients == multi_head_attention_backward(x, w, G, mask=mask, scale=0.25)


# === Errors, named at the function called ===


def test_grad_output_of_the_wrong_shape():
    x, w, context, G, mask = _config(12)
    with pytest.raises(ShapeError, match=r"^multi_head_attention_backward: weights.W_Q is 2x6x3 and grad_output is 4x5"):
        multi_head_attention_backward(x, w, [row[:5] for row in G])
    with pytest.raises(ShapeError, match=r"^attention_backward_trace: x is 4x6 and grad_output is 3x6"):
        attention_backward_trace(x, w, G[:3])
    with pytest.raises(ShapeError, match=r"^attention_backward: V is 1x3 and grad_out is 1x2"):
        attention_backward([[1.0]], [[1.0]], [[1.0, 2.0, 3.0]], [[1.0, 2.0]])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_grad_output_must_be_finite(bad):
    x, w, context, G, mask = _config(13)
    G = [list(row) for row in G]
    G[1][2] = bad
    with pytest.raises(ValueError, match=r"^multi_head_attention_backward: grad_output\[1\]\[2\] is "):
        multi_head_attention_backward(x, w, G)
    with pytest.raises(ValueError, match=r"^attention_backward: grad_out\[0\]\[0\] is "):
        attention_backward([[1.0]], [[1.0]], [[1.0]], [[bad]])


def test_other_bad_inputs_are_named():
    x, w, context, G, mask = _config(14)
    with pytest.raises(TypeError, match="^multi_head_attention_backward: weights must be an MHAWeights"):
        multi_head_attention_backward(x, "w", G)
    with pytest.raises(ShapeError, match=r"^multi_head_attention_backward: mask is 4x3"):
        multi_head_attention_backward(x, w, G, mask=[[True] * 3] * 4)
    for func in (multi_head_attention_backward, attention_backward_trace):
        with pytest.raises(ValueError, match=rf"^{func.__name__}: mask row 1 is all False"):
            func(x, w, G, mask=[[True] * 4, [False] * 4, [True] * 4, [True] * 4])
    with pytest.raises(ValueError, match=r"^attention_backward: mask row 0 is all False"):
        attention_backward([[1.0]], [[1.0], [2.0]], [[1.0], [2.0]], [[1.0]], mask=[[False, False]])
    with pytest.raises(ShapeError, match=r"^multi_head_attention_backward: context is 2x5 and weights.W_K is 2x6x3"):
        multi_head_attention_backward(x, w, G, context=[[0.0] * 5] * 2)
    with pytest.raises(ValueError, match=r"^multi_head_attention_backward: scale must be a positive"):
        multi_head_attention_backward(x, w, G, scale=0)
    with pytest.raises(ShapeError, match=r"^attention_backward: K is 2x1 and V is 3x1"):
        attention_backward([[1.0]], [[1.0], [2.0]], [[1.0], [2.0], [3.0]], [[1.0]])
    with pytest.raises(ShapeError, match=r"^softmax_backward: p has 2 entries and dp has 3"):
        softmax_backward([0.5, 0.5], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"^softmax_backward: p must be weights as softmax makes them"):
        softmax_backward([0.5, 0.6], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^softmax_jacobian: p must be weights as softmax makes them"):
        softmax_jacobian([-0.5, 1.5])


# === Central finite differences over random configurations ===

CONFIGS = {
    "plain, 2 heads": dict(),
    "causal mask, biases": dict(mask="causal", bias=True),
    "random mask, 3 heads, d_v != d_k": dict(num_heads=3, d_k=2, d_v=3, mask="random"),
    "padding mask, custom scale": dict(mask="padding", bias=True),
    "cross-attention, 3 queries over 5 keys": dict(T=3, cross=5, bias=True),
    "cross-attention, padding mask": dict(T=3, cross=5, mask="padding"),
    "GQA: 4 query heads, 2 key/value heads, causal": dict(d_model=8, num_heads=4, num_kv_heads=2, mask="causal"),
    "MQA: 3 query heads, 1 key/value head, biases": dict(num_heads=3, num_kv_heads=1, bias=True),
    "GQA cross-attention, d_v != d_k, random mask": dict(num_heads=4, num_kv_heads=2, d_k=2, d_v=3, cross=5,
                                                      mask="random", bias=True),
}


def _loss(x, w, context, G, mask, scale):
    out = multi_head_attention(x, w, context=context, mask=mask, scale=scale)
    return math.fsum(o * g for out_row, G_row in zip(out, G) for o, g in zip(out_row, G_row))


def _slots(x, w, context):
    """(label, container, index) for every number the loss depends on."""
    slots = []

    def add_matrix(label, M):
        for i, row in enumerate(M):
            for j in range(len(row)):
                slots.append((label, row, j, (i, j)))

    add_matrix("x", x)
    if context is not None:
        add_matrix("context", context)
    for name in ("W_Q", "W_K", "W_V"):
        for h, M in enumerate(getattr(w, name)):
            add_matrix(f"{name}[{h}]", M)
    add_matrix("W_O", w.W_O)
    for name in ("b_Q", "b_K", "b_V"):
        for h, b in enumerate(getattr(w, name) or []):
            add_matrix(f"{name}[{h}]", [b])
    if w.b_O is not None:
        add_matrix("b_O", [w.b_O])
    return slots


def _analytic(g, label, ij):
    i, j = ij
    if label in ("x", "context", "W_O"):
        return getattr(g, label)[i][j]
    if label == "b_O":
        return g.b_O[j]
    name, h = label[:3], int(label[4:-1])
    if name.startswith("b"):
        return getattr(g, name)[h][j]
    return getattr(g, name)[h][i][j]


@pytest.mark.parametrize("name", CONFIGS)
def test_central_finite_differences(name):
    options = dict(CONFIGS[name])
    seed = 100 + list(CONFIGS).index(name)
    x, w, context, G, mask = _config(seed, **options)
    scale = 0.7 if "custom scale" in name else None
    # Copies we may poke one entry at a time; the originals stay as they are.
    x, w, context = copy.deepcopy((x, w, context))
    g = multi_head_attention_backward(x, w, G, context=context, mask=mask, scale=scale)
    step = 1e-5
    worst = 0.0
    for label, row, j, ij in _slots(x, w, context):
        saved = row[j]
        row[j] = saved + step
        up = _loss(x, w, context, G, mask, scale)
        row[j] = saved - step
        down = _loss(x, w, context, G, mask, scale)
        row[j] = saved
        numeric = (up - down) / (2 * step)
        exact = _analytic(g, label, ij)
        worst = max(worst, abs(numeric - exact) / max(1.0, abs(exact)))
        assert numeric == pytest.approx(exact, rel=1e-6, abs=1e-7), (label, ij)
    assert worst < 1e-7


# === The unchecked pieces ===


def test_head_backward_is_a_step_of_the_head_loop():
    # One query, two equal keys: the same numbers as test_two_tied_keys_by_hand, through the kernel.
    grads = head_backward([[1.0]], [[0.0], [0.0]], [[1.0], [3.0]], [[0.5, 0.5]], [[1.0]], mask=None, scale=1.0)
    assert grads.dA == [[1.0, 3.0]] and grads.dS == [[-0.5, 0.5]]
    assert (grads.dQ, grads.dK, grads.dV) == ([[0.0]], [[-0.5], [0.5]], [[0.5], [0.5]])


def test_the_backward_trace_keeps_a_copy_of_grad_output():
    G = [[1.0, 2.0], [3.0, 4.0]]
    trace = attention_backward_trace([[1.0, 0.0], [0.0, 1.0]], init_mha_weights(2, 1, seed=0), G)
    assert trace.grad_output == G and trace.grad_output is not G


# === Overflow: named, never a silent inf or nan ===


def test_overflow_is_named_never_a_silent_inf():
    for func, call in [
        ("attention_backward", lambda: attention_backward([[1e200, 1.0]], [[1e200, 1.0], [-1e200, 1.0]],
                                                          [[1.0], [2.0]], [[1.0]])),
        ("attention_backward", lambda: attention_backward([[1.0]], [[1.0]], [[1e308]], [[1e308]])),
        ("multi_head_attention_backward", lambda: multi_head_attention_backward(X3, W4, [[1e308] * 4] * 3)),
        ("attention_backward_trace", lambda: attention_backward_trace(X3, W4, [[1e308] * 4] * 3)),
        ("multi_head_attention_backward", lambda: multi_head_attention_backward([[1e200] * 4] * 3, W4, G3)),
        ("softmax_backward", lambda: softmax_backward([0.9, 0.1], [1.7e308, -1.7e308])),
        ("column_sums", lambda: column_sums([[1e308], [1e308]])),
    ]:
        assert "too large" in str(refused(func, call, ValueError))
    assert finite_everywhere(multi_head_attention_backward(X3, W4, [[1e100] * 4] * 3))


def test_weights_softmax_could_not_make_are_refused():
    for p in ([0.5, 0.6], [-0.5, 1.5], [NAN], [INF, 0.0], [], None, ["a"], [10**400, 0.0]):
        refused("softmax_backward", lambda: softmax_backward(p, [1.0] * max(1, len(p or [1]))))
        refused("softmax_jacobian", lambda: softmax_jacobian(p))


def test_a_jacobian_past_a_masks_largest_side_is_refused():
    from mha_lists.core.softmax_and_masks import MAX_MASK_SIDE
    n = MAX_MASK_SIDE + 1
    with pytest.raises(ValueError, match=rf"^softmax_jacobian: p has {n:,} weights; its Jacobian is n x n, so at most"):
        softmax_jacobian([1.0 / n] * n)
    assert len(softmax_jacobian([1.0 / 64] * 64)) == 64


def test_values_past_float_range_in_p_are_refused_by_name():
    # math.fsum(p) overflows while checking that p adds up to 1: a named error, not a raw OverflowError.
    refused("softmax_backward", lambda: softmax_backward([1e308, 1e308], [1.0, 2.0]))
    refused("softmax_jacobian", lambda: softmax_jacobian([1e308, 1e308]))


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]], [[INF]],
                [[True, 1.0]], ({1: 2},), [[[1.0]]], [[10**400, 0.0, 0.0, 0.0]], [[0.0] * 10**5]]
BAD_WEIGHTS = [None, "w", X3, W4._replace(W_O=[[NAN] * 4] * 4), W4._replace(W_Q=[W4.W_Q[0]]), W4._replace(W_K=[]),
               W4._replace(b_O=[NAN, 0.0, 0.0, 0.0]), W4._replace(b_Q=[[0.0, 0.0]])]


@pytest.mark.parametrize("M", BAD_MATRICES, ids=range(len(BAD_MATRICES)))
def test_bad_matrices_are_refused_by_name(M):
    for func in (multi_head_attention_backward, attention_backward_trace):
        refused(func.__name__, lambda: func(M, W4, G3))
        refused(func.__name__, lambda: func(X3, W4, M))
        if M is not None:
            refused(func.__name__, lambda: func(X3, W4, G3, context=M))
    refused("attention_backward", lambda: attention_backward(M, [[1.0]], [[1.0]], [[1.0]]))
    refused("attention_backward", lambda: attention_backward([[1.0]], [[1.0]], [[1.0]], M))
    if M != [[0.0] * 10**5]:  # a wide matrix is fine for column_sums
        refused("column_sums", lambda: column_sums(M))


@pytest.mark.parametrize("w", BAD_WEIGHTS, ids=range(len(BAD_WEIGHTS)))
def test_bad_weights_are_refused_by_name(w):
    for func in (multi_head_attention_backward, attention_backward_trace):
        refused(func.__name__, lambda: func(X3, w, G3))


def test_the_backward_pass_has_the_forward_passs_limits():
    long = [[0.0] * 4] * 4097
    refused("multi_head_attention_backward", lambda: multi_head_attention_backward(long, W4, long), ValueError)
    refused("attention_backward", lambda: attention_backward([[1.0]] * 4097, [[1.0]], [[1.0]], [[1.0]] * 4097))
    big = [[1.0] * 100] * 4096
    assert "multiply-adds" in str(refused("attention_backward", lambda: attention_backward(big, big, big, big)))


# === Nothing is changed ===


@pytest.mark.parametrize("call, args, kwargs", [
    (softmax_backward, ([0.25, 0.75], [4.0, 0.0]), {}), (softmax_jacobian, ([0.25, 0.75],), {}),
    (column_sums, ([[1.0, 2.0], [3.0, 4.0]],), {}),
    (attention_backward, ([[1.0, 0.0]], [[0.0, 1.0], [1.0, 0.0]], [[1.0], [2.0]], [[1.0]]), dict(mask=[[True, False]])),
    (multi_head_attention_backward, (X3, W4, G3), dict(context=X3[:2], mask=[[True, False]] * 3, scale=0.5)),
    (attention_backward_trace, (X3, W4, G3), dict(mask=causal_mask(3))),
    (multi_head_attention_backward, (X3, W4, G3[:2]), {}), (softmax_backward, ([0.5, 0.6], [1.0, 2.0]), {}),
])
def test_every_public_function_leaves_its_arguments_alone(call, args, kwargs):
    assert_no_mutation(call, *args, **kwargs)


def test_grad_output_needs_one_row_per_token_in_every_entry_point():
    x, w, context, G, mask = _config(12)
    for func in (multi_head_attention_backward, attention_backward_trace):
        with pytest.raises(ShapeError, match=rf"^{func.__name__}: x is 4x6 and grad_output is 3x6; x's rows \(4\) and "
                                             r"grad_output's rows \(3\) must be equal"):
            func(x, w, G[:3])


def test_gradients_of_opposite_signs_past_float64_are_named_not_raw():
    """dA = d_head V^T can hold +inf and -inf at once; the softmax's backward step then sums inf - inf. Like the
    same-sign case, that is the calling function's "the gradients are too large", not fsum's bare ValueError."""
    w = MHAWeights([[[0.0]]], [[[0.0]]], [[[1.0]]], [[1.0]])
    for func, call in (
            ("attention_backward", lambda: attention_backward([[0.0]], [[0.0], [0.0]], [[1e200], [-1e200]], [[1e200]])),
            ("multi_head_attention_backward", lambda: multi_head_attention_backward([[1e200], [-1e200]], w,
                                                                                    [[1e200], [1e200]])),
            ("attention_backward_trace", lambda: attention_backward_trace([[1e200], [-1e200]], w, [[1e200], [1e200]]))):
        error = refused(func, call, ValueError)
        assert "the gradients are too large" in str(error)
