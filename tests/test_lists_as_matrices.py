"""teaching/lists_as_matrices.py: notebook 00's operations. Hand-worked integer cases, the messages, the errors, no mutation."""

import copy
import math

import pytest

from mha_lists import ShapeError, add, add_row, concat_heads, dot, matmul, scale, shape, split_heads, transpose
from mha_lists.core import matrix as matrix_module
from mha_lists.teaching import lists_as_matrices as lists_module
from mha_lists.teaching.lists_as_matrices import split_rows
from mha_lists.teaching.weights import derive_rng
from mha_lists.tools.bench import textbook_matmul
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
OVERFLOW = "a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "dot overflow": "dot: the products of u and v are too large: " + OVERFLOW,
    "matmul overflow": "matmul: the products of A and B are too large: " + OVERFLOW,
    "matmul work": "matmul: these sizes take {work} multiply-adds; one call here does at most 200,000,000 "
                   "(about ten seconds): use fewer tokens or smaller matrices",
    "add overflow": "add: the sums of A and B are too large: " + OVERFLOW,
    "add_row overflow": "add_row: the sums of M and b are too large: " + OVERFLOW,
    "scale overflow": "scale: the products of M and c are too large: " + OVERFLOW,
    "split_heads width": "split_heads: M is {n}x{m}; its {m} columns cannot be cut into {h} blocks of equal width",
    "concat_heads list": "concat_heads: heads must be a non-empty list of matrices, got {value}",
    "concat_heads rows": "concat_heads: heads[0] is {first}x{c0} but heads[{b}] is {rows}x{cols}; "
                         "every head must have the same number of rows",
    "split_rows sizes": "split_rows: sizes must be a non-empty list of positive ints, got {value}",
    "split_rows total": "split_rows: M has {n} rows but the sizes {sizes} add up to {total}; "
                        "they must be positive and add up to the number of rows",
    # The argument's name in a shared message (its wording is pinned in test_checks.py).
    "add_row M": SHARED["entry not finite"],
    "split_rows M": SHARED["not rows"],
}
MESSAGES.update({key: SHARED["sizes differ"] for key in ("dot lengths", "matmul shapes", "add shapes", "add_row width")})

