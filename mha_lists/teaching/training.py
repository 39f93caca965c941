"""A toy model that learns to attend: embeddings, one attention layer, softmax cross-entropy, Adam.

The task, "copy the previous token": read a random sequence of letters and,
at every position i >= 1, predict the letter at position i - 1. Nothing in a
token says what came before it, so the only way to solve the task is for
attention to look one position back: the pattern training must discover.

The model, for one sequence of token ids (T,):

    X      = E_tok[ids] + E_pos[0..T-1]                (T, d_model)
    H      = multi_head_attention(X, attention, mask = causal)      (T, d_model)
    logits = H W_vocab + b_vocab                       (T, vocab_size)
    loss   = mean over i >= 1 of -log softmax(logits[i])[ids[i - 1]]

and its gradients, backwards (``model_gradients``):

    dlogits[i] = (softmax(logits[i]) - onehot(target[i])) / (T - 1)   (0 on row 0)
    dW_vocab = H^T dlogits,  db_vocab = column sums of dlogits,  dH = dlogits W_vocab^T
    dX, dW_Q, ... = multi_head_attention_backward(X, attention, dH, mask = causal)
    dE_pos[i] = dX[i],  dE_tok[t] = sum of dX[i] over the positions i holding token t

=============================  ===================================================
Model, model_from_example     the running example as a model to train
LETTERS, init_model            a toy vocabulary; a model of any size
make_sequences, targets        random training sequences; what each position must predict
forward, cross_entropy         logits and the loss with its gradient dlogits
model_gradients                loss and the gradient of every parameter, one sequence
batch_gradients                the mean over a batch
flatten, unflatten             a Model as one flat list of numbers, and back
AdamState, adam_step           the optimiser, written out
train                          steps of Adam; returns the model and the losses
attention_weights              each head's attention on one sequence
previous_token_weight(s)       how much attention query i puts on key i - 1
accuracy                       fraction of positions predicted right
=============================  ===================================================

Every random number comes from ``derive_rng(seed, name)``, every sum is a
``math.fsum``: a training run gives the same bits on CPython 3.10 to 3.13.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import NamedTuple, Optional

from ..core.attention import MHAWeights, attention_trace, check_weights, multi_head_attention
from ..core.checks import ShapeError, all_finite, check_int, check_matrix, check_number, check_vector, checked, kind
from ..core.gradients import column_sums, multi_head_attention_backward
from ..core.matrix import Matrix, Vector, add_row, matmul, transpose
from ..core.softmax_and_masks import causal_mask, softmax
from .example import EMBED_STD, Example
from .weights import check_layer_settings, check_size, check_std, derive_rng, init_matrix, init_mha_weights

__all__ = ["model_from_example", "make_sequences", "targets", "forward", "cross_entropy", "model_gradients",
           "batch_gradients", "flatten", "unflatten", "AdamState", "adam_step", "train", "attention_weights",
           "previous_token_weights", "accuracy"]

LETTERS = ["a", "b", "c", "d", "e"]  # the toy vocabulary

# Sizes have limits, so a typo (vocab_size=10**7, steps=10**9) is refused at once instead of running for hours.
MAX_VOCAB = 1000  # tokens in the vocabulary
MAX_SEQ_LEN = 1000  # positions in a sequence
MAX_D_MODEL = 1024  # width of the model
MAX_SEQUENCES = 10_000  # sequences drawn by one make_sequences call
MAX_STEPS = 10_000  # Adam steps in one train call
MAX_BATCH = 1000  # sequences in one batch
MAX_ADAM_STEP = 10**12  # AdamState.step: b ** step is computed as a float power


class Model(NamedTuple):
    """Every parameter of the toy model (its gradients have the same shape)."""

    token_embeddings: Matrix  # (vocab_size, d_model)
    position_embeddings: Matrix  # (seq_len, d_model)
    attention: MHAWeights  # one multi-head attention layer
    W_vocab: Matrix  # (d_model, vocab_size)
    b_vocab: Vector  # (vocab_size,)


# === The kinds of argument the door checks (see core/checks.py) ===
#
#   training model                           a Model whose tables fit each other; names the sizes
#                                            vocab_size, positions and parameters (len(flatten(model)))
#   training ids [vocab_size positions]      a non-empty list of token ids: 0 or more, and with a
#                                            model's sizes, below vocab_size and at most positions long
#   training sequence vocab_size positions   the same with at least 2 ids (position 0 has no target)
#   training sequences vocab_size positions  a non-empty list of training sequences
#   training targets T vocab_size            per row of the logits, a column (the target) or None;
#                                            at least one target
#   training example                         an Example that makes a model (model_from_example)
#   adam state n                             the AdamState of a previous step, for n parameters


class _Sizes(NamedTuple):
    vocab_size: int  # rows of the token table: token ids are 0 to vocab_size - 1
    positions: int  # rows of the position table: the longest sequence the model reads
    parameters: int  # numbers in the model, len(flatten(model))


def _no_biases(func: str, name: str, weights: MHAWeights) -> None:
    """The model here learns attention weights without biases: biases given would be dropped by training."""
    given = [part for part in ("b_Q", "b_K", "b_V", "b_O") if getattr(weights, part) is not None]
    if given:
        raise ValueError(f"{func}: {name} has biases ({', '.join(given)}); the model trained here has none "
                         "(build the example with bias=False)")


@kind("training model")
def _check_model(func: str, name: str, model: object, expected: tuple = ()) -> _Sizes:
    """Every table of the model: finite numbers, and shapes that fit each other; return its sizes."""
    if not isinstance(model, Model):
        raise TypeError(
            f"{func}: {name} must be a Model (from model_from_example or init_model), got {type(model).__name__}"
        )
    vocab_size, d_model = check_matrix(func, f"{name}.token_embeddings", model.token_embeddings, finite=True)
    positions, width = check_matrix(func, f"{name}.position_embeddings", model.position_embeddings, finite=True)
    if width != d_model:
        raise ShapeError(f"{func}: {name}.position_embeddings rows have {width} entries and "
                         f"{name}.token_embeddings rows have {d_model}; both must be d_model wide")
    dims = check_weights(func, f"{name}.attention", model.attention)
    _no_biases(func, f"{name}.attention", model.attention)
    if dims.d_model != d_model:
        raise ShapeError(f"{func}: {name}.attention is for d_model {dims.d_model} but the embeddings are "
                         f"{d_model} wide")
    rows, cols = check_matrix(func, f"{name}.W_vocab", model.W_vocab, finite=True)
    if (rows, cols) != (d_model, vocab_size):
        raise ShapeError(f"{func}: {name}.W_vocab is {rows}x{cols}; it must be d_model x vocab_size = "
                         f"{d_model}x{vocab_size}")
    if check_vector(func, f"{name}.b_vocab", model.b_vocab, finite=True) != vocab_size:
        raise ShapeError(f"{func}: {name}.b_vocab has {len(model.b_vocab)} entries; it needs one per token "
                         f"({vocab_size})")
    parameters = sum(len(M) * len(M[0]) for M in _matrices(model)) + vocab_size
    return _Sizes(vocab_size, positions, parameters)


@kind("training ids")
def _check_ids(func: str, name: str, ids: object, expected: tuple = (), *, at_least: int = 1) -> None:
    """ids (T,), T >= at_least: token ids of 0 or more.

    With a model's sizes, ``expected`` = (vocab_size, positions), the ids must be ones
    the model has rows for: one token row each, one position row each.
    """
    if not isinstance(ids, (list, tuple)) or len(ids) < at_least:
        what = "a non-empty list of" if at_least == 1 else f"a list of at least {at_least}"
        raise ShapeError(f"{func}: {name} must be {what} token ids, got {ids!r:.60}")
    if not expected:  # no model: any token id of 0 or more
        for i, t in enumerate(ids):
            if check_int(func, f"{name}[{i}]", t) < 0:
                raise ValueError(f"{func}: {name}[{i}] is {t}; token ids are 0 or more")
        return
    vocab_size, positions = expected
    if len(ids) > positions:
        raise ShapeError(
            f"{func}: {name} has {len(ids)} tokens but the position table has "
            f"{positions} rows; it needs one row per position"
        )
    for i, t in enumerate(ids):
        if not 0 <= check_int(func, f"{name}[{i}]", t) < vocab_size:
            raise ValueError(f"{func}: {name}[{i}] is {t}; token ids must be 0 to {vocab_size - 1}")


@kind("training sequence")
def _check_sequence(func: str, name: str, ids: object, expected: tuple) -> None:
    """A sequence to score: at least 2 token ids, since position 0 has no target."""
    _check_ids(func, name, ids, expected, at_least=2)


@kind("training sequences")
def _check_sequences(func: str, name: str, sequences: object, expected: tuple) -> None:
    if not isinstance(sequences, (list, tuple)) or len(sequences) == 0:
        raise ShapeError(f"{func}: {name} must be a non-empty list of sequences (lists of token ids), "
                         f"got {sequences!r:.60}")
    if len(sequences) > MAX_SEQUENCES:
        raise ValueError(f"{func}: {name} has {len(sequences):,} sequences; at most {MAX_SEQUENCES:,} at once")
    for n, ids in enumerate(sequences):
        _check_ids(func, f"{name}[{n}]", ids, expected, at_least=2)


@kind("training targets")
def _check_targets(func: str, name: str, target: object, expected: tuple) -> None:
    """One entry per row of the logits (T of them): None, or a column of the logits (0 to vocab_size - 1)."""
    rows, vocab_size = expected
    if not isinstance(target, (list, tuple)) or len(target) != rows:
        raise ShapeError(
            f"{func}: {name} must be a list with one entry (a token id or None) per row of logits ({rows})")
    for i, t in enumerate(target):
        if t is not None and not 0 <= check_int(func, f"{name}[{i}]", t) < vocab_size:
            raise ValueError(
                f"{func}: {name}[{i}] is {t}; a target must be None or a column of logits, 0 to {vocab_size - 1}")
    if all(t is None for t in target):
        raise ValueError(f"{func}: every target is None; there is nothing to score")


@kind("training example")
def _check_example(func: str, name: str, ex: object, expected: tuple = ()) -> None:
    """An Example whose tables, weights and seed make a model (as ``running_example`` builds them)."""
    if not isinstance(ex, Example):
        raise TypeError(f"{func}: {name} must be an Example (from running_example), got {type(ex).__name__}")
    _, width = check_matrix(func, f"{name}.token_embeddings", ex.token_embeddings, finite=True)
    _, d_model = check_matrix(func, f"{name}.x", ex.x, finite=True)
    _, positions_width = check_matrix(func, f"{name}.position_embeddings", ex.position_embeddings, finite=True)
    for table, w in (("token_embeddings", width), ("position_embeddings", positions_width)):
        if w != d_model:
            raise ShapeError(f"{func}: {name}.{table} rows have {w} entries and {name}.x rows have {d_model}; "
                             "both must be d_model wide")
    dims = check_weights(func, f"{name}.weights", ex.weights)
    _no_biases(func, f"{name}.weights", ex.weights)
    if dims.d_model != d_model:
        raise ShapeError(f"{func}: {name}.weights is for d_model {dims.d_model} but the embeddings are "
                         f"{d_model} wide")
    if not isinstance(ex.settings, dict) or "seed" not in ex.settings:
        raise TypeError(f"{func}: {name}.settings must be the dict of running_example's settings, with the seed")
    check_int(func, f"{name}.seed", ex.seed)


@kind("adam state")
def _check_adam_state(func: str, name: str, state: object, expected: tuple) -> None:
    """The state of the previous step, for n parameters: a step count, and n running means each."""
    (n,) = expected
    if not isinstance(state, AdamState):
        raise TypeError(f"{func}: {name} must be None (the first step) or the AdamState of the previous step, "
                        f"got {type(state).__name__}")
    check_size(func, f"{name}.step", state.step, MAX_ADAM_STEP)
    for field, values in (("m", state.m), ("v", state.v)):
        if check_vector(func, f"{name}.{field}", values, finite=True) != n:
            raise ShapeError(f"{func}: {name}.{field} has {len(values)} entries and params has {n}; one per parameter")
    for i, v_i in enumerate(state.v):
        if v_i < 0:
            raise ValueError(f"{func}: {name}.v[{i}] is {v_i}; a running mean of squares is 0 or more")


# === The model ===


def _init_model_rules(func: str, arguments: dict, sizes: dict) -> None:
    """Every size within its limit (at most d_model heads), embed_std within MAX_STD, heads that split d_model."""
    d_model, num_heads = arguments["d_model"], arguments["num_heads"]
    for name, limit in (("vocab_size", MAX_VOCAB), ("seq_len", MAX_SEQ_LEN), ("d_model", MAX_D_MODEL),
                        ("num_heads", d_model)):
        check_size(func, name, arguments[name], limit)
    check_std(func, "embed_std", arguments["embed_std"])
    check_layer_settings(func, d_model, num_heads, seed=arguments["seed"])


@checked(vocab_size="positive int", seq_len="positive int", d_model="positive int", num_heads="positive int",
         seed="int", embed_std="positive number", also=_init_model_rules)
def init_model(
    vocab_size: int, seq_len: int, d_model: int, num_heads: int, *, seed: int, embed_std: float = EMBED_STD
) -> Model:
    """A (vocab_size, seq_len, d_model, num_heads) model with seeded random parameters.

    Embeddings are N(0, embed_std) draws (0.5, as in the running example: small
    enough that attention starts out spread over the keys it may see); the
    attention weights Xavier-uniform (as ``init_mha_weights``); W_vocab
    Xavier-uniform; b_vocab zero.

    >>> m = init_model(5, 6, 8, 2, seed=0)
    >>> len(m.token_embeddings), len(m.position_embeddings), len(m.W_vocab), len(m.b_vocab)
    (5, 6, 8, 5)
    """
    def table(rows: int, name: str) -> Matrix:
        rng = derive_rng(seed, name)
        return [[rng.gauss(0.0, embed_std) for _ in range(d_model)] for _ in range(rows)]

    return Model(
        token_embeddings=table(vocab_size, "toy/token_embedding"),
        position_embeddings=table(seq_len, "toy/position_embedding"),
        attention=init_mha_weights(d_model, num_heads, seed=seed),
        W_vocab=init_matrix(d_model, vocab_size, derive_rng(seed, "toy/W_vocab")),
        b_vocab=[0.0] * vocab_size,
    )


@checked(ex="training example")
def model_from_example(ex: Example) -> Model:
    """The running example as a model to train: its embedding tables and attention weights as they are,
    and a new (d_model, vocab_size) W_vocab, drawn from ``derive_rng(ex.seed, "training/W_vocab")``.

    >>> from mha_lists import running_example
    >>> m = model_from_example(running_example())
    >>> len(m.W_vocab), len(m.W_vocab[0]), m.b_vocab
    (16, 6, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    """
    vocab_size, d_model = len(ex.token_embeddings), len(ex.x[0])
    W_vocab = init_matrix(d_model, vocab_size, derive_rng(ex.seed, "training/W_vocab"))
    copy = lambda M: [list(row) for row in M]  # noqa: E731
    return Model(copy(ex.token_embeddings), copy(ex.position_embeddings), ex.weights, W_vocab, [0.0] * vocab_size)


# === The task ===


def _sequences_rules(func: str, arguments: dict, sizes: dict) -> None:
    check_size(func, "count", arguments["count"], MAX_SEQUENCES)
    check_size(func, "seq_len", arguments["seq_len"], MAX_SEQ_LEN)
    check_size(func, "vocab_size", arguments["vocab_size"], MAX_VOCAB)


@checked(count="positive int", seq_len="positive int", vocab_size="positive int", rng="rng", also=_sequences_rules)
def make_sequences(count: int, seq_len: int, vocab_size: int, rng: random.Random) -> list[list[int]]:
    """``count`` sequences of ``seq_len`` token ids drawn uniformly from 0..vocab_size-1.

    >>> make_sequences(2, 4, 5, random.Random(0))
    [[3, 3, 0, 2], [4, 3, 3, 2]]
    """
    return [[rng.randrange(vocab_size) for _ in range(seq_len)] for _ in range(count)]


@checked(ids="training ids")
def targets(ids: Sequence[int]) -> list[Optional[int]]:
    """What each position must predict: the previous token (nothing at position 0).

    >>> targets([3, 1, 4, 1])
    [None, 3, 1, 4]
    """
    return [None] + list(ids[:-1])


# === Forward pass and loss ===


class ForwardPass(NamedTuple):
    x: Matrix  # (T, d_model): token + position embeddings
    hidden: Matrix  # (T, d_model): the attention layer's output
    logits: Matrix  # (T, vocab_size)


@checked(model="training model", ids="training ids vocab_size positions", finite_result=lambda fwd: fwd.logits)
def forward(model: Model, ids: Sequence[int]) -> ForwardPass:
    """Embeddings, causal multi-head attention and the projection to the vocabulary, for ids (T,)."""
    x = _embed(model, ids)
    hidden = multi_head_attention(x, model.attention, mask=causal_mask(len(ids)))
    logits = add_row(matmul(hidden, model.W_vocab), model.b_vocab)
    return ForwardPass(x, hidden, logits)


def _embed(model: Model, ids: Sequence[int]) -> Matrix:
    """X = E_tok[ids] + E_pos[0..T-1]: (T, d_model)."""
    x = [[a + b for a, b in zip(model.token_embeddings[t], model.position_embeddings[i])]
         for i, t in enumerate(ids)]
    if not all_finite(x):  # two entries near float64's largest: the door names the overflow
        raise OverflowError("token embedding + position embedding")
    return x


# Its result is looked at even when a checked function calls it (inside=True): a loss that overflows
# to inf would otherwise go unseen, and is then reported under the caller's name.
@checked(logits="finite matrix T vocab_size", target="training targets T vocab_size",
         finite_result=lambda result: result[0], inside=True)
def cross_entropy(logits: Matrix, target: Sequence[Optional[int]]) -> tuple[float, Matrix]:
    """Mean of -log softmax(logits[i])[target[i]] over the rows with a target; and d loss / d logits.

    The gradient of row i is (softmax(logits[i]) - onehot(target[i])) / n for
    the n rows with a target, 0 for the others.

    >>> loss, d = cross_entropy([[0.0, 0.0], [5.0, 1.0]], [1, None])
    >>> round(loss, 4), d
    (0.6931, [[0.5, -0.5], [0.0, 0.0]])
    """
    n = sum(1 for t in target if t is not None)
    losses, grads = [], []
    for row, t in zip(logits, target):
        if t is None:
            grads.append([0.0] * len(row))
            continue
        top = max(row)
        log_total = math.log(math.fsum(math.exp(z - top) for z in row)) + top
        losses.append(log_total - row[t])
        p = softmax(row)
        grads.append([(p_j - (1.0 if j == t else 0.0)) / n for j, p_j in enumerate(p)])
    return math.fsum(losses) / n, grads  # logits far apart (1e308 and -1e308): an infinite loss, refused


# === Gradients ===


@checked(model="training model", ids="training sequence vocab_size positions")
def model_gradients(model: Model, ids: Sequence[int]) -> tuple[float, Model]:
    """The loss on one sequence of ids (T,), T >= 2, and the gradient of every parameter, as a Model of gradients."""
    fwd = forward(model, ids)
    loss, d_logits = cross_entropy(fwd.logits, targets(ids))
    dW_vocab = matmul(transpose(fwd.hidden), d_logits)
    db_vocab = column_sums(d_logits)
    d_hidden = matmul(d_logits, transpose(model.W_vocab))
    g = multi_head_attention_backward(fwd.x, model.attention, d_hidden, mask=causal_mask(len(ids)))
    d_attention = MHAWeights(g.W_Q, g.W_K, g.W_V, g.W_O)
    d_positions = [list(row) for row in g.x] + [[0.0] * len(g.x[0])
                                                for _ in range(len(model.position_embeddings) - len(ids))]
    d_tokens = []
    for t in range(len(model.token_embeddings)):
        rows = [g.x[i] for i, token in enumerate(ids) if token == t]
        d_tokens.append([math.fsum(col) for col in zip(*rows)] if rows else [0.0] * len(g.x[0]))
    return loss, Model(d_tokens, d_positions, d_attention, dW_vocab, db_vocab)


@checked(model="training model")
def flatten(model: Model) -> list[float]:
    """Every parameter of the model in one list, in a fixed order (``unflatten`` reverses it)."""
    flat: list[float] = []
    for M in _matrices(model):
        for row in M:
            flat.extend(row)
    flat.extend(model.b_vocab)
    return flat


def _matrices(model: Model) -> list[Matrix]:
    a = model.attention
    return [model.token_embeddings, model.position_embeddings, *a.W_Q, *a.W_K, *a.W_V, a.W_O, model.W_vocab]


@checked(like="training model", flat="finite vector parameters",
         why={"parameters": "flat has {value} numbers but a model shaped like `like` has {expected}"})
def unflatten(flat: Sequence[float], like: Model) -> Model:
    """A Model shaped like ``like`` holding the numbers of ``flat`` (the order of ``flatten``)."""
    position = 0

    def take(M: Matrix) -> Matrix:
        nonlocal position
        width = len(M[0])
        rows = []
        for _ in M:
            rows.append(list(flat[position:position + width]))
            position += width
        return rows

    a = like.attention
    tokens, positions = take(like.token_embeddings), take(like.position_embeddings)
    W_Q, W_K, W_V = [take(M) for M in a.W_Q], [take(M) for M in a.W_K], [take(M) for M in a.W_V]
    W_O, W_vocab = take(a.W_O), take(like.W_vocab)
    b_vocab = list(flat[position:position + len(like.b_vocab)])
    return Model(tokens, positions, MHAWeights(W_Q, W_K, W_V, W_O), W_vocab, b_vocab)


def _batch_size(func: str, arguments: dict, sizes: dict) -> None:
    if len(arguments["batch"]) > MAX_BATCH:
        raise ValueError(f"{func}: batch has {len(arguments['batch']):,} sequences; a batch has at most {MAX_BATCH:,}")


@checked(model="training model", batch="training sequences vocab_size positions", also=_batch_size)
def batch_gradients(model: Model, batch: Sequence[Sequence[int]]) -> tuple[float, list[float]]:
    """Mean loss over a batch of sequences, and the mean gradient as a flat list (order of ``flatten``)."""
    losses, grads = [], []
    for ids in batch:
        loss, g = model_gradients(model, ids)
        losses.append(loss)
        grads.append(flatten(g))
    n = len(batch)
    return math.fsum(losses) / n, [math.fsum(entries) / n for entries in zip(*grads)]


# === Adam ===


class AdamState(NamedTuple):
    step: int  # steps taken so far
    m: list[float]  # running mean of the gradients
    v: list[float]  # running mean of the squared gradients


def _betas_in_range(func: str, arguments: dict, sizes: dict) -> None:
    betas = arguments["betas"]
    if not isinstance(betas, (list, tuple)) or len(betas) != 2 or not all(
            0 <= check_number(func, "betas", b) < 1 for b in betas):
        raise ValueError(f"{func}: betas must be two numbers in [0, 1), got {betas!r}")


# Its result is looked at even when a checked function calls it (inside=True): a squared gradient,
# or a step, beyond float64's range is refused under the caller's name.
@checked(params="finite vector n", grads="finite vector n", state="optional adam state n", lr="positive number",
         eps="positive number", also=_betas_in_range,
         why={"grads": "params has {expected} entries and grads has {value}; one gradient per parameter"},
         finite_result=lambda result: [result[0], result[1].m, result[1].v], inside=True)
def adam_step(
    params: Sequence[float],
    grads: Sequence[float],
    state: Optional[AdamState],
    *,
    lr: float = 1e-3,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> tuple[list[float], AdamState]:
    """One Adam step (PyTorch's defaults): new parameters and new state; nothing is changed in place.

        m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
        p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    The first step moves every parameter by about lr against the sign of its gradient:

    >>> p, s = adam_step([1.0, 1.0], [0.5, -2.0], None, lr=0.1)
    >>> [round(x, 6) for x in p], s.step
    ([0.9, 1.1], 1)
    """
    b1, b2 = betas
    m0 = [0.0] * len(params) if state is None else state.m
    v0 = [0.0] * len(params) if state is None else state.v
    t = 1 if state is None else state.step + 1
    m = [b1 * m_i + (1 - b1) * g for m_i, g in zip(m0, grads)]
    v = [b2 * v_i + (1 - b2) * g * g for v_i, g in zip(v0, grads)]
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new = [p - lr * (m_i / c1) / (math.sqrt(v_i / c2) + eps) for p, m_i, v_i in zip(params, m, v)]
    return new, AdamState(t, m, v)


def _train_rules(func: str, arguments: dict, sizes: dict) -> None:
    """steps and batch_size within their limits; seq_len from 2 to the model's positions."""
    check_size(func, "steps", arguments["steps"], MAX_STEPS)
    check_size(func, "batch_size", arguments["batch_size"], MAX_BATCH)
    seq_len = arguments["seq_len"]
    if not 2 <= seq_len <= sizes["positions"]:
        raise ValueError(
            f"{func}: seq_len is {seq_len}; it must be at least 2 (position 0 has no target) and at most "
            f"the {sizes['positions']} rows of the position table"
        )


@checked(model="training model", steps="positive int", batch_size="positive int", seq_len="positive int",
         seed="int", lr="positive number", also=_train_rules)
def train(
    model: Model,
    *,
    steps: int,
    batch_size: int,
    seq_len: int,
    seed: int,
    lr: float = 0.01,
) -> tuple[Model, list[float]]:
    """``steps`` Adam steps, each on a fresh batch of random sequences of ``seq_len`` tokens.

    Returns the trained model and each step's loss (the batch's mean, before the step).
    """
    rng = derive_rng(seed, "toy/batches")
    vocab_size = len(model.token_embeddings)
    params, state, losses = flatten(model), None, []
    for _ in range(steps):
        batch = make_sequences(batch_size, seq_len, vocab_size, rng)
        loss, grads = batch_gradients(unflatten(params, model), batch)
        params, state = adam_step(params, grads, state, lr=lr)
        losses.append(loss)
    return unflatten(params, model), losses


# === Measuring what was learned ===


def _square_self_attention(func: str, arguments: dict, sizes: dict) -> None:
    rows, cols = sizes["T"], sizes["T_k"]
    if rows != cols or rows < 2:
        raise ShapeError(
            f"{func}: attention is {rows}x{cols}; it must be square (self-attention) with at least 2 rows"
        )


@checked(attention="finite matrix T T_k", also=_square_self_attention)
def previous_token_weight(attention: Matrix) -> float:
    """Mean weight that queries i >= 1 put on key i - 1 (1.0 = always exactly the previous token).

    >>> previous_token_weight([[1.0, 0.0, 0.0], [0.75, 0.25, 0.0], [0.0, 0.5, 0.5]])
    0.625
    """
    return math.fsum(attention[i][i - 1] for i in range(1, len(attention))) / (len(attention) - 1)


@checked(model="training model", ids="training ids vocab_size positions")
def attention_weights(model: Model, ids: Sequence[int]) -> list[Matrix]:
    """Each head's (T, T) attention weights when the model reads ``ids`` (T,)."""
    return attention_trace(_embed(model, ids), model.attention, mask=causal_mask(len(ids))).attention


@checked(model="training model", sequences="training sequences vocab_size positions")
def previous_token_weights(model: Model, sequences: Sequence[Sequence[int]]) -> list[float]:
    """Per head, ``previous_token_weight`` averaged over the sequences (each of at least 2 tokens)."""
    per_sequence = [[previous_token_weight(A) for A in attention_weights(model, ids)] for ids in sequences]
    return [math.fsum(column) / len(sequences) for column in zip(*per_sequence)]


@checked(model="training model", sequences="training sequences vocab_size positions")
def accuracy(model: Model, sequences: Sequence[Sequence[int]]) -> float:
    """Fraction of positions i >= 1 where the most likely token is the previous one."""
    right, total = 0, 0
    for ids in sequences:
        logits = forward(model, ids).logits
        for row, t in zip(logits[1:], targets(ids)[1:]):
            right += row.index(max(row)) == t
            total += 1
    return right / total
