"""The pictures: valid SVG, drawn from the numbers given, with the marks a reader needs."""

import copy
import math
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from bad_inputs import assert_refused_unchanged, assert_template

from mha_lists import causal_mask
from mha_lists.core.attention import attention_trace
from mha_lists.core.checks import ShapeError
from mha_lists.teaching.lists_as_matrices import matmul
from mha_lists.teaching.example import running_example
from mha_lists.teaching.paper import paper_example
from mha_lists.teaching.pictures import (HEAD_STYLES, MAX_HEADS, MAX_TOKENS, Picture, attention_lines,
                                         induction_circuit, line_chart, pipeline, query_key_arrows)

ROOT = pathlib.Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
OVERFLOW = "are too large: a product or sum overflowed float64 (largest about 1.8e308); scale the inputs down"

# Each message of pictures.py, pinned once; the tests below match only its start (function and argument).
MESSAGES = {
    "path type": "save: path must be a str or a Path, got {type}",
    "path nul": "save: path is {value}; a file name cannot hold a NUL character",
    "path not a file": "save: path {value} is not a regular file (a folder, a pipe or a device); give the name of a "
                       "file to write",
    "path folder": "save: path {value} is in a folder that does not exist",
    "path cannot write": "save: path {value} cannot be written: {reason}",
    "labels type": "{func}: {name} must be a list of str, got {value}",
    "labels empty": "{func}: {name} is empty; give at least one",
    "labels count": "{func}: {name} has {n} entries; it needs one per row ({rows})",
    "plane": "{func}: {name} is {shape}; the picture is a plane, so it needs d_k = 2 (two columns), got {d}",
    "example type": "pipeline: ex must be the running example (ex = running_example(...)), got {type}",
    "example tokens": "pipeline: ex.tokens must be a non-empty list of str, got {value}",
    "example length": "pipeline: the sentence has {T} tokens; at most 32 fit in one picture (MAX_TOKENS)",
    "example rows": "pipeline: ex.x has {rows} rows but ex.tokens has {T}; one row per token",
    "example d_model": "pipeline: ex.x has {d} columns but ex.weights expect d_model = {d_model}",
    "weights type": "attention_lines: weights must be one (T, T_k) matrix or a list of them (one per head), got {type}",
    "weights heads": "attention_lines: {H} heads; at most 16 fit in one picture (MAX_HEADS)",
    "weights shape": "attention_lines: {label} is {shape}; every head must be {expected} (one row per query token, "
                     "one column per key token)",
    "weights range": "attention_lines: {label}[{i}][{j}] is {value}; attention weights must be from 0 to 1",
    "lines tokens": "attention_lines: {name} has {n} tokens; at most 32 fit in one picture (MAX_TOKENS)",
    "lines heads": "attention_lines: heads has {n} names for {H} heads; give one name per head",
    "arrows key_tokens": "query_key_arrows: K has {T_k} rows but there are {T} tokens; give key_tokens, one per row "
                         "of K",
    "arrows keys": "query_key_arrows: K has {T_k} keys; at most 32 fit in one picture (MAX_TOKENS)",
    "arrows query": "query_key_arrows: query is {value}; it must be a query row from 0 to {last}",
    "arrows overflow": "query_key_arrows: the scores q·k " + OVERFLOW,
    "chart points": "line_chart: values has {n} entries; at most 10000 (MAX_POINTS)",
    "chart x_values count": "line_chart: x_values has {n} entries for {m} values; give one x per value",
    "chart x_values order": "line_chart: x_values must increase from left to right",
    "chart overflow": "line_chart: the {name} " + OVERFLOW,
    "marks type": "line_chart: marks must be a dict {{x: label}}, got {type}",
    "marks count": "line_chart: marks has {n} entries; at most 10000 (MAX_POINTS)",
    "marks x": "line_chart: marks has x = {x}; marks must be numbers from {first} to {last}",
    "marks label": "line_chart: marks[{x}] must be a str label, got {value}",
    "circuit tokens": "induction_circuit: tokens has {T} tokens; at most 32 fit in one picture (MAX_TOKENS)",
    "circuit matrix": "induction_circuit: {name} must be one head's (T, T) attention matrix, got {value}",
    "circuit query": "induction_circuit: query is {value}; it must be a position from 0 to {last}",
    "circuit unit": "induction_circuit: unit must be a str, got {value} ({type})",
}


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


