"""The door (core/checks.py ``checked``): checks at the door, trust inside, overflow named once."""

import math
from typing import NamedTuple

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


@checked(u="vector n", v="vector n")
def two_vectors(u, v):
    return len(u)


@checked(x="matrix n d_model", weights="weights", why={"d_model": "{name} ({shape}) and {first} ({first_shape}) disagree"})
def matrix_then_weights(x, weights):
    return "fine"


@checked(x="matrix n m")
def no_result_check(x):
    return [[INF]]


@checked(x="matrix n m", finite_result=True)
def overflowing(x):
    return [[INF]]


@checked(x="matrix n m")
def calls_overflowing(x):
    return overflowing(x)


def test_the_default_rule_for_vectors_counts_entries():
    with pytest.raises(ShapeError, match=r"^two_vectors: u has 2 entries and v has 3 entries; u's entries \(2\) must equal v's entries \(3\)$"):
        two_vectors([1, 2], [1, 2, 3])


def test_a_why_can_name_the_argument_met_first_and_the_weights():
    weights = MHAWeights([[[1.0]]], [[[1.0]]], [[[1.0]]], [[1.0]])
    assert matrix_then_weights([[1.0]], weights) == "fine"
    with pytest.raises(ShapeError, match=r"^matrix_then_weights: weights \(weights\) and x \(1x2\) disagree$"):
        matrix_then_weights([[1.0, 2.0]], weights)


def test_results_are_looked_at_only_where_asked_and_only_from_outside():
    assert no_result_check([[1.0]]) == [[INF]]
    with pytest.raises(ValueError, match=r"^overflowing: the values are too large"):
        overflowing([[1.0]])
    assert calls_overflowing([[1.0]]) == [[INF]]  # inside, its result is trusted (no inside=True)


def test_numbers_vectors_and_huge_ints_in_results_are_overflows_too():
    from mha_lists import add, dot, decode_step, init_mha_weights
    with pytest.raises(ValueError, match=r"^dot: the values are too large"):
        dot([1e308, 1e308], [10, 10])
    with pytest.raises(ValueError, match=r"^add: the values are too large"):
        add([[10**308]], [[10**308]])
    w = init_mha_weights(2, 1, seed=0)
    big = w._replace(W_O=[[1e308, 1e308], [1e308, 1e308]])
    with pytest.raises(ValueError, match=r"^decode_step: the values are too large"):
        decode_step([1e10, 1e10], big)


def test_multiply_adds_accepts_heads_that_divide_d_model():
    assert multiply_adds(4, 12, 3) == {"Q": 4 * 12 * 12, "K": 4 * 12 * 12, "V": 4 * 12 * 12,
                                        "scores": 3 * 4 * 4 * 4, "weighted_sum": 3 * 4 * 4 * 4, "W_O": 4 * 12 * 12}


def test_the_backward_trace_keeps_a_copy_of_grad_output():
    from mha_lists import init_mha_weights
    from mha_lists.core.gradients import attention_backward_trace
    G = [[1.0, 2.0], [3.0, 4.0]]
    trace = attention_backward_trace([[1.0, 0.0], [0.0, 1.0]], init_mha_weights(2, 1, seed=0), G)
    assert trace.grad_output == G and trace.grad_output is not G


def test_all_numbers_is_the_fast_test_and_says_no_to_anything_else():
    from mha_lists.core.checks import all_numbers
    assert all_numbers([[[1.0, 2]], [[3.5]]]) is True
    assert all_numbers([[[1.0, INF]]]) is True and all_numbers([[[1.0, INF]]], finite=True) is False
    assert all_numbers([[[1.0, math.nan]]], finite=True) is False
    assert all_numbers([[[10**400]]], finite=True) is False
    for bad in ([], [[]], [[[]]], ([[1.0]],), [[(1.0,)]], [[[1.0, 2.0], [3.0]]], [[[True]]], [[["1"]]],
                [[[None]]], [[[1.0]], "x"], [[[1.0]], [(2.0,)]]):
        assert all_numbers(bad) is False, bad


