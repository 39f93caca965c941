"""The error promise on the teaching modules and the commands, swept with many bad inputs.

Every public function of ``mha_lists/teaching/`` given a bad argument raises ShapeError,
ValueError or TypeError whose message starts with the function's name; never a raw
AttributeError, IndexError, OverflowError, ZeroDivisionError, KeyError or RecursionError,
never a silent nan or inf, never a hang (sizes have limits that the message names), and
the arguments are left as they were. The commands ``python -m mha_lists`` and
``python -m mha_lists.tools.bench`` print one line on bad input and exit with 2.

Run as a script to count the clean cases, each under a time limit of its own:

    python tests/test_error_promise.py
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import random
import subprocess
import sys
from typing import Any, Callable, NamedTuple

import pytest

from mha_lists import ShapeError, attention_backward, causal_mask, padding_mask, softmax, softmax_rows
from mha_lists.core import gradients, softmax_and_masks
from mha_lists.teaching import (block, cost, decoding, display, example, induction, paper, strided, torch_init, training,
                                weights)
from mha_lists.teaching.decoding import KVCache
from mha_lists.teaching.strided import Strided
from mha_lists.teaching.training import AdamState, Model
from mha_lists.tools import bench, cli

NAN, INF = math.nan, math.inf
R = random.Random(0)
GOOD_W = weights.init_mha_weights(4, 2, seed=0)  # d_model 4, 2 heads, d_k = d_v = 2
TOY = training.init_model(3, 4, 4, 2, seed=0)  # vocab 3, 4 positions, d_model 4, 2 heads
T = strided.tensor([[[1.0, 2.0], [3.0, 4.0]]])  # shape (1, 2, 2)
HUGE = 10**9  # a size nobody means: it must be refused at once, not computed

# Arguments that are wrong for a size or a count (a positive int).
BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}]
# Arguments that are wrong for a real number that must be finite and positive.
BAD_POSITIVE = [None, "1", NAN, INF, -INF, 0, -1.0, True, [1.0]]
BAD_SEEDS = [None, "x", 1.5, True, [1], 10**100, -10**5000]  # an int of over 4,300 digits cannot even be printed
BAD_RNGS = [None, 0, "rng", random]
BAD_MATRICES = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[NAN, 1.0]],
                [[INF]], [[True, 1.0]], ({1: 2},), [[[1.0]]]]
BAD_VECTORS = [None, 5, "ab", [], [None], ["a"], [NAN], [INF], [True], [[1.0]], {1: 2}]
BAD_DIGITS = [None, "4", 2.5, -1, 18, 99, True]


def nested(depth: int) -> list:
    """[[[...[1]...]]], ``depth`` lists deep."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


SELF_LIST: list = []
SELF_LIST.append(SELF_LIST)  # a list that contains itself: infinitely deep


class Case(NamedTuple):
    name: str  # the message must start with "name: "
    func: Callable
    args: tuple
    kwargs: dict
    unchanged: bool = True  # also check that the arguments are left as they were


CASES: list[Case] = []


def bad(name: str, func: Callable, /, *args: Any, unchanged: bool = True, **kwargs: Any) -> None:
    CASES.append(Case(name, func, args, kwargs, unchanged))


# === paper.py ===

for M in BAD_MATRICES:
    bad("raw_scores", paper.raw_scores, M, [[1.0, 2.0]])
    bad("raw_scores", paper.raw_scores, [[1.0, 2.0]], M)
bad("raw_scores", paper.raw_scores, [[1, 2]], [[1, 2, 3]])
bad("raw_scores", paper.raw_scores, [[1e200, 1e200]], [[1e200, 1e200]])
bad("raw_scores", paper.raw_scores, [[1e308, 1e308]], [[1.0, 1.0]])
for M in [None, 5, "ab", [], [[]], [[1], [1, 2]], [[0.5]], [[NAN]], [[INF]], [["a"]], [[None]], [[True]], [1, 2]]:
    bad("integer_matrix", paper.integer_matrix, M)
for S in [None, 5, "ab", [], [None], [[]], [[[]]], [[[1, "a"]]], [[[NAN, 0]]], [[[INF, 0]]], [[[0.5, 0]]],
          [[[1, 2], [3]]], [[[1.7e308, -1.7e308]]], [[1, 2]]]:
    bad("score_differences", paper.score_differences, S)
for D in [None, 5, "ab", [], ["a"], [NAN], [INF], [-INF], [[0]], [None]]:
    bad("exp_table", paper.exp_table, D, 0.5)
for s in BAD_POSITIVE:
    bad("exp_table", paper.exp_table, [0, -1], s)
    bad("table_softmax", paper.table_softmax, [1, 0], s)
for d in BAD_DIGITS:
    bad("exp_table", paper.exp_table, [0, -1], 0.5, d)
    bad("table_softmax", paper.table_softmax, [1, 0], 0.5, d)
bad("exp_table", paper.exp_table, [1000], 1.0)
bad("exp_table", paper.exp_table, [1e308], 10.0)
bad("exp_table", paper.exp_table, [800], 1.0)
for row in [None, 5, "ab", [], [NAN, 0], [0, NAN], [INF, 0], [-INF, 0], ["a", 0], [[1.0]], [None]]:
    bad("table_softmax", paper.table_softmax, row, 1.0)

