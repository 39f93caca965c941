"""teaching/display.py's explained views: every number of a head's scores, weights and outputs says how it
was made, with the module's own numbers, in a title a browser shows on hover."""

import html
import math
import re

import pytest
from bad_inputs import assert_no_mutation, assert_template, refused

from mha_lists import ShapeError, attention_trace, causal_mask, running_example
from mha_lists.core.attention import one_head
from mha_lists.core.matrix import product
from mha_lists.teaching.display import (MAX_EXPLAINED_COLUMNS, MAX_EXPLAINED_TOKENS, MAX_EXPLAINED_WIDTH, MAX_LISTED,
                                        Explained, explained_outputs, explained_scores, explained_weights,
                                        format_number)

INF = math.inf
FACTOR = r"\(?(-?\d+(?:\.\d+)?)\)?"
PRODUCT = re.compile(FACTOR + "×" + FACTOR)

# Every message the explained views write themselves, once.
MESSAGES = {
    "tokens": "{func}: tokens must be a list of labels, one per query, got {value}",
    "key_tokens": "{func}: {keys} {T_k} but {T} tokens were given; give key_tokens, one per key",
    "limit": "{func}: {name} gives {size} = {value}; an explained table takes at most {most} (use heatmap for a "
             "bigger one)",
    "too large": "{func}: {name} is too large for a float (about 1.8e308 at most)",
    "index": "explain: {name} is {index}; the table is {n}x{m}",
}

