"""Exact error messages: each names the function called, the argument, and the rule.

The messages are part of what a learner reads, so a change to any of them (a wrong argument
name, a lost rule) should fail a test. Written from the rules, and read one by one.
"""

import math
import random

import pytest

from mha_lists import ShapeError, init_mha_weights, multi_head_attention
from mha_lists.core import attention as multi_head
from mha_lists.core import attention as one_head
from mha_lists.core import matrix
from mha_lists.core import softmax_and_masks as masks
from mha_lists.core import softmax_and_masks as scores_to_weights
from mha_lists.teaching import weights

NAN, INF = math.nan, math.inf
FUNCTIONS = {
    "matmul": matrix.matmul, "dot": matrix.dot, "transpose": matrix.transpose, "add": matrix.add,
    "add_row": matrix.add_row, "scale": matrix.scale, "shape": matrix.shape, "split_heads": matrix.split_heads,
    "concat_heads": matrix.concat_heads, "split_rows": matrix.split_rows,
    "softmax": scores_to_weights.softmax, "softmax_rows": scores_to_weights.softmax_rows,
    "entropy": scores_to_weights.entropy, "attention": one_head.attention, "kv_head_for": multi_head.kv_head_for,
    "linear": multi_head.linear, "causal_mask": masks.causal_mask, "padding_mask": masks.padding_mask,
    "length_mask": masks.length_mask, "combine_masks": masks.combine_masks, "apply_mask": masks.apply_mask,
}
TOO_LARGE = "the values are too large: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

