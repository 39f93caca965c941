"""Checks at the door: a public function declares what its arguments must be, once, above it.

    @checked(Q="finite matrix T d_k", K="finite matrix T_k d_k", V="finite matrix T_k d_v",
             mask="optional mask T T_k", scale="optional positive number")
    def attention(Q, K, V, *, mask=None, scale=None): ...

``checked`` reads each declaration, checks the argument on the way in, and gives
every size a name (T, d_k, ...): a size met twice must be the same both times.
The message names the function, the arguments and the rule, and the traceback
ends at the call the learner wrote:

    ShapeError: matmul: A is 5x16 and B is 8x8; A's columns (16) must equal B's rows (8)

Everything the function calls trusts its arguments: a checked function called
from inside another one runs straight away, without checking again. If the
arithmetic leaves float64's range anywhere inside, the error is the called
function's too: ``attention: the values are too large ...``.

The kinds of argument (each may start with ``optional``, which lets None through):

===============================  ================================================
matrix n m, finite matrix n m    a non-empty rectangular list of rows of numbers
rows n m                         the same, entries not looked at
vector n, finite vector n        a non-empty list of numbers
matrices h n m (or finite ...)   a non-empty list of h matrices of one shape
mask T T_k                       rows of True/False, each row allowing some key
weights                          an MHAWeights; names d_model, num_heads,
                                 num_kv_heads, d_k, d_v
int, positive int                an int (not a bool) of at most 100 digits; >= 1
number, positive number          a finite int or float; > 0
bool                             True or False
str                              a str
rng                              a random.Random of its own (not the global one)
===============================  ================================================

A size is a name (``T``, ``d_k``). The helpers below
(``check_matrix``, ``check_positive_int``, ...) are what the kinds run; code
outside the core that checks by hand calls them, so every message reads alike.
"""

from __future__ import annotations

import functools
import inspect
import math
import random
from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, NamedTuple, Optional, Union


class ShapeError(ValueError):
    """A matrix, vector or mask has the wrong shape for the operation."""


def describe(shape_: tuple[int, ...]) -> str:
    """Write a shape the way the error messages do: ``(5, 16)`` -> ``'5x16'``."""
    return "x".join(str(n) for n in shape_)


_NUMBER_TYPES = {int, float}