BAD_CALLS = {
    "dot lengths": (ShapeError, lambda: dot([1, 2], [1, 2, 3]),
                    dict(func="dot", a="u", a_shape="a vector of 2", b="v", b_shape="a vector of 3", a_place="entries",
                         b_place="entries", size="n", a_dims="n", b_dims="n", a_n=2, b_n=3)),
    "dot overflow": (ValueError, lambda: dot([1e155, 1e155], [1e155, 1e155]), {}),
    "matmul shapes": (ShapeError, lambda: matmul([[1.0] * 16] * 5, [[1.0] * 8] * 8),
                      dict(func="matmul", a="A", a_shape="5x16", b="B", b_shape="8x8", a_place="columns", b_place="rows",
                           size="m", a_dims="n, m", b_dims="m, p", a_n=16, b_n=8)),
    "matmul overflow": (ValueError, lambda: matmul([[1e200]], [[1e200]]), {}),
    # 10000 * 2 * 10001 multiply-adds, refused before any; were they run, the first sum would overflow at once
    "matmul work": (ValueError, lambda: matmul([[1e154, 1e154]] * 10_000, [[1e154] * 10_001] * 2),
                    dict(work="200,020,000")),
    "add shapes": (ShapeError, lambda: add([[1, 2]], [[1], [2]]),
                   dict(func="add", a="A", a_shape="1x2", b="B", b_shape="2x1", a_place="rows", b_place="rows", size="n",
                        a_dims="n, m", b_dims="n, m", a_n=1, b_n=2)),
    "add overflow": (ValueError, lambda: add([[1e308]], [[1e308]]), {}),
    "add_row width": (ShapeError, lambda: add_row([[1, 2]], [1, 2, 3]),
                      dict(func="add_row", a="M", a_shape="1x2", b="b", b_shape="a vector of 3", a_place="columns",
                           b_place="entries", size="p", a_dims="n, p", b_dims="p", a_n=2, b_n=3)),
    "add_row overflow": (ValueError, lambda: add_row([[1e308]], [1e308]), {}),
    "scale overflow": (ValueError, lambda: scale([[1e300]], 1e10), {}),
    "split_heads width": (ShapeError, lambda: split_heads([[1, 2, 3, 4]], 3), dict(n=1, m=4, h=3)),
    "concat_heads list": (ShapeError, lambda: concat_heads([]), dict(value="[]")),
    "concat_heads rows": (ShapeError, lambda: concat_heads([[[1, 2, 3], [4, 5, 6]], [[7]]]),
                          dict(first=2, c0=3, b=1, rows=1, cols=1)),
    "split_rows sizes": (TypeError, lambda: split_rows([[1.0], [2.0]], ()), dict(value="()")),
    "split_rows total": (ShapeError, lambda: split_rows([[1], [2]], [1]), dict(n=2, sizes=[1], total=1)),
    "add_row M": (ValueError, lambda: add_row([[1.0, NAN]], [1.0, 2.0]), dict(func="add_row", name="M[0][1]",
                                                                              value="nan")),
    "split_rows M": (TypeError, lambda: split_rows(None, [1]), dict(func="split_rows", name="M", value="None")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === Hand-worked cases ===


def test_shape_counts_rows_then_columns():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)
    assert shape([[7]]) == (1, 1)
    assert shape([[INF, NAN]]) == (1, 2)  # a shape is a shape, whatever the numbers


def test_matmul_by_hand():
    A = [[1, 2, 3], [4, 5, 6]]
    B = [[7, 8], [9, 10], [11, 12]]
    # c[0][1] = 1*8 + 2*10 + 3*12 = 58, c[1][0] = 4*7 + 5*9 + 6*11 = 139
    assert matmul(A, B) == [[58, 64], [139, 154]]


def test_matmul_identity_and_transpose_rule():
    A = [[1, 2], [3, 4], [5, 6]]
    B = [[1, -1, 2], [0, 3, 1]]
    assert matmul(A, [[1, 0], [0, 1]]) == A
    # (A B)^T = B^T A^T
    assert transpose(matmul(A, B)) == matmul(transpose(B), transpose(A))


def test_matmul_is_bit_identical_to_the_textbook_loop_with_fsum():
    rng = derive_rng(7, "test/matmul")
    A = [[rng.gauss(0, 1) for _ in range(13)] for _ in range(4)]
    B = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(13)]
    assert matmul(A, B) == textbook_matmul(A, B, math.fsum)


def test_matmul_sums_are_correctly_rounded():
    # A naive left-to-right float sum gives 0.0 here; fsum keeps the 1.0.
    assert matmul([[1e100, 1.0, -1e100]], [[1.0], [1.0], [1.0]]) == [[1.0]]


def test_dot_transpose_add_scale_by_hand():
    assert dot([1, 2, 3], [4, 5, 6]) == 32
    assert transpose([[1, 2, 3], [4, 5, 6]]) == [[1, 4], [2, 5], [3, 6]]
    assert add([[1, 2]], [[10, 20]]) == [[11, 22]]
    assert add_row([[1, 2], [3, 4]], [10, 20]) == [[11, 22], [13, 24]]
    assert scale([[1, 2], [3, 4]], 0.5) == [[0.5, 1.0], [1.5, 2.0]]


def test_moving_numbers_refuses_inf_and_nan_like_every_other_operation():
    with pytest.raises(ValueError, match=r"^transpose: M\[1\]\[1\] is -inf"):
        transpose([[1.0, 1.0], [2.0, -INF]])
    with pytest.raises(ValueError, match=r"^split_heads: M\[0\]\[1\] is nan"):
        split_heads([[1.0, NAN]], 2)
    with pytest.raises(ValueError, match=r"^concat_heads: heads\[1\]\[0\]\[0\] is inf"):
        concat_heads([[[1.0]], [[INF]]])


