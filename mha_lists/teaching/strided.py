"""A tensor as PyTorch stores it: one flat list, a shape, and strides.

Element ``[i0, i1, ...]`` lives at ``data[offset + i0 * strides[0] + i1 * strides[1] + ...]``.
The operations are the tensor's own methods, as in PyTorch:

=================================  ================================================
tensor(nested)                     copy nested lists into a contiguous Strided
t.view(shape)                      the same list read with another shape (a contiguous t)
t.transpose(dim0, dim1)            two sizes and two strides swapped; nothing moves
t.contiguous()                     the copy that puts the elements in row-major order
t.is_contiguous()                  are they in row-major order already?
t.tolist()                         the tensor as nested lists
t.element(index)                   one element
t.storage_index(index)             where that element lives in ``t.data``
Strided.row_major_strides(shape)   the strides of a contiguous tensor of that shape
strided_split_heads(t, num_heads)  ``t.view((B, T, h, d_k)).transpose(1, 2)``
strided_merge_heads(t)             ``t.transpose(1, 2).contiguous().view((B, T, d_model))``
=================================  ================================================

This is what ``x.view(B, T, h, d_k).transpose(1, 2)`` does.
"""

from __future__ import annotations

import math
from itertools import product
from typing import NamedTuple

from ..core.checks import ShapeError, check_int, check_positive_int, checked, is_number, kind

__all__ = ["Strided", "tensor", "strided_split_heads", "strided_merge_heads"]


MAX_DIMS = 64  # dimensions of a tensor here
MAX_ELEMENTS = 10_000_000  # elements of a tensor here (a stride of 0 can read many from one number)


# === Two kinds of argument for the door (``checked``): a tensor and a shape ===


@kind("strided tensor")
def _check_tensor(func: str, name: str, t: object, expected: tuple = ()) -> None:
    """A Strided whose shape, strides and offset only ever read inside its storage."""
    name = "t" if name == "self" else name  # a method's tensor: the messages call it t, as the docs do
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


# === What the methods trust, and the rules their doors check beyond the kinds ===


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def _position(t: Strided, index: tuple[int, ...]) -> int:
    """offset + sum of index * stride, for an index known to be in range."""
    return t.offset + sum(i * s for i, s in zip(index, t.strides))


def _is_contiguous(t: Strided) -> bool:
    return all(s == r for n, s, r in zip(t.shape, t.strides, _row_major_strides(t.shape)) if n != 1)


def _check_row_major(func: str, t: Strided) -> None:
    if not _is_contiguous(t):
        raise ValueError(
            f"{func}: the tensor of shape {t.shape} with strides {t.strides} is not contiguous; "
            "its elements are not in row-major order, so call contiguous() first (a copy)"
        )


def _index_in_range(func: str, arguments: dict, sizes: dict) -> None:
    t, index = arguments["self"], arguments["index"]
    if not isinstance(index, (list, tuple)):
        raise TypeError(f"{func}: index must be a tuple of ints, got {index!r}")
    if len(index) != len(t.shape):
        raise ShapeError(f"{func}: index {index} has {len(index)} numbers; the tensor has {len(t.shape)} dimensions")
    for d, (i, n) in enumerate(zip(index, t.shape)):
        if not 0 <= check_int(func, f"index[{d}]", i) < n:
            raise ValueError(f"{func}: index {i} is out of range for dimension {d} of size {n}")


def _view_keeps_elements(func: str, arguments: dict, sizes: dict) -> None:
    t, shape = arguments["self"], tuple(arguments["shape"])
    if math.prod(shape) != math.prod(t.shape):
        raise ShapeError(
            f"{func}: shape {t.shape} has {math.prod(t.shape)} elements but {shape} has {math.prod(shape)}; "
            "a view must keep the number of elements"
        )
    _check_row_major(func, t)


def _dims_exist(func: str, arguments: dict, sizes: dict) -> None:
    dims = len(arguments["self"].shape)
    for d in (arguments["dim0"], arguments["dim1"]):
        if not 0 <= d < dims:
            raise ValueError(f"{func}: dimension {d} does not exist in a {dims}-dimensional tensor")


# === The tensor and its methods ===