def test_weights_are_checked_again_after_any_change_in_place():
    from mha_lists import init_mha_weights, multi_head_attention
    w = init_mha_weights(4, 2, seed=3)
    x = [[1.0, 0.5, -0.5, 0.25], [0.0, 1.0, 2.0, -1.0]]
    multi_head_attention(x, w)  # checked once, remembered
    w.W_K[1][2][0] = math.nan  # one number, deep inside, changed in place
    with pytest.raises(ValueError, match=r"^multi_head_attention: weights\.W_K\[1\]\[2\]\[0\] is nan; entries must be finite"):
        multi_head_attention(x, w)
    w.W_K[1][2][0] = True
    with pytest.raises(TypeError, match=r"^multi_head_attention: weights\.W_K\[1\]\[2\]\[0\] is True"):
        multi_head_attention(x, w)
    w.W_K[1][2][0] = 0.5
    before = multi_head_attention(x, w)
    w.W_O.append([1.0, 2.0, 3.0, 4.0])  # a row too many
    with pytest.raises(ShapeError, match=r"^multi_head_attention: W_O is 5x4"):
        multi_head_attention(x, w)
    w.W_O.pop()
    last = w.W_Q[0][0].pop()  # a ragged head
    with pytest.raises(ShapeError, match=r"^multi_head_attention: weights\.W_Q\[0\] is ragged"):
        multi_head_attention(x, w)
    w.W_Q[0][0].append(last)
    assert multi_head_attention(x, w) == before  # the weights as they were: the same bits
    b = w._replace(b_O=[0.0, 0.0, 0.0, 0.0])
    multi_head_attention(x, b)
    b.b_O[3] = math.inf
    with pytest.raises(ValueError, match=r"^multi_head_attention: weights\.b_O\[3\] is inf"):
        multi_head_attention(x, b)


def test_equal_weights_in_another_object_give_the_same_bits():
    from mha_lists import init_mha_weights, multi_head_attention
    w = init_mha_weights(4, 2, seed=3)
    x = [[1.0, 0.5, -0.5, 0.25], [0.0, 1.0, 2.0, -1.0]]
    copy = MHAWeights(*[[[list(row) for row in M] for M in group] for group in w[:3]], [list(r) for r in w.W_O])
    assert multi_head_attention(x, w) == multi_head_attention(x, copy) == multi_head_attention(x, w)


def test_the_same_unchanged_weights_are_not_checked_again(monkeypatch):
    from mha_lists import init_mha_weights, multi_head_attention
    from mha_lists.core import attention as attention_module
    w = init_mha_weights(4, 2, seed=5)
    x = [[1.0, 0.5, -0.5, 0.25]]
    first = multi_head_attention(x, w)

    def checked_again(*args, **kwargs):
        raise AssertionError("the entries were checked again")
    monkeypatch.setattr(attention_module, "all_numbers", checked_again)
    assert multi_head_attention(x, w) == first  # remembered: no entry is looked at
    other = init_mha_weights(4, 2, seed=5)  # equal, but another object: checked
    with pytest.raises(AssertionError, match="checked again"):
        multi_head_attention(x, other)


def test_a_usual_call_is_bound_without_inspect_and_an_unusual_one_with_it(monkeypatch):
    import inspect
    calls = []
    bind = inspect.Signature.bind

    def counted(self, *args, **kwargs):
        calls.append(args)
        return bind(self, *args, **kwargs)
    monkeypatch.setattr(inspect.Signature, "bind", counted)
    A, B = [[1.0, 2.0]], [[3.0], [4.0]]
    assert matmul(A, B) == matmul(A, B=B) == matmul(B=B, A=A) == [[11.0]]
    assert calls == []
    for bad in (lambda: matmul(A), lambda: matmul(A, B, B), lambda: matmul(A, A=A), lambda: matmul(A, C=B)):
        with pytest.raises(TypeError, match=r"^matmul: "):
            bad()
    assert len(calls) == 4


def test_a_str_kind_and_the_quick_binding_keep_inspects_words():
    @checked(s="str", t="optional str")
    def words(s, t=None):
        return s if t is None else s + t
    assert words("a") == "a" and words("a", t="b") == "ab"
    with pytest.raises(TypeError, match=r"^words: s must be a str, got 3 \(int\)$"):
        words(3)
    with pytest.raises(TypeError, match=r"^words: t must be a str, got \['b'\] \(list\)$"):
        words("a", ["b"])
    with pytest.raises(TypeError, match=r"^matmul: multiple values for argument 'A'$"):
        matmul([[1.0]], [[1.0]], A=[[1.0]])
    with pytest.raises(TypeError, match=r"^matmul: got an unexpected keyword argument 'C'$"):
        matmul([[1.0]], [[1.0]], C=[[1.0]])


def test_a_vector_of_the_wrong_type_and_ints_too_large_for_a_float():
    from mha_lists import softmax
    from mha_lists.core.checks import _finite, all_finite
    with pytest.raises(TypeError, match=r"^softmax: v must be a list of numbers, got str$"):
        softmax("abc")
    assert all_finite([[1.0, 10**400]]) is False and all_finite([[1.0, 10**300]]) is True
    assert _finite([1.0, 10**400]) is False and _finite(10**400) is False and _finite([1.0, 2]) is True


