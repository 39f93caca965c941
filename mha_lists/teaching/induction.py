"""Induction heads: a two-layer attention-only transformer, built by hand and learned from scratch.

The task: a run of distinct tokens, then the same run again (``C A D`` then
``C A D``). In the repeat, every token has been seen once before, and the token
that followed it then follows it now. A **previous-token head** in layer 0
writes "the token before me" into the residual stream; an **induction head** in
layer 1 uses that as its keys, finds the position after the earlier occurrence
of the current token and copies that token (Elhage et al. 2021; Olsson et al.
2022). One layer cannot do it: its key at position j is a function of token j
and position j only, never of token j - 1.

The model, for one sequence of token ids (T,), with L layers of multi-head
attention (no biases, no MLP, no LayerNorm):

    x_0    = E_tok[ids]                                  (T, d_model): the residual stream
    layer l: Q, K from x_l + E_pos[0..T-1] (l = 0) or x_l (l > 0);  V from x_l
             x_{l+1} = x_l + [head_0 | head_1 | ...] W_O,   head_h = attention(Q_h, K_h, V_h, causal)
    logits = x_L W_U                                     (T, vocab_size)

Positions enter only layer 0's queries and keys: a position table in the
residual stream would let position alone answer ("the token L back"), and with
it the run length L is drawn per sequence anyway (see FACTS.md, "Induction heads").

Training data: ``make_sequence`` draws L (min_len..max_len) distinct tokens and
repeats them; the model reads the first 2L - 1 tokens, and the loss is the
cross-entropy of predicting token i + 1 at the positions i = L .. 2L - 2 of the
repeat (``repeat_targets``).

=================================  ===================================================
InductionModel                     the parameters (a NamedTuple)
hand_built_model, one_layer_model  small-integer weights: the circuit, and one layer trying
PARTS, part_slices, HAND_SCALE     the four parts of the hand-built residual stream; its scale
token_names                        letters for token ids: A, B, C, ...
Settings, check_settings           sizes, data and optimiser settings of a training run
LIMITS                             the largest sizes accepted (so nothing hangs)
init_model                         random parameters (N(0,1) embeddings, N(0,1/d) weights)
make_sequence, make_sequences      a random run and its repeat
repeat_targets, first_half_targets what each position must predict (None: not scored)
forward                            every intermediate of one pass (a Trace)
predict                            the most likely next token at every position
model_gradients                    the loss on the repeat and every parameter's gradient
flatten, unflatten                 the parameters as one flat list, and back
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
from ..core.checks import (ShapeError, call_outside, check_int, check_matrix, check_number, check_positive_int,
                           check_same_shapes, check_vector, checked, kind)
from ..core.gradients import attention_backward
from ..core.matrix import Matrix, add, concat_heads, matmul, scale, split_heads, transpose
from ..core.softmax_and_masks import apply_mask, causal_mask, softmax_rows
from .training import adam_step, cross_entropy
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
        raise ValueError(f"{func}: {name} is {value}; the limit is {limit} (plain Python would take too long)")
    return value


def _at_most(**keys: str) -> Callable:
    """An ``also`` rule of ``checked``: each argument named is at most its entry of LIMITS
    (``max_len="count"``: max_len is at most LIMITS["count"])."""
    def also(func: str, arguments: dict, sizes: dict) -> None:
        for name, key in keys.items():
            _check_limit(func, name, arguments[name], key)
    return also


@checked(vocab_size="positive int", also=_at_most(vocab_size="vocab_size"))
def token_names(vocab_size: int) -> list[str]:
    """Letters for token ids 0, 1, 2, ...: ``token_names(4)`` is ``['A', 'B', 'C', 'D']``."""
    return [chr(ord("A") + t) for t in range(vocab_size)]


# === The model ===


class InductionModel(NamedTuple):
    """Every parameter of an attention-only transformer (its gradients have the same shape)."""

    token_embeddings: Matrix  # (vocab_size, d_model): row t starts the residual stream of token t
    position_embeddings: Matrix  # (max_positions, d_model): added to layer 0's query and key input only
    layers: list[MHAWeights]  # one multi-head attention layer each, no biases
    W_U: Matrix  # (d_model, vocab_size): the unembedding, residual stream -> logits
    scale: Optional[float] = None  # the attention scale of every layer; None is 1 / sqrt(d_k)


class _ModelSizes(NamedTuple):
    """The sizes an "induction model" names, for the other arguments of the same function."""

    vocab_size: int
    d_model: int
    positions: int  # the most ids the model reads


@kind("induction model")
def _check_model(func: str, name: str, model: object, expected: tuple = ()) -> _ModelSizes:
    """Check every shape of a model against the others, and every entry is finite.

    It is the "induction model" kind of ``checked``: the sizes it names are
    vocab_size, d_model and positions (the longest ids it reads).
    """
    if not isinstance(model, InductionModel):
        raise TypeError(f"{func}: {name} must be an InductionModel (from hand_built_model or init_model), "
                        f"got {type(model).__name__}")
    vocab_size, d_model = check_matrix(func, f"{name}.token_embeddings", model.token_embeddings, finite=True)
    positions, d_pos = check_matrix(func, f"{name}.position_embeddings", model.position_embeddings, finite=True)
    if d_pos != d_model:
        raise ShapeError(f"{func}: {name}.position_embeddings is {positions}x{d_pos}; it needs d_model = {d_model} columns")
    if not isinstance(model.layers, (list, tuple)) or len(model.layers) == 0:
        raise ShapeError(f"{func}: {name}.layers must be a non-empty list of MHAWeights (one per layer)")
    for layer, w in enumerate(model.layers):
        _check_layer(func, f"{name}.layers[{layer}]", w, d_model)
    rows, cols = check_matrix(func, f"{name}.W_U", model.W_U, finite=True)
    if (rows, cols) != (d_model, vocab_size):
        raise ShapeError(f"{func}: {name}.W_U is {rows}x{cols}; it must be (d_model, vocab_size) = {d_model}x{vocab_size}")
    if model.scale is not None:
        check_number(func, f"{name}.scale", model.scale, positive=True)
    return _ModelSizes(vocab_size, d_model, positions)


def _check_layer(func: str, name: str, w: object, d_model: int) -> None:
    """One layer: an MHAWeights of h heads, W_Q and W_K (d_model, d_k), W_V (d_model, d_v), W_O (h d_v, d_model)."""
    if not isinstance(w, MHAWeights):
        raise TypeError(f"{func}: {name} must be an MHAWeights, got {type(w).__name__}")
    if any(b is not None for b in w[4:]):
        raise ValueError(f"{func}: {name} has biases; this model has none")
    shapes = [check_same_shapes(func, f"{name}.{part}", getattr(w, part), finite=True) for part in ("W_Q", "W_K", "W_V")]
    (h, rows_q, d_k), (h_k, rows_k, d_k2), (h_v, rows_v, d_v) = shapes
    if {h, h_k, h_v} != {h} or {rows_q, rows_k, rows_v} != {d_model} or d_k2 != d_k:
        raise ShapeError(
            f"{func}: {name} has W_Q {h}x{rows_q}x{d_k}, W_K {h_k}x{rows_k}x{d_k2}, W_V {h_v}x{rows_v}x{d_v} "
            f"(heads x rows x columns); every head needs d_model = {d_model} rows, W_Q and W_K the same width")
    if check_matrix(func, f"{name}.W_O", w.W_O, finite=True) != (h * d_v, d_model):
        raise ShapeError(f"{func}: {name}.W_O is {len(w.W_O)}x{len(w.W_O[0])}; it must be (num_heads * d_v) x "
                         f"d_model = {h * d_v}x{d_model}")


def _scale_of(model: InductionModel, w: MHAWeights) -> float:
    return 1 / math.sqrt(len(w.W_Q[0][0])) if model.scale is None else model.scale


# === The hand-built model ===

PARTS = ("token", "position", "previous token", "prediction")


@checked(vocab_size="positive int", max_len="positive int", also=_at_most(vocab_size="vocab_size", max_len="count"))
def part_slices(vocab_size: int, max_len: int) -> dict[str, range]:
    """Which columns of the hand-built residual stream hold each part.

    token (one-hot, vocab_size) | position (one-hot, max_len, only in layer 0's
    queries and keys) | previous token (vocab_size, written by layer 0) |
    prediction (vocab_size, written by layer 1, read by the unembedding).

    >>> part_slices(4, 7)
    {'token': range(0, 4), 'position': range(4, 11), 'previous token': range(11, 15), 'prediction': range(15, 19)}
    """
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


def _hand_sizes(func: str, arguments: dict, sizes: dict) -> None:
    vocab_size, max_len = arguments["vocab_size"], arguments["max_len"]
    _check_limit(func, "vocab_size", vocab_size)
    if vocab_size < 2:
        raise ValueError(f"{func}: vocab_size is {vocab_size}; a repeat needs at least 2 different tokens")
    _check_limit(func, "max_len", max_len, "count")
    if max_len < 3:
        raise ValueError(f"{func}: max_len is {max_len}; a run of 2 and the start of its repeat need 3 positions")


_HAND_CONTRACT = dict(vocab_size="positive int", max_len="positive int", scale="positive number", also=_hand_sizes)


@checked(**_HAND_CONTRACT)
def hand_built_model(vocab_size: int, max_len: int, *, scale: float = HAND_SCALE) -> InductionModel:
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
    return InductionModel(E_tok, E_pos, [previous_token_head, induction_head], W_U, scale)


@checked(**_HAND_CONTRACT)
def one_layer_model(vocab_size: int, max_len: int, *, scale: float = HAND_SCALE) -> InductionModel:
    """One layer trying the same job, in the same residual stream as ``hand_built_model``.

    Its only head looks for earlier copies of the current token (query and key
    = one-hot(token)) and copies what it finds into the prediction part. The
    token it finds *is* the current token: to find the position after it, key
    j would need token j - 1, and in one layer key j sees only token j and
    position j. So it predicts the current token again.

    >>> len(one_layer_model(3, 4).layers)
    1
    """
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
    return InductionModel(hand.token_embeddings, hand.position_embeddings, [same_token_head], hand.W_U, scale)


# === Random parameters and the training settings ===


class Settings(NamedTuple):
    """Everything a training run depends on.

    The defaults learn both heads within their 500 steps for most seeds (the README gives the
    count over seeds 0-19). They are the settings measured while planning (FACTS.md: d_model 12,
    2 heads per layer, N(0, 1) embeddings, N(0, 1/d) weights, Adam lr 0.01, run lengths drawn
    per sequence), made smaller (8 tokens, runs of 2-6, batches of 16) so that a run takes about
    40 s of CPU in plain Python instead of minutes.
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
    """Check every field of a Settings; return it (the "induction settings" kind of ``checked`` runs it)."""
    if not isinstance(settings, Settings):
        raise TypeError(f"{func}: settings must be a Settings, got {type(settings).__name__}")
    s = settings
    for name in ("vocab_size", "d_model", "num_heads", "batch_size", "steps"):
        _check_limit(func, name, getattr(s, name))
    _check_limit(func, "num_layers", s.num_layers)
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


