"""mha_lists: multi-head attention by hand, with nothing but Python lists.

A matrix is a list of rows. X is (seq_len, d_model), one row per token. Every
weight is (d_in, d_out) and applied as ``matmul(X, W)`` -- W_O included.

===================================  =================================================
Lists as matrices (matrix.py)        shape, dot, matmul, transpose, add, add_row,
                                     scale, split_heads, concat_heads, split_rows,
                                     ShapeError, Matrix, Vector
Weights (weights.py)                 MHAWeights, init_mha_weights, init_matrix,
                                     INIT_SCHEMES, derive_rng, parameter_count
Attention (attention.py)             softmax, softmax_rows, entropy, causal_mask,
                                     padding_mask, length_mask, combine_masks,
                                     attention_trace, multi_head_attention,
                                     AttentionTrace, kv_head_for, decode_step,
                                     KVCache, MultiplyAddCounter
Running example (example.py)         VOCAB, SENTENCE, running_example, tokenize,
                                     encode, embedding_table, embed, Example
Display (display.py)                 format_matrix, print_matrix, format_number,
                                     heatmap, attention_heatmap, bar_chart, show
Shapes and strides (strided.py)      Strided, tensor, view, transpose_dims,
                                     contiguous, is_contiguous, tolist, element,
                                     storage_index, row_major_strides,
                                     strided_split_heads, strided_merge_heads
===================================  =================================================

``python -m mha_lists`` prints the whole trace of the running example;
``python -m mha_lists.bench`` measures matmul and one forward pass.
"""

from .attention import (
    AttentionTrace,
    KVCache,
    Mask,
    MultiplyAddCounter,
    attention_trace,
    causal_mask,
    combine_masks,
    decode_step,
    entropy,
    kv_head_for,
    length_mask,
    multi_head_attention,
    padding_mask,
    softmax,
    softmax_rows,
)
from .display import (
    attention_heatmap,
    bar_chart,
    format_matrix,
    format_number,
    heatmap,
    print_matrix,
    show,
)
from .example import (
    D_MODEL,
    EMBED_STD,
    MAX_LEN,
    NUM_HEADS,
    PAD_ID,
    SEED,
    SENTENCE,
    VOCAB,
    Example,
    embed,
    embedding_table,
    encode,
    running_example,
    tokenize,
)
from .matrix import (
    Matrix,
    ShapeError,
    Vector,
    add,
    add_row,
    concat_heads,
    dot,
    matmul,
    scale,
    shape,
    split_heads,
    split_rows,
    transpose,
)
from .strided import (
    Strided,
    contiguous,
    element,
    is_contiguous,
    row_major_strides,
    storage_index,
    strided_merge_heads,
    strided_split_heads,
    tensor,
    tolist,
    transpose_dims,
    view,
)
from .weights import (
    INIT_SCHEMES,
    MHAWeights,
    derive_rng,
    init_matrix,
    init_mha_weights,
    parameter_count,
)

__all__ = [
    # matrix
    "Matrix", "Vector", "ShapeError", "shape", "dot", "matmul", "transpose", "add", "add_row",
    "scale", "split_heads", "concat_heads", "split_rows",
    # weights
    "MHAWeights", "init_mha_weights", "init_matrix", "INIT_SCHEMES", "derive_rng", "parameter_count",
    # attention
    "Mask", "softmax", "softmax_rows", "entropy", "causal_mask", "padding_mask", "length_mask",
    "combine_masks", "attention_trace", "multi_head_attention", "AttentionTrace", "kv_head_for",
    "decode_step", "KVCache", "MultiplyAddCounter",
    # running example
    "VOCAB", "SENTENCE", "D_MODEL", "EMBED_STD", "MAX_LEN", "NUM_HEADS", "SEED", "PAD_ID", "running_example", "tokenize",
    "encode", "embedding_table", "embed", "Example",
    # display
    "format_matrix", "print_matrix", "format_number", "heatmap", "attention_heatmap", "bar_chart", "show",
    # shapes and strides
    "Strided", "tensor", "view", "transpose_dims", "contiguous", "is_contiguous", "tolist",
    "element", "storage_index", "row_major_strides", "strided_split_heads", "strided_merge_heads",
]
