"""The core: the formula of multi-head attention, and its backward pass.

Read it in this order; each file imports only the ones above it:

=========================  ====================================================
checks.py                  ShapeError, and the checks a public function runs on
                           entry (nothing below them checks again)
matrix.py                  a matrix as a list of rows: dot, matmul, transpose, ...
softmax_and_masks.py       scores to weights: masks, softmax
attention.py               one head (``attention``), many heads
                           (``multi_head_attention``, ``attention_trace``)
gradients.py               the backward pass of attention
=========================  ====================================================
"""
