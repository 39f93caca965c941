"""Induction heads: a two-layer attention-only transformer, built by hand and learned from scratch.

The task: a run of distinct tokens, then the same run again (``C A D`` then
``C A D``). In the repeat, every token has been seen once before, and the token
that followed it then follows it now. A **previous-token head** in layer 0
writes "the token before me" into the residual stream; an **induction head** in
layer 1 uses that as its keys, finds the position after the earlier occurrence
of the current token and copies that token (Elhage et al. 2021; Olsson et al.
2022). One layer cannot do it: its key at position j is a function of token j
and position j only, never of token j - 1.

The model is ``model.Model`` with L layers, positions entering only layer 0's
queries and keys, and the residual stream (no biases, no MLP, no LayerNorm):

    x_0    = E_tok[ids]                                  (T, d_model): the residual stream
    layer l: Q, K from x_l + E_pos[0..T-1] (l = 0) or x_l (l > 0);  V from x_l
             x_{l+1} = x_l + [head_0 | head_1 | ...] W_O,   head_h = attention(Q_h, K_h, V_h, causal)
    logits = x_L W_U                                     (T, vocab_size)

Positions enter only layer 0's queries and keys, so layer 0 can find "the
position before me" while the stream that later layers read holds tokens and
what layer 0 wrote, not positions. The run length L is drawn per sequence, so
no fixed offset ("the token L back") solves the task: only the content does.

Training data: ``make_sequence`` draws L (min_len..max_len) distinct tokens and
repeats them; the model reads the first 2L - 1 tokens, and the loss is the
cross-entropy of predicting token i + 1 at the positions i = L .. 2L - 2 of the
repeat (``repeat_targets``).

=================================  ===================================================
hand_built_model, one_layer_model  small-integer weights: the circuit, and one layer trying
PARTS, part_slices, HAND_SCALE     the four parts of the hand-built residual stream; its scale
token_names                        letters for token ids: A, B, C, ...
Settings, check_settings           sizes, data and optimiser settings of a training run
LIMITS                             the largest sizes accepted (so nothing hangs)
init_model                         random parameters (N(0,1) embeddings, N(0,1/d) weights)
make_sequence, make_sequences      a random run and its repeat
repeat_targets, first_half_targets what each position must predict (None: not scored)
forward                            (model.py's) every intermediate of one pass (a Trace)
predict                            the most likely next token at every position
model_gradients                    the loss on the repeat and every parameter's gradient
flatten, unflatten                 (model.py's) the parameters as one flat list, and back
train                              Adam steps on fresh batches; returns a History
head_scores, HeadScore             previous-token and induction score of every head
repeat_accuracy                    fraction of the repeat predicted right
succeeded                          the success rule of a run (prev, induction, accuracy)
=================================  ===================================================

Every random number comes from ``derive_rng(seed, name)``, every sum is a
``math.fsum``: a training run gives the same bits on CPython 3.10 to 3.13.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional

from ..core.attention import MHAWeights
from ..core.checks import (check_type, ShapeError, check_int, check_list, check_number, check_positive_int, quote_int,
                           shorten, too_large)
from ..core.matrix import Matrix
from .model import (Model, Sizes, Step, Trace, check_ids, check_model, check_progress, check_training_work,
                    check_work, fit, forward_work, loss_of, previous_share, random_model, run,
                    sequence_gradients)
from .model import flatten, forward, unflatten  # noqa: F401 -- the one model's, used here as they are
from .weights import derive_rng

__all__ = [  # what the notebooks import; the rest is documented in the map above
    "hand_built_model", "one_layer_model", "part_slices", "token_names", "Settings", "init_model", "make_sequences",
    "forward", "predict", "flatten", "train", "head_scores", "repeat_accuracy", "succeeded",
]

# Sizes above these are refused with a message that names the limit, so nothing hangs.
LIMITS = {"vocab_size": 26, "d_model": 64, "num_heads": 8, "num_layers": 4, "max_len": 16,
          "batch_size": 256, "steps": 5000, "count": 2000}

HAND_SCALE = 5  # the hand-built model's scores are (0 or 1) * 5: e^5 ~ 148 beats the rest


def _check_limit(func: str, name: str, value: object, key: Optional[str] = None) -> int:
    check_positive_int(func, name, value)
    limit = LIMITS[key or name]
    if value > limit:
        raise ValueError(f"{func}: {name} is {quote_int(value)}; the limit is {limit} "
                         "(plain Python would take too long)")
    return value


def token_names(vocab_size: int) -> list[str]:
    """Letters for token ids 0, 1, 2, ...: ``token_names(4)`` is ``['A', 'B', 'C', 'D']``."""
    _check_limit("token_names", "vocab_size", vocab_size)
    return [chr(ord("A") + t) for t in range(vocab_size)]


# === The hand-built model ===

PARTS = ("token", "position", "previous token", "prediction")


def part_slices(vocab_size: int, max_len: int) -> dict[str, range]:
    """Which columns of the hand-built residual stream hold each part.

    token (one-hot, vocab_size) | position (one-hot, max_len, only in layer 0's
    queries and keys) | previous token (vocab_size, written by layer 0) |
    prediction (vocab_size, written by layer 1, read by the unembedding).

    >>> part_slices(4, 7)
    {'token': range(0, 4), 'position': range(4, 11), 'previous token': range(11, 15), 'prediction': range(15, 19)}
    """
    _check_limit("part_slices", "vocab_size", vocab_size)
    _check_limit("part_slices", "max_len", max_len, "count")
    sizes = (vocab_size, max_len, vocab_size, vocab_size)
    starts = [0, vocab_size, vocab_size + max_len, 2 * vocab_size + max_len]
    return {name: range(start, start + size) for name, start, size in zip(PARTS, starts, sizes)}


def _zeros(rows: int, cols: int) -> Matrix:
    return [[0] * cols for _ in range(rows)]


def _place(rows: int, cols: int, entries: Sequence[tuple[int, int, int]]) -> Matrix:
    """A (rows, cols) matrix of zeros with the given (i, j, value) entries."""
    M = _zeros(rows, cols)
    for i, j, value in entries:
        M[i][j] = value
    return M


def check_hand_sizes(func: str, vocab_size: object, max_len: object, scale: object) -> None:
    """The sizes of a hand-built model: at least 2 tokens and 3 positions, within LIMITS; a positive scale."""
    if _check_limit(func, "vocab_size", vocab_size) < 2:
        raise ValueError(f"{func}: vocab_size is {vocab_size}; a repeat needs at least 2 different tokens")
    if _check_limit(func, "max_len", max_len, "count") < 3:
        raise ValueError(f"{func}: max_len is {max_len}; a run of 2 and the start of its repeat need 3 positions")
    check_number(func, "scale", scale, positive=True)


def hand_built_model(vocab_size: int, max_len: int, *, scale: float = HAND_SCALE) -> Model:
    """The induction circuit with weights 0, 1 and -1, for sequences of up to max_len tokens.

    d_model = 3 * vocab_size + max_len, in the four ``part_slices``.

    - Layer 0, the previous-token head: query i = one-hot(i), key j = one-hot(j + 1),
      so q_i . k_j = 1 exactly when j = i - 1; value = one-hot(token j), written
      into the "previous token" part.
    - Layer 1, the induction head: query = one-hot(token i); key j = previous
      token j - token j (at position 0 both are token 0, so they cancel);
      value = one-hot(token j), written into the "prediction" part.
    - Unembedding: logits = the prediction part.

    Every score is multiplied by ``scale`` (default ``HAND_SCALE``).

    >>> m = hand_built_model(3, 4)
    >>> len(m.token_embeddings[0]), len(m.layers), m.scale
    (13, 2, 5)
    """
    check_hand_sizes("hand_built_model", vocab_size, max_len, scale)
    V, n = vocab_size, max_len
    part = part_slices(V, n)
    tok, pos, prev, pred = (part[name].start for name in PARTS)
    d = 3 * V + n
    E_tok = _place(V, d, [(t, tok + t, 1) for t in range(V)])
    E_pos = _place(n, d, [(i, pos + i, 1) for i in range(n)])
    previous_token_head = MHAWeights(
        W_Q=[_place(d, n, [(pos + i, i, 1) for i in range(n)])],
        W_K=[_place(d, n, [(pos + j, j + 1, 1) for j in range(n - 1)])],
        W_V=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_O=_place(V, d, [(t, prev + t, 1) for t in range(V)]),
    )
    induction_head = MHAWeights(
        W_Q=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_K=[_place(d, V, [(prev + t, t, 1) for t in range(V)] + [(tok + t, t, -1) for t in range(V)])],
        W_V=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_O=_place(V, d, [(t, pred + t, 1) for t in range(V)]),
    )
    W_U = _place(d, V, [(pred + t, t, 1) for t in range(V)])
    return Model(E_tok, E_pos, [previous_token_head, induction_head], W_U, scale=scale, positions="queries and keys")


def one_layer_model(vocab_size: int, max_len: int, *, scale: float = HAND_SCALE) -> Model:
    """One layer trying the same job, in the same residual stream as ``hand_built_model``.

    Its only head looks for earlier copies of the current token (query and key
    = one-hot(token)) and copies what it finds into the prediction part. The
    token it finds *is* the current token: to find the position after it, key
    j would need token j - 1, and in one layer key j sees only token j and
    position j. So it predicts the current token again.

    >>> len(one_layer_model(3, 4).layers)
    1
    """
    check_hand_sizes("one_layer_model", vocab_size, max_len, scale)
    V, n = vocab_size, max_len
    part = part_slices(V, n)
    tok, pred = part["token"].start, part["prediction"].start
    hand, d = hand_built_model(V, n, scale=scale), 3 * V + n
    same_token_head = MHAWeights(
        W_Q=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_K=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_V=[_place(d, V, [(tok + t, t, 1) for t in range(V)])],
        W_O=_place(V, d, [(t, pred + t, 1) for t in range(V)]),
    )
    return hand._replace(layers=[same_token_head])


# === Random parameters and the training settings ===


class Settings(NamedTuple):
    """Everything a training run depends on.

    With these defaults a run takes under a minute of CPU in plain Python, and most seeds learn both heads
    within the 500 steps (the README gives the count over seeds 0-19, measured with ``succeeded``): 8 tokens,
    runs of 2-6 drawn per sequence, batches of 16, d_model 12 with 2 heads per layer, N(0, 1) embeddings,
    N(0, 1/d_model) weights and Adam at lr 0.01.
    """

    vocab_size: int = 8
    d_model: int = 12
    num_heads: int = 2
    num_layers: int = 2
    min_len: int = 2  # shortest run; the sequence is the run and its repeat
    max_len: int = 6  # longest run (runs are distinct tokens, so at most vocab_size)
    batch_size: int = 16
    lr: float = 0.01
    steps: int = 500
    seed: int = 0


def check_settings(func: str, settings: object) -> Settings:
    """Check every field of a Settings; return it."""
    if not isinstance(settings, Settings):
        raise TypeError(f"{func}: settings must be a Settings, got {type(settings).__name__}")
    s = settings
    for name in ("vocab_size", "d_model", "num_heads", "batch_size", "steps", "num_layers"):
        _check_limit(func, name, getattr(s, name))
    if s.num_layers < 2:
        raise ValueError(
            f"{func}: num_layers is {s.num_layers}; an induction head needs 2 layers (a previous-token head, "
            "then a head whose keys read what it wrote): one layer's keys see only their own token and position")
    if s.d_model % s.num_heads:
        raise ShapeError(f"{func}: d_model {s.d_model} is not divisible by num_heads {s.num_heads}")
    _check_run_lengths(func, s.min_len, s.max_len, s.vocab_size)
    check_number(func, "lr", s.lr, positive=True)
    check_int(func, "seed", s.seed)
    return s


def _check_run_lengths(func: str, min_len: object, max_len: object, vocab_size: int) -> None:
    check_int(func, "min_len", min_len)
    check_int(func, "max_len", max_len)
    if min_len < 2:
        raise ValueError(
            f"{func}: min_len is {quote_int(min_len)}; a sequence too short to repeat: a run needs at least 2 tokens, "
            "so that its repeat holds a token that followed an earlier one")
    if max_len < min_len:
        raise ValueError(f"{func}: max_len {quote_int(max_len)} is below min_len {quote_int(min_len)}")
    if max_len > min(vocab_size, LIMITS["max_len"]):
        raise ValueError(
            f"{func}: max_len is {quote_int(max_len)}; a run is distinct tokens, so it can be at most vocab_size = "
            f"{vocab_size} (and the limit is {LIMITS['max_len']})")


def init_model(settings: Settings) -> Model:
    """Random parameters for ``settings``: N(0, 1) embeddings, N(0, 1/d_model) weights.

    Positions: one row for each of the 2 * max_len - 1 positions the model reads.

    >>> m = init_model(Settings())
    >>> len(m.token_embeddings), len(m.position_embeddings), len(m.layers), len(m.W_U[0])
    (8, 11, 2, 8)
    """
    s = check_settings("init_model", settings)
    return random_model(s.seed, "induction", s.vocab_size, s.d_model, [s.num_heads] * s.num_layers,
                        2 * s.max_len - 1)


# === The task ===


def make_sequence(rng: random.Random, vocab_size: int, min_len: int, max_len: int) -> list[int]:
    """A run of L distinct tokens (L drawn from min_len..max_len), then the same run again: 2L ids.

    >>> make_sequence(random.Random(1), 10, 2, 4)
    [9, 1, 9, 1]
    """
    check_type("make_sequence", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    _check_limit("make_sequence", "vocab_size", vocab_size)
    _check_run_lengths("make_sequence", min_len, max_len, vocab_size)
    return _make_sequence(rng, vocab_size, min_len, max_len)


def _make_sequence(rng: random.Random, vocab_size: int, min_len: int, max_len: int) -> list[int]:
    run_ = rng.sample(range(vocab_size), rng.randint(min_len, max_len))
    return run_ + run_


def make_sequences(count: int, settings: Settings, name: str) -> list[list[int]]:
    """``count`` sequences drawn from ``derive_rng(settings.seed, "induction/" + name)``.

    Different names give independent sets: "held-out" is never trained on.
    """
    _check_limit("make_sequences", "count", count)
    s = check_settings("make_sequences", settings)
    rng = derive_rng(s.seed, f"induction/{check_type('make_sequences', 'name', name, str, 'a str')}")
    return [_make_sequence(rng, s.vocab_size, s.min_len, s.max_len) for _ in range(count)]


def check_sequence(func: str, name: str, seq: object, sizes: Optional[Sizes] = None) -> int:
    """A run and its repeat: 2L ids, L >= 2, the second half equal to the first; return L.

    With a model's sizes, the ids are below its vocab_size and it has a position for each of the
    2L - 1 tokens it reads (without them, ids are below LIMITS["vocab_size"]).
    """
    if not isinstance(seq, (list, tuple)) or len(seq) < 4 or len(seq) % 2:
        n = f"{len(seq):,}" if isinstance(seq, (list, tuple)) else type(seq).__name__
        raise ShapeError(
            f"{func}: {name} has {n} tokens; it must be a run of at least 2 tokens and its repeat (an even "
            "length, at least 4): a sequence too short to repeat has nothing to predict")
    L = len(seq) // 2
    top = LIMITS["vocab_size"] if sizes is None else sizes.vocab_size
    for i, t in enumerate(seq):
        if not 0 <= check_int(func, f"{name}[{i}]", t) < top:
            raise ValueError(f"{func}: {name}[{i}] is {quote_int(t)}; token ids must be 0 to {top - 1}")
    if list(seq[L:]) != list(seq[:L]):
        raise ValueError(f"{func}: {name}'s second half must repeat its first half, got {shorten(list(seq))}")
    if sizes is not None and 2 * L - 1 > sizes.positions:
        raise ShapeError(f"{func}: {name} has a run of {L:,}; the model reads {2 * L - 1:,} tokens but has "
                         f"{sizes.positions} positions")
    return L


def check_sequences(func: str, name: str, sequences: object, sizes: Sizes) -> int:
    """A non-empty list of at most LIMITS["count"] runs and their repeats; return the multiply-adds of one
    forward pass over them all."""
    check_list(func, name, sequences, "sequences (a run and its repeat)")
    if len(sequences) > LIMITS["count"]:
        raise ValueError(f"{func}: {name} has {len(sequences):,} sequences; the limit is {LIMITS['count']}")
    return sum(forward_work(sizes, 2 * check_sequence(func, f"{name}[{n}]", seq, sizes) - 1)
               for n, seq in enumerate(sequences))


def repeat_targets(seq: Sequence[int]) -> list[Optional[int]]:
    """For the 2L - 1 tokens the model reads: token i + 1 at the positions i = L .. 2L - 2 of the repeat, else None.

    >>> repeat_targets([2, 0, 3, 2, 0, 3])
    [None, None, None, 0, 3]
    """
    check_sequence("repeat_targets", "seq", seq)
    return _repeat_targets(seq)


def _repeat_targets(seq: Sequence[int]) -> list[Optional[int]]:
    L = len(seq) // 2
    return [None] * L + list(seq[L + 1:])


def followers(items: Sequence) -> list[list[int]]:  # (T,) -> for each position, positions before it
    """For each position i, the positions that followed the earlier copies of items[i] (j + 1 for each
    j < i - 1 with items[j] == items[i]): where an induction head at i should look. A step that trusts
    its argument (its callers check theirs), for the tokens of a sentence or the ids of a text.

    >>> followers("abab")
    [[], [], [1], [2]]
    """
    return [[j + 1 for j in range(i - 1) if items[j] == items[i]] for i in range(len(items))]


def first_half_targets(seq: Sequence[int]) -> list[Optional[int]]:
    """Token i + 1 at the positions i = 0 .. L - 2 of the first run (nothing there repeats), else None.

    >>> first_half_targets([2, 0, 3, 2, 0, 3])
    [0, 3, None, None, None]
    """
    check_sequence("first_half_targets", "seq", seq)
    return _first_targets(seq)


def _first_targets(seq: Sequence[int]) -> list[Optional[int]]:
    L = len(seq) // 2
    return list(seq[1:L]) + [None] * L


# === What the model predicts, and its gradients ===


def predict(model: Model, ids: Sequence[int]) -> list[int]:
    """The most likely next token at every position of ids (the first, on a tie).

    >>> predict(hand_built_model(4, 7), [0, 1, 2, 3, 0, 1, 2])[4:]
    [1, 2, 3]
    """
    sizes = check_model("predict", "model", model)
    check_work("predict", "one forward pass", forward_work(sizes, check_ids("predict", "ids", ids, sizes)))
    try:
        logits = run(model, ids).logits
    except OverflowError as error:
        raise too_large("predict", error) from None
    return [row.index(max(row)) for row in logits]


def model_gradients(model: Model, seq: Sequence[int]) -> tuple[float, Model]:
    """The loss on the repeat of seq (a run and its repeat) and the gradient of every parameter.

    The loss is the mean cross-entropy at the positions of ``repeat_targets``;
    the gradients are model.py's ``backward``: through each layer, last first,
    the residual stream passing each layer's gradient on unchanged, and layer 0's
    query and key input giving the position table its gradient.
    """
    sizes = check_model("model_gradients", "model", model)
    L = check_sequence("model_gradients", "seq", seq, sizes)
    check_work("model_gradients", "one forward and backward pass", 3 * forward_work(sizes, 2 * L - 1))
    try:
        loss, grads, _ = sequence_gradients(model, seq[:2 * L - 1], _repeat_targets(seq))
    except OverflowError as error:
        raise too_large("model_gradients", error) from None
    return loss, grads


# === Training ===


class History(NamedTuple):
    """Per step, measured on that step's batch before the step."""

    repeat_loss: list[float]  # mean loss on the repeated halves (the loss trained on)
    first_half_loss: list[float]  # mean loss on the first runs (not trained on: nothing to copy there)
    previous_token: list[float]  # the best layer-0 head's previous-token score
    induction: list[float]  # the best last-layer head's induction score


