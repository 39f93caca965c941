"""teaching/display.py: text tables, heatmaps and bar charts. What they show, their messages, bad input."""

import copy
import math
import re

import pytest

from mha_lists import ShapeError, attention_heatmap, format_matrix, running_example
from mha_lists.teaching import display
from mha_lists.teaching.display import (MAX_PANELS, WIDE_PX, BarChart, Heatmap, bar_chart, format_number, heatmap,
                                        panels, print_matrix, show)
from bad_inputs import assert_no_mutation, assert_template, refused
from mha_lists.teaching.pictures import pipeline

NAN, INF = math.nan, math.inf

# Every message this module writes itself, once (the shared ones are in test_checks.py).
MESSAGES = {
    "digits": "{func}: digits is {digits}; give 0 to 17 digits after the point",
    "entry": "{func}: {name} must be a number, got {value} ({type})",
    "shown entry": "{func}: {name} is {value}; entries must be numbers (or True/False)",
    "labels type": "{func}: {name} must be a list of labels, got {value}",
    "labels count": "{func}: {what} but {n} {labels} were given",
    "option": "print_matrix: unknown option {option}; the options are row_labels, col_labels, digits and title",
    "colour range": "{func}: vmin is {vmin} and vmax is {vmax}; vmin must be below vmax",
    "tokens": "attention_heatmap: tokens must be a list of labels, one per query, got {value}",
    "key_tokens": "attention_heatmap: weights has {m} columns but {n} tokens were given; give key_tokens, one per column",
    "bar values": "{func}: {n_labels} labels for {n} values; give one label per value",
    "bar labels": "{func}: labels must be a list, got {value}",
    "bar negative": "{func}: values must not be negative, got {value}",
    "bar width": "{func}: width is {width}; give 1 to 200 characters",
    "show": "show: obj must be a picture, a Heatmap or a BarChart (something Jupyter can draw), got {value} ({type})",
    "numbers": "{func}: numbers must be True or False, got {value} ({type})",
    "panels items": "panels: items must be a list of heatmaps or bar charts, got a {type}",
    "panels count": "panels: items holds {n}; give 1 to {most} to put side by side",
    "panels item": "panels: items[{k}] must be a heatmap or a bar chart, got a {type}",
}