@kind("induction settings")
def _settings_kind(func: str, name: str, settings: object, expected: tuple = ()) -> None:
    check_settings(func, settings)  # it names no sizes: a model of other sizes may be trained or reported on


def _check_run_lengths(func: str, min_len: object, max_len: object, vocab_size: int) -> None:
    check_int(func, "min_len", min_len)
    check_int(func, "max_len", max_len)
    if min_len < 2:
        raise ValueError(
            f"{func}: min_len is {min_len}; a sequence too short to repeat: a run needs at least 2 tokens, "
            "so that its repeat holds a token that followed an earlier one")
    if max_len < min_len:
        raise ValueError(f"{func}: max_len {max_len} is below min_len {min_len}")
    if max_len > min(vocab_size, LIMITS["max_len"]):
        raise ValueError(
            f"{func}: max_len is {max_len}; a run is distinct tokens, so it can be at most vocab_size = "
            f"{vocab_size} (and the limit is {LIMITS['max_len']})")


@checked(settings="induction settings")
def init_model(settings: Settings) -> InductionModel:
    """Random parameters for ``settings``: N(0, 1) embeddings, N(0, 1/d_model) weights.

    Positions: one row for each of the 2 * max_len - 1 positions the model reads.

    >>> m = init_model(Settings())
    >>> len(m.token_embeddings), len(m.position_embeddings), len(m.layers), len(m.W_U[0])
    (8, 11, 2, 8)
    """
    s = settings
    d, h = s.d_model, s.num_heads
    d_k = d // h
    std = 1 / math.sqrt(d)

    def draw(rows: int, cols: int, name: str, sigma: float) -> Matrix:
        rng = derive_rng(s.seed, f"induction/{name}")
        return [[rng.gauss(0.0, sigma) for _ in range(cols)] for _ in range(rows)]

    layers = []
    for layer in range(s.num_layers):
        heads = {name: [draw(d, d_k, f"layer{layer}/{name}/head{hh}", std) for hh in range(h)]
                 for name in ("W_Q", "W_K", "W_V")}
        layers.append(MHAWeights(heads["W_Q"], heads["W_K"], heads["W_V"], draw(h * d_k, d, f"layer{layer}/W_O", std)))
    return InductionModel(
        token_embeddings=draw(s.vocab_size, d, "token_embeddings", 1.0),
        position_embeddings=draw(2 * s.max_len - 1, d, "position_embeddings", 1.0),
        layers=layers,
        W_U=draw(d, s.vocab_size, "W_U", std),
    )


