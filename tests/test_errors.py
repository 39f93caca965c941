"""The error promise, for every public function: bad input raises ShapeError, ValueError or
TypeError at the function called, the message starts with that function's name, and no
argument is changed."""

import functools
import math
import random

import pytest

import mha_lists
from mha_lists import ShapeError
from mha_lists.core import attention as multi_head
from mha_lists.core import attention as one_head
from mha_lists.core import checks, gradients, matrix
from mha_lists.core import softmax_and_masks as masks
from mha_lists.core import softmax_and_masks as softmax_module
from mha_lists.teaching import block, cost, decoding, display, example, strided, torch_init, training, weights
from mha_lists.teaching.strided import Strided

NAN, INF = math.nan, math.inf
GOOD_W = weights.init_mha_weights(4, 2, seed=0)
GOOD_X = [[0.1, 0.2, 0.3, 0.4], [0.5, -0.6, 0.7, 0.8], [0.0, 1.0, -1.0, 0.5]]
T = strided.tensor([[[1.0, 2.0], [3.0, 4.0]]])

BAD_SCALARS = [None, "2", 2.5, -1, 0, True, NAN, INF, [1], 10**400]
BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[1e200, 1e200]], [[True, 1.0]], ({1: 2},)]


def weights_with(**changes):
    return GOOD_W._replace(**changes)


BAD_WEIGHTS = [
    None, "w", GOOD_X,
    weights_with(W_O=[[NAN] * 4] * 4),
    weights_with(W_V=[[[INF, 0.0]] * 4, GOOD_W.W_V[1]]),
    weights_with(W_Q=[GOOD_W.W_Q[0]]),
    weights_with(W_K=[]),
    weights_with(b_O=[NAN, 0.0, 0.0, 0.0]),
    weights_with(b_Q=[[0.0, 0.0]]),
    weights_with(b_K=[[0.0, 0.0], [0.0, "x"]]),
]

GOOD_G = [[1.0, -1.0, 0.5, 0.0]] * 3
TOY = training.init_model(3, 4, 4, 2, seed=0)
BAD_GRADS = [M for M in BAD_MATRICES] + [[[1.0] * 4] * 2, [[NAN] * 4] * 3, [[INF] * 4] * 3]
BAD_IDS = [None, [], [0], [0, 3], [0, -1], [0, 1.0], [0, True], [0, 1, 2, 0, 1], "ab"]

