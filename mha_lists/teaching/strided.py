"""A tensor as PyTorch stores it: one flat list, a shape, and strides.

Element ``[i0, i1, ...]`` lives at ``data[offset + i0 * strides[0] + i1 * strides[1] + ...]``.
``view`` reads the same list with another shape; ``transpose_dims`` swaps two
strides and moves nothing; ``contiguous`` is the copy that puts elements back
in row-major order. This is what ``x.view(B, T, h, d_k).transpose(1, 2)`` does.
"""

from __future__ import annotations

import math
from itertools import product
from typing import NamedTuple

from ..core.checks import ShapeError, check_int, check_positive_int, checked, is_number, kind

__all__ = ["Strided", "tensor", "view", "transpose_dims", "contiguous", "is_contiguous", "tolist", "element",
           "storage_index", "row_major_strides", "strided_split_heads", "strided_merge_heads"]


MAX_DIMS = 64  # dimensions of a tensor here
MAX_ELEMENTS = 10_000_000  # elements of a tensor here (a stride of 0 can read many from one number)


# === Two kinds of argument for the door (``checked``): a tensor and a shape ===


@kind("strided tensor")
def _check_tensor(func: str, name: str, t: object, expected: tuple = ()) -> None:
    """A Strided whose shape, strides and offset only ever read inside its storage."""
    if not isinstance(t, Strided):
        raise TypeError(f"{func}: {name} must be a Strided tensor (see tensor()), got {type(t).__name__}")
    if not isinstance(t.data, list):
        raise TypeError(f"{func}: {name}.data must be a list (the storage), got {type(t.data).__name__}")
    shape = _check_shape(func, f"{name}.shape", t.shape)
    if not isinstance(t.strides, (list, tuple)) or len(t.strides) != len(shape):
        raise ShapeError(f"{func}: {name}.strides is {t.strides!r:.60}; it needs one int per dimension ({len(shape)})")
    for d, stride in enumerate(t.strides):
        if check_int(func, f"{name}.strides[{d}]", stride) < 0:
            raise ValueError(f"{func}: {name}.strides[{d}] is {stride}; strides here are 0 or more")
    if check_int(func, f"{name}.offset", t.offset) < 0:
        raise ValueError(f"{func}: {name}.offset is {t.offset}; an offset is 0 or more")
    last = t.offset + sum((n - 1) * stride for n, stride in zip(shape, t.strides))
    if last >= len(t.data):
        raise ShapeError(
            f"{func}: {name}'s storage has {len(t.data)} entries but its shape {shape}, strides {tuple(t.strides)} "
            f"and offset {t.offset} reach index {last}; the storage must hold every element"
        )


@kind("strided shape")
def _check_shape(func: str, name: str, shape: object, expected: tuple = ()) -> tuple[int, ...]:
    """A non-empty tuple of positive ints, of at most MAX_DIMS dimensions and MAX_ELEMENTS elements."""
    if not isinstance(shape, (list, tuple)) or not shape:
        raise TypeError(f"{func}: {name} must be a non-empty tuple of positive ints, got {shape!r:.60}")
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{func}: {name} has {len(shape)} dimensions; at most {MAX_DIMS}")
    for d, n in enumerate(shape):
        check_positive_int(func, f"{name}[{d}]", n)
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"{func}: {name} {tuple(shape)} has {math.prod(shape):,} elements; at most {MAX_ELEMENTS:,}")
    return tuple(shape)


class Strided(NamedTuple):
    """A view of a flat list of numbers as an n-dimensional tensor."""

    data: list  # the storage, shared between views
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


