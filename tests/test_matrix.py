"""core/matrix.py: the arithmetic the formula is written with, unchecked; and the error that names an overflow."""

import math

import pytest

from mha_lists import matmul
from mha_lists.core.matrix import columns_of, finite, joined, overflow_named, product
from mha_lists.teaching.weights import derive_rng
from mha_lists.tools.bench import textbook_matmul

INF = math.inf


def test_product_by_hand_and_against_the_textbook_loop():
    assert product([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19.0, 22.0], [43.0, 50.0]]
    rng = derive_rng(7, "test/product")
    A = [[rng.gauss(0, 1) for _ in range(13)] for _ in range(4)]
    B = [[rng.gauss(0, 1) for _ in range(5)] for _ in range(13)]
    assert product(A, B) == textbook_matmul(A, B, math.fsum) == matmul(A, B)  # matmul is product, checked


def test_the_unchecked_pieces():
    assert columns_of([[1, 2, 3]], [1, 2]) == [[[1]], [[2, 3]]]
    assert joined([[[1]], [[2, 3]]]) == [[1, 2, 3]]
    assert joined(columns_of([[1, 2, 3], [4, 5, 6]], [2, 1])) == [[1, 2, 3], [4, 5, 6]]
    M = [[1.0]]
    assert finite(M, "the sums") is M
    with pytest.raises(OverflowError, match="^the sums$"):
        finite([[1.0, INF]], "the sums")
    with pytest.raises(OverflowError, match="^the products$"):
        product([[1e308, 1e308]], [[1e308], [-1e308]])  # inf - inf inside fsum
    with pytest.raises(OverflowError, match="^the scores$"):
        product([[1e308, 1e308]], [[1.0], [1.0]], "the scores")  # fsum's running total


def test_overflow_named_turns_an_overflow_into_the_functions_error():
    with pytest.raises(ValueError, match=r"^demo: the scores are too large: a product or sum overflowed float64"):
        with overflow_named("demo"):
            finite([[INF]], "the scores")
    with pytest.raises(ValueError, match=r"^demo: the values are too large"):  # an overflow that says nothing useful
        with overflow_named("demo"):
            math.exp(1000)
    with pytest.raises(KeyError):  # anything else passes through unchanged
        with overflow_named("demo"):
            {}["x"]
    with overflow_named("demo"):
        assert finite([[1.0]], "the scores") == [[1.0]]


def test_an_overflow_leaves_no_context_behind():
    try:
        with overflow_named("demo"):
            finite([[INF]], "the scores")
    except ValueError as error:
        assert error.__suppress_context__ and error.__cause__ is None
