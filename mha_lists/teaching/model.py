"""One small model for every task: token embeddings, positions, attention layers, the unembedding.

Notebook 17's one-layer model (copy the previous token) and notebooks 18-19's
two-layer attention-only model (induction heads) are this model with different
options. For one sequence of token ids (T,) and L layers of causal multi-head
attention (no biases, no MLP, no LayerNorm):

    x_0      = E_tok[ids] + E_pos[0..T-1]        positions="input": positions in the stream
    x_0      = E_tok[ids]                          positions="queries and keys": only layer 0's
                                                   queries and keys read x_0 + E_pos; its values read x_0
    layer l: a_l     = multi_head_attention(x_l, mask = causal)
             x_{l+1} = x_l + a_l                   residual=True: each layer adds to the stream
             x_{l+1} = a_l                         residual=False
    logits   = x_L W_U + b_U                       (T, vocab_size)
    loss     = mean over the scored positions i of -log softmax(logits[i])[target[i]]

and its gradients, backwards (``backward``), last layer first:

    dlogits[i] = (softmax(logits[i]) - onehot(target[i])) / n        (0 on a row without a target)
    dW_U = x_L^T dlogits,  db_U = column sums of dlogits,  dx_L = dlogits W_U^T
    layer l, G = dx_{l+1}: the core's backward pass of the layer gives dW_Q, dW_K, dW_V, dW_O and
             d(input); dx_l = G + d(input) with the residual, d(input) without it
    dE_pos[i] = dx_0[i] (positions="input") or layer 0's d(query and key input)[i]
    dE_tok[t] = sum of dx_0[i] over the positions i holding token t

Every layer runs through the core: ``attention.trace_layer`` forward and
``gradients.backward`` backward, the head loop inside them. When positions
enter only layer 0's queries and keys, that layer's Q and K read x_0 + E_pos
and its V reads x_0 (the core's ``values``).

=====================================  ===================================================
Model, Trace, Step                     the parameters and two options; a forward pass; a step
forward, run                           a forward pass: checked; on checked arguments
cross_entropy, loss_of                 the loss and d loss / d logits
loss_and_gradients, sequence_gradients every parameter's gradient, one sequence
backward                               the backward pass through a forward pass (a Trace)
batch_gradients, batch_step            a batch: every scored position counts once
flatten, unflatten, shaped             the parameters as one flat list, and back
AdamState, adam_step, adam_update      the optimiser, written out
train, fit                             Adam on each batch in turn, with a progress callback
check_model, check_ids, check_...     the checks a function taking these runs at its top
forward_work, check_work, ...          how much arithmetic a call takes; its limits
random_model, previous_share           a task's starting model; a head's share on the token before
=====================================  ===================================================

The pairs above are a public function that checks its arguments and a step
that trusts them: a task (training.py, induction.py) checks its own arguments
once, under its own name, and then runs the steps, which raise
OverflowError("the ...") when a number leaves float64's range; the function
called names it. Checking a model looks at every entry (as costly as a small
forward pass), so it happens once per call, never once per sequence.

Every sum is a ``math.fsum`` (and the tasks draw every random number from
``derive_rng``): a training run gives the same bits on CPython 3.10 to 3.13.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional, Union

from ..core import attention, gradients
from ..core.attention import MHAWeights, AttentionTrace, check_weights
from ..core.checks import (check_type, ShapeError, check_int, check_list, check_matrix, check_number, check_vector, quote_int,
                           shorten, too_large)
from ..core.matrix import Matrix, Vector, finite, product
from ..core.softmax_and_masks import MAX_MASK_SIDE, causal_mask, softmax_of_rows
from .weights import derive_rng

# What the notebooks import (through training.py, which passes these on). Model, Trace and Step are in the
# map above; listed here they would take the package past its 100 exported names (tests/test_surface.py).
__all__ = ["forward", "cross_entropy", "batch_gradients", "flatten", "unflatten", "AdamState", "adam_step", "train"]

POSITIONS = ("input", "queries and keys")  # where the position table enters
MAX_LAYERS = 12  # attention layers in one model
MAX_BATCH = 1000  # sequences in one batch
MAX_ADAM_STEP = 10**12  # AdamState.step: b ** step is computed as a float power
MAX_WORK = attention.MAX_WORK  # multiply-adds in one call that runs the model: about ten seconds
MAX_TRAINING_WORK = 30_000_000_000  # multiply-adds in one training run: about half an hour of plain Python
# Plain Python spends about as long on each position of each layer (lists made, zips, calls) as on this many
# multiply-adds: counted so, a unit of work took 35 to 56 ns from d_model 4 to d_model 256 (measured forward and
# backward on a 2-core machine), and the limits above hold for a tiny model as for a wide one.
OVERHEAD_PER_POSITION = 500


# === The model ===


class Model(NamedTuple):
    """Every parameter, and two options (a Model of gradients has the same shapes and options)."""

    token_embeddings: Matrix  # (vocab_size, d_model): row t starts the stream of token t
    position_embeddings: Matrix  # (positions, d_model): one row per position the model reads
    layers: list[MHAWeights]  # one multi-head attention layer each, no biases
    W_U: Matrix  # (d_model, vocab_size): the unembedding, stream -> logits
    b_U: Optional[Vector] = None  # (vocab_size,), or None: no bias
    scale: Optional[float] = None  # the attention scale of every layer; None is 1 / sqrt(d_k)
    positions: str = "input"  # "input": E_pos added to x_0; "queries and keys": to layer 0's query and key input
    residual: bool = True  # x_{l+1} = x_l + a_l; False: x_{l+1} = a_l


class Sizes(NamedTuple):
    """What ``check_model`` learns about a model."""

    vocab_size: int  # rows of the token table: token ids are 0 to vocab_size - 1
    d_model: int
    positions: int  # rows of the position table: the longest sequence the model reads
    parameters: int  # numbers in the model, len(flatten(model))
    layers: list[dict[str, int]]  # each layer's sizes, as check_weights names them (d_model, h, g, d_k, d_v)


class Trace(NamedTuple):
    """Every intermediate of one forward pass."""

    streams: list[Matrix]  # streams[l] (T, d_model): what layer l reads; streams[-1]: what W_U reads
    layers: list[AttentionTrace]  # layer l's attention, every intermediate (per head: Q, K, V, attention, ...)
    logits: Matrix  # (T, vocab_size)


def check_model(func: str, name: str, model: object) -> Sizes:
    """Every table of a model: finite numbers, and shapes that fit each other; return its sizes."""
    if not isinstance(model, Model):
        raise TypeError(f"{func}: {name} must be a Model, got {type(model).__name__}")
    vocab_size, d_model = check_matrix(func, f"{name}.token_embeddings", model.token_embeddings)
    positions, width = check_matrix(func, f"{name}.position_embeddings", model.position_embeddings)
    if width != d_model:
        raise ShapeError(f"{func}: {name}.position_embeddings rows have {width} entries and "
                         f"{name}.token_embeddings rows have {d_model}; both must be d_model wide")
    if positions > MAX_MASK_SIDE:
        raise ValueError(f"{func}: {name}.position_embeddings has {positions:,} rows; attention here reads at most "
                         f"{MAX_MASK_SIDE:,} tokens")
    if not isinstance(model.layers, (list, tuple)) or not 1 <= len(model.layers) <= MAX_LAYERS:
        raise ShapeError(f"{func}: {name}.layers must be a list of 1 to {MAX_LAYERS} MHAWeights (one per layer), "
                         f"got {shorten(model.layers)}")
    dims = [check_layer(func, f"{name}.layers[{n}]", w, d_model) for n, w in enumerate(model.layers)]
    if check_matrix(func, f"{name}.W_U", model.W_U) != (d_model, vocab_size):
        raise ShapeError(f"{func}: {name}.W_U is {len(model.W_U)}x{len(model.W_U[0])}; it must be "
                         f"d_model x vocab_size = {d_model}x{vocab_size}")
    if model.b_U is not None and check_vector(func, f"{name}.b_U", model.b_U) != vocab_size:
        raise ShapeError(f"{func}: {name}.b_U has {len(model.b_U)} entries; it needs one per token ({vocab_size})")
    if model.scale is not None:
        check_number(func, f"{name}.scale", model.scale, positive=True)
    if not isinstance(model.positions, str) or model.positions not in POSITIONS:
        raise ValueError(f"{func}: {name}.positions is {shorten(model.positions)}; it must be "
                         f"{' or '.join(map(repr, POSITIONS))}")
    check_type(func, f"{name}.residual", model.residual, bool, "True or False")
    tables = (model.token_embeddings, model.position_embeddings, model.W_U)
    parameters = sum(len(M) * len(M[0]) for M in tables) + (0 if model.b_U is None else vocab_size) + sum(
        d["d_model"] * (d["h"] * d["d_k"] + d["g"] * (d["d_k"] + d["d_v"])) + d["h"] * d["d_v"] * d["d_model"]
        for d in dims)
    return Sizes(vocab_size, d_model, positions, parameters, dims)


def check_layer(func: str, name: str, w: object, d_model: int) -> dict[str, int]:
    """One layer of the model: an MHAWeights for d_model, no biases, one key/value head per query head."""
    d = check_weights(func, name, w)
    biases = [part for part in ("b_Q", "b_K", "b_V", "b_O") if getattr(w, part) is not None]
    if biases:
        raise ValueError(f"{func}: {name} has biases ({', '.join(biases)}); this model's attention has none")
    if d["d_model"] != d_model:
        raise ShapeError(f"{func}: {name} is for d_model {d['d_model']} but the embeddings are {d_model} wide")
    if d["g"] != d["h"]:
        raise ShapeError(f"{func}: {name} has {d['h']} query heads and {d['g']} key/value heads; "
                         "this model gives each query head its own")
    return d


def check_ids(func: str, name: str, ids: object, sizes: Optional[Sizes] = None, *, at_least: int = 1) -> int:
    """Token ids (T,), T >= at_least, each 0 or more; with a model's sizes, ones the model has rows for
    (below vocab_size, and at most one per position). Return T."""
    if not isinstance(ids, (list, tuple)) or len(ids) < at_least:
        what = "a non-empty list of" if at_least == 1 else f"a list of at least {at_least}"
        raise ShapeError(f"{func}: {name} must be {what} token ids, got {shorten(ids)}")
    if sizes is not None and len(ids) > sizes.positions:
        raise ShapeError(f"{func}: {name} has {len(ids):,} tokens but the position table has {sizes.positions} "
                         "rows; it needs one row per position")
    for i, t in enumerate(ids):
        if check_int(func, f"{name}[{i}]", t) < 0:
            raise ValueError(f"{func}: {name}[{i}] is {quote_int(t)}; token ids are 0 or more")
        if sizes is not None and t >= sizes.vocab_size:
            raise ValueError(f"{func}: {name}[{i}] is {quote_int(t)}; token ids must be 0 to {sizes.vocab_size - 1}")
    return len(ids)


def check_targets(func: str, name: str, target: object, rows: int, vocab_size: int) -> int:
    """One entry per row of the logits: None (not scored) or a column (0 to vocab_size - 1), at least one
    column. Return how many rows are scored."""
    if not isinstance(target, (list, tuple)) or len(target) != rows:
        raise ShapeError(f"{func}: {name} must be a list with one entry (a token id or None) per row of logits "
                         f"({rows}), got {shorten(target)}")
    for i, t in enumerate(target):
        if t is not None and not 0 <= check_int(func, f"{name}[{i}]", t) < vocab_size:
            raise ValueError(f"{func}: {name}[{i}] is {quote_int(t)}; a target must be None or a column of logits, "
                             f"0 to {vocab_size - 1}")
    scored = sum(t is not None for t in target)
    if scored == 0:
        raise ValueError(f"{func}: every entry of {name} is None; there is nothing to score")
    return scored


def random_model(seed: int, name: str, vocab_size: int, d_model: int, heads: Sequence[int], positions: int) -> Model:
    """A model to train from: ``len(heads)`` layers, layer l with ``heads[l]`` heads of width
    d_model // heads[l]; N(0, 1) embeddings, N(0, 1/d_model) weights, positions entering layer 0's
    queries and keys; each matrix drawn from ``derive_rng(seed, f"{name}/...")``, so a task's ``name``
    ("induction", "read_text") gives its own numbers. Its caller checks the sizes."""
    d, std = d_model, 1 / math.sqrt(d_model)

    def draw(rows: int, cols: int, part: str, sigma: float) -> Matrix:
        rng = derive_rng(seed, f"{name}/{part}")
        return [[rng.gauss(0.0, sigma) for _ in range(cols)] for _ in range(rows)]

    layers = []
    for layer, h in enumerate(heads):
        d_k = d // h
        drawn = {part: [draw(d, d_k, f"layer{layer}/{part}/head{hh}", std) for hh in range(h)]
                 for part in ("W_Q", "W_K", "W_V")}
        layers.append(MHAWeights(drawn["W_Q"], drawn["W_K"], drawn["W_V"], draw(h * d_k, d, f"layer{layer}/W_O", std)))
    return Model(token_embeddings=draw(vocab_size, d, "token_embeddings", 1.0),
                 position_embeddings=draw(positions, d, "position_embeddings", 1.0),
                 layers=layers, W_U=draw(d, vocab_size, "W_U", std), positions="queries and keys")


def previous_share(A: Matrix) -> float:  # (T, T), T >= 2 -> the mean of A[i][i - 1]
    """The mean attention from each position i >= 1 to position i - 1: how much a head reads the token
    before (1.0 for a perfect previous-token head). The tasks measure their heads with it."""
    T, columns = check_matrix("previous_share", "A", A)
    if T != columns or T < 2:
        raise ShapeError(f"previous_share: A is {T} x {columns}; it must be one head's (T, T) attention matrix "
                         "with T >= 2 (the first token has none before it)")
    return math.fsum(A[i][i - 1] for i in range(1, len(A))) / (len(A) - 1)


# === How much arithmetic ===


def forward_work(sizes: Sizes, T: int) -> int:
    """Multiply-adds of one forward pass over T tokens (the backward pass takes about twice as many),
    plus the cost of plain Python's bookkeeping, counted in multiply-adds (OVERHEAD_PER_POSITION)."""
    d = sizes.d_model
    per_layer = [T * d * (h * d_k + g * (d_k + d_v)) + h * T * T * (d_k + d_v) + T * h * d_v * d
                 + T * OVERHEAD_PER_POSITION
                 for h, g, d_k, d_v in ((L["h"], L["g"], L["d_k"], L["d_v"]) for L in sizes.layers)]
    return sum(per_layer) + T * d * sizes.vocab_size


