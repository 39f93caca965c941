"""A model that read a book: two attention layers trained on real text, one character at a time.

The book is Genesis, from the King James Bible (1611; public domain, from Debian's
``bible-kjv-text``), shipped as ``mha_lists/data/genesis.txt``: one verse per line. The model
reads it lowercased, verses joined by spaces, one character per token. Its vocabulary is
the 36 characters of that text and one more, ``UNKNOWN``, which every other character maps
to: any sentence a learner types is read, never refused (a digit, an accent or an emoji
becomes ``<unk>``).

The model is ``model.Model`` (notebook 17's and 19's: every layer through the core), with
2 layers, positions entering only layer 0's queries and keys, no MLP. Layer 0 has 3 heads of
width 8, layer 1 has 2 of width 12. Why 3 in layer 0: with 2, the previous-character job was
split between both heads on 2 of seeds 0-9 (0.46 and 0.44 at best, where a head with the job
scores over 0.5), and with 1 it did not form at all on one of the two seeds tried; with 3, one
head takes the job (the README gives how many seeds succeed).

    x_0    = E_tok[ids]                    (T, 24): the residual stream
    layer l: Q, K from x_l + E_pos (l = 0) or x_l;  V from x_l;  x_{l+1} = x_l + MHA(x_l)
    logits = x_2 W_U                       (T, 37): the next character, at every position

**Why every training window repeats a passage.** Each window is 16 characters of the
book in which a passage (4 to 8 characters, at a random place) is copied over a later
stretch. On plain text, predicting the next character from the last few rewards a
previous-token head but seldom rewards copying from far back; when every window repeats a
passage, copying pays in every window, and an induction head forms within the run (a random
place, so that no fixed offset does the job).

=================================  ===================================================
book, training_text, validation    the text, lowercased; its first 90% and last 10%
VOCAB, UNKNOWN, encode, decode     characters <-> token ids; labels (what a picture shows)
Settings, check_settings, LIMITS   sizes, data and optimiser settings of a training run
learning_rate                      each step's: a warm-up, then a cosine down to lr_end
init_model                         random parameters (model.random_model)
make_window                        16 characters of text with a passage repeated in it
train, History                     Adam steps on fresh windows; the loss of each step
head_scores                        previous-token score on text, induction score on
                                   repeated random characters, for every head
repeat_scores                      both scores on runs of your own and their repeats
in_context_loss                    loss on a passage's first copy and on its second
validation_loss, baselines         the loss per character, and unigram/bigram baselines
generate                           the model writing, greedy or sampled
without, copying                   a head switched off; how long the writing copies
votes, Vote                        why it favours one next character over another: each
                                   head's share of the logit difference
key_parts, KeyPart                 why a layer-1 head scores each key as it does: each part
                                   of the stream its keys read (K-composition on a text)
trained_run, trained_model         the shipped run and its model (tools/read_text.py trains it)
read, head_jobs                    every head's attention on a text, and what each does there
=================================  ===================================================

Every random number comes from ``derive_rng(seed, "read_text/...")`` and every sum is a
``math.fsum``: a run gives the same bits on CPython 3.10 to 3.13.
"""

from __future__ import annotations

import json
import math
import pathlib
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional

from ..core.attention import MHAWeights
from ..core.matrix import Matrix, product
from ..core.checks import check_int, check_number, check_positive_int, check_type, quote_int, shorten, too_large
from ..core.softmax_and_masks import softmax_of_rows
from .induction import followers, scores_on_repeats
from .model import (Model, Step, check_model, check_progress, check_training_work, fit, flatten, forward_work, loss_of,
                    previous_share, random_model, run, shaped)
from .weights import derive_rng

__all__ = [  # what notebook 07b imports; the rest is documented in the map above
    "VOCAB", "encode", "trained_run", "read", "head_jobs", "generate", "held_out_windows", "in_context_loss",
    "head_scores"]

DATA = pathlib.Path(__file__).resolve().parent.parent / "data"
BOOK_FILE = DATA / "genesis.txt"
RUN_FILE = DATA / "read_text_run.json"  # the shipped run: python -m mha_lists.tools.read_text --save ...
RUN_FORMAT = "mha-lists read_text run 2"  # 2: heads per layer

UNKNOWN = "<unk>"  # the token of every character the book does not have
CHARACTERS = " !'(),.:;?abcdefghijklmnopqrstuvwxyz"  # every character of the lowercased book (tests check it)
VOCAB = [UNKNOWN, *CHARACTERS]  # token id -> what it stands for
_IDS = {c: i for i, c in enumerate(VOCAB)}
VALIDATION_SHARE = 0.1  # the book's last 10% is never trained on
EVAL_SEED = 0  # the held-out windows and sequences are the same for every run, whatever its seed
HELD_OUT = 200  # windows (or sequences) each measure averages over