# === strided.py ===

BAD_TENSORS = [
    None, [[1]], (1, 2), "t",
    Strided([1, 2, 3], (2, 3), (3, 1)),           # storage shorter than shape and strides need
    Strided([1] * 6, (2, 3), (3, 1), 1),          # the offset pushes the last element past the end
    Strided([1] * 6, (2, 3), (4, 1)),             # strides that reach past the end
    Strided([1] * 6, (2, 3), (3,)),               # one stride for two dimensions
    Strided([1] * 6, (2, 3), (3, -1)),            # a negative stride
    Strided([1] * 6, (2, 3), (3, 1), -1),         # a negative offset
    Strided([1] * 6, (2, 3), (3, 1.0)),           # a float stride
    Strided([1] * 6, (2, 3), (3, 1), None),
    Strided([1] * 6, (2, 3), (3, 1), 1.0),
    Strided(None, (2, 3), (3, 1)),
    Strided("abcdef", (2, 3), (3, 1)),
    Strided([1] * 6, (2, 0), (3, 1)),
    Strided([1] * 6, None, (3, 1)),
    Strided([1] * 6, (2, 3), None),
    Strided([1] * 6, (2, "3"), (3, 1)),
    Strided([1] * 6, (), ()),
    Strided([1], (HUGE, HUGE), (0, 0)),           # 10^18 elements read from one number
]
for t in BAD_TENSORS:  # Strided's methods, called as Strided.view(t, shape) = t.view(shape), so t can be anything
    for name in ("contiguous", "is_contiguous", "tolist"):
        bad(name, getattr(Strided, name), t)
    bad("strided_merge_heads", strided.strided_merge_heads, t)
    bad("view", Strided.view, t, (6,))
    bad("transpose", Strided.transpose, t, 0, 1)
    bad("element", Strided.element, t, (0, 0))
    bad("storage_index", Strided.storage_index, t, (0, 0))
    bad("strided_split_heads", strided.strided_split_heads, t, 1)
for shape in [None, (), (0, 4), (-1,), ("2", 2), (2.0, 2), (3,), (True, 4), [[4]], 4, "4", (HUGE,), (1,) * 1000]:
    bad("view", Strided.view, T, shape)
bad("view", Strided.view, T.transpose(1, 2), (4,))
for d0, d1 in [(0, 3), (-1, 0), ("0", 1), (None, 0), (0, 1.0), (True, 0), (0, HUGE)]:
    bad("transpose", Strided.transpose, T, d0, d1)
for index in [None, (0, 0), (0, 0, 9), (0, 0, -1), (0, 0, 0.5), "000", (0, 0, True), (0, 0, [0]), (0, 0, 0, 0), 5]:
    bad("element", Strided.element, T, index)
    bad("storage_index", Strided.storage_index, T, index)
for shape in [None, (), (0,), (-1,), ("2",), (2.5,), [[2]], 5, "23", (1,) * 1000]:
    bad("row_major_strides", Strided.row_major_strides, shape)
for nest in [None, 5, 2.5, "ab", [], [[]], [[1, 2], [3]], [[1], 2], [1, [2]], [["a"]], [[None]], [[1, 2], []],
             {1: 2}]:
    bad("tensor", strided.tensor, nest)
bad("tensor", strided.tensor, nested(5000), unchanged=False)
bad("tensor", strided.tensor, SELF_LIST, unchanged=False)
for h in BAD_SIZES + [3, HUGE]:
    bad("strided_split_heads", strided.strided_split_heads, T, h)
bad("strided_split_heads", strided.strided_split_heads, strided.tensor([1, 2]), 1)
bad("strided_split_heads", strided.strided_split_heads, T.transpose(1, 2), 1)
bad("strided_merge_heads", strided.strided_merge_heads, T)

# === cost.py ===

for M in BAD_MATRICES:
    bad("matmul", cost.MultiplyAddCounter().matmul, "step", M, [[1.0]])
    bad("matmul", cost.MultiplyAddCounter().matmul, "step", [[1.0]], M)
for step in [None, 5, ["a"]]:
    bad("matmul", cost.MultiplyAddCounter().matmul, step, [[1.0]], [[1.0]])
bad("matmul", cost.MultiplyAddCounter().matmul, "step", [[1e200]], [[1e200]])

# === torch_init.py ===

for n in BAD_SIZES + [10**400]:
    bad("kaiming_uniform_bound", torch_init.kaiming_uniform_bound, n)
    bad("linear_bound", torch_init.linear_bound, n)
    bad("xavier_uniform_bound", torch_init.xavier_uniform_bound, n, 4)
    bad("xavier_uniform_bound", torch_init.xavier_uniform_bound, 4, n)
    bad("mha_in_proj_bound", torch_init.mha_in_proj_bound, n)
for a in [None, "1", NAN, INF, True, [1.0]]:
    bad("kaiming_uniform_bound", torch_init.kaiming_uniform_bound, 16, a)
for n in BAD_SIZES + [HUGE]:
    bad("torch_linear_weights", torch_init.torch_linear_weights, n, 4, rng=R)
    bad("torch_linear_weights", torch_init.torch_linear_weights, 4, n, rng=R)
    bad("torch_mha_weights", torch_init.torch_mha_weights, n, 2, seed=0)
    bad("torch_mha_weights", torch_init.torch_mha_weights, 16, n, seed=0)
