"""The helpers a public function calls at its top to check its own arguments.

Each takes the function's name and the argument's name, so the message says
which function, which argument and which rule, and returns what it learned
(a shape, a length, the value)::

    def matmul(A: Matrix, B: Matrix) -> Matrix:  # (n, m) @ (m, p) -> (n, p)
        sizes = check_sizes("matmul", ("A", A, "n m"), ("B", B, "m p"))

Nothing here keeps state: a check does the same wherever it is called from.
Checking that every entry is a finite number costs about as much as a cheap
operation's arithmetic, so a function that is a whole step (``attention``,
``multi_head_attention``) checks its arguments once at its top and then runs
its formula through the core's unchecked arithmetic (``matrix.product`` and
its neighbours), never through another checking function.

=========================================  =========================================
check_matrix, check_vector, check_rows      shapes, and entries that are finite numbers
check_sizes                                 arguments against their declared shapes
check_int, check_positive_int, check_number  one number; sizes with a limit
check_type                                  a switch, a text, a generator of its own
shorten, quote_int, describe                how a message shows a value
too_large                                   the error for a result past float64's range
=========================================  =========================================
"""

import math
from itertools import chain, repeat
from typing import Optional

MAX_INT_DIGITS = 100  # an int (a size, a seed, an index) longer than this is a mistake; Python won't print 4,300


class ShapeError(ValueError):
    """A matrix, vector or mask has the wrong shape for the operation."""


def describe(shape: tuple[int, ...]) -> str:
    """Write a shape the way the messages do: ``(5, 16)`` -> ``'5x16'``, ``(3,)`` -> ``'a vector of 3'``."""
    return "x".join(str(n) for n in shape) if len(shape) > 1 else f"a vector of {shape[0]}"