BAD_CALLS = {
    "tokens": (TypeError, lambda: explained_scores([[1.0]], [[1.0]], "a"),
               dict(func="explained_scores", value="'a'")),
    "key_tokens": (ShapeError, lambda: explained_weights([[0.0, 1.0]], ["a"]),
                   dict(func="explained_weights", keys="scores' columns are", T_k=2, T=1)),
    "limit": (ValueError, lambda: explained_outputs([[1.0]], [[0.5] * 33], ["a"]),
              dict(func="explained_outputs", name="V", size="d_v", value=33, most=32)),
    "too large": (ValueError, lambda: explained_scores([[1e300]], [[1e300]], ["a"]),
                  dict(func="explained_scores", name="score[0][0]")),
    "index": (ValueError, lambda: explained_weights([[0.0]], ["a"]).explain(1, 0), dict(name="i", index=1, n=1, m=1)),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === A case worked by hand: 2 tokens, d_k 2, whole numbers ===

Q, K, V = [[1, 2], [0, 1]], [[3, 4], [1, 0]], [[2, 0], [4, 8]]
TOKENS = ["a", "b"]


def titles(view: Explained) -> list[str]:
    """The title of every cell, row by row, as a browser reads it (unescaped)."""
    return [html.unescape(t) for t in re.findall(r'<a tabindex="0" title="([^"]*)"', view._repr_html_())]


def test_a_score_by_hand():
    view = explained_scores(Q, K, TOKENS)
    c = 1 / math.sqrt(2)
    assert view.M == [[11 * c, 1 * c], [4 * c, 0.0]] == one_head(Q, K, V, mask=None, scale=c).scores
    assert titles(view)[0] == ("score[0][0], a → a = (q0·k0) / √2\n= 1×3 + 2×4\n"
                               "= 11.0000 × 1/√2 (0.7071) = 7.7782")
    assert titles(view)[3] == ("score[1][1], b → b = (q1·k1) / √2\n= 0×1 + 1×0\n"
                               "= 0.0000 × 1/√2 (0.7071) = 0.0000")
    html_text = view._repr_html_()
    assert ('title="score[0][1], a → b = (q0·k1) / √2\n= 1×1 + 2×0\n= 1.0000 × 1/√2 (0.7071) = 0.7071" '
            'style="display:block;padding:4px 8px;">0.71</a>') in html_text
    assert titles(explained_scores(Q, K, TOKENS, scale=0.5))[0].endswith("= 11.0000 × scale 0.5000 = 5.5000")


def test_a_weight_by_hand():
    view = explained_weights([[0.0, math.log(3)], [2.0, -INF]], TOKENS)
    assert view.M[0] == [0.25, 0.75] and view.M[1] == [1.0, 0.0]
    assert titles(view)[0] == ("weight[0][0], a → a = e^(s - max) / total\n= e^(0.0000 - 1.0986) / 1.3333 = "
                               "0.3333 / 1.3333 = 0.2500\nthe row's e^(s - max): 0.3333 (a) + 1.0000 (b) = 1.3333")
    assert titles(view)[3] == "weight[1][1], b → b = 0 exactly: the mask hides this key (score -inf, e^-inf = 0)"
    assert titles(view)[2].endswith("the row's e^(s - max): 1.0000 (a) = 1.0000 (1 masked key add 0)")
    negative = explained_weights([[-1.0, -2.0]], ["a"], ["a", "b"])  # the maximum is negative: in brackets
    assert titles(negative)[1].startswith("weight[0][1], a → b = e^(s - max) / total\n= e^(-2.0000 - (-1.0000)) / ")


def test_an_output_by_hand():
    view = explained_outputs([[0.25, 0.75], [1.0, 0.0]], V, TOKENS)
    assert view.M == [[3.5, 6.0], [2.0, 0.0]] == product([[0.25, 0.75], [1.0, 0.0]], V)
    assert titles(view)[0] == "output[0][0], a, d0 = Σ_j a[0][j] × V[j][0]\n= 0.250×2 (a) + 0.750×4 (b)\n= 3.5000"
    assert titles(view)[3] == ("output[1][1], b, d1 = Σ_j a[1][j] × V[j][1]\n= 1.000×0 (a)\n= 0.0000\n"
                               "(1 key with weight 0 add nothing)")


def test_the_html_is_what_a_sanitiser_keeps():
    """A title on a focusable <a> in every cell; no <style>, no <script>, no tabindex on a td (JupyterLab's
    sanitiser drops those from an untrusted output); the number shown is the cell's."""
    for view in (explained_scores(Q, K, TOKENS), explained_weights([[0.0, 1.0], [1.0, 0.0]], TOKENS),
                 explained_outputs([[0.5, 0.5], [1.0, 0.0]], V, TOKENS)):
        text = view._repr_html_()
        assert text.count('<a tabindex="0" title="') == text.count("<td") == view.n * view.m
        assert "<style" not in text and "<script" not in text and "<td tabindex" not in text
        shown = re.findall(r'padding:4px 8px;">([^<]*)</a>', text)
        assert shown == [format_number(x, 2) for row in view.M for x in row]
        assert "point at a number (or Tab to it) to see how it was made" in text
        assert repr(view).split("\n")[0].endswith("; .explain(i, j) says how entry [i][j] was made")
        listed = re.search(r"<details[^>]*><summary>how each number was made</summary><div[^>]*>(.*)</div></details>$",
                           text, re.S).group(1)
        assert html.unescape(listed) == "\n\n".join(titles(view))
        assert [view.explain(i, j) for i in range(view.n) for j in range(view.m)] == titles(view)
    assert "&lt;BOS&gt;" in explained_scores([[1.0]], [[1.0]], ["<BOS>"])._repr_html_()


# === The running example: each explanation recomputes to the module's own entry ===

SETTINGS = [dict(), dict(seed=7, num_heads=4), dict(sentence="<BOS> I"), dict(d_model=64, num_heads=2)]


def parse_products(line: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in PRODUCT.findall(line)]


def close_to_rounded(exact: float, factors: list[tuple[float, float]]) -> bool:
    """The products of factors rounded to 3 decimals add up to ``exact``, within what that rounding allows."""
    slack = math.fsum(0.0005 * (abs(a) + abs(b)) + 0.0005 ** 2 for a, b in factors) + 1e-9
    return abs(math.fsum(a * b for a, b in factors) - exact) <= slack


@pytest.mark.parametrize("settings", SETTINGS, ids=range(len(SETTINGS)))
@pytest.mark.parametrize("causal", [False, True], ids=["no mask", "causal"])
def test_scores_explain_themselves(settings, causal):
    ex = running_example(**settings)
    mask = causal_mask(len(ex.tokens)) if causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    d_k = len(trace.Q[0][0])
    for h in range(len(trace.Q)):
        view = explained_scores(trace.Q[h], trace.K[h], ex.tokens, mask=mask)
        assert view.M == trace.scores[h]  # the very numbers attention computed
        for i, j in [(i, j) for i in range(view.n) for j in range(view.m)]:
            text = view.explain(i, j)
            if trace.scores[h][i][j] == -INF:
                assert "= -inf: the mask hides this key" in text
                continue
            head, terms, result = text.split("\n")
            assert head == f"score[{i}][{j}], {ex.tokens[i]} → {ex.tokens[j]} = (q{i}·k{j}) / √{d_k}"
            dot_text, score_text = re.fullmatch(rf"= (\S+) × 1/√{d_k} \(\S+\) = (\S+)", result).groups()
            assert score_text == format_number(trace.scores[h][i][j], 4)
            assert abs(float(dot_text) / math.sqrt(d_k) - float(score_text)) <= 1e-4
            factors = parse_products(terms)
            assert factors == [(float(format_number(q, 3)), float(format_number(k, 3)))
                               for q, k in zip(trace.Q[h][i], trace.K[h][j])][:len(factors)] or d_k > 16
            if d_k <= 16:
                assert len(factors) == d_k and close_to_rounded(float(dot_text), factors)
            else:
                assert len(factors) == 8 and f"+ ... {d_k - 8} more (adding to " in terms
                rest = float(re.search(r"adding to (\S+)\)", terms).group(1))
                assert close_to_rounded(float(dot_text) - rest, factors)


@pytest.mark.parametrize("settings", SETTINGS, ids=range(len(SETTINGS)))
@pytest.mark.parametrize("causal", [False, True], ids=["no mask", "causal"])
def test_weights_explain_themselves(settings, causal):
    ex = running_example(**settings)
    mask = causal_mask(len(ex.tokens)) if causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    for h in range(len(trace.Q)):
        view = explained_weights(trace.scores[h], ex.tokens)
        assert view.M == trace.attention[h]
        assert explained_weights(attention_trace(ex.x, ex.weights).scores[h], ex.tokens, mask=mask).M == view.M
        for i, j in [(i, j) for i in range(view.n) for j in range(view.m)]:
            text = view.explain(i, j)
            if causal and j > i:
                assert view.M[i][j] == 0.0 and "= 0 exactly: the mask hides this key" in text
                continue
            e_text, total_text, w_text = re.search(r"= (\S+) / (\S+) = (\S+)\n", text).groups()
            assert w_text == format_number(trace.attention[h][i][j], 4)
            row = re.search(r"the row's e\^\(s - max\): (.*) = (\S+)", text)
            exps = [float(x) for x in re.findall(r"(\d+\.\d+) \(", row.group(1))]
            assert row.group(2) == total_text and len(exps) == (i + 1 if causal else view.m)
            assert abs(math.fsum(exps) - float(total_text)) <= 5e-5 * (len(exps) + 1)
            assert abs(float(e_text) / float(total_text) - float(w_text)) <= 2e-4


@pytest.mark.parametrize("settings", SETTINGS, ids=range(len(SETTINGS)))
@pytest.mark.parametrize("causal", [False, True], ids=["no mask", "causal"])
def test_outputs_explain_themselves(settings, causal):
    ex = running_example(**settings)
    mask = causal_mask(len(ex.tokens)) if causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    for h in range(len(trace.Q)):
        view = explained_outputs(trace.attention[h], trace.V[h], ex.tokens)
        assert view.M == trace.head_outputs[h]
        for i, c in [(i, c) for i in range(view.n) for c in range(view.m)]:
            text = view.explain(i, c)
            lines = text.split("\n")
            assert lines[2] == f"= {format_number(trace.head_outputs[h][i][c], 4)}"
            factors = parse_products(lines[1])
            assert len(factors) == (i + 1 if causal else view.n)
            assert close_to_rounded(float(lines[2][2:]), factors)
            assert (lines[3:] == [f"({view.n - i - 1} key{'s' if view.n - i > 2 else ''} with weight 0 add nothing)"]
                    if causal and i < view.n - 1 else lines[3:] == [])


def test_a_long_sum_shows_its_largest_terms():
    q = [float(t) for t in range(20)]
    view = explained_scores([q], [[1.0] * 20], ["a"])
    terms = view.explain(0, 0).split("\n")[1]
    assert terms == "= " + " + ".join(f"{t}.000×1.000" for t in range(12, 20)) + " + ... 12 more (adding to 66.0000)"
    assert view.explain(0, 0).endswith(f"= 190.0000 × 1/√20 (0.2236) = {format_number(190 / math.sqrt(20), 4)}")
    weights = explained_weights([[0.0] * 17], ["a"], [str(t) for t in range(17)])
    assert "+ ... 9 more (adding to 9.0000) = 17.0000" in weights.explain(0, 0)


# === Bad arguments: a named error of one line, nothing changed ===


@pytest.mark.parametrize("call, error, start", [
    (lambda: explained_scores([[1.0]], [[1.0, 2.0]], ["a"]), ShapeError, "explained_scores: Q is 1x1 and K is 1x2"),
    (lambda: explained_scores([[1.0]], [[1.0]], ["a"], scale=0), ValueError, "explained_scores: scale"),
    (lambda: explained_scores([[1.0]], [[1.0]], ["a"], mask=[[False]]), ValueError, "explained_scores: mask row 0"),
    (lambda: explained_scores([[1.0]], [[1.0]], ["a", "b"]), ShapeError, "explained_scores: Q has 1 rows"),
    (lambda: explained_scores([[1.0]], [[1.0]] * 2, ["a"], ["b"]), ShapeError,
     "explained_scores: K's rows are 2 but 1 key tokens were given"),
    (lambda: explained_outputs([[1.0, 0.0]], [[1.0]] * 2, ["a"]), ShapeError,
     "explained_outputs: A's columns are 2 but 1 tokens were given; give key_tokens"),
    (lambda: explained_scores([[1.0]], [[1.0]], ["a"], digits=18), ValueError, "explained_scores: digits"),
    (lambda: explained_scores([[1.0]] * 33, [[1.0]], ["a"] * 33), ValueError, "explained_scores: Q gives T = 33"),
    (lambda: explained_scores([[1.0] * 1025], [[1.0] * 1025], ["a"]), ValueError, "explained_scores: Q gives d_k"),
    (lambda: explained_weights([[-INF, -INF]], ["a"], ["b", "c"]), ValueError, "explained_weights: row 0: every"),
    (lambda: explained_weights([[INF]], ["a"]), ValueError, r"explained_weights: scores\[0\]\[0\] is inf"),
    (lambda: explained_weights([[0.0]], ["a"], title=5), TypeError, "explained_weights: title must be a str"),
    (lambda: explained_weights([[0.0]], ["a"], mask=[[1]]), TypeError, r"explained_weights: mask\[0\]\[0\]"),
    (lambda: explained_weights([[0.0]], ["a"], key_tokens=5), TypeError, "explained_weights: key_tokens must"),
    (lambda: explained_outputs([[1.0, 0.0]], [[1.0]], ["a"]), ShapeError, "explained_outputs: A is 1x2 and V is 1x1"),
    (lambda: explained_outputs([[1.0]], [[1.0]], None), TypeError, "explained_outputs: tokens must be a list"),
    (lambda: explained_outputs([[2.0]], [[1e308]], ["a"]), ValueError,
     r"explained_outputs: output\[0\]\[0\] is too large"),
    (lambda: explained_scores([[1.0]], [[1.0]], ["a"]).explain(0, "1"), TypeError, "explain: j must be an int"),
])
def test_errors_name_the_function_and_the_argument(call, error, start):
    with pytest.raises(error, match=f"^{start}"):
        call()


def test_bad_arguments_are_refused_by_name():
    for bad in [None, 5, [], [[]], [[1.0], [2.0, 3.0]], [["x"]], [[math.nan]], [[10**400]]]:
        refused("explained_scores", lambda: explained_scores(bad, [[1.0]], ["a"]))
        refused("explained_scores", lambda: explained_scores([[1.0]], bad, ["a"]))
        refused("explained_weights", lambda: explained_weights(bad, ["a"]))
        refused("explained_outputs", lambda: explained_outputs(bad, [[1.0]], ["a"]))
        refused("explained_outputs", lambda: explained_outputs([[1.0]], bad, ["a"]))
    for tokens in [None, "a", 5, [], ["a", "b"]]:
        refused("explained_scores", lambda: explained_scores([[1.0]], [[1.0]], tokens))
        refused("explained_weights", lambda: explained_weights([[0.0]], tokens))
        refused("explained_outputs", lambda: explained_outputs([[1.0]], [[1.0]], tokens))
    for mask in [5, [[True, True]], [[None]], [[False]]]:
        refused("explained_scores", lambda: explained_scores([[1.0]], [[1.0]], ["a"], mask=mask))
        refused("explained_weights", lambda: explained_weights([[0.0]], ["a"], mask=mask))
    for scale in [0, -1.0, math.nan, "2", True]:
        refused("explained_scores", lambda: explained_scores([[1.0]], [[1.0]], ["a"], scale=scale))
    assert MAX_EXPLAINED_TOKENS == 32 and MAX_EXPLAINED_WIDTH == 1024 and MAX_EXPLAINED_COLUMNS == 32


@pytest.mark.parametrize("call, args, kwargs", [
    (explained_scores, (Q, K, TOKENS), dict(mask=[[True, False], [True, True]])),
    (explained_weights, ([[0.0, -INF], [1.0, 2.0]], TOKENS), dict(mask=[[True, True], [False, True]])),
    (explained_outputs, ([[0.5, 0.5], [1.0, 0.0]], V, TOKENS), dict(key_tokens=["c", "d"])),
    (explained_scores, (Q, K, TOKENS), dict(scale=-1)),
])
def test_every_explained_view_leaves_its_arguments_alone(call, args, kwargs):
    assert_no_mutation(call, *args, **kwargs)


def test_the_text_is_the_same_every_time():
    ex = running_example()
    trace = attention_trace(ex.x, ex.weights)
    first = explained_scores(trace.Q[1], trace.K[1], ex.tokens)._repr_html_()
    assert explained_scores(trace.Q[1], trace.K[1], ex.tokens)._repr_html_() == first


def test_a_big_table_lists_nothing_under_it_but_every_cell_has_its_title():
    view = explained_weights([[0.0] * 9] * 8, [str(t) for t in range(8)], [str(t) for t in range(9)])
    assert view.n * view.m == 72 > MAX_LISTED
    text = view._repr_html_()
    assert "<details" not in text and text.count('<a tabindex="0" title="weight[') == 72
    assert "<details" in explained_weights([[0.0] * 8] * 8, [str(t) for t in range(8)])._repr_html_()