# function -> (name its message must start with, good arguments, list of bad argument tuples)
CASES = {
    "matmul": (matrix.matmul, [([[1e155] * 2], [[1e155]] * 2)] + [(M, [[1.0]]) for M in BAD_MATRICES]
               + [([[1.0]], M) for M in BAD_MATRICES if M != [[1e200, 1e200]]]),
    "dot": (matrix.dot, [([1e155, 1e155], [1e155, 1e155]), ([1.0], [NAN]), ([1.0], [1.0, 2.0]), ([], []),
                         (None, [1.0]), ([INF], [-INF]), (["a"], [1.0])]),
    "transpose": (matrix.transpose, [(M,) for M in BAD_MATRICES[:9]]),
    "add": (matrix.add, [([[1e308]], [[1e308]]), ([[1.0]], [[1.0, 2.0]])] + [(M, [[1.0]]) for M in BAD_MATRICES[:9]]),
    "add_row": (matrix.add_row, [([[1.0]], [1.0, 2.0]), ([[1e308]], [1e308]), ([[1.0]], None), ([[1.0]], [])]),
    "scale": (matrix.scale, [([[1.0]], c) for c in (NAN, INF, "2", None, 1e309, [2])] + [([[1e300]], 1e10)]),
    "shape": (matrix.shape, [(M,) for M in BAD_MATRICES[:9]]),
    "split_heads": (matrix.split_heads, [([[1.0, 2.0]], h) for h in BAD_SCALARS if h != 2.5] + [([[1.0, 2.0, 3.0]], 2)]),
    "concat_heads": (matrix.concat_heads, [([],), (None,), ([[[1.0]], [[1.0], [2.0]]],), ([[[1.0]], 5],)]),
    "split_rows": (matrix.split_rows, [([[1.0], [2.0]], s) for s in ([1], [0, 2], [1.5, 0.5], None, [3, -1], ["a"], [])]),
    "softmax": (softmax_module.softmax, [([NAN],), ([INF, 1.0],), ([-INF, -INF],), ([],), (None,), (["a"],)]),
    "softmax_rows": (softmax_module.softmax_rows, [([[NAN]],), ([[-INF]],), ([[]],), ([1.0],)]),
    "entropy": (softmax_module.entropy, [([NAN],), ([-0.5, 1.5],), ([],), (None,)]),
    "causal_mask": (masks.causal_mask, [(n,) for n in BAD_SCALARS if n != 10**400]),
    "padding_mask": (masks.padding_mask, [(["a", "b"], 0), ([1, 2], "0"), ([0, 0], 0), ([], 0), (None, 0),
                                          ([1, 2.5], 0), ([True, 1], 0)]),
    "length_mask": (masks.length_mask, [(3, 2), (0, 2), (1, 2.0), ("1", 2), (1, None)]),
    "combine_masks": (masks.combine_masks, [(), ([[True]], [[True, False]]), ([[1, 0]],), ([[True], None],)]),
    "apply_mask": (masks.apply_mask, [([[1.0, 2.0]], [[True]]), ([[1.0]], [[1]]), ([[1.0]], [[False]])]),
    "kv_head_for": (multi_head.kv_head_for, [(9, 8, 2), (0, 8, 3), (0, 2, 0), (-1, 2, 1), (1.0, 2, 1), (0, 0, 0),
                                             ("0", 2, 1), (0, True, 1)]),
    "attention": (one_head.attention, [([[1.0]], [[1.0, 2.0]], [[1.0]]), ([[1.0]], [[1.0]], [[1.0], [2.0]]),
                                       ([[NAN]], [[1.0]], [[1.0]]), ([[1.0]], [[INF]], [[1.0]]),
                                       ([[1.0]], [[1.0]], [[-INF]]), ([[1e200]], [[1e200]], [[1.0]]),
                                       (None, [[1.0]], [[1.0]])]),
    "multi_head_attention": (multi_head.multi_head_attention, [(GOOD_X, w) for w in BAD_WEIGHTS]
                             + [(M, GOOD_W) for M in BAD_MATRICES] + [([[1e200] * 4], GOOD_W)]),
    "attention_trace": (multi_head.attention_trace, [(GOOD_X, w) for w in BAD_WEIGHTS]
                        + [(M, GOOD_W) for M in BAD_MATRICES]),
    "linear": (multi_head.linear, [([[1.0]], [[1.0, 2.0]], [1.0]), ([[1.0]], [[NAN]]), ([[1.0]], [[1.0]], [NAN])]),
    "decode_step": (decoding.decode_step, [([0.1, 0.2], GOOD_W), ([NAN, 0, 0, 0], GOOD_W), (None, GOOD_W),
                                          ([0.1] * 4, GOOD_W, "cache")] + [([0.1] * 4, w) for w in BAD_WEIGHTS]),
    "init_mha_weights": (functools.partial(weights.init_mha_weights, seed=0), [(16, 3), (16, 0), (16, 2.0), ("16", 2), (None, 2)]),
    "init_matrix": (weights.init_matrix, [(0, 2, random.Random(0)), (2, 2, 0), (2, 2, random.Random(0), "he"),
                                          (2.5, 2, random.Random(0)), (2, 2, None)]),
    "derive_rng": (weights.derive_rng, [(1.5, "x"), ("x", "x"), (None, "x"), (True, "x"), (1, 5)]),
    "parameter_count": (weights.parameter_count, [(w,) for w in BAD_WEIGHTS[:10]]),
    "check_weights": (lambda w: multi_head.check_weights("check_weights", "weights", w), [(w,) for w in BAD_WEIGHTS[:10]]),
    "multiply_adds": (multi_head.multiply_adds, [(0, 16, 2), (5, 16, 3), (5, "16", 2), (5, 16, 2.0), (None, 16, 2)]),
    "tokenize": (example.tokenize, [("",), ("   ",), (None,), (["a"],)]),
    "encode": (example.encode, [(["cats"],), ("I like",), ([1, 2],), (None,), (["I"], [])]),
    "embedding_table": (functools.partial(example.embedding_table, seed=0, name="t"), [(0, 4), (2, 0), (2.0, 4), (2, None)]),
    "embed": (example.embed, [([9], [[1.0]], [[1.0]]), ([0, 0], [[1.0]], [[1.0]]), ([0], [[1.0]], [[1.0, 2.0]]),
                              ([0], [[NAN]], [[1.0]]), (None, [[1.0]], [[1.0]]), ([True], [[1.0]], [[1.0]]),
                              ([0], None, [[1.0]])]),
    "format_matrix": (display.format_matrix, [([[]],), ([1, 2],), ([["a"]],), (None,), ([[1.0], [1.0, 2.0]],)]),
    "print_matrix": (display.print_matrix, [([[]],), ([1, 2],), ([["a"]],), (None,)]),
    "format_number": (display.format_number, [("a",), (None,), ([1.0],)]),
    "heatmap": (display.heatmap, [([[]],), ([1, 2],), ([["a"]],), (None,)]),
    "attention_heatmap": (display.attention_heatmap, [([[]], ["a"]), ([[0.5]], ["a", "b"]), ([[0.5]], None),
                                                      ([[0.5]], 5), (None, ["a"])]),
    "bar_chart": (display.bar_chart, [(["a"], [1.0, 2.0]), (["a"], [-1.0]), (["a"], [NAN]), (5, [1.0]),
                                      (["a"], None), ([], [])]),
    "tensor": (strided.tensor, [([],), ([[1, 2], [3]],), ([[1], 2],)]),
    # Strided's methods, called as Strided.view(t, shape) = t.view(shape), so a non-tensor can be tried as t
    "view": (Strided.view, [(T, (3,)), (T, (0, 4)), (T, None), (None, (4,)), (T, (2.0, 2)),
                            (T.transpose(1, 2), (4,))]),
    "transpose": (Strided.transpose, [(T, 0, 3), (T, -1, 0), (T, "0", 1), (None, 0, 1)]),
    "contiguous": (Strided.contiguous, [(None,), ([[1]],)]),
    "is_contiguous": (Strided.is_contiguous, [(None,), ([[1]],)]),
    "tolist": (Strided.tolist, [(None,), ([[1]],)]),
    "element": (Strided.element, [(T, (0, 0)), (T, (0, 0, 9)), (T, None), (None, (0,)), (T, (0, 0, 0.5))]),
    "storage_index": (Strided.storage_index, [(T, (0, 0)), (T, (1, 0, 0)), (T, "000")]),
    "row_major_strides": (Strided.row_major_strides, [(None,), ((2, 0),), ((2, "3"),), ((),)]),
    "strided_split_heads": (strided.strided_split_heads, [(T, 0), (T, 3), (T, 2.0), (None, 2),
                                                          (strided.tensor([1, 2]), 1),
                                                          (T.transpose(1, 2), 1)]),
    "strided_merge_heads": (strided.strided_merge_heads, [(T,), (None,)]),
    # the backward pass
    "multi_head_attention_backward": (gradients.multi_head_attention_backward,
                                      [(GOOD_X, w, GOOD_G) for w in BAD_WEIGHTS]
                                      + [(M, GOOD_W, GOOD_G) for M in BAD_MATRICES]
                                      + [(GOOD_X, GOOD_W, G) for G in BAD_GRADS]),
    "attention_backward_trace": (gradients.attention_backward_trace,
                                 [(GOOD_X, w, GOOD_G) for w in BAD_WEIGHTS[:4]]
                                 + [(GOOD_X, GOOD_W, G) for G in BAD_GRADS]),
    "attention_backward": (gradients.attention_backward,
                           [([[1.0]], [[1.0, 2.0]], [[1.0]], [[1.0]]), ([[1.0]], [[1.0]], [[1.0], [2.0]], [[1.0]]),
                            ([[NAN]], [[1.0]], [[1.0]], [[1.0]]), ([[1.0]], [[1.0]], [[1.0]], [[INF]]),
                            ([[1.0]], [[1.0]], [[1.0]], [[1.0, 2.0]]), ([[1.0]], [[1.0]], [[1.0]], None),
                            (None, [[1.0]], [[1.0]], [[1.0]])]),
    "softmax_backward": (gradients.softmax_backward, [([0.5, 0.5], [1.0]), ([NAN], [1.0]), ([1.0], [INF]),
                                                      ([], []), (None, [1.0]), (["a"], [1.0])]),
    "softmax_jacobian": (gradients.softmax_jacobian, [([NAN],), ([],), (None,), (["a"],)]),
    "column_sums": (gradients.column_sums, [(M,) for M in BAD_MATRICES[:9]]),
    "sum_matrices": (gradients.sum_matrices, [([],), (None,), ([[[1.0]], [[1.0], [2.0]]],), ([[[1.0]], 5],)]),
    # training
    "init_model": (functools.partial(training.init_model, seed=0), [(0, 4, 4, 2), (3, 4, 4, 3), (3, 4, 4.0, 2),
                                                                    (3, None, 4, 2)]),
    "model_from_example": (training.model_from_example, [(None,), (TOY,)]),
    "make_sequences": (training.make_sequences, [(0, 4, 3, random.Random(0)), (2, 4, 3, 0), (2, "4", 3, random.Random(0))]),
    "targets": (training.targets, [([],), (None,), ([1, "a"],)]),
    "forward": (training.forward, [(TOY, ids) for ids in BAD_IDS if ids != [0]] + [(None, [0, 1])]),
    "cross_entropy": (training.cross_entropy, [([[0.0, 0.0]], [2]), ([[0.0, 0.0]], [None]), ([[NAN, 0.0]], [0]),
                                               ([[0.0, 0.0]], [0, 1]), ([[0.0]], None), ([[0.0, 0.0]], [0.5])]),
    "model_gradients": (training.model_gradients, [(TOY, ids) for ids in BAD_IDS] + [(None, [0, 1])]),
    "batch_gradients": (training.batch_gradients, [(TOY, []), (TOY, None), (TOY, [[0, 1], [0, 3]]), (TOY, [[0]])]),
    "flatten": (training.flatten, [(None,), (GOOD_W,)]),
    "unflatten": (training.unflatten, [([0.0], TOY), ([NAN] * 10, None), (None, TOY)]),
    "adam_step": (training.adam_step, [([1.0], [1.0, 2.0], None), ([NAN], [1.0], None), ([1.0], [1.0], "state"),
                                       ([], [], None), (None, [1.0], None)]),
    "train": (lambda model, n: training.train(model, steps=1, batch_size=2, seq_len=n, seed=0),
              [(TOY, 9), (TOY, 1), (TOY, 2.0), (None, 2)]),
    "attention_weights": (training.attention_weights, [(TOY, ids) for ids in BAD_IDS if ids != [0]]),
    "previous_token_weight": (training.previous_token_weight, [([[1.0]],), ([[1.0, 0.0]],), ([[NAN, 0.0], [0.5, 0.5]],),
                                                               (None,)]),
    "previous_token_weights": (training.previous_token_weights, [(TOY, []), (TOY, [[0]]), (TOY, [[0, 7]])]),
    "accuracy": (training.accuracy, [(TOY, []), (TOY, None), (TOY, [[0, 1], [5, 1]])]),
}