def shorten(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters, so a message stays one line.

    >>> shorten(list(range(100)), 20)
    '[0, 1, 2, 3, 4, ...'
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return quote_int(value)
    if isinstance(value, (list, tuple, str)) and len(value) > limit:
        value = value[:limit]  # a long list's repr is never built whole
    try:
        text = repr(value)
    except RecursionError:  # a list nested past Python's recursion limit
        text = f"a {type(value).__name__} nested too deeply to show"
    return text if len(text) <= limit else text[:limit - 4].rstrip() + " ..."


def quote_int(n: int) -> str:
    """An int as a message shows it: in full up to 18 digits, else by its size.

    >>> quote_int(4096), quote_int(-10**100)
    ('4096', 'an int of 101 digits')
    """
    digits = f"{len(str(abs(n))):,}" if n.bit_length() < 14_000 else f"about {round(n.bit_length() * math.log10(2)):,}"
    return str(n) if -10**18 < n < 10**18 else f"an int of {digits} digits"


def is_number(value: object) -> bool:
    """True for an int or a float (True and False are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def all_finite(rows) -> bool:
    """True when every entry of every row is a finite number (an int too large for a float is not)."""
    try:
        return all(all(map(math.isfinite, row)) for row in rows)
    except OverflowError:
        return False


def all_fine(matrices: list, *, finite: bool = True) -> bool:
    """True in the usual case, tested in C without a loop in Python: every matrix a non-empty list of
    non-empty lists of one width, of ints and floats with a finite total (a nan or inf entry makes the
    total nan or inf). When it says no, ``check_matrix`` finds the fault and names it."""
    rows = list(chain.from_iterable(matrices)) if all(type(M) is list and M for M in matrices) else [0]
    try:  # sums of floats: 10**400 - 10**400 overflows instead of cancelling
        return (set(map(type, rows)) == {list} and all(rows) and all(len(set(map(len, M))) == 1 for M in matrices)
                and set(map(type, chain.from_iterable(rows))) <= {int, float}
                and (not finite or math.isfinite(sum(map(sum, rows, repeat(0.0))))))
    except OverflowError:  # an int too large for a float
        return False


def check_list(func: str, name: str, value: object, what: str) -> int:
    """A non-empty list (or tuple) of ``what``, entries not looked at; return its length. Not a list is a
    TypeError, an empty one a ShapeError; both say the same.

    >>> check_list("demo", "heads", None, "matrices")
    Traceback (most recent call last):
    ...
    TypeError: demo: heads must be a non-empty list of matrices, got None
    """
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        error = ShapeError if isinstance(value, (list, tuple)) else TypeError
        raise error(f"{func}: {name} must be a non-empty list of {what}, got {shorten(value)}")
    return len(value)


def check_rows(func: str, name: str, M: object, what: str = "numbers") -> tuple[int, int]:
    """Check that ``M`` is a non-empty rectangular list of non-empty rows (entries not looked at); return its shape."""
    check_list(func, name, M, "rows")
    for i, row in enumerate(M):
        if not isinstance(row, (list, tuple)):
            raise TypeError(f"{func}: {name}[{i}] must be a row (a list of {what}), got {type(row).__name__}; "
                            "a matrix is a list of rows, so write a vector v as [v] (one row)")
        if len(row) != len(M[0]):
            raise ShapeError(f"{func}: {name} is ragged: row 0 has {len(M[0])} entries but row {i} has "
                             f"{len(row)}; every row must have the same length")
    if len(M[0]) == 0:
        raise ShapeError(f"{func}: {name} has empty rows (0 columns); a matrix needs at least one column")
    return len(M), len(M[0])


def check_matrix(func: str, name: str, M: object, *, finite: bool = True) -> tuple[int, int]:
    """Check that ``M`` is a non-empty rectangular list of rows of finite numbers; return its shape.

    ``finite=False`` lets inf and nan through (a transpose moves numbers; it does not add them).

    >>> check_matrix("demo", "A", [[1, 2], [3, 4], [5, 6]])
    (3, 2)
    >>> check_matrix("demo", "A", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    mha_lists.core.checks.ShapeError: demo: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length
    """
    if all_fine([M], finite=finite):
        return len(M), len(M[0])
    shape = check_rows(func, name, M)
    for i, row in enumerate(M):
        check_vector(func, f"{name}[{i}]", row, finite=finite)
    return shape


def check_vector(func: str, name: str, v: object, *, finite: bool = True) -> int:
    """Check that ``v`` is a non-empty list of finite numbers (of numbers, with ``finite=False``); return its length."""
    check_list(func, name, v, "numbers")
    for j, value in enumerate(v):
        if not is_number(value):
            raise TypeError(f"{func}: {name}[{j}] is {shorten(value)} ({type(value).__name__}); entries must be int or float")
        if finite and not all_finite([[value]]):
            raise ValueError(f"{func}: {name}[{j}] is " + (f"{quote_int(value)}, too large for a float (about 1.8e308 at "
                             "most)" if isinstance(value, int) else f"{value}; entries must be finite numbers"))
    return len(v)


PLACES = ((), ("entries",), ("rows", "columns"), ("length", "rows", "columns"))  # a size's place in a shape


def check_sizes(func: str, *arguments: tuple) -> dict[str, int]:
    """Check arguments, each given as (name, value, dims), against their declared shapes; return the sizes by name.

    ``dims`` names the sizes the way the shape comment on a ``def`` line does: ``"n"`` is a vector,
    ``"T d_k"`` a matrix, ``"h d_model d_k"`` a list of h matrices; every entry a finite number. A size
    named twice must be the same both times.

    >>> check_sizes("matmul", ("A", [[1, 2]], "n m"), ("B", [[3], [4]], "m p"))
    {'n': 1, 'm': 2, 'p': 1}
    >>> check_sizes("matmul", ("A", [[1, 2]], "n m"), ("B", [[3], [4], [5]], "m p"))
    Traceback (most recent call last):
    ...
    mha_lists.core.checks.ShapeError: matmul: A is 1x2 and B is 3x1; A's columns (2) and B's rows (3) must be equal: both are m in A (n, m) and B (m, p)
    """
    arguments = [(name, value, dims.split()) for name, value, dims in arguments]
    matrices = []  # every argument as matrices, to test the usual case in C: a vector v is the matrix [v]
    for name, value, dims in arguments:
        matrices += value if len(dims) == 3 and type(value) is list else [[value] if len(dims) == 1 else value]
    if all_fine(matrices) and all(len({(len(M), len(M[0])) for M in v}) == 1 for _, v, d in arguments if len(d) == 3):
        found = [(len(v),) if len(d) == 1 else (len(v), len(v[0])) if len(d) == 2 else (len(v), len(v[0]), len(v[0][0]))
                 for _, v, d in arguments]
    else:  # find the fault and name it
        found = []
        for name, value, dims in arguments:
            if len(dims) == 3:
                check_list(func, name, value, "matrices, one per head")
            found.append((check_vector(func, name, value),) if len(dims) == 1 else check_matrix(func, name, value)
                         if len(dims) == 2 else (len(value), *check_sizes(func, *[(f"{name}[{h}]", M, " ".join(
                             dims[1:])) for h, M in enumerate(value)]).values()))  # each matrix against the first
    sizes, first = {}, {}  # each size's value, and the argument that gave it
    for (name, _, dims), shape in zip(arguments, found):
        for place, (size, n) in enumerate(zip(dims, shape)):
            a, a_place, a_dims, a_shape = first.setdefault(size, (name, place, dims, shape))
            if sizes.setdefault(size, n) != n:
                raise ShapeError(f"{func}: {a} is {describe(a_shape)} and {name} is {describe(shape)}; {a}'s "
                                 f"{PLACES[len(a_dims)][a_place]} ({sizes[size]}) and {name}'s {PLACES[len(dims)][place]} "
                                 f"({n}) must be equal: both are {size} in {a} ({', '.join(a_dims)}) and {name} "
                                 f"({', '.join(dims)})")
    return sizes


def check_int(func: str, name: str, value: object) -> int:
    """An int (a seed, an index; not True, not 1.0) of at most ``MAX_INT_DIGITS`` digits; return it.

    >>> check_int("demo", "seed", -10**100)
    Traceback (most recent call last):
    ...
    ValueError: demo: seed is an int of 101 digits; an int here has at most 100 digits
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{func}: {name} must be an int, got {shorten(value)} ({type(value).__name__})")
    if abs(value) >= 10**MAX_INT_DIGITS:
        raise ValueError(f"{func}: {name} is {quote_int(value)}; an int here has at most {MAX_INT_DIGITS} digits")
    return value


def check_positive_int(func: str, name: str, value: object, most: Optional[int] = None) -> int:
    """A size or a count: an int of at least 1, and at most ``most`` when given; return it.

    >>> check_positive_int("demo", "num_heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: demo: num_heads must be a positive int, got 0
    """
    if check_int(func, name, value) < 1:
        raise ValueError(f"{func}: {name} must be a positive int, got {quote_int(value)}")
    if most is not None and value > most:
        raise ValueError(f"{func}: {name} is {quote_int(value)}; it is at most {most:,} here")
    return value


def check_number(func: str, name: str, value: object, *, positive: bool = False) -> float:
    """One finite real number (and > 0, if asked); return it.

    >>> check_number("scale", "c", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: scale: c must be a finite number, got nan (float)
    """
    if not is_number(value) or not all_finite([[value]]) or positive and value <= 0:
        raise (ValueError if is_number(value) else TypeError)(f"{func}: {name} must be a {'positive ' * positive}finite "
                                                               f"number, got {shorten(value)} ({type(value).__name__})")
    return value


def check_type(func: str, name: str, value: object, kind: type, what: str) -> object:
    """``value`` when it is a ``kind`` (bool: a switch, not 1 or "yes"; str: a text; random.Random: a
    generator of its own, never the module ``random``); else a TypeError that says ``what`` it must be."""
    if not isinstance(value, kind):
        raise TypeError(f"{func}: {name} must be {what}, got {shorten(value)} ({type(value).__name__})")
    return value


def too_large(func: str, what: object = "the values") -> ValueError:
    """The error for a sum or product that left float64's range. ``what`` names what overflowed, or is the
    OverflowError that the core's arithmetic raised saying so (math.exp's or fsum's own say nothing useful)."""
    return ValueError(f"{func}: {what if str(what).startswith('the ') else 'the values'} are too large: a product or "
                      "sum overflowed float64 (largest about 1.8e308); scale the inputs down")
