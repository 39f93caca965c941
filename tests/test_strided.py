"""Strided tensors (mha_lists/teaching/strided.py): storage, views, transposes, the PyTorch head lines, bad input."""

import copy
import time

import pytest
from bad_inputs import assert_template

from mha_lists import ShapeError, running_example, split_heads
from mha_lists.teaching import strided
from mha_lists.teaching.strided import MAX_DIMS, MAX_ELEMENTS, Strided, strided_merge_heads, strided_split_heads, tensor

# Each message of strided.py, pinned once; the tests below match only its start (function and argument).
MESSAGES = {
    "not a tensor": "{func}: t must be a Strided tensor (see tensor()), got {type}",
    "storage type": "{func}: t.data must be a list (the storage), got {type}",
    "shape type": "{func}: {name} must be a non-empty tuple of positive ints, got {value}",
    "shape dims": "{func}: {name} has {n} dimensions; at most 64",
    "shape elements": "{func}: {name} {shape} has {count} elements; at most 10,000,000",
    "strides count": "{func}: t.strides is {value}; it needs one int per dimension ({dims})",
    "stride negative": "{func}: t.strides[{d}] is {value}; strides here are 0 or more",
    "offset negative": "{func}: t.offset is {value}; an offset is 0 or more",
    "storage short": "{func}: t's storage has {n} entries but its shape {shape}, strides {strides} and offset {offset} "
                     "reach index {last}; the storage must hold every element",
    "index type": "{func}: index must be a tuple of ints, got {value}",
    "index length": "{func}: index {index} has {n} numbers; the tensor has {dims} dimensions",
    "index range": "{func}: index[{d}] is {value}; dimension {d} has size {n}, so it must be from 0 to {last}",
    "dim range": "transpose: {name} is {value}; a {dims}-dimensional tensor has dimensions 0 to {last}",
    "not contiguous": "{func}: the tensor of shape {shape} with strides {strides} is not contiguous; its elements are "
                      "not in row-major order, so call contiguous() first (a copy)",
    "view elements": "view: shape {old} has {n} elements but {new} has {m}; a view must keep the number of elements",
    "nested type": "tensor: nested must be a list (of lists) of numbers, got {type}",
    "nested empty": "tensor: empty lists have no shape to read",
    "nested deep": "tensor: the lists are nested more than 64 deep; at most 64 dimensions",
    "nested elements": "tensor: nested has shape {shape}, {count} elements; at most 10,000,000",
    "nested uneven": "tensor: the nesting is deeper in some places than others",
    "nested entry": "tensor: an entry is {value} ({type}); entries must be numbers",
    "nested finite": "tensor: an entry is {value}; entries must be finite numbers",
    "nested ragged": "tensor: ragged at depth {depth}; every list there must have {n} items",
    "split dims": "strided_split_heads: expected a [batch, seq_len, d_model] tensor, got shape {shape}",
    "split heads": "strided_split_heads: d_model {d_model} is not divisible by num_heads {num_heads}",
    "merge dims": "strided_merge_heads: expected a [batch, num_heads, seq_len, d_k] tensor, got shape {shape}",
}

T = tensor([[[1.0, 2.0], [3.0, 4.0]]])  # shape (1, 2, 2)
HUGE = 10**9  # a size nobody means: refused at once, not computed


# === Storage, strides and views, by hand ===


def test_storage_index_by_hand():
    t = tensor([[[i * 12 + j * 4 + c for c in range(4)] for j in range(3)] for i in range(2)])
    assert t.strides == (12, 4, 1) == Strided.row_major_strides((2, 3, 4))
    assert t.storage_index((1, 2, 3)) == 1 * 12 + 2 * 4 + 3 == 23
    assert t.element((1, 2, 3)) == 23


def test_transpose_swaps_strides_and_shares_data():
    t = tensor([[1, 2, 3], [4, 5, 6]])
    u = t.transpose(0, 1)
    assert u.data is t.data and u.strides == (1, 3) and u.shape == (3, 2)
    assert u.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert not u.is_contiguous()
    c = u.contiguous()
    assert c.data == [1, 4, 2, 5, 3, 6] and c.data is not t.data and c.is_contiguous()
    assert t.contiguous() is t


def test_view_needs_contiguous_and_the_same_size():
    t = tensor([1, 2, 3, 4, 5, 6])
    assert t.view((2, 3)).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t.view((2, 3)).data is t.data
    with pytest.raises(ValueError, match=r"^view: the tensor of shape \(3, 2\)"):
        t.view((2, 3)).transpose(0, 1).view((6,))
    with pytest.raises(ShapeError, match=r"^view: shape"):
        t.view((4,))