def snapshot(obj):
    """Something to compare before and after a call: nested values, a generator by its state."""
    if isinstance(obj, random.Random):
        return ("Random", obj.getstate())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [snapshot(item) for item in obj])
    return repr(obj)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_gets_a_named_error_and_changes_nothing(name):
    func, bad_calls = CASES[name]
    assert bad_calls
    for args in bad_calls:
        before = snapshot(args)
        with pytest.raises((ShapeError, ValueError, TypeError)) as info:
            func(*args)
        assert str(info.value).startswith(f"{name}: "), f"{name}{args!r:.80} said: {info.value}"
        assert snapshot(args) == before, f"{name} changed its arguments"


def test_running_example_reports_under_its_own_name():
    for options in (dict(seed="x"), dict(seed=1.5), dict(embed_std=NAN), dict(embed_std=-1.0),
                    dict(sentence="I like cats"), dict(sentence=""), dict(num_heads=3), dict(bias="no"),
                    dict(init="normal", std=NAN), dict(init="normal", std=-1), dict(init="he"),
                    dict(d_model=0), dict(num_kv_heads=3)):
        with pytest.raises((ValueError, TypeError), match=r"^running_example: "):
            example.running_example(**options)


def test_too_large_values_say_so_and_are_not_blamed_on_the_mask():
    x = [[1e200] * 4 for _ in range(3)]
    for func in (mha_lists.multi_head_attention, mha_lists.attention_trace):
        with pytest.raises(ValueError, match=r"^\w+: the values are too large") as info:
            func(x, GOOD_W)
        assert "mask" not in str(info.value)
    with pytest.raises(ValueError, match=r"^multi_head_attention: the values are too large"):
        mha_lists.multi_head_attention(GOOD_X, GOOD_W, scale=1e308)


