"""Induction heads (mha_lists/teaching/induction.py): the hand-built circuit, one layer failing, two-layer
gradients, training, the scores, the checks and limits, the printed sheet and the notebooks' edits."""

import copy
import io
import math
import random
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from mha_lists import ShapeError, matmul, transpose
from mha_lists.teaching import induction
from mha_lists.teaching.induction import (
    HeadScore, History, Settings, first_half_targets, flatten, forward, hand_built_model, head_scores, init_model,
    make_sequence, make_sequences, model_gradients, one_layer_model, part_slices, predict, repeat_accuracy,
    repeat_targets, succeeded, token_names, train, unflatten,
)
from mha_lists.teaching.model import Model

ROOT = Path(__file__).resolve().parents[1]

# Each message's wording, pinned once; the other tests match the start (function: argument).
MESSAGES = {
    "num_layers": "init_model: num_layers is 1; an induction head needs 2 layers (a previous-token head, then a head "
                  "whose keys read what it wrote): one layer's keys see only their own token and position",
    "min_len": "init_model: min_len is 1; a sequence too short to repeat: a run needs at least 2 tokens, so that its "
               "repeat holds a token that followed an earlier one",
    "max_len": "init_model: max_len is 9; a run is distinct tokens, so it can be at most vocab_size = 8 (and the "
               "limit is 16)",
    "max_len below": "make_sequence: max_len 2 is below min_len 3",
    "limit": "init_model: vocab_size is 27; the limit is 26 (plain Python would take too long)",
    "d_model": "init_model: d_model 7 is not divisible by num_heads 2",
    "short": "model_gradients: seq has 2 tokens; it must be a run of at least 2 tokens and its repeat (an even "
             "length, at least 4): a sequence too short to repeat has nothing to predict",
    "no repeat": "model_gradients: seq's second half must repeat its first half, got [0, 1, 1, 0]",
    "positions": "head_scores: sequences[0] has a run of 5; the model reads 9 tokens but has 7 positions",
    "token": "repeat_accuracy: sequences[0][1] is 4; token ids must be 0 to 3",
    "hand vocab": "hand_built_model: vocab_size is 1; a repeat needs at least 2 different tokens",
    "hand max_len": "one_layer_model: max_len is 2; a run of 2 and the start of its repeat need 3 positions",
    "count": "head_scores: sequences has 2,001 sequences; the limit is 2000",
    "model sizes": "train: model does not have the sizes of settings (vocab_size, d_model, num_layers, "
                   "2 * max_len - 1 positions)",
    "budget": "train: steps x batch_size x work per sequence = 5,000 x 256 x {per} = {work} multiply-adds; "
              "one call does at most 30,000,000,000 (about half an hour of plain Python)",
    "scores": "succeeded: scores must be the non-empty list head_scores returns, got []",
    "fraction": "succeeded: accuracy is 1.5; it is a fraction, from 0 to 1",
    "settings": "train: settings must be a Settings, got str",
    "progress": "train: progress must be a function or None, got 5",
}

HAND = hand_built_model(4, 7)  # vocab 4, d_model 19, 7 positions
SMALL = Settings(vocab_size=4, d_model=4, num_heads=2, max_len=3, batch_size=2, steps=2)


# === The hand-built model ===


def test_parts_of_the_stream():
    part = part_slices(3, 5)
    assert [len(part[name]) for name in part] == [3, 5, 3, 3]
    assert part["prediction"].stop == 3 * 3 + 5 == len(hand_built_model(3, 5).W_U)


def test_previous_token_head_raw_scores_by_hand():
    # q_i . k_j = 1 exactly when j = i - 1, 0 everywhere else (before the scale).
    model = hand_built_model(4, 6)
    t = forward(model, [0, 1, 2, 3, 0, 1])
    raw = matmul(t.layers[0].Q[0], transpose(t.layers[0].K[0]))
    assert raw == [[1.0 if j == i - 1 else 0.0 for j in range(6)] for i in range(6)]
    # Weight on i - 1 at query i (i keys besides it, each e^0): e^5 / (e^5 + i).
    for i in range(1, 6):
        assert t.layers[0].attention[0][i][i - 1] == pytest.approx(math.exp(5) / (math.exp(5) + i))