def test_a_stride_of_zero_repeats_one_number():
    assert Strided([7], (2, 2), (0, 0)).tolist() == [[7, 7], [7, 7]]
    assert Strided([1, 2, 3], (3,), (1,)).element((2,)) == 3
    assert Strided([0], (MAX_ELEMENTS,), (0,)).is_contiguous() is False  # the limit itself is allowed


def test_tensor_copies_tuples_too():
    assert tensor(((1, 2), (3, 4))) == Strided([1, 2, 3, 4], (2, 2), (2, 1))


# === The two PyTorch lines of multi-head attention ===


def test_split_and_merge_heads_round_trip_and_match_column_blocks():
    x = running_example().x
    batch = tensor([x, x[::-1]])
    heads = strided_split_heads(batch, 2)
    assert heads.shape == (2, 2, 5, 8) and heads.data is batch.data and not heads.is_contiguous()
    assert heads.tolist()[0] == split_heads(x, 2)
    merged = strided_merge_heads(heads)
    assert merged.shape == (2, 5, 16) and merged.tolist() == [x, x[::-1]]


def test_split_and_merge_are_the_pytorch_lines_written_with_the_methods():
    t = tensor([[[float(10 * i + c) for c in range(6)] for i in range(4)]])  # [1, 4, 6], 3 heads of 2
    assert strided_split_heads(t, 3) == t.view((1, 4, 3, 2)).transpose(1, 2)
    heads = strided_split_heads(t, 3).contiguous()
    assert strided_merge_heads(heads) == heads.transpose(1, 2).contiguous().view((1, 4, 6)) == t


# === The messages, each once, word for word ===


