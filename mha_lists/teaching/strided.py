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

from ..core.checks import ShapeError, all_finite, check_int, check_positive_int, is_number, quote_int, shorten

__all__ = ["Strided", "tensor", "strided_split_heads", "strided_merge_heads"]


MAX_DIMS = 64  # dimensions of a tensor here
MAX_ELEMENTS = 10_000_000  # elements of a tensor here (a stride of 0 can read many from one number)


# === The checks: a tensor, a shape, an index, a dimension ===


def _how_many(n: int) -> str:
    """A count of elements for a message: 10,000,001, or 'over 10^18' (64 sizes multiply to thousands of digits)."""
    return f"{n:,}" if n < 10**18 else "over 10^18"


def check_shape(func: str, name: str, shape: object) -> tuple[int, ...]:
    """A non-empty tuple of positive ints, of at most MAX_DIMS dimensions and MAX_ELEMENTS elements; return it."""
    if not isinstance(shape, (list, tuple)) or not shape:
        raise TypeError(f"{func}: {name} must be a non-empty tuple of positive ints, got {shorten(shape)}")
    if len(shape) > MAX_DIMS:
        raise ValueError(f"{func}: {name} has {len(shape)} dimensions; at most {MAX_DIMS}")
    for d, n in enumerate(shape):
        check_positive_int(func, f"{name}[{d}]", n)
    if math.prod(shape) > MAX_ELEMENTS:
        raise ValueError(f"{func}: {name} {shorten(tuple(shape))} has {_how_many(math.prod(shape))} elements; "
                         f"at most {MAX_ELEMENTS:,}")
    return tuple(shape)


def check_tensor(func: str, name: str, t: object) -> None:
    """A Strided whose shape, strides and offset only ever read inside its storage."""
    if not isinstance(t, Strided):
        raise TypeError(f"{func}: {name} must be a Strided tensor (see tensor()), got {type(t).__name__}")
    if not isinstance(t.data, list):
        raise TypeError(f"{func}: {name}.data must be a list (the storage), got {type(t.data).__name__}")
    shape = check_shape(func, f"{name}.shape", t.shape)
    if not isinstance(t.strides, (list, tuple)) or len(t.strides) != len(shape):
        raise ShapeError(f"{func}: {name}.strides is {shorten(t.strides)}; it needs one int per dimension "
                         f"({len(shape)})")
    for d, stride in enumerate(t.strides):
        if check_int(func, f"{name}.strides[{d}]", stride) < 0:
            raise ValueError(f"{func}: {name}.strides[{d}] is {quote_int(stride)}; strides here are 0 or more")
    if check_int(func, f"{name}.offset", t.offset) < 0:
        raise ValueError(f"{func}: {name}.offset is {quote_int(t.offset)}; an offset is 0 or more")
    last = t.offset + sum((n - 1) * stride for n, stride in zip(shape, t.strides))
    if last >= len(t.data):
        raise ShapeError(
            f"{func}: {name}'s storage has {len(t.data)} entries but its shape {shorten(shape)}, strides "
            f"{shorten(tuple(t.strides))} and offset {quote_int(t.offset)} reach index {quote_int(last)}; "
            "the storage must hold every element"
        )


def check_index(func: str, t: Strided, index: object) -> tuple[int, ...]:
    """One int per dimension of t, each from 0 to that dimension's size - 1; return it."""
    if not isinstance(index, (list, tuple)):
        raise TypeError(f"{func}: index must be a tuple of ints, got {shorten(index)}")
    if len(index) != len(t.shape):
        raise ShapeError(f"{func}: index {shorten(tuple(index))} has {len(index)} numbers; the tensor has "
                         f"{len(t.shape)} dimensions")
    for d, (i, n) in enumerate(zip(index, t.shape)):
        if not 0 <= check_int(func, f"index[{d}]", i) < n:
            raise ValueError(f"{func}: index[{d}] is {quote_int(i)}; dimension {d} has size {n}, so it must be "
                             f"from 0 to {n - 1}")
    return tuple(index)


def check_dim(func: str, name: str, d: object, dims: int) -> int:
    """A dimension of a ``dims``-dimensional tensor: an int from 0 to dims - 1; return it."""
    if not 0 <= check_int(func, name, d) < dims:
        raise ValueError(f"{func}: {name} is {quote_int(d)}; a {dims}-dimensional tensor has dimensions "
                         f"0 to {dims - 1}")
    return d


