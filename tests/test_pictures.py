"""The pictures: valid SVG, drawn from the numbers given, with the marks a reader needs."""

import math
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from mha_lists.core.attention import attention_trace
from mha_lists.core.checks import ShapeError
from mha_lists.core.matrix import matmul
from mha_lists.teaching.example import running_example
from mha_lists.teaching.paper import paper_example
from mha_lists.teaching.pictures import (HEAD_STYLES, MAX_HEADS, MAX_TOKENS, Picture, attention_lines, line_chart,
                                         pipeline, query_key_arrows)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"


def parse(picture):
    """The SVG as an element tree (fails on anything that is not well-formed XML)."""
    root = ET.fromstring(picture.svg)
    assert root.tag == f"{SVG}svg"
    assert root.find(f"{SVG}title").text and root.find(f"{SVG}desc").text, "a title and a description for screen readers"
    return root


def texts(root):
    return [t.text for t in root.iter(f"{SVG}text") if t.text]


def weight_lines(root):
    return [e for e in root.iter(f"{SVG}line") if "data-weight" in e.attrib]


# === attention_lines ===


def test_one_line_per_query_key_head_with_positive_weight():
    weights = [[[1.0, 0.0], [0.25, 0.75]], [[0.5, 0.5], [0.0, 1.0]]]
    root = parse(attention_lines(["a", "b"], weights))
    drawn = sorted((int(e.get("data-head")), int(e.get("data-query")), int(e.get("data-key")))
                   for e in weight_lines(root))
    assert drawn == [(0, 0, 0), (0, 1, 0), (0, 1, 1), (1, 0, 0), (1, 0, 1), (1, 1, 1)]


def test_line_width_and_opacity_grow_with_the_weight():
    row = [0.05, 0.1, 0.15, 0.2, 0.5]  # sums to 1
    root = parse(attention_lines(["a", "b", "c", "d", "e"], [row] * 5))
    by_weight = sorted(weight_lines(root), key=lambda e: float(e.get("data-weight")))
    widths = [float(e.get("stroke-width")) for e in by_weight]
    opacities = [float(e.get("stroke-opacity")) for e in by_weight]
    assert widths == sorted(widths) and opacities == sorted(opacities)
    assert widths[0] < widths[-1] and opacities[0] < opacities[-1]


def test_each_head_has_its_own_colour_and_dash_and_a_legend():
    ex = running_example()
    trace = attention_trace(ex.x, ex.weights)
    root = parse(attention_lines(ex.tokens, trace.attention, heads=["first", "second"]))
    styles = {(e.get("stroke"), e.get("stroke-dasharray")) for e in weight_lines(root)}
    assert len(styles) == 2
    assert "first" in texts(root) and "second" in texts(root)
    assert len(set(HEAD_STYLES)) == MAX_HEADS, "no two heads look alike, even without colour"
    assert len({dash for _, dash in HEAD_STYLES[:5]}) == 5, "neighbouring heads differ in dash, not only colour"


def test_many_heads_get_a_panel_each_with_every_line():
    ex = running_example(num_heads=16)
    weights = attention_trace(ex.x, ex.weights).attention
    root = parse(attention_lines(ex.tokens, weights))
    assert len(weight_lines(root)) == sum(1 for A in weights for row in A for w in row if w > 0)
    labels = texts(root)
    assert all(f"head {h}" in labels for h in range(16))
    assert labels.count("<BOS>") == 2 * 16, "each panel labels its queries and keys"


def test_token_labels_are_escaped_and_present():
    ex = running_example()
    trace = attention_trace(ex.x, ex.weights)
    picture = attention_lines(ex.tokens, trace.attention)
    assert "&lt;BOS&gt;" in picture.svg and "<BOS>" not in picture.svg
    assert texts(parse(picture)).count("<BOS>") == 2  # once per column


def test_text_names_the_strongest_key_of_each_query():
    text = repr(attention_lines(["a", "b"], [[0.9, 0.1], [0.3, 0.7]]))
    assert text.splitlines()[1] == "  head 0: a -> a 0.90, b -> b 0.70"


def test_masked_keys_draw_no_line():
    causal = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]
    root = parse(attention_lines(["a", "b", "c"], causal))
    assert all(int(e.get("data-key")) <= int(e.get("data-query")) for e in weight_lines(root))
    assert len(weight_lines(root)) == 6