def check_work(func: str, what: str, work: int, limit: int = MAX_WORK, time: str = "about ten seconds") -> None:
    """Refuse a call whose arithmetic would run for minutes (a typo, not a lesson); ``what`` says what made it."""
    if work > limit:
        raise ValueError(f"{func}: {what} = {work:,} multiply-adds; one call does at most {limit:,} ({time})")


def check_training_work(func: str, steps: int, batch_size: int, per_sequence: int) -> None:
    """The budget of a training run: steps x batch_size x the multiply-adds of one sequence, forward and back."""
    check_work(func, f"steps x batch_size x work per sequence = {steps:,} x {batch_size:,} x {per_sequence:,}",
               steps * batch_size * per_sequence, MAX_TRAINING_WORK, "about half an hour of plain Python")


# === Forward pass ===


def forward(model: Model, ids: Sequence[int]) -> Trace:  # (T,) -> Trace
    """Every intermediate when the model reads ids (T,), T at most the model's positions.

    A query of 0 scores every key 0: position 1 takes the mean, (1 + -1) / 2, of the two tokens it sees.

    >>> m = Model([[1.0], [-1.0]], [[0.0], [0.0]], [MHAWeights([[[0.0]]], [[[1.0]]], [[[1.0]]], [[1.0]])],
    ...           [[1.0, -1.0]], residual=False)
    >>> forward(m, [0, 1]).logits
    [[1.0, -1.0], [0.0, 0.0]]
    """
    sizes = check_model("forward", "model", model)
    check_work("forward", "one forward pass", forward_work(sizes, check_ids("forward", "ids", ids, sizes)))
    try:
        return run(model, ids)
    except OverflowError as error:
        raise too_large("forward", error) from None