def test_a_registered_kind_may_name_its_sizes_and_a_door_may_be_called_otherwise():
    from mha_lists.core.checks import kind

    class Sized(NamedTuple):
        n: int

    @kind("test sized thing")
    def _sized(func, name, value, expected):  # the sizes a kind names come as a NamedTuple
        return Sized(len(value))

    @checked(A="matrix n m", thing="test sized thing", called="Thing")
    def make(A, thing):
        return len(A)
    assert make([[1.0], [2.0]], "ab") == 2
    with pytest.raises(ShapeError, match=r"^Thing: A is 2x1 and thing; A's rows \(2\) must equal thing's  \(3\)$"):
        make([[1.0], [2.0]], "abc")


def test_every_public_function_of_the_core_and_the_teaching_modules_opens_a_door():
    """One mechanism everywhere: a public function checks through @checked (it has a .contract);
    the check helpers themselves, the door's machinery, show (any object), a command's main (argparse
    checks it) and a function with no parameters are the exceptions."""
    import importlib
    import inspect
    import pkgutil

    import mha_lists
    machinery = {"describe", "quote_int", "call_outside", "is_number", "all_numbers", "too_large", "all_finite", "kind", "checked", "show"}
    open_doors, missing = 0, []
    for info in pkgutil.walk_packages(mha_lists.__path__, "mha_lists."):
        module = importlib.import_module(info.name)
        layer = info.name.split(".")[1] if info.name.count(".") >= 2 else ""
        for name, obj in vars(module).items():
            if not inspect.isfunction(getattr(obj, "__wrapped__", obj)) or name.startswith("_"):
                continue
            if getattr(obj, "__module__", None) != info.name or name.startswith("check_") or name in machinery:
                continue
            if name == "main" or not inspect.signature(obj).parameters:
                continue
            if layer in ("core", "teaching") or name in getattr(module, "__all__", ()):
                if hasattr(obj, "contract"):
                    open_doors += 1
                else:
                    missing.append(f"{info.name}.{name}")
    assert missing == [] and open_doors > 100, (missing, open_doors)


def test_the_head_loop_refuses_a_nan_by_name_not_as_an_overflow():
    with pytest.raises(ValueError, match=r"^each_head: Q\[0\]\[0\]\[0\] is nan; entries must be finite numbers$"):
        each_head([[[math.nan, 0.0]]], [[[1.0, 0.0]]], [[[2.0]]])
    with pytest.raises(ValueError, match=r"^each_head: V\[0\]\[1\]\[0\] is inf; entries must be finite numbers$"):
        each_head([[[1.0, 0.0]]], [[[1.0, 0.0], [0.0, 1.0]]], [[[2.0], [math.inf]]])


def test_the_sums_of_the_backward_pass_refuse_nan_by_name():
    from mha_lists.core.gradients import column_sums
    with pytest.raises(ValueError, match=r"^column_sums: M\[1\]\[0\] is nan; entries must be finite numbers$"):
        column_sums([[1.0], [math.nan]])
    with pytest.raises(ValueError, match=r"^sum_matrices: Ms\[1\]\[0\]\[0\] is inf; entries must be finite numbers$"):
        sum_matrices([[[1.0]], [[math.inf]]])
    with pytest.raises(ValueError, match=r"^column_sums: the values are too large"):
        column_sums([[1e308], [1e308]])


def test_a_score_that_overflows_to_minus_inf_is_not_taken_for_a_masked_key():
    from mha_lists import attention, multi_head_attention
    Q, K, V = [[1e150, 0.0]], [[-1e150, 0.0], [1.0, 0.0]], [[1.0], [2.0]]  # q . k = -1e300: finite
    assert attention(Q, K, V, scale=1e-300) == [[1.731058578630005]]
    with pytest.raises(ValueError, match=r"^attention: the values are too large"):
        attention(Q, K, V, scale=1e10)  # -1e310 is -inf: it would have looked masked
    w = MHAWeights([[[1e75, 0.0], [0.0, 1.0]]], [[[-1e75, 0.0], [0.0, 1.0]]], [[[1.0, 0.0], [0.0, 1.0]]],
                   [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"^multi_head_attention: the values are too large"):
        multi_head_attention([[1e75, 0.0], [1e75, 1.0]], w, scale=1e10)