def test_nan_in_a_weight_is_named_like_nan_in_x():
    bad = weights_with(W_O=[[0.0] * 4, [0.0, 0.0, NAN, 0.0], [0.0] * 4, [0.0] * 4])
    with pytest.raises(ValueError, match=r"^multi_head_attention: weights\.W_O\[1\]\[2\] is nan; entries must be finite"):
        mha_lists.multi_head_attention(GOOD_X, bad)
    bad_x = [row[:] for row in GOOD_X]
    bad_x[2][1] = NAN
    with pytest.raises(ValueError, match=r"^multi_head_attention: x\[2\]\[1\] is nan; entries must be finite"):
        mha_lists.multi_head_attention(bad_x, GOOD_W)


def test_the_public_api_is_small_and_every_name_is_documented():
    assert len(mha_lists.__all__) <= 30
    for name in mha_lists.__all__:
        obj = getattr(mha_lists, name)
        assert obj.__doc__ and obj.__doc__.strip(), name
    assert mha_lists.attention is one_head.attention
    assert callable(mha_lists.attention)


def test_every_public_function_is_in_the_readme():
    """The API table moved from README.md to CONTRIBUTING.md (the README is for learners): every
    public name of every module, and every name of ``mha_lists.__all__``, is in that table's section."""
    import re

    from mha_lists.teaching import paper, pictures
    contributing = (checks.__file__.rsplit("/mha_lists/", 1)[0] + "/CONTRIBUTING.md")
    text = open(contributing, encoding="utf-8").read()
    found = re.search(r"^## The public API$(.*?)(?=^## )", text, re.S | re.M)
    assert found, "CONTRIBUTING.md has no section '## The public API'"
    table = found.group(1)
    for name in mha_lists.__all__:
        assert f"`{name}" in table or re.search(rf"\b{name}\b", table), f"mha_lists.{name} is not in the API section"
    for module in (matrix, weights, masks, softmax_module, one_head, multi_head, decoding, cost, example,
                   display, strided, block, torch_init, gradients, training, paper, pictures):
        for name in getattr(module, "__all__", []):
            assert f"`{name}" in table, f"{module.__name__}.{name} is not in CONTRIBUTING.md's API table"