for rng in BAD_RNGS:
    bad("torch_linear_weights", torch_init.torch_linear_weights, 4, 4, rng=rng)
bad("torch_linear_weights", torch_init.torch_linear_weights, HUGE, HUGE, rng=R)
bad("torch_mha_weights", torch_init.torch_mha_weights, 16, 3, seed=0)
bad("torch_mha_weights", torch_init.torch_mha_weights, 100_000, 1, seed=0)
for s in BAD_SEEDS:
    bad("torch_mha_weights", torch_init.torch_mha_weights, 16, 2, seed=s)
for b in [None, 1, "yes"]:
    bad("torch_mha_weights", torch_init.torch_mha_weights, 16, 2, seed=0, bias=b)

# === block.py ===

for M in BAD_MATRICES:
    bad("layer_norm", block.layer_norm, M)
    bad("dropout", block.dropout, M, 0.5, rng=R)
for v in BAD_VECTORS[1:] + [[1.0], [1.0] * 3]:  # gain=None and bias=None are the defaults
    bad("layer_norm", block.layer_norm, [[1.0, 2.0]], gain=v)
    bad("layer_norm", block.layer_norm, [[1.0, 2.0]], bias=v)
for e in BAD_POSITIVE:
    bad("layer_norm", block.layer_norm, [[1.0, 2.0]], eps=e)
bad("layer_norm", block.layer_norm, [[1.7e308, -1.7e308, 1.7e308]])
bad("layer_norm", block.layer_norm, [[1.0, 2.0]], gain=[1e308, 1e308], bias=[1e308, 1e308])
for p in [None, "0.5", NAN, INF, -0.1, 1, 1.0, 1.5, True, [0.5]]:
    bad("dropout", block.dropout, [[1.0, 2.0]], p, rng=R)
for rng in BAD_RNGS:
    bad("dropout", block.dropout, [[1.0, 2.0]], 0.5, rng=rng)
bad("dropout", block.dropout, [[1.7e308] * 8], 0.5, rng=random.Random(0))

# === decoding.py ===

BAD_WEIGHTS = [
    None, "w", [[1.0] * 4] * 4,
    GOOD_W._replace(W_O=[[NAN] * 4] * 4),
    GOOD_W._replace(W_V=[[[INF, 0.0]] * 4, GOOD_W.W_V[1]]),
    GOOD_W._replace(W_Q=[GOOD_W.W_Q[0]]),
    GOOD_W._replace(W_K=[]),
    GOOD_W._replace(W_Q=None),
    GOOD_W._replace(b_O=[NAN, 0.0, 0.0, 0.0]),
    GOOD_W._replace(b_Q=[[0.0, 0.0]]),
    GOOD_W._replace(b_K=[[0.0, 0.0], [0.0, "x"]]),
]
for x_row in BAD_VECTORS + [[0.1] * 3, [0.1] * 5]:
    bad("decode_step", decoding.decode_step, x_row, GOOD_W)
for w in BAD_WEIGHTS:
    bad("decode_step", decoding.decode_step, [0.1] * 4, w)
ROW = [[0.1, 0.2]]
for cache in ["cache", (ROW, ROW), KVCache([], []), KVCache(None, None), KVCache([ROW], [ROW]),
              KVCache([[[0.1]], [[0.1]]], [ROW, ROW]), KVCache([ROW, ROW], [[[0.1]], [[0.1]]]),
              KVCache([[[NAN, 0.0]], ROW], [ROW, ROW]), KVCache([ROW, ROW + ROW], [ROW, ROW]),
              KVCache([ROW, ROW], [ROW + ROW, ROW + ROW]), KVCache([ROW, [0.1, 0.2]], [ROW, ROW]),
              KVCache(["ab", ROW], [ROW, ROW])]:
    bad("decode_step", decoding.decode_step, [0.1] * 4, GOOD_W, cache)
for s in ["1", NAN, INF, 0, -1.0, True]:
    bad("decode_step", decoding.decode_step, [0.1] * 4, GOOD_W, scale=s)
bad("decode_step", decoding.decode_step, [1e200] * 4, GOOD_W)

# === training.py ===

BAD_MODELS = [
    None, GOOD_W, "model", (1, 2, 3, 4, 5),
    TOY._replace(token_embeddings=None),
    TOY._replace(token_embeddings=[]),
    TOY._replace(token_embeddings=[[NAN] * 4] * 3),
    TOY._replace(position_embeddings=[[0.0] * 3] * 4),    # 3 wide, the tokens are 4 wide
    TOY._replace(attention=None),
    TOY._replace(attention=weights.init_mha_weights(6, 2, seed=0)),  # d_model 6, not 4
    TOY._replace(W_vocab=[[0.0] * 3] * 3),                # 3 rows, d_model is 4
    TOY._replace(W_vocab=[[0.0] * 2] * 4),                # 2 columns, the vocabulary has 3 tokens
    TOY._replace(b_vocab=[0.0] * 2),
    TOY._replace(b_vocab=None),
    TOY._replace(b_vocab=[NAN] * 3),
]
for n in BAD_SIZES + [HUGE, 10**7]:
    for at in range(4):
        sizes = [3, 4, 4, 2]
        sizes[at] = n
        bad("init_model", training.init_model, *sizes, seed=0)