def is_number(value: object) -> bool:
    """True for an int or a float (True and False are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_entries(func: str, name: str, values: Sequence, finite: bool) -> None:
    """Check that every entry of one row is an int or a float (and finite, if asked)."""
    # Fast path in C for the usual case; the loop below only runs to name the bad entry.
    if set(map(type, values)) <= _NUMBER_TYPES and (not finite or all_finite([values])):
        return
    for j, value in enumerate(values):
        if not is_number(value):
            raise TypeError(
                f"{func}: {name}[{j}] is {value!r} ({type(value).__name__}); entries must be int or float"
            )
        if finite and not all_finite([[value]]):
            if isinstance(value, int):  # an int too large for a float
                raise too_large(func)
            raise ValueError(f"{func}: {name}[{j}] is {value}; entries must be finite numbers")


def check_vector(func: str, name: str, v: object, *, finite: bool = False) -> int:
    """Check that ``v`` is a non-empty list of numbers; return its length."""
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of numbers, got {type(v).__name__}")
    if len(v) == 0:
        raise ShapeError(f"{func}: {name} is empty; a vector needs at least one entry")
    check_entries(func, name, v, finite)
    return len(v)


def check_rows(func: str, name: str, M: object, what: str = "numbers") -> tuple[int, int]:
    """Check that ``M`` is a non-empty, rectangular list of non-empty rows; return its shape.

    The entries themselves are not looked at (``check_matrix`` checks numbers,
    masks check booleans).
    """
    if not isinstance(M, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of rows, got {type(M).__name__}")
    if len(M) == 0:
        raise ShapeError(f"{func}: {name} is empty (0 rows); a matrix needs at least one row")
    for i, row in enumerate(M):
        if not isinstance(row, (list, tuple)):
            raise TypeError(
                f"{func}: {name}[{i}] must be a row (a list of {what}), got {type(row).__name__}; "
                "a matrix is a list of rows, so write a vector v as [v] (one row)"
            )
    width = len(M[0])
    if width == 0:
        raise ShapeError(f"{func}: {name} has empty rows (0 columns); a matrix needs at least one column")
    for i, row in enumerate(M):
        if len(row) != width:
            raise ShapeError(
                f"{func}: {name} is ragged: row 0 has {width} entries but row {i} has "
                f"{len(row)}; every row must have the same length"
            )
    return len(M), width


def check_matrix(func: str, name: str, M: object, *, finite: bool = False) -> tuple[int, int]:
    """Check that ``M`` is a non-empty rectangular list of rows of numbers.

    Returns its shape. ``func`` and ``name`` go into the error message, so the
    reader learns which argument of which public function was wrong.

    >>> check_matrix("demo", "A", [[1, 2], [3, 4], [5, 6]])
    (3, 2)
    >>> check_matrix("demo", "A", [[1, 2], [3]])
    Traceback (most recent call last):
    ...
    mha_lists.core.checks.ShapeError: demo: A is ragged: row 0 has 2 entries but row 1 has 1; every row must have the same length
    """
    # The usual case, tested in C without a loop in Python: a list of lists of one
    # width, every entry an int or a float and, if asked, a finite total (a nan or
    # inf entry makes any sum nan or inf; the total is a test, never a result).
    if (type(M) is list and M and set(map(type, M)) == {list} and len(set(map(len, M))) == 1 and M[0]
            and set(map(type, chain.from_iterable(M))) <= _NUMBER_TYPES):
        try:
            if not finite or math.isfinite(sum(map(sum, M))):
                return len(M), len(M[0])
        except OverflowError:  # an int too large for a float: named below
            pass
    # Otherwise find the problem and name it.
    shape_ = check_rows(func, name, M)
    for i, row in enumerate(M):
        check_entries(func, f"{name}[{i}]", row, finite)
    return shape_


def all_numbers(matrices: Sequence, *, finite: bool = False) -> bool:
    """True when every matrix is a list of non-empty lists of one width, of ints and floats (and
    finite, if asked): the usual case, tested in C for many matrices at once. When it says no,
    ``check_matrix`` on each finds the problem and names it.
    """
    if type(matrices) is not list or set(map(type, matrices)) != {list} or not all(matrices):
        return False
    rows = list(chain.from_iterable(matrices))
    if not (set(map(type, rows)) == {list} and all(rows) and all(len(set(map(len, M))) == 1 for M in matrices)
            and set(map(type, chain.from_iterable(rows))) <= _NUMBER_TYPES):
        return False
    try:
        return not finite or math.isfinite(sum(map(sum, rows)))
    except OverflowError:  # an int too large for a float
        return False


def check_positive_int(func: str, name: str, value: object) -> int:
    """Check a size or a count: an int of at least 1 (not a bool, not 2.0); return it.

    >>> check_positive_int("demo", "num_heads", 0)
    Traceback (most recent call last):
    ...
    ValueError: demo: num_heads must be a positive int, got 0
    """
    if check_int(func, name, value) < 1:
        raise ValueError(f"{func}: {name} must be a positive int, got {quote_int(value)}")
    return value


MAX_INT_DIGITS = 100  # an int (a size, a seed, an index) longer than this is a mistake; Python won't print 4,300
_INT_BOUND = 10**MAX_INT_DIGITS  # the first int of MAX_INT_DIGITS + 1 digits


def check_int(func: str, name: str, value: object) -> int:
    """Check for an int (a seed, an index) of at most ``MAX_INT_DIGITS`` digits; True and 1.0 are
    refused; return it.

    >>> check_int("demo", "seed", -10**100)
    Traceback (most recent call last):
    ...
    ValueError: demo: seed is an int of 101 digits; an int here has at most 100 digits
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{func}: {name} must be an int, got {value!r:.60} ({type(value).__name__})")
    if not -_INT_BOUND < value < _INT_BOUND:
        raise ValueError(f"{func}: {name} is {quote_int(value)}; an int here has at most {MAX_INT_DIGITS} digits")
    return value


