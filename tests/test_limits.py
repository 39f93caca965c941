"""Limits on sizes and ints, and their messages, exactly (the error-promise sweep checks the names only)."""
import pytest

from mha_lists import causal_mask, padding_mask, softmax, softmax_rows
from mha_lists.core import checks
from mha_lists.core.checks import call_outside, check_int, checked, quote_int
from mha_lists.core.softmax_and_masks import MAX_MASK_SIDE, length_mask


QUOTED = [
    (0, "0"), (10**18 - 1, "999999999999999999"), (-(10**18) + 1, "-999999999999999999"),
    (10**18, "an int of 19 digits"), (-(10**18), "an int of 19 digits"), (10**100, "an int of 101 digits"),
    (10**4000, "an int of 4,001 digits"), (-(10**4000), "an int of 4,001 digits"),
    (2**13998, "an int of 4,214 digits"), (2**13999, "an int of about 4,214 digits"),  # 13,999 and 14,000 bits
    (10**5000, "an int of about 5,000 digits"), (-(10**9000), "an int of about 9,000 digits"),
]


@pytest.mark.parametrize("n, shown", QUOTED, ids=[shown for _, shown in QUOTED])
def test_an_int_is_quoted_in_full_up_to_18_digits_then_by_its_size(n, shown):
    assert quote_int(n) == shown


@pytest.mark.parametrize("n", [10**100 - 1, -(10**100) + 1, 0, -1], ids=["10**100-1", "-10**100+1", "0", "-1"])
def test_an_int_of_100_digits_is_an_int(n):
    assert check_int("demo", "seed", n) == n


@pytest.mark.parametrize("n, shown", [(10**100, "101 digits"), (-(10**100), "101 digits"),
                                      (10**5000, "about 5,000 digits")], ids=["10**100", "-10**100", "10**5000"])
def test_an_int_of_more_is_refused_by_size(n, shown):
    with pytest.raises(ValueError) as info:
        check_int("demo", "seed", n)
    assert str(info.value) == f"demo: seed is an int of {shown}; an int here has at most 100 digits"


def test_a_mask_has_at_most_max_mask_side_queries_and_keys():
    side = MAX_MASK_SIDE
    assert len(padding_mask([1], 0, num_queries=side)) == side
    assert len(length_mask(1, side, num_queries=1)[0]) == side
    assert len(length_mask(1, 1, num_queries=side)) == side
    assert len(padding_mask([1] * side, 0, num_queries=1)[0]) == side
    message = f"a mask here has at most {side:,} queries and {side:,} keys"
    for call, name in [(lambda: causal_mask(side + 1), "causal_mask: seq_len"),
                       (lambda: padding_mask([1], 0, num_queries=side + 1), "padding_mask: num_queries"),
                       (lambda: length_mask(1, side + 1), "length_mask: seq_len"),
                       (lambda: length_mask(1, 2, num_queries=side + 1), "length_mask: num_queries")]:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == f"{name} is {side + 1}; {message}"
    with pytest.raises(ValueError) as info:
        padding_mask([1] * (side + 1), 0)
    assert str(info.value) == f"padding_mask: token_ids has {side + 1:,} ids; a mask here has at most {side:,} keys"
    with pytest.raises(ValueError) as info:
        length_mask(10**400, 10**400)
    assert str(info.value) == "length_mask: length is an int of 401 digits; an int here has at most 100 digits"


def test_a_score_too_large_for_a_float_is_named():
    with pytest.raises(ValueError) as info:
        softmax([0.0, -(10**400)])
    assert str(info.value) == ("softmax: entry 1 is an int of 401 digits, too large for a float; "
                               "scores must be finite numbers or -inf (masked)")
    with pytest.raises(ValueError) as info:
        softmax_rows([[0.0], [10**400]])
    assert str(info.value).startswith("softmax_rows: row 1: entry 0 is an int of 401 digits, too large")


def test_call_outside_opens_the_doors_for_the_callback_and_closes_them_after():
    seen = []

    @checked(x="int")
    def outer(x):
        call_outside(lambda: seen.append(checks._inside[0]))  # the learner's code: no checked function runs
        return checks._inside[0]  # back inside outer

    assert outer(1) == "outer" and seen == [None]
    assert checks._inside[0] is None