bad("init_model", training.init_model, 3, 4, 4, 3, seed=0)
for s in BAD_SEEDS:
    bad("init_model", training.init_model, 3, 4, 4, 2, seed=s)
for e in BAD_POSITIVE:
    bad("init_model", training.init_model, 3, 4, 4, 2, seed=0, embed_std=e)
for ex in [None, TOY, "ex", GOOD_W]:
    bad("model_from_example", training.model_from_example, ex)
for n in BAD_SIZES + [HUGE]:
    bad("make_sequences", training.make_sequences, n, 4, 3, random.Random(0))
    bad("make_sequences", training.make_sequences, 2, n, 3, random.Random(0))
    if n != HUGE:
        bad("make_sequences", training.make_sequences, 2, 4, n, random.Random(0))
for rng in BAD_RNGS:
    bad("make_sequences", training.make_sequences, 2, 4, 3, rng)
for ids in [None, [], [1, "a"], "ab", [1, 2.0], [True], 5, [[1]], [-1, 0], {1: 2}]:
    bad("targets", training.targets, ids)
BAD_IDS = [None, [], [0, 3], [0, -1], [0, 1.0], [0, True], [0, 1, 2, 0, 1], "ab", 5, [[0]], [0, HUGE]]
for ids in BAD_IDS:
    bad("forward", training.forward, TOY, ids)
    bad("model_gradients", training.model_gradients, TOY, ids)
    bad("attention_weights", training.attention_weights, TOY, ids)
bad("model_gradients", training.model_gradients, TOY, [0])
for model in BAD_MODELS:
    bad("forward", training.forward, model, [0, 1])
    bad("model_gradients", training.model_gradients, model, [0, 1])
    bad("attention_weights", training.attention_weights, model, [0, 1])
    bad("batch_gradients", training.batch_gradients, model, [[0, 1]])
    bad("flatten", training.flatten, model)
    bad("unflatten", training.unflatten, [0.0] * len(training.flatten(TOY)), model)
    bad("train", training.train, model, steps=1, batch_size=2, seq_len=2, seed=0)
    bad("previous_token_weights", training.previous_token_weights, model, [[0, 1]])
    bad("accuracy", training.accuracy, model, [[0, 1]])
bad("forward", training.forward, TOY._replace(token_embeddings=[[1e200] * 4] * 3), [0, 1])
for logits in BAD_MATRICES:
    bad("cross_entropy", training.cross_entropy, logits, [0])
for target in [[2], [None], [0, 1], None, [0.5], "a", [True], [-1], [HUGE], 0, [[0]]]:
    bad("cross_entropy", training.cross_entropy, [[0.0, 0.0]], target)
bad("cross_entropy", training.cross_entropy, [[1e308, -1e308]], [1])
bad("cross_entropy", training.cross_entropy, [[1.7e308, -1.7e308], [1.7e308, -1.7e308]], [1, 1])
for batch in [[], None, [[0, 1], [0, 3]], [[0]], "ab", [None], [[0, 1], "ab"], 5]:
    bad("batch_gradients", training.batch_gradients, TOY, batch)
    bad("previous_token_weights", training.previous_token_weights, TOY, batch)
    bad("accuracy", training.accuracy, TOY, batch)
SIZE = len(training.flatten(TOY))
for flat in BAD_VECTORS + [[0.0], [0.0] * (SIZE + 1), [NAN] * SIZE, [INF] * SIZE, [0.0] * (SIZE - 1) + ["a"]]:
    bad("unflatten", training.unflatten, flat, TOY)
for params, grads in [([1.0], [1.0, 2.0]), ([NAN], [1.0]), ([1.0], [INF]), ([], []), (None, [1.0]), ([1.0], None),
                      (["a"], [1.0]), ([-1e308], [1.0]), ([1.0], [1e300])]:
    bad("adam_step", training.adam_step, params, grads, None, lr=1e308 if params == [-1e308] else 1e-3)
for state in ["state", (1, [0.0], [0.0]), AdamState(-1, [0.0], [0.0]), AdamState(0, [0.0], [0.0]),
              AdamState(1.5, [0.0], [0.0]), AdamState(None, [0.0], [0.0]), AdamState(10**400, [0.0], [0.0]),
              AdamState(1, [0.0, 0.0], [0.0]), AdamState(1, [0.0], []), AdamState(1, [NAN], [0.0]),
              AdamState(1, [0.0], [-1.0]), AdamState(1, None, [0.0]), AdamState(1, [0.0], [INF]),
              AdamState(True, [0.0], [0.0])]:
    bad("adam_step", training.adam_step, [1.0], [1.0], state)
for lr in BAD_POSITIVE:
    bad("adam_step", training.adam_step, [1.0], [1.0], None, lr=lr)
    bad("adam_step", training.adam_step, [1.0], [1.0], None, eps=lr)
    bad("train", training.train, TOY, steps=1, batch_size=2, seq_len=2, seed=0, lr=lr)