# === The task ===


def _run_lengths(func: str, arguments: dict, sizes: dict) -> None:
    _check_limit(func, "vocab_size", arguments["vocab_size"])
    _check_run_lengths(func, arguments["min_len"], arguments["max_len"], arguments["vocab_size"])


@checked(rng="rng", vocab_size="positive int", min_len="int", max_len="int", also=_run_lengths)
def make_sequence(rng: random.Random, vocab_size: int, min_len: int, max_len: int) -> list[int]:
    """A run of L distinct tokens (L drawn from min_len..max_len), then the same run again: 2L ids.

    >>> make_sequence(random.Random(1), 10, 2, 4)
    [9, 1, 9, 1]
    """
    return _make_sequence(rng, vocab_size, min_len, max_len)


def _make_sequence(rng: random.Random, vocab_size: int, min_len: int, max_len: int) -> list[int]:
    run = rng.sample(range(vocab_size), rng.randint(min_len, max_len))
    return run + run


@checked(count="positive int", settings="induction settings", name="str", also=_at_most(count="count"))
def make_sequences(count: int, settings: Settings, name: str) -> list[list[int]]:
    """``count`` sequences drawn from ``derive_rng(settings.seed, "induction/" + name)``.

    Different names give independent sets: "held-out" is never trained on.
    """
    s = settings
    rng = derive_rng(s.seed, f"induction/{name}")
    return [_make_sequence(rng, s.vocab_size, s.min_len, s.max_len) for _ in range(count)]