def run(model: Model, ids: Sequence[int]) -> Trace:
    """``forward`` on arguments already checked: every layer through the core's ``trace_layer``."""
    T = len(ids)
    mask = causal_mask(T)
    tokens = [model.token_embeddings[t] for t in ids]
    x = finite(_plus(tokens, model.position_embeddings), "the embeddings") if model.positions == "input" \
        else [list(row) for row in tokens]
    streams, layers = [x], []
    for n, w in enumerate(model.layers):
        c = _scale(model, w)
        if n == 0 and model.positions == "queries and keys":
            layer = attention.trace_layer(_query_key_input(model, x), w, None, mask, c, values=x)
        else:
            layer = attention.trace_layer(x, w, None, mask, c)
        x = finite(_plus(x, layer.output), "the residual stream") if model.residual else layer.output
        streams.append(x)
        layers.append(layer)
    return Trace(streams, layers, finite(attention.affine(x, model.W_U, model.b_U), "the logits"))


def _plus(A: Matrix, B: Matrix) -> Matrix:
    """A + B entry by entry, over A's rows (B may have more: the position table)."""
    return [[a + b for a, b in zip(row_A, row_B)] for row_A, row_B in zip(A, B)]


def _scale(model: Model, w: MHAWeights) -> float:
    return 1 / math.sqrt(len(w.W_Q[0][0])) if model.scale is None else model.scale