def test_split_and_concat_heads_round_trip():
    M = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    heads = split_heads(M, 3)
    assert heads == [[[1, 2], [7, 8]], [[3, 4], [9, 10]], [[5, 6], [11, 12]]]
    assert concat_heads(heads) == M
    assert split_rows(M, [1, 1]) == [[M[0]], [M[1]]]


def test_split_rows_walks_down_the_rows():
    M = [[1], [2], [3], [4]]
    assert split_rows(M, [2, 1, 1]) == [[[1], [2]], [[3]], [[4]]]
    assert split_rows(M, [1, 3]) == [[[1]], [[2], [3], [4]]]


# === Errors: name the function and the argument ===


@pytest.mark.parametrize("bad, error, start", [
    ([[1, 2], [3]], ShapeError, r"^matmul: A is ragged"),
    ([], ShapeError, r"^matmul: A must be a non-empty list of rows, got \[\]"),
    ([[]], ShapeError, r"^matmul: A has empty rows"),
    ([[1, "2"]], TypeError, r"^matmul: A\[0\]\[1\] is '2'"),
    ([[1, True]], TypeError, r"^matmul: A\[0\]\[1\] is True"),
    ([[1, None]], TypeError, r"^matmul: A\[0\]\[1\] is None"),
    ([[INF, 1.0]], ValueError, r"^matmul: A\[0\]\[0\] is inf"),
    ([[1.0, NAN]], ValueError, r"^matmul: A\[0\]\[1\] is nan"),
    ([1, 2], TypeError, r"^matmul: A\[0\] must be a row"),
    (({1: 2},), TypeError, r"^matmul: A\[0\] must be a row"),
    ("ab", TypeError, r"^matmul: A must be a non-empty list of rows"),
    (None, TypeError, r"^matmul: A must be a non-empty list of rows"),
])
def test_matmul_names_the_bad_argument(bad, error, start):
    with pytest.raises(error, match=start):
        matmul(bad, [[1], [1]])
    with pytest.raises(error, match=start.replace("A", "B", 1)):
        matmul([[1.0, 1.0]], bad)


def test_other_functions_name_their_arguments():
    with pytest.raises(TypeError, match=r"^scale: c must be a finite number, got .2. \(str\)"):
        scale([[1]], "2")
    with pytest.raises(ValueError, match=r"^scale: c must be a finite number"):
        scale([[1]], NAN)
    with pytest.raises(TypeError, match=r"^scale: M must be a non-empty list of rows"):
        scale(None, 2.0)
    with pytest.raises(TypeError, match=r"^dot: v must be a non-empty list of numbers"):
        dot([1.0], None)
    with pytest.raises(ValueError, match=r"^dot: v\[0\] is inf"):
        dot([1.0, 2.0], [INF, 1.0])
    with pytest.raises(TypeError, match=r"^add: B\[0\]\[0\] is 'b'"):
        add([[1.0]], [["b"]])
    with pytest.raises(ValueError, match=r"^add_row: b\[0\] is nan"):
        add_row([[1.0]], [NAN])
    with pytest.raises(ShapeError, match=r"^add_row: b must be a non-empty list of numbers"):
        add_row([[1.0]], [])
    with pytest.raises(TypeError, match=r"^split_heads: num_heads must be an int"):
        split_heads([[1.0, 2.0]], 2.0)
    with pytest.raises(ValueError, match=r"^split_heads: num_heads must be a positive int"):
        split_heads([[1.0, 2.0]], 0)
    with pytest.raises(TypeError, match=r"^concat_heads: heads\[1\] must be a non-empty list of rows"):
        concat_heads([[[1.0]], 5])
    with pytest.raises(TypeError, match=r"^concat_heads: heads\[1\]\[0\]\[0\] is 'x'"):
        concat_heads([[[1.0]], [["x"]]])
    with pytest.raises(ValueError, match=r"^split_rows: sizes\[0\] must be a positive int"):
        split_rows([[1.0], [2.0]], [0, 2])
    with pytest.raises(TypeError, match=r"^split_rows: sizes\[0\] must be an int"):
        split_rows([[1.0], [2.0]], [1.5, 0.5])
    with pytest.raises(TypeError, match=r"^split_rows: sizes must be a non-empty list"):
        split_rows([[1.0], [2.0]], [])
    with pytest.raises(TypeError, match=r"^transpose: M\[0\]\[1\] is None"):
        transpose([[1, None]])
    with pytest.raises(TypeError, match=r"^shape: M must be a non-empty list of rows"):
        shape(5)


