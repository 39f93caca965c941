"""A toy task that teaches a layer to attend: copy the previous token (notebook 17).

The task: read a random sequence of letters and, at every position i >= 1,
predict the letter at position i - 1. Nothing in a token says what came before
it, so the only way to solve the task is for attention to look one position
back: the pattern training must discover.

The model is ``model.Model`` with one attention layer, positions added to the
input and no residual connection:

    X      = E_tok[ids] + E_pos[0..T-1]                       (T, d_model)
    H      = multi_head_attention(X, attention, mask = causal)  (T, d_model)
    logits = H W_U + b_U                                      (T, vocab_size)
    loss   = mean over i >= 1 of -log softmax(logits[i])[ids[i - 1]]

Its forward pass, loss, gradients, flat parameters and Adam are model.py's;
this module adds the task: the sequences, the targets, and what is measured.

=============================  ===================================================
init_model, model_from_example a model of any size; the running example as a model
make_sequences, targets        random training sequences; what each position must predict
forward, cross_entropy         (model.py's) every intermediate; the loss and dlogits
model_gradients                loss and the gradient of every parameter, one sequence
batch_gradients                the mean over a batch
flatten, unflatten, AdamState  (model.py's) the parameters as a flat list; Adam's state
adam_step                      (model.py's) one step of the optimiser, written out
train                          steps of Adam on fresh batches; returns the model and the losses
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
from typing import Optional

from ..core.attention import check_weights
from ..core.checks import check_type, ShapeError, check_int, check_list, check_matrix, check_number, shorten, too_large
from ..core.matrix import Matrix
from .example import EMBED_STD, Example
from .model import (AdamState, Model, Sizes, adam_step, batch_step, check_ids, check_model, check_training_work,
                    previous_share,
                    check_work, cross_entropy, fit, flatten, forward, forward_work, run, sequence_gradients,
                    unflatten)
from .weights import check_layer_settings, check_size, check_std, derive_rng, init_matrix, init_mha_weights

__all__ = ["model_from_example", "make_sequences", "targets", "forward", "cross_entropy", "model_gradients",
           "batch_gradients", "flatten", "unflatten", "AdamState", "adam_step", "train", "attention_weights",
           "previous_token_weights", "accuracy"]

LETTERS = ["a", "b", "c", "d", "e"]  # the toy vocabulary

# Sizes have limits, so a typo (vocab_size=10**7, steps=10**9) is refused at once instead of running for hours.
MAX_VOCAB = 1000  # tokens in the vocabulary
MAX_SEQ_LEN = 1000  # positions in a sequence
MAX_D_MODEL = 1024  # width of the model
MAX_SEQUENCES = 10_000  # sequences drawn by one make_sequences call, or measured by one call
MAX_STEPS = 10_000  # Adam steps in one train call
MAX_BATCH = 1000  # sequences in one batch


# === The model ===


def init_model(vocab_size: int, seq_len: int, d_model: int, num_heads: int, *, seed: int,
               embed_std: float = EMBED_STD) -> Model:
    """A (vocab_size, seq_len, d_model, num_heads) model with seeded random parameters.

    Embeddings are N(0, embed_std) draws (0.5, as in the running example: small
    enough that attention starts out spread over the keys it may see); the
    attention weights Xavier-uniform (as ``init_mha_weights``); W_U
    Xavier-uniform (from the stream "toy/W_vocab", W_U's name before the models
    became one: renamed, every draw would change); b_U zero.

    >>> m = init_model(5, 6, 8, 2, seed=0)
    >>> len(m.token_embeddings), len(m.position_embeddings), len(m.W_U), len(m.b_U)
    (5, 6, 8, 5)
    """
    for name, value, limit in (("vocab_size", vocab_size, MAX_VOCAB), ("seq_len", seq_len, MAX_SEQ_LEN),
                               ("d_model", d_model, MAX_D_MODEL)):
        check_size("init_model", name, value, limit)
    check_size("init_model", "num_heads", num_heads, d_model)
    check_int("init_model", "seed", seed)
    check_std("init_model", "embed_std", embed_std)
    check_layer_settings("init_model", d_model, num_heads, seed=seed)

    def table(rows: int, name: str) -> Matrix:
        rng = derive_rng(seed, name)
        return [[rng.gauss(0.0, embed_std) for _ in range(d_model)] for _ in range(rows)]

    return Model(token_embeddings=table(vocab_size, "toy/token_embedding"),
                 position_embeddings=table(seq_len, "toy/position_embedding"),
                 layers=[init_mha_weights(d_model, num_heads, seed=seed)],
                 W_U=init_matrix(d_model, vocab_size, derive_rng(seed, "toy/W_vocab")),
                 b_U=[0.0] * vocab_size, positions="input", residual=False)


def model_from_example(ex: Example) -> Model:
    """The running example as a model to train: its embedding tables and attention weights as they are,
    and a new (d_model, vocab_size) W_U, drawn from ``derive_rng(ex.seed, "training/W_vocab")``.

    >>> from mha_lists import running_example
    >>> m = model_from_example(running_example())
    >>> len(m.W_U), len(m.W_U[0]), m.b_U
    (16, 6, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    """
    check_example("model_from_example", "ex", ex)
    vocab_size, d_model = len(ex.token_embeddings), len(ex.x[0])
    W_U = init_matrix(d_model, vocab_size, derive_rng(ex.seed, "training/W_vocab"))
    copy = lambda M: [list(row) for row in M]  # noqa: E731
    return Model(copy(ex.token_embeddings), copy(ex.position_embeddings), [ex.weights], W_U, [0.0] * vocab_size,
                 positions="input", residual=False)


def check_example(func: str, name: str, ex: object) -> None:
    """An Example whose tables, weights and seed make a model (as ``running_example`` builds them)."""
    if not isinstance(ex, Example):
        raise TypeError(f"{func}: {name} must be an Example (from running_example), got {type(ex).__name__}")
    _, width = check_matrix(func, f"{name}.token_embeddings", ex.token_embeddings)
    _, d_model = check_matrix(func, f"{name}.x", ex.x)
    _, positions_width = check_matrix(func, f"{name}.position_embeddings", ex.position_embeddings)
    for table, w in (("token_embeddings", width), ("position_embeddings", positions_width)):
        if w != d_model:
            raise ShapeError(f"{func}: {name}.{table} rows have {w} entries and {name}.x rows have {d_model}; "
                             "both must be d_model wide")
    dims = check_weights(func, f"{name}.weights", ex.weights)
    given = [part for part in ("b_Q", "b_K", "b_V", "b_O") if getattr(ex.weights, part) is not None]
    if given:
        raise ValueError(f"{func}: {name}.weights has biases ({', '.join(given)}); the model trained here has none "
                         "(build the example with bias=False)")
    if dims["d_model"] != d_model:
        raise ShapeError(f"{func}: {name}.weights is for d_model {dims['d_model']} but the embeddings are "
                         f"{d_model} wide")
    if not isinstance(ex.settings, dict) or "seed" not in ex.settings:
        raise TypeError(f"{func}: {name}.settings must be the dict of running_example's settings, with the seed")
    check_int(func, f"{name}.seed", ex.seed)


# === The task ===


def make_sequences(count: int, seq_len: int, vocab_size: int, rng: random.Random) -> list[list[int]]:
    """``count`` sequences of ``seq_len`` token ids drawn uniformly from 0..vocab_size-1.

    >>> make_sequences(2, 4, 5, random.Random(0))
    [[3, 3, 0, 2], [4, 3, 3, 2]]
    """
    check_size("make_sequences", "count", count, MAX_SEQUENCES)
    check_size("make_sequences", "seq_len", seq_len, MAX_SEQ_LEN)
    check_size("make_sequences", "vocab_size", vocab_size, MAX_VOCAB)
    check_type("make_sequences", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    return draw_sequences(count, seq_len, vocab_size, rng)


def draw_sequences(count: int, seq_len: int, vocab_size: int, rng: random.Random) -> list[list[int]]:
    return [[rng.randrange(vocab_size) for _ in range(seq_len)] for _ in range(count)]


def targets(ids: Sequence[int]) -> list[Optional[int]]:
    """What each position must predict: the previous token (nothing at position 0).

    >>> targets([3, 1, 4, 1])
    [None, 3, 1, 4]
    """
    check_ids("targets", "ids", ids)
    return [None] + list(ids[:-1])


def check_sequences(func: str, name: str, sequences: object, sizes: Sizes, most: int = MAX_SEQUENCES) -> int:
    """A non-empty list of at most ``most`` sequences of at least 2 token ids the model reads; return the
    multiply-adds of one forward pass over them all."""
    check_list(func, name, sequences, "sequences (lists of token ids)")
    if len(sequences) > most:
        raise ValueError(f"{func}: {name} has {len(sequences):,} sequences; at most {most:,} at once")
    return sum(forward_work(sizes, check_ids(func, f"{name}[{n}]", ids, sizes, at_least=2))
               for n, ids in enumerate(sequences))


# === Gradients ===


def model_gradients(model: Model, ids: Sequence[int]) -> tuple[float, Model]:
    """The loss on one sequence of ids (T,), T >= 2, and the gradient of every parameter, as a Model of gradients."""
    sizes = check_model("model_gradients", "model", model)
    T = check_ids("model_gradients", "ids", ids, sizes, at_least=2)
    check_work("model_gradients", "one forward and backward pass", 3 * forward_work(sizes, T))
    try:
        loss, grads, _ = sequence_gradients(model, ids, [None] + list(ids[:-1]))
    except OverflowError as error:
        raise too_large("model_gradients", error) from None
    return loss, grads


def batch_gradients(model: Model, batch: Sequence[Sequence[int]]) -> tuple[float, list[float]]:
    """Mean loss over a batch of sequences, and the mean gradient as a flat list (order of ``flatten``)."""
    sizes = check_model("batch_gradients", "model", model)
    work = check_sequences("batch_gradients", "batch", batch, sizes, MAX_BATCH)
    check_work("batch_gradients", "one batch, forward and backward", 3 * work)
    try:
        loss, grads, _, _ = batch_step(model, [(ids, [None] + list(ids[:-1])) for ids in batch])
    except OverflowError as error:
        raise too_large("batch_gradients", error) from None
    return loss, grads


def train(model: Model, *, steps: int, batch_size: int, seq_len: int, seed: int,
          lr: float = 0.01) -> tuple[Model, list[float]]:
    """``steps`` Adam steps, each on a fresh batch of random sequences of ``seq_len`` tokens.

    Returns the trained model and each step's loss (the batch's mean, before the step).
    """
    sizes = check_model("train", "model", model)
    check_size("train", "steps", steps, MAX_STEPS)
    check_size("train", "batch_size", batch_size, MAX_BATCH)
    if not 2 <= check_int("train", "seq_len", seq_len) <= sizes.positions:
        raise ValueError(f"train: seq_len is {shorten(seq_len)}; it must be at least 2 (position 0 has no target) "
                         f"and at most the {sizes.positions} rows of the position table")
    check_int("train", "seed", seed)
    check_number("train", "lr", lr, positive=True)
    check_training_work("train", steps, batch_size, 3 * forward_work(sizes, seq_len))
    rng = derive_rng(seed, "toy/batches")
    batches = [[(ids, [None] + ids[:-1]) for ids in draw_sequences(batch_size, seq_len, sizes.vocab_size, rng)]
               for _ in range(steps)]
    return fit(model, batches, lr=lr)


# === Measuring what was learned ===


def previous_token_weight(attention: Matrix) -> float:
    """Mean weight that queries i >= 1 put on key i - 1 (1.0 = always exactly the previous token).

    >>> previous_token_weight([[1.0, 0.0, 0.0], [0.75, 0.25, 0.0], [0.0, 0.5, 0.5]])
    0.625
    """
    rows, cols = check_matrix("previous_token_weight", "attention", attention)
    if rows != cols or rows < 2:
        raise ShapeError(f"previous_token_weight: attention is {rows}x{cols}; it must be square "
                         "(self-attention) with at least 2 rows")
    return previous_share(attention)


def attention_weights(model: Model, ids: Sequence[int]) -> list[Matrix]:
    """Each head's (T, T) attention weights in the first layer when the model reads ``ids`` (T,)."""
    sizes = check_model("attention_weights", "model", model)
    check_work("attention_weights", "one forward pass", forward_work(sizes, check_ids("attention_weights", "ids",
                                                                                     ids, sizes)))
    try:
        return run(model, ids).layers[0].attention
    except OverflowError as error:
        raise too_large("attention_weights", error) from None