BAD_CALLS = {
    "digits": (ValueError, lambda: format_number(0.5, 18), dict(func="format_number", digits=18)),
    "entry": (TypeError, lambda: format_number("a"), dict(func="format_number", name="x", value="'a'", type="str")),
    "shown entry": (TypeError, lambda: attention_heatmap([[1, None]], ["a"]),
                    dict(func="attention_heatmap", name="weights[0][1]", value=None)),
    "labels type": (TypeError, lambda: format_matrix([[1.0]], row_labels=5),
                    dict(func="format_matrix", name="row_labels", value=5)),
    "labels count": (ShapeError, lambda: print_matrix([[1, 2]], col_labels=["c"]),
                     dict(func="print_matrix", what="M has 2 columns", n=1, labels="col labels")),
    "option": (TypeError, lambda: print_matrix([[1]], colour="red"), dict(option="'colour'")),
    "colour range": (ValueError, lambda: heatmap([[1]], vmin=1.0, vmax=0.0), dict(func="heatmap", vmin=1.0, vmax=0.0)),
    "tokens": (TypeError, lambda: attention_heatmap([[1.0]], 5), dict(value=5)),
    "key_tokens": (ShapeError, lambda: attention_heatmap([[0.5, 0.5]], ["a"]), dict(m=2, n=1)),
    "bar values": (ShapeError, lambda: bar_chart(["a"], [1.0, 2.0]), dict(func="bar_chart", n_labels=1, n=2)),
    "bar labels": (TypeError, lambda: bar_chart(5, [1.0]), dict(func="bar_chart", value=5)),
    "bar negative": (ValueError, lambda: BarChart(["a"], [-1.0]), dict(func="BarChart", value=-1.0)),
    "bar width": (ValueError, lambda: BarChart(["a"], [1.0], width=0), dict(func="BarChart", width=0)),
    "show": (TypeError, lambda: show(None), dict(value=None, type="NoneType")),
    "numbers": (TypeError, lambda: attention_heatmap([[1.0]], ["a"], numbers=0),
                dict(func="attention_heatmap", value=0, type="int")),
    "panels items": (TypeError, lambda: panels(heatmap([[1.0]])), dict(type="Heatmap")),
    "panels count": (ValueError, lambda: panels([]), dict(n=0, most=MAX_PANELS)),
    "panels item": (TypeError, lambda: panels([heatmap([[1.0]]), 5]), dict(k=1, type="int")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === What they show ===


def test_format_number_and_matrix():
    assert format_number(-0.00001) == "0.0000"
    assert format_number(float("-inf")) == "-inf" and format_number(INF) == "inf"
    assert format_number(False) == "0" and format_number(True) == "1"
    assert format_number(12) == "12" and format_number(1 / 3, 2) == "0.33"
    text = format_matrix([[1.0, -0.5]], row_labels=["I"], col_labels=["a", "b"], digits=2, title="M")
    assert text == "M (1x2)\n      a      b\nI  1.00  -0.50"
    assert format_matrix([[1.0]]) == "       d0\n0  1.0000"


def test_print_matrix_prints_format_matrix(capsys):
    print_matrix([[1, 2]], row_labels=("r",), digits=1, title="t")
    assert capsys.readouterr().out == format_matrix([[1, 2]], row_labels=("r",), digits=1, title="t") + "\n"


def test_heatmap_html_and_text():
    w = [[1.0, 0.0], [0.25, 0.75]]
    hm = attention_heatmap(w, ["I", "like"], title="weights")
    html = hm._repr_html_()
    assert html.startswith('<div style="overflow-x:auto;max-width:100%;">\n<table') and html.endswith("</table>\n</div>")
    assert "0.75" in html and "like" in html
    assert "rgb(33,102,255)" in html  # the weight 1.0 gets the darkest colour
    assert repr(hm).startswith("rows = queries (who looks), columns = keys (what is looked at)\nweights (2x2)")
    assert "rows = queries" in html and "weights (2x2)" in html
    assert repr(heatmap(w, title="plain")).startswith("plain (2x2)")  # a plain heatmap has no note
    assert "&lt;BOS&gt;" in heatmap([[0.5]], row_labels=["<BOS>"], col_labels=["<BOS>"])._repr_html_()
    assert repr(attention_heatmap([[1.0, 0.0]], ["q"], ["a", "b"])).endswith("q  1.00  0.00")


def test_a_wide_heatmap_scrolls_in_its_box_keeps_its_row_labels_and_says_so():
    narrow = heatmap([[0.5] * 8] * 5, row_labels=list("abcde"), digits=4)  # 8 columns: about 700 px, no cue
    wide = heatmap([[-0.5] * 16] * 5, row_labels=list("abcde"), digits=4)
    assert narrow.width_px() < WIDE_PX < wide.width_px()
    for hm in (narrow, wide):
        html = hm._repr_html_()
        row_labels = re.findall(r'<tr><th style="([^"]*)">', html)[1:]  # the header row's corner cell aside
        assert len(row_labels) == 5 and all("position:sticky;left:0;" in style for style in row_labels)
        assert all("white-space:nowrap" in style for style in re.findall(r'<td style="([^"]*)"', html))
    assert "scroll" not in narrow._repr_html_().split("</table>")[1]
    assert wide._repr_html_().endswith("16 columns: on a narrow screen, scroll the table sideways</div>")
    # Wider labels or more digits make a wider table: the estimate follows what is drawn.
    assert heatmap([[0.5] * 8] * 5, row_labels=["transformers"] * 5, digits=4).width_px() > narrow.width_px()
    assert heatmap([[0.5] * 8] * 5, row_labels=list("abcde"), digits=2).width_px() < narrow.width_px()


def test_a_heatmap_without_its_numbers_is_colours_and_says_each_number_when_pointed_at():
    w = [[1.0, 0.0], [0.25, 0.75]]
    full, bare = attention_heatmap(w, ["I", "<b>"]), attention_heatmap(w, ["I", "<b>"], numbers=False)
    cells = re.findall(r'<td style="([^"]*)" title="([^"]*)"></td>', bare._repr_html_())
    assert len(cells) == 4 and re.findall(r"<td[^>]*>([^<]+)</td>", bare._repr_html_()) == []  # no number in a cell
    assert [title for _, title in cells] == ["I · I: 1.00", "I · &lt;b&gt;: 0.00", "&lt;b&gt; · I: 0.25",
                                             "&lt;b&gt; · &lt;b&gt;: 0.75"]
    assert [re.search(r"background:([^;]*);", style)[1] for style, _ in cells] == \
        re.findall(r'<td style="[^"]*background:([^;]*);color', full._repr_html_())  # the same colours
    assert "point at a square to see its weight" in bare._repr_html_()
    assert repr(bare) == repr(full).replace("(what is looked at)", "(what is looked at); point at a square to see "
                                                                   "its weight")  # a terminal still gets numbers
    assert heatmap(w, numbers=False, digits=3)._repr_html_().count('title="') == 4
    assert "0.250" in heatmap(w, numbers=False, digits=3)._repr_html_()
    big = heatmap([[0.5] * 16] * 16, numbers=False)  # 16 columns of squares fit where 16 of numbers do not
    assert big.width_px() < WIDE_PX < heatmap([[0.5] * 16] * 16, digits=4).width_px()
    assert heatmap([[0.5] * 16], col_labels=["column"] * 16, numbers=False).width_px() > big.width_px()


def test_panels_put_heatmaps_side_by_side_and_print_each_in_turn(capsys):
    a, b = heatmap([[1.0]], title="a"), attention_heatmap([[1.0]], ["x"], numbers=False)
    both = panels([a, b])
    html = both._repr_html_()
    assert html.startswith('<div style="display:flex;flex-wrap:wrap;') and html.count('<div style="margin:') == 2
    assert a._repr_html_() in html and b._repr_html_() in html
    assert repr(both) == repr(a) + "\n\n" + repr(b)
    show(both)
    assert capsys.readouterr().out == repr(both) + "\n"
    assert panels((a,)).items == [a]


def test_bar_chart():
    chart = bar_chart(["a", "bb"], [2.0, 1.0], digits=1)
    assert repr(chart) == "a   2.0  " + "#" * 40 + "\nbb  1.0  " + "#" * 20
    assert "width:100.0%" in chart._repr_html_() and "width:50.0%" in chart._repr_html_()
    assert repr(bar_chart(["Q", "scores"], [1280, 400], digits=0)) == (
        "Q       1,280  " + "#" * 40 + "\nscores    400  " + "#" * 12)
    assert BarChart(["a"], [1.0], width=10).width == 10


def bar_lengths(chart) -> list[float]:
    """Each bar's drawn length in em, read from the chart's HTML: its track's fixed width (em, never a
    percentage of the page) times the bar's percentage of it. No other width caps a bar."""
    html = chart._repr_html_()
    tracks = [float(em) for em in re.findall(r'flex:none;width:([0-9.]+)em;height:1em;">', html)]
    bars = [float(pct) for pct in re.findall(r'display:block;height:1em;width:([0-9.]+)%;', html)]
    assert "max-width" not in html and len(tracks) == len(bars) == len(chart.values)
    return [track * pct / 100 for track, pct in zip(tracks, bars)]


@pytest.mark.parametrize("values", [[20, 20, 20, 10, 10, 20], [2.0, 1.0], [1280, 400, 7, 0], [1e308, 5e307]])
def test_bar_lengths_are_proportional_to_the_values_at_any_window_width(values):
    """A bar's length was a percentage of the page capped at 30em, so in a wide window every value above
    about 40% of the largest drew at full length ([20, 20, 20, 10, 10, 20]: six bars of 390 px)."""
    lengths = bar_lengths(bar_chart([str(k) for k in range(len(values))], values))
    longest = max(lengths)
    assert longest > 0
    for value, length in zip(values, lengths):
        assert length / longest == pytest.approx(value / max(values), abs=1e-3)


def test_show_prints_the_text_outside_jupyter(capsys):
    show(bar_chart(["a"], [1.0]))
    assert capsys.readouterr().out == repr(bar_chart(["a"], [1.0])) + "\n"


def test_values_at_the_edge_of_float64_still_draw():
    assert "rgb(33,102,255)" in heatmap([[1e308, -1e308]])._repr_html_()  # 1e308 is the deepest blue
    assert repr(bar_chart(["a", "b"], [1e308, 5e307])).splitlines()[1].endswith("  " + "#" * 20)
    assert "width:50.0%" in bar_chart(["a", "b"], [1e308, 5e307])._repr_html_()
    assert ">-inf<" in heatmap([[NAN, 1.0], [-INF, 2.0]])._repr_html_()  # a masked score is shown, uncoloured


# === Errors name the function and the argument ===


@pytest.mark.parametrize("call, error, start", [
    (lambda: format_matrix([[1]], title=3), TypeError, "format_matrix: title must be a str"),
    (lambda: print_matrix([[1]], title=[]), TypeError, "print_matrix: title must be a str"),
    (lambda: heatmap([[1]], title=1.5), TypeError, "heatmap: title must be a str"),
    (lambda: bar_chart(["a"], [1.0], title=0), TypeError, "bar_chart: title must be a str"),
    (lambda: Heatmap([[1]], note=1), TypeError, "Heatmap: note must be a str"),
    (lambda: attention_heatmap([[1.0]], ["a", "b"]), ShapeError, "attention_heatmap: weights has 1 rows"),
    (lambda: attention_heatmap([[1.0]], ["a"], 5), TypeError, "attention_heatmap: key_tokens must be a list"),
    (lambda: Heatmap([[10**400]]), ValueError, r"Heatmap: M\[0\]\[0\] is an int of 401 digits"),
    (lambda: format_matrix([[1.0]], row_labels=["a", "b"]), ShapeError, "format_matrix: M has 1 rows"),
    (lambda: heatmap([[1]], vmin=NAN), ValueError, "heatmap: vmin must be a finite number"),
    (lambda: heatmap([[1]], vmax="0"), TypeError, "heatmap: vmax must be a finite number, got '0' \\(str\\)"),
    (lambda: format_matrix([[0.5]], digits=2.5), TypeError, "format_matrix: digits must be an int"),
    (lambda: bar_chart(["a"], [-1.0]), ValueError, "bar_chart: values must not be negative"),
])
def test_errors_name_the_function_and_the_argument(call, error, start):
    with pytest.raises(error, match=f"^{start}"):
        call()


# === Bad inputs of every kind: a named error of one short line, never a raw one ===

BIG = 10**5000
BAD_SHOWN = [None, 5, "ab", "x" * 10**6, [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[[1.0]]], ({1: 2},),
             [[BIG]], [[1.0], [-BIG]], [[10**101]], [list(range(10**5)) + ["x"]]]
BAD_DIGITS = [None, "4", 2.5, -1, 18, 99, True, BIG]


@pytest.mark.parametrize("M", BAD_SHOWN, ids=range(len(BAD_SHOWN)))
def test_a_bad_matrix_is_refused_by_name(M):
    refused("format_matrix", lambda: format_matrix(M))
    refused("print_matrix", lambda: print_matrix(M))
    refused("heatmap", lambda: heatmap(M))
    refused("Heatmap", lambda: Heatmap(M))
    refused("attention_heatmap", lambda: attention_heatmap(M, ["a"]))


@pytest.mark.parametrize("d", BAD_DIGITS, ids=range(len(BAD_DIGITS)))
def test_bad_digits_are_refused_by_name(d):
    refused("format_number", lambda: format_number(0.5, d))
    refused("format_matrix", lambda: format_matrix([[0.5]], digits=d))
    refused("print_matrix", lambda: print_matrix([[0.5]], digits=d))
    refused("heatmap", lambda: heatmap([[0.5]], digits=d))
    refused("attention_heatmap", lambda: attention_heatmap([[0.5]], ["a"], digits=d))
    refused("bar_chart", lambda: bar_chart(["a"], [1.0], digits=d))


def test_other_bad_arguments_are_refused_by_name():
    for x in ["a", None, [1.0], {}, BIG, -BIG, 10**101]:
        refused("format_number", lambda: format_number(x))
    for labels in [5, 5.5, ["a", "b"], [], list(range(10**5))]:
        refused("format_matrix", lambda: format_matrix([[0.5]], row_labels=labels))
        refused("format_matrix", lambda: format_matrix([[0.5]], col_labels=labels))
        refused("print_matrix", lambda: print_matrix([[0.5]], row_labels=labels))
        refused("heatmap", lambda: heatmap([[0.5]], col_labels=labels))
    for v in [NAN, INF, "0", [0.0], True, BIG]:
        refused("heatmap", lambda: heatmap([[0.5]], vmin=v))
        refused("heatmap", lambda: heatmap([[0.5]], vmax=v))
    for tokens, keys in [(None, None), (5, None), ("a", None), (["a", "b"], None), (["a"], 5), (["a"], ["a", "b"])]:
        refused("attention_heatmap", lambda: attention_heatmap([[0.5]], tokens, keys))
    for labels, values in [(["a"], [1.0, 2.0]), (["a"], [-1.0]), (["a"], [NAN]), (["a"], [INF]), (5, [1.0]),
                           (["a"], None), ([], []), (["a"], ["x"]), (["a"], [[1.0]]), ("a", [1.0]), (None, [1.0]),
                           (["a"], [BIG])]:
        refused("bar_chart", lambda: bar_chart(labels, values))
        refused("BarChart", lambda: BarChart(labels, values))
    for width in [0, -1, 10**9, None, "40", 2.5, True]:
        refused("BarChart", lambda: BarChart(["a"], [1.0], width=width))
    for obj in [None, 5, "x" * 10**6, [[1.0]]]:
        refused("show", lambda: show(obj))
    refused("format_matrix", lambda: format_matrix([[1.0]], title=b"t"))
    for flag in [0, 1, None, "no", 1.0]:
        refused("heatmap", lambda: heatmap([[0.5]], numbers=flag))
        refused("attention_heatmap", lambda: attention_heatmap([[0.5]], ["a"], numbers=flag))
        refused("Heatmap", lambda: Heatmap([[0.5]], numbers=flag))
    for items in [None, 5, "ab", [], [None], [heatmap([[1.0]])] * (MAX_PANELS + 1), [[[1.0]]],
                  [panels([heatmap([[1.0]])])], [pipeline(running_example())]]:
        refused("panels", lambda: panels(items))


# === Nothing is changed ===


@pytest.mark.parametrize("call, args, kwargs", [
    (format_matrix, ([[1.0, 2.0]],), dict(row_labels=["a"], col_labels=["x", "y"], title="t")),
    (print_matrix, ([[1.0]],), dict(row_labels=["a"])), (heatmap, ([[1.0, -1.0]],), dict(col_labels=["x", "y"])),
    (attention_heatmap, ([[1.0, 0.0]], ["q"], ["a", "b"]), {}), (bar_chart, (["a", "b"], [2.0, 1.0]), {}),
    (Heatmap, ([[1.0]],), dict(note="n")), (BarChart, (["a"], [1.0]), dict(width=5)),
    (format_matrix, ([[1.0]],), dict(row_labels=["a", "b"])), (format_number, (0.5, 2), {}),
    (heatmap, ([[1.0, -1.0]],), dict(numbers=False)), (panels, ([heatmap([[1.0]]), heatmap([[2.0]])],), {}),
])
def test_every_public_function_leaves_its_arguments_alone(call, args, kwargs):
    assert_no_mutation(call, *args, **kwargs)


def test_a_heatmap_keeps_a_copy_of_its_matrix():
    M = [[1.0, 2.0]]
    hm = heatmap(M)
    M[0][0] = 99.0
    assert "99" not in repr(hm)
    before = copy.deepcopy(hm.M)
    hm._repr_html_()
    assert hm.M == before


def test_the_module_is_all_functions_and_two_classes():
    assert set(display.__all__) == {"format_number", "format_matrix", "print_matrix", "heatmap", "attention_heatmap",
                                    "bar_chart", "panels", "show", "explained_scores", "explained_weights",
                                    "explained_outputs"}


def test_a_signed_table_is_coloured_around_zero_red_below_blue_above():
    def backgrounds(hm):
        return re.findall(r"background:(rgb\([^)]*\))", hm._repr_html_())
    signed = heatmap([[-2.0, 0.0, 1.0, 2.0]], title="signed")
    assert backgrounds(signed) == ["rgb(214,39,40)", "rgb(255,255,255)", "rgb(144,178,255)", "rgb(33,102,255)"]
    assert "red: below 0, blue: above 0" in signed._repr_html_()
    # one scale for both signs: -1 is as pale a red as +1 is a pale blue, though the largest size is 4
    lopsided = backgrounds(heatmap([[-1.0, 1.0, 4.0]]))
    assert lopsided[0] == "rgb(245,201,201)" and lopsided[1] == "rgb(200,217,255)"
    # no negative entry: white at the smallest, blue at the largest, and no sign legend
    plain = heatmap([[1.0, 3.0]], title="plain")
    assert backgrounds(plain) == ["rgb(255,255,255)", "rgb(33,102,255)"] and "below 0" not in plain._repr_html_()


def test_a_table_too_large_to_read_is_refused_at_once_with_a_way_out():
    """print_matrix(causal_mask(4096)) used to print 16.8 million entries, and a heatmap of 3,000 x 3,000 built
    1.4 GB of HTML: the learner's notebook hung. A table holds at most MAX_SHOWN entries."""
    from mha_lists.teaching import display
    side = 1 + int(display.MAX_SHOWN ** 0.5)
    big = [[0.0] * side for _ in range(side)]
    for show in (display.format_matrix, display.print_matrix, display.heatmap):
        with pytest.raises(ValueError, match=rf"{show.__name__}: M is {side} x {side}, .* entries; a table shows at most"):
            show(big)
    with pytest.raises(ValueError, match="attention_heatmap: .* a table shows at most"):
        display.attention_heatmap(big, [str(i) for i in range(side)])
    edge = [[0.0] * (side - 1) for _ in range(side - 1)]  # 128 x 128 is shown
    assert display.format_matrix(edge).count("\n") == side - 1


@pytest.mark.parametrize("label", [10**5000, None, [[1]], True], ids=["5000 digits", "None", "a list", "True"])
def test_every_label_is_a_text_or_a_number(label):
    """Labels are shown with str(): a 5,000-digit int (str() refuses it), a list nested past the recursion limit
    or None is refused by name and place, in every function that takes labels."""
    deep = []
    for _ in range(100_000):
        deep = [deep]
    for bad in (label, deep):
        for func, call in (("format_matrix", lambda: format_matrix([[1.0]], row_labels=[bad])),
                           ("heatmap", lambda: heatmap([[1.0]], col_labels=[bad])),
                           ("attention_heatmap", lambda: attention_heatmap([[1.0]], [bad])),
                           ("bar_chart", lambda: bar_chart([bad], [1.0]))):
            message = str(refused(func, call, (ValueError, TypeError)))
            assert "[0]" in message
    assert "1.5" in format_matrix([[1.0, 2.0]], col_labels=[0, 1.5])  # numbers are labels too


def test_explained_scores_takes_any_scale_check_number_takes():
    """An int scale of 151 digits passes check_number, and is used as the float it is."""
    from mha_lists.teaching.display import explained_scores
    table = explained_scores([[1.0]], [[1.0]], ["a"], scale=10**150)
    assert table.M == [[1e150]] and f"scale {format_number(1e150)}" in table.explain(0, 0)
