"""core/checks.py: the helpers a public function calls at its top, their messages, and the promise
that a check does the same wherever it is called from.

"""

import copy
import math
import random
import threading

import pytest
from bad_inputs import RAW, assert_no_mutation, assert_template, finite_everywhere, refused

from mha_lists.core import checks
from mha_lists.core.checks import (ShapeError, all_fine, all_finite, check_int, check_matrix, check_number,
                                   check_positive_int, check_rows, check_sizes, check_type, check_vector, describe,
                                   is_number, quote_int, shorten, too_large)

NAN, INF = math.nan, math.inf
ROW_HINT = "a matrix is a list of rows, so write a vector v as [v] (one row)"
OVERFLOW = "a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Every message this module writes, once. Other files match only "func: argument".
MESSAGES = {
    "not rows": "{func}: {name} must be a non-empty list of rows, got {value}",
    "no rows": "{func}: {name} must be a non-empty list of rows, got []",
    "not a row": "{func}: {name}[{i}] must be a row (a list of {what}), got {type}; " + ROW_HINT,
    "ragged": "{func}: {name} is ragged: row 0 has {first} entries but row {i} has {n}; every row must have the same length",
    "no columns": "{func}: {name} has empty rows (0 columns); a matrix needs at least one column",
    "entry type": "{func}: {name} is {value} ({type}); entries must be int or float",
    "entry too large": "{func}: {name} is {int}, too large for a float (about 1.8e308 at most)",
    "entry not finite": "{func}: {name} is {value}; entries must be finite numbers",
    "not a vector": "{func}: {name} must be a non-empty list of numbers, got {value}",
    "empty vector": "{func}: {name} must be a non-empty list of numbers, got ()",
    "no matrices": "{func}: {name} must be a non-empty list of matrices, one per head, got {value}",
    "sizes differ": "{func}: {a} is {a_shape} and {b} is {b_shape}; {a}'s {a_place} ({a_n}) and {b}'s {b_place} ({b_n}) "
                    "must be equal: both are {size} in {a} ({a_dims}) and {b} ({b_dims})",
    "not an int": "{func}: {name} must be an int, got {value} ({type})",
    "int too long": "{func}: {name} is {int}; an int here has at most 100 digits",
    "not positive": "{func}: {name} must be a positive int, got {value}",
    "past most": "{func}: {name} is {value}; it is at most {most} here",
    "not a number": "{func}: {name} must be a finite number, got {value} ({type})",
    "not finite": "{func}: {name} must be a finite number, got {value} ({type})",
    "not positive number": "{func}: {name} must be a positive finite number, got {value} ({type})",
    "wrong type": "{func}: {name} must be {what}, got {value} ({type})",
    "too large": "{func}: {what} are too large: " + OVERFLOW,
}