def check_row_major(func: str, t: Strided) -> None:
    if not _is_contiguous(t):
        raise ValueError(
            f"{func}: the tensor of shape {shorten(t.shape)} with strides {shorten(t.strides)} is not contiguous; "
            "its elements are not in row-major order, so call contiguous() first (a copy)"
        )


# === What the methods compute, on a tensor already checked ===


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


# === The tensor and its methods ===


class Strided(NamedTuple):
    """A view of a flat list of numbers as an n-dimensional tensor.

    Its operations are its methods, as a PyTorch tensor's are: ``t.view((2, 3))``,
    ``t.transpose(0, 1)``, ``t.contiguous()``. Each checks its arguments first;
    its messages call the tensor ``t``, as the docs do.
    """

    data: list  # the storage, shared between views
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @staticmethod
    def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
        """Strides of a contiguous tensor: the last dimension moves by 1.

        >>> Strided.row_major_strides((2, 5, 16))
        (80, 16, 1)
        """
        return _row_major_strides(check_shape("row_major_strides", "shape", shape))

    def storage_index(self, index: tuple[int, ...]) -> int:
        """Where element ``index`` lives in ``self.data``: offset + sum of index * stride.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).storage_index((1, 2))
        5
        """
        check_tensor("storage_index", "t", self)
        return _position(self, check_index("storage_index", self, index))

    def element(self, index: tuple[int, ...]):
        """The element at ``index``.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).element((1, 0))
        4
        """
        check_tensor("element", "t", self)
        return self.data[_position(self, check_index("element", self, index))]

    def is_contiguous(self) -> bool:
        """True when the strides are the row-major ones: reading data in order walks the tensor in order.

        >>> tensor([[1, 2], [3, 4]]).transpose(0, 1).is_contiguous()
        False
        """
        check_tensor("is_contiguous", "t", self)
        return _is_contiguous(self)

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
        check_tensor("view", "t", self)
        shape = check_shape("view", "shape", shape)
        if math.prod(shape) != math.prod(self.shape):
            raise ShapeError(f"view: shape {shorten(tuple(self.shape))} has {math.prod(self.shape)} elements but "
                             f"{shorten(shape)} has {math.prod(shape)}; a view must keep the number of elements")
        check_row_major("view", self)
        return Strided(self.data, shape, _row_major_strides(shape), self.offset)

    def transpose(self, dim0: int, dim1: int) -> Strided:
        """Swap two dimensions by swapping their sizes and strides; the data list is shared, not moved.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1)
        Strided(data=[1, 2, 3, 4, 5, 6], shape=(3, 2), strides=(1, 3), offset=0)
        """
        check_tensor("transpose", "t", self)
        check_dim("transpose", "dim0", dim0, len(self.shape))
        check_dim("transpose", "dim1", dim1, len(self.shape))
        shape, strides = list(self.shape), list(self.strides)
        shape[dim0], shape[dim1] = shape[dim1], shape[dim0]
        strides[dim0], strides[dim1] = strides[dim1], strides[dim0]
        return Strided(self.data, tuple(shape), tuple(strides), self.offset)

    def contiguous(self) -> Strided:
        """The same elements in row-major order: ``self`` if they are already, else a copy.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1).contiguous().data
        [1, 4, 2, 5, 3, 6]
        """
        check_tensor("contiguous", "t", self)
        if _is_contiguous(self):
            return self
        data = [self.data[_position(self, index)] for index in product(*(range(n) for n in self.shape))]
        return Strided(data, self.shape, _row_major_strides(self.shape))

    def tolist(self):
        """The tensor as nested lists, in the order its shape and strides say.

        >>> tensor([[1, 2, 3], [4, 5, 6]]).transpose(0, 1).tolist()
        [[1, 4], [2, 5], [3, 6]]
        """
        check_tensor("tolist", "t", self)

        def build(prefix):
            if len(prefix) == len(self.shape):
                return self.data[_position(self, prefix)]
            return [build(prefix + [i]) for i in range(self.shape[len(prefix)])]

        return build([])