def quote_int(n: int) -> str:
    """An int as a message shows it: in full up to 18 digits, else by its size (Python refuses to
    write out an int of more than 4,300 digits, and nobody reads one).

    >>> quote_int(4096), quote_int(-10**100)
    ('4096', 'an int of 101 digits')
    """
    if -10**18 < n < 10**18:
        return str(n)
    digits = f"{len(str(abs(n))):,}" if n.bit_length() < 14_000 else f"about {round(n.bit_length() * math.log10(2)):,}"
    return f"an int of {digits} digits"


def check_str(func: str, name: str, value: object) -> str:
    """Check a text (a sentence, a name, a label); return it."""
    if not isinstance(value, str):
        raise TypeError(f"{func}: {name} must be a str, got {value!r:.60} ({type(value).__name__})")
    return value


def check_rng(func: str, name: str, value: object) -> random.Random:
    """Check a generator of its own: a ``random.Random``, never the module ``random`` (the global one)."""
    if not isinstance(value, random.Random):
        raise TypeError(
            f"{func}: {name} must be a random.Random (e.g. derive_rng(seed, name)), got {type(value).__name__}"
        )
    return value


def check_bool(func: str, name: str, value: object) -> bool:
    """Check a switch: True or False, not 1 or "yes"; return it."""
    if not isinstance(value, bool):
        raise TypeError(f"{func}: {name} must be True or False, got {value!r}")
    return value


def check_number(func: str, name: str, value: object, *, positive: bool = False) -> float:
    """Check one finite real number (and > 0, if asked); return it.

    >>> check_number("scale", "c", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: scale: c must be a finite number, got nan
    """
    if not is_number(value):
        raise TypeError(f"{func}: {name} must be a number, got {value!r} ({type(value).__name__})")
    if not all_finite([[value]]):  # an int too large for a float is not finite either
        shown = quote_int(value) if isinstance(value, int) else f"{value!r}"
        raise ValueError(f"{func}: {name} must be a finite number, got {shown}")
    if positive and value <= 0:
        raise ValueError(f"{func}: {name} must be a positive finite number, got {value!r}")
    return value


def check_same_shapes(func: str, name: str, mats: object, *, finite: bool = False, check: Optional[Callable] = None,
                      empty: Optional[str] = None, rule: str = "every head must have the same shape") -> tuple[int, int, int]:
    """Check a non-empty list of matrices that must share one shape; return (count, rows, cols).

    Each is checked with ``check(func, name, M)`` (default: ``check_matrix``, finite if asked).
    ``empty`` and ``rule`` word the messages for what the list holds (per-head matrices by default).
    """
    if not isinstance(mats, (list, tuple)) or len(mats) == 0:
        raise ShapeError(f"{func}: {empty or f'{name} must be a non-empty list with one matrix per head'}")
    if check is None:
        shapes = [check_matrix(func, f"{name}[{h}]", M, finite=finite) for h, M in enumerate(mats)]
    else:
        shapes = [check(func, f"{name}[{h}]", M) for h, M in enumerate(mats)]
    for h, s in enumerate(shapes):
        if s != shapes[0]:
            raise ShapeError(f"{func}: {name}[0] is {describe(shapes[0])} but {name}[{h}] is {describe(s)}; {rule}")
    return len(mats), shapes[0][0], shapes[0][1]


def check_heads_divide(func: str, num_heads: int, num_kv_heads: int) -> None:
    """Each key/value head must serve the same number of query heads: num_kv_heads divides num_heads."""
    if num_heads % num_kv_heads:
        raise ShapeError(
            f"{func}: num_kv_heads {num_kv_heads} does not divide num_heads {num_heads}; "
            "each key/value head must serve the same number of query heads"
        )


def too_large(func: str) -> ValueError:
    """The error for a sum or product that left float64's range (about 1.8e308)."""
    return ValueError(
        f"{func}: the values are too large: a product or sum overflowed float64 "
        "(largest about 1.8e308); scale the inputs down"
    )