for betas in [None, 0.9, "ab", (0.9,), (0.9, 0.99, 0.999), (0.9, 1.0), (1.0, 0.9), (-0.1, 0.9), (NAN, 0.9),
              (0.9, "a"), (True, 0.9)]:
    bad("adam_step", training.adam_step, [1.0], [1.0], None, betas=betas)
for n in BAD_SIZES + [HUGE]:
    bad("train", training.train, TOY, steps=n, batch_size=2, seq_len=2, seed=0)
    bad("train", training.train, TOY, steps=1, batch_size=n, seq_len=2, seed=0)
    bad("train", training.train, TOY, steps=1, batch_size=2, seq_len=n, seed=0)
for s in BAD_SEEDS:
    bad("train", training.train, TOY, steps=1, batch_size=2, seq_len=2, seed=s)
bad("train", training.train, TOY, steps=1, batch_size=2, seq_len=9, seed=0)
for A in BAD_MATRICES + [[[1.0]], [[1.0, 0.0]], [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]]:
    bad("previous_token_weight", training.previous_token_weight, A)

# === weights.py ===

for seed, name in [(1.5, "x"), ("x", "x"), (None, "x"), (True, "x"), (1, 5), (1, None), ([1], "x")]:
    bad("derive_rng", weights.derive_rng, seed, name)
for n in BAD_SIZES + [HUGE]:
    bad("init_matrix", weights.init_matrix, n, 2, R)
    bad("init_matrix", weights.init_matrix, 2, n, R)
    bad("init_mha_weights", weights.init_mha_weights, n, 2, seed=0)
    bad("init_mha_weights", weights.init_mha_weights, 16, n, seed=0)
    if n is not None:  # d_k, d_v and num_kv_heads default to None
        bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, d_k=n)
        bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, d_v=n)
        bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, num_kv_heads=n)
    bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, init="gpt2", n_layer=n)
    bad("embedding_table", example.embedding_table, n, 4, seed=0, name="t")
    bad("embedding_table", example.embedding_table, 2, n, seed=0, name="t")
for rng in BAD_RNGS:
    bad("init_matrix", weights.init_matrix, 2, 2, rng)
for scheme in ["he", None, 5, ["normal"]]:
    bad("init_matrix", weights.init_matrix, 2, 2, R, scheme)
    bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, init=scheme)
for n in [0, 2.0, -1, "2", True]:
    bad("init_matrix", weights.init_matrix, 2, 2, R, fan_in=n)
    bad("init_matrix", weights.init_matrix, 2, 2, R, fan_out=n)
for e in BAD_POSITIVE:
    bad("init_matrix", weights.init_matrix, 2, 2, R, "normal", std=e)
    bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, init="normal", std=e)
    bad("embedding_table", example.embedding_table, 2, 4, seed=0, name="t", std=e)
bad("init_matrix", weights.init_matrix, 100_000, 100_000, R)
bad("init_mha_weights", weights.init_mha_weights, 16, 3, seed=0)
bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, num_kv_heads=3)
bad("init_mha_weights", weights.init_mha_weights, 16, HUGE, seed=0, d_k=1, d_v=1)
bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, d_k=HUGE, d_v=1)
bad("init_mha_weights", weights.init_mha_weights, 100_000, 1, seed=0)
for s in BAD_SEEDS:
    bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=s)
    bad("embedding_table", example.embedding_table, 2, 4, seed=s, name="t")
for b in [None, 1, "yes"]:
    bad("init_mha_weights", weights.init_mha_weights, 16, 2, seed=0, bias=b)
for w in BAD_WEIGHTS:
    bad("parameter_count", weights.parameter_count, w)

# === example.py ===

for sentence in ["", "   ", None, ["a"], 5, b"I like"]:
    bad("tokenize", example.tokenize, sentence)
for args in [(["cats"],), ("I like",), ([1, 2],), (None,), (["I"], []), (["I"], "I like"), (["I"], None),
             ([["I"]],), (["I"], [1, 2])]:
    bad("encode", example.encode, *args)
for name in [None, 5, ["t"]]:
    bad("embedding_table", example.embedding_table, 2, 4, seed=0, name=name)
bad("embedding_table", example.embedding_table, HUGE, HUGE, seed=0, name="t")
for args in [([9], [[1.0]], [[1.0]]), ([0, 0], [[1.0]], [[1.0]]), ([0], [[1.0]], [[1.0, 2.0]]),
             ([0], [[NAN]], [[1.0]]), ([0], [[1.0]], [[INF]]), (None, [[1.0]], [[1.0]]), ([True], [[1.0]], [[1.0]]),
             ([0], None, [[1.0]]), ([0], [[1.0]], None), ([], [[1.0]], [[1.0]]), ([-1], [[1.0]], [[1.0]]),
             ([0.0], [[1.0]], [[1.0]]), ("0", [[1.0]], [[1.0]]), ([0], [[1e308]], [[1e308]])]:
    bad("embed", example.embed, *args)
for options in [dict(sentence=None), dict(sentence=5), dict(sentence=""), dict(sentence="I like cats"),
                dict(sentence="I " * 100_000), dict(d_model=0), dict(d_model=HUGE), dict(d_model="16"),
                dict(num_heads=0), dict(num_heads=3), dict(num_heads=HUGE), dict(num_heads=2.0), dict(seed="x"),
                dict(seed=None), dict(seed=1.5), dict(embed_std=0), dict(embed_std=NAN), dict(embed_std="1"),
                dict(foo=1), dict(bias="yes"), dict(init="he"), dict(num_kv_heads=3), dict(d_k=HUGE)]:
    bad("running_example", example.running_example, **options)

