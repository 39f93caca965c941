"""The arithmetic the formula is written with: matrices as lists of rows, multiplied and joined.

A matrix is a list of rows. ``product(A, B)`` is A times B: entry [i][j] is
``fsum`` of row i of A times column j of B. Every sum is a ``math.fsum``, which
is correctly rounded, so the numbers are the same on every CPython (notebook
07a says why). ``joined`` puts matrices side by side, ``columns_of`` cuts them
apart again, ``finite`` says when a result left float64's range.

These trust their arguments: attention and its gradients check theirs once, at
their top, and then run the formula through them. The checked operations a
learner calls by hand (``matmul``, ``transpose``, ``concat_heads`` ...) are
notebook 00's, in ``teaching/lists_as_matrices.py``; ``matmul`` is ``product``
after its checks.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from math import fsum, isfinite
from operator import mul
from typing import Union

from .checks import too_large

Number = Union[int, float]
Vector = list[float]
Matrix = list[list[float]]

MAX_WORK = 200_000_000  # multiply-adds in one call: about ten seconds of pure Python

__all__: list[str] = []  # the core's own arithmetic; the operations a learner calls are in teaching/lists_as_matrices.py


@contextmanager
def overflow_named(func: str) -> Iterator[None]:
    """Name the function the learner called when its arithmetic leaves float64's range. The unchecked
    arithmetic raises OverflowError("the scores Q K^T"); inside ``with overflow_named("attention"):`` that
    becomes attention's own ValueError, "attention: the scores Q K^T are too large: ..."."""
    try:
        yield
    except OverflowError as error:
        raise too_large(func, error) from None


def too_much_work(func: str, multiply_adds: int) -> ValueError:
    """The error for a call whose arithmetic would run for minutes: a typo, not a lesson."""
    return ValueError(f"{func}: these sizes take {multiply_adds:,} multiply-adds; one call here does at most "
                      f"{MAX_WORK:,} (about ten seconds): use fewer tokens or smaller matrices")


def product(A: Matrix, B: Matrix, what: str = "the products") -> Matrix:  # (n, m) @ (m, p) -> (n, p), unchecked
    """Entry ``[i][j]`` is row i of A times column j of B, ``fsum(A[i][t] * B[t][j])``:
    ``zip(*B)`` gives B's columns, ``map(mul, row, col)`` the products."""
    columns = list(zip(*B))
    try:
        return [[fsum(map(mul, row, col)) for col in columns] for row in A]
    except (OverflowError, ValueError):  # fsum's running total, or inf - inf: past float64's range
        raise OverflowError(what) from None


def finite(M: Matrix, what: str) -> Matrix:
    """M itself when every entry is finite; else an OverflowError saying what overflowed."""
    if not all(map(isfinite, chain.from_iterable(M))):
        raise OverflowError(what)
    return M


def columns_of(M: Matrix, widths: Sequence[int]) -> list[Matrix]:  # unchecked: blocks of the given widths
    """M's columns cut into consecutive blocks of the given widths, left to right."""
    starts = [sum(widths[:b]) for b in range(len(widths))]
    return [[list(row[s:s + w]) for row in M] for s, w in zip(starts, widths)]


def joined(heads: Sequence[Matrix]) -> Matrix:  # unchecked concat_heads
    """[head_0 | head_1 | ...], row by row."""
    return [[x for head in heads for x in head[i]] for i in range(len(heads[0]))]
