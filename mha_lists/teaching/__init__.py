"""Around the formula: the examples the notebooks use, how to show them, and the
topics beyond one layer. Imports the core, never the tools.

=========================  ====================================================
example.py                 the running example: a sentence, embeddings, weights
paper.py                   attention on paper (notebook 00a): small integers
weights.py                 drawing weights: init_mha_weights, init schemes
display.py                 printing matrices, heatmaps, bar charts
pictures.py                pictures drawn from the live numbers (SVG): the
                           pipeline, attention lines, query/key arrows, a line chart
strided.py                 a tensor as a flat list + shape + strides (tensor;
                           t.view, t.transpose, t.contiguous as in PyTorch)
cost.py                    counting multiply-adds as products run
torch_init.py              PyTorch's default initialisation
block.py                   LayerNorm and dropout, around attention
decoding.py                one token at a time: the KV cache
training.py                a toy model that learns (cross-entropy, Adam)
induction.py               two layers of heads: an induction head, by hand and learned
=========================  ====================================================
"""