def _query_key_input(model: Model, x: Matrix) -> Matrix:
    """Layer 0's query and key input when positions enter only there: x_0 + E_pos."""
    return finite(_plus(x, model.position_embeddings), "the embeddings")


# === Loss ===


def cross_entropy(logits: Matrix, target: Sequence[Optional[int]]) -> tuple[float, Matrix]:  # (T, V), (T,)
    """Mean of -log softmax(logits[i])[target[i]] over the rows with a target; and d loss / d logits.

    The gradient of row i is (softmax(logits[i]) - onehot(target[i])) / n for
    the n rows with a target, 0 for the others.

    >>> loss, d = cross_entropy([[0.0, 0.0], [5.0, 1.0]], [1, None])
    >>> round(loss, 4), d
    (0.6931, [[0.5, -0.5], [0.0, 0.0]])
    """
    rows, vocab_size = check_matrix("cross_entropy", "logits", logits)
    check_targets("cross_entropy", "target", target, rows, vocab_size)
    try:
        return loss_of(logits, target)
    except OverflowError as error:
        raise too_large("cross_entropy", error) from None


def loss_of(logits: Matrix, target: Sequence[Optional[int]]) -> tuple[float, Matrix]:
    """``cross_entropy`` on arguments already checked.

    -log softmax(z)[t] = log sum_j exp(z_j - top) - (z_t - top), top = max(z): every
    exponent is at most 0, and z_t is compared with top before anything is added to it
    (adding top back first loses z_t when the logits are large: 1e17 + log 2 is 1e17)."""
    n = sum(t is not None for t in target)
    losses, grads = [], []
    for row, t in zip(logits, target):
        if t is None:
            grads.append([0.0] * len(row))
            continue
        top = max(row)
        losses.append(math.log(math.fsum(math.exp(z - top) for z in row)) - (row[t] - top))
        p = softmax_of_rows([row])[0]
        grads.append([(p_j - (1.0 if j == t else 0.0)) / n for j, p_j in enumerate(p)])
    loss = math.fsum(losses) / n
    if not math.isfinite(loss):  # logits further apart than float64 reaches (1e308 and -1e308)
        raise OverflowError("the losses")
    return loss, grads


