"""Attention on paper: three tokens, d_model 4, two heads, weights chosen by hand.

The example every classroom piece shares (notebook 00a, ``docs/attention-on-paper.md``,
the worksheets and their tests). Each token is four integers::

    x = [pos a, pos b | noun, verb]

``pos a, pos b`` say where the token stands, a quarter turn per position:
(1, 0), (0, 1), (-1, 0). ``noun`` and ``verb`` say what it is. The weights are
small integers chosen so that each head does one job a reader can name:

- head 0, "the previous token": a query is the position turned a quarter turn
  back, so ``like`` looks at ``I`` and ``transformers`` looks at ``like``, whatever
  their types; ``I`` has no token before it and splits its weight between the two
  keys at right angles to its query, its own and ``transformers``'s;
- head 1, "the subject": every query asks for the noun in position 0, so every
  token, ``like`` included, finds ``I``.

V copies the ``noun, verb`` features and W_O is the identity, so the output row
of ``transformers`` reads "my previous word is a verb | the subject is a noun":
two facts from two different tokens, which one head with one softmax cannot
fetch at once (notebook 00a shows it).

Every number up to the raw scores Q K^T is an integer. The scale 1/sqrt(2) and
the softmax are done with a short table of e^x, one line per difference
between a raw score and the largest raw score of its row:

=============================  ==============================================
paper_example()                tokens, feature names, X, weights, head names
raw_scores(Q, K)               Q K^T before scaling (integers here)
integer_matrix(M)              whole-number floats back to ints, for printing
score_differences(S)           the differences d = s - max(row) that occur
exp_table(differences, scale)  rows (d, d * scale, e^(d * scale)) to print
table_softmax(row, scale)      the softmax a student does with that table
row_where_heads_differ(A, i)   the row where the heads read different tokens
=============================  ==============================================
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import NamedTuple

from ..core.checks import ShapeError, all_finite, check_int, check_list, check_matrix, check_number, check_rows, \
    check_vector, shorten, too_large
from ..core.matrix import Matrix, Vector, finite, product
from .lists_as_matrices import matmul  # noqa: F401 (for paper_example's doctest)
from ..core.attention import MHAWeights

__all__ = ["paper_example", "raw_scores", "integer_matrix", "score_differences", "exp_table", "table_softmax"]

PAPER_STORY = """\
Each token is four integers. The first two say where it stands, a quarter turn per \
position: (1, 0) for position 0, (0, 1) for position 1, (-1, 0) for position 2. The last two \
say what it is: a noun or a verb.

The weights were chosen by hand so that each head has one job. Head 0 looks for the \
previous token: a query asks for the position one step back, and a key is its own \
position; I, first, asks for a position no token holds. Head 1 looks for the subject: \
every query asks for the noun in position 0. \
Both heads carry the same value, the token's type (noun, verb), and W_O is the identity, \
so you can read each head in the output.