# Sizes above these are refused with a message that names the limit, so nothing hangs.
# Steps: 9,000 of the default settings are about half an hour of plain Python (model.MAX_TRAINING_WORK);
# larger sizes meet that limit sooner, and train says so.
LIMITS = {"d_model": 64, "heads": 8, "layers": 4, "window": 64, "batch_size": 64, "steps": 9_000,
          "length": 2000, "count": 2000}


# === The text and its characters ===


def book() -> str:
    """The whole book as the model reads it: lowercased, verses joined by one space."""
    with open(BOOK_FILE, encoding="utf-8") as f:
        return " ".join(line.strip() for line in f if line.strip()).lower()


def training_text() -> str:
    """The book's first 90%: what training windows are cut from."""
    text = book()
    return text[:len(text) - int(len(text) * VALIDATION_SHARE)]


def validation_text() -> str:
    """The book's last 10%, never trained on: what the losses and the previous-token score are measured on."""
    text = book()
    return text[len(text) - int(len(text) * VALIDATION_SHARE):]


def _token(c: str) -> int:
    low = c.lower()
    return _IDS.get(low if len(low) == 1 else c, 0)


def encode(text: str) -> list[int]:
    """One token id per character: the character lowercased, or 0 (``UNKNOWN``) if the book has no such character.

    >>> encode("Hi, 2 é!")
    [18, 19, 6, 1, 0, 1, 0, 2]
    """
    check_type("encode", "text", text, str, "a str")
    return [_token(c) for c in text]


def decode(ids: Sequence[int]) -> str:
    """The characters of token ids, ``<unk>`` for 0.

    >>> decode(encode("Hi, 2!"))
    'hi, <unk>!'
    """
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"decode: ids must be a list of token ids, got {shorten(ids)}")
    for i, t in enumerate(ids):
        if not 0 <= check_int("decode", f"ids[{i}]", t) < len(VOCAB):
            raise ValueError(f"decode: ids[{i}] is {quote_int(t)}; token ids are 0 to {len(VOCAB) - 1}")
    return "".join(VOCAB[t] for t in ids)


def labels(text: str) -> list[str]:
    """What a picture writes for each character: itself lowercased, a space as "␣", an unknown one as ``<unk>``.

    >>> labels("A b?é")
    ['a', '␣', 'b', '?', '<unk>']
    """
    check_type("labels", "text", text, str, "a str")
    return ["␣" if t == 1 else VOCAB[t] for t in (_token(c) for c in text)]


# === Training ===


class Settings(NamedTuple):
    """Everything a training run depends on. The defaults train in about seven minutes of plain Python
    (the README gives the time and how many of seeds 0-11 succeed)."""

    d_model: int = 24
    heads: tuple[int, ...] = (3, 2)  # heads in each layer, of width d_model / heads (why 3, then 2: above)
    window: int = 16  # characters the model reads at once (rows of the position table)
    batch_size: int = 8
    lr: float = 0.02  # the learning rate at its peak: after the warm-up, it falls to lr_end (learning_rate)
    warmup: int = 100  # steps over which it climbs from lr / warmup to lr
    lr_end: float = 0.001  # the last step's
    steps: int = 2000  # about 7 minutes of one core; with 1,500, 2 of seeds 0-11 found no induction head (0.24, 0.29)
    seed: int = 0


def check_settings(func: str, settings: object) -> Settings:
    """Check every field of a Settings; return it."""
    if not isinstance(settings, Settings):
        raise TypeError(f"{func}: settings must be a Settings, got {type(settings).__name__}")
    for name in ("d_model", "window", "batch_size", "steps"):
        value = check_positive_int(func, name, getattr(settings, name))
        if value > LIMITS[name]:
            raise ValueError(f"{func}: {name} is {quote_int(value)}; the limit is {LIMITS[name]} "
                             "(plain Python would take too long)")
    heads = settings.heads
    if not isinstance(heads, tuple) or not 1 <= len(heads) <= LIMITS["layers"]:
        raise ValueError(f"{func}: heads must be a tuple of 1 to {LIMITS['layers']} head counts, one per layer, "
                         f"got {shorten(heads)}")
    for layer, h in enumerate(heads):
        check_positive_int(func, f"heads[{layer}]", h, LIMITS["heads"])
        if settings.d_model % h:
            raise ValueError(f"{func}: d_model {settings.d_model} is not divisible by heads[{layer}] = {h}")
    if settings.window < 8:
        raise ValueError(f"{func}: window is {settings.window}; a window needs at least 8 characters, "
                         "to hold a passage of 4 and its copy")
    check_number(func, "lr", settings.lr, positive=True)
    check_number(func, "lr_end", settings.lr_end, positive=True)
    if settings.lr_end > settings.lr:
        raise ValueError(f"{func}: lr_end is {settings.lr_end}, above lr ({settings.lr}); the rate falls to lr_end")
    if check_int(func, "warmup", settings.warmup) < 0 or settings.warmup >= settings.steps:
        raise ValueError(f"{func}: warmup is {quote_int(settings.warmup)}; it must be 0 to steps - 1 "
                         f"({settings.steps - 1:,})")
    check_int(func, "seed", settings.seed)
    return settings