# === Backward pass ===


def loss_and_gradients(model: Model, ids: Sequence[int], target: Sequence[Optional[int]]) -> tuple[float, Model]:
    """The loss on one sequence of ids (T,) with its targets (T,), and the gradient of every parameter,
    as a Model of gradients (rows of the position table past T get 0)."""
    sizes = check_model("loss_and_gradients", "model", model)
    T = check_ids("loss_and_gradients", "ids", ids, sizes)
    check_targets("loss_and_gradients", "target", target, T, sizes.vocab_size)
    check_work("loss_and_gradients", "one forward and backward pass", 3 * forward_work(sizes, T))
    try:
        loss, grads, _ = sequence_gradients(model, ids, target)
    except OverflowError as error:
        raise too_large("loss_and_gradients", error) from None
    return loss, grads


def sequence_gradients(model: Model, ids: Sequence[int], target: Sequence[Optional[int]]) -> tuple[float, Model, Trace]:
    """Loss, gradients and the forward pass (its attention is what a task measures), unchecked."""
    trace = run(model, ids)
    loss, d_logits = loss_of(trace.logits, target)
    grads = backward(model, trace, ids, d_logits)
    finite([_flat(grads)], "the gradients")
    return loss, grads, trace


def backward(model: Model, trace: Trace, ids: Sequence[int], d_logits: Matrix) -> Model:
    """The gradient of every parameter from d loss / d logits, through a forward pass of ids; unchecked."""
    T, d_model = len(ids), len(model.W_U)
    dW_U = product(list(zip(*trace.streams[-1])), d_logits)
    db_U = None if model.b_U is None else gradients.sums_of_columns(d_logits)
    dx = product(d_logits, list(zip(*model.W_U)))  # dlogits W_U^T
    d_layers: list[MHAWeights] = []
    d_qk = None
    for n in reversed(range(len(model.layers))):
        w, layer, x = model.layers[n], trace.layers[n], trace.streams[n]
        if n == 0 and model.positions == "queries and keys":
            g = gradients.backward(w, layer, _query_key_input(model, x), None, dx, _scale(model, w), values=x).gradients
            d_qk = g.x  # the gradient of x_0 + E_pos, which feeds Q and K; x_0 feeds V too
            dx = _plus(_plus(dx, g.values), d_qk) if model.residual else _plus(g.values, d_qk)
        else:
            g = gradients.backward(w, layer, x, None, dx, _scale(model, w)).gradients
            dx = _plus(dx, g.x) if model.residual else g.x  # the stream carries G past the layer
        d_w = MHAWeights(g.W_Q, g.W_K, g.W_V, g.W_O)
        d_layers.insert(0, d_w)
    d_pos = dx if model.positions == "input" else d_qk
    d_pos = [list(row) for row in d_pos] + [[0.0] * d_model for _ in model.position_embeddings[T:]]
    d_tok = []
    for token in range(len(model.token_embeddings)):
        rows = [dx[i] for i, t in enumerate(ids) if t == token]
        d_tok.append([math.fsum(column) for column in zip(*rows)] if rows else [0.0] * d_model)
    return model._replace(token_embeddings=d_tok, position_embeddings=d_pos, layers=d_layers, W_U=dW_U, b_U=db_U)


