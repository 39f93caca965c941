"""mha_lists: multi-head attention by hand, with nothing but Python lists.

A matrix is a list of rows. X is (seq_len, d_model), one row per token. Every
weight is (d_in, d_out) and applied as ``matmul(X, W)`` -- W_O included.

The files follow the data's path; the names at the top level are the ones the
core notebooks use, everything else is imported from its file
(``from mha_lists.strided import view``):

=========================  ====================================================
checks.py                  ShapeError, and one checking helper per rule
matrix.py                  shape, dot, matmul, transpose, add, add_row, scale,
                           split_heads, concat_heads, split_rows; Matrix, Vector
weights.py                 MHAWeights, init_mha_weights, parameter_count,
                           init_matrix, INIT_SCHEMES, derive_rng
torch_init.py              PyTorch's default init: linear_bound,
                           mha_in_proj_bound, torch_mha_weights, ...
masks.py                   causal_mask, padding_mask, combine_masks,
                           length_mask, apply_mask; Mask
scores_to_weights.py       softmax, softmax_rows, entropy
one_head.py                attention(Q, K, V): one head, the formula
multi_head.py              multi_head_attention, attention_trace,
                           AttentionTrace, kv_head_for, linear
block.py                   around attention: layer_norm, dropout
decoding.py                decode_step, KVCache
cost.py                    multiply_adds (a function of the sizes),
                           MultiplyAddCounter
gradients.py               the backward pass: attention_backward,
                           multi_head_attention_backward, MHAGradients,
                           attention_backward_trace, softmax_backward
training.py                a toy model that learns: cross-entropy, Adam, train
example.py                 running_example, Example, VOCAB, SENTENCE, ...
display.py                 print_matrix, format_matrix, attention_heatmap,
                           heatmap, bar_chart, format_number, show
strided.py                 a tensor as flat list + shape + strides
paper.py                   attention on paper (notebook 00a): paper_example,
                           raw_scores, exp_table, table_softmax, ...
worksheet.py               python -m mha_lists.worksheet: a worksheet and
                           answer key per student; worksheet, as_json, ...
exercises.py               python -m mha_lists.exercises: check_close,
                           student copies, points
cli.py, bench.py           python -m mha_lists; python -m mha_lists.bench
site.py, site_files/       python -m mha_lists.site OUTDIR: the trace as a web
                           page that recomputes in the browser (Pyodide)
=========================  ====================================================
"""

from .checks import ShapeError
from .decoding import decode_step
from .display import attention_heatmap, format_matrix, print_matrix
from .example import running_example
from .gradients import attention_backward, multi_head_attention_backward
from .masks import causal_mask, combine_masks, padding_mask
from .matrix import add, add_row, concat_heads, dot, matmul, scale, shape, split_heads, transpose
from .multi_head import attention_trace, multi_head_attention
from .one_head import attention
from .scores_to_weights import softmax, softmax_rows
from .weights import MHAWeights, init_mha_weights, parameter_count

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
