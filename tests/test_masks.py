"""teaching/masks.py: masks for padded batches. Hand-worked cases, the messages, bad sizes and ids, no mutation."""

import pytest

from mha_lists import ShapeError, causal_mask, combine_masks, padding_mask
from mha_lists.core.softmax_and_masks import MAX_MASK_SIDE
from mha_lists.teaching.masks import length_mask
from bad_inputs import assert_no_mutation, assert_template, refused
from test_checks import MESSAGES as SHARED

SIDE = MAX_MASK_SIDE
NAN = float("nan")

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "padding ids": "padding_mask: token_ids must be a non-empty list of ints, got {value}",
    "padding all pad": "padding_mask: every token id is the pad id {pad}; no key is left to attend to",
    "length longer": "length_mask: length {length} is longer than seq_len {seq_len}",
    "combine none": "combine_masks: give at least one mask",
    "combine shapes": "combine_masks: masks[0] is {first} but masks[{t}] is {found}; masks must have the same shape",
    "padding side": SHARED["past most"],
}

BAD_CALLS = {
    "padding ids": (ShapeError, lambda: padding_mask([], 0), dict(value="[]")),
    "padding all pad": (ValueError, lambda: padding_mask([0, 0], 0), dict(pad=0)),
    "length longer": (ValueError, lambda: length_mask(3, 2), dict(length=3, seq_len=2)),
    "combine none": (ShapeError, lambda: combine_masks(), {}),
    "combine shapes": (ShapeError, lambda: combine_masks(causal_mask(2), causal_mask(2), causal_mask(3)),
                       dict(first="2x2", t=2, found="3x3")),
    "padding side": (ValueError, lambda: padding_mask([1, 0], 0, num_queries=SIDE + 1),
                     dict(func="padding_mask", name="num_queries", value=SIDE + 1, most="4,096")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


BAD_MASKS = [None, 5, [], [[]], [True], [[True], [True, False]], [[1, 0]], [[True, None]], [["yes"]],
             [[True, True]] * 2 + [[True]]]
BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, 10**400, SIDE + 1, 10**9]


def test_mask_builders():
    assert causal_mask(2) == [[True, False], [True, True]]
    assert causal_mask(3) == [[True, False, False], [True, True, False], [True, True, True]]
    assert padding_mask([1, 3, 0, 0], 0)[2] == [True, True, False, False]
    assert padding_mask([1, 0], 0, num_queries=3) == [[True, False]] * 3
    assert padding_mask([5, 0, 7], 0, num_queries=1) == [[True, False, True]]
    assert length_mask(2, 4) == padding_mask([1, 3, 0, 0], 0)
    assert length_mask(3, 3) == [[True, True, True]] * 3
    assert length_mask(1, 3, num_queries=2) == [[True, False, False]] * 2
    assert combine_masks(causal_mask(3), length_mask(2, 3)) == [
        [True, False, False], [True, True, False], [True, True, False]]


def test_combine_masks_of_one_and_of_non_square_masks():
    a = [[True, False, True], [False, True, True]]
    b = [[True, True, False], [True, True, True]]
    assert combine_masks(a) == a and combine_masks(a) is not a
    assert combine_masks(a, b) == [[True, False, False], [False, True, True]]


@pytest.mark.parametrize("mask", BAD_MASKS, ids=range(len(BAD_MASKS)))
def test_combine_masks_refuses_a_bad_mask(mask):
    refused("combine_masks", lambda: combine_masks(mask))
    refused("combine_masks", lambda: combine_masks([[True]], mask))


@pytest.mark.parametrize("n", BAD_SIZES, ids=range(len(BAD_SIZES)))
def test_mask_builders_refuse_a_bad_size(n):
    refused("causal_mask", lambda: causal_mask(n))
    if n is not None:  # num_queries=None is the default: as many queries as keys
        refused("padding_mask", lambda: padding_mask([1, 0], 0, num_queries=n))
        refused("length_mask", lambda: length_mask(1, 2, num_queries=n))
    if not isinstance(n, int) or isinstance(n, bool) or abs(n) >= 10**100:  # any int is a token id
        refused("padding_mask", lambda: padding_mask([1, n], 0))
    refused("length_mask", lambda: length_mask(1, n))
    refused("length_mask", lambda: length_mask(n, 2))


def test_bad_token_ids_are_refused():
    for ids in (None, "ab", [], (), [0, 0], {1: 2}, [1.5], [None]):
        refused("padding_mask", lambda: padding_mask(ids, 0))
    refused("padding_mask", lambda: padding_mask([1, 0], 10**400))



@pytest.mark.parametrize("call, args", [
    (padding_mask, ([1, 0], 0)), (combine_masks, ([[True, False]], [[True, True]])),
    (combine_masks, ([[True]], [[True, False]])), (length_mask, (1, 2)),
])
def test_every_function_leaves_its_arguments_alone(call, args):
    assert_no_mutation(call, *args)


def test_results_are_new_lists():
    M = [[True, False]]
    assert combine_masks(M)[0] is not M[0]
    rows = padding_mask([1, 0], 0, num_queries=2)
    rows[0][0] = False
    assert rows[1][0] is True  # each query's row is a list of its own
