"""teaching/softmax_row.py: one row of weights: its entropy, softmax's Jacobian and gradient at it."""

import math

import pytest

from mha_lists import ShapeError, softmax
from mha_lists.teaching.softmax_row import entropy, softmax_backward, softmax_jacobian
from bad_inputs import assert_no_mutation, assert_template, finite_everywhere, refused
from test_checks import MESSAGES as SHARED

NAN, INF = math.nan, math.inf
OVERFLOW = "a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "not weights": "{func}: {name} must be weights as softmax makes them (each >= 0, adding up to 1), got {value}",
    "dp length": "softmax_backward: p has {n} entries and dp has {m}; they must have the same length",
    "gradients overflow": "{func}: the gradients are too large: " + OVERFLOW,
    "softmax_backward dp": SHARED["entry not finite"],  # the argument's name in a shared message
}

BAD_CALLS = {
    "not weights": (ValueError, lambda: entropy([0.5, 0.6]), dict(func="entropy", name="p", value="[0.5, 0.6]")),
    "dp length": (ShapeError, lambda: softmax_backward([0.5, 0.5], [1.0, 2.0, 3.0]), dict(n=2, m=3)),
    "gradients overflow": (ValueError, lambda: softmax_backward([1.0, 0.0], [-1e308, 1e308]),
                           dict(func="softmax_backward")),  # 0 * (1e308 + 1e308)
    "softmax_backward dp": (ValueError, lambda: softmax_backward([0.5, 0.5], [1.0, NAN]),
                            dict(func="softmax_backward", name="dp[1]", value="nan")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


def test_entropy():
    assert entropy([0.25] * 4) == pytest.approx(math.log(4))
    assert entropy([1.0, 0.0, 0.0]) == 0.0
    assert str(entropy([1.0])) == "0.0" and str(entropy([0.0, 1.0])) == "0.0"  # not -0.0
    assert entropy(softmax([0.0, math.log(3)])) == pytest.approx(-(0.25 * math.log(0.25) + 0.75 * math.log(0.75)))


def test_entropy_takes_only_weights_softmax_could_make():
    for p in ([-0.5, 1.5], [0.5, 0.6], [NAN], [INF, 0.0], [], None, ["a"]):
        refused("entropy", lambda: entropy(p))
    with pytest.raises(ValueError, match=r"^entropy: p\[1\] is nan"):
        entropy([1.0, NAN])
    # adds up to 1 within 1e-9, every entry >= 0, but one above 1: not a weight
    refused("entropy", lambda: entropy([1 + 5e-10, 0.0]))
    assert entropy([1 - 5e-10, 0.0]) == pytest.approx(0.0, abs=1e-9)  # within 1e-9 of adding up to 1


def test_entropy_of_values_past_float_range_is_refused_by_name():
    # math.fsum(p) overflows when checking that p adds up to 1: a named error, not a raw OverflowError.
    refused("entropy", lambda: entropy([1e308, 1e308]))


def test_softmax_backward_by_hand():
    # p = (1/2, 1/2), dp = (1, 0): p . dp = 1/2, ds = (1/2 (1 - 1/2), 1/2 (0 - 1/2)).
    assert softmax_backward([0.5, 0.5], [1.0, 0.0]) == [0.25, -0.25]
    # p = (1/4, 3/4), dp = (4, 0): p . dp = 1, ds = (1/4 * 3, 3/4 * -1).
    assert softmax_backward([0.25, 0.75], [4.0, 0.0]) == [0.75, -0.75]


def test_softmax_jacobian_by_hand_and_against_softmax_backward():
    assert softmax_jacobian([0.25, 0.75]) == [[0.1875, -0.1875], [-0.1875, 0.1875]]
    p, dp = [0.125, 0.375, 0.5], [1.0, -2.0, 4.0]
    J = softmax_jacobian(p)
    by_matrix = [math.fsum(dp[i] * J[i][j] for i in range(3)) for j in range(3)]
    assert by_matrix == pytest.approx(softmax_backward(p, dp), abs=1e-15)


def test_results_are_finite_or_refused_at_the_edge_of_float64():
    assert finite_everywhere(entropy([5e-324, 1.0]))


@pytest.mark.parametrize("call, args", [(entropy, ([0.5, 0.5],)), (entropy, ([0.5, 0.6],)),
                                        (softmax_backward, ([0.5, 0.5], [1.0, 0.0])), (softmax_jacobian, ([0.5, 0.5],))])
def test_every_function_leaves_its_arguments_alone(call, args):
    assert_no_mutation(call, *args)
