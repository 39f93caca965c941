"""core/softmax_and_masks.py: masks, softmax and entropy. By hand, invariants, the messages, the limits."""

import math
import time

import pytest

from mha_lists import ShapeError, causal_mask, softmax, softmax_rows
from mha_lists.core.softmax_and_masks import MAX_MASK_SIDE, check_mask, check_scores, masked, softmax_of_rows
from mha_lists.teaching.masks import combine_masks, length_mask, padding_mask
from mha_lists.teaching.weights import derive_rng
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
SIDE = MAX_MASK_SIDE

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "mask entry": "{func}: {name}[{i}][{j}] is {value}; mask entries must be True (may attend) or False (masked)",
    "mask shape": "{func}: {name} is {found}; it must be (queries, keys) = {shape}",
    "mask row": "{func}: {name} row {i} is all False, so query {i} may attend to no key; every query needs at least one key",
    "score not finite": "{func}: {name} is {value}; scores must be finite numbers or -inf (masked)",
    "no key": "{func}: {row}every score is -inf, so there is no key to attend to; "
              "softmax of an empty row is undefined (check the mask)",
}
MESSAGES["mask side"] = SHARED["past most"]
MESSAGES["score too large"] = MESSAGES["score not finite"]  # an int past float range is shown by its size

BAD_CALLS = {
    "mask entry": (TypeError, lambda: check_mask("demo", "mask", [[True, 0]]), dict(func="demo", name="mask", i=0, j=1,
                                                                                  value=0)),
    "mask shape": (ShapeError, lambda: check_mask("demo", "mask", [[True]], (2, 3)),
                   dict(func="demo", name="mask", found="1x1", shape="2x3")),
    "mask row": (ValueError, lambda: check_mask("demo", "mask", [[True], [False]], (2, 1)),
                 dict(func="demo", name="mask", i=1)),
    "mask side": (ValueError, lambda: causal_mask(SIDE + 1), dict(func="causal_mask", name="seq_len", value=SIDE + 1,
                                                                   most="4,096")),
    "score too large": (ValueError, lambda: softmax([0.0, -(10**400)]),
                        dict(func="softmax", name="v[1]", value="an int of 401 digits")),
    "score not finite": (ValueError, lambda: softmax_rows([[0.0], [INF]]), dict(func="softmax_rows", name="M[1][0]",
                                                                               value="inf")),
    "no key": (ValueError, lambda: softmax_rows([[0.0, 1.0], [-INF, -INF]]), dict(func="softmax_rows", row="row 1: ")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


def random_rows(T, d, seed=3, name="x"):
    rng = derive_rng(seed, name)
    return [[rng.gauss(0, 1) for _ in range(d)] for _ in range(T)]


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
    assert softmax([1e308, -1e308]) == [1.0, 0.0]  # the largest scores still give weights


def test_softmax_rows_sum_to_one():
    rows = softmax_rows(random_rows(6, 9))
    for row in rows:
        assert math.fsum(row) == pytest.approx(1.0, abs=1e-15)
        assert all(p > 0 for p in row)
    assert softmax_of_rows([[0.0, 0.0]]) == softmax_rows([[0.0, 0.0]]) == [[0.5, 0.5]]


def test_softmax_masked_entries_are_exactly_zero():
    assert softmax([1.0, -INF, 3.0])[1] == 0.0
    assert softmax_rows([[0.0, 0.0], [0.0, -INF]]) == [[0.5, 0.5], [1.0, 0.0]]


def test_softmax_errors_name_the_entry():
    with pytest.raises(ValueError, match=r"^softmax: every score is -inf"):
        softmax([-INF] * 3)
    with pytest.raises(ValueError, match=r"^softmax: v\[0\] is nan"):
        softmax([NAN, 1.0])
    with pytest.raises(ShapeError, match=r"^softmax: v must be a non-empty list of numbers"):
        softmax([])
    with pytest.raises(TypeError, match=r"^softmax: v must be a non-empty list of numbers"):
        softmax("abc")
    with pytest.raises(TypeError, match=r"^softmax: v\[0\] is 'a'"):
        softmax(["a"])
    with pytest.raises(ValueError, match=r"^softmax_rows: M\[1\]\[0\] is an int of 401 digits"):
        softmax_rows([[0.0], [10**400]])
    with pytest.raises(ShapeError, match=r"^softmax_rows: M has empty rows"):
        softmax_rows([[]])
    with pytest.raises(TypeError, match=r"^softmax_rows: M\[0\] must be a row"):
        softmax_rows([1.0])


# === Masks ===


def test_masked_puts_minus_inf_where_the_mask_says_no():
    S = [[1.0, 2.0]]
    assert masked(S, [[True, False]]) == [[1.0, -INF]]
    assert masked(S, None) is S


def test_check_scores_returns_the_shape():
    assert check_scores("demo", "v", [0.0, -INF, 2.0], vector=True) == (1, 3)  # one row
    assert check_scores("demo", "S", [[0.0, -INF]] * 2) == (2, 2)


def test_check_mask_returns_the_shape():
    assert check_mask("demo", "mask", [[True, False]]) == (1, 2)
    assert check_mask("demo", "mask", [[True, False]], (1, 2)) == (1, 2)
    assert check_mask("demo", "mask", [[False]]) == (1, 1)  # no shape: not about to be used


def test_mask_errors_name_the_argument():
    with pytest.raises(TypeError, match=r"^causal_mask: seq_len must be an int"):
        causal_mask(2.5)
    with pytest.raises(ValueError, match=r"^causal_mask: seq_len must be a positive int"):
        causal_mask(0)
    with pytest.raises(TypeError, match=r"^padding_mask: token_ids\[0\] must be an int"):
        padding_mask(["a", "b"], 0)
    with pytest.raises(TypeError, match=r"^padding_mask: token_ids\[0\] must be an int"):
        padding_mask([True, 1], 0)
    with pytest.raises(TypeError, match=r"^padding_mask: pad_id must be an int"):
        padding_mask([1, 2], "0")
    with pytest.raises(TypeError, match=r"^padding_mask: num_queries must be an int"):
        padding_mask([5, 0], 0, num_queries=1.5)
    with pytest.raises(ValueError, match=r"^length_mask: length must be a positive int"):
        length_mask(0, 2)
    with pytest.raises(ValueError, match=r"^length_mask: num_queries must be a positive int"):
        length_mask(1, 3, num_queries=0)
    with pytest.raises(TypeError, match=r"^length_mask: seq_len must be an int"):
        length_mask(1, None)
    with pytest.raises(TypeError, match=r"^combine_masks: masks\[0\]\[1\] must be a row \(a list of True/False\), "
                                        r"got NoneType"):
        combine_masks([[True], None])


def test_a_mask_has_at_most_max_mask_side_queries_and_keys():
    assert len(padding_mask([1], 0, num_queries=SIDE)) == SIDE
    assert len(length_mask(1, SIDE, num_queries=1)[0]) == SIDE
    assert len(length_mask(1, 1, num_queries=SIDE)) == SIDE
    assert len(padding_mask([1] * SIDE, 0, num_queries=1)[0]) == SIDE
    for call, start in [(lambda: causal_mask(SIDE + 1), "causal_mask: seq_len"),
                        (lambda: padding_mask([1], 0, num_queries=SIDE + 1), "padding_mask: num_queries"),
                        (lambda: padding_mask([1] * (SIDE + 1), 0), r"padding_mask: len\(token_ids\)"),
                        (lambda: length_mask(1, SIDE + 1), "length_mask: seq_len"),
                        (lambda: length_mask(1, 2, num_queries=SIDE + 1), "length_mask: num_queries"),
                        (lambda: causal_mask(10**9), "causal_mask: seq_len")]:
        started = time.perf_counter()
        with pytest.raises(ValueError, match=f"^{start} is .*; it is at most 4,096 here"):
            call()
        assert time.perf_counter() - started < 1.0  # refused at once, not after building it
    with pytest.raises(ValueError, match=r"^length_mask: length is an int of 401 digits; an int here has at most 100"):
        length_mask(10**400, 10**400)


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

BAD_VECTORS = [None, 5, "ab", "x" * 10**6, [], [None], ["a"], [NAN], [INF], [True], [[1.0]], {1: 2}, [10**5000],
               [-INF, -INF], list(range(10**5)) + [None]]
BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]], [[INF]],
                [[True, 1.0]], ({1: 2},), [[[1.0]]], [[-INF]], [[10**5000]]]