@kind("induction sequence")
def _check_sequence(func: str, name: str, seq: object, expected: tuple = ()) -> None:
    """A run and its repeat: 2L ids, L >= 2, the second half equal to the first.

    It is the "induction sequence vocab_size positions" kind of ``checked``: with
    a model's sizes, the ids are below its vocab_size and it has a position for
    each of the 2L - 1 tokens it reads (without them, ids are below LIMITS["vocab_size"]).
    """
    vocab_size, positions = expected or (None, None)
    if not isinstance(seq, (list, tuple)) or len(seq) < 4 or len(seq) % 2:
        n = len(seq) if isinstance(seq, (list, tuple)) else type(seq).__name__
        raise ShapeError(
            f"{func}: {name} has {n} tokens; it must be a run of at least 2 tokens and its repeat (an even "
            "length, at least 4): a sequence too short to repeat has nothing to predict")
    L = len(seq) // 2
    top = LIMITS["vocab_size"] if vocab_size is None else vocab_size
    for i, t in enumerate(seq):
        if not 0 <= check_int(func, f"{name}[{i}]", t) < top:
            raise ValueError(f"{func}: {name}[{i}] is {t}; token ids must be 0 to {top - 1}")
    if list(seq[L:]) != list(seq[:L]):
        raise ValueError(f"{func}: {name}'s second half must repeat its first half, got {list(seq)}")
    if positions is not None and 2 * L - 1 > positions:
        raise ShapeError(f"{func}: {name} has a run of {L}; the model reads {2 * L - 1} tokens but has "
                         f"{positions} positions")


@kind("induction sequences")
def _check_sequences(func: str, name: str, sequences: object, expected: tuple = ()) -> None:
    """The "induction sequences vocab_size positions" kind: a non-empty list of "induction sequence"s."""
    if not isinstance(sequences, (list, tuple)) or len(sequences) == 0:
        raise ShapeError(f"{func}: {name} must be a non-empty list of sequences (a run and its repeat)")
    if len(sequences) > LIMITS["count"]:
        raise ValueError(f"{func}: {len(sequences)} {name}; the limit is {LIMITS['count']}")
    for n, seq in enumerate(sequences):
        _check_sequence(func, f"{name}[{n}]", seq, expected)


@checked(seq="induction sequence")
def repeat_targets(seq: Sequence[int]) -> list[Optional[int]]:
    """For the 2L - 1 tokens the model reads: token i + 1 at the positions i = L .. 2L - 2 of the repeat, else None.

    >>> repeat_targets([2, 0, 3, 2, 0, 3])
    [None, None, None, 0, 3]
    """
    L = len(seq) // 2
    return [None] * L + list(seq[L + 1:])


@checked(seq="induction sequence")
def first_half_targets(seq: Sequence[int]) -> list[Optional[int]]:
    """Token i + 1 at the positions i = 0 .. L - 2 of the first run (nothing there repeats), else None.

    >>> first_half_targets([2, 0, 3, 2, 0, 3])
    [0, 3, None, None, None]
    """
    return _first_targets(seq)


# === Forward pass ===