class Strided(NamedTuple):
    """A view of a flat list of numbers as an n-dimensional tensor.

    Its operations are its methods, as a PyTorch tensor's are: ``t.view((2, 3))``,
    ``t.transpose(0, 1)``, ``t.contiguous()``. Each checks its arguments at the door.
    """

    data: list  # the storage, shared between views
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    @checked(shape="strided shape")
    def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
        """Strides of a contiguous tensor: the last dimension moves by 1.

        >>> Strided.row_major_strides((2, 5, 16))
        (80, 16, 1)
        """
        return _row_major_strides(shape)

    @checked(self="strided tensor", also=_index_in_range)
    def storage_index(self, index: tuple[int, ...]) -> int:
        """Where element ``index`` lives in ``self.data``: offset + sum of index * stride.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).storage_index((1, 2))
        5
        """
        return _position(self, index)

    @checked(self="strided tensor", also=_index_in_range)
    def element(self, index: tuple[int, ...]):
        """The element at ``index``.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).element((1, 0))
        4
        """
        return self.data[_position(self, index)]

    @checked(self="strided tensor")
    def is_contiguous(self) -> bool:
        """True when the strides are the row-major ones: reading data in order walks the tensor in order.

        >>> tensor([[1, 2], [3, 4]]).transpose(0, 1).is_contiguous()
        False
        """
        return _is_contiguous(self)

    @checked(self="strided tensor", shape="strided shape", also=_view_keeps_elements)
    def view(self, shape: tuple[int, ...]) -> Strided:
        """The same data read with another shape (same number of elements); nothing is copied.

        This simple version needs a contiguous tensor. After a transpose the
        elements are no longer in row-major order; PyTorch's ``view`` can still
        split or keep some dimensions of such a tensor, but merging dimensions
        whose elements are not next to each other in memory (as merging heads
        after a transpose does) fails there too. Call ``contiguous`` first.

        >>> tensor([1, 2, 3, 4, 5, 6]).view((2, 3)).strides
        (3, 1)
        """
        return Strided(self.data, tuple(shape), _row_major_strides(shape), self.offset)

    @checked(self="strided tensor", dim0="int", dim1="int", also=_dims_exist)
    def transpose(self, dim0: int, dim1: int) -> Strided:
        """Swap two dimensions by swapping their sizes and strides; the data list is shared, not moved.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1)
        Strided(data=[1, 2, 3, 4, 5, 6], shape=(3, 2), strides=(1, 3), offset=0)
        """
        shape, strides = list(self.shape), list(self.strides)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
        return Strided(self.data, tuple(shape), tuple(strides), self.offset)

    @checked(self="strided tensor")
    def contiguous(self) -> Strided:
        """The same elements in row-major order: ``self`` if they are already, else a copy.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1).contiguous().data
        [1, 4, 2, 5, 3, 6]
        """
        if _is_contiguous(self):
            return self
        data = [self.data[_position(self, index)] for index in product(*(range(n) for n in self.shape))]
        return Strided(data, self.shape, _row_major_strides(self.shape))

    @checked(self="strided tensor")
    def tolist(self):
        """The tensor as nested lists, in the order its shape and strides say.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1).tolist()
        [[1, 4], [2, 5], [3, 6]]
        """
        def build(prefix):
            if len(prefix) == len(self.shape):
                return self.data[_position(self, prefix)]
            return [build(prefix + [i]) for i in range(self.shape[len(prefix)])]

        return build([])


# === Making one, and the two PyTorch lines of multi-head attention ===


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
    return t.view((B, T, num_heads, d_model // num_heads)).transpose(1, 2)


def _four_dims(func: str, arguments: dict, sizes: dict) -> None:
    shape = arguments["t"].shape
    if len(shape) != 4:
        raise ShapeError(f"{func}: expected a [batch, num_heads, seq_len, d_k] tensor, got shape {shape}")


@checked(t="strided tensor", also=_four_dims)
def strided_merge_heads(t: Strided) -> Strided:
    """[B, num_heads, T, d_k] -transpose(1, 2)-> [B, T, num_heads, d_k] -contiguous-> -view-> [B, T, d_model]."""
    B, h, T, d_k = t.shape
    return t.transpose(1, 2).contiguous().view((B, T, h * d_k))