@checked(shape="strided shape")
def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a contiguous tensor: the last dimension moves by 1.

    >>> row_major_strides((2, 5, 16))
    (80, 16, 1)
    """
    return _row_major_strides(shape)


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _check_nested(func: str, arguments: dict, sizes: dict) -> None:
    """Nested lists of numbers, all lists at one depth the same length, at most MAX_DIMS deep."""
    nested = arguments["nested"]
    if not isinstance(nested, (list, tuple)):
        raise TypeError(f"{func}: nested must be a list (of lists) of numbers, got {type(nested).__name__}")
    shape, node = [], nested
    while isinstance(node, (list, tuple)):  # down the first branch: the shape every branch must have
        if not node:
            raise ShapeError(f"{func}: empty lists have no shape to read")
        if len(shape) == MAX_DIMS:
            raise ValueError(f"{func}: the lists are nested more than {MAX_DIMS} deep; at most {MAX_DIMS} dimensions")
        shape.append(len(node))
        node = node[0]

    def walk(node: object, depth: int) -> None:
        if depth == len(shape):
            if isinstance(node, (list, tuple)):
                raise ShapeError(f"{func}: the nesting is deeper in some places than others")
            if not is_number(node):
                raise TypeError(f"{func}: an entry is {node!r:.40} ({type(node).__name__}); entries must be numbers")
            return
        if not isinstance(node, (list, tuple)) or len(node) != shape[depth]:
            raise ShapeError(f"{func}: ragged at depth {depth}; every list there must have {shape[depth]} items")
        for child in node:
            walk(child, depth + 1)

    walk(nested, 0)


@checked(also=_check_nested)
def tensor(nested) -> Strided:
    """Copy nested lists (all rows the same length) into a contiguous Strided tensor.

    >>> tensor([[1, 2, 3], [4, 5, 6]])
    Strided(data=[1, 2, 3, 4, 5, 6], shape=(2, 3), strides=(3, 1), offset=0)
    """
    shape, node = [], nested
    while isinstance(node, (list, tuple)):
        shape.append(len(node))
        node = node[0]
    data = nested
    for _ in shape[1:]:  # one level of nesting less each time
        data = [entry for part in data for entry in part]
    return Strided(list(data), tuple(shape), _row_major_strides(shape))


def _index_in_range(func: str, arguments: dict, sizes: dict) -> None:
    t, index = arguments["t"], arguments["index"]
    if not isinstance(index, (list, tuple)):
        raise TypeError(f"{func}: index must be a tuple of ints, got {index!r}")
    if len(index) != len(t.shape):
        raise ShapeError(f"{func}: index {index} has {len(index)} numbers; the tensor has {len(t.shape)} dimensions")
    for d, (i, n) in enumerate(zip(index, t.shape)):
        if not 0 <= check_int(func, f"index[{d}]", i) < n:
            raise ValueError(f"{func}: index {i} is out of range for dimension {d} of size {n}")


@checked(t="strided tensor", also=_index_in_range)
def storage_index(t: Strided, index: tuple[int, ...]) -> int:
    """Where element ``index`` lives in ``t.data``: offset + sum of index * stride.

    >>> storage_index(tensor([[1, 2, 3], [4, 5, 6]]), (1, 2))
    5
    """
    return _position(t, index)


@checked(t="strided tensor", also=_index_in_range)
def element(t: Strided, index: tuple[int, ...]):
    """The element at ``index``.

    >>> element(tensor([[1, 2, 3], [4, 5, 6]]), (1, 0))
    4
    """
    return t.data[_position(t, index)]


@checked(t="strided tensor")
def is_contiguous(t: Strided) -> bool:
    """True when the strides are the row-major ones: reading data in order walks the tensor in order.

    >>> is_contiguous(transpose_dims(tensor([[1, 2], [3, 4]]), 0, 1))
    False
    """
    return _is_contiguous(t)


def _is_contiguous(t: Strided) -> bool:
    return all(s == r for n, s, r in zip(t.shape, t.strides, _row_major_strides(t.shape)) if n != 1)


def _view_keeps_elements(func: str, arguments: dict, sizes: dict) -> None:
    t, shape = arguments["t"], tuple(arguments["shape"])
    if math.prod(shape) != math.prod(t.shape):
        raise ShapeError(
            f"{func}: shape {t.shape} has {math.prod(t.shape)} elements but {shape} has {math.prod(shape)}; "
            "a view must keep the number of elements"
        )
    _check_row_major(func, t)


def _check_row_major(func: str, t: Strided) -> None:
    if not _is_contiguous(t):
        raise ValueError(
            f"{func}: the tensor of shape {t.shape} with strides {t.strides} is not contiguous; "
            "its elements are not in row-major order, so call contiguous() first (a copy)"
        )


@checked(t="strided tensor", shape="strided shape", also=_view_keeps_elements)
def view(t: Strided, shape: tuple[int, ...]) -> Strided:
    """The same data read with another shape (same number of elements); nothing is copied.

    This simple version needs a contiguous tensor. After a transpose the
    elements are no longer in row-major order; PyTorch's ``view`` can still
    split or keep some dimensions of such a tensor, but merging dimensions
    whose elements are not next to each other in memory (as merging heads
    after a transpose does) fails there too. Call ``contiguous`` first.

    >>> view(tensor([1, 2, 3, 4, 5, 6]), (2, 3)).strides
    (3, 1)
    """
    return Strided(t.data, tuple(shape), _row_major_strides(shape), t.offset)


def _dims_exist(func: str, arguments: dict, sizes: dict) -> None:
    dims = len(arguments["t"].shape)
    for d in (arguments["dim0"], arguments["dim1"]):
        if not 0 <= d < dims:
            raise ValueError(f"{func}: dimension {d} does not exist in a {dims}-dimensional tensor")


@checked(t="strided tensor", dim0="int", dim1="int", also=_dims_exist)
def transpose_dims(t: Strided, dim0: int, dim1: int) -> Strided:
    """Swap two dimensions by swapping their sizes and strides; the data list is shared, not moved.

    >>> transpose_dims(tensor([[1, 2, 3], [4, 5, 6]]), 0, 1)
    Strided(data=[1, 2, 3, 4, 5, 6], shape=(3, 2), strides=(1, 3), offset=0)
    """
    shape, strides = list(t.shape), list(t.strides)
    shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
    strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
    return Strided(t.data, tuple(shape), tuple(strides), t.offset)


@checked(t="strided tensor")
def contiguous(t: Strided) -> Strided:
    """A tensor with the same elements in row-major order: ``t`` itself if it is already, else a copy.

    >>> contiguous(transpose_dims(tensor([[1, 2, 3], [4, 5, 6]]), 0, 1)).data
    [1, 4, 2, 5, 3, 6]
    """
    if _is_contiguous(t):
        return t
    data = [t.data[_position(t, index)] for index in product(*(range(n) for n in t.shape))]
    return Strided(data, t.shape, _row_major_strides(t.shape))


def _position(t: Strided, index: tuple[int, ...]) -> int:
    """offset + sum of index * stride, for an index known to be in range."""
    return t.offset + sum(i * s for i, s in zip(index, t.strides))


@checked(t="strided tensor")
def tolist(t: Strided):
    """The tensor as nested lists, in the order its shape and strides say.

    >>> tolist(transpose_dims(tensor([[1, 2, 3], [4, 5, 6]]), 0, 1))
    [[1, 4], [2, 5], [3, 6]]
    """
    def build(prefix):
        if len(prefix) == len(t.shape):
            return t.data[_position(t, prefix)]
        return [build(prefix + [i]) for i in range(t.shape[len(prefix)])]

    return build([])


def _splits_into_heads(func: str, arguments: dict, sizes: dict) -> None:
    t, num_heads = arguments["t"], arguments["num_heads"]
    if len(t.shape) != 3:
        raise ShapeError(f"{func}: expected a [batch, seq_len, d_model] tensor, got shape {t.shape}")
    if t.shape[2] % num_heads:
        raise ShapeError(f"{func}: d_model {t.shape[2]} is not divisible by num_heads {num_heads}")
    _check_row_major(func, t)


@checked(t="strided tensor", num_heads="positive int", also=_splits_into_heads)
def strided_split_heads(t: Strided, num_heads: int) -> Strided:
    """[B, T, d_model] -view-> [B, T, num_heads, d_k] -transpose(1, 2)-> [B, num_heads, T, d_k].

    No element moves: the result shares ``t.data`` and is not contiguous.
    """
    B, T, d_model = t.shape
    shape = (B, T, num_heads, d_model // num_heads)
    return transpose_dims(Strided(t.data, shape, _row_major_strides(shape), t.offset), 1, 2)  # view, then swap


def _four_dims(func: str, arguments: dict, sizes: dict) -> None:
    shape = arguments["t"].shape
    if len(shape) != 4:
        raise ShapeError(f"{func}: expected a [batch, num_heads, seq_len, d_k] tensor, got shape {shape}")


@checked(t="strided tensor", also=_four_dims)
def strided_merge_heads(t: Strided) -> Strided:
    """[B, num_heads, T, d_k] -transpose(1, 2)-> [B, T, num_heads, d_k] -contiguous-> -view-> [B, T, d_model]."""
    B, h, T, d_k = t.shape
    return view(contiguous(transpose_dims(t, 1, 2)), (B, T, h * d_k))