class LayerTrace(NamedTuple):
    """One layer's intermediates, per head where it says so."""

    x: Matrix  # (T, d_model): the residual stream coming in
    qk_input: Matrix  # (T, d_model): x, plus the positions in layer 0
    Q: list[Matrix]  # per head, (T, d_k)
    K: list[Matrix]  # per head, (T, d_k)
    V: list[Matrix]  # per head, (T, d_v)
    attention: list[Matrix]  # per head, (T, T): softmax of the masked, scaled scores
    heads: list[Matrix]  # per head, (T, d_v) = attention V
    output: Matrix  # (T, d_model) = [head_0 | head_1 | ...] W_O, added to the stream


class Trace(NamedTuple):
    """Every intermediate of one forward pass."""

    layers: list[LayerTrace]
    residual: Matrix  # (T, d_model): the stream after the last layer
    logits: Matrix  # (T, vocab_size)


@kind("induction ids")
def _check_ids(func: str, name: str, ids: object, expected: tuple) -> None:
    """The "induction ids vocab_size positions" kind: token ids the model knows, one per position at most."""
    vocab_size, positions = expected
    if not isinstance(ids, (list, tuple)) or len(ids) == 0:
        raise ShapeError(f"{func}: {name} must be a non-empty list of token ids")
    if len(ids) > positions:
        raise ShapeError(f"{func}: {name} has {len(ids)} tokens; the model has {positions} positions")
    for i, t in enumerate(ids):
        if not 0 <= check_int(func, f"{name}[{i}]", t) < vocab_size:
            raise ValueError(f"{func}: {name}[{i}] is {t}; token ids must be 0 to {vocab_size - 1}")


# inside=True: the logits are looked at also when another function of this module calls it (predict,
# head_scores, ...): an overflow inside shows there as inf or nan, and is reported under that function's name.
@checked(model="induction model", ids="induction ids vocab_size positions", finite_result=lambda trace: trace.logits,
         inside=True)
def forward(model: InductionModel, ids: Sequence[int]) -> Trace:
    """Every intermediate when the model reads ids (T,), T at most the model's positions."""
    return _forward(model, ids)


def _layer_forward(x: Matrix, qk_input: Matrix, w: MHAWeights, mask, c: float) -> LayerTrace:
    # Every head's Q and K in one product, [W_Q[0] | W_Q[1] | ... | W_K[0] | ...], then cut into
    # heads: the same sums as one product per head, with fewer calls.
    h = len(w.W_Q)
    QK = split_heads(matmul(qk_input, concat_heads(w.W_Q + w.W_K)), 2 * h)
    Q, K = QK[:h], QK[h:]
    V = split_heads(matmul(x, concat_heads(w.W_V)), h)
    A = [softmax_rows(apply_mask(scale(matmul(Q_h, transpose(K_h)), c), mask)) for Q_h, K_h in zip(Q, K)]
    heads = [matmul(A_h, V_h) for A_h, V_h in zip(A, V)]
    return LayerTrace(x, qk_input, Q, K, V, A, heads, matmul(concat_heads(heads), w.W_O))


def _forward(model: InductionModel, ids: Sequence[int]) -> Trace:
    T = len(ids)
    mask = causal_mask(T)
    x = [list(model.token_embeddings[t]) for t in ids]
    layers = []
    for layer, w in enumerate(model.layers):
        qk_input = add(x, model.position_embeddings[:T]) if layer == 0 else x
        trace = _layer_forward(x, qk_input, w, mask, _scale_of(model, w))
        layers.append(trace)
        x = add(x, trace.output)
    return Trace(layers, x, matmul(x, model.W_U))


@checked(model="induction model", ids="induction ids vocab_size positions")
def predict(model: InductionModel, ids: Sequence[int]) -> list[int]:
    """The most likely next token at every position of ids (the first, on a tie).

    >>> predict(hand_built_model(4, 7), [0, 1, 2, 3, 0, 1, 2])[4:]
    [1, 2, 3]
    """
    logits = forward(model, ids).logits
    return [row.index(max(row)) for row in logits]


# === Backward pass ===


@checked(model="induction model", seq="induction sequence vocab_size positions",
         finite_result=lambda result: [result[0], *_flatten(result[1])])