def train(settings: Settings, *, progress: Optional[Callable[[int, History], None]] = None,
          model: Optional[Model] = None) -> tuple[Model, History]:
    """``settings.steps`` Adam steps, each on a fresh batch; returns the trained model and its History.

    The model starts as ``init_model(settings)`` unless one is given (of the
    same sizes). ``progress(step, history)`` is called after every step.
    """
    s = check_settings("train", settings)
    if model is not None:
        sizes = check_model("train", "model", model)
        if (sizes.vocab_size, sizes.d_model, len(model.layers)) != (s.vocab_size, s.d_model, s.num_layers) \
                or sizes.positions < 2 * s.max_len - 1:
            raise ShapeError("train: model does not have the sizes of settings (vocab_size, d_model, num_layers, "
                             "2 * max_len - 1 positions)")
    check_progress("train", progress)
    model = init_model(s) if model is None else model
    check_training_work("train", s.steps, s.batch_size,
                        3 * forward_work(check_model("train", "model", model), 2 * s.max_len - 1))
    rng = derive_rng(s.seed, "induction/batches")
    sequences = [[_make_sequence(rng, s.vocab_size, s.min_len, s.max_len) for _ in range(s.batch_size)]
                 for _ in range(s.steps)]
    batches = [[(seq[:len(seq) - 1], _repeat_targets(seq)) for seq in batch] for batch in sequences]
    history = History([], [], [], [])

    def record(step: Step) -> None:
        seqs = sequences[step.number - 1]
        try:
            first = [share * loss_of(t.logits, _first_targets(seq))[0]
                     for share, t, seq in zip(step.shares, step.traces, seqs)]
        except OverflowError as error:
            raise too_large("train", error) from None
        prev, ind = _batch_scores(step.traces, seqs)
        history.repeat_loss.append(step.loss)
        history.first_half_loss.append(math.fsum(first))
        history.previous_token.append(prev)
        history.induction.append(ind)
        if progress is not None:
            progress(step.number, history)

    trained, _ = fit(model, batches, lr=s.lr, progress=record)
    return trained, history