def test_two_heads_get_a_panel_each_and_one_head_one_panel():
    ex = running_example()
    two = attention_trace(ex.x, ex.weights).attention
    root = parse(attention_lines(ex.tokens, two))
    assert texts(root).count("<EOS>") == 4 and {"head 0", "head 1"} <= set(texts(root))
    assert texts(parse(attention_lines(ex.tokens, two[0]))).count("<EOS>") == 2  # one head: one panel


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
    assert texts(parse(picture)).count("<BOS>") == 2 * len(trace.attention)  # once per column of each head's panel


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
     r"^attention_lines: weights\[1\] is 2x1"),
    ((["a"], [[1.0, 0.0], [0.5, 0.5]]), {}, ShapeError, "^attention_lines: weights is 2x2"),
    ((["a", "b"], [[1.5, -0.5], [0.5, 0.5]]), {}, ValueError, r"^attention_lines: weights\[0\]\[0\] is 1.5"),
    ((["a"], [[1.0]]), {"heads": ["x", "y"]}, ShapeError, "^attention_lines: heads has 2 names"),
    (("a b", [[1.0]]), {}, TypeError, "^attention_lines: tokens must be"),
    ((["a"], [[[1.0]]] * (MAX_HEADS + 1)), {}, ShapeError, "^attention_lines: 17 heads"),
    ((["a"] * (MAX_TOKENS + 1), [[1.0] + [0.0] * MAX_TOKENS] * (MAX_TOKENS + 1)), {}, ShapeError,
     "^attention_lines: tokens has 33 tokens"),
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
    ([[1, 2, 3]], [[1, 2, 3]], ["a"], 0, ShapeError, "^query_key_arrows: Q is 1x3"),
    ([[1, 2]], [[1, 2, 3]], ["a"], 0, ShapeError, "^query_key_arrows: K is 1x3"),
    ([[1, 2]], [[1, 2]], ["a"], 1, ValueError, "^query_key_arrows: query is 1"),
    ([[1, 2]], [[1, 2]], ["a", "b"], 0, ShapeError, "^query_key_arrows: tokens has 2 entries"),
    ([[1, 2]], [[1, 2]], ["a"], True, TypeError, "^query_key_arrows: query must be an int"),
    ([[1, 2]], [[1, 2], [3, 4]], ["a"], 0, ShapeError, "^query_key_arrows: K has 2 rows"),
    ([[1, 2]], [[1, 2]] * (MAX_TOKENS + 1), ["a"], 0, ShapeError, "^query_key_arrows: K has 33 rows"),
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
    ({"values": []}, ShapeError, "^line_chart: values must be a non-empty list of numbers"),
    ({"values": [1.0, float("nan")]}, ValueError, r"^line_chart: values\[1\] is nan"),
    ({"values": [1.0, 2.0], "marks": {5: "x"}}, ValueError, "^line_chart: marks has x = 5"),
    ({"values": [1.0, 2.0], "x_values": [1, 1]}, ValueError, "^line_chart: x_values must increase"),
    ({"values": [0.0] * 10_001}, ShapeError, "^line_chart: values has 10001 entries"),
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
    with pytest.raises(TypeError, match="^pipeline: ex must be the running example"):
        pipeline([[1.0]])
    long = running_example(sentence=" ".join(["I"] * (MAX_TOKENS + 1)))
    with pytest.raises(ShapeError, match=f"^pipeline: the sentence has {MAX_TOKENS + 1} tokens"):
        pipeline(long)


def test_pipeline_draws_any_number_of_heads():
    # heads 0, 1 and the last are drawn; the last of 32 has a style of its own (it was an IndexError)
    picture = pipeline(running_example(d_model=32, num_heads=32))
    assert "head 31" in texts(parse(picture)) and "32 heads" in repr(picture)