# === display.py ===

BAD_SHOWN = [None, 5, "ab", [], [[]], [1, 2], [[1, 2], [3]], [[1, None]], [["a"]], [[[1.0]]], ({1: 2},)]
for M in BAD_SHOWN:
    bad("format_matrix", display.format_matrix, M)
    bad("print_matrix", display.print_matrix, M)
    bad("heatmap", display.heatmap, M)
    bad("attention_heatmap", display.attention_heatmap, M, ["a"])
for x in ["a", None, [1.0], {}]:
    bad("format_number", display.format_number, x)
for d in BAD_DIGITS:
    bad("format_number", display.format_number, 0.5, d)
    bad("format_matrix", display.format_matrix, [[0.5]], digits=d)
    bad("print_matrix", display.print_matrix, [[0.5]], digits=d)
    bad("heatmap", display.heatmap, [[0.5]], digits=d)
    bad("attention_heatmap", display.attention_heatmap, [[0.5]], ["a"], digits=d)
    bad("bar_chart", display.bar_chart, ["a"], [1.0], digits=d)
for labels in [5, 5.5, ["a", "b"], []]:
    bad("format_matrix", display.format_matrix, [[0.5]], row_labels=labels)
    bad("format_matrix", display.format_matrix, [[0.5]], col_labels=labels)
    bad("print_matrix", display.print_matrix, [[0.5]], row_labels=labels)
    bad("heatmap", display.heatmap, [[0.5]], col_labels=labels)
bad("print_matrix", display.print_matrix, [[0.5]], colour="red")
for v in [NAN, INF, "0", [0.0], True]:
    bad("heatmap", display.heatmap, [[0.5]], vmin=v)
    bad("heatmap", display.heatmap, [[0.5]], vmax=v)
bad("heatmap", display.heatmap, [[0.5]], vmin=1.0, vmax=0.0)
bad("heatmap", display.heatmap, [[10**400]])
for tokens, keys in [(None, None), (5, None), ("a", None), (["a", "b"], None), (["a"], 5), (["a"], ["a", "b"])]:
    bad("attention_heatmap", display.attention_heatmap, [[0.5]], tokens, keys)
for labels, values in [(["a"], [1.0, 2.0]), (["a"], [-1.0]), (["a"], [NAN]), (["a"], [INF]), (5, [1.0]),
                       (["a"], None), ([], []), (["a"], ["x"]), (["a"], [[1.0]]), ("a", [1.0]), (None, [1.0])]:
    bad("bar_chart", display.bar_chart, labels, values)
for width in [0, -1, HUGE, None, "40", 2.5, True]:
    bad("BarChart", display.BarChart, ["a"], [1.0], width=width)


# === core: sizes, ints too large for a float, results that overflow ===

BIG = 10**5000  # an int Python will not even print (over 4,300 digits)
for x in [BIG, -BIG, 10**101]:
    bad("format_number", display.format_number, x)
    bad("format_matrix", display.format_matrix, [[1.0], [x]])
    bad("print_matrix", display.print_matrix, [[x]])
    bad("init_mha_weights", weights.init_mha_weights, 4, x, seed=0)
    bad("init_matrix", weights.init_matrix, 2, 2, R, fan_in=x)
    bad("make_sequences", training.make_sequences, 2, 4, x, R)
for accuracy in [-0.5, 1.5, NAN, BIG]:
    bad("succeeded", induction.succeeded, [induction.HeadScore(0, 0, 0.9, 0.9)], accuracy)
for score in [induction.HeadScore(0, 0, NAN, 0.9), induction.HeadScore("x", 0, 0.9, 0.9),
              induction.HeadScore(0, 0, 0.9, 1.5), induction.HeadScore(0, None, 0.9, 0.9)]:
    bad("succeeded", induction.succeeded, [score], 1.0)
bad("batch_gradients", training.batch_gradients, TOY, [[0, 1]] * (training.MAX_BATCH + 1))
bad("accuracy", training.accuracy, TOY, [[0, 1]] * (training.MAX_SEQUENCES + 1))

for n in [softmax_and_masks.MAX_MASK_SIDE + 1, HUGE, 10**400]:
    bad("causal_mask", causal_mask, n)
    bad("padding_mask", padding_mask, [1, 0], 0, num_queries=n)
    bad("length_mask", softmax_and_masks.length_mask, 1, n)
    bad("length_mask", softmax_and_masks.length_mask, 1, 2, num_queries=n)
bad("length_mask", softmax_and_masks.length_mask, 10**400, 10**400)
bad("padding_mask", padding_mask, [1] * (softmax_and_masks.MAX_MASK_SIDE + 1), 0)
for big in [10**400, -10**400]:
    bad("softmax", softmax, [big, 0.0])
    bad("softmax_rows", softmax_rows, [[0.0, 1.0], [big, 0.0]])