# === Making one, and the two PyTorch lines of multi-head attention ===


def check_nested(func: str, name: str, nested: object) -> tuple[int, ...]:
    """Nested lists of numbers, all lists at one depth the same length, at most MAX_DIMS deep and
    MAX_ELEMENTS elements; return the shape."""
    if not isinstance(nested, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list (of lists) of numbers, got {type(nested).__name__}")
    shape, node = [], nested
    while isinstance(node, (list, tuple)):  # down the first branch: the shape every branch must have
        if not node:
            raise ShapeError(f"{func}: empty lists have no shape to read")
        if len(shape) == MAX_DIMS:
            raise ValueError(f"{func}: the lists are nested more than {MAX_DIMS} deep; at most {MAX_DIMS} dimensions")
        shape.append(len(node))
        node = node[0]
    if math.prod(shape) > MAX_ELEMENTS:  # before the walk: one list repeated can stand for many elements
        raise ValueError(f"{func}: {name} has shape {shorten(tuple(shape))}, {_how_many(math.prod(shape))} elements; "
                         f"at most {MAX_ELEMENTS:,}")

    def walk(node: object, depth: int) -> None:
        if depth == len(shape):
            if isinstance(node, (list, tuple)):
                raise ShapeError(f"{func}: the nesting is deeper in some places than others")
            if not is_number(node):
                raise TypeError(f"{func}: an entry is {shorten(node, 40)} ({type(node).__name__}); "
                                "entries must be numbers")
            if not all_finite([[node]]):
                raise ValueError(f"{func}: an entry is {shorten(node)}; entries must be finite numbers")
            return
        if not isinstance(node, (list, tuple)) or len(node) != shape[depth]:
            raise ShapeError(f"{func}: ragged at depth {depth}; every list there must have {shape[depth]} items")
        for child in node:
            walk(child, depth + 1)

    walk(nested, 0)
    return tuple(shape)


def tensor(nested) -> Strided:  # nested lists (n0, n1, ...) -> Strided of that shape
    """Copy nested lists (all rows the same length) into a contiguous Strided tensor.

    >>> tensor([[1, 2, 3], [4, 5, 6]])
    Strided(data=[1, 2, 3, 4, 5, 6], shape=(2, 3), strides=(3, 1), offset=0)
    """
    shape = check_nested("tensor", "nested", nested)
    data = nested
    for _ in shape[1:]:  # one level of nesting less each time
        data = [entry for part in data for entry in part]
    return Strided(list(data), shape, _row_major_strides(shape))


def strided_split_heads(t: Strided, num_heads: int) -> Strided:  # [B, T, d_model] -> [B, num_heads, T, d_k]
    """[B, T, d_model] -view-> [B, T, num_heads, d_k] -transpose(1, 2)-> [B, num_heads, T, d_k].

    No element moves: the result shares ``t.data`` and is not contiguous.
    """
    check_tensor("strided_split_heads", "t", t)
    check_positive_int("strided_split_heads", "num_heads", num_heads)
    if len(t.shape) != 3:
        raise ShapeError(f"strided_split_heads: expected a [batch, seq_len, d_model] tensor, got shape "
                         f"{shorten(tuple(t.shape))}")
    if t.shape[2] % num_heads:
        raise ShapeError(f"strided_split_heads: d_model {t.shape[2]} is not divisible by num_heads "
                         f"{quote_int(num_heads)}")
    check_row_major("strided_split_heads", t)
    B, T, d_model = t.shape
    return t.view((B, T, num_heads, d_model // num_heads)).transpose(1, 2)


def strided_merge_heads(t: Strided) -> Strided:  # [B, num_heads, T, d_k] -> [B, T, num_heads * d_k]
    """[B, num_heads, T, d_k] -transpose(1, 2)-> [B, T, num_heads, d_k] -contiguous-> -view-> [B, T, d_model]."""
    check_tensor("strided_merge_heads", "t", t)
    if len(t.shape) != 4:
        raise ShapeError(f"strided_merge_heads: expected a [batch, num_heads, seq_len, d_k] tensor, got shape "
                         f"{shorten(tuple(t.shape))}")
    B, h, T, d_k = t.shape
    return t.transpose(1, 2).contiguous().view((B, T, h * d_k))
