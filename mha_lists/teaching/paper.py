"""Attention on paper: three tokens, d_model 4, two heads, weights chosen by hand.

The example every classroom piece shares (notebook 00a, ``docs/attention-on-paper.md``,
the worksheets and their tests). Each token is four integers::

    x = [pos a, pos b | noun, verb]

``pos a, pos b`` say where the token stands, a quarter turn per position:
(1, 0), (0, 1), (-1, 0). ``noun`` and ``verb`` say what it is. The weights are
small integers chosen so that each head does one job a reader can name:

- head 0, "the previous token": a query asks for the position one step back,
  so ``like`` looks at ``I`` and ``transformers`` looks at ``like``;
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
=============================  ==============================================
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ..core.checks import check_matrix, checked
from ..core.matrix import Matrix, Vector, matmul, transpose
from ..core.attention import MHAWeights

__all__ = ["paper_example", "raw_scores", "integer_matrix", "score_differences", "exp_table", "table_softmax"]

PAPER_STORY = """\
Each token is four integers. The first two say where it stands, a quarter turn per \
position: (1, 0) for position 0, (0, 1) for position 1, (-1, 0) for position 2. The last two \
say what it is: a noun or a verb.

The weights were chosen by hand so that each head has one job. Head 0 looks for the \
previous token: a query asks for the position one step back, and a key is its own \
position. Head 1 looks for the subject: every query asks for the noun in position 0. \
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
# The query is the position one step back, doubled, built from position and type:
# I -> (2, 0) (no earlier token: ask for position 0, itself), like -> (2, 0), transformers -> (0, 2).
_W_Q0 = [[1, -1], [2, 0], [1, 1], [0, 0]]
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
    >>> matmul(ex.x, ex.weights.W_Q[0])  # head 0's queries: like and transformers ask one step back
    [[2.0, 0.0], [2.0, 0.0], [0.0, 2.0]]
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


@checked(Q="finite matrix T d_k", K="finite matrix T_k d_k", finite_result=True,
         why={"d_k": "Q and K must have the same number of columns (d_k) to be multiplied"})
def raw_scores(Q: Matrix, K: Matrix) -> Matrix:
    """Q (T, d_k) times K^T (d_k, T_k): the (T, T_k) scores before scaling.

    >>> raw_scores([[2, 0]], [[2, 0], [0, 2], [-2, 0]])
    [[4.0, 0.0, -4.0]]
    """
    return matmul(Q, transpose(K))


def _whole_numbers(func: str, arguments: dict, sizes: dict) -> None:
    for i, row in enumerate(arguments["M"]):
        for j, value in enumerate(row):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    isinstance(value, int) or value.is_integer()):
                raise ValueError(f"{func}: M[{i}][{j}] is {value!r}, not a whole number")


@checked(M="rows n m", also=_whole_numbers)
def integer_matrix(M: Sequence[Sequence[float]]) -> list[list[int]]:
    """M (n, m) with every whole-number entry as an int, for printing integers as integers.

    >>> integer_matrix([[4.0, -0.0], [2.0, 1.0]])
    [[4, 0], [2, 1]]
    >>> integer_matrix([[0.5]])
    Traceback (most recent call last):
    ...
    ValueError: integer_matrix: M[0][0] is 0.5, not a whole number
    """
    return [[int(value) for value in row] for row in M]


def _whole_score_matrices(func: str, arguments: dict, sizes: dict) -> None:
    score_matrices = arguments["score_matrices"]
    if not isinstance(score_matrices, (list, tuple)) or not score_matrices:
        raise TypeError(f"{func}: score_matrices must be a non-empty list of matrices, got {score_matrices!r:.60}")
    for i, S in enumerate(score_matrices):
        check_matrix(func, f"score_matrices[{i}]", S, finite=True)
        for row in S:
            for s in row:
                if not float(s).is_integer():
                    raise ValueError(f"{func}: score_matrices[{i}] holds {s!r}; raw scores must be whole numbers")


@checked(also=_whole_score_matrices)
def score_differences(score_matrices: Sequence[Matrix]) -> list[int]:
    """Every d = s - max(row) that occurs in some (integer) score matrices, largest first.

    A student looks up e^(d * scale) for each; d = 0 is always there (each row's maximum).

    >>> score_differences([[[4, 0, -4]], [[0, 4, 0]]])
    [0, -4, -8]
    """
    seen = set()
    for S in score_matrices:
        for row in S:
            top = max(row)
            for s in row:
                # -1.7e308 - 1.7e308 is -inf: int() raises OverflowError, which the door reports as too large.
                seen.add(int(s - top))
    return sorted(seen, reverse=True)


class ExpRow(NamedTuple):
    """One line of the e^x table: the difference d, x = d * scale, and e^x rounded."""

    d: int
    x: float
    exp: float


def _digits_in_range(func: str, arguments: dict, sizes: dict) -> None:
    if not 0 <= arguments["digits"] <= 17:
        raise ValueError(f"{func}: digits is {arguments['digits']}; give 0 to 17 digits after the point")


# math.exp raises OverflowError past float64's largest (x > 709.78...), which the door reports as too large;
# x itself is inf or -inf when d * scale overflows, which the door sees in the table.
@checked(differences="finite vector n", scale="positive number", digits="int", also=_digits_in_range,
         finite_result=lambda table: [row.x for row in table])
def exp_table(differences: Sequence[int], scale: float, digits: int = 4) -> list[ExpRow]:
    """One row (d, x = d * scale, e^x rounded to ``digits``) per difference, in the given order.

    >>> exp_table([0, -4], 0.5)
    [ExpRow(d=0, x=0.0, exp=1.0), ExpRow(d=-4, x=-2.0, exp=0.1353)]
    """
    xs = [d * scale for d in differences]
    return [ExpRow(d, x, round(math.exp(x), digits)) for d, x in zip(differences, xs)]


@checked(raw_row="finite vector n", scale="positive number", digits="int", also=_digits_in_range)
def table_softmax(raw_row: Sequence[float], scale: float, digits: int = 4) -> Vector:
    """Softmax of ``raw_row * scale`` the pencil way: e^x from the rounded table, then divide.

    Each e^((s - max) * scale) is rounded to ``digits`` as the printed table
    gives it; the weights are those numbers over their sum (not rounded). The
    answer is within about 10^-digits of the exact softmax.

    >>> [round(w, 4) for w in table_softmax([4, 0, -4], 0.5)]
    [0.8669, 0.1173, 0.0159]
    """
    top = max(raw_row)
    # Every x = (s - top) * scale is 0 or less, so e^x is at most 1; far below the top it is 0.0.
    exps = [round(math.exp((s - top) * scale), digits) for s in raw_row]
    total = math.fsum(exps)
    return [e / total for e in exps]