BAD_MASKS = [None, 5, [], [[]], [True], [[True], [True, False]], [[1, 0]], [[True, None]], [["yes"]],
             [[True] * 10**5 + [None]]]
BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, 10**400, SIDE + 1, 10**9]


@pytest.mark.parametrize("v", BAD_VECTORS, ids=range(len(BAD_VECTORS)))
def test_softmax_refuses_a_bad_vector(v):
    refused("softmax", lambda: softmax(v))


@pytest.mark.parametrize("M", BAD_MATRICES, ids=range(len(BAD_MATRICES)))
def test_softmax_rows_refuses_a_bad_matrix(M):
    refused("softmax_rows", lambda: softmax_rows(M))


def test_results_are_finite_or_refused_at_the_edge_of_float64():
    assert finite_everywhere(softmax([1e308, -1e308, 0.0]))
    assert finite_everywhere(softmax_rows([[-1e308, 1e308], [5e-324, 0.0]]))


# === Nothing is changed ===


@pytest.mark.parametrize("call, args", [
    (softmax, ([0.0, -INF, 1.0],)), (softmax_rows, ([[0.0, 1.0], [2.0, -INF]],)),
    (softmax, ([NAN],)),
    (check_mask, ("demo", "mask", [[True, False]], (1, 2))), (check_mask, ("demo", "mask", [[False]], (1, 1))),
    (masked, ([[1.0, 2.0]], [[True, False]])),
])
def test_every_function_leaves_its_arguments_alone(call, args):
    assert_no_mutation(call, *args)


def test_results_are_new_lists():
    v = [0.0, 1.0]
    assert softmax(v) is not v
    rows = causal_mask(2)
    rows[1][0] = False
    assert causal_mask(2)[1][0] is True  # a new mask each call


def test_int_scores_that_each_fit_a_float_give_the_floats_weights():
    """10**308 and -10**308 each fit a float, but their int difference does not: the weights are the floats'."""
    assert softmax([10**308, -10**308]) == softmax([1e308, -1e308]) == [1.0, 0.0]
    assert softmax_rows([[10**308, -10**308], [1, 2]]) == [[1.0, 0.0], softmax([1.0, 2.0])]
