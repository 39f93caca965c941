"""Counting the work (mha_lists/teaching/cost.py): the counter against the formula, and bad input."""

import copy

import pytest
from bad_inputs import assert_template

from mha_lists import ShapeError, attention_trace, concat_heads, matmul, running_example
from mha_lists.teaching.cost import MultiplyAddCounter, multiply_adds
from bad_inputs import assert_no_mutation, refused

# Each message of cost.py, pinned once; the counter speaks as matmul, which it stands in for.
MESSAGES = {
    "step": "matmul: step must be a str (the name to count under), got {value}",
    "shapes": "matmul: A is {n}x{m} and B is {m_B}x{p}; A's columns ({m}) must equal B's rows ({m_B})",
    "too large": "matmul: the products of A and B are too large: a product or sum overflowed float64 "
                 "(largest about 1.8e308); scale the inputs down",
}

NAN, INF = float("nan"), float("inf")


# === Counting ===


def test_the_counter_multiplies_as_matmul_and_counts_n_m_p():
    A, B = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1.0], [0.5], [0.25]]
    c = MultiplyAddCounter()
    assert c.matmul("first", A, B) == matmul(A, B)
    c.matmul("first", A, B)
    c.matmul("second", B, [[2.0, 3.0]])
    assert c.counts == {"first": 2 * (2 * 3 * 1), "second": 3 * 1 * 2}
    assert c.total == 18


def test_fused_qkv_costs_the_same_as_separate():
    ex = running_example()
    w = ex.weights
    c = MultiplyAddCounter()
    c.matmul("QKV", ex.x, concat_heads(w.W_Q + w.W_K + w.W_V))
    t = attention_trace(ex.x, w)
    assert c.total == t.multiply_adds["Q"] + t.multiply_adds["K"] + t.multiply_adds["V"] == 3 * 5 * 16 * 16


def test_an_overflowing_product_is_refused_and_its_work_counted():
    counter = MultiplyAddCounter()
    with pytest.raises(ValueError, match=r"^matmul: the products of A and B are too large"):
        counter.matmul("big", [[1e200, 1.0]], [[1e200], [1.0]])
    assert counter.counts == {"big": 2}  # 1 row x 2 x 1 column: done, then refused


def test_a_refused_call_counts_nothing():
    counter = MultiplyAddCounter()
    with pytest.raises(ShapeError):
        counter.matmul("demo", [[1.0, 2.0]], [[1.0]])
    assert counter.counts == {} and counter.total == 0


def test_a_product_past_the_work_limit_is_refused_before_it_is_made():
    A = [[1.0] * 600] * 600  # 600^3 = 216 million multiply-adds: matmul's own limit is 200 million
    with pytest.raises(ValueError, match=r"^matmul: these sizes take 216,000,000 multiply-adds; one call here does at most"):
        MultiplyAddCounter().matmul("big", A, A)
    counter = MultiplyAddCounter()
    with pytest.raises(ValueError):
        counter.matmul("big", A, A)
    assert counter.counts == {}  # refused before the product: no work done, none counted


# === The messages, each once, word for word ===


MESSAGE_CASES = [
    ("step", lambda: MultiplyAddCounter().matmul(5, [[1.0]], [[1.0]]), TypeError, dict(value=5)),
    ("step", lambda: MultiplyAddCounter().matmul(["s"], [[1.0]], [[1.0]]), TypeError, dict(value="['s']")),
    ("shapes", lambda: MultiplyAddCounter().matmul("demo", [[1.0, 2.0]], [[1.0], [2.0], [3.0]]), ShapeError,
     dict(n=1, m=2, m_B=3, p=1)),
    ("too large", lambda: MultiplyAddCounter().matmul("demo", [[1e200]], [[1e200]]), ValueError, {}),
    ("too large", lambda: MultiplyAddCounter().matmul("demo", [[10**200]], [[10**200]]), ValueError,
     {}),  # an int product
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


# === Bad input: a named error, one short line, the arguments unchanged ===

BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[True, 1.0]], ({1: 2},), [[[1.0]]], [["x" * 10_000]], [[10**400]]]
BAD_CALLS = [("step", M, [[1.0]]) for M in BAD_MATRICES] + [("step", [[1.0]], M) for M in BAD_MATRICES] \
    + [(step, [[1.0]], [[1.0]]) for step in (None, 5, ["a"] * 10_000, b"step")] + [("step", [[1e200]], [[1e200]])]


@pytest.mark.parametrize("args", BAD_CALLS, ids=range(len(BAD_CALLS)))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(args):
    before = copy.deepcopy(args)
    with pytest.raises((ShapeError, ValueError, TypeError)) as info:
        MultiplyAddCounter().matmul(*args)
    assert str(info.value).startswith("matmul: ") and len(str(info.value)) < 300, str(info.value)
    assert repr(args) == repr(before)


# === multiply_adds: the formula, for any sizes ===


def test_multiply_adds_by_hand():
    assert multiply_adds(5, 16, 2) == {"Q": 1280, "K": 1280, "V": 1280, "scores": 400, "weighted_sum": 400,
                                       "W_O": 1280}
    assert multiply_adds(4, 12, 3) == {"Q": 4 * 12 * 12, "K": 4 * 12 * 12, "V": 4 * 12 * 12,
                                       "scores": 3 * 4 * 4 * 4, "weighted_sum": 3 * 4 * 4 * 4, "W_O": 4 * 12 * 12}
    assert multiply_adds(4, 10, 3, d_k=2, d_v=5)["W_O"] == 4 * 3 * 5 * 10


def test_multiply_adds_names_its_arguments():
    for kwargs in ({}, {"d_k": 2}, {"d_v": 2}):
        with pytest.raises(ShapeError, match=r"^multiply_adds: d_model 10 is not divisible by num_heads 3; pass d_k "
                                             r"and d_v$"):
            multiply_adds(4, 10, 3, **kwargs)
    for args in ((0, 16, 2), (5, "16", 2), (5, 16, 2.0), (None, 16, 2)):
        refused("multiply_adds", lambda: multiply_adds(*args))
    for name in ("d_k", "d_v", "num_kv_heads", "context_len"):
        with pytest.raises(ValueError, match=rf"^multiply_adds: {name} must be a positive int, got 0$"):
            multiply_adds(3, 4, 2, **{name: 0})


@pytest.mark.parametrize("kwargs", [dict(), dict(d_k=3), dict(d_v=5), dict(num_kv_heads=1, context_len=7)])
def test_multiply_adds_are_ints(kwargs):
    counts = multiply_adds(5, 16, 2, **kwargs)  # d_k and d_v default to d_model // num_heads = 8
    assert all(type(n) is int for n in counts.values()), counts
    assert_no_mutation(multiply_adds, 5, 16, 2, **kwargs)