def all_finite(rows: Sequence[Sequence[float]]) -> bool:
    """True when every entry of every row is a finite number (an int too large for a float is not)."""
    try:
        return all(all(map(math.isfinite, row)) for row in rows)
    except OverflowError:
        return False


# === The door: @checked ===


class _Kind(NamedTuple):
    check: Callable  # (func, name, value) -> its sizes: a tuple, an int (a vector's length), a NamedTuple of named sizes
    axes: tuple[str, ...]  # what each size is called in a message: "rows", "columns", "entries"
    expects: bool = False  # the check is also given the sizes expected so far, (T, None) say


KINDS: dict[str, _Kind] = {}


def kind(name: str, axes: tuple[str, ...] = ()) -> Callable:  # pragma: no mutate
    """Register a kind of argument whose check is also given the sizes expected so far.

    The core registers "mask" and "weights" this way (when it is imported).
    """
    def register(check: Callable) -> Callable:  # pragma: no mutate
        KINDS[name] = _Kind(check, axes, expects=True)  # pragma: no mutate
        return check  # pragma: no mutate
    return register  # pragma: no mutate


KINDS["matrix"] = _Kind(check_matrix, ("rows", "columns"))
KINDS["finite matrix"] = _Kind(functools.partial(check_matrix, finite=True), ("rows", "columns"))
KINDS["rows"] = _Kind(check_rows, ("rows", "columns"))
KINDS["vector"] = _Kind(check_vector, ("entries",))
KINDS["finite vector"] = _Kind(functools.partial(check_vector, finite=True), ("entries",))
KINDS["matrices"] = _Kind(check_same_shapes, ("heads", "rows", "columns"))
KINDS["finite matrices"] = _Kind(functools.partial(check_same_shapes, finite=True), ("heads", "rows", "columns"))
KINDS["int"] = _Kind(check_int, ())
KINDS["positive int"] = _Kind(check_positive_int, ())
KINDS["number"] = _Kind(check_number, ())
KINDS["positive number"] = _Kind(functools.partial(check_number, positive=True), ())
KINDS["bool"] = _Kind(check_bool, ())
KINDS["str"] = _Kind(check_str, ())
KINDS["rng"] = _Kind(check_rng, ())


class _Rule(NamedTuple):
    name: str  # the argument
    optional: bool  # None passes
    kind: _Kind
    sizes: tuple[str, ...]  # a name ("T") or a number ("1") per size


def _rule(name: str, spec: str) -> _Rule:  # pragma: no mutate
    # Runs when a module is imported (mutants of it would never run in a test): tested by behaviour.
    words = spec.split()  # pragma: no mutate
    optional = words[:1] == ["optional"]  # pragma: no mutate
    words = words[optional:]  # pragma: no mutate
    for n in range(len(words), 0, -1):  # the longest kind first: "finite matrix" before "matrix"  # pragma: no mutate
        if " ".join(words[:n]) in KINDS:  # pragma: no mutate
            return _Rule(name, optional, KINDS[" ".join(words[:n])], tuple(words[n:]))  # pragma: no mutate
    raise ValueError(f"checked: {name}={spec!r} names no kind of argument ({', '.join(KINDS)})")  # pragma: no mutate


def _looks(name: str, sizes: Any) -> str:
    """How an argument looks in a message: 'A is 5x16', 'b has 3 entries', 'the weights'."""
    if isinstance(sizes, dict):
        return name
    if len(sizes) == 1:
        return f"{name} has {sizes[0]} entries"
    return f"{name} is {describe(sizes)}"


_inside: list[Optional[str]] = [None]  # the checked function that runs: what it calls trusts its arguments