Before you start, predict: which token will each token look at in each head? After step 3, \
circle the largest weight in each row and compare."""

PAPER_TOKENS = ["I", "like", "transformers"]
PAPER_FEATURES = ["pos a", "pos b", "noun", "verb"]
PAPER_HEADS = ["previous token", "subject"]

# One row per token: [pos a, pos b | noun, verb].
_X = [
    [1, 0, 1, 0],   # I            position 0, a noun
    [0, 1, 0, 1],   # like         position 1, a verb
    [-1, 0, 1, 0],  # transformers position 2, a noun
]

# Head 0, "the previous token". The key is the position, doubled: k = 2 (pos a, pos b).
# The query is the position a quarter turn back, doubled, (pos a, pos b) -> 2 (pos b, -pos a), from the
# position alone: like -> (2, 0), I's key; transformers -> (0, 2), like's; I -> (0, -2), no token's.
_W_Q0 = [[0, -2], [2, 0], [0, 0], [0, 0]]
_W_K0 = [[2, 0], [0, 2], [0, 0], [0, 0]]
# Head 1, "the subject". Every token is a noun or a verb, so every query is (1, 1);
# the key adds pos a and noun, which only I (position 0, a noun) has both of: k = (2, 2).
_W_Q1 = [[0, 0], [0, 0], [1, 1], [1, 1]]
_W_K1 = [[1, 1], [0, 0], [1, 1], [0, 0]]
# Both heads carry the token's type: v = (noun, verb).
_W_V = [[0, 0], [0, 0], [1, 0], [0, 1]]
# W_O is the identity, so the output is the concatenation and each head can be read off it.
_W_O = [[int(r == c) for c in range(4)] for r in range(4)]


class PaperExample(NamedTuple):
    """The example on paper: what each row and column of X means, and the weights."""

    tokens: list[str]  # ["I", "like", "transformers"]
    features: list[str]  # the names of X's four columns
    x: Matrix  # (3, 4) integers
    weights: MHAWeights  # 2 heads, d_k = d_v = 2, integers
    head_names: list[str]  # what each head was built to do


def paper_example() -> PaperExample:
    """The 3-token, d_model-4, 2-head example with integer weights; fresh lists on every call.

    >>> ex = paper_example()
    >>> ex.tokens, len(ex.x), len(ex.x[0]), len(ex.weights.W_Q)
    (['I', 'like', 'transformers'], 3, 4, 2)
    >>> matmul(ex.x, ex.weights.W_Q[0])  # head 0's queries: the position one step back (I's: one no token holds)
    [[0.0, -2.0], [2.0, 0.0], [0.0, 2.0]]
    """
    def copy(M: Matrix) -> Matrix:
        return [list(row) for row in M]

    weights = MHAWeights(
        W_Q=[copy(_W_Q0), copy(_W_Q1)],
        W_K=[copy(_W_K0), copy(_W_K1)],
        W_V=[copy(_W_V), copy(_W_V)],
        W_O=copy(_W_O),
    )
    return PaperExample(list(PAPER_TOKENS), list(PAPER_FEATURES), copy(_X), weights, list(PAPER_HEADS))


def raw_scores(Q: Matrix, K: Matrix) -> Matrix:  # (T, d_k), (T_k, d_k) -> (T, T_k)
    """Q (T, d_k) times K^T (d_k, T_k): the (T, T_k) scores before scaling.

    >>> raw_scores([[2, 0]], [[2, 0], [0, 2], [-2, 0]])
    [[4.0, 0.0, -4.0]]
    """
    T, d_k = check_matrix("raw_scores", "Q", Q)
    T_k, d_k_K = check_matrix("raw_scores", "K", K)
    if d_k != d_k_K:
        raise ShapeError(f"raw_scores: Q is {T}x{d_k} and K is {T_k}x{d_k_K}; Q and K must have the same number of "
                         "columns (d_k) to be multiplied")
    try:
        return finite(product(Q, [list(column) for column in zip(*K)]), "the raw scores")  # Q @ K^T
    except OverflowError:  # a score past float64's range, or an int product too large for a float
        raise too_large("raw_scores", "the raw scores") from None


def row_where_heads_differ(attention: Sequence[Matrix], prefer: int) -> int:  # h x (T, T_k) -> a row index
    """The row where the heads read different tokens, each with more than half its weight on its pick: ``prefer``
    if it is such a row, else the first one, else ``prefer`` (the heads agree everywhere). Notebook 00a's Step 8
    gives that row's two jobs to one head.

    >>> head_0 = [[0.9, 0.1], [0.8, 0.2]]  # reads token 0 in both rows
    >>> head_1 = [[0.7, 0.3], [0.1, 0.9]]  # reads token 0, then token 1
    >>> row_where_heads_differ([head_0, head_1], prefer=0)
    1
    >>> row_where_heads_differ([head_0, head_0], prefer=0)
    0
    """
    check_list("row_where_heads_differ", "attention", attention, "heads' weights")
    shapes = [check_matrix("row_where_heads_differ", f"attention[{h}]", A) for h, A in enumerate(attention)]
    if len(set(shapes)) > 1:
        raise ShapeError(f"row_where_heads_differ: the heads' weights have shapes {shapes}; every head's must be the "
                         "same (one row per query, one column per key)")
    check_int("row_where_heads_differ", "prefer", prefer)
    if not 0 <= prefer < shapes[0][0]:
        raise ValueError(f"row_where_heads_differ: prefer is {prefer}; a row is 0 to {shapes[0][0] - 1}")
    rows = [i for i in range(shapes[0][0])
            if len({A[i].index(max(A[i])) for A in attention}) > 1 and all(max(A[i]) > 0.5 for A in attention)]
    return prefer if prefer in rows or not rows else rows[0]


def integer_matrix(M: Sequence[Sequence[float]]) -> list[list[int]]:  # (n, m) -> (n, m)
    """M (n, m) with every whole-number entry as an int, for printing integers as integers.

    >>> integer_matrix([[4.0, -0.0], [2.0, 1.0]])
    [[4, 0], [2, 1]]
    >>> integer_matrix([[0.5]])
    Traceback (most recent call last):
    ...
    ValueError: integer_matrix: M[0][0] is 0.5, not a whole number
    """
    check_rows("integer_matrix", "M", M)
    for i, row in enumerate(M):
        for j, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    isinstance(value, int) or value.is_integer()):
                raise ValueError(f"integer_matrix: M[{i}][{j}] is {shorten(value)}, not a whole number")
    return [[int(value) for value in row] for row in M]


def score_differences(score_matrices: Sequence[Matrix]) -> list[int]:  # h x (T, T_k) -> (n,)
    """Every d = s - max(row) that occurs in some (integer) score matrices, largest first.

    A student looks up e^(d * scale) for each; d = 0 is always there (each row's maximum).

    >>> score_differences([[[4, 0, -4]], [[0, 4, 0]]])
    [0, -4, -8]
    """
    func = "score_differences"
    if not isinstance(score_matrices, (list, tuple)) or not score_matrices:
        raise TypeError(f"{func}: score_matrices must be a non-empty list of matrices, got {shorten(score_matrices)}")
    for h, S in enumerate(score_matrices):
        check_matrix(func, f"score_matrices[{h}]", S)
        for i, row in enumerate(S):
            check_vector(func, f"score_matrices[{h}][{i}]", row)  # ints too large for a float, which cancel in a sum
            for s in row:
                if not float(s).is_integer():
                    raise ValueError(f"{func}: score_matrices[{h}] holds {shorten(s)}; raw scores must be whole "
                                     "numbers")
    differences = []
    for S in score_matrices:
        for row in S:
            top = max(row)
            differences += [s - top for s in row]
    if not all_finite([differences]):  # -1.7e308 - 1.7e308 is -inf
        raise too_large(func, "the differences s - max(row)")
    return sorted({int(d) for d in differences}, reverse=True)


class ExpRow(NamedTuple):
    """One line of the e^x table: the difference d, x = d * scale, and e^x rounded."""

    d: int
    x: float
    exp: float


def check_digits(func: str, digits: object) -> int:
    """Digits after the point for ``round``: an int from 0 to 17."""
    if not 0 <= check_int(func, "digits", digits) <= 17:
        raise ValueError(f"{func}: digits is {shorten(digits)}; give 0 to 17 digits after the point")
    return digits


def exp_table(differences: Sequence[int], scale: float, digits: int = 4) -> list[ExpRow]:  # (n,) -> n rows
    """One row (d, x = d * scale, e^x rounded to ``digits``) per difference, in the given order.

    >>> exp_table([0, -4], 0.5)
    [ExpRow(d=0, x=0.0, exp=1.0), ExpRow(d=-4, x=-2.0, exp=0.1353)]
    """
    check_vector("exp_table", "differences", differences)
    check_number("exp_table", "scale", scale, positive=True)
    check_digits("exp_table", digits)
    xs = [d * scale for d in differences]
    if not all_finite([xs]):  # d * scale past float64's range: e^x would be a silent 0 or an overflow
        raise too_large("exp_table", "the exponents x = d * scale")
    try:
        return [ExpRow(d, x, round(math.exp(x), digits)) for d, x in zip(differences, xs)]
    except OverflowError:  # e^x past float64's largest: x > 709.78...
        raise too_large("exp_table", "the powers e^x") from None


def table_softmax(raw_row: Sequence[float], scale: float, digits: int = 4) -> Vector:  # (n,) -> (n,)
    """Softmax of ``raw_row * scale`` the pencil way: e^x from the rounded table, then divide.

    Each e^((s - max) * scale) is rounded to ``digits`` as the printed table
    gives it; the weights are those numbers over their sum (not rounded). The
    answer is within about 10^-digits of the exact softmax.

    >>> [round(w, 4) for w in table_softmax([4, 0, -4], 0.5)]
    [0.8669, 0.1173, 0.0159]
    """
    check_vector("table_softmax", "raw_row", raw_row)
    check_number("table_softmax", "scale", scale, positive=True)
    check_digits("table_softmax", digits)
    top = max(raw_row)
    # Every x = (s - top) * scale is 0 or less, so e^x is at most 1; far below the top it is 0.0
    # (an x that overflows to -inf included). The top's own is e^0 = 1, so the sum is at least 1.
    # An int difference below -1.8e308 has no float: it is held at float64's lowest, whose e^x is 0 too.
    exps = [round(math.exp(max(s - top, -sys.float_info.max) * scale), digits) for s in raw_row]
    total = math.fsum(exps)
    return [e / total for e in exps]