bad("entropy", softmax_and_masks.entropy, [1e308, 1e308])
bad("softmax_backward", gradients.softmax_backward, [1e200, 1e200], [1e200, 1e200])
bad("softmax_jacobian", gradients.softmax_jacobian, [1e155])
bad("attention_backward", attention_backward, [[1e200, 1.0]], [[1e200, 1.0], [-1e200, 1.0]], [[1.0], [2.0]], [[1.0]])


# === The sweep ===


def snapshot(obj: Any) -> Any:
    """Something to compare before and after a call: nested values (nan equal to nan), a generator by its state."""
    if isinstance(obj, random.Random):
        return ("Random", obj.getstate())
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [snapshot(item) for item in obj])
    if isinstance(obj, dict):
        return ("dict", [(snapshot(k), snapshot(v)) for k, v in obj.items()])
    if type(obj) is int:
        return obj  # compared as itself: repr refuses an int of over 4,300 digits
    return repr(obj)


def problem(case: Case) -> str | None:
    """What is wrong with how ``case`` failed (None: a clean, named error and nothing changed)."""
    before = snapshot((case.args, case.kwargs)) if case.unchanged else None
    try:
        case.func(*case.args, **case.kwargs)
    except (ValueError, TypeError) as error:  # ShapeError is a ValueError
        if not str(error).startswith(f"{case.name}: "):
            return f"{type(error).__name__} not under its name: {error}"
        if "\n" in str(error):
            return f"a message of more than one line: {error!r}"
    except Exception as error:  # noqa: BLE001 -- any other type breaks the promise
        return f"raw {type(error).__name__}: {error}"
    else:
        return "no error"
    if case.unchanged and snapshot((case.args, case.kwargs)) != before:
        return "changed its arguments"
    return None


def short(value: Any) -> str:
    try:
        return f"{value!r:.40}"
    except RecursionError:
        return "<a list too deep to print>"
    except ValueError:  # an int of over 4,300 digits
        return "<an int too long to print>"


def describe(case: Case) -> str:
    args = ", ".join([short(a) for a in case.args] + [f"{k}={short(v)}" for k, v in case.kwargs.items()])
    return f"{case.name}({args})"


GROUPS = sorted({case.name for case in CASES})


@pytest.mark.parametrize("name", GROUPS)
def test_every_bad_call_gets_a_named_error_and_changes_nothing(name):
    failures = [f"{describe(case)}: {p}" for case in CASES if case.name == name for p in [problem(case)] if p]
    assert not failures, "\n".join(failures)


def test_any_str_names_a_stream_and_the_streams_are_the_ones_they_were():
    """derive_rng seeds with the name's UTF-8 bytes: the streams of the str itself, and a lone
    surrogate (which UTF-8 cannot encode) is let through rather than raising UnicodeEncodeError."""
    assert weights.derive_rng(42, "W_Q/head0").random() == random.Random("mha-lists/42/W_Q/head0").random()
    odd = [weights.derive_rng(1, name).random() for name in ["\udcff", "a\udc80b", "\udcff"]]
    assert odd[0] == odd[2] != odd[1]
    assert example.embedding_table(2, 2, seed=0, name="\udcff") == example.embedding_table(2, 2, seed=0, name="\udcff")


def test_values_at_the_edge_of_float64_still_draw():
    """A range as wide as float64's, a bar of 1e308 and vectors of subnormal length are drawn, not refused
    with a raw error from the drawing's arithmetic (it divides by the largest value first)."""
    from mha_lists.teaching import pictures

    assert "rgb(33,102,255)" in display.heatmap([[1e308, -1e308]])._repr_html_()  # 1e308 is the deepest blue
    assert repr(display.bar_chart(["a", "b"], [1e308, 5e307])).splitlines()[1].endswith("  " + "#" * 20)
    assert 'width:50.0%' in display.bar_chart(["a", "b"], [1e308, 5e307])._repr_html_()
    arrows = pictures.query_key_arrows([[1e-320, 0.0]] * 2, [[1e-320, 0.0]] * 2, ["a", "b"], query=0)
    assert arrows.text.endswith("wins: a, b") and "nan" not in arrows._repr_svg_()


def test_the_sweep_is_wide():
    assert len(GROUPS) >= 55
    assert len(CASES) >= 800


def test_shape_errors_are_shape_errors():
    with pytest.raises(ShapeError, match=r"^raw_scores: Q is 1x2 and K is 1x3; Q and K must have the same number"):
        paper.raw_scores([[1, 2]], [[1, 2, 3]])
    with pytest.raises(ShapeError, match=r"^element: t's storage has 3 entries"):
        Strided([1, 2, 3], (2, 3), (3, 1)).element((0, 0))


def test_too_large_values_say_so():
    for call in (lambda: paper.exp_table([1000], 1.0), lambda: training.cross_entropy([[1e308, -1e308]], [1]),
                 lambda: training.adam_step([-1e308], [1.0], None, lr=1e308)):
        with pytest.raises(ValueError, match=r"^\w+: the values are too large"):
            call()


def test_limits_name_the_limit():
    with pytest.raises(ValueError, match=r"^init_model: vocab_size is 10000000; at most 1000"):
        training.init_model(10**7, 4, 4, 2, seed=0)
    with pytest.raises(ValueError, match=r"^init_mha_weights: .* at most 5,000,000"):
        weights.init_mha_weights(10**9, 1, seed=0)