def _batch_scores(traces: Sequence[Trace], seqs: Sequence[Sequence[int]]) -> tuple[float, float]:
    """The best layer-0 previous-token score and the best last-layer induction score, each the batch's mean."""
    per_seq = [_sequence_scores(t, len(s) // 2) for t, s in zip(traces, seqs)]
    first, last = 0, len(per_seq[0]) - 1
    heads = range(len(per_seq[0][0]))
    prev = max(math.fsum(p[first][h][0] for p in per_seq) / len(per_seq) for h in heads)
    ind = max(math.fsum(p[last][h][1] for p in per_seq) / len(per_seq) for h in heads)
    return prev, ind


# === Measuring what was learned ===


class HeadScore(NamedTuple):
    layer: int
    head: int
    previous_token: float  # mean attention from i to i - 1, i >= 1
    induction: float  # mean attention from i in the repeat to i - L + 1


def _sequence_scores(t: Trace, L: int) -> list[list[tuple[float, float]]]:
    """Per layer, per head: (previous-token, induction) score on one sequence the model read (2L - 1 tokens)."""
    T = 2 * L - 1
    out = []
    for layer in t.layers:
        row = []
        for A in layer.attention:
            prev = previous_share(A)  # A is (T, T)
            ind = math.fsum(A[i][i - L + 1] for i in range(L, T)) / (T - L)
            row.append((prev, ind))
        out.append(row)
    return out


def head_scores(model: Model, sequences: Sequence[Sequence[int]]) -> list[HeadScore]:
    """Every head's previous-token and induction score, each the mean over the sequences.

    Previous-token: mean attention from i to i - 1 (i >= 1). Induction: mean
    attention from i in the repeat (i = L .. 2L - 2) to i - L + 1, the position
    after the earlier occurrence of token i. The model reads 2L - 1 tokens.

    >>> scores = head_scores(hand_built_model(4, 7), [[0, 1, 2, 3, 0, 1, 2, 3]])
    >>> [f"{s.previous_token:.2f} {s.induction:.2f}" for s in scores]
    ['0.98 0.01', '0.31 0.98']
    """
    return scores_on_repeats("head_scores", model, sequences)


def scores_on_repeats(func: str, model: Model, sequences: Sequence[Sequence[int]]) -> list[HeadScore]:
    """``head_scores``' work, for a public function named ``func`` that checks with its own name."""
    sizes = check_model(func, "model", model)
    check_work(func, "one forward pass of each sequence", check_sequences(func, "sequences", sequences, sizes))
    try:
        per_seq = [_sequence_scores(run(model, seq[:len(seq) - 1]), len(seq) // 2) for seq in sequences]
    except OverflowError as error:
        raise too_large(func, error) from None
    n = len(per_seq)
    return [HeadScore(layer, h, math.fsum(p[layer][h][0] for p in per_seq) / n,
                      math.fsum(p[layer][h][1] for p in per_seq) / n)
            for layer in range(len(model.layers)) for h in range(len(model.layers[layer].W_Q))]


def repeat_accuracy(model: Model, sequences: Sequence[Sequence[int]]) -> float:
    """Fraction of the positions of the repeats (``repeat_targets``) where the most likely token is right.

    >>> repeat_accuracy(hand_built_model(4, 7), [[0, 1, 2, 3, 0, 1, 2, 3], [3, 1, 3, 1]])
    1.0
    """
    sizes = check_model("repeat_accuracy", "model", model)
    check_work("repeat_accuracy", "one forward pass of each sequence",
               check_sequences("repeat_accuracy", "sequences", sequences, sizes))
    right, total = 0, 0
    for seq in sequences:
        L = len(seq) // 2
        try:
            logits = run(model, seq[:2 * L - 1]).logits
        except OverflowError as error:
            raise too_large("repeat_accuracy", error) from None
        for i in range(L, 2 * L - 1):
            row = logits[i]
            right += row.index(max(row)) == seq[i + 1]
            total += 1
    return right / total


def check_scores(func: str, name: str, scores: object) -> None:
    """The non-empty list of HeadScore that head_scores returns."""
    if not isinstance(scores, (list, tuple)) or not scores or not all(isinstance(s, HeadScore) for s in scores):
        raise TypeError(f"{func}: {name} must be the non-empty list head_scores returns, got {shorten(scores)}")
    for i, s in enumerate(scores):
        check_int(func, f"{name}[{i}].layer", s.layer)
        check_int(func, f"{name}[{i}].head", s.head)
        for field in ("previous_token", "induction"):
            check_fraction(func, f"{name}[{i}].{field}", getattr(s, field))


def check_fraction(func: str, name: str, value: object) -> None:
    """A share of attention or of right answers: a number from 0 to 1."""
    if not 0 <= check_number(func, name, value) <= 1:
        raise ValueError(f"{func}: {name} is {shorten(value)}; it is a fraction, from 0 to 1")


def succeeded(scores: Sequence[HeadScore], accuracy: float) -> bool:
    """The success rule: some layer-0 head >= 0.5 previous-token, some last-layer head >= 0.5 induction,
    accuracy >= 0.9."""
    check_scores("succeeded", "scores", scores)
    check_fraction("succeeded", "accuracy", accuracy)
    last = max(s.layer for s in scores)
    return (any(s.previous_token >= 0.5 for s in scores if s.layer == 0)
            and any(s.induction >= 0.5 for s in scores if s.layer == last) and accuracy >= 0.9)