CASES = [
    ('matmul', ([[1e+155, 1e+155]], [[1e+155], [1e+155]]), ValueError, f"matmul: {TOO_LARGE}"),
    ('matmul', (None, [[1.0]]), TypeError, 'matmul: A must be a list of rows, got NoneType'),
    ('matmul', (5, [[1.0]]), TypeError, 'matmul: A must be a list of rows, got int'),
    ('matmul', ('ab', [[1.0]]), TypeError, 'matmul: A must be a list of rows, got str'),
    ('matmul', ([], [[1.0]]), ShapeError, 'matmul: A is empty (0 rows); a matrix needs at least one row'),
    ('matmul', ([[]], [[1.0]]), ShapeError, 'matmul: A has empty rows (0 columns); a matrix needs at least one column'),
    ('matmul', ([1, 2], [[1.0]]), TypeError, 'matmul: A[0] must be a row (a list of numbers), got int; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('matmul', ([[1, 2], [3]], [[1.0]]), ShapeError, 'matmul: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length'),
    ('matmul', ([[1, None]], [[1.0]]), TypeError, "matmul: A[0][1] is None (NoneType); entries must be int or float"),
    ('matmul', ([['a']], [[1.0]]), TypeError, "matmul: A[0][0] is 'a' (str); entries must be int or float"),
    ('matmul', ([[INF]], [[1.0]]), ValueError, 'matmul: A[0][0] is inf; entries must be finite numbers'),
    ('matmul', (({1: 2},), [[1.0]]), TypeError, 'matmul: A[0] must be a row (a list of numbers), got dict; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('matmul', ([[1.0]], None), TypeError, 'matmul: B must be a list of rows, got NoneType'),
    ('matmul', ([[1.0]], 5), TypeError, 'matmul: B must be a list of rows, got int'),
    ('matmul', ([[1.0]], 'ab'), TypeError, 'matmul: B must be a list of rows, got str'),
    ('matmul', ([[1.0]], []), ShapeError, 'matmul: B is empty (0 rows); a matrix needs at least one row'),
    ('matmul', ([[1.0]], [[]]), ShapeError, 'matmul: B has empty rows (0 columns); a matrix needs at least one column'),
    ('matmul', ([[1.0]], [1, 2]), TypeError, 'matmul: B[0] must be a row (a list of numbers), got int; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('matmul', ([[1.0]], [[1, 2], [3]]), ShapeError, 'matmul: B is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length'),
    ('matmul', ([[1.0]], [[1, None]]), TypeError, 'matmul: B[0][1] is None (NoneType); entries must be int or float'),
    ('matmul', ([[1.0]], [['a']]), TypeError, "matmul: B[0][0] is 'a' (str); entries must be int or float"),
    ('matmul', ([[1.0]], [[NAN, 1.0]]), ValueError, 'matmul: B[0][0] is nan; entries must be finite numbers'),
    ('matmul', ([[1.0]], [[INF]]), ValueError, 'matmul: B[0][0] is inf; entries must be finite numbers'),
    ('matmul', ([[1.0]], [[True, 1.0]]), TypeError, 'matmul: B[0][0] is True (bool); entries must be int or float'),
    ('matmul', ([[1.0]], ({1: 2},)), TypeError, 'matmul: B[0] must be a row (a list of numbers), got dict; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('dot', ([1e+155, 1e+155], [1e+155, 1e+155]), ValueError, f"dot: {TOO_LARGE}"),
    ('dot', ([1.0], [NAN]), ValueError, 'dot: v[0] is nan; entries must be finite numbers'),
    ('dot', ([1.0], [1.0, 2.0]), ShapeError, 'dot: u has 1 entries and v has 2; they must have the same length'),
    ('dot', ([], []), ShapeError, 'dot: u is empty; a vector needs at least one entry'),
    ('dot', (None, [1.0]), TypeError, 'dot: u must be a list of numbers, got NoneType'),
    ('dot', ([INF], [-INF]), ValueError, 'dot: u[0] is inf; entries must be finite numbers'),
    ('dot', (['a'], [1.0]), TypeError, "dot: u[0] is 'a' (str); entries must be int or float"),
    ('transpose', (None,), TypeError, 'transpose: M must be a list of rows, got NoneType'),
    ('transpose', (5,), TypeError, 'transpose: M must be a list of rows, got int'),
    ('transpose', ('ab',), TypeError, 'transpose: M must be a list of rows, got str'),
    ('transpose', ([],), ShapeError, 'transpose: M is empty (0 rows); a matrix needs at least one row'),
    ('transpose', ([[]],), ShapeError, 'transpose: M has empty rows (0 columns); a matrix needs at least one column'),
    ('transpose', ([1, 2],), TypeError, 'transpose: M[0] must be a row (a list of numbers), got int; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('transpose', ([[1, 2], [3]],), ShapeError, 'transpose: M is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length'),
    ('transpose', ([[1, None]],), TypeError, 'transpose: M[0][1] is None (NoneType); entries must be int or float'),
    ('transpose', ([['a']],), TypeError, "transpose: M[0][0] is 'a' (str); entries must be int or float"),
    ('add', ([[1e+308]], [[1e+308]]), ValueError, f"add: {TOO_LARGE}"),
    ('add', ([[1.0]], [[1.0, 2.0]]), ShapeError, 'add: A is 1x1 and B is 1x2; both must have the same shape'),
    ('add', (None, [[1.0]]), TypeError, 'add: A must be a list of rows, got NoneType'),
    ('add', (5, [[1.0]]), TypeError, 'add: A must be a list of rows, got int'),
    ('add', ('ab', [[1.0]]), TypeError, 'add: A must be a list of rows, got str'),
    ('add', ([], [[1.0]]), ShapeError, 'add: A is empty (0 rows); a matrix needs at least one row'),
    ('add', ([[]], [[1.0]]), ShapeError, 'add: A has empty rows (0 columns); a matrix needs at least one column'),
    ('add', ([1, 2], [[1.0]]), TypeError, 'add: A[0] must be a row (a list of numbers), got int; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('add', ([[1, 2], [3]], [[1.0]]), ShapeError, 'add: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length'),
    ('add', ([[1, None]], [[1.0]]), TypeError, 'add: A[0][1] is None (NoneType); entries must be int or float'),
    ('add', ([['a']], [[1.0]]), TypeError, "add: A[0][0] is 'a' (str); entries must be int or float"),
    ('add_row', ([[1.0]], [1.0, 2.0]), ShapeError, 'add_row: M is 1x1 and b has 2 entries; b needs one entry per column (1)'),
    ('add_row', ([[1e+308]], [1e+308]), ValueError, f"add_row: {TOO_LARGE}"),
    ('add_row', ([[1.0]], None), TypeError, 'add_row: b must be a list of numbers, got NoneType'),
    ('add_row', ([[1.0]], []), ShapeError, 'add_row: b is empty; a vector needs at least one entry'),
    ('scale', ([[1.0]], NAN), ValueError, 'scale: c must be a finite number, got nan'),
    ('scale', ([[1.0]], INF), ValueError, 'scale: c must be a finite number, got inf'),
    ('scale', ([[1.0]], '2'), TypeError, "scale: c must be a number, got '2' (str)"),
    ('scale', ([[1.0]], None), TypeError, 'scale: c must be a number, got None (NoneType)'),
    ('scale', ([[1.0]], [2]), TypeError, 'scale: c must be a number, got [2] (list)'),
    ('scale', ([[1e+300]], 10000000000.0), ValueError, f"scale: {TOO_LARGE}"),
    ('shape', (None,), TypeError, 'shape: M must be a list of rows, got NoneType'),
    ('shape', (5,), TypeError, 'shape: M must be a list of rows, got int'),
    ('shape', ('ab',), TypeError, 'shape: M must be a list of rows, got str'),
    ('shape', ([],), ShapeError, 'shape: M is empty (0 rows); a matrix needs at least one row'),
    ('shape', ([[]],), ShapeError, 'shape: M has empty rows (0 columns); a matrix needs at least one column'),
    ('shape', ([1, 2],), TypeError, 'shape: M[0] must be a row (a list of numbers), got int; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('shape', ([[1, 2], [3]],), ShapeError, 'shape: M is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length'),
    ('shape', ([[1, None]],), TypeError, 'shape: M[0][1] is None (NoneType); entries must be int or float'),
    ('shape', ([['a']],), TypeError, "shape: M[0][0] is 'a' (str); entries must be int or float"),
    ('split_heads', ([[1.0, 2.0]], None), TypeError, 'split_heads: num_heads must be an int, got None (NoneType)'),
    ('split_heads', ([[1.0, 2.0]], '2'), TypeError, "split_heads: num_heads must be an int, got '2' (str)"),
    ('split_heads', ([[1.0, 2.0]], -1), ValueError, 'split_heads: num_heads must be a positive int, got -1'),
    ('split_heads', ([[1.0, 2.0]], 0), ValueError, 'split_heads: num_heads must be a positive int, got 0'),
    ('split_heads', ([[1.0, 2.0]], True), TypeError, 'split_heads: num_heads must be an int, got True (bool)'),
    ('split_heads', ([[1.0, 2.0]], NAN), TypeError, 'split_heads: num_heads must be an int, got nan (float)'),
    ('split_heads', ([[1.0, 2.0]], INF), TypeError, 'split_heads: num_heads must be an int, got inf (float)'),
    ('split_heads', ([[1.0, 2.0]], [1]), TypeError, 'split_heads: num_heads must be an int, got [1] (list)'),
    ('split_heads', ([[1.0, 2.0, 3.0]], 2), ShapeError, 'split_heads: M is 1x3; its 3 columns cannot be cut into 2 blocks of equal width'),
    ('concat_heads', ([],), ShapeError, 'concat_heads: heads must be a non-empty list of matrices'),
    ('concat_heads', ([[[1.0]], [[1.0], [2.0]]],), ShapeError, 'concat_heads: heads[0] is 1x1 but heads[1] is 2x1; every head must have the same number of rows'),
    ('concat_heads', ([[[1.0]], 5],), TypeError, 'concat_heads: heads[1] must be a list of rows, got int'),
    ('split_rows', ([[1.0], [2.0]], [1]), ShapeError, 'split_rows: M has 2 rows but the sizes [1] add up to 1; they must be positive and add up to the number of rows'),
    ('split_rows', ([[1.0], [2.0]], [0, 2]), ValueError, 'split_rows: sizes[0] must be a positive int, got 0'),
    ('split_rows', ([[1.0], [2.0]], [1.5, 0.5]), TypeError, 'split_rows: sizes[0] must be an int, got 1.5 (float)'),
    ('split_rows', ([[1.0], [2.0]], None), TypeError, 'split_rows: sizes must be a non-empty list of positive ints, got None'),
    ('split_rows', ([[1.0], [2.0]], [3, -1]), ValueError, 'split_rows: sizes[1] must be a positive int, got -1'),
    ('split_rows', ([[1.0], [2.0]], ['a']), TypeError, "split_rows: sizes[0] must be an int, got 'a' (str)"),
    ('split_rows', ([[1.0], [2.0]], []), TypeError, 'split_rows: sizes must be a non-empty list of positive ints, got []'),
    ('softmax', ([NAN],), ValueError, 'softmax: entry 0 is nan; scores must be finite numbers or -inf (masked)'),
    ('softmax', ([INF, 1.0],), ValueError, 'softmax: entry 0 is inf; scores must be finite numbers or -inf (masked)'),
    ('softmax', ([-INF, -INF],), ValueError, 'softmax: every score is -inf, so there is no key to attend to; softmax of an empty row is undefined (check the mask)'),
    ('softmax', ([],), ShapeError, 'softmax: v is empty; a vector needs at least one entry'),
    ('softmax', (None,), TypeError, 'softmax: v must be a list of numbers, got NoneType'),
    ('softmax', (['a'],), TypeError, "softmax: v[0] is 'a' (str); entries must be int or float"),
    ('softmax_rows', ([[NAN]],), ValueError, 'softmax_rows: row 0: entry 0 is nan; scores must be finite numbers or -inf (masked)'),
    ('softmax_rows', ([[-INF]],), ValueError, 'softmax_rows: row 0: every score is -inf, so there is no key to attend to; softmax of an empty row is undefined (check the mask)'),
    ('softmax_rows', ([[]],), ShapeError, 'softmax_rows: M has empty rows (0 columns); a matrix needs at least one column'),
    ('softmax_rows', ([1.0],), TypeError, 'softmax_rows: M[0] must be a row (a list of numbers), got float; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('entropy', ([NAN],), ValueError, 'entropy: p[0] is nan; entries must be finite numbers'),
    ('entropy', ([-0.5, 1.5],), ValueError, 'entropy: p has the negative entry -0.5; weights must be >= 0'),
    ('entropy', ([],), ShapeError, 'entropy: p is empty; a vector needs at least one entry'),
    ('entropy', (None,), TypeError, 'entropy: p must be a list of numbers, got NoneType'),
    ('attention', ([[1.0]], [[1.0, 2.0]], [[1.0]]), ShapeError, 'attention: Q is 1x1 and K is 1x2; queries and keys must have the same width d_k to be multiplied'),
    ('attention', ([[1.0]], [[1.0]], [[1.0], [2.0]]), ShapeError, 'attention: K is 1x1 and V is 2x1; there must be one value row per key row'),
    ('attention', ([[NAN]], [[1.0]], [[1.0]]), ValueError, 'attention: Q[0][0] is nan; entries must be finite numbers'),
    ('attention', ([[1.0]], [[INF]], [[1.0]]), ValueError, 'attention: K[0][0] is inf; entries must be finite numbers'),
    ('attention', ([[1.0]], [[1.0]], [[-INF]]), ValueError, 'attention: V[0][0] is -inf; entries must be finite numbers'),
    ('attention', ([[1e+200]], [[1e+200]], [[1.0]]), ValueError, f"attention: {TOO_LARGE}"),
    ('attention', (None, [[1.0]], [[1.0]]), TypeError, 'attention: Q must be a list of rows, got NoneType'),
    ('kv_head_for', (9, 8, 2), ValueError, 'kv_head_for: h is 9; a query head is numbered 0 to 7'),
    ('kv_head_for', (0, 8, 3), ShapeError, 'kv_head_for: num_kv_heads 3 does not divide num_heads 8; each key/value head must serve the same number of query heads'),
    ('kv_head_for', (0, 2, 0), ValueError, 'kv_head_for: num_kv_heads must be a positive int, got 0'),
    ('kv_head_for', (-1, 2, 1), ValueError, 'kv_head_for: h is -1; a query head is numbered 0 to 1'),
    ('kv_head_for', (1.0, 2, 1), TypeError, 'kv_head_for: h must be an int, got 1.0 (float)'),
    ('kv_head_for', (0, 0, 0), ValueError, 'kv_head_for: num_heads must be a positive int, got 0'),
    ('kv_head_for', ('0', 2, 1), TypeError, "kv_head_for: h must be an int, got '0' (str)"),
    ('kv_head_for', (0, True, 1), TypeError, 'kv_head_for: num_heads must be an int, got True (bool)'),
    ('causal_mask', (None,), TypeError, 'causal_mask: seq_len must be an int, got None (NoneType)'),
    ('causal_mask', ('2',), TypeError, "causal_mask: seq_len must be an int, got '2' (str)"),
    ('causal_mask', (2.5,), TypeError, 'causal_mask: seq_len must be an int, got 2.5 (float)'),
    ('causal_mask', (-1,), ValueError, 'causal_mask: seq_len must be a positive int, got -1'),
    ('causal_mask', (0,), ValueError, 'causal_mask: seq_len must be a positive int, got 0'),
    ('causal_mask', (True,), TypeError, 'causal_mask: seq_len must be an int, got True (bool)'),
    ('causal_mask', (NAN,), TypeError, 'causal_mask: seq_len must be an int, got nan (float)'),
    ('causal_mask', (INF,), TypeError, 'causal_mask: seq_len must be an int, got inf (float)'),
    ('causal_mask', ([1],), TypeError, 'causal_mask: seq_len must be an int, got [1] (list)'),
    ('padding_mask', (['a', 'b'], 0), TypeError, "padding_mask: token_ids[0] must be an int, got 'a' (str)"),
    ('padding_mask', ([1, 2], '0'), TypeError, "padding_mask: pad_id must be an int, got '0' (str)"),
    ('padding_mask', ([0, 0], 0), ValueError, 'padding_mask: every token id is the pad id 0; no key is left to attend to'),
    ('padding_mask', ([], 0), ShapeError, 'padding_mask: token_ids must be a non-empty list of ints'),
    ('padding_mask', ([1, 2.5], 0), TypeError, 'padding_mask: token_ids[1] must be an int, got 2.5 (float)'),
    ('padding_mask', ([True, 1], 0), TypeError, 'padding_mask: token_ids[0] must be an int, got True (bool)'),
    ('length_mask', (3, 2), ValueError, 'length_mask: length 3 is longer than seq_len 2'),
    ('length_mask', (0, 2), ValueError, 'length_mask: length must be a positive int, got 0'),
    ('length_mask', (1, 2.0), TypeError, 'length_mask: seq_len must be an int, got 2.0 (float)'),
    ('length_mask', ('1', 2), TypeError, "length_mask: length must be an int, got '1' (str)"),
    ('length_mask', (1, None), TypeError, 'length_mask: seq_len must be an int, got None (NoneType)'),
    ('combine_masks', (), ValueError, 'combine_masks: give at least one mask'),
    ('combine_masks', ([[True]], [[True, False]]), ShapeError, 'combine_masks: masks[0] is 1x1 but masks[1] is 1x2; masks must have the same shape'),
    ('combine_masks', ([[1, 0]],), TypeError, 'combine_masks: masks[0][0][0] is 1; mask entries must be True (may attend) or False (masked)'),
    ('combine_masks', ([[True], None],), TypeError, 'combine_masks: masks[0][1] must be a row (a list of True/False), got NoneType; a matrix is a list of rows, so write a vector v as [v] (one row)'),
    ('apply_mask', ([[1.0, 2.0]], [[True]]), ShapeError, 'apply_mask: mask is 1x1; it must be (queries, keys) = 1x2'),
    ('apply_mask', ([[1.0]], [[1]]), TypeError, 'apply_mask: mask[0][0] is 1; mask entries must be True (may attend) or False (masked)'),
    ('apply_mask', ([[1.0]], [[False]]), ValueError, 'apply_mask: mask row 0 is all False, so query 0 may attend to no key; every query needs at least one key'),
    ('linear', ([[1.0]], [[1.0, 2.0]], [1.0]), ShapeError, 'linear: W is 1x2 and b has 1 entries; b needs one entry per column of W (2)'),
    ('linear', ([[1.0]], [[NAN]]), ValueError, 'linear: W[0][0] is nan; entries must be finite numbers'),
    ('linear', ([[1.0]], [[1.0]], [NAN]), ValueError, 'linear: b[0] is nan; entries must be finite numbers'),
    # the second argument is named too
    ('dot', ([1.0], None), TypeError, 'dot: v must be a list of numbers, got NoneType'),
    ('dot', ([1.0], ['a']), TypeError, "dot: v[0] is 'a' (str); entries must be int or float"),
    ('add', ([[1.0]], None), TypeError, 'add: B must be a list of rows, got NoneType'),
    ('add', ([[1.0]], [['b']]), TypeError, "add: B[0][0] is 'b' (str); entries must be int or float"),
    ('add_row', (None, [1.0]), TypeError, 'add_row: M must be a list of rows, got NoneType'),
    ('add_row', ([[1.0]], ['b']), TypeError, "add_row: b[0] is 'b' (str); entries must be int or float"),
    ('add_row', ([[1.0]], [NAN]), ValueError, "add_row: b[0] is nan; entries must be finite numbers"),
    ('scale', (None, 2.0), TypeError, 'scale: M must be a list of rows, got NoneType'),
    ('split_heads', (None, 2), TypeError, 'split_heads: M must be a list of rows, got NoneType'),
    ('split_rows', (None, [1]), TypeError, 'split_rows: M must be a list of rows, got NoneType'),
    ('concat_heads', ([[[1.0]], [['x']]],), TypeError, "concat_heads: heads[1][0][0] is 'x' (str); entries must be int or float"),
    # the exception paths of the sums: an overflow inside fsum, and inf - inf
    ('dot', ([1e308, 1e308], [1.0, 1.0]), ValueError, f"dot: {TOO_LARGE}"),
    ('matmul', ([[1e308, 1e308]], [[1.0], [1.0]]), ValueError, f"matmul: {TOO_LARGE}"),
    ('matmul', ([[1.0, 2.0]], [[1e308], [1e308]]), ValueError, f"matmul: {TOO_LARGE}"),
    ('matmul', ([[1.0]], [[10**400]]), ValueError, f"matmul: {TOO_LARGE}"),
    ('matmul', ([[INF, 1.0]], [[1.0], [-INF]]), ValueError, "matmul: A[0][0] is inf; entries must be finite numbers"),
    ('matmul', ([[1.0, 1.0]], [[1.0], [NAN]]), ValueError, "matmul: B[1][0] is nan; entries must be finite numbers"),
    ('matmul', ([[1.0, 'x']], [[1.0], [2.0]]), TypeError, "matmul: A[0][1] is 'x' (str); entries must be int or float"),
    ('dot', ([1.0, 2.0], [INF, 1.0]), ValueError, "dot: v[0] is inf; entries must be finite numbers"),
    ('add', ([[1.0, 2.0]], [[1e308, 1e308]]), None, None),
    ('attention', ([[1.0, 2.0]], [[1.0, 2.0]], [[1.0]]), None, None),
]


@pytest.mark.parametrize("name, args, error, message", CASES)
def test_message(name, args, error, message):
    if error is None:  # a good call, next to the bad ones: it must not raise
        FUNCTIONS[name](*args)
        return
    with pytest.raises(error) as info:
        FUNCTIONS[name](*args)
    if message is not None:
        assert str(info.value) == message


# === Weights: every field is checked, and named ===

W = init_mha_weights(4, 2, seed=0, bias=True, num_kv_heads=1)


def poisoned(field, value):
    """W with entry [0] of the last row of the field's last block replaced (deep copies, W unchanged)."""
    blocks = getattr(W, field)
    if field == "b_O":
        return W._replace(b_O=[value] + blocks[1:]), "weights.b_O[0]"
    if field == "W_O":
        return W._replace(W_O=[list(r) for r in blocks[:-1]] + [[value] + blocks[-1][1:]]), "weights.W_O[3][0]"
    last = len(blocks) - 1
    if field.startswith("b_"):
        new = [list(b) for b in blocks[:-1]] + [[value] + blocks[-1][1:]]
        return W._replace(**{field: new}), f"weights.{field}[{last}][0]"
    M = blocks[-1]
    new_M = [list(r) for r in M[:-1]] + [[value] + M[-1][1:]]
    return W._replace(**{field: list(blocks[:-1]) + [new_M]}), f"weights.{field}[{last}][3][0]"


@pytest.mark.parametrize("field", ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"])
@pytest.mark.parametrize("value, error, rule", [
    (NAN, ValueError, "is nan; entries must be finite numbers"),
    (INF, ValueError, "is inf; entries must be finite numbers"),
    ("x", TypeError, "is 'x' (str); entries must be int or float"),
])
def test_a_bad_entry_in_any_weight_is_named(field, value, error, rule):
    bad, where = poisoned(field, value)
    x = [[0.5, -0.5, 0.25, 1.0], [0.0, 1.0, 2.0, -1.0]]
    for call, name in ((lambda: multi_head_attention(x, bad), "multi_head_attention"),
                       (lambda: weights.parameter_count(bad), "parameter_count")):
        with pytest.raises(error) as info:
            call()
        assert str(info.value) == f"{name}: {where} {rule}"


@pytest.mark.parametrize("changes, message", [
    (dict(W_Q=[W.W_Q[0], [[0.0] * 3] * 4]), "weights.W_Q[0] is 4x2 but weights.W_Q[1] is 4x3; every head must have the same shape"),
    (dict(W_K=[[[0.0] * 3] * 4]), "W_Q heads are 4x2 but W_K heads are 4x3; queries and keys must have the same width d_k to be multiplied"),
    (dict(W_V=[[[0.0] * 2] * 4, [[0.0] * 2] * 4]), "W_K has 1 heads of 4x2 but W_V has 2 heads of 4x2; keys and values need the same number of heads and d_model rows"),
    (dict(W_K=[[[0.0] * 2] * 4] * 2, W_V=[[[0.0] * 2] * 4] * 2, W_Q=[[[0.0] * 2] * 4] * 3,
          b_Q=None, b_K=None, b_V=None), "3 query heads and 2 key/value heads; num_kv_heads must divide num_heads"),
    (dict(W_O=[[0.0] * 4] * 3), "W_O is 3x4; it must be (num_heads * d_v) x d_model = 4x4 (2 heads of width 2)"),
    (dict(b_Q=[[0.0, 0.0]]), "weights.b_Q has 1 vectors; it needs one per head (2)"),
    (dict(b_K="zeros"), "weights.b_K has str vectors; it needs one per head (1)"),
    (dict(b_V=[[0.0, 0.0, 0.0]]), "weights.b_V[0] has 3 entries; it must have 2 (the width of that head)"),
    (dict(b_O=[0.0] * 3), "weights.b_O has 3 entries; it must have d_model = 4"),
    (dict(W_K=[]), "weights.W_K must be a non-empty list with one matrix per head"),
])
def test_weight_shapes_are_checked_against_each_other(changes, message):
    with pytest.raises(ShapeError) as info:
        multi_head.check_weights("demo", "weights", W._replace(**changes))
    assert str(info.value) == f"demo: {message}"


def test_weights_must_be_an_mhaweights():
    with pytest.raises(TypeError, match=r"^demo: weights must be an MHAWeights, got list$"):
        multi_head.check_weights("demo", "weights", list(W))



@pytest.mark.parametrize("options, error, message", [
    (dict(mask=[[True, True]]), ShapeError, "attention: mask is 1x2; it must be (queries, keys) = 2x2"),
    (dict(mask=[[True, False], [False, False]]), ValueError,
     "attention: mask row 1 is all False, so query 1 may attend to no key; every query needs at least one key"),
    (dict(mask=[[1, 0], [1, 1]]), TypeError,
     "attention: mask[0][0] is 1; mask entries must be True (may attend) or False (masked)"),
    (dict(scale=0.0), ValueError, "attention: scale must be a positive finite number, got 0.0"),
    (dict(scale=NAN), ValueError, "attention: scale must be a finite number, got nan"),
    (dict(scale="1"), TypeError, "attention: scale must be a number, got '1' (str)"),
])
def test_attention_names_its_mask_and_scale(options, error, message):
    Q = K = V = [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(error) as info:
        one_head.attention(Q, K, V, **options)
    assert str(info.value) == message


R = random.Random(0)


@pytest.mark.parametrize("call, error, message", [
    (lambda: weights.derive_rng(1.5, "x"), TypeError, "derive_rng: seed must be an int, got 1.5 (float)"),
    (lambda: weights.derive_rng(1, 5), TypeError, "derive_rng: name must be a str, got 5 (int)"),
    (lambda: weights.init_matrix(0, 2, R), ValueError, "init_matrix: rows must be a positive int, got 0"),
    (lambda: weights.init_matrix(2, 0, R), ValueError, "init_matrix: cols must be a positive int, got 0"),
    (lambda: weights.init_matrix(2, 2, R, fan_in=0), ValueError, "init_matrix: fan_in must be a positive int, got 0"),
    (lambda: weights.init_matrix(2, 2, R, fan_out=-3), ValueError, "init_matrix: fan_out must be a positive int, got -3"),
    (lambda: weights.init_matrix(2, 2, R, std=0.0), ValueError, "init_matrix: std must be a positive finite number, got 0.0"),
    (lambda: weights.init_matrix(2, 2, R, std=NAN), ValueError, "init_matrix: std must be a finite number, got nan"),
    (lambda: weights.init_matrix(2, 2, "rng"), TypeError,
     "init_matrix: rng must be a random.Random (e.g. derive_rng(seed, name)), got str"),
    (lambda: weights.init_matrix(2, 2, R, "he"), ValueError,
     "init_matrix: unknown scheme 'he'; choose one of xavier_uniform, xavier_normal, kaiming_normal, normal, gpt2"),
    (lambda: init_mha_weights(16, 2, seed=0, std=-1.0), ValueError, "init_mha_weights: std must be a positive finite number, got -1.0"),
    (lambda: init_mha_weights(16, 2, seed=0, d_k=0), ValueError, "init_mha_weights: d_k must be a positive int, got 0"),
    (lambda: init_mha_weights(16, 2, seed=0, d_v=2.0), TypeError, "init_mha_weights: d_v must be an int, got 2.0 (float)"),
    (lambda: init_mha_weights(16, 2, seed=0, num_kv_heads=0), ValueError, "init_mha_weights: num_kv_heads must be a positive int, got 0"),
    (lambda: init_mha_weights(16, 2, seed=0, n_layer=0), ValueError, "init_mha_weights: n_layer must be a positive int, got 0"),
    (lambda: init_mha_weights(16, 2, seed=0, bias=1), TypeError, "init_mha_weights: bias must be True or False, got 1"),
    (lambda: init_mha_weights(16, 2, seed=None), TypeError, "init_mha_weights: seed must be an int, got None (NoneType)"),
    (lambda: init_mha_weights(16, 3, seed=0, d_k=4), ShapeError,
     "init_mha_weights: d_model 16 is not divisible by num_heads 3; d_k = d_model / num_heads must be a whole number (or pass d_k and d_v)"),
])
def test_weight_drawing_names_the_argument(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_d_k_and_d_v_together_lift_the_divisibility_rule():
    w = init_mha_weights(16, 3, seed=0, d_k=4, d_v=5)
    assert (len(w.W_Q[0][0]), len(w.W_V[0][0]), len(w.W_O)) == (4, 5, 15)


# === Small functions, their edges ===

from mha_lists.core.softmax_and_masks import combine_masks, length_mask, padding_mask  # noqa: E402
from mha_lists.core.matrix import split_rows  # noqa: E402
from mha_lists.core.softmax_and_masks import entropy  # noqa: E402


def test_split_rows_walks_down_the_rows():
    M = [[1], [2], [3], [4]]
    assert split_rows(M, [2, 1, 1]) == [[[1], [2]], [[3]], [[4]]]
    assert split_rows(M, [1, 3]) == [[[1]], [[2], [3], [4]]]


def test_length_mask_edges_and_queries():
    assert length_mask(3, 3) == [[True, True, True]] * 3
    assert length_mask(1, 3, num_queries=2) == [[True, False, False]] * 2
    with pytest.raises(ValueError, match=r"^length_mask: num_queries must be a positive int, got 0$"):
        length_mask(1, 3, num_queries=0)
    with pytest.raises(ValueError, match=r"^length_mask: length 4 is longer than seq_len 3$"):
        length_mask(4, 3)


def test_padding_mask_queries():
    assert padding_mask([5, 0, 7], 0, num_queries=1) == [[True, False, True]]
    with pytest.raises(TypeError, match=r"^padding_mask: num_queries must be an int, got 1.5 \(float\)$"):
        padding_mask([5, 0], 0, num_queries=1.5)


def test_combine_masks_of_one_and_of_non_square_masks():
    a = [[True, False, True], [False, True, True]]
    b = [[True, True, False], [True, True, True]]
    assert combine_masks(a) == a
    assert combine_masks(a, b) == [[True, False, False], [False, True, True]]


def test_entropy_of_a_certain_row_is_plain_zero():
    assert str(entropy([1.0])) == "0.0" and str(entropy([0.0, 1.0])) == "0.0"  # not -0.0


def test_init_defaults_std_and_n_layer():
    from mha_lists.teaching.weights import derive_rng
    w = init_mha_weights(4, 2, seed=3, init="normal")
    rng = derive_rng(3, "W_Q/head0")
    assert w.W_Q[0] == [[rng.gauss(0.0, 0.02) for _ in range(2)] for _ in range(4)]  # std defaults to 0.02
    gpt2 = init_mha_weights(4, 2, seed=3, init="gpt2")
    rng = derive_rng(3, "W_O")
    assert gpt2.W_O == [[rng.gauss(0.0, 0.02 / math.sqrt(2)) for _ in range(4)] for _ in range(4)]  # n_layer 1
    with pytest.raises(ValueError, match=r"^init_mha_weights: d_model must be a positive int, got 0$"):
        init_mha_weights(0, 2, seed=0)
    with pytest.raises(ShapeError, match=r"each key/value head must serve the same number of query heads$"):
        init_mha_weights(16, 4, seed=0, num_kv_heads=3)
    with pytest.raises(ValueError) as info:
        init_mha_weights(16, 2, seed=0, init="he")
    assert str(info.value) == ("init_mha_weights: unknown init scheme 'he'; choose one of xavier_uniform, "
                               "xavier_normal, kaiming_normal, normal, gpt2")