def test_the_good_calls_next_to_the_bad_ones_still_work():
    assert paper.raw_scores([[2, 0]], [[2, 0], [0, 2], [-2, 0]]) == [[4.0, 0.0, -4.0]]
    assert paper.exp_table([0, -4], 0.5)[1].exp == 0.1353
    assert paper.exp_table([700], 1.0)[0].exp == round(math.exp(700), 4)
    assert Strided([1, 2, 3], (3,), (1,)).element((2,)) == 3
    assert Strided([7], (2, 2), (0, 0)).tolist() == [[7, 7], [7, 7]]  # a stride of 0 repeats
    assert training.adam_step([1.0], [1.0], AdamState(1, [0.1], [0.001]))[1].step == 2
    assert display.BarChart(["a"], [1.0], width=10).width == 10


def test_a_limit_itself_is_allowed():
    assert weights.check_size("demo", "n", 1000, 1000) == 1000
    weights.check_weight_count("demo", weights.MAX_WEIGHTS, "sizes")  # no error at the limit
    with pytest.raises(ValueError, match=r"^demo: sizes make 5,000,001 weights; at most 5,000,000$"):
        weights.check_weight_count("demo", weights.MAX_WEIGHTS + 1, "sizes")
    assert weights.check_std("demo", "std", weights.MAX_STD) == 1e300
    assert Strided([0], (strided.MAX_ELEMENTS,), (0,)).is_contiguous() is False  # a stride of 0 is a repeat
    with pytest.raises(ValueError, match=r"^is_contiguous: t.shape \(10000001,\) has 10,000,001 elements; at most"):
        Strided([0], (strided.MAX_ELEMENTS + 1,), (0,)).is_contiguous()


def test_a_parser_error_is_one_line_even_for_a_message_of_two():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        cli.OneLineErrorParser(prog="demo").error("first line\nsecond line")
    assert info.value.code == 2
    assert err.getvalue() == "demo: error: first line second line (see --help)\n"


# === The commands ===


CLI_BAD = [["--d-model", "1000000000"], ["--d-model", "4096"], ["--heads", "0"], ["--heads", "-1"],
           ["--heads", "3"], ["--heads", "1000000"], ["--sentence", ""], ["--sentence", "I like cats"],
           ["--sentence", "I " * 1000], ["--digits", "99"], ["--digits", "0"], ["--digits", "x"],
           ["--d-model", "abc"], ["--seed", "x"], ["--seed", "1.5"], ["--frobnicate"], ["extra"],
           ["--d-model", "16", "--heads", "32"], ["--d"], ["--heads"]]
BENCH_BAD = [["--repeat", "0"], ["--repeat", "-1"], ["--repeat", "x"], ["--repeat", "1000000000"],
             ["--repeat", "2.5"], ["--bogus"], ["positional"], ["--repeat"]]


def command_problem(main: Callable, argv: list[str]) -> str | None:
    """Run a command's main in this process; None when it printed one line to stderr and exited with 2."""
    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    except Exception as error:  # noqa: BLE001
        return f"raw {type(error).__name__}: {error}"
    lines = err.getvalue().splitlines()
    if code != 2 or len(lines) != 1 or out.getvalue() or "Traceback" in err.getvalue():
        return f"exit {code}, stdout {len(out.getvalue())} chars, stderr {err.getvalue()!r:.200}"
    return None


COMMANDS = [("python -m mha_lists", cli.main, argv) for argv in CLI_BAD] + \
           [("python -m mha_lists.tools.bench", bench.main, argv) for argv in BENCH_BAD]


@pytest.mark.parametrize("command, main, argv", COMMANDS, ids=[f"{c[0].split()[-1]} {' '.join(c[2])[:40]}" for c in COMMANDS])
def test_a_command_given_bad_input_prints_one_line_and_exits_2(command, main, argv):
    assert command_problem(main, argv) is None, command_problem(main, argv)


@pytest.mark.parametrize("module, argv", [("mha_lists", ["--heads", "0"]), ("mha_lists.tools.bench", ["--repeat", "0"]),
                                          ("mha_lists.bench", ["--repeat", "0"])])  # the charter's name for it
def test_the_real_commands_print_one_line_and_exit_2(module, argv):
    done = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


# === Counting, for the report: python tests/test_error_promise.py ===


def _count() -> None:
    import resource
    import signal

    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY))  # a runaway size fails fast

    def timeout(*_: object) -> None:
        raise TimeoutError("took more than 5 s")

    signal.signal(signal.SIGALRM, timeout)
    clean, failures = 0, []
    runs = [(describe(case), functools.partial(problem, case)) for case in CASES]
    runs += [(f"{command} {' '.join(argv)[:40]}", functools.partial(command_problem, main, argv))
             for command, main, argv in COMMANDS]
    for label, run in runs:
        signal.alarm(5)
        try:
            p = run()
        except (TimeoutError, MemoryError) as error:
            p = f"hangs or runs out of memory: {type(error).__name__}"
        finally:
            signal.alarm(0)
        if p is None:
            clean += 1
        else:
            failures.append(f"{label}: {p}"[:300])
    print("\n".join(failures))
    print(f"clean {clean} / {len(runs)} ({100 * clean / len(runs):.1f}%)")


if __name__ == "__main__":
    _count()