def previous_token_weights(model: Model, sequences: Sequence[Sequence[int]]) -> list[float]:
    """Per head, ``previous_token_weight`` averaged over the sequences (each of at least 2 tokens)."""
    sizes = check_model("previous_token_weights", "model", model)
    check_work("previous_token_weights", "one forward pass of each sequence",
               check_sequences("previous_token_weights", "sequences", sequences, sizes))
    try:
        per_sequence = [[previous_share(A) for A in run(model, ids).layers[0].attention] for ids in sequences]
    except OverflowError as error:
        raise too_large("previous_token_weights", error) from None
    return [math.fsum(column) / len(sequences) for column in zip(*per_sequence)]


def accuracy(model: Model, sequences: Sequence[Sequence[int]]) -> float:
    """Fraction of positions i >= 1 where the most likely token is the previous one."""
    sizes = check_model("accuracy", "model", model)
    check_work("accuracy", "one forward pass of each sequence",
               check_sequences("accuracy", "sequences", sequences, sizes))
    right, total = 0, 0
    for ids in sequences:
        try:
            logits = run(model, ids).logits
        except OverflowError as error:
            raise too_large("accuracy", error) from None
        for row, t in zip(logits[1:], ids[:-1]):
            right += row.index(max(row)) == t
            total += 1
    return right / total
