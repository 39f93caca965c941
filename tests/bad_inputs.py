"""What every test file asks of a bad call: a named error of one line, nothing raw, nothing changed."""

import copy
import math
import random

import pytest

RAW = (IndexError, ZeroDivisionError, OverflowError, KeyError, AttributeError, RecursionError)


def refused(func, call, error=(ValueError, TypeError)):
    """Run a bad call: it raises a named error (func: ...) of one line of at most 300 characters,
    never a raw IndexError, ZeroDivisionError, OverflowError, KeyError, AttributeError or RecursionError."""
    try:
        call()
    except RAW as raw:
        pytest.fail(f"{func}: a raw {type(raw).__name__}: {raw!s:.200}")
    except error as named:
        text = str(named)
        assert text.startswith(f"{func}: "), text[:300]
        assert "\n" not in text and len(text) <= 300, text[:300]
        return named
    pytest.fail(f"{func}: no error")


def finite_everywhere(value):
    """True when every float inside value (nested lists, tuples, named tuples) is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(finite_everywhere(item) for item in value)
    return True


def assert_no_mutation(call, *args, **kwargs):
    """Call with args and kwargs; then they are as deep copies taken before."""
    before = copy.deepcopy((args, kwargs))
    try:
        call(*args, **kwargs)
    except (ValueError, TypeError):
        pass  # a refused call must leave its arguments alone too
    assert (args, kwargs) == before or repr((args, kwargs)) == repr(before)


def assert_template(messages, bad_calls, key):
    """The bad call of ``key`` raises exactly its error, worded exactly as the template (the one place a
    message is pinned word for word)."""
    error, call, fields = bad_calls[key]
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error
    assert str(info.value) == messages[key].format(**fields)


def snapshot(obj):
    """What to compare before and after a call: nested values (nan equal to nan), a generator by its state."""
    if isinstance(obj, random.Random):
        return ("Random", obj.getstate())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [snapshot(item) for item in obj])
    if isinstance(obj, dict):
        return ("dict", [(snapshot(k), snapshot(v)) for k, v in obj.items()])
    return obj if type(obj) is int else repr(obj)  # an int of over 4,300 digits has no repr


def assert_refused_unchanged(name, bad_calls, errors):
    """Every bad call of ``name`` in ``bad_calls`` (rows of name, func, args, kwargs) raises one of
    ``errors``, named and one short line, and leaves its arguments as they were."""
    for func, args, kwargs in [case[1:] for case in bad_calls if case[0] == name]:
        before = snapshot((args, kwargs))
        with pytest.raises(errors) as info:
            func(*args, **kwargs)
        message = str(info.value)
        assert message.startswith(f"{name}: "), message
        assert "\n" not in message and len(message) < 300, message
        assert snapshot((args, kwargs)) == before, f"{name} changed its arguments"