# key -> (error type, a real bad call, the fields of the template)
BAD_CALLS = {
    "not rows": (TypeError, lambda: check_matrix("f", "A", "ab"), dict(func="f", name="A", value="'ab'")),
    "no rows": (ShapeError, lambda: check_rows("f", "A", []), dict(func="f", name="A")),
    "not a row": (TypeError, lambda: check_matrix("f", "A", [[1.0], 2.0]),
                  dict(func="f", name="A", i=1, what="numbers", type="float")),
    "ragged": (ShapeError, lambda: check_matrix("f", "A", [[1, 2], [3, 4], [5]]),
               dict(func="f", name="A", first=2, i=2, n=1)),
    "no columns": (ShapeError, lambda: check_matrix("f", "A", [[], []]), dict(func="f", name="A")),
    "entry type": (TypeError, lambda: check_matrix("f", "A", [[1.0, "2"]]),
                   dict(func="f", name="A[0][1]", value="'2'", type="str")),
    "entry too large": (ValueError, lambda: check_matrix("f", "A", [[1.0], [-10**400]]),
                        dict(func="f", name="A[1][0]", int="an int of 401 digits")),
    "entry not finite": (ValueError, lambda: check_vector("f", "v", [1.0, NAN]), dict(func="f", name="v[1]", value="nan")),
    "not a vector": (TypeError, lambda: check_vector("f", "v", 3), dict(func="f", name="v", value="3")),
    "empty vector": (ShapeError, lambda: check_vector("f", "v", ()), dict(func="f", name="v")),
    "no matrices": (ShapeError, lambda: check_sizes("f", ("Ms", [], "h n m")), dict(func="f", name="Ms", value="[]")),
    "sizes differ": (ShapeError, lambda: check_sizes("f", ("Ms", [[[1.0]], [[1.0]], [[1.0, 2.0]]], "h n m")),
                     dict(func="f", a="Ms[0]", a_shape="1x1", b="Ms[2]", b_shape="1x2", a_place="columns", a_n=1,
                          b_place="columns", b_n=2, size="m", a_dims="n, m", b_dims="n, m")),
    "not an int": (TypeError, lambda: check_int("f", "seed", True), dict(func="f", name="seed", value=True, type="bool")),
    "int too long": (ValueError, lambda: check_int("f", "seed", 10**5000),
                     dict(func="f", name="seed", int="an int of about 5,000 digits")),
    "not positive": (ValueError, lambda: check_positive_int("f", "n", -3), dict(func="f", name="n", value=-3)),
    "past most": (ValueError, lambda: check_positive_int("f", "n", 5000, most=4096),
                  dict(func="f", name="n", value=5000, most="4,096")),
    "not a number": (TypeError, lambda: check_number("f", "c", [2]), dict(func="f", name="c", value=[2], type="list")),
    "not finite": (ValueError, lambda: check_number("f", "c", -INF), dict(func="f", name="c", value="-inf",
                                                                           type="float")),
    "not positive number": (ValueError, lambda: check_number("f", "c", 0.0, positive=True),
                            dict(func="f", name="c", value=0.0, type="float")),
    "wrong type": (TypeError, lambda: check_type("f", "bias", 1, bool, "True or False"),
                   dict(func="f", name="bias", what="True or False", value=1, type="int")),
    "too large": (ValueError, lambda: (_ for _ in ()).throw(too_large("f", OverflowError("the scores"))),
                  dict(func="f", what="the scores")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === The helpers, one by one ===

QUOTED = [
    (0, "0"), (10**18 - 1, "999999999999999999"), (-(10**18) + 1, "-999999999999999999"),
    (10**18, "an int of 19 digits"), (-(10**18), "an int of 19 digits"), (10**100, "an int of 101 digits"),
    (10**4000, "an int of 4,001 digits"), (-(10**4000), "an int of 4,001 digits"),
    (2**13998, "an int of 4,214 digits"), (2**13999, "an int of about 4,214 digits"),  # 13,999 and 14,000 bits
    (10**5000, "an int of about 5,000 digits"), (-(10**9000), "an int of about 9,000 digits"),
]


@pytest.mark.parametrize("n, shown", QUOTED, ids=[shown for _, shown in QUOTED])
def test_an_int_is_quoted_in_full_up_to_18_digits_then_by_its_size(n, shown):
    assert quote_int(n) == shown


@pytest.mark.parametrize("n", [10**100 - 1, -(10**100) + 1, 0, -1], ids=["10**100-1", "-10**100+1", "0", "-1"])
def test_an_int_of_100_digits_is_an_int(n):
    assert check_int("demo", "seed", n) == n


@pytest.mark.parametrize("n", [10**100, -(10**100), 10**5000], ids=["10**100", "-10**100", "10**5000"])
def test_an_int_of_more_is_refused_by_size(n):
    with pytest.raises(ValueError, match=r"^demo: seed is an int of .*digits; an int here has at most 100 digits$"):
        check_int("demo", "seed", n)


def test_shorten_cuts_every_repr_to_about_its_limit():
    assert shorten(list(range(100)), 20) == "[0, 1, 2, 3, 4, ..."
    assert len(shorten("x" * 10**6)) <= 60 and len(shorten(list(range(10**6)))) <= 60
    assert shorten(10**5000) == "an int of about 5,000 digits"  # never str() of an int Python will not print
    assert shorten(True) == "True" and shorten(None) == "None" and shorten(2.5) == "2.5"
    itself = []
    itself.append(itself)
    assert shorten(itself) == "[[...]]"
    assert shorten("x" * 58) == "'" + "x" * 58 + "'"  # 60 characters: exactly the limit, shown whole
    assert shorten("x" * 59) == "'" + "x" * 55 + " ..."  # 61: cut


def deeply_nested(depth=100_000):
    """[[[...[]...]]], depth lists deep: its repr is past Python's recursion limit."""
    value = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_list_nested_past_the_recursion_limit_is_shown_short():
    # repr() of it raises RecursionError, and every message that shows a value goes through shorten
    # (issue 21: never a raw RecursionError, try nested lists).
    from mha_lists.teaching.lists_as_matrices import dot, matmul, split_heads
    from mha_lists.teaching.masks import padding_mask
    from mha_lists.teaching.display import format_matrix
    from mha_lists.teaching.weights import init_mha_weights
    deep = deeply_nested()
    assert shorten(deep) == "a list nested too deeply to show"
    for func, call in [("matmul", lambda: matmul([[deep]], [[1.0]])), ("dot", lambda: dot([deep], [1.0])),
                       ("split_heads", lambda: split_heads([[1.0]], deep)),
                       ("padding_mask", lambda: padding_mask([deep], 0)),
                       ("init_mha_weights", lambda: init_mha_weights(16, 2, seed=0, bias=deep)),
                       ("format_matrix", lambda: format_matrix([[1.0]], title=deep))]:
        refused(func, call)


def test_describe_and_is_number():
    assert describe((5, 16)) == "5x16" and describe((2, 3, 4)) == "2x3x4"
    assert is_number(1) and is_number(2.5) and is_number(NAN)
    assert not is_number(True) and not is_number("1") and not is_number(None)


def test_all_finite_refuses_ints_too_large_for_a_float():
    assert all_finite([[1.0, 10**300]]) is True
    assert all_finite([[1.0, 10**400]]) is False
    assert all_finite([[1.0, NAN]]) is False and all_finite([[-INF]]) is False


def test_all_fine_is_the_fast_test_and_says_no_to_anything_else():
    assert all_fine([[[1.0, 2]], [[3.5]]]) is True
    assert all_fine([[[1.0, INF]]], finite=False) is True and all_fine([[[1.0, INF]]]) is False
    assert all_fine([[[1.0, NAN]]]) is False and all_fine([[[10**400]]]) is False
    for bad in ([[]], [[[]]], [([1.0],)], [[(1.0,)]], [[[1.0, 2.0], [3.0]]], [[[True]]], [[["1"]]],
                [[[None]]], [[[1.0]], "x"], [[[1.0]], [(2.0,)]], ["ab"]):
        assert all_fine(bad) is False, bad


def test_huge_ints_that_cancel_are_named_not_reported_as_an_overflow():
    # 10**400 - 10**400 is 0, a finite total, so the fast test (all_fine) takes the matrix; but neither
    # entry is a float. Issue 21: "huge ints that cancel pass the fast finite check" and "an int past float
    # range is reported as 'a product or sum overflowed' naming no argument".
    from mha_lists.teaching.lists_as_matrices import add, matmul
    B = 10**400
    assert all_fine([[[B, -B]]]) is False
    with pytest.raises(ValueError, match=r"^demo: A\[0\]\[0\] is an int of 401 digits, too large for a float"):
        check_matrix("demo", "A", [[B, -B]])
    with pytest.raises(ValueError, match=r"^matmul: A\[0\]\[0\] is an int of 401 digits, too large for a float"):
        matmul([[B, -B]], [[1.0], [1.0]])
    with pytest.raises(ValueError, match=r"^matmul: A\[0\]\[0\] is an int of 401 digits"):
        matmul([[B, -B]], [[0], [0]])  # not a silent [[0.0]]
    with pytest.raises(ValueError, match=r"^add: A\[0\]\[0\] is an int of 401 digits"):
        add([[B, -B]], [[1, 1]])


def test_check_matrix_returns_the_shape_and_lets_inf_through_when_asked():
    assert check_matrix("demo", "A", [[1, 2], [3, 4], [5, 6]]) == (3, 2)
    assert check_matrix("demo", "A", ((1.0,),)) == (1, 1)  # tuples are rows too
    assert check_matrix("demo", "A", [[INF, NAN]], finite=False) == (1, 2)
    # finite=False holds on the slow path too: the inf passes, and the fault named is the str after it
    with pytest.raises(TypeError, match=r"^demo: A\[0\]\[1\] is 'x'"):
        check_matrix("demo", "A", [[INF, "x"]], finite=False)
    assert check_rows("demo", "mask", [[True, None]]) == (1, 2)  # entries are not looked at
    assert check_vector("demo", "v", [INF], finite=False) == 1
    assert check_sizes("demo", ("W", [[[1.0]], [[2.0]]], "h n m"), ("b", [1.0], "m")) == {"h": 2, "n": 1, "m": 1}


def test_the_other_helpers_return_what_they_checked():
    rng = random.Random(0)
    assert check_positive_int("demo", "n", 4096, most=4096) == 4096
    assert check_number("demo", "c", 10**300) == 10**300 and check_number("demo", "c", -2.5) == -2.5
    assert check_type("demo", "b", False, bool, "True or False") is False and check_type("demo", "s", "", str, "a str") == ""
    assert check_type("demo", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))") is rng


def test_too_large_names_what_overflowed_or_the_values():
    assert str(too_large("f")) == f"f: the values are too large: {OVERFLOW}"
    assert str(too_large("f", "the scores")) == f"f: the scores are too large: {OVERFLOW}"
    assert str(too_large("f", OverflowError("math range error"))) == f"f: the values are too large: {OVERFLOW}"


def test_the_module_keeps_no_state():
    # No flag, counter or cache at module level: only constants, the error class and functions.
    # (Under mutmut, the mutation tester, the module also holds its tables of mutants: "mutmut" in their names.)
    state = {name: value for name, value in vars(checks).items() if not name.startswith("__") and "mutmut" not in name
             and not callable(value) and not isinstance(value, type(checks))}
    assert set(state) <= {"MAX_INT_DIGITS", "PLACES", "Optional"}, state
    assert isinstance(checks.PLACES, tuple)


# === A call behaves the same wherever it comes from (issue 21) ===

from mha_lists.core import attention as attention_module  # noqa: E402
from mha_lists.core.attention import attention, head_loop, multi_head_attention, one_head  # noqa: E402
from mha_lists.core.gradients import column_sums  # noqa: E402
from mha_lists.teaching.lists_as_matrices import add, dot, matmul, scale, split_heads, transpose  # noqa: E402
from mha_lists.core.softmax_and_masks import causal_mask, softmax, softmax_rows  # noqa: E402
from mha_lists.teaching.masks import combine_masks  # noqa: E402
from mha_lists.teaching.softmax_row import softmax_backward  # noqa: E402
from mha_lists.teaching.weights import kv_head_for  # noqa: E402
from mha_lists.teaching.weights import init_mha_weights  # noqa: E402

W = init_mha_weights(8, 2, seed=1)
X = [[0.1 * (i + j) for j in range(8)] for i in range(6)]

WRONG = [
    lambda: matmul([[1.0, 0.0]], [[1.0]]),
    lambda: matmul([[1.0, INF]], [[1.0], [2.0]]),
    lambda: matmul([[10**400]], [[1.0]]),
    lambda: add([[1.0, 2.0]], [[1.0], [2.0]]),
    lambda: dot([1.0], [1.0, 2.0]),
    lambda: scale([[1.0]], NAN),
    lambda: transpose([[1.0], [1.0, 2.0]]),
    lambda: split_heads([[1.0, 2.0, 3.0]], 2),
    lambda: softmax([NAN, 0.0]),
    lambda: softmax_rows([[0.0], [-INF]]),
    lambda: causal_mask(0),
    lambda: combine_masks([[True]], [[True, False]]),
    lambda: attention([[1.0]], [[1.0, 2.0]], [[1.0]]),
    lambda: attention([[1.0]], [[1.0]], [[1.0]], mask=[[False]]),
    lambda: multi_head_attention([row[:4] for row in X], W),
    lambda: multi_head_attention(X, W._replace(W_O=W.W_O[:3])),
    lambda: kv_head_for(9, 8, 2),
    lambda: column_sums([[NAN]]),
    lambda: softmax_backward([0.5, 0.6], [1.0, 2.0]),
]


def outcome(call):
    try:
        call()
    except (ValueError, TypeError) as error:
        return type(error), str(error)
    return None, "no error"


TOP_LEVEL = [outcome(call) for call in WRONG]


def test_every_wrong_call_is_refused_at_top_level():
    assert all(error is not None for error, _ in TOP_LEVEL), TOP_LEVEL


def test_the_same_error_inside_a_step_of_the_head_loop():
    # A learner's own step, run by the core's head loop in the middle of multi-head attention.
    seen = []

    def step(Q, K, V, *, mask, scale):
        seen.append([outcome(call) for call in WRONG])
        return one_head(Q, K, V, mask=mask, scale=scale)

    Q = [[[1.0, 0.0]], [[0.0, 1.0]]]
    K = V = [[[1.0, 0.0], [0.0, 1.0]]]
    heads = head_loop(Q, K, V, mask=None, scale=1.0, step=step)
    assert len(heads) == 2 and seen == [TOP_LEVEL, TOP_LEVEL]


def test_the_same_error_inside_a_step_given_extra_per_head_arguments():
    seen = []

    def step(Q, K, V, extra, *, mask, scale):
        seen.append((extra, [outcome(call) for call in WRONG]))
        return extra

    Q = [[[1.0]], [[2.0]], [[3.0]], [[4.0]]]
    K = V = [[[1.0]], [[1.0]]]
    assert head_loop(Q, K, V, mask=None, scale=1.0, step=step, per_head=(["a", "b", "c", "d"],)) == ["a", "b", "c", "d"]
    assert [extra for extra, _ in seen] == ["a", "b", "c", "d"]
    assert all(found == TOP_LEVEL for _, found in seen)


def test_the_same_error_in_a_thread_while_another_thread_runs_attention():
    stop = threading.Event()
    runs = []

    def attend():
        while not stop.is_set():
            runs.append(multi_head_attention(X, W, mask=causal_mask(6)))

    worker = threading.Thread(target=attend)
    worker.start()
    try:
        while not runs:  # attention is running in the other thread
            pass
        found = [[outcome(call) for call in WRONG] for _ in range(20)]
    finally:
        stop.set()
        worker.join()
    assert all(f == TOP_LEVEL for f in found)
    assert len(runs) >= 1 and all(out == runs[0] for out in runs)


def test_the_same_error_in_many_threads_at_once():
    results = [None] * 8

    def probe(t):
        results[t] = [outcome(call) for call in WRONG]

    threads = [threading.Thread(target=probe, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [TOP_LEVEL] * 8


def test_no_public_function_is_wrapped():
    # The real signature in the def, no wrapper frame: no __wrapped__, no door.
    from mha_lists.core import gradients, matrix, softmax_and_masks
    from mha_lists.teaching import lists_as_matrices, masks, softmax_row
    for module in (matrix, softmax_and_masks, attention_module, gradients, lists_as_matrices, masks, softmax_row):
        for name in module.__all__:
            obj = getattr(module, name)
            assert not hasattr(obj, "__wrapped__") and not hasattr(obj, "contract"), f"{module.__name__}.{name}"
