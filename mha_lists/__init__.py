"""mha_lists: multi-head attention by hand, with nothing but Python lists.

A matrix is a list of rows. X is (seq_len, d_model), one row per token. Every
weight is (d_in, d_out) and applied as ``matmul(X, W)`` -- W_O included.

Three layers, each in its own folder; imports only point down (tools -> teaching -> core):

core/       the formula, read in one sitting, and the arithmetic it is written with
            checks.py             ShapeError; the helpers each function checks with
            matrix.py             product (matmul unchecked), joined, columns_of, finite
            softmax_and_masks.py  causal_mask, softmax, softmax_rows
            attention.py          attention (one head), multi_head_attention,
                                  attention_trace, MHAWeights; one_head and
                                  head_loop, the formula on checked arguments
            gradients.py          attention_backward, multi_head_attention_backward
teaching/   around it: the examples the notebooks use and the topics beyond one layer
            lists_as_matrices.py (notebook 00: shape, dot, matmul, transpose, add,
            add_row, scale, split_heads, concat_heads), masks.py (padding_mask,
            combine_masks), softmax_row.py (entropy, softmax's gradient),
            example.py (running_example), paper.py (notebook 00a), weights.py
            (init_mha_weights, parameter_count), display.py (print_matrix, heatmaps),
            pictures.py (SVG drawn from the live numbers),
            strided.py, cost.py, torch_init.py, block.py, decoding.py (decode_step),
            model.py (the one model that trains: embeddings, attention layers through
            the core, the unembedding, Adam), and its tasks training.py, induction.py,
            reading.py (a model that read a book, one character at a time);
            circuits.py (a head's job read from its weights: QK, OV, K-composition)
tools/      apart: commands, ``python -m mha_lists.tools.NAME``
            cli.py (``python -m mha_lists``), site.py, worksheet.py, exercises.py,
            bench.py (also ``python -m mha_lists.bench``, by the top-level bench.py),
            induction.py, read_text.py
data/       genesis.txt, the book reading.py's model read; read_text_run.json, its trained run

The names below are the ones the core notebooks use; everything else is imported
from its file (``from mha_lists.teaching.strided import tensor``).
"""

from .core.attention import MHAWeights, attention, attention_trace, multi_head_attention
from .core.checks import ShapeError
from .core.gradients import attention_backward, multi_head_attention_backward
from .teaching.lists_as_matrices import add, add_row, concat_heads, dot, matmul, scale, shape, split_heads, transpose
from .core.softmax_and_masks import causal_mask, softmax, softmax_rows
from .teaching.masks import combine_masks, padding_mask
from .teaching.decoding import decode_step
from .teaching.display import attention_heatmap, format_matrix, print_matrix
from .teaching.example import running_example
from .teaching.weights import init_mha_weights, parameter_count

__all__ = [
    # lists as matrices
    "ShapeError", "shape", "dot", "matmul", "transpose", "add", "add_row", "scale",
    "split_heads", "concat_heads",
    # weights
    "MHAWeights", "init_mha_weights", "parameter_count",
    # masks and softmax
    "causal_mask", "padding_mask", "combine_masks", "softmax", "softmax_rows",
    # attention: one head, many heads, one token at a time
    "attention", "multi_head_attention", "attention_trace", "decode_step",
    # the backward pass
    "attention_backward", "multi_head_attention_backward",
    # the running example and how to show it
    "running_example", "print_matrix", "format_matrix", "attention_heatmap",
]