def model_gradients(model: InductionModel, seq: Sequence[int]) -> tuple[float, InductionModel]:
    """The loss on the repeat of seq (a run and its repeat) and the gradient of every parameter.

    The loss is the mean cross-entropy at the positions of ``repeat_targets``.
    Backwards through each layer, last first (the residual stream adds, so its
    gradient passes through unchanged and each layer adds its own part):

        d logits -> dW_U = x_L^T d_logits,  dx_L = d_logits W_U^T
        layer l (G = dx_{l+1}):  dW_O = concat^T G;  d_head_h = head h's columns of G W_O^T
            dQ_h, dK_h, dV_h = attention_backward(Q_h, K_h, V_h, d_head_h, causal)
            dW_Q[h] = qk^T dQ_h,  dW_K[h] = qk^T dK_h,  dW_V[h] = x_l^T dV_h
            dx_l = G + sum_h (dQ_h W_Q[h]^T + dK_h W_K[h]^T + dV_h W_V[h]^T)
        layer 0's positions: dE_pos[i] = sum_h (dQ_h W_Q[h]^T + dK_h W_K[h]^T)[i]
        dE_tok[t] = sum of dx_0[i] over the positions i holding token t
    """
    loss, grads, _ = _model_gradients(model, seq)
    return loss, grads


def _model_gradients(model: InductionModel, seq: Sequence[int]):
    """Loss, gradients and the forward Trace (the caller may want its attention)."""
    L = len(seq) // 2
    ids = seq[:2 * L - 1]
    fwd = forward(model, ids)  # its logits are looked at: an overflow is named before cross_entropy meets it
    loss, d_logits = cross_entropy(fwd.logits, [None] * L + list(seq[L + 1:]))
    dW_U = matmul(transpose(fwd.residual), d_logits)
    dx = matmul(d_logits, transpose(model.W_U))
    d_layers: list[MHAWeights] = []
    d_qk = None
    for layer in reversed(range(len(model.layers))):
        w, t = model.layers[layer], fwd.layers[layer]
        d_w, dx_attn, d_qk = _layer_backward(w, t, dx, _scale_of(model, w))
        dx = add(dx, dx_attn) if layer == 0 else add(add(dx, dx_attn), d_qk)
        d_layers.insert(0, d_w)
    # Layer 0's queries and keys read x_0 + E_pos: both get d_qk.
    dx = add(dx, d_qk)
    d_pos = [list(row) for row in d_qk] + [[0.0] * len(row) for row in model.position_embeddings[len(ids):]]
    d_tok = []
    for token in range(len(model.token_embeddings)):
        rows = [dx[i] for i, t in enumerate(ids) if t == token]
        d_tok.append([math.fsum(col) for col in zip(*rows)] if rows else [0.0] * len(dx[0]))
    return loss, InductionModel(d_tok, d_pos, d_layers, dW_U, model.scale), fwd


def _layer_backward(w: MHAWeights, t: LayerTrace, G: Matrix, c: float) -> tuple[MHAWeights, Matrix, Matrix]:
    """Gradients of one layer's weights, of its value input x and of its query/key input."""
    dW_O = matmul(transpose(concat_heads(t.heads)), G)
    d_heads = split_heads(matmul(G, transpose(w.W_O)), len(w.W_Q))
    mask = causal_mask(len(G))
    dQ, dK, dV = [], [], []
    for h, d_head in enumerate(d_heads):
        dQ_h, dK_h, dV_h = attention_backward(t.Q[h], t.K[h], t.V[h], d_head, mask=mask, scale=c)
        dQ.append(dQ_h)
        dK.append(dK_h)
        dV.append(dV_h)
    h = len(dQ)
    d_QK = split_heads(matmul(transpose(t.qk_input), concat_heads(dQ + dK)), 2 * h)  # qk^T dQ_h, qk^T dK_h
    d_w = MHAWeights(d_QK[:h], d_QK[h:], split_heads(matmul(transpose(t.x), concat_heads(dV)), h), dW_O)
    # One matmul adds the heads' terms: [dQ_0 | dK_0 | ...] [W_Q[0] | W_K[0] | ...]^T, one fsum per entry.
    d_qk = matmul(concat_heads(dQ + dK), transpose(concat_heads(w.W_Q + w.W_K)))
    dx = matmul(concat_heads(dV), transpose(concat_heads(w.W_V)))
    return d_w, dx, d_qk


# === Flat parameters (for Adam) ===


def _matrices(model: InductionModel) -> list[Matrix]:
    out = [model.token_embeddings, model.position_embeddings]
    for w in model.layers:
        out += [*w.W_Q, *w.W_K, *w.W_V, w.W_O]
    return out + [model.W_U]


@checked(model="induction model")
def flatten(model: InductionModel) -> list[float]:
    """Every parameter in one list, in a fixed order (``unflatten`` reverses it)."""
    return _flatten(model)


def _flatten(model: InductionModel) -> list[float]:
    return [x for M in _matrices(model) for row in M for x in row]