def test_hand_built_predicts_every_repeat():
    rng = random.Random(0)
    for vocab_size in (2, 5, 10):
        model = hand_built_model(vocab_size, 2 * vocab_size - 1)
        for _ in range(30):
            seq = make_sequence(rng, vocab_size, 2, vocab_size)
            L = len(seq) // 2
            guesses = predict(model, seq[:2 * L - 1])
            assert guesses[L:] == seq[L + 1:], seq


def test_hand_built_predicts_any_earlier_occurrence():
    # Not only a run and its repeat: distinct tokens, one of them seen again later (not right after
    # itself). At the second occurrence the model predicts what followed the first.
    rng = random.Random(1)
    vocab_size = 8
    model = hand_built_model(vocab_size, 9)
    for _ in range(100):
        seq = rng.sample(range(vocab_size), rng.randint(3, 8))
        first = rng.randrange(len(seq) - 2)
        seq = seq + [seq[first]]
        assert predict(model, seq)[-1] == seq[first + 1], seq


def test_one_layer_model_fails_on_every_repeat():
    # It finds the earlier copies of the current token and copies them: it predicts the current token.
    rng = random.Random(2)
    model = one_layer_model(6, 11)
    seqs = [make_sequence(rng, 6, 2, 6) for _ in range(20)]
    for seq in seqs:
        L = len(seq) // 2
        assert predict(model, seq[:2 * L - 1])[L:] == seq[L:2 * L - 1]
    assert repeat_accuracy(model, seqs) == 0.0
    assert repeat_accuracy(hand_built_model(6, 11), seqs) == 1.0


def test_hand_built_scores():
    seqs = [make_sequence(random.Random(n), 6, 2, 6) for n in range(10)]
    prev0, ind1 = head_scores(hand_built_model(6, 11), seqs)
    assert (prev0.layer, prev0.head, ind1.layer) == (0, 0, 1)
    assert prev0.previous_token > 0.9 and ind1.induction > 0.8
    assert succeeded([prev0, ind1], 1.0) and not succeeded([prev0, ind1], 0.89)


def test_sequences_are_runs_and_their_repeats():
    settings = Settings()
    seqs = make_sequences(50, settings, "held-out")
    assert seqs == make_sequences(50, settings, "held-out") and seqs != make_sequences(50, settings, "other")
    for seq in seqs:
        L = len(seq) // 2
        assert settings.min_len <= L <= settings.max_len and seq[:L] == seq[L:] and len(set(seq[:L])) == L
    assert len({len(seq) for seq in seqs}) > 1  # the run length varies from sequence to sequence


def test_flatten_and_back():
    model = init_model(Settings(vocab_size=4, d_model=4, max_len=3))
    again = unflatten(flatten(model), model)
    assert isinstance(again, Model) and again == model


def test_the_model_reads_positions_in_layer_0s_queries_and_keys_with_the_residual():
    for model in (HAND, init_model(SMALL)):
        assert (model.positions, model.residual, model.b_U) == ("queries and keys", True, None)
    t = forward(HAND, [0, 1, 2, 0, 1])
    assert t.streams[0] == [HAND.token_embeddings[i] for i in [0, 1, 2, 0, 1]]  # no position in the stream
    assert t.streams[2] == [[a + b for a, b in zip(r, s)] for r, s in zip(t.streams[1], t.layers[1].output)]


def test_targets():
    assert repeat_targets([2, 0, 3, 2, 0, 3]) == [None, None, None, 0, 3]
    assert first_half_targets([2, 0, 3, 2, 0, 3]) == [0, 3, None, None, None]


# === Gradients: central differences through both layers and the residual stream ===


def _loss(model, seq):
    return model_gradients(model, seq)[0]