def learning_rate(settings: Settings, step: int) -> float:
    """Step ``step``'s learning rate (1 to settings.steps): a straight climb to ``lr`` over the first
    ``warmup`` steps, then half a cosine down to ``lr_end`` at the last step. Large steps while the
    model is far from anything good, small ones at the end, so the attention it found sharpens.

    >>> s = Settings(lr=0.02, warmup=100, lr_end=0.001, steps=1500)
    >>> [round(learning_rate(s, t), 5) for t in (1, 50, 100, 800, 1500)]
    [0.0002, 0.01, 0.02, 0.0105, 0.001]
    """
    s = check_settings("learning_rate", settings)
    if not 1 <= check_int("learning_rate", "step", step) <= s.steps:
        raise ValueError(f"learning_rate: step is {quote_int(step)}; it must be 1 to steps ({s.steps:,})")
    if step <= s.warmup:
        return s.lr * step / s.warmup
    done = (step - s.warmup) / (s.steps - s.warmup)  # 0 -> 1 after the warm-up
    return s.lr_end + (s.lr - s.lr_end) * (1 + math.cos(math.pi * done)) / 2


def init_model(settings: Settings) -> Model:
    """Random parameters for ``settings``: N(0, 1) embeddings, N(0, 1/d_model) weights.

    >>> m = init_model(Settings())
    >>> len(m.token_embeddings), len(m.position_embeddings), len(m.layers), m.positions
    (37, 16, 2, 'queries and keys')
    """
    s = check_settings("init_model", settings)
    return random_model(s.seed, "read_text", len(VOCAB), s.d_model, s.heads, s.window)


class Window(NamedTuple):
    ids: list[int]  # the window + 1 characters' token ids: the model reads ids[:-1] and predicts ids[1:]
    first: int  # where the passage starts
    second: int  # where its copy starts
    length: int  # how many characters the passage has


def make_window(rng: random.Random, ids: Sequence[int], window: int) -> Window:
    """``window + 1`` characters of ``ids`` from a random place, with a passage copied over a later stretch.

    The passage has 4 to window // 2 characters; it and its copy are at random places, the copy after it.

    >>> w = make_window(random.Random(3), encode("in the beginning god created the heaven and the earth."), 12)
    >>> decode(w.ids), w.first, w.second, w.length
    ('g god cg god ', 0, 7, 6)
    """
    check_type("make_window", "rng", rng, random.Random, "a random.Random (e.g. derive_rng(seed, name))")
    check_positive_int("make_window", "window", window)
    if window < 8:
        raise ValueError(f"make_window: window is {window}; it needs at least 8 characters")
    if not isinstance(ids, (list, tuple)) or len(ids) < window + 1:
        raise ValueError(f"make_window: ids must be a list of at least window + 1 = {window + 1} token ids, "
                         f"got {shorten(ids)}")
    return _window(rng, ids, window)