def test_pipeline_draws_the_weights_of_its_mask():
    ex = running_example()
    cells = [e for e in parse(pipeline(ex, mask=causal_mask(ex.seq_len))).iter(f"{SVG}rect") if e.get("fill-opacity")]
    assert len(cells) == ex.num_heads * 15  # 5 + 4 + ... + 1 keys each query may read


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
    missing = subprocess.run([sys.executable, "-m", "mha_lists.teaching.pictures", str(tmp_path / "no" / "p.svg")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("pictures: save: path ")
    assert len(missing.stderr.strip().splitlines()) == 1 and not (tmp_path / "no").exists()


def test_query_key_arrows_has_a_size_limit():
    keys = [f"k{j}" for j in range(MAX_TOKENS + 1)]
    with pytest.raises(ShapeError, match=f"^query_key_arrows: K has {MAX_TOKENS + 1} keys"):
        query_key_arrows([[1, 0]], [[1, 0]] * (MAX_TOKENS + 1), ["q"], query=0, key_tokens=keys)


def test_a_picture_is_saved_to_a_path(tmp_path):
    picture = line_chart([1.0, 0.5], title="loss", x_label="step", y_label="loss")
    with pytest.raises(TypeError, match="^save: path must be"):
        picture.save(5)
    picture.save(str(tmp_path / "loss.svg"))
    assert (tmp_path / "loss.svg").read_text(encoding="utf-8") == picture.svg + "\n"


def test_pictures_do_not_change_their_arguments():
    ex = running_example()
    before = copy.deepcopy(ex)
    pipeline(ex, mask=causal_mask(ex.seq_len))
    assert ex == before
    Q, K, tokens = [[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], ["a"]
    query_key_arrows(Q, K, tokens, query=0, key_tokens=["x", "y"])
    assert (Q, K, tokens) == ([[1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0]], ["a"])
    values, marks = [1.0, 0.5], {1: "end"}
    line_chart(values, title="t", x_label="x", y_label="y", marks=marks)
    assert (values, marks) == ([1.0, 0.5], {1: "end"})


# === The edge of float64: drawn, or refused with a named error (each of these used to crash) ===


def test_values_past_2_to_the_53_still_draw():
    # 1e17 - 1 is 1e17: a flat line there, or one x there, used to divide by zero
    flat = line_chart([1e17, 1e17], title="t", x_label="x", y_label="y")
    ys = {p.split(",")[1] for p in parse(flat).find(f"{SVG}polyline").get("points").split()}
    assert ys == {"155"}, "a flat line in the middle of the plot (40 + 230 / 2)"
    one = line_chart([2.0], title="t", x_label="x", y_label="y", x_values=[1e17], marks={1e17: "here"})
    assert parse(one).find(f"{SVG}polyline").get("points") == "70,155"
    assert "nan" not in flat.svg + one.svg and "inf" not in flat.svg + one.svg


def test_a_span_past_float64_is_refused_even_between_ints():
    # 10**308 - (-10**308) is an int too large for a float: it used to raise a raw OverflowError
    with pytest.raises(ValueError, match="^line_chart: the values are too large"):
        line_chart([10**308, -10**308], title="t", x_label="x", y_label="y")
    with pytest.raises(ValueError, match="^line_chart: the x_values are too large"):
        line_chart([1.0, 2.0], title="t", x_label="x", y_label="y", x_values=[-10**308, 10**308])


def test_values_at_the_edge_of_float64_still_draw():
    arrows = query_key_arrows([[1e-320, 0.0]] * 2, [[1e-320, 0.0]] * 2, ["a", "b"], query=0)
    assert arrows.text.endswith("wins: a, b") and "nan" not in arrows._repr_svg_()
    big = line_chart([1e308, -1e308 / 2], title="t", x_label="x", y_label="y")
    assert "nan" not in big.svg and "inf" not in big.svg


def test_a_query_out_of_range_is_a_value_error_naming_the_range():
    for query in (-1, 2, 10**50):  # -1 used to raise IndexError
        with pytest.raises(ValueError, match=r"^query_key_arrows: query is .*; it must be a query row from 0 to 1$"):
            query_key_arrows([[1, 0], [0, 1]], [[1, 0], [0, 1]], ["a", "b"], query=query)


def test_scores_too_large_for_a_float_are_named():
    for Q, K in [([[1e200, 1e200]], [[1e200, 1e200]]), ([[10**200, 0]], [[10**200, 0]])]:  # float, then int products
        with pytest.raises(ValueError, match="^query_key_arrows: the scores q·k are too large"):
            query_key_arrows(Q, K, ["a"], query=0)
    with pytest.raises(ValueError, match=r"^query_key_arrows: Q\[0\]\[0\] is an int of 401 digits"):
        query_key_arrows([[10**400, -10**400]], [[1, 0]], ["a"], query=0)  # they cancel in a quick sum


def test_save_refuses_what_is_not_a_file_to_write(tmp_path):
    picture = line_chart([1.0], title="t", x_label="x", y_label="y")
    os.mkfifo(tmp_path / "pipe.svg")  # writing to a pipe waits for a reader: it used to hang
    for path in (tmp_path / "pipe.svg", tmp_path, tmp_path / "missing" / "p.svg", "a\0b.svg", tmp_path / ("y" * 300)):
        with pytest.raises(ValueError, match="^save: path"):
            picture.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe.svg"]


def test_a_file_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(pathlib.Path, "write_text", refuse)
    with pytest.raises(ValueError, match=r"^save: path .* cannot be written: Permission denied$"):
        PICTURE.save(tmp_path / "p.svg")


# === The messages, each once, word for word ===


EX = running_example()
PICTURE = line_chart([1.0], title="t", x_label="x", y_label="y")
CHART = dict(title="t", x_label="x", y_label="y")
MESSAGE_CASES = [
    ("path type", lambda: PICTURE.save(5), TypeError, dict(type="int")),
    ("path nul", lambda: PICTURE.save("a\0b.svg"), ValueError, dict(value="'a\\x00b.svg'")),
    ("path not a file", lambda: PICTURE.save("/"), ValueError, dict(value="'/'")),
    ("path folder", lambda: PICTURE.save("/no/such/folder/p.svg"), ValueError, dict(value="'/no/such/folder/p.svg'")),
    ("path cannot write", lambda: PICTURE.save("/tmp/" + "y" * 300), ValueError,
     dict(value="'/tmp/" + "y" * 50 + " ...", reason="File name too long")),
    ("labels type", lambda: attention_lines(["a"], [[1.0]], heads="h"), TypeError,
     dict(func="attention_lines", name="heads", value="'h'")),
    ("labels type", lambda: query_key_arrows([[1, 0]], [[1, 0]], [1], query=0), TypeError,
     dict(func="query_key_arrows", name="tokens", value="[1]")),
    ("labels empty", lambda: attention_lines([], [[1.0]]), ShapeError, dict(func="attention_lines", name="tokens")),
    ("labels count", lambda: query_key_arrows([[1, 2]], [[1, 2]], ["a"], query=0, key_tokens=["a", "b"]), ShapeError,
     dict(func="query_key_arrows", name="key_tokens", n=2, rows=1)),
    ("plane", lambda: query_key_arrows([[1, 2, 3]], [[1, 2]], ["a"], query=0), ShapeError,
     dict(func="query_key_arrows", name="Q", shape="1x3", d=3)),
    ("example type", lambda: pipeline([[1.0]]), TypeError, dict(type="list")),
    ("example tokens", lambda: pipeline(EX._replace(tokens="I like")), TypeError, dict(value="'I like'")),
    ("example length", lambda: pipeline(EX._replace(tokens=["I"] * 33)), ShapeError, dict(T=33)),
    ("example rows", lambda: pipeline(EX._replace(x=EX.x[:3])), ShapeError, dict(rows=3, T=5)),
    ("example d_model", lambda: pipeline(EX._replace(x=[row[:8] for row in EX.x])), ShapeError,
     dict(d=8, d_model=16)),
    ("weights type", lambda: attention_lines(["a"], "w"), TypeError, dict(type="str")),
    ("weights heads", lambda: attention_lines(["a"], [[[1.0]]] * 17), ShapeError, dict(H=17)),
    ("weights shape", lambda: attention_lines(["a", "b"], [[[1.0, 0.0], [0.5, 0.5]], [[1.0], [1.0]]]), ShapeError,
     dict(label="weights[1]", shape="2x1", expected="2x2")),
    ("weights range", lambda: attention_lines(["a", "b"], [[1.0, 0.0], [1.5, -0.5]]), ValueError,
     dict(label="weights", i=1, j=0, value=1.5)),
    ("lines tokens", lambda: attention_lines(["q"], [[1.0] + [0.0] * 32], key_tokens=["k"] * 33), ShapeError,
     dict(name="key_tokens", n=33)),
    ("lines heads", lambda: attention_lines(["a"], [[1.0]], heads=["x", "y"]), ShapeError, dict(n=2, H=1)),
    ("arrows key_tokens", lambda: query_key_arrows([[1, 2]], [[1, 2], [3, 4]], ["a"], query=0), ShapeError,
     dict(T_k=2, T=1)),
    ("arrows keys", lambda: query_key_arrows([[1, 0]], [[1, 0]] * 33, ["q"], query=0, key_tokens=["k"] * 33),
     ShapeError, dict(T_k=33)),
    ("arrows query", lambda: query_key_arrows([[1, 2]], [[1, 2]], ["a"], query=-1), ValueError, dict(value=-1, last=0)),
    ("arrows overflow", lambda: query_key_arrows([[1e200, 1e200]], [[1e200, 1e200]], ["a"], query=0), ValueError, {}),
    ("chart points", lambda: line_chart([0.0] * 10_001, **CHART), ShapeError, dict(n=10001)),
    ("chart x_values count", lambda: line_chart([1.0, 2.0], x_values=[0], **CHART), ShapeError, dict(n=1, m=2)),
    ("chart x_values order", lambda: line_chart([1.0, 2.0], x_values=[1, 0], **CHART), ValueError, {}),
    ("chart overflow", lambda: line_chart([1e308, -1e308], **CHART), ValueError, dict(name="values")),
    ("marks type", lambda: line_chart([1.0], marks=[0], **CHART), TypeError, dict(type="list")),
    ("marks count", lambda: line_chart([1.0, 2.0], marks={x / 10_001: "m" for x in range(10_001)}, **CHART),
     ShapeError, dict(n=10001)),
    ("marks x", lambda: line_chart([1.0, 2.0], marks={5: "x"}, **CHART), ValueError, dict(x=5, first=0, last=1)),
    ("marks x", lambda: line_chart([1.0, 2.0], x_values=[0.5, 2.5], marks={"a": "x"}, **CHART), ValueError,
     dict(x="'a'", first=0.5, last=2.5)),
    ("marks label", lambda: line_chart([1.0, 2.0], marks={1: 2}, **CHART), TypeError, dict(x=1, value=2)),
    ("circuit tokens", lambda: induction_circuit(["a"] * 33, [[1.0] * 33] * 33, [[1.0] * 33] * 33, 0), ShapeError,
     dict(T=33)),
    ("circuit matrix", lambda: induction_circuit(["a"], [1.0], [[1.0]], 0), TypeError, dict(name="previous", value="[1.0]")),
    ("circuit matrix", lambda: induction_circuit(["a"], [[1.0]], [[[1.0]], [[1.0]]], 0), TypeError,
     dict(name="induction", value="[[[1.0]], [[1.0]]]")),  # a list of heads, not one head
    ("circuit query", lambda: induction_circuit(["a", "b"], [[1, 0], [1, 0]], [[1, 0], [1, 0]], 2), ValueError,
     dict(value=2, last=1)),
    ("circuit unit", lambda: induction_circuit(["a"], [[1.0]], [[1.0]], 0, unit=1), TypeError, dict(value=1, type="int")),
]


@pytest.mark.parametrize("key, call, error, fields", MESSAGE_CASES, ids=[case[0] for case in MESSAGE_CASES])
def test_each_message_is_its_template(key, call, error, fields):
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def test_every_template_is_tried():
    assert {case[0] for case in MESSAGE_CASES} == set(MESSAGES)


# === Bad input: a named error, one short line, the arguments unchanged ===

NAN, INF = float("nan"), float("inf")
LONG = "x" * 10_000
BAD_CALLS = [  # (name the message must start with, function, arguments, keyword arguments)
    *[("pipeline", pipeline, (ex,), {}) for ex in (
        None, EX._replace(tokens=[LONG, 5]), EX._replace(tokens=[]), EX._replace(x=[[NAN] * 16] * 5),
        EX._replace(x=[[1e200] * 16] * 5), EX._replace(weights=None),
        EX._replace(weights=EX.weights._replace(W_O=[[1.0]])),
        EX._replace(x=[[10**400, -10**400] + [0.0] * 14] * 5))],
    *[("pipeline", pipeline, (EX,), {"mask": mask}) for mask in (
        causal_mask(3), [[True] * 5] * 4 + [[False] * 5], [[1] * 5] * 5, "mask", [[LONG] * 5] * 5)],
    *[("attention_lines", attention_lines, args, kwargs) for args, kwargs in [
        ((None, [[1.0]]), {}), ((LONG, [[1.0]]), {}), (([LONG, 5], [[1.0]]), {}), ((["a"], None), {}),
        ((["a"], [[NAN]]), {}), ((["a"], [[INF]]), {}), ((["a"], [[True]]), {}), ((["a"], [["x"]]), {}),
        ((["a"], [[10**400]]), {}), ((["a"], [[1.0]]), {"heads": [LONG, 5]}), ((["a"], [[1.0]]), {"title": 5}),
        ((["a"], [[1.0]]), {"key_tokens": ["a", "b"]}), ((["a"], [[1.0]]), {"key_tokens": []}),
        ((["a"], [[[1.0]], [[1.0, 0.0]]]), {}), ((["a"], [[1.0]]), {"heads": []})]],
    *[("query_key_arrows", query_key_arrows, args, kwargs) for args, kwargs in [
        ((None, [[1, 0]], ["a"]), {"query": 0}), (([[1, 0]], None, ["a"]), {"query": 0}),
        (([[NAN, 0]], [[1, 0]], ["a"]), {"query": 0}), (([[1, 0]], [[1, 0]], ["a"]), {"query": 1.0}),
        (([[1, 0]], [[1, 0]], ["a"]), {"query": None}), (([[1, 0]], [[1, 0]], ["a"]), {"query": LONG}),
        (([[1, 0]], [[1, 0]], ["a"]), {"query": 10**400}), (([[1, 0]], [[1, 0]], ["a"]), {"query": -10**5000}),
        (([[1, 0]], [[1, 0]], ["a"]), {"query": 0, "title": 5}), (([[1, 0]], [[1, 0]], LONG), {"query": 0}),
        (([[10**200, 0]], [[10**200, 0]], ["a"]), {"query": 0}),
        (([[1, 0]], [[10**400, -10**400]], ["a"]), {"query": 0}),
        (([[1, 0]], [[1, 0], [0, 1]], ["a"]), {"query": 0, "key_tokens": [LONG]})]],
    *[("line_chart", line_chart, (values,), CHART) for values in (
        None, [], [NAN], [INF], ["a"], [True], [[1.0]], [10**400], LONG, [10**308, -10**308], [1e308, -1e308])],
    *[("line_chart", line_chart, ([1.0, 2.0],), {**CHART, **kwargs}) for kwargs in (
        {"title": None}, {"x_label": 5}, {"y_label": [LONG]}, {"x_values": [0, NAN]}, {"x_values": [1, 0]},
        {"x_values": [0]}, {"x_values": LONG}, {"x_values": [-1e308, 1e308]}, {"marks": {LONG: "x"}},
        {"marks": {0: LONG * 0 or 5}}, {"marks": {NAN: "x"}}, {"marks": {INF: "x"}}, {"marks": {10**400: "x"}},
        {"marks": [(0, "x")]}, {"marks": {0: [LONG]}})],
    *[("save", Picture.save, (PICTURE, path), {}) for path in (None, 5, [LONG], "/", "/no/such/folder/p.svg", "\0")],
    *[("Picture", Picture, args, {}) for args in ((None, "text"), ("<svg/>", 5), ("<svg/>", [LONG]))],
]


@pytest.mark.parametrize("name", sorted({case[0] for case in BAD_CALLS}))
def test_bad_input_gets_a_short_named_error_and_changes_nothing(name):
    assert_refused_unchanged(name, BAD_CALLS, (ShapeError, ValueError, TypeError))


# === block_diagram: the block around attention ===

from mha_lists.teaching.block import BlockWeights, encoder_layer  # noqa: E402
from mha_lists.teaching.pictures import block_diagram  # noqa: E402
from mha_lists.teaching.weights import derive_rng  # noqa: E402


def example_block(ex, d_ff_per_d=4, seed=None):
    d = len(ex.x[0])
    rng = derive_rng(ex.seed if seed is None else seed, "test/block_diagram")
    draw = lambda r, c: [[rng.gauss(0, c ** -0.5) for _ in range(c)] for _ in range(r)]  # noqa: E731
    return BlockWeights(ex.weights, draw(d, d_ff_per_d * d), [0.0] * (d_ff_per_d * d), draw(d_ff_per_d * d, d),
                        [0.0] * d, [1.0] * d, [0.0] * d, [1.0] * d, [0.0] * d)


@pytest.mark.parametrize("norm_first", [False, True])
def test_block_diagram_draws_the_layers_own_steps(norm_first):
    ex = running_example()
    w = example_block(ex)
    picture = block_diagram(ex.x, w, norm_first=norm_first)
    root = parse(picture)
    names = ["x", "LayerNorm 1", "attention", "+", "LayerNorm 2", "feed-forward", "+"] if norm_first else \
        ["x", "attention", "+", "LayerNorm 1", "feed-forward", "+", "LayerNorm 2"]
    shown = [t for t in texts(root) if t in set(names)]
    assert shown == names  # one box per step, in the order encoder_layer computes them
    assert "hidden 5×64" in " ".join(texts(root)) and texts(root).count("residual") == 2
    out = encoder_layer(ex.x, w, norm_first=norm_first)  # the last box is the layer's output
    rms = math.sqrt(math.fsum(v * v for row in out for v in row) / (len(out) * len(out[0])))
    assert picture.text.endswith(f"(rms {rms:.2f})")


def test_block_diagram_follows_a_learners_edit():
    ex = running_example(sentence="<BOS> I like <EOS>", d_model=8, num_heads=4, seed=3)
    a, b = block_diagram(ex.x, example_block(ex, 2)), block_diagram(ex.x, example_block(ex, 2, seed=99))
    assert "x 4×8" in a.text and "hidden 4×16" in a.text
    assert a.text != b.text  # other weights, other sizes


def test_block_diagram_names_its_arguments():
    ex = running_example()
    w = example_block(ex)
    for call, error, start in [(lambda: block_diagram(ex.x, ex.weights), TypeError, "block_diagram: weights must be"),
                               (lambda: block_diagram([row[:3] for row in ex.x], w), ShapeError, "block_diagram: "),
                               (lambda: block_diagram(ex.x, w, activation="silu"), ValueError,
                                "block_diagram: activation is 'silu'"),
                               (lambda: block_diagram(ex.x, w, mask=[[True]]), ShapeError, "block_diagram: mask is 1x1")]:
        with pytest.raises(error, match=f"^{start}"):
            call()


def test_line_chart_has_round_ticks_and_guides():
    values = [0.000217, 0.0001, 1.53e-05]  # ticks once read 1.53e-05 and 0.000217
    root = parse(line_chart(values, title="loss", x_label="step", y_label="loss"))
    shown = [t for t in texts(root) if t[0].isdigit()]
    assert {"0.0000", "0.0001", "0.0002", "0.0003"} <= set(shown) and "1.53e-05" not in shown
    guessing = math.log(6)
    picture = line_chart([1.9, 0.5, 0.05], title="loss", x_label="step", y_label="loss",
                         guides={guessing: "guessing: ln 6"})
    root = parse(picture)
    assert "guessing: ln 6" in texts(root) and picture.text.endswith("guides: guessing: ln 6 at 1.7918")
    assert {"0.0", "0.5", "1.0", "1.5", "2.0"} <= set(texts(root))  # the range covers the guide and the values
    for bad, error in (([1], TypeError), ({"1": "a"}, TypeError), ({math.nan: "a"}, ValueError), ({1.0: 5}, TypeError)):
        with pytest.raises(error, match="^line_chart: "):
            line_chart([1.0, 2.0], title="t", x_label="x", y_label="y", guides=bad)
    with pytest.raises(ValueError, match="^line_chart: the values and guides are too large"):
        line_chart([1.0, 2.0], title="t", x_label="x", y_label="y", guides={-1.7e308: "a", 1.7e308: "b"})


# === The induction circuit, drawn on the sentence ===

# "abxab": a previous-token head (each token reads the one before it; the first reads itself) and an induction
# head whose second 'a' (position 3) reads the 'b' at 1, which followed the first 'a'.
ABXAB = list("abxab")
PREVIOUS = [[1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 0, 1, 0]]
INDUCTION = [[1, 0, 0, 0, 0]] * 3 + [[0, 0.9, 0, 0.1, 0], [0, 0, 0, 0, 1]]


def test_the_circuit_follows_the_induction_head_then_the_previous_token_head():
    picture = induction_circuit(ABXAB, PREVIOUS, INDUCTION, 3)
    root = parse(picture)
    assert "at 3 'a' reads 1 'b' most (0.90)" in picture.text and "at 1 'b' reads 0 'a' most (1.00)" in picture.text
    assert picture.text.endswith("so the circuit predicts 'b'")
    shown = texts(root)
    assert "induction head: 'a' reads 'b' (0.90)" in shown and "previous-token head: 'b' reads 'a' (1.00)" in shown
    assert len(root.findall(f"{SVG}path")) == 2  # two arcs: one per head
    boxes = [r for r in root.iter(f"{SVG}rect") if r.get("width") == "26"]
    assert len(boxes) == 5 and [b.get("fill") for b in boxes][:4] == ["#e3e3e3", "#fbd9c4", "#ffffff", "#cfe3f5"]


def test_the_circuit_says_when_there_is_no_copy_to_make():
    # at 4 'b' the induction head reads itself; the previous-token head there reads 'a', not 'b'
    picture = induction_circuit(ABXAB, PREVIOUS, INDUCTION, 4)
    assert picture.text.endswith("3 does not hold the query's token 'b' before 4: no copy to hand on here")
    assert "the previous-token head at 'b' reads 'a', not 'b': no copy here" in texts(parse(picture))
    # A tester's sentence of 'a's and spaces: where the previous-token head at k reads k itself, the verdict
    # said "the token before ' ' is not 'a'", though an 'a' stood before it. It says what the head read.
    itself = [row[:] for row in PREVIOUS]
    itself[1] = [0, 1, 0, 0, 0]  # at 1 'b', the previous-token head reads itself
    picture = induction_circuit(ABXAB, itself, INDUCTION, 3)  # at 3 'a', the induction head reads 1 'b'
    assert "the previous-token head at 'b' reads itself, not the token before it: no copy here" in texts(parse(picture))


def test_the_circuit_names_spaces_and_keeps_its_arguments():
    tokens, previous, induction = list("a a"), [[1, 0, 0], [1, 0, 0], [0, 1, 0]], [[1, 0, 0], [1, 0, 0], [0, 1, 0]]
    before = copy.deepcopy((tokens, previous, induction))
    picture = induction_circuit(tokens, previous, induction, 2, title="mine")
    assert "'␣'" in picture.text and parse(picture).find(f"{SVG}title").text == "mine"
    assert (tokens, previous, induction) == before
    by_character = induction_circuit(tokens, previous, induction, 2, unit="character")
    assert "the previous-character head at 1" in by_character.text
    assert "previous-character head: '␣' reads 'a' (1.00)" in texts(parse(by_character))
    assert "previous-token" not in by_character.svg


def test_the_circuit_picture_takes_its_clearest_right_copy_when_given_no_query():
    from mha_lists.teaching.pictures import clearest_copy
    one = [1.0, 0.0, 0.0, 0.0, 0.0]
    # "abab": position 2 ('a') reads 1 ('b', which followed the first 'a', and comes next) at 0.9;
    # position 3 ('b') reads 2 ('a', which followed the first 'b') at 0.6: no token comes after it to check
    induction = [one[:4], one[:4], [0.05, 0.9, 0.05, 0.0], [0.1, 0.1, 0.6, 0.2]]
    assert clearest_copy(list("abab"), induction) == 2
    # "abcab": row 3 ('a') reads 1 ('b', right, 0.7); row 4 ('b') reads 2 ('c', which followed the first 'b')
    induction = [one, one, one, [0.1, 0.7, 0.1, 0.1, 0.0], [0.0, 0.1, 0.8, 0.1, 0.0]]
    assert clearest_copy(list("abcab"), induction) == 3  # row 4 reads 'c', right, but nothing follows it to check
    induction = [one, one, one, [0.7, 0.1, 0.1, 0.1, 0.0], [0.0, 0.1, 0.8, 0.1, 0.0]]
    assert clearest_copy(list("abcab"), induction) == 4  # no right guess: the last token seen before
    assert clearest_copy(list("abc"), [one[:3]] * 3) == 2  # nothing seen before: the last token
    tokens, previous = list("abab"), [one[:4], one[:4], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    induction = [one[:4], one[:4], [0.05, 0.9, 0.05, 0.0], [0.1, 0.1, 0.6, 0.2]]
    assert induction_circuit(tokens, previous, induction).text == induction_circuit(tokens, previous, induction, 2).text


def test_induction_circuit_boxes_are_wide_enough_for_their_tokens():
    """A reader saw `<unk>` spill out of its box and over its neighbour's: each box is as wide as its longest
    token needs at 14px, and a row of one-character tokens keeps its 26px squares."""
    previous = [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    induction = [[1, 0, 0, 0]] * 3 + [[0, 1, 0, 0]]

    def box_widths(tokens):
        root = ET.fromstring(induction_circuit(tokens, previous, induction, query=3).svg)
        return {float(r.get("width")) for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("stroke") == "#888888"}

    assert box_widths(list("abab")) == {26.0}
    (wide,) = box_widths(["<unk>", "a", "<unk>", "a"])
    assert wide >= 9 * len("<unk>")