def test_two_layer_gradients_match_central_differences():
    settings = Settings(vocab_size=5, d_model=4, num_heads=2, min_len=2, max_len=4, seed=3)
    model = init_model(settings)
    seq = [3, 0, 4, 1, 3, 0, 4, 1]
    _, grads = model_gradients(model, seq)
    params, analytic = flatten(model), flatten(grads)
    # A few entries of every block: tokens, positions, each layer's W_Q, W_K, W_V, W_O, and W_U.
    starts = [0]
    for M in [model.token_embeddings, model.position_embeddings] + [
            M for w in model.layers for M in (*w.W_Q, *w.W_K, *w.W_V, w.W_O)] + [model.W_U]:
        starts.append(starts[-1] + len(M) * len(M[0]))
    picks = sorted({s + offset for s in starts[:-1] for offset in (0, 5)} | {12, 29})  # 12: token 3, used twice
    h = 1e-5
    for n in picks:
        up, down = list(params), list(params)
        up[n] += h
        down[n] -= h
        numeric = (_loss(unflatten(up, model), seq) - _loss(unflatten(down, model), seq)) / (2 * h)
        assert numeric == pytest.approx(analytic[n], rel=1e-5, abs=1e-8), n
    # Positions the sequence does not reach (7 of them) get exactly zero.
    assert grads.position_embeddings[len(seq) - 1:] == [[0.0] * 4] * (7 - (len(seq) - 1))


def test_training_is_deterministic_and_lowers_the_loss():
    settings = Settings(vocab_size=5, d_model=4, num_heads=1, max_len=3, batch_size=4, steps=25, seed=5, lr=0.05)
    model_a, history_a = train(settings)
    model_b, history_b = train(settings)
    assert flatten(model_a) == flatten(model_b) and history_a == history_b
    first, last = history_a.repeat_loss[:5], history_a.repeat_loss[-5:]
    assert sum(last) < sum(first)


# === Training: the History, the progress callback, the budget ===


def test_train_records_a_history_and_calls_progress_with_it():
    seen = []
    model, history = train(SMALL, progress=lambda step, h: seen.append((step, len(h.repeat_loss))))
    assert seen == [(1, 1), (2, 2)] and isinstance(history, History)
    assert all(len(part) == 2 for part in history)
    assert all(0 <= x <= 1 for x in history.previous_token + history.induction)
    given, again = train(SMALL, model=init_model(SMALL))
    assert flatten(given) == flatten(model) and again == history


