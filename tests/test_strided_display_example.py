"""Strided tensors, the display helpers, and the running example."""

import pytest

from mha_lists import ShapeError, attention_heatmap, format_matrix, running_example, split_heads
from mha_lists.teaching.display import bar_chart, format_number, heatmap
from mha_lists.teaching.example import EMBED_STD, SENTENCE, VOCAB, embed, embedding_table, encode, tokenize
from mha_lists.teaching.strided import Strided, strided_merge_heads, strided_split_heads, tensor

# === Strided tensors ===


def test_storage_index_by_hand():
    t = tensor([[[i * 12 + j * 4 + c for c in range(4)] for j in range(3)] for i in range(2)])
    assert t.strides == (12, 4, 1) == Strided.row_major_strides((2, 3, 4))
    assert t.storage_index((1, 2, 3)) == 1 * 12 + 2 * 4 + 3 == 23
    assert t.element((1, 2, 3)) == 23


def test_transpose_swaps_strides_and_shares_data():
    t = tensor([[1, 2, 3], [4, 5, 6]])
    u = t.transpose(0, 1)
    assert u.data is t.data and u.strides == (1, 3) and u.shape == (3, 2)
    assert u.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert not u.is_contiguous()
    c = u.contiguous()
    assert c.data == [1, 4, 2, 5, 3, 6] and c.data is not t.data and c.is_contiguous()
    assert t.contiguous() is t


def test_view_needs_contiguous_and_the_same_size():
    t = tensor([1, 2, 3, 4, 5, 6])
    assert t.view((2, 3)).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert t.view((2, 3)).data is t.data
    with pytest.raises(ValueError, match=r"view: the tensor of shape \(3, 2\) with strides \(1, 3\) is not contiguous"):
        t.view((2, 3)).transpose(0, 1).view((6,))
    with pytest.raises(ShapeError, match=r"view: shape \(6,\) has 6 elements but \(4,\) has 4"):
        t.view((4,))


def test_split_and_merge_heads_round_trip_and_match_column_blocks():
    x = running_example().x
    batch = tensor([x, x[::-1]])
    heads = strided_split_heads(batch, 2)
    assert heads.shape == (2, 2, 5, 8) and heads.data is batch.data and not heads.is_contiguous()
    assert heads.tolist()[0] == split_heads(x, 2)
    merged = strided_merge_heads(heads)
    assert merged.shape == (2, 5, 16) and merged.tolist() == [x, x[::-1]]


def test_split_and_merge_are_the_pytorch_lines_written_with_the_methods():
    t = tensor([[[float(10 * i + c) for c in range(6)] for i in range(4)]])  # [1, 4, 6], 3 heads of 2
    assert strided_split_heads(t, 3) == t.view((1, 4, 3, 2)).transpose(1, 2)
    heads = strided_split_heads(t, 3).contiguous()
    assert strided_merge_heads(heads) == heads.transpose(1, 2).contiguous().view((1, 4, 6)) == t


# === Display ===


def test_format_number_and_matrix():
    assert format_number(-0.00001) == "0.0000"
    assert format_number(float("-inf")) == "-inf"
    assert format_number(False) == "0"
    text = format_matrix([[1.0, -0.5]], row_labels=["I"], col_labels=["a", "b"], digits=2, title="M")
    assert text == "M (1x2)\n      a      b\nI  1.00  -0.50"


def test_format_matrix_label_errors():
    with pytest.raises(ShapeError, match=r"format_matrix: M has 1 rows but 2 row labels were given"):
        format_matrix([[1.0]], row_labels=["a", "b"])


def test_heatmap_html_and_text():
    w = [[1.0, 0.0], [0.25, 0.75]]
    hm = attention_heatmap(w, ["I", "like"], title="weights")
    html = hm._repr_html_()
    assert html.startswith("<table") and "0.75" in html and "like" in html
    assert "rgb(33,102,255)" in html  # the weight 1.0 gets the darkest colour
    assert repr(hm).startswith("rows = queries (who looks), columns = keys (what is looked at)\nweights (2x2)")
    assert "rows = queries" in html and "weights (2x2)" in html
    assert repr(heatmap(w, title="plain")).startswith("plain (2x2)")  # a plain heatmap has no note
    assert "&lt;BOS&gt;" in heatmap([[0.5]], row_labels=["<BOS>"], col_labels=["<BOS>"])._repr_html_()


def test_bar_chart():
    chart = bar_chart(["a", "bb"], [2.0, 1.0], digits=1)
    assert repr(chart) == "a   2.0  " + "#" * 40 + "\nbb  1.0  " + "#" * 20
    assert "width:100.0%" in chart._repr_html_() and "width:50.0%" in chart._repr_html_()
    with pytest.raises(ShapeError, match="bar_chart: 1 labels for 2 values"):
        bar_chart(["a"], [1.0, 2.0])


# === The running example ===


def test_running_example_shapes_and_pinned_numbers():
    ex = running_example()
    assert ex.tokens == SENTENCE.split() and ex.ids == [1, 3, 4, 5, 2]
    assert len(ex.token_embeddings) == len(VOCAB) and len(ex.position_embeddings) == 8
    assert len(ex.x) == 5 and len(ex.x[0]) == 16
    # Pinned: a change to seeding or drawing must be deliberate (re-execute the notebooks).
    assert format_number(ex.x[0][0]) == "0.9290"
    assert format_number(ex.weights.W_Q[0][0][0]) == "-0.2188"
    assert embed(ex.ids, ex.token_embeddings, ex.position_embeddings) == ex.x


def test_embedding_tables_are_independent_streams():
    a = embedding_table(6, 16, seed=42, name="token_embedding")
    longer = embedding_table(10, 16, seed=42, name="token_embedding")
    assert longer[:6] == a
    assert running_example(num_heads=4).x == running_example().x  # weights draw from other streams
    assert EMBED_STD == 0.5


def test_tokenize_and_encode_errors():
    assert tokenize(" <BOS>  I ") == ["<BOS>", "I"]
    with pytest.raises(ValueError, match=r"encode: 'cats' is not in the vocabulary; the vocabulary is <PAD> <BOS>"):
        encode(["cats"])
    with pytest.raises(ValueError, match=r"tokenize: the sentence is empty"):
        tokenize("   ")
    with pytest.raises(ValueError, match=r"embed: ids\[0\] is 9; token ids must be ints from 0 to 5"):
        embed([9], embedding_table(6, 4, seed=0, name="t"), embedding_table(8, 4, seed=0, name="p"))
