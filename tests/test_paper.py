"""Attention on paper (mha_lists/teaching/paper.py): the example worked by hand, the pencil softmax, bad input.

The worksheets built on this example are tested in tests/test_worksheet.py.
"""

import copy
import itertools
import math
import time

import pytest
from bad_inputs import assert_template

from mha_lists import ShapeError, attention_trace, softmax
from mha_lists.teaching.paper import (exp_table, integer_matrix, paper_example, raw_scores, row_where_heads_differ,
                                      score_differences, table_softmax)

OVERFLOW = "are too large: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Each message of paper.py, pinned once; the tests below match only its start (function and argument).
MESSAGES = {
    "raw_scores d_k": "raw_scores: Q is {T}x{d_k} and K is {T_k}x{d_k_K}; Q and K must have the same number of "
                      "columns (d_k) to be multiplied",
    "raw_scores overflow": "raw_scores: the raw scores " + OVERFLOW,
    "integer_matrix whole": "integer_matrix: M[{i}][{j}] is {value}, not a whole number",
    "score_differences list": "score_differences: score_matrices must be a non-empty list of matrices, got {value}",
    "score_differences whole": "score_differences: score_matrices[{h}] holds {value}; raw scores must be whole numbers",
    "score_differences overflow": "score_differences: the differences s - max(row) " + OVERFLOW,
    "digits": "{func}: digits is {value}; give 0 to 17 digits after the point",
    "exp_table exponents": "exp_table: the exponents x = d * scale " + OVERFLOW,
    "exp_table powers": "exp_table: the powers e^x " + OVERFLOW,
    "row_where_heads_differ list": "row_where_heads_differ: attention must be a non-empty list of heads' weights, "
                                   "got {value}",
    "row_where_heads_differ shapes": "row_where_heads_differ: the heads' weights have shapes {shapes}; every head's "
                                     "must be the same (one row per query, one column per key)",
    "row_where_heads_differ prefer": "row_where_heads_differ: prefer is {value}; a row is 0 to {last}",
}

NAN, INF = float("nan"), float("inf")


# === The example on paper ===


def test_paper_example_is_integers_up_to_the_raw_scores():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    for M in (ex.x, *ex.weights.W_Q, *ex.weights.W_K, *ex.weights.W_V, ex.weights.W_O):
        assert all(isinstance(v, int) and -5 <= v <= 5 for row in M for v in row)
    for h in range(2):
        for M in (t.Q[h], t.K[h], t.V[h], raw_scores(t.Q[h], t.K[h])):
            integer_matrix(M)  # raises if any entry is not whole


def test_paper_example_worked_by_hand():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    # head 0: a query is the position a quarter turn back, a key the position itself, both doubled
    assert integer_matrix(t.Q[0]) == [[0, -2], [2, 0], [0, 2]]
    assert integer_matrix(t.K[0]) == [[2, 0], [0, 2], [-2, 0]]
    assert integer_matrix(raw_scores(t.Q[0], t.K[0])) == [[0, -4, 0], [4, 0, -4], [0, 4, 0]]
    # head 1: every query is (1, 1); only I (position 0, a noun) has a key
    assert integer_matrix(t.Q[1]) == [[1, 1]] * 3
    assert integer_matrix(raw_scores(t.Q[1], t.K[1])) == [[4, 0, 0]] * 3
    assert score_differences([raw_scores(t.Q[h], t.K[h]) for h in range(2)]) == [0, -4, -8]


def test_paper_heads_do_what_their_names_say():
    ex = paper_example()
    t = attention_trace(ex.x, ex.weights)
    strongest = [[row.index(max(row)) for row in A] for A in t.attention]
    assert strongest[0][1:] == [0, 1]  # previous token: like -> I, transformers -> like
    assert t.attention[0][0][0] == t.attention[0][0][2] > 0.48  # I, with nothing earlier, splits: I, transformers
    assert strongest[1] == [0, 0, 0]  # subject: everyone -> I
    assert ex.head_names == ["previous token", "subject"]


def test_paper_previous_token_head_reads_only_positions():
    # head 0's job holds whatever the tokens' types: every pattern of noun, verb or neither
    ex = paper_example()
    for types in itertools.product([[1, 0], [0, 1], [0, 0]], repeat=len(ex.x)):
        x = [row[:2] + list(kind) for row, kind in zip(ex.x, types)]
        A = attention_trace(x, ex.weights).attention[0]
        for q in range(1, len(x)):
            others = [a for j, a in enumerate(A[q]) if j != q - 1]
            assert A[q][q - 1] > 0.85 and all(A[q][q - 1] > a for a in others), (types, q, A[q])


def test_paper_example_returns_fresh_lists():
    a = paper_example()
    a.x[0][0] = 99
    a.weights.W_Q[0][0][0] = 99
    b = paper_example()
    assert b.x[0][0] == 1 and b.weights.W_Q[0][0][0] == 0