def _flat_fits(func: str, arguments: dict, sizes: dict) -> None:
    flat, like = arguments["flat"], arguments["like"]
    size = sum(len(M) * len(M[0]) for M in _matrices(like))
    if not isinstance(flat, (list, tuple)) or len(flat) != size:
        n = len(flat) if isinstance(flat, (list, tuple)) else type(flat).__name__
        raise ShapeError(f"{func}: flat has {n} numbers but a model shaped like `like` has {size}")
    check_vector(func, "flat", flat, finite=True)


@checked(like="induction model", also=_flat_fits)
def unflatten(flat: Sequence[float], like: InductionModel) -> InductionModel:
    """A model shaped like ``like`` holding the numbers of ``flat`` (the order of ``flatten``)."""
    return _unflatten(flat, like)


def _unflatten(flat: Sequence[float], like: InductionModel) -> InductionModel:
    position = 0

    def take(M: Matrix) -> Matrix:
        nonlocal position
        width, rows = len(M[0]), []
        for _ in M:
            rows.append(list(flat[position:position + width]))
            position += width
        return rows

    E_tok, E_pos = take(like.token_embeddings), take(like.position_embeddings)
    layers = []
    for w in like.layers:
        W_Q, W_K, W_V = [take(M) for M in w.W_Q], [take(M) for M in w.W_K], [take(M) for M in w.W_V]
        layers.append(MHAWeights(W_Q, W_K, W_V, take(w.W_O)))
    return InductionModel(E_tok, E_pos, layers, take(like.W_U), like.scale)


# === Training ===


class History(NamedTuple):
    """Per step, measured on that step's batch before the step."""

    repeat_loss: list[float]  # mean loss on the repeated halves (the loss trained on)
    first_half_loss: list[float]  # mean loss on the first runs (not trained on: nothing to copy there)
    previous_token: list[float]  # the best layer-0 head's previous-token score
    induction: list[float]  # the best last-layer head's induction score