def checked(*, why: Optional[dict[str, str]] = None, also: Optional[Callable] = None,
            finite_result: Union[bool, Callable] = False, inside: bool = False, same: Optional[dict[str, str]] = None,
            called: Optional[str] = None, **contract: str) -> Callable:
    """Declare what each argument must be; check it when the function is called from outside.

    ``why`` gives the rule for a size (or for an argument), in words, for the
    message when two arguments disagree about it (by default: "A's columns (16)
    must equal B's rows (8)"); a text with fields in braces is the whole
    message instead: ``{name}``, ``{shape}``, ``{value}`` of the argument,
    ``{first}``, ``{first_shape}``, ``{expected}`` of the one met before, and
    every size met so far (``{T}x{d_model}``).
    ``also(func, arguments, sizes)`` checks rules the kinds cannot say.
    ``finite_result``: a result with inf or nan in it means the arithmetic
    overflowed, and is reported as that (a function picks the part of the
    result to look at). The result of a call from inside another checked
    function is looked at only with ``inside=True``: where an overflow would
    otherwise go unseen (a score that overflows to -inf looks like a masked key).
    ``same={"T_k": "T"}``: a size that no
    argument gave (the optional context was None) is another size.
    ``called``: the name the messages use, when it is not the function's own
    (a class's ``__init__`` speaks as the class: ``called="Heatmap"``).

    >>> @checked(A="matrix n m", B="matrix m p")
    ... def product_shape(A, B):
    ...     return (len(A), len(B[0]))
    >>> product_shape([[1, 2]], [[3], [4]])
    (1, 1)
    >>> product_shape([[1, 2]], [[3, 4]])
    Traceback (most recent call last):
    ...
    mha_lists.core.checks.ShapeError: product_shape: A is 1x2 and B is 1x2; A's columns (2) must equal B's rows (1)
    """
    rules = [_rule(name, spec) for name, spec in contract.items()]  # pragma: no mutate

    def decorate(fn: Callable) -> Callable:  # pragma: no mutate
        # Runs once, when the module is imported; what a call does is in _through_door below.
        signature = inspect.signature(fn)  # pragma: no mutate
        params = signature.parameters.values()  # pragma: no mutate
        plain = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)  # pragma: no mutate
        door_of = _Door(fn, called or fn.__name__, signature, rules, why or {}, same or {},  # pragma: no mutate
                        also, finite_result, inside, plain,  # pragma: no mutate
                        tuple(p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD),  # pragma: no mutate
                        {p.name: p.default for p in params if p.default is not p.empty},  # pragma: no mutate
                        frozenset(signature.parameters))  # pragma: no mutate

        @functools.wraps(fn)  # pragma: no mutate
        def door(*args: Any, **kwargs: Any) -> Any:  # pragma: no mutate
            if _inside[0] is not None and not inside:  # pragma: no mutate
                return fn(*args, **kwargs)  # a call from inside: its arguments are trusted  # pragma: no mutate
            return _through_door(door_of, args, kwargs)  # pragma: no mutate

        door.contract = contract  # what the door checks, for readers and tools  # pragma: no mutate
        return door  # pragma: no mutate

    return decorate  # pragma: no mutate


def call_outside(callback: Callable, *args: Any) -> Any:
    """Call a learner's function (a progress callback) from inside a checked function: the calls it
    makes are the learner's, so their doors check again."""
    caller, _inside[0] = _inside[0], None
    try:
        return callback(*args)
    finally:
        _inside[0] = caller


class _Door(NamedTuple):
    """What ``checked`` knows about one function."""

    fn: Callable
    func: str  # its name, for the messages
    signature: inspect.Signature
    rules: list[_Rule]
    why: dict[str, str]
    same: dict[str, str]
    also: Optional[Callable]
    finite_result: Union[bool, Callable]
    inside: bool
    plain: bool  # no positional-only, *args or **kwargs parameters: arguments can be named the quick way
    positional: tuple[str, ...]  # the parameters an argument can fill by position, in order
    defaults: dict[str, Any]
    params: frozenset[str]  # every parameter's name