def test_raw_scores_are_q_times_k_transposed():
    assert raw_scores([[2, 0]], [[2, 0], [0, 2], [-2, 0]]) == [[4.0, 0.0, -4.0]]
    assert raw_scores([[1, 2], [3, 4]], [[1, 0], [0, 1], [1, 1]]) == [[1.0, 2.0, 3.0], [3.0, 4.0, 7.0]]


# === The table of e^x and the pencil softmax ===


def test_table_softmax_is_close_to_the_exact_softmax():
    scale = 1 / math.sqrt(2)
    for row in ([4, 0, -4], [0, 4, 0], [4, 0, 0], [0, 0, 0]):
        exact = softmax([s * scale for s in row])
        by_table = table_softmax(row, scale)
        assert max(abs(a - b) for a, b in zip(exact, by_table)) < 1e-3
        assert math.isclose(math.fsum(by_table), 1.0)


def test_exp_table_rounds_to_four_digits():
    rows = exp_table([0, -4, -8], 1 / math.sqrt(2))
    assert [r.exp for r in rows] == [1.0, 0.0591, 0.0035]
    assert [r.d for r in rows] == [0, -4, -8]
    assert exp_table([0, -4], 0.5)[1].exp == 0.1353


def test_exp_table_reaches_the_largest_exponent_that_fits():
    assert exp_table([709], 1.0)[0].exp == round(math.exp(709), 4)
    assert exp_table([700], 1.0)[0].exp == round(math.exp(700), 4)


def test_table_softmax_far_below_the_top_is_zero_not_an_error():
    # (s - top) * scale overflows to -inf for the first entry; e^-inf is 0, as the table would say
    assert table_softmax([-1.7e308, 1.7e308], 1.0) == [0.0, 1.0]
    # an int difference of -2 * 10**308 has no float (it used to raise a raw OverflowError)
    assert table_softmax([10**308, -10**308], 0.5) == [1.0, 0.0]


def test_score_differences_of_a_long_row_take_one_pass():
    # the maximum of each row once, not once per entry (a row of 30,000 took seconds)
    started = time.perf_counter()
    assert score_differences([[list(range(30_000))]])[:3] == [0, -1, -2]
    assert time.perf_counter() - started < 1


# === The messages, each once, word for word ===


MESSAGE_CASES = [
    ("raw_scores d_k", lambda: raw_scores([[1, 2]], [[1, 2, 3]]), ShapeError, dict(T=1, d_k=2, T_k=1, d_k_K=3)),
    ("raw_scores overflow", lambda: raw_scores([[1e200]], [[1e200]]), ValueError, {}),
    ("raw_scores overflow", lambda: raw_scores([[10**200]], [[10**200]]), ValueError, {}),  # an int product
    ("integer_matrix whole", lambda: integer_matrix([[1.0], [0.5]]), ValueError, dict(i=1, j=0, value=0.5)),
    ("integer_matrix whole", lambda: integer_matrix([[True]]), ValueError, dict(i=0, j=0, value=True)),
    ("integer_matrix whole", lambda: integer_matrix([[1, "7"]]), ValueError, dict(i=0, j=1, value="'7'")),
    ("score_differences list", lambda: score_differences([]), TypeError, dict(value="[]")),
    ("score_differences whole", lambda: score_differences([[[1, 2]], [[0.5, 0]]]), ValueError, dict(h=1, value=0.5)),
    ("score_differences overflow", lambda: score_differences([[[-1.7e308, 1.7e308]]]), ValueError, {}),
    ("digits", lambda: exp_table([0], 0.5, 18), ValueError, dict(func="exp_table", value=18)),
    ("digits", lambda: table_softmax([0], 0.5, -1), ValueError, dict(func="table_softmax", value=-1)),
    ("exp_table exponents", lambda: exp_table([-1e308], 10.0), ValueError, {}),  # e^-inf would be a silent 0
    ("exp_table exponents", lambda: exp_table([10**300], 1e10), ValueError, {}),
    ("exp_table powers", lambda: exp_table([800], 1.0), ValueError, {}),
    ("row_where_heads_differ list", lambda: row_where_heads_differ([], 0), ShapeError, dict(value="[]")),
    ("row_where_heads_differ shapes", lambda: row_where_heads_differ([[[1.0]], [[0.5, 0.5]]], 0), ShapeError,
     dict(shapes=[(1, 1), (1, 2)])),
    ("row_where_heads_differ prefer", lambda: row_where_heads_differ([[[1.0]]], 1), ValueError, dict(value=1, last=0)),
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


def test_step_8_studies_the_row_where_the_heads_read_different_tokens():
    """00a's Step 8: as given, the object's row (head 0 reads like, head 1 I); when its heads agree there (Try this 1:
    head 1 finds the verb), the first row whose heads pick different tokens, each with most of its weight."""
    ex = paper_example()
    A = attention_trace(ex.x, ex.weights).attention
    assert row_where_heads_differ(A, prefer=2) == 2
    ex.weights.W_K[1][:] = [[0, 0], [1, 1], [0, 0], [1, 1]]  # head 1 reads the verb: both heads read like at row 2
    A = attention_trace(ex.x, ex.weights).attention
    assert [row.index(max(row)) for row in (A[0][2], A[1][2])] == [1, 1]
    assert row_where_heads_differ(A, prefer=2) == 1  # like: head 0 reads I (0.94), head 1 itself (0.89)
    assert row_where_heads_differ([A[0], A[0]], prefer=2) == 2  # one job twice: nowhere to differ
    weights = [[[0.5, 0.5], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]]  # row 0: head 0 has no clear pick (a tie)
    assert row_where_heads_differ(weights, prefer=0) == 1
    frozen = copy.deepcopy(weights)
    row_where_heads_differ(weights, prefer=0)
    assert weights == frozen


def test_an_int_too_large_for_a_float_is_named_where_it_is():
    # 10**400 and -10**400 cancel in a quick sum of the matrix; the entry is still named
    with pytest.raises(ValueError, match=r"^score_differences: score_matrices\[0\]\[0\]\[0\] is an int of 401 digits"):
        score_differences([[[10**400, -10**400]]])


# === Bad input: a named error, one short line, the arguments unchanged ===

BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[True, 1.0]], ({1: 2},), [[[1.0]]], [["x" * 10_000]], [[10**400]]]
BAD_POSITIVE = [None, "1", NAN, INF, -INF, 0, -1.0, True, [1.0], 10**400, "s" * 10_000]
BAD_DIGITS = [None, "4", 2.5, -1, 18, 99, True, 10**400]

