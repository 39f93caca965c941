"""Lists as matrices: hand-worked integer cases, the errors, and no mutation."""

import copy
import math

import pytest

from mha_lists import (ShapeError, add, add_row, concat_heads, dot, matmul, scale, shape,
                       split_heads, transpose)
from mha_lists.core.matrix import split_rows
from mha_lists.tools.bench import textbook_matmul
from mha_lists.teaching.weights import derive_rng


def test_shape_counts_rows_then_columns():
    assert shape([[1, 2, 3], [4, 5, 6]]) == (2, 3)
    assert shape([[7]]) == (1, 1)


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


def test_split_and_concat_heads_round_trip():
    M = [[1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]]
    heads = split_heads(M, 3)
    assert heads == [[[1, 2], [7, 8]], [[3, 4], [9, 10]], [[5, 6], [11, 12]]]
    assert concat_heads(heads) == M
    assert split_rows(M, [1, 1]) == [[M[0]], [M[1]]]


def test_matmul_error_names_function_shapes_and_rule():
    A = [[1.0] * 16 for _ in range(5)]
    B = [[1.0] * 8 for _ in range(8)]
    with pytest.raises(ShapeError, match=r"matmul: A is 5x16 and B is 8x8; A's columns \(16\) must equal B's rows \(8\)"):
        matmul(A, B)


@pytest.mark.parametrize(
    "bad, error, message",
    [
        ([[1, 2], [3]], ShapeError, r"matmul: A is ragged: row 0 has 2 entries but row 1 has 1"),
        ([], ShapeError, r"matmul: A is empty \(0 rows\)"),
        ([[]], ShapeError, r"matmul: A has empty rows"),
        ([[1, "2"]], TypeError, r"matmul: A\[0\]\[1\] is '2' \(str\); entries must be int or float"),
        ([[1, True]], TypeError, r"matmul: A\[0\]\[1\] is True \(bool\)"),
        ([1, 2], TypeError, r"matmul: A\[0\] must be a row"),
        ("ab", TypeError, r"matmul: A must be a list of rows"),
    ],
)
def test_matmul_rejects_bad_matrices(bad, error, message):
    with pytest.raises(error, match=message):
        matmul(bad, [[1], [1]])


def test_other_shape_errors():
    with pytest.raises(ShapeError, match=r"add: A is 1x2 and B is 2x1; both must have the same shape"):
        add([[1, 2]], [[1], [2]])
    with pytest.raises(ShapeError, match=r"add_row: M is 1x2 and b has 3 entries"):
        add_row([[1, 2]], [1, 2, 3])
    with pytest.raises(ShapeError, match=r"dot: u has 2 entries and v has 3"):
        dot([1, 2], [1, 2, 3])
    with pytest.raises(ShapeError, match=r"split_heads: M is 1x4; its 4 columns cannot be cut into 3"):
        split_heads([[1, 2, 3, 4]], 3)
    with pytest.raises(ShapeError, match=r"concat_heads: heads\[0\] is 2x1 but heads\[1\] is 1x1"):
        concat_heads([[[1], [2]], [[3]]])
    with pytest.raises(ShapeError, match=r"split_rows: M has 2 rows but the sizes \[1\] add up to 1"):
        split_rows([[1], [2]], [1])
    with pytest.raises(TypeError, match=r"scale: c must be a number"):
        scale([[1]], "2")


def test_no_function_mutates_its_arguments():
    A = [[1.0, 2.0], [3.0, 4.0]]
    B = [[5.0, 6.0], [7.0, 8.0]]
    before = copy.deepcopy((A, B))
    matmul(A, B), transpose(A), add(A, B), scale(A, 2), add_row(A, [1.0, 1.0])
    heads = split_heads(A, 2)
    heads[0][0][0] = 99.0  # the blocks are new lists, not views of A
    concat_heads([A, B])
    assert (A, B) == before


def test_results_are_new_lists():
    A = [[1.0, 2.0]]
    assert transpose(transpose(A)) is not A
    assert scale(A, 1)[0] is not A[0]
    assert math.isfinite(matmul(A, [[1.0], [1.0]])[0][0])