def test_matmul_does_at_most_max_work_multiply_adds(monkeypatch):
    A, B = [[1.0] * 3] * 2, [[1.0] * 5] * 3  # 2 * 3 * 5 = 30 multiply-adds
    monkeypatch.setattr(matrix_module, "MAX_WORK", 30)
    monkeypatch.setattr(lists_module, "MAX_WORK", 30)
    assert matmul(A, B) == [[3.0] * 5] * 2  # exactly at the limit: run
    monkeypatch.setattr(matrix_module, "MAX_WORK", 29)
    monkeypatch.setattr(lists_module, "MAX_WORK", 29)
    with pytest.raises(ValueError, match=r"^matmul: these sizes take 30 multiply-adds; one call here does at "
                                         r"most 29 "):
        matmul(A, B)


def test_an_int_too_large_for_a_float_names_the_argument():
    for call, start in [
        (lambda: matmul([[10**400]], [[1.0]]), r"^matmul: A\[0\]\[0\] is an int of 401 digits, too large for a float"),
        (lambda: matmul([[1.0]], [[-(10**400)]]), r"^matmul: B\[0\]\[0\] is an int of 401 digits, too large for a float"),
        (lambda: dot([1.0, 10**400], [1.0, 1.0]), r"^dot: u\[1\] is an int of 401 digits, too large for a float"),
        (lambda: add([[1.0]], [[10**400]]), r"^add: B\[0\]\[0\] is an int of 401 digits"),
        (lambda: add_row([[1.0]], [10**400]), r"^add_row: b\[0\] is an int of 401 digits"),
        (lambda: scale([[10**400]], 1.0), r"^scale: M\[0\]\[0\] is an int of 401 digits"),
        (lambda: scale([[1.0]], 10**400), r"^scale: c must be a finite number, got an int of 401 digits"),
    ]:
        with pytest.raises(ValueError, match=start):
            call()


def test_overflow_is_named_never_a_silent_inf():
    for func, call in [("matmul", lambda: matmul([[1e308, 1e308]], [[1.0], [1.0]])),
                       ("matmul", lambda: matmul([[1.0, 2.0]], [[1e308], [1e308]])),
                       ("dot", lambda: dot([1e308, 1e308], [10, 10])),
                       ("add", lambda: add([[10**308]], [[10**308]])),
                       ("scale", lambda: scale([[1e300]], 1e10))]:
        assert "too large" in str(refused(func, call, ValueError))


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

HUGE_LIST = list(range(10**6))
BAD_SHAPES = [None, 5, "ab", "x" * 10**6, [], [[]], [1, 2], [[1, 2], [3]], ({1: 2},), [HUGE_LIST, [1]], HUGE_LIST]
BAD_ENTRIES = [[[1, None]], [["a"]], [[NAN, 1.0]], [[INF]], [[True, 1.0]], [[[1.0]]], [list(range(10**4)) + [None]],
               [["x" * 10**6]], [[10**5000]]]


@pytest.mark.parametrize("index", range(len(BAD_SHAPES + BAD_ENTRIES)))
def test_every_function_refuses_a_bad_matrix_by_name(index):
    M = (BAD_SHAPES + BAD_ENTRIES)[index]
    for func, call in [("matmul", lambda: matmul(M, [[1.0]])), ("matmul", lambda: matmul([[1.0]], M)),
                       ("add", lambda: add(M, [[1.0]])), ("add_row", lambda: add_row(M, [1.0])),
                       ("scale", lambda: scale(M, 2.0)), ("split_heads", lambda: split_heads(M, 1)),
                       ("concat_heads", lambda: concat_heads([M])), ("transpose", lambda: transpose(M))]:
        refused(func, call)
    if M not in ([[NAN, 1.0]], [[INF]], [[10**5000]]):  # a shape is a shape, whatever the numbers
        refused("shape", lambda: shape(M))
    if index < len(BAD_SHAPES):  # split_rows cuts rows of anything: it looks at the shape only
        refused("split_rows", lambda: split_rows(M, [1]))