def test_cross_attention_uses_the_key_tokens():
    root = parse(attention_lines(["q0"], [[0.5, 0.25, 0.25]], key_tokens=["k0", "k1", "k2"]))
    assert {"q0", "k0", "k1", "k2"} <= set(texts(root))


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((["a", "b"], [[[1.0, 0.0], [0.5, 0.5]], [[1.0], [1.0]]]), {}, ShapeError,
     "attention_lines: weights\\[1\\] is 2x1; every head must be 2x2"),
    ((["a"], [[1.0, 0.0], [0.5, 0.5]]), {}, ShapeError, "attention_lines: weights is 2x2; every head must be 1x1"),
    ((["a", "b"], [[1.5, -0.5], [0.5, 0.5]]), {}, ValueError, "attention_lines: weights\\[0\\]\\[0\\] is 1.5"),
    ((["a"], [[1.0]]), {"heads": ["x", "y"]}, ShapeError, "heads has 2 names for 1 heads"),
    (("a b", [[1.0]]), {}, TypeError, "attention_lines: tokens must be a list of str"),
    ((["a"], [[[1.0]]] * (MAX_HEADS + 1)), {}, ShapeError, "MAX_HEADS"),
    ((["a"] * (MAX_TOKENS + 1), [[1.0] + [0.0] * MAX_TOKENS] * (MAX_TOKENS + 1)), {}, ShapeError, "MAX_TOKENS"),
])
def test_attention_lines_errors(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        attention_lines(*args, **kwargs)


def test_attention_lines_does_not_change_its_arguments():
    tokens, weights = ["a", "b"], [[[1.0, 0.0], [0.5, 0.5]]]
    attention_lines(tokens, weights)
    assert tokens == ["a", "b"] and weights == [[[1.0, 0.0], [0.5, 0.5]]]


# === query_key_arrows ===


def paper_head(h):
    p = paper_example()
    return matmul(p.x, p.weights.W_Q[h]), matmul(p.x, p.weights.W_K[h]), p.tokens


def test_arrows_write_each_score_and_mark_the_winner():
    Q, K, tokens = paper_head(0)  # like's query (2, 0) meets I's key (2, 0): 4, like 0, transformers -4
    picture = query_key_arrows(Q, K, tokens, query=1)
    labels = texts(parse(picture))
    assert "I: q·k = 4  ★ wins" in labels
    assert "like: q·k = 0" in labels and "transformers: q·k = -4" in labels
    assert len(list(parse(picture).iter(f"{SVG}circle"))) == 1, "the winner is ringed, not only coloured"
    assert repr(picture).endswith("wins: I")


def test_arrows_scores_are_the_dot_products():
    Q, K = [[0.5, -1.0], [1.0, 1.0]], [[3.0, 1.0], [-1.0, 2.0], [0.0, 0.0]]
    picture = query_key_arrows(Q, K, ["a", "b"], query=0, key_tokens=["x", "y", "z"])
    expected = [math.fsum(a * b for a, b in zip(Q[0], k)) for k in K]  # 0.5, -2.5, 0
    assert repr(picture) == "query_key_arrows: query a = (0.50, -1); q·k: x 0.50, y -2.50, z 0; wins: x"
    assert expected == [0.5, -2.5, 0.0]


def test_keys_at_the_same_point_share_a_label_and_ties_all_win():
    Q, K, tokens = paper_head(1)  # like's and transformers' keys are both (0, 0)
    labels = texts(parse(query_key_arrows(Q, K, tokens, query=2)))
    assert "like, transformers: q·k = 0" in labels
    tie = query_key_arrows([[1, 0]], [[1, 0], [1, 5]], ["q"], query=0, key_tokens=["a", "b"])
    assert repr(tie).endswith("wins: a, b")


@pytest.mark.parametrize("Q, K, tokens, query, error, message", [
    ([[1, 2, 3]], [[1, 2, 3]], ["a"], 0, ShapeError, "query_key_arrows: Q is 1x3; .* d_k = 2"),
    ([[1, 2]], [[1, 2, 3]], ["a"], 0, ShapeError, "query_key_arrows: K is 1x3"),
    ([[1, 2]], [[1, 2]], ["a"], 1, IndexError, "query_key_arrows: query is 1; it must be a query row from 0 to 0"),
    ([[1, 2]], [[1, 2]], ["a", "b"], 0, ShapeError, "tokens has 2 entries; it needs one per row \\(1\\)"),
    ([[1, 2]], [[1, 2]], ["a"], True, TypeError, "query must be an int"),
    ([[1, 2]], [[1, 2], [3, 4]], ["a"], 0, ShapeError, "K has 2 rows but there are 1 tokens; give key_tokens"),
    ([[1, 2]], [[1, 2]] * (MAX_TOKENS + 1), ["a"], 0, ShapeError, "key_tokens"),
])
def test_query_key_arrows_errors(Q, K, tokens, query, error, message):
    with pytest.raises(error, match=message):
        query_key_arrows(Q, K, tokens, query=query)


# === line_chart ===


def test_line_chart_has_one_point_per_value_and_the_marks():
    values = [2.0, 1.5, 1.0, 0.25, 0.5]
    root = parse(line_chart(values, title="loss", x_label="step", y_label="loss", marks={3: "lowest"}))
    points = root.find(f"{SVG}polyline").get("points").split()
    assert len(points) == len(values)
    ys = [float(p.split(",")[1]) for p in points]
    assert ys.index(max(ys)) == 3, "the lowest loss is drawn lowest (SVG y grows downwards)"
    assert {"loss", "step", "lowest"} <= set(texts(root))


def test_line_chart_text():
    picture = line_chart([3.0, 1.0, 2.0], title="loss", x_label="step", y_label="loss", x_values=[0, 10, 20])
    assert repr(picture) == "line_chart loss: 3 values from 3.0000 (step 0) to 2.0000 (step 20); lowest 1.0000 at step 10"


@pytest.mark.parametrize("kwargs, error, message", [
    ({"values": []}, ShapeError, "line_chart: values is empty"),
    ({"values": [1.0, float("nan")]}, ValueError, "line_chart: values\\[1\\] is nan"),
    ({"values": [1.0, 2.0], "marks": {5: "x"}}, ValueError, "line_chart: marks has x = 5"),
    ({"values": [1.0, 2.0], "x_values": [1, 1]}, ValueError, "x_values must increase"),
    ({"values": [0.0] * 10_001}, ShapeError, "MAX_POINTS"),
])
def test_line_chart_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        line_chart(title="t", x_label="x", y_label="y", **kwargs)


# === pipeline ===


def test_pipeline_labels_come_from_the_example():
    ex = running_example(d_model=24, num_heads=3)
    root = parse(pipeline(ex))
    labels = texts(root)
    assert labels.count("5×8") == 3 * 4, "Q, K, V and the head output of each of the 3 heads"
    assert "5×24" in labels and "24×24" in labels and "5×5" in labels
    assert "head 2" in labels and "head 3" not in labels


def test_pipeline_with_many_heads_draws_a_few_and_counts_the_rest():
    picture = pipeline(running_example(num_heads=16))
    labels = texts(parse(picture))
    assert "head 15" in labels and "head 2" not in labels
    assert any("13 more heads" in t for t in labels)
    assert "16 heads" in repr(picture)


def test_pipeline_draws_the_weights_it_computes():
    ex = running_example(sentence="<BOS> I")
    trace = attention_trace(ex.x, ex.weights)
    cells = [float(e.get("fill-opacity")) for e in parse(pipeline(ex)).iter(f"{SVG}rect") if e.get("fill-opacity")]
    expected = [round(w, 2) for A in trace.attention for row in A for w in row]
    assert cells == pytest.approx(expected, abs=0.006)


def test_pipeline_wants_the_example_and_a_sentence_that_fits():
    with pytest.raises(TypeError, match="pipeline: ex must be the running example"):
        pipeline([[1.0]])
    long = running_example(sentence=" ".join(["I"] * (MAX_TOKENS + 1)))
    with pytest.raises(ShapeError, match=f"pipeline: the sentence has {MAX_TOKENS + 1} tokens; at most {MAX_TOKENS}"):
        pipeline(long)


# === The picture object and the committed file ===


def test_picture_shows_svg_in_jupyter_and_text_elsewhere(tmp_path):
    picture = pipeline(running_example())
    assert isinstance(picture, Picture) and not hasattr(picture, "_repr_html_")
    assert picture._repr_svg_() == picture.svg and repr(picture) == picture.text
    assert "0x" not in picture.text
    picture.save(tmp_path / "p.svg")
    assert (tmp_path / "p.svg").read_text(encoding="utf-8") == picture.svg + "\n"


def test_coordinates_are_rounded_to_one_decimal():
    import re
    ex = running_example()
    svg = attention_lines(ex.tokens, attention_trace(ex.x, ex.weights).attention).svg
    for number in re.findall(r' (?:x1|y1|x2|y2|x|y|width|height|stroke-width|points)="(-?[0-9.]+)"', svg):
        assert len(number.partition(".")[2]) <= 1, number


def test_the_same_numbers_draw_the_same_picture():
    assert pipeline(running_example()).svg == pipeline(running_example()).svg


def test_committed_pipeline_svg_is_what_the_module_draws():
    committed = (ROOT / "docs" / "pipeline.svg").read_text(encoding="utf-8")
    assert committed == pipeline(running_example()).svg + "\n", "redraw: python -m mha_lists.teaching.pictures docs/pipeline.svg"


def test_the_command(tmp_path):
    out = tmp_path / "p.svg"
    run = subprocess.run([sys.executable, "-m", "mha_lists.teaching.pictures", str(out)], capture_output=True, text=True)
    assert run.returncode == 0 and out.read_text(encoding="utf-8") == pipeline(running_example()).svg + "\n"
    bad = subprocess.run([sys.executable, "-m", "mha_lists.teaching.pictures"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_query_key_arrows_has_a_size_limit():
    keys = [f"k{j}" for j in range(MAX_TOKENS + 1)]
    with pytest.raises(ShapeError, match=f"query_key_arrows: K has {MAX_TOKENS + 1} keys; at most {MAX_TOKENS}"):
        query_key_arrows([[1, 0]], [[1, 0]] * (MAX_TOKENS + 1), ["q"], query=0, key_tokens=keys)