MESSAGE_CASES = [
    ("not a tensor", lambda: Strided.view(None, (4,)), TypeError, dict(func="view", type="NoneType")),
    ("storage type", lambda: Strided("abcdef", (2, 3), (3, 1)).tolist(), TypeError, dict(func="tolist", type="str")),
    ("shape type", lambda: T.view(None), TypeError, dict(func="view", name="shape", value="None")),
    ("shape dims", lambda: Strided.row_major_strides((1,) * 65), ValueError,
     dict(func="row_major_strides", name="shape", n=65)),
    ("shape elements", lambda: Strided([1], (HUGE, HUGE), (0, 0)).tolist(), ValueError,
     dict(func="tolist", name="t.shape", shape="(1000000000, 1000000000)", count="over 10^18")),
    ("shape elements", lambda: Strided([0], (MAX_ELEMENTS + 1,), (0,)).is_contiguous(), ValueError,
     dict(func="is_contiguous", name="t.shape", shape="(10000001,)", count="10,000,001")),
    ("strides count", lambda: Strided([1] * 6, (2, 3), (3,)).contiguous(), ShapeError,
     dict(func="contiguous", value="(3,)", dims=2)),
    ("stride negative", lambda: Strided([1] * 6, (2, 3), (3, -1)).tolist(), ValueError,
     dict(func="tolist", d=1, value=-1)),
    ("offset negative", lambda: Strided([1] * 6, (2, 3), (3, 1), -1).tolist(), ValueError,
     dict(func="tolist", value=-1)),
    ("storage short", lambda: Strided([1], (2,), (1,)).view((2,)), ShapeError,
     dict(func="view", n=1, shape="(2,)", strides="(1,)", offset=0, last=1)),
    ("index type", lambda: T.element("000"), TypeError, dict(func="element", value="'000'")),
    ("index length", lambda: T.storage_index((1, 0)), ShapeError,
     dict(func="storage_index", index="(1, 0)", n=2, dims=3)),
    ("index range", lambda: T.element((0, 0, 9)), ValueError, dict(func="element", d=2, value=9, n=2, last=1)),
    ("index range", lambda: T.element((0, 0, -1)), ValueError, dict(func="element", d=2, value=-1, n=2, last=1)),
    ("dim range", lambda: T.transpose(0, 3), ValueError, dict(name="dim1", value=3, dims=3, last=2)),
    ("dim range", lambda: T.transpose(-1, 0), ValueError, dict(name="dim0", value=-1, dims=3, last=2)),
    ("not contiguous", lambda: T.transpose(1, 2).view((4,)), ValueError,
     dict(func="view", shape="(1, 2, 2)", strides="(4, 1, 2)")),
    ("view elements", lambda: T.view((3,)), ShapeError, dict(old="(1, 2, 2)", n=4, new="(3,)", m=3)),
    ("nested type", lambda: tensor(5), TypeError, dict(type="int")),
    ("nested empty", lambda: tensor([[]]), ShapeError, {}),
    ("nested deep", lambda: tensor(nested(MAX_DIMS + 1)), ValueError, {}),
    ("nested elements", lambda: tensor([[0.0] * 1000] * 20_000), ValueError,
     dict(shape="(20000, 1000)", count="20,000,000")),
    ("nested uneven", lambda: tensor([[1], [[2]]]), ShapeError, {}),
    ("nested entry", lambda: tensor([[[1], [2]], [[3], ["x"]]]), TypeError, dict(value="'x'", type="str")),
    ("nested finite", lambda: tensor([[1.0, float("nan")]]), ValueError, dict(value="nan")),
    ("nested finite", lambda: tensor([[10**400]]), ValueError, dict(value="an int of 401 digits")),
    ("nested ragged", lambda: tensor([[1, 2], [3, 4], [5]]), ShapeError, dict(depth=1, n=2)),
    ("split dims", lambda: strided_split_heads(tensor([1, 2]), 1), ShapeError, dict(shape="(2,)")),
    ("split heads", lambda: strided_split_heads(T, 3), ShapeError, dict(d_model=2, num_heads=3)),
    ("split heads", lambda: strided_split_heads(T, 10**50), ShapeError,
     dict(d_model=2, num_heads="an int of 51 digits")),
    ("not contiguous", lambda: strided_split_heads(T.transpose(1, 2), 1), ValueError,
     dict(func="strided_split_heads", shape="(1, 2, 2)", strides="(4, 1, 2)")),
    ("merge dims", lambda: strided_merge_heads(T), ShapeError, dict(shape="(1, 2, 2)")),
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


# === Bad input: a named error, one short line, the arguments unchanged ===


def nested(depth):
    """[[[...[1]...]]], ``depth`` lists deep."""
    value = 1
    for _ in range(depth):
        value = [value]
    return value


SELF_LIST = []
SELF_LIST.append(SELF_LIST)  # a list that contains itself: infinitely deep

BAD_TENSORS = [
    None, [[1]], (1, 2), "t",
    Strided([1, 2, 3], (2, 3), (3, 1)),           # storage shorter than shape and strides need
    Strided([1] * 6, (2, 3), (3, 1), 1),          # the offset pushes the last element past the end
    Strided([1] * 6, (2, 3), (4, 1)),             # strides that reach past the end
    Strided([1] * 6, (2, 3), (3,)),               # one stride for two dimensions
    Strided([1] * 6, (2, 3), (3, -1)),            # a negative stride
    Strided([1] * 6, (2, 3), (3, 1), -1),         # a negative offset
    Strided([1] * 6, (2, 3), (3, 1.0)),           # a float stride
    Strided([1] * 6, (2, 3), (3, 1), None),
    Strided([1] * 6, (2, 3), (3, 1), 1.0),
    Strided(None, (2, 3), (3, 1)),
    Strided("abcdef", (2, 3), (3, 1)),
    Strided([1] * 6, (2, 0), (3, 1)),
    Strided([1] * 6, None, (3, 1)),
    Strided([1] * 6, (2, 3), None),
    Strided([1] * 6, (2, "3"), (3, 1)),
    Strided([1] * 6, (), ()),
    Strided([1], (HUGE, HUGE), (0, 0)),           # 10^18 elements read from one number
    Strided([1], (10**99,) * MAX_DIMS, (0,) * MAX_DIMS),  # a count of elements of thousands of digits
    Strided([1] * 6, (2, 3), (3, -10**99), 0),    # a stride of 100 digits
]

BAD_CALLS = []  # (name the message must start with, function, arguments)
for t in BAD_TENSORS:  # the methods, called as Strided.view(t, shape) = t.view(shape), so t can be anything
    for name in ("contiguous", "is_contiguous", "tolist"):
        BAD_CALLS.append((name, getattr(Strided, name), (t,)))
    BAD_CALLS += [("strided_merge_heads", strided_merge_heads, (t,)), ("view", Strided.view, (t, (6,))),
                  ("transpose", Strided.transpose, (t, 0, 1)), ("element", Strided.element, (t, (0, 0))),
                  ("storage_index", Strided.storage_index, (t, (0, 0))),
                  ("strided_split_heads", strided_split_heads, (t, 1))]
for shape in [None, (), (0, 4), (-1,), ("2", 2), (2.0, 2), (3,), (True, 4), [[4]], 4, "4", (HUGE,), (1,) * 1000,
              (10**99,) * MAX_DIMS, "x" * 10_000]:
    BAD_CALLS.append(("view", Strided.view, (T, shape)))
BAD_CALLS.append(("view", Strided.view, (T.transpose(1, 2), (4,))))
for d0, d1 in [(0, 3), (-1, 0), ("0", 1), (None, 0), (0, 1.0), (True, 0), (0, HUGE), (0, 10**400)]:
    BAD_CALLS.append(("transpose", Strided.transpose, (T, d0, d1)))
for index in [None, (0, 0), (0, 0, 9), (0, 0, -1), (0, 0, 0.5), "000", (0, 0, True), (0, 0, [0]), (0, 0, 0, 0), 5,
              (1, 0, 0), (0, 0, 10**400), tuple(range(10_000)), "i" * 10_000]:
    BAD_CALLS += [("element", Strided.element, (T, index)), ("storage_index", Strided.storage_index, (T, index))]
for shape in [None, (), (0,), (-1,), ("2",), (2.5,), [[2]], 5, "23", (1,) * 1000, (2, 0), (2, "3")]:
    BAD_CALLS.append(("row_major_strides", Strided.row_major_strides, (shape,)))
for nest in [None, 5, 2.5, "ab", [], [[]], [[1, 2], [3]], [[1], 2], [1, [2]], [["a"]], [[None]], [[1, 2], []], {1: 2},
             [["x" * 10_000]], nested(5000), SELF_LIST, [[[0] * 1000] * 10_000] * 10_000, [[float("inf")]]]:
    BAD_CALLS.append(("tensor", tensor, (nest,)))
for h in [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, 3, HUGE, 10**400]:
    BAD_CALLS.append(("strided_split_heads", strided_split_heads, (T, h)))
BAD_CALLS += [("strided_split_heads", strided_split_heads, (tensor([1, 2]), 1)),
              ("strided_split_heads", strided_split_heads, (T.transpose(1, 2), 1)),
              ("strided_merge_heads", strided_merge_heads, (T,))]


def snapshot(obj, seen=None):
    """What to compare before and after a call: nested values, each list once (one list repeated, or a list
    that holds itself, is walked once)."""
    seen = set() if seen is None else seen
    if isinstance(obj, (list, tuple)):
        if id(obj) in seen:
            return ("seen", id(obj))
        seen.add(id(obj))
        return (type(obj).__name__, [snapshot(item, seen) for item in obj])
    return obj if type(obj) is int else repr(obj)


def try_snapshot(args):
    try:
        return snapshot(args)
    except RecursionError:  # lists nested thousands deep: not compared
        return None


@pytest.mark.parametrize("name", sorted({name for name, _, _ in BAD_CALLS}))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(name):
    for func, args in [(func, args) for n, func, args in BAD_CALLS if n == name]:
        before = try_snapshot(args)
        started = time.perf_counter()
        with pytest.raises((ShapeError, ValueError, TypeError)) as info:
            func(*args)
        message = str(info.value)
        assert message.startswith(f"{name}: "), message
        assert "\n" not in message and len(message) < 300, message
        assert time.perf_counter() - started < 2, f"{name} took {time.perf_counter() - started:.1f} s to refuse"
        assert before is None or try_snapshot(args) == before, f"{name} changed its arguments"


def test_the_methods_leave_the_tensor_as_it_was():
    t = tensor([[1, 2, 3], [4, 5, 6]])
    before = copy.deepcopy(t)
    t.transpose(0, 1).contiguous().tolist()
    t.view((3, 2))
    strided_merge_heads(strided_split_heads(tensor([[[1.0, 2.0], [3.0, 4.0]]]), 2))
    assert t == before


# === Limits that used to slip (each test failed before its fix) ===


def test_lists_that_repeat_one_list_are_counted_before_they_are_walked():
    # 10^11 elements made of one list of 1,000 repeated: refused at once, not walked for hours
    started = time.perf_counter()
    with pytest.raises(ValueError, match=r"^tensor: nested has shape \(10000, 10000, 1000\)"):
        tensor([[[0] * 1000] * 10_000] * 10_000)
    assert time.perf_counter() - started < 1


def test_a_count_of_thousands_of_digits_is_not_written_out():
    # 64 sizes of 100 digits each: their product has 6,336 digits, more than Python will print
    with pytest.raises(ValueError, match=r"^row_major_strides: shape .* has over 10\^18 elements"):
        Strided.row_major_strides((10**99,) * MAX_DIMS)


def test_the_limits_are_the_documented_ones():
    assert (strided.MAX_DIMS, strided.MAX_ELEMENTS) == (64, 10_000_000)
    assert tensor(nested(MAX_DIMS)).shape == (1,) * MAX_DIMS  # 64 deep is allowed