def _through_door(door: _Door, args: tuple, kwargs: dict) -> Any:
    """Call door.fn: from outside, check the arguments first and trust them inside; report an overflow."""
    caller = _inside[0]  # the checked function running now, if any
    if caller is None:
        _check_arguments(door, args, kwargs)
        _inside[0] = door.func
    try:
        result = door.fn(*args, **kwargs)
    except OverflowError as error:  # fsum's running total, or math.exp, left float64's range
        if caller is not None:
            raise
        raise too_large(door.func) from error
    except ValueError as error:  # fsum met inf - inf: two overflowed terms
        if caller is not None or "fsum" not in str(error):
            raise
        raise too_large(door.func) from error
    finally:
        if caller is None:
            _inside[0] = None
    if door.finite_result:  # inf or nan in a result: the arithmetic overflowed
        part = result if door.finite_result is True else door.finite_result(result)
        if type(part) is list and part and type(part[0]) is list:  # a matrix: the test runs in C
            try:
                finite = all(map(math.isfinite, chain.from_iterable(part)))
            except OverflowError:  # an int too large for a float
                finite = False
        else:
            finite = _finite(part)
        if not finite:
            raise too_large(caller or door.func)  # under the name of the function the learner called
    return result


def _check_arguments(door: _Door, args: tuple, kwargs: dict) -> None:
    """Check each argument against its kind, and every size named twice against the first."""
    func = door.func
    values = _named(door, args, kwargs)
    sizes: dict[str, int] = {}
    first: dict[str, tuple] = {}  # size name -> (argument, its sizes, axis) that named it
    for rule in door.rules:
        value = values[rule.name]
        if value is None and rule.optional:
            continue
        if rule.kind.expects:
            expected = tuple(sizes.get(s, sizes.get(door.same.get(s))) for s in rule.sizes)
            found = rule.kind.check(func, rule.name, value, expected)
        else:
            found = rule.kind.check(func, rule.name, value)
        if hasattr(found, "_asdict"):  # named sizes, such as the weights' Dims
            found = found._asdict()
        elif not rule.kind.axes:  # an int, a number, a switch: no sizes
            continue
        found = (found,) if isinstance(found, int) else found
        named = ((s, n, "") for s, n in found.items()) if isinstance(found, dict) else \
            zip(rule.sizes, found, rule.kind.axes)
        for size, n, axis in named:
            want = sizes.get(size)
            if want is None:
                sizes[size] = n
                first[size] = (rule.name, found, axis)
            elif n != want:
                raise ShapeError(_disagree(func, door.why.get(rule.name) or door.why.get(size), first[size],
                                           rule.name, found, axis, n, want, sizes))
    if door.also is not None:
        door.also(func, values, sizes)


def _named(door: _Door, args: tuple, kwargs: dict) -> dict[str, Any]:
    """Every argument by its parameter's name, defaults filled in.

    The quick way covers the usual call; anything else (a missing argument, an
    unknown keyword, one given twice) goes to ``inspect``'s bind, which words the error.
    """
    if door.plain and len(args) <= len(door.positional) and kwargs.keys() <= door.params:
        values = dict(zip(door.positional, args))
        if not kwargs.keys() & values.keys():
            values = {**door.defaults, **values, **kwargs}
            if len(values) == len(door.params):
                return values
    try:
        arguments = door.signature.bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"{door.func}: {error}") from None
    arguments.apply_defaults()
    return arguments.arguments


def _finite(result: Any) -> bool:
    """True when a number or a vector has no inf or nan in it (the door tests matrices itself)."""
    try:
        if not isinstance(result, list):
            return math.isfinite(result)
        return all(map(math.isfinite, result))
    except OverflowError:  # an int too large for a float
        return False


def _shape(found: Any, name: str) -> str:
    return name if isinstance(found, dict) else describe(found)


def _disagree(func: str, why: Optional[str], first: tuple, name: str, found: Any, axis: str,
              n: int, want: int, sizes: dict[str, int]) -> str:
    """The message for argument ``name`` (``found`` its sizes), one of which is ``n`` where ``want`` was met before."""
    first_name, first_found, first_axis = first
    if why and "{" in why:
        return f"{func}: " + why.format(**sizes, name=name, shape=_shape(found, name), value=n, first=first_name,
                                        first_shape=_shape(first_found, first_name), expected=want)
    rule = why or f"{first_name}'s {first_axis} ({want}) must equal {name}'s {axis} ({n})"
    return f"{func}: {_looks(first_name, first_found)} and {_looks(name, found)}; {rule}"