# === A batch ===


Pair = tuple[Sequence[int], Sequence[Optional[int]]]  # token ids (T,) and a target per position (T,)


def check_batch(func: str, name: str, batch: object, sizes: Sizes) -> int:
    """A non-empty list of at most MAX_BATCH (ids, targets) pairs for this model; return its work
    (multiply-adds, forward and backward)."""
    if not isinstance(batch, (list, tuple)) or not 1 <= len(batch) <= MAX_BATCH:
        raise ShapeError(f"{func}: {name} must be a list of 1 to {MAX_BATCH:,} (ids, targets) pairs, "
                         f"got {shorten(batch)}")
    work = 0
    for n, pair in enumerate(batch):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise TypeError(f"{func}: {name}[{n}] must be a pair (ids, targets), got {shorten(pair)}")
        T = check_ids(func, f"{name}[{n}][0]", pair[0], sizes)
        check_targets(func, f"{name}[{n}][1]", pair[1], T, sizes.vocab_size)
        work += 3 * forward_work(sizes, T)
    return work


def batch_gradients(model: Model, batch: Sequence[Pair]) -> tuple[float, list[float]]:
    """The loss on a batch of (ids, targets) pairs, and its gradient as a flat list (the order of ``flatten``).

    Every scored position of the batch counts once, as PyTorch's cross_entropy averages over the
    targets of a whole batch: a sequence's loss and gradient are weighted by its share of them.
    """
    sizes = check_model("batch_gradients", "model", model)
    check_work("batch_gradients", "one batch, forward and backward", check_batch("batch_gradients", "batch", batch,
                                                                                  sizes))
    try:
        loss, grads, _, _ = batch_step(model, batch)
    except OverflowError as error:
        raise too_large("batch_gradients", error) from None
    return loss, grads


def batch_step(model: Model, batch: Sequence[Pair]) -> tuple[float, list[float], list[float], list[Trace]]:
    """``batch_gradients`` on arguments already checked; also each sequence's share and forward pass."""
    counts = [sum(t is not None for t in target) for _, target in batch]
    total = sum(counts)
    shares = [count / total for count in counts]
    losses, grads, traces = [], [], []
    for (ids, target), share in zip(batch, shares):
        loss, g, trace = sequence_gradients(model, ids, target)
        losses.append(share * loss)
        grads.append([share * x for x in _flat(g)])
        traces.append(trace)
    return math.fsum(losses), [math.fsum(entries) for entries in zip(*grads)], shares, traces


