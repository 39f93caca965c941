"""The door (core/checks.py ``checked``): checks at the door, trust inside, overflow named once."""

import math

import pytest

from mha_lists import MHAWeights, ShapeError, causal_mask, matmul
from mha_lists.core.attention import each_head, multiply_adds
from mha_lists.core.checks import checked, too_large
from mha_lists.core.gradients import sum_matrices

INF = math.inf


@checked(A="matrix n m", B="finite matrix m p", finite_result=True)
def product(A, B):
    return matmul(A, B)


@checked(x="matrix T d", y="optional matrix T_k d", same={"T_k": "T"}, mask="optional mask T T_k",
         why={"d": "{name} is {shape} but x has {expected} columns ({T} rows so far)"})
def pair(x, y=None, *, mask=None):
    return len(x)


@checked(x="matrix n m")
def outer(x):
    return inner(x)  # inner's own check (finite entries) is not run again here


@checked(x="finite matrix n m")
def inner(x):
    return "inner ran"


def test_sizes_named_twice_must_agree_and_the_message_names_both_arguments():
    assert product([[1, 2]], [[3], [4]]) == [[11.0]]
    with pytest.raises(ShapeError, match=r"^product: A is 1x2 and B is 1x1; A's columns \(2\) must equal B's rows \(1\)$"):
        product([[1, 2]], [[3]])


def test_a_why_with_fields_is_the_whole_message():
    with pytest.raises(ShapeError, match=r"^pair: y is 2x3 but x has 2 columns \(2 rows so far\)$"):
        pair([[1, 2], [3, 4]], [[1, 2, 3], [4, 5, 6]])


def test_same_gives_a_size_no_argument_gave():
    assert pair([[1, 2], [3, 4]], mask=causal_mask(2)) == 2
    with pytest.raises(ShapeError, match=r"^pair: mask is 2x3; it must be \(queries, keys\) = 2x2$"):
        pair([[1, 2], [3, 4]], mask=[[True, False, False], [True, True, False]])
    assert pair([[1, 2]], [[1, 2], [3, 4]], mask=[[True, True]]) == 1  # T_k from y


def test_the_wrong_number_of_arguments_is_named():
    with pytest.raises(TypeError, match=r"^product: missing a required argument: 'B'$"):
        product([[1]])


def test_inside_a_checked_function_arguments_are_trusted():
    assert outer([[INF]]) == "inner ran"  # inner alone refuses it:
    with pytest.raises(ValueError, match=r"^inner: x\[0\]\[0\] is inf; entries must be finite numbers$"):
        inner([[INF]])


def test_an_overflow_inside_is_named_after_the_function_called():
    with pytest.raises(ValueError, match=r"^product: the values are too large") as info:
        product([[1e300, 1e300]], [[1e300], [1e300]])
    assert info.value.__cause__ is None or isinstance(info.value.__cause__, (OverflowError, ValueError))
    assert str(too_large("f")).startswith("f: the values are too large")


def test_a_spec_that_names_no_kind_is_refused_when_declared():
    with pytest.raises(ValueError, match=r"^checked: x='tensor n m' names no kind of argument"):
        checked(x="tensor n m")


def test_each_head_checks_its_own_arguments():
    Q = [[[1.0, 0.0]], [[0.0, 1.0]]]
    K = [[[1.0, 0.0], [0.0, 1.0]]]
    V = [[[1.0], [3.0]]]
    assert [h.output for h in each_head(Q, K, V, scale=100.0)] == [[[1.0]], [[3.0]]]
    with pytest.raises(ShapeError, match=r"^each_head: 3 query heads and 2 key/value heads; num_kv_heads must divide"):
        each_head(Q + Q[:1], K + K, V + V)
    with pytest.raises(TypeError, match=r"^each_head: step must be a function"):
        each_head(Q, K, V, step=42)
    with pytest.raises(ShapeError, match=r"^each_head: per_head\[0\] must be a list with one entry per query head \(2\)"):
        each_head(Q, K, V, per_head=([1],))
    with pytest.raises(ShapeError, match=r"^each_head: per_head\[1\] must be a list"):
        each_head(Q, K, V, per_head=([1, 2], "ab"))
    seen = each_head(Q, K, V, step=lambda q, k, v, extra, *, mask, scale: (extra, len(k)), per_head=(["a", "b"],))
    assert seen == [("a", 2), ("b", 2)]
    with pytest.raises(ShapeError, match=r"^each_head: .*keys and values need the same number of heads"):
        each_head(Q, K, V + V)


def test_multiply_adds_needs_d_k_and_d_v_when_the_heads_do_not_divide_d_model():
    with pytest.raises(ShapeError, match=r"^multiply_adds: d_model 10 is not divisible by num_heads 3; pass d_k and d_v$"):
        multiply_adds(4, 10, 3)
    with pytest.raises(ShapeError, match=r"^multiply_adds: d_model 10 is not divisible"):
        multiply_adds(4, 10, 3, d_k=2)
    with pytest.raises(ShapeError, match=r"^multiply_adds: d_model 10 is not divisible"):
        multiply_adds(4, 10, 3, d_v=2)
    assert multiply_adds(4, 10, 3, d_k=2, d_v=5)["W_O"] == 4 * 3 * 5 * 10


def test_sum_matrices_names_the_matrix_of_another_shape():
    with pytest.raises(ShapeError, match=r"^sum_matrices: Ms must be a non-empty list of matrices$"):
        sum_matrices([])
    with pytest.raises(ShapeError, match=r"^sum_matrices: Ms\[0\] is 1x2 but Ms\[2\] is 2x1; every matrix must have the same shape$"):
        sum_matrices([[[1, 2]], [[3, 4]], [[1], [2]]])
    with pytest.raises(TypeError, match=r"^sum_matrices: Ms\[1\]\[0\]\[0\] is 'x'"):
        sum_matrices([[[1]], [["x"]]])


def test_weights_are_checked_whole_and_named():
    good = MHAWeights([[[1.0]]], [[[1.0]]], [[[1.0]]], [[1.0]])
    bad = good._replace(W_K=[[[1.0, 2.0]]])
    from mha_lists import multi_head_attention
    assert multi_head_attention([[1.0]], good) == [[1.0]]
    with pytest.raises(ShapeError, match=r"^multi_head_attention: W_Q heads are 1x1 but W_K heads are 1x2"):
        multi_head_attention([[1.0]], bad)
    with pytest.raises(ValueError, match=r"^multi_head_attention: weights\.W_V\[0\]\[0\]\[0\] is nan"):
        multi_head_attention([[1.0]], good._replace(W_V=[[[math.nan]]]))