@pytest.mark.parametrize("bad", [None, 5, "ab", [], [None], ["a"], [NAN], [INF], [True], [[1.0]], {1: 2},
                                 [10**5000]])
def test_dot_refuses_a_bad_vector_by_name(bad):
    refused("dot", lambda: dot(bad, [1.0]))
    refused("dot", lambda: dot([1.0], bad))
    refused("add_row", lambda: add_row([[1.0]], bad))


@pytest.mark.parametrize("bad", [None, "2", 2.5, 2.0, -1, 0, True, [1], 10**400])
def test_bad_counts_and_numbers_are_refused_by_name(bad):
    refused("split_heads", lambda: split_heads([[1.0, 2.0]], bad))
    refused("split_rows", lambda: split_rows([[1.0], [2.0]], [bad, 1]))
    refused("split_rows", lambda: split_rows([[1.0], [2.0]], bad))
    if bad not in (2.5, 2.0, -1, 0):  # a scale may be any finite number
        refused("scale", lambda: scale([[1.0]], bad))


def test_a_long_list_of_sizes_is_shown_short():
    error = refused("split_rows", lambda: split_rows([[1.0]], list(range(1, 10**5))))
    assert len(str(error)) <= 300


def test_results_near_the_edge_of_float64_are_finite_or_refused():
    for call in (lambda: matmul([[1e154]], [[1e154]]), lambda: add([[8e307]], [[8e307]]),
                 lambda: scale([[1e154]], 1e154), lambda: dot([1e154], [1e154]), lambda: add_row([[1e308]], [-1e308])):
        assert finite_everywhere(call())


# === Nothing is changed ===


def test_no_function_mutates_its_arguments():
    A = [[1.0, 2.0], [3.0, 4.0]]
    B = [[5.0, 6.0], [7.0, 8.0]]
    before = copy.deepcopy((A, B))
    matmul(A, B), transpose(A), add(A, B), scale(A, 2), add_row(A, [1.0, 1.0]), shape(A), dot(A[0], B[0])
    heads = split_heads(A, 2)
    heads[0][0][0] = 99.0  # the blocks are new lists, not views of A
    joined_ = concat_heads([A, B])
    joined_[0][0] = 99.0
    blocks = split_rows(A, [1, 1])
    blocks[0][0][0] = 99.0
    assert (A, B) == before


@pytest.mark.parametrize("call, args", [
    (matmul, ([[1.0, 2.0]], [[1.0], [2.0]])), (matmul, ([[1.0, 2.0]], [[1.0]])), (dot, ([1.0], [2.0])),
    (transpose, ([[1.0, 2.0]],)), (add, ([[1.0]], [[2.0]])), (add_row, ([[1.0]], [2.0])), (scale, ([[1.0]], 3.0)),
    (shape, ([[1.0]],)), (split_heads, ([[1.0, 2.0]], 2)), (concat_heads, ([[[1.0]], [[2.0]]],)),
    (split_rows, ([[1.0], [2.0]], [1, 1])), (split_rows, ([[1.0], [2.0]], [1])), (add, ([[NAN]], [[1.0]])),
])
def test_every_public_function_leaves_its_arguments_alone(call, args):
    assert_no_mutation(call, *args)


def test_results_are_new_lists():
    A = [[1.0, 2.0]]
    assert transpose(transpose(A)) is not A
    assert scale(A, 1)[0] is not A[0]
    assert split_rows(A, [1])[0][0] is not A[0]
    assert math.isfinite(matmul(A, [[1.0], [1.0]])[0][0])


def test_a_sum_that_overflows_inside_fsum_is_named_like_a_product_that_does():
    # 1e308 + 1e308: each product is finite, their sum is not, and fsum says so itself
    with pytest.raises(ValueError, match=r"^matmul: the products of A and B are too large"):
        matmul([[1e308, 1e308]], [[1.0], [1.0]])