BAD_CALLS = []  # (name the message must start with, function, arguments)
for M in BAD_MATRICES:
    BAD_CALLS += [("raw_scores", raw_scores, (M, [[1.0, 2.0]])), ("raw_scores", raw_scores, ([[1.0, 2.0]], M))]
for args in [([[1, 2]], [[1, 2, 3]]), ([[1e200, 1e200]], [[1e200, 1e200]]), ([[1e308, 1e308]], [[1.0, 1.0]])]:
    BAD_CALLS.append(("raw_scores", raw_scores, args))
for M in [None, 5, "ab", [], [[]], [[1], [1, 2]], [[0.5]], [[NAN]], [[INF]], [["a"]], [[None]], [[True]], [1, 2],
          [["x" * 10_000]]]:
    BAD_CALLS.append(("integer_matrix", integer_matrix, (M,)))
for S in [None, 5, "ab", [], [None], [[]], [[[]]], [[[1, "a"]]], [[[NAN, 0]]], [[[INF, 0]]], [[[0.5, 0]]],
          [[[1, 2], [3]]], [[[1.7e308, -1.7e308]]], [[1, 2]], [[[10**400, -10**400]]], "s" * 10_000,
          [[["x" * 10_000]]]]:
    BAD_CALLS.append(("score_differences", score_differences, (S,)))
for D in [None, 5, "ab", [], ["a"], [NAN], [INF], [-INF], [[0]], [None], [10**400, -10**400], ["x" * 10_000]]:
    BAD_CALLS.append(("exp_table", exp_table, (D, 0.5)))
for s in BAD_POSITIVE:
    BAD_CALLS += [("exp_table", exp_table, ([0, -1], s)), ("table_softmax", table_softmax, ([1, 0], s))]
for d in BAD_DIGITS:
    BAD_CALLS += [("exp_table", exp_table, ([0, -1], 0.5, d)), ("table_softmax", table_softmax, ([1, 0], 0.5, d))]
BAD_CALLS += [("exp_table", exp_table, args) for args in [([1000], 1.0), ([1e308], 10.0), ([800], 1.0)]]
for row in [None, 5, "ab", [], [NAN, 0], [0, NAN], [INF, 0], [-INF, 0], ["a", 0], [[1.0]], [None], [10**400, -10**400]]:
    BAD_CALLS.append(("table_softmax", table_softmax, (row, 1.0)))


@pytest.mark.parametrize("name", sorted({name for name, _, _ in BAD_CALLS}))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(name):
    for func, args in [(func, args) for n, func, args in BAD_CALLS if n == name]:
        before = copy.deepcopy(args)
        with pytest.raises((ShapeError, ValueError, TypeError)) as info:
            func(*args)
        message = str(info.value)
        assert message.startswith(f"{name}: "), message
        assert "\n" not in message and len(message) < 300, message
        assert args == before or repr(args) == repr(before), f"{name} changed its arguments"  # nan != nan