def _batch_scores(traces: Sequence[Trace], seqs: Sequence[Sequence[int]]) -> tuple[float, float]:
    per_seq = [_sequence_scores(t, len(s) // 2) for t, s in zip(traces, seqs)]
    first, last = 0, len(per_seq[0]) - 1
    heads = range(len(per_seq[0][0]))
    prev = max(math.fsum(p[first][h][0] for p in per_seq) / len(per_seq) for h in heads)
    ind = max(math.fsum(p[last][h][1] for p in per_seq) / len(per_seq) for h in heads)
    return prev, ind


def _progress_and_model(func: str, arguments: dict, sizes: dict) -> None:
    s, model, progress = arguments["settings"], arguments["model"], arguments["progress"]
    if progress is not None and not callable(progress):
        raise TypeError(f"{func}: progress must be a function (step, history) or None")
    if model is not None and ((sizes["vocab_size"], sizes["d_model"], len(model.layers)) != (
            s.vocab_size, s.d_model, s.num_layers) or sizes["positions"] < 2 * s.max_len - 1):
        raise ShapeError(f"{func}: model does not have the sizes of settings (vocab_size, d_model, num_layers, "
                         f"2 * max_len - 1 positions)")


@checked(settings="induction settings", model="optional induction model", also=_progress_and_model,
         finite_result=lambda result: _flatten(result[0]))
def train(settings: Settings, *, progress: Optional[Callable[[int, History], None]] = None,
          model: Optional[InductionModel] = None) -> tuple[InductionModel, History]:
    """``settings.steps`` Adam steps, each on a fresh batch; returns the trained model and its History.

    The model starts as ``init_model(settings)`` unless one is given (of the
    same sizes). ``progress(step, history)`` is called after every step.
    """
    s = settings
    if model is None:
        model = init_model(s)
    rng = derive_rng(s.seed, "induction/batches")
    params, state = flatten(model), None
    history = History([], [], [], [])
    for step in range(s.steps):
        batch = [_make_sequence(rng, s.vocab_size, s.min_len, s.max_len) for _ in range(s.batch_size)]
        current = _unflatten(params, model)
        # Every scored position counts once (a run of L has L - 1 of them in its repeat, and as many
        # in its first half), as PyTorch's cross_entropy averages over the targets of a whole batch.
        total = sum(len(seq) // 2 - 1 for seq in batch)
        share = [(len(seq) // 2 - 1) / total for seq in batch]
        losses, firsts, grads, traces = [], [], [], []
        for seq, w in zip(batch, share):
            loss, g, fwd = _model_gradients(current, seq)
            losses.append(w * loss)
            grads.append([w * x for x in _flatten(g)])
            traces.append(fwd)
            firsts.append(w * cross_entropy(fwd.logits, _first_targets(seq))[0])
        mean_grad = [math.fsum(entries) for entries in zip(*grads)]
        params, state = adam_step(params, mean_grad, state, lr=s.lr)
        prev, ind = _batch_scores(traces, batch)
        history.repeat_loss.append(math.fsum(losses))
        history.first_half_loss.append(math.fsum(firsts))
        history.previous_token.append(prev)
        history.induction.append(ind)
        if progress is not None:
            call_outside(progress, step + 1, history)  # the learner's function: its calls are checked
    return _unflatten(params, model), history


def _first_targets(seq: Sequence[int]) -> list[Optional[int]]:
    L = len(seq) // 2
    return list(seq[1:L]) + [None] * L


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
            prev = math.fsum(A[i][i - 1] for i in range(1, T)) / (T - 1)
            ind = math.fsum(A[i][i - L + 1] for i in range(L, T)) / (T - L)
            row.append((prev, ind))
        out.append(row)
    return out


@checked(model="induction model", sequences="induction sequences vocab_size positions")
def head_scores(model: InductionModel, sequences: Sequence[Sequence[int]]) -> list[HeadScore]:
    """Every head's previous-token and induction score, each the mean over the sequences.

    Previous-token: mean attention from i to i - 1 (i >= 1). Induction: mean
    attention from i in the repeat (i = L .. 2L - 2) to i - L + 1, the position
    after the earlier occurrence of token i. The model reads 2L - 1 tokens.

    >>> [f"{s.previous_token:.2f} {s.induction:.2f}" for s in head_scores(hand_built_model(4, 7), [[0, 1, 2, 3, 0, 1, 2, 3]])]
    ['0.98 0.01', '0.31 0.98']
    """
    per_seq = []
    for seq in sequences:
        L = len(seq) // 2
        per_seq.append(_sequence_scores(forward(model, seq[:2 * L - 1]), L))
    n = len(per_seq)
    return [HeadScore(layer, h, math.fsum(p[layer][h][0] for p in per_seq) / n,
                      math.fsum(p[layer][h][1] for p in per_seq) / n)
            for layer in range(len(model.layers)) for h in range(len(model.layers[layer].W_Q))]


@checked(model="induction model", sequences="induction sequences vocab_size positions")
def repeat_accuracy(model: InductionModel, sequences: Sequence[Sequence[int]]) -> float:
    """Fraction of the positions of the repeats (``repeat_targets``) where the most likely token is right.

    >>> repeat_accuracy(hand_built_model(4, 7), [[0, 1, 2, 3, 0, 1, 2, 3], [3, 1, 3, 1]])
    1.0
    """
    right, total = 0, 0
    for seq in sequences:
        L = len(seq) // 2
        logits = forward(model, seq[:2 * L - 1]).logits
        for i in range(L, 2 * L - 1):
            row = logits[i]
            right += row.index(max(row)) == seq[i + 1]
            total += 1
    return right / total


@kind("induction scores")
def _check_scores(func: str, name: str, scores: object, expected: tuple = ()) -> None:
    """The "induction scores" kind: the non-empty list of HeadScore that head_scores returns."""
    if not isinstance(scores, (list, tuple)) or not scores or not all(isinstance(s, HeadScore) for s in scores):
        raise TypeError(f"{func}: {name} must be the non-empty list head_scores returns")
    for i, s in enumerate(scores):
        check_int(func, f"{name}[{i}].layer", s.layer)
        check_int(func, f"{name}[{i}].head", s.head)
        for field in ("previous_token", "induction"):
            _a_fraction(func, f"{name}[{i}].{field}", getattr(s, field))


def _a_fraction(func: str, name: str, value: object) -> None:
    """A share of attention or of right answers: a number from 0 to 1."""
    if not 0 <= check_number(func, name, value) <= 1:
        raise ValueError(f"{func}: {name} is {value}; it is a fraction, from 0 to 1")


@checked(scores="induction scores", accuracy="number",
         also=lambda func, arguments, sizes: _a_fraction(func, "accuracy", arguments["accuracy"]))
def succeeded(scores: Sequence[HeadScore], accuracy: float) -> bool:
    """The success rule: some layer-0 head >= 0.5 previous-token, some last-layer head >= 0.5 induction,
    accuracy >= 0.9."""
    last = max(s.layer for s in scores)
    return (any(s.previous_token >= 0.5 for s in scores if s.layer == 0)
            and any(s.induction >= 0.5 for s in scores if s.layer == last) and accuracy >= 0.9)