def test_the_first_history_entry_is_measured_before_the_first_step():
    # Step 1's losses are those of the initial model on step 1's batch.
    model0 = init_model(SMALL)
    _, history = train(SMALL._replace(steps=1))
    rng = induction.derive_rng(SMALL.seed, "induction/batches")
    batch = [induction._make_sequence(rng, 4, 2, 3) for _ in range(2)]
    counts = [len(seq) // 2 - 1 for seq in batch]
    losses = [model_gradients(model0, seq)[0] for seq in batch]
    expected = math.fsum(c / sum(counts) * loss for c, loss in zip(counts, losses))
    assert history.repeat_loss[0] == pytest.approx(expected, rel=1e-15)


def test_settings_that_add_up_to_hours_are_refused_naming_the_budget():
    from mha_lists.teaching.model import check_model, forward_work
    big = Settings(vocab_size=26, d_model=64, num_heads=8, num_layers=4, max_len=16, batch_size=256, steps=5000)
    per = 3 * forward_work(check_model("demo", "model", init_model(big._replace(steps=1))), 31)
    with pytest.raises(ValueError) as info:
        train(big)
    assert str(info.value) == MESSAGES["budget"].format(per=f"{per:,}", work=f"{5000 * 256 * per:,}")


def test_an_overflow_while_training_is_named_train():
    settings = Settings(vocab_size=4, d_model=19, num_heads=1, max_len=4, steps=1, batch_size=2)
    with pytest.raises(ValueError, match=r"^train: the \w+ are too large"):
        train(settings, model=OVERFLOWING)


def test_a_progress_callback_is_the_learners_code_and_simply_called():
    from mha_lists import softmax
    with pytest.raises(TypeError, match=r"^matmul: B must be a non-empty list of rows, got '[^']*'$"):
        train(SMALL, progress=lambda step, history: matmul([[1.0]], "x"))
    seen = []
    train(SMALL, progress=lambda step, history: seen.append(softmax([0.0, 0.0])))
    assert seen == [[0.5, 0.5]] * 2


# === Checks: one message per rule ===

# Token embeddings of 10 times unembedding weights of 1e308: a logit of 1e309 is inf.
OVERFLOWING = HAND._replace(token_embeddings=[[10 * x for x in row] for row in HAND.token_embeddings],
                            W_U=[[1e308 * x for x in row] for row in HAND.W_U])
SEQ = [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("func, args", [
    (forward, (OVERFLOWING, SEQ[:5])),
    (predict, (OVERFLOWING, SEQ[:5])),
    (head_scores, (OVERFLOWING, [SEQ])),
    (repeat_accuracy, (OVERFLOWING, [SEQ])),
    (model_gradients, (OVERFLOWING, SEQ)),
])
def test_an_overflow_inside_is_named_after_the_function_called(func, args):
    with pytest.raises(ValueError, match=rf"^{func.__name__}: the logits are too large: a product or sum overflowed"):
        func(*args)


@pytest.mark.parametrize("key, change", [
    ("num_layers", {"num_layers": 1}), ("min_len", {"min_len": 1}), ("max_len", {"max_len": 9}),
    ("limit", {"vocab_size": 27}), ("d_model", {"d_model": 7}),
])
def test_bad_settings(key, change):
    with pytest.raises(ValueError) as info:
        init_model(Settings()._replace(**change))
    assert str(info.value) == MESSAGES[key]


@pytest.mark.parametrize("key, call", [
    ("max_len below", lambda: make_sequence(random.Random(0), 5, 3, 2)),
    ("short", lambda: model_gradients(HAND, [0, 0])),
    ("no repeat", lambda: model_gradients(HAND, [0, 1, 1, 0])),
    ("positions", lambda: head_scores(HAND, [[0, 1, 2, 3, 1, 0, 1, 2, 3, 1]])),
    ("token", lambda: repeat_accuracy(HAND, [[0, 4, 0, 4]])),
    ("hand vocab", lambda: hand_built_model(1, 5)),
    ("hand max_len", lambda: one_layer_model(3, 2)),
    ("count", lambda: head_scores(HAND, [[0, 1, 0, 1]] * 2001)),
    ("model sizes", lambda: train(SMALL, model=HAND)),
    ("scores", lambda: succeeded([], 1.0)),
    ("fraction", lambda: succeeded([HeadScore(0, 0, 0.9, 0.9)], 1.5)),
    ("settings", lambda: train("settings", progress=5, model="model")),
    ("progress", lambda: train(SMALL, progress=5)),
])
def test_messages(key, call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == MESSAGES[key]


def test_train_checks_settings_then_the_model_then_progress():
    with pytest.raises(TypeError, match=r"^train: settings "):
        train("settings", progress=5, model="model")
    with pytest.raises(TypeError, match=r"^train: model must be a Model"):
        train(SMALL, progress=5, model="model")
    with pytest.raises(TypeError, match=r"^train: progress "):
        train(SMALL, progress=5)


def test_a_model_that_does_not_fit_is_named_by_its_part():
    with pytest.raises(ValueError, match=r"^forward: ids\[1\] is 4; token ids must be 0 to 3$"):
        forward(HAND, [0, 4])
    with pytest.raises(TypeError, match=r"^predict: model must be a Model, got str$"):
        predict("model", [0])
    with pytest.raises(ShapeError, match=r"^predict: model\.W_U is 18x4; it must be"):
        predict(HAND._replace(W_U=HAND.W_U[:-1]), [0])


@pytest.mark.parametrize("bad, error, match", [
    ("numbers", ShapeError, r"^unflatten: flat has str numbers but a model shaped like `like` has \d+$"),
    (["a"], TypeError, r"^unflatten: flat\[0\] is 'a' \(str\); entries must be int or float$"),
    ([True], TypeError, r"^unflatten: flat\[0\] is True \(bool\)"),
    ([math.nan], ValueError, r"^unflatten: flat\[0\] is nan; entries must be finite numbers$"),
    ([math.inf], ValueError, r"^unflatten: flat\[0\] is inf; entries must be finite numbers$"),
])
def test_unflatten_takes_only_finite_numbers(bad, error, match):
    flat = flatten(HAND)
    if isinstance(bad, list):  # one bad entry in a flat list of the right length
        bad = bad + flat[1:]
    before = copy.deepcopy(bad)
    with pytest.raises(error, match=match):
        unflatten(bad, HAND)
    assert repr(bad) == repr(before)


def test_arguments_are_not_changed():
    model = init_model(Settings(vocab_size=4, d_model=4, max_len=3))
    before = flatten(model)
    seq = [1, 2, 1, 2]
    model_gradients(model, seq)
    assert flatten(model) == before and seq == [1, 2, 1, 2]


# === The sweep: every bad call gets a named one-line error ===

NAN, BIG = math.nan, 10**400
BAD_SEQS = [None, [], [0, 1], [0, 1, 1, 0], [0, 1, 0], [0, 26, 0, 26], [0, -1, 0, -1], [0, 1.0, 0, 1.0], "abab",
            [0, BIG, 0, BIG], [True, 1, True, 1]]
CASES = (
    [("token_names", lambda n=n: token_names(n)) for n in [None, 0, 27, 2.0, BIG]]
    + [("part_slices", lambda a=a: part_slices(*a)) for a in [(0, 5), (4, 0), (27, 5), (4, 2001), ("4", 5)]]
    + [("hand_built_model", lambda a=a: hand_built_model(*a)) for a in [(1, 5), (4, 2), (None, 5), (4, BIG)]]
    + [("hand_built_model", lambda s=s: hand_built_model(4, 5, scale=s)) for s in [0, -1.0, NAN, "5", None]]
    + [("init_model", lambda s=s: init_model(s)) for s in [None, "s", (8, 12)] + [Settings()._replace(**{f: v})
       for f, v in [("seed", 1.5), ("seed", BIG), ("lr", 0), ("lr", NAN), ("batch_size", 257), ("steps", 0),
                    ("num_heads", 9), ("max_len", 1), ("min_len", "2"), ("num_layers", 5), ("d_model", 65)]]]
    + [("make_sequence", lambda a=a: make_sequence(*a)) for a in [(None, 5, 2, 3), (random.Random(0), 5, 2, 6),
                                                                  (random.Random(0), 30, 2, 3), (random, 5, 2, 3)]]
    + [("make_sequences", lambda a=a: make_sequences(*a)) for a in [(0, SMALL, "x"), (2001, SMALL, "x"),
                                                                    (2, None, "x"), (2, SMALL, 5)]]
    + [(name, lambda f=f, seq=seq: f(seq)) for seq in BAD_SEQS
       for name, f in (("repeat_targets", repeat_targets), ("first_half_targets", first_half_targets),
                       ("model_gradients", lambda s: model_gradients(HAND, s)),
                       ("head_scores", lambda s: head_scores(HAND, [s])),
                       ("repeat_accuracy", lambda s: repeat_accuracy(HAND, [s])))]
    + [(name, lambda f=f: f([0, 4, 0, 4])) for name, f in (("model_gradients", lambda s: model_gradients(HAND, s)),
                                                          ("head_scores", lambda s: head_scores(HAND, [s])))]
    + [(name, lambda f=f, m=m: f(m)) for m in [None, "m", HAND._replace(layers=[]), HAND._replace(scale=0),
                                                 HAND._replace(W_U=None), HAND._replace(positions="q")]
       for name, f in (("predict", lambda m: predict(m, [0, 1])), ("forward", lambda m: forward(m, [0, 1])),
                       ("flatten", flatten), ("head_scores", lambda m: head_scores(m, [[0, 1, 0, 1]])))]
    + [("succeeded", lambda a=a: succeeded(*a)) for a in [
        ([HeadScore(0, 0, 0.9, 0.9)], -0.5), ([HeadScore(0, 0, 0.9, 0.9)], NAN), ([HeadScore(0, 0, 0.9, 0.9)], BIG),
        ([HeadScore(0, 0, NAN, 0.9)], 1.0), ([HeadScore("x", 0, 0.9, 0.9)], 1.0), ([HeadScore(0, 0, 0.9, 1.5)], 1.0),
        ([HeadScore(0, None, 0.9, 0.9)], 1.0), (None, 1.0)]]
)


@pytest.mark.parametrize("name, call", CASES, ids=[f"{name}-{n}" for n, (name, _) in enumerate(CASES)])
def test_every_bad_call_gets_a_named_one_line_error(name, call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value) and len(str(info.value)) < 400


# === The printed sheet ===


def test_paper_sheet_matches_the_module():
    from mha_lists.teaching.display import format_matrix
    sheet = (ROOT / "docs" / "induction-on-paper.md").read_text(encoding="utf-8")
    vocab, sequence = ["A", "B", "C", "D"], "A B C D A B C".split()
    ids = [vocab.index(t) for t in sequence]
    rows = [f"{i} {t}" for i, t in enumerate(sequence)]
    model = hand_built_model(4, 7)
    t = forward(model, ids)
    blocks = [
        format_matrix(t.layers[0].Q[0], row_labels=rows, col_labels=[f"q{i}" for i in range(7)], digits=0,
                      title="Q, layer 0"),
        format_matrix(t.layers[0].K[0], row_labels=rows, col_labels=[f"k{i}" for i in range(7)], digits=0,
                      title="K, layer 0"),
        format_matrix(t.layers[1].attention[0][4:], row_labels=rows[4:], col_labels=rows, digits=4,
                      title="attention weights, layer 1 (exact)"),
        format_matrix(t.logits[4:], row_labels=rows[4:], col_labels=vocab, digits=4, title="logits (exact)"),
    ]
    for text in blocks:
        assert f"```\n{text}\n```" in sheet
    guesses = predict(model, ids)
    assert "; ".join(f"after {rows[i]} the guess is {vocab[guesses[i]]}" for i in range(4, 7)) in sheet
    assert [vocab[g] for g in guesses[4:]] == ["B", "C", "D"]


# === The notebooks survive a learner's edit (marked slow: they re-run whole notebooks) ===
# Notebooks 18 and 19 build their example in one cell (``sequence = ...``, ``settings = ...``), not
# with ``running_example``; their edits are run here, in-process (no kernel): every code cell, in
# order, with one line of the example cell changed. Every check a cell prints must stay True.


def run_notebook(name, monkeypatch, changes):
    import json
    path = ROOT / "notebooks" / name
    cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    sources = ["".join(c["source"]) for c in cells]
    for old, new in changes.items():
        assert sum(old in s for s in sources) == 1, old
        sources = [s.replace(old, new) for s in sources]
    monkeypatch.chdir(path.parent)
    out = io.StringIO()
    namespace = {}
    with redirect_stdout(out):
        for source in sources:
            exec(compile(source, name, "exec"), namespace)
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("changes", [
    {},
    {'sequence = "A B C D A B C".split()': 'sequence = "B D A C D A".split()'},
    {'vocab = ["A", "B", "C", "D"]': 'vocab = list("ABCDEF")',
     'sequence = "A B C D A B C".split()': 'sequence = "F A C E B F A C".split()'},
    {'sequence = "A B C D A B C".split()': 'sequence = "A B C D".split()'},  # nothing repeats
], ids=["as-given", "another-sequence", "six-letters", "no-repeat"])
def test_notebook_18_survives_a_learners_edit(monkeypatch, changes):
    text = run_notebook("18_induction_by_hand.ipynb", monkeypatch, changes)
    assert "match" in text and "False" not in text.replace("same in both sequences: False", "")
    assert text.count("wrong") == 0


@pytest.mark.slow
@pytest.mark.parametrize("changes", [
    {'run = "C A F E B"': 'run = "H G F"', "short_steps = 10": "short_steps = 3"},
    {"settings = Settings(seed=0)": "settings = Settings(seed=3, steps=6)", "short_steps = 10": "short_steps = 3"},
], ids=["another-run", "another-seed-trains-here"])
def test_notebook_19_survives_a_learners_edit(monkeypatch, changes):
    text = run_notebook("19_induction_learned.ipynb", monkeypatch, changes)
    assert "losses agree within 1e-12: True" in text
    assert ("trained here" in text) == ("seed=3" in str(changes))