def _window(rng: random.Random, ids: Sequence[int], window: int) -> Window:
    start = rng.randrange(len(ids) - window)
    w = list(ids[start:start + window + 1])
    n = rng.randint(4, window // 2)
    first = rng.randrange(0, window + 2 - 2 * n)
    second = rng.randrange(first + n, window + 2 - n)
    w[second:second + n] = w[first:first + n]
    return Window(w, first, second, n)


class History(NamedTuple):
    """Per step, measured on that step's batch before the step."""

    loss: list[float]  # mean loss per character of the batch


def train(settings: Settings, *, progress: Optional[Callable[[int, History], None]] = None) -> tuple[Model, History]:
    """``settings.steps`` Adam steps, each on ``batch_size`` fresh windows of the training text.

    ``progress(step, history)`` is called after every step.
    """
    s = check_settings("train", settings)
    check_progress("train", progress)
    model = init_model(s)
    check_training_work("train", s.steps, s.batch_size, 3 * forward_work(check_model("train", "model", model), s.window))
    ids = encode(training_text())
    rng = derive_rng(s.seed, "read_text/windows")
    windows = [[_window(rng, ids, s.window).ids for _ in range(s.batch_size)] for _ in range(s.steps)]
    batches = [[(w[:-1], w[1:]) for w in batch] for batch in windows]
    history = History([])

    def record(step: Step) -> None:
        history.loss.append(step.loss)
        if progress is not None:
            progress(step.number, history)

    trained, _ = fit(model, batches, lr=lambda step: learning_rate(s, step), progress=record)
    return trained, history


# === What the model learned ===


def _check_trained(func: str, model: object) -> int:
    """A model of this vocabulary; return how many characters it reads at once."""
    sizes = check_model(func, "model", model)
    if sizes.vocab_size != len(VOCAB):
        raise ValueError(f"{func}: model has {sizes.vocab_size} tokens; a model of the book has {len(VOCAB)}")
    if sizes.positions < 8:
        raise ValueError(f"{func}: model reads {sizes.positions} characters at once; measuring needs at least 8")
    return sizes.positions


def held_out_windows(window: int, count: int = HELD_OUT) -> list[Window]:
    """``count`` windows of the validation text, each with a repeated passage, the same for every run."""
    if not 8 <= check_positive_int("held_out_windows", "window", window) <= LIMITS["window"]:
        raise ValueError(f"held_out_windows: window is {window}; it must be 8 to {LIMITS['window']}")
    check_count("held_out_windows", count)
    rng = derive_rng(EVAL_SEED, "read_text/held-out windows")
    ids = encode(validation_text())
    return [_window(rng, ids, window) for _ in range(count)]


class HeadScore(NamedTuple):
    layer: int
    head: int
    previous_token: float  # mean attention from i to i - 1 on the validation text
    induction: float  # mean attention from i in a repeat to i - L + 1, on repeated random characters


def check_count(func: str, count: object) -> int:
    return check_positive_int(func, "count", count, LIMITS["count"])


def repeat_scores(model: Model, sequences: Sequence[Sequence[int]]) -> list:
    """Every head's previous-token and induction share on ``sequences`` of token ids, each a run followed by
    its repeat: ``induction.head_scores``, which measures the same for notebook 19's model."""
    return scores_on_repeats("repeat_scores", model, sequences)


def head_scores(model: Model, count: int = HELD_OUT) -> list[HeadScore]:
    """Every head's previous-token score (on ``count`` windows of plain validation text) and induction score
    (on ``count`` runs of L random characters and their repeat, L drawn from 4 to half the window, so no
    fixed offset scores)."""
    T = _check_trained("head_scores", model)
    check_count("head_scores", count)
    rng = derive_rng(EVAL_SEED, "read_text/held-out random runs")
    runs = [[rng.randrange(1, len(VOCAB)) for _ in range(rng.randint(4, T // 2))] for _ in range(count)]
    sums: list[list[list[float]]] = [[[] for _ in w.W_Q] for w in model.layers]
    try:
        induction = scores_on_repeats("head_scores", model, [r + r for r in runs])
        for ids in _held_out_text(T, count):
            for layer, attention in enumerate(run(model, ids[:-1]).layers):
                for h, A in enumerate(attention.attention):
                    sums[layer][h].append(previous_share(A))
    except OverflowError as error:
        raise too_large("head_scores", error) from None
    prev = [[math.fsum(s) / count for s in layer] for layer in sums]
    return [HeadScore(s.layer, s.head, prev[s.layer][s.head], s.induction) for s in induction]


def in_context_loss(model: Model, count: int = HELD_OUT) -> tuple[float, float]:
    """Mean loss per character on the passages of ``count`` held-out windows: on their first copy, and on
    their second (characters 2 onwards of each, which the first copy announces)."""
    T = _check_trained("in_context_loss", model)
    check_count("in_context_loss", count)
    first, second = [], []
    try:
        for w in held_out_windows(T, count):
            logits = run(model, w.ids[:-1]).logits
            for i in range(w.length - 1):  # position p predicts ids[p + 1]
                first.append(loss_of([logits[w.first + i]], [w.ids[w.first + i + 1]])[0])
                second.append(loss_of([logits[w.second + i]], [w.ids[w.second + i + 1]])[0])
    except OverflowError as error:
        raise too_large("in_context_loss", error) from None
    return math.fsum(first) / len(first), math.fsum(second) / len(second)


def validation_loss(model: Model, count: int = HELD_OUT) -> float:
    """Mean loss per character on ``count`` windows of plain validation text (no repeats), every position."""
    T = _check_trained("validation_loss", model)
    check_count("validation_loss", count)
    losses = []
    try:
        for ids in _held_out_text(T, count):
            losses.append(loss_of(run(model, ids[:-1]).logits, ids[1:])[0])
    except OverflowError as error:
        raise too_large("validation_loss", error) from None
    return math.fsum(losses) / len(losses)


def _held_out_text(window: int, count: int) -> list[list[int]]:
    """``count`` stretches of window + 1 characters of plain validation text, the same for every run (the
    model reads the first ``window`` and predicts the last ``window``)."""
    text = encode(validation_text())
    starts = derive_rng(EVAL_SEED, "read_text/held-out text")
    return [text[start:start + window + 1] for start in (starts.randrange(len(text) - window) for _ in range(count))]


def baselines() -> tuple[float, float]:
    """The loss per character on the validation text of two models that only count, fitted on the training
    text (add-one smoothing): unigram (each character's frequency) and bigram (given the previous one)."""
    train_ids, valid = encode(training_text()), encode(validation_text())
    V = len(VOCAB)
    counts = [1] * V
    pairs = [[1] * V for _ in range(V)]
    for a, b in zip(train_ids, train_ids[1:]):
        counts[b] += 1
        pairs[a][b] += 1
    total = sum(counts)
    unigram = math.fsum(-math.log(counts[b] / total) for b in valid[1:]) / (len(valid) - 1)
    rows = [sum(row) for row in pairs]
    bigram = math.fsum(-math.log(pairs[a][b] / rows[a]) for a, b in zip(valid, valid[1:])) / (len(valid) - 1)
    return unigram, bigram


def generate(model: Model, prompt: str, length: int, *, temperature: float = 0.0, seed: int = 0) -> str:
    """``prompt`` and ``length`` more characters, each the model's next: the most likely one (temperature 0),
    or drawn from softmax(logits / temperature) with ``derive_rng(seed, "read_text/generate")``.

    The model reads the last ``window`` characters it has (its position table's rows)."""
    T = _check_trained("generate", model)
    check_type("generate", "prompt", prompt, str, "a str")
    if not prompt:
        raise ValueError("generate: prompt is empty; the model needs at least one character to go on from")
    if not 0 <= check_int("generate", "length", length) <= LIMITS["length"]:
        raise ValueError(f"generate: length is {quote_int(length)}; it must be 0 to {LIMITS['length']}")
    if check_number("generate", "temperature", temperature) < 0:
        raise ValueError(f"generate: temperature is {shorten(temperature)}; it must be 0 (greedy) or more")
    check_int("generate", "seed", seed)
    rng = derive_rng(seed, "read_text/generate")
    ids = encode(prompt)
    try:
        for _ in range(length):
            row = run(model, ids[-T:]).logits[-1]
            if temperature == 0:
                ids.append(row.index(max(row)))
            else:
                p = softmax_of_rows([[z / temperature for z in row]])[0]
                ids.append(rng.choices(range(len(VOCAB)), weights=p)[0])
    except OverflowError as error:
        raise too_large("generate", error) from None
    return prompt + decode(ids[len(prompt):])


def without(model: Model, layer: int, head: int) -> Model:
    """``model`` with one head switched off: that head's rows of its layer's W_O set to zero, so it adds
    nothing to the residual stream. ``model`` itself is not changed."""
    _check_trained("without", model)
    if not 0 <= check_int("without", "layer", layer) < len(model.layers):
        raise ValueError(f"without: layer is {quote_int(layer)}; the model's layers are 0 to {len(model.layers) - 1}")
    w = model.layers[layer]
    if not 0 <= check_int("without", "head", head) < len(w.W_V):
        raise ValueError(f"without: head is {quote_int(head)}; layer {layer}'s heads are 0 to {len(w.W_V) - 1}")
    d_v = len(w.W_V[head][0])
    W_O = [[0.0] * len(row) if head * d_v <= r < (head + 1) * d_v else list(row) for r, row in enumerate(w.W_O)]
    return model._replace(layers=[w._replace(W_O=W_O) if l == layer else other for l, other in enumerate(model.layers)])


class Copying(NamedTuple):
    """How long a model's writing copies, and, where it stops, what copying said and what the model wrote."""
    copied: int  # characters written after the sentence that copy, before the first that does not
    written: int  # characters written after the sentence
    copy: Optional[str]  # at that first one, what copying says (None: it copied to the end, or nothing earlier)
    wrote: Optional[str]  # what the model wrote there (None: it copied to the end)
    p_copy: Optional[float]  # the model's probability for each of the two there
    p_wrote: Optional[float]

    def __str__(self) -> str:
        if self.wrote is None:
            return f"copies all {self.written} characters it writes"
        copied = "stops at once" if self.copied == 0 else \
            f"copies {self.copied} character{'s' * (self.copied != 1)}, then stops"
        if self.copy is None:
            return f"{copied}: it comes to a character seen nowhere earlier, with nothing to copy"
        return (f"{copied}: copying says {self.copy!r} (probability {_p(self.p_copy)}), it "
                f"writes {self.wrote!r} ({_p(self.p_wrote)})")


def _p(p: float) -> str:
    """A probability to two decimals, or to two significant digits below 0.005, where two decimals would say 0.00."""
    return f"{p:.2f}" if p >= 0.005 else f"{p:.2g}"


def _copy_says(ids: list[int], T: int) -> Optional[int]:
    """What followed, earlier in the last T ids, the longest stretch that matches their end; None if none does."""
    seen = ids[-T:]
    for n in range(len(seen) - 1, 0, -1):  # the longest ending first
        starts = [p for p in range(len(seen) - n) if seen[p:p + n] == seen[-n:]]
        if starts:
            return seen[starts[-1] + n]
    return None


def copying(model: Model, sentence: str, text: str) -> Copying:
    """How long ``text``, ``sentence`` and what ``model`` wrote after it (``generate``), copies. To copy is to
    write what followed, earlier, the longest stretch that matches the text's end, within the characters the
    model sees at once; at the first written character that does not, the model's probability for the copy and
    for what it wrote.

    >>> copying(trained_model(), "abab", "ababab")
    Copying(copied=2, written=2, copy=None, wrote=None, p_copy=None, p_wrote=None)
    """
    T = _check_trained("copying", model)
    check_type("copying", "sentence", sentence, str, "a str")
    check_type("copying", "text", text, str, "a str")
    if not sentence:
        raise ValueError("copying: sentence is empty; the model needs at least one character to go on from")
    if not text.startswith(sentence):
        raise ValueError(f"copying: text must begin with sentence, as generate's text does; it begins "
                         f"{shorten(text[:len(sentence)])}, not {shorten(sentence)}")
    if len(text) - len(sentence) > LIMITS["length"]:
        raise ValueError(f"copying: text has {len(text) - len(sentence):,} characters after sentence; at most "
                         f"{LIMITS['length']}, as generate writes")
    ids, start = encode(text), len(sentence)
    stop = next((k for k in range(start, len(ids)) if _copy_says(ids[:k], T) != ids[k]), None)
    if stop is None:
        return Copying(len(ids) - start, len(ids) - start, None, None, None, None)
    copy = _copy_says(ids[:stop], T)
    try:
        p = softmax_of_rows([run(model, ids[:stop][-T:]).logits[-1]])[0]
    except OverflowError as error:
        raise too_large("copying", error) from None
    return Copying(stop - start, len(ids) - start, None if copy is None else VOCAB[copy], VOCAB[ids[stop]],
                   None if copy is None else p[copy], p[ids[stop]])


def _written(w: MHAWeights, head: int, rows: Matrix) -> Matrix:
    """What head ``head`` of layer ``w`` writes into the stream for its output ``rows``: each row times the head's
    block of d_v rows of W_O."""
    d_v = len(w.W_V[0][0])
    return product(rows, w.W_O[head * d_v:(head + 1) * d_v])


class Vote(NamedTuple):
    """One part of the residual stream, and how much it favours one next character over another."""
    part: str  # "the character itself" (its embedding), "L{layer}H{head}" (what that head wrote), or "b_U"
    vote: float  # that part's logit for the one character minus its logit for the other


def votes(model: Model, text: str, a: str, b: str) -> list[Vote]:
    """Why ``model``, after ``text``, favours character ``a`` or ``b`` next: the logit difference
    logit(a) - logit(b), split into one vote per part of the last character's residual stream.

    That stream is the character's embedding plus what each head wrote (its row of the head's output times
    its block of W_O), and the logits are the stream times W_U: the model has no MLP and no LayerNorm. So the
    split is exact: the votes add up to logit(a) - logit(b) (to rounding), and p(a) / p(b) = e^(their sum).
    The model reads the last characters of ``text`` that fit its window, as ``generate`` does.

    >>> ballot = votes(trained_model(), "and god, and god", ",", " ")
    >>> [v.part for v in ballot]
    ['the character itself', 'L0H0', 'L0H1', 'L0H2', 'L1H0', 'L1H1']
    >>> round(sum(v.vote for v in ballot), 2)  # > 0: ',' is the likelier of the two
    2.19
    """
    T = _check_trained("votes", model)
    check_type("votes", "text", text, str, "a str")
    if not 1 <= len(text) <= T + LIMITS["length"]:
        raise ValueError(f"votes: text has {len(text):,} characters; it must have 1 to {T + LIMITS['length']} "
                         f"(the model reads the last {T})")
    ids = []
    for name, c in (("a", a), ("b", b)):  # one character of the book, or UNKNOWN (what copying may report)
        check_type("votes", name, c, str, "a str")
        if c != UNKNOWN and (len(c) != 1 or encode(c)[0] == _IDS[UNKNOWN]):
            raise ValueError(f"votes: {name} is {shorten(c)}; it must be one character of the book "
                             f"({CHARACTERS!r}) or {UNKNOWN!r}")
        ids.append(_IDS[UNKNOWN] if c == UNKNOWN else encode(c)[0])
    ia, ib = ids
    if ia == ib:
        raise ValueError(f"votes: a and b are both {VOCAB[ia]!r}; give two different characters to compare")
    if not model.residual:
        raise ValueError("votes: model has no residual stream (residual=False), so its logits do not split "
                         "into what each part wrote")
    difference = [row[ia] - row[ib] for row in model.W_U]  # W_U's column for a, minus its column for b

    def vote(row: list[float]) -> float:  # (row W_U)[a] - (row W_U)[b]
        return math.fsum(v * d for v, d in zip(row, difference))

    first = "the character itself" if model.positions != "input" else "the character and its position"
    try:
        trace = run(model, encode(text)[-T:])
        ballot = [Vote(first, vote(trace.streams[0][-1]))]
        for n, (w, layer) in enumerate(zip(model.layers, trace.layers)):
            for h, head in enumerate(layer.head_outputs):
                ballot.append(Vote(f"L{n}H{h}", vote(_written(w, h, [head[-1]])[0])))  # (no attention biases)
    except (OverflowError, ValueError) as error:  # past float64's range (fsum: inf - inf is a ValueError)
        raise too_large("votes", error) from None
    if model.b_U is not None:
        ballot.append(Vote("b_U", model.b_U[ia] - model.b_U[ib]))
    return ballot


class KeyPart(NamedTuple):
    """One part of the rows a layer-1 head's keys read, and its term of one query's score for each key."""
    part: str  # "the character itself" (its embedding), or "L0H{g}" (what layer-0 head g wrote there)
    scores: list[float]  # its term of the score, for keys 0 to the query


def key_parts(model: Model, text: str, head: int, query: int) -> list[KeyPart]:
    """Why layer 1's head ``head``, at position ``query`` of ``text``, scores each key as it does: split into
    the parts of the rows its keys read.

    Layer 1 reads the residual stream: at position j, the character's embedding plus what each layer-0
    head wrote there (its row of the head's output times its block of W_O). A key is that row times W_K, so
    the score q . k_j / sqrt(d_k) splits exactly into one term per part, and the terms add up to the score
    (to rounding). A term that favours one key is a part of the stream the head's keys read: K-composition
    at work on one sentence.

    >>> parts = key_parts(trained_model(), "and god, and god", 1, 14)
    >>> [p.part for p in parts]
    ['the character itself', 'L0H0', 'L0H1', 'L0H2']
    >>> max(range(15), key=lambda j: parts[1].scores[j])  # the 'd' after the first 'o': L0H0 wrote 'o' there
    6
    """
    _check_text("key_parts", model, text)
    if len(model.layers) < 2:
        raise ValueError(f"key_parts: model has {len(model.layers)} layer; layer 1's keys need two or more")
    num_heads = len(model.layers[1].W_Q)
    if check_int("key_parts", "head", head) < 0 or head >= num_heads:
        raise ValueError(f"key_parts: head is {quote_int(head)}; layer 1 has heads 0 to {num_heads - 1}")
    if check_int("key_parts", "query", query) < 0 or query >= len(text):
        raise ValueError(f"key_parts: query is {quote_int(query)}; text has positions 0 to {len(text) - 1}")
    if not model.residual or model.positions != "queries and keys":
        raise ValueError("key_parts: model must add each layer's output to its stream (residual=True) and add "
                         "positions only to layer 0's queries and keys, as the model of the book does")
    w0, w1 = model.layers[:2]
    W_K = w1.W_K[head * len(w1.W_K) // num_heads]  # the key head this query head reads
    try:
        trace = run(model, encode(text))
        q = trace.layers[1].Q[head][query]
        c = 1 / math.sqrt(len(q)) if model.scale is None else model.scale

        def term(rows: Matrix) -> list[float]:  # q . (row W_K) * c, for each key's row
            return [c * math.fsum(a * b for a, b in zip(q, k)) for k in product(rows, W_K)]

        parts = [KeyPart("the character itself", term(trace.streams[0][:query + 1]))]
        for g, out in enumerate(trace.layers[0].head_outputs):
            parts.append(KeyPart(f"L0H{g}", term(_written(w0, g, out[:query + 1]))))
    except (OverflowError, ValueError) as error:
        raise too_large("key_parts", error) from None
    return parts


# === The shipped run ===


def run_to_json(settings: Settings, model: Model, history: History) -> str:
    """A run as text: its settings, every parameter (in ``flatten``'s order) and each step's loss."""
    check_settings("run_to_json", settings)
    check_model("run_to_json", "model", model)
    if not isinstance(history, History) or len(history.loss) != settings.steps:
        raise ValueError(f"run_to_json: history must be the History of {settings.steps} steps that train returns, "
                         f"got {shorten(history)}")
    return json.dumps({"format": RUN_FORMAT, "settings": settings._asdict(), "parameters": flatten(model),
                       "loss": history.loss})


def run_from_json(text: str, where: str) -> tuple[Settings, Model, History]:
    """The run ``run_to_json`` wrote; a ValueError naming ``where`` (the file, or who read it) for anything else."""
    func = "run_from_json"
    check_type(func, "text", text, str, "a str")
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
            raise ValueError(f"it is not a saved run (its format is not {RUN_FORMAT!r})")
        fields = data["settings"]
        settings = check_settings(func, Settings(**{**fields, "heads": tuple(fields["heads"])}))
        like = init_model(settings)
        params = data["parameters"]
        if not isinstance(params, list) or len(params) != len(flatten(like)) \
                or not all(isinstance(p, float) and math.isfinite(p) for p in params):
            raise ValueError(f"its parameters are not the {len(flatten(like))} numbers of a model of its settings")
        loss = data["loss"]
        if not isinstance(loss, list) or len(loss) != settings.steps or not all(isinstance(x, float) for x in loss):
            raise ValueError(f"its loss is not one number per step ({settings.steps})")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as error:  # RecursionError: [[[[...
        raise ValueError(f"{where} cannot be used: {str(error)[:200]}") from None
    return settings, shaped(params, like), History(loss)


def trained_run() -> tuple[Settings, Model, History]:
    """The shipped run (``mha_lists/data/read_text_run.json``): its settings, its model, each step's loss."""
    with open(RUN_FILE, encoding="utf-8") as f:
        return run_from_json(f.read(), "trained_run: mha_lists/data/read_text_run.json")


def trained_model() -> Model:
    """The model of the shipped run, trained with ``Settings()`` (``python -m mha_lists.tools.read_text``)."""
    return trained_run()[1]


# === One text, every head ===


PREVIOUS_TOKEN = 0.5  # a previous-character head: at least this share on the character before
INDUCTION = 0.3  # an induction head (layer 1 or later): at least this share on what followed an earlier copy
JOB_MARGIN = 0.2  # how far a job's share must beat that of a head spreading its weight evenly


class HeadJob(NamedTuple):
    layer: int
    head: int
    previous_token: float  # mean attention from each character to the one before it
    induction: Optional[float]  # mean attention from a repeated character to what followed its earlier copies
    job: str  # "previous character", "copies what came next last time", or "" (no clear job on this text)


def read(model: Model, text: str) -> tuple[list[str], list[list[Matrix]]]:
    """The labels of ``text``'s characters and every head's attention (causal) when ``model`` reads them:
    ``attention[layer][head]`` is (T, T). ``text`` has at most the model's window of characters."""
    _check_text("read", model, text)
    return labels(text), _attention("read", model, text)


def _check_text(func: str, model: object, text: object) -> None:
    T = _check_trained(func, model)
    check_type(func, "text", text, str, "a str")
    if not 1 <= len(text) <= T:
        raise ValueError(f"{func}: text has {len(text):,} characters; the model reads 1 to {T}")


def _attention(func: str, model: Model, text: str) -> list[list[Matrix]]:
    try:
        return [layer.attention for layer in run(model, encode(text)).layers]
    except OverflowError as error:
        raise too_large(func, error) from None


def head_jobs(model: Model, text: str) -> list[HeadJob]:
    """What each head does on ``text``, measured on its attention there: the previous-token share, and, at
    the characters seen before, the share on the characters that followed their earlier copies.

    A head gets a job when its share reaches the job's threshold (``PREVIOUS_TOKEN`` for the previous character;
    ``INDUCTION`` for copying, in layer 1 or later) and beats by ``JOB_MARGIN`` the share of a head that spreads its weight
    evenly over the characters it may see: on ``"aaaa"`` or ``"ab"`` an even head scores high too."""
    _check_text("head_jobs", model, text)
    attention = _attention("head_jobs", model, text)
    ids = encode(text)
    repeats = [(i, after) for i, after in enumerate(followers(ids)) if after]  # the characters seen before
    # query i sees i + 1 characters, so an even head gives each of them 1 / (i + 1)
    even_prev = math.fsum(1 / (i + 1) for i in range(1, len(ids))) / (len(ids) - 1) if len(ids) > 1 else 1.0
    even_ind = math.fsum(len(after) / (i + 1) for i, after in repeats) / len(repeats) if repeats else 1.0
    jobs = []
    for layer, heads in enumerate(attention):
        for h, A in enumerate(heads):
            prev = previous_share(A) if len(A) > 1 else 0.0
            ind = math.fsum(math.fsum(A[i][k] for k in after) for i, after in repeats) / len(repeats) \
                if repeats else None
            job = ("previous character" if prev >= PREVIOUS_TOKEN and prev >= even_prev + JOB_MARGIN else
                   "copies what came next last time" if ind is not None and ind >= INDUCTION and layer > 0
                   and ind >= even_ind + JOB_MARGIN else "")
            jobs.append(HeadJob(layer, h, prev, ind, job))
    return jobs