# === Flat parameters ===


def _matrices(model: Model) -> list[Matrix]:
    out = [model.token_embeddings, model.position_embeddings]
    for w in model.layers:
        out += [*w.W_Q, *w.W_K, *w.W_V, w.W_O]
    return out + [model.W_U]


def _flat(model: Model) -> list[float]:
    flat = [x for M in _matrices(model) for row in M for x in row]
    return flat if model.b_U is None else flat + list(model.b_U)


def flatten(model: Model) -> list[float]:
    """Every parameter in one list, in a fixed order (``unflatten`` reverses it): E_tok, E_pos, each
    layer's W_Q, W_K, W_V (head by head) and W_O, W_U, then b_U when there is one.

    >>> flatten(Model([[1.0]], [[2.0]], [MHAWeights([[[3.0]]], [[[4.0]]], [[[5.0]]], [[6.0]])], [[7.0]], [8.0]))
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]
    """
    check_model("flatten", "model", model)
    return _flat(model)


def unflatten(flat: Sequence[float], like: Model) -> Model:
    """A model shaped like ``like`` (with its options) holding the numbers of ``flat``, in the order of ``flatten``."""
    sizes = check_model("unflatten", "like", like)
    if not isinstance(flat, (list, tuple)) or len(flat) != sizes.parameters:
        n = len(flat) if isinstance(flat, (list, tuple)) else type(flat).__name__
        raise ShapeError(f"unflatten: flat has {n} numbers but a model shaped like `like` has {sizes.parameters}")
    check_vector("unflatten", "flat", flat)
    return shaped(flat, like)


def shaped(flat: Sequence[float], like: Model) -> Model:
    """``unflatten`` on arguments already checked."""
    position = 0

    def take(M: Matrix) -> Matrix:
        nonlocal position
        width, rows = len(M[0]), []
        for _ in M:
            rows.append(list(flat[position:position + width]))
            position += width
        return rows

    E_tok, E_pos = take(like.token_embeddings), take(like.position_embeddings)
    layers = [MHAWeights([take(M) for M in w.W_Q], [take(M) for M in w.W_K], [take(M) for M in w.W_V], take(w.W_O))
              for w in like.layers]
    W_U = take(like.W_U)
    b_U = None if like.b_U is None else list(flat[position:position + len(like.b_U)])
    return like._replace(token_embeddings=E_tok, position_embeddings=E_pos, layers=layers, W_U=W_U, b_U=b_U)


# === Adam ===


class AdamState(NamedTuple):
    step: int  # steps taken so far
    m: list[float]  # running mean of the gradients
    v: list[float]  # running mean of the squared gradients


def check_adam_state(func: str, name: str, state: object, n: int) -> None:
    """None (the first step) or the state of the previous step, for n parameters."""
    if state is None:
        return
    if not isinstance(state, AdamState):
        raise TypeError(f"{func}: {name} must be None (the first step) or the AdamState of the previous step, "
                        f"got {type(state).__name__}")
    if not 1 <= check_int(func, f"{name}.step", state.step) <= MAX_ADAM_STEP:
        raise ValueError(f"{func}: {name}.step is {quote_int(state.step)}; a step count is 1 to {MAX_ADAM_STEP:,}")
    for field, values in (("m", state.m), ("v", state.v)):
        if check_vector(func, f"{name}.{field}", values) != n:
            raise ShapeError(f"{func}: {name}.{field} has {len(values)} entries and params has {n}; one per parameter")
    for i, v_i in enumerate(state.v):
        if v_i < 0:
            raise ValueError(f"{func}: {name}.v[{i}] is {shorten(v_i)}; a running mean of squares is 0 or more")


def adam_step(params: Sequence[float], grads: Sequence[float], state: Optional[AdamState], *, lr: float = 1e-3,
              betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> tuple[list[float], AdamState]:
    """One Adam step (PyTorch's defaults): new parameters and new state; nothing is changed in place.

        m = b1 m + (1 - b1) g          v = b2 v + (1 - b2) g^2
        p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    The first step moves every parameter by about lr against the sign of its gradient:

    >>> p, s = adam_step([1.0, 1.0], [0.5, -2.0], None, lr=0.1)
    >>> [round(x, 6) for x in p], s.step
    ([0.9, 1.1], 1)
    """
    n = check_vector("adam_step", "params", params)
    if check_vector("adam_step", "grads", grads) != n:
        raise ShapeError(f"adam_step: params has {n} entries and grads has {len(grads)}; one gradient per parameter")
    check_adam_state("adam_step", "state", state, n)
    check_number("adam_step", "lr", lr, positive=True)
    check_number("adam_step", "eps", eps, positive=True)
    check_betas("adam_step", betas)
    try:
        return adam_update(params, grads, state, lr=lr, betas=betas, eps=eps)
    except OverflowError as error:
        raise too_large("adam_step", error) from None


def check_betas(func: str, betas: object) -> None:
    if not (isinstance(betas, (list, tuple)) and len(betas) == 2
            and all(isinstance(b, float) or type(b) is int for b in betas) and all(0 <= b < 1 for b in betas)):
        raise ValueError(f"{func}: betas must be two numbers in [0, 1), got {shorten(betas)}")


def adam_update(params: Sequence[float], grads: Sequence[float], state: Optional[AdamState], *, lr: float,
                betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> tuple[list[float], AdamState]:
    """``adam_step`` on arguments already checked."""
    b1, b2 = betas
    m0 = [0.0] * len(params) if state is None else state.m
    v0 = [0.0] * len(params) if state is None else state.v
    t = 1 if state is None else state.step + 1
    m = [b1 * m_i + (1 - b1) * g for m_i, g in zip(m0, grads)]
    v = [b2 * v_i + (1 - b2) * g * g for v_i, g in zip(v0, grads)]
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    new = [p - lr * (m_i / c1) / (math.sqrt(v_i / c2) + eps) for p, m_i, v_i in zip(params, m, v)]
    finite([new, m, v], "the updates")  # a squared gradient, or a step, past float64's range
    return new, AdamState(t, m, v)


# === Training ===


class Step(NamedTuple):
    """One training step, measured on its batch before the step (what ``train`` gives ``progress``)."""

    number: int  # 1, 2, ...: steps taken so far, this one included
    loss: float  # the batch's loss (every scored position counts once)
    batch: Sequence[Pair]  # the (ids, targets) pairs
    shares: list[float]  # each pair's share of the loss: its scored positions / the batch's
    traces: list[Trace]  # each pair's forward pass


def train(model: Model, batches: Sequence[Sequence[Pair]], *, lr: float = 0.01,
          progress: Optional[Callable[[Step], None]] = None) -> tuple[Model, list[float]]:
    """One Adam step on each batch of (ids, targets) pairs in turn; the trained model and each step's loss.

    ``progress(step)`` is called after every step with a ``Step`` (loss, batch, forward passes).
    """
    sizes = check_model("train", "model", model)
    check_list("train", "batches", batches, "batches")
    work = [check_batch("train", f"batches[{n}]", batch, sizes) for n, batch in enumerate(batches)]
    check_work("train", f"{len(batches):,} batches, forward and backward", sum(work), MAX_TRAINING_WORK,
               "about half an hour of plain Python")
    check_number("train", "lr", lr, positive=True)
    check_progress("train", progress)
    return fit(model, batches, lr=lr, progress=progress)


def check_progress(func: str, progress: object) -> None:
    if progress is not None and not callable(progress):
        raise TypeError(f"{func}: progress must be a function or None, got {shorten(progress)}")


def fit(model: Model, batches: Sequence[Sequence[Pair]], *, lr: Union[float, Callable[[int], float]],
        progress: Optional[Callable[[Step], None]] = None) -> tuple[Model, list[float]]:
    """``train`` on arguments already checked. ``lr`` is one learning rate, or a function giving
    step 1, 2, ...'s (a schedule). An overflow is named after ``train``; ``progress``, the caller's
    own function, is simply called."""
    params, state, losses = _flat(model), None, []
    for number, batch in enumerate(batches, 1):
        try:
            loss, grads, shares, traces = batch_step(shaped(params, model), batch)
            params, state = adam_update(params, grads, state, lr=lr(number) if callable(lr) else lr)
        except OverflowError as error:
            raise too_large("train", error) from None
        losses.append(loss)
        if progress is not None:
            progress(Step(number, loss, batch, shares, traces))
    return shaped(params, model), losses
