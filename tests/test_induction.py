"""Induction heads: the hand-built circuit, one layer failing, two-layer gradients, errors, the command."""

import io
import math
import random
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mha_lists import ShapeError, matmul, transpose
from mha_lists.teaching.induction import (
    InductionModel, Settings, first_half_targets, flatten, forward, hand_built_model, head_scores, init_model,
    make_sequence, make_sequences, model_gradients, one_layer_model, part_slices, predict, repeat_accuracy,
    repeat_targets, succeeded, train, unflatten,
)
from mha_lists.tools import induction as command

ROOT = Path(__file__).resolve().parents[1]


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
    assert isinstance(again, InductionModel) and again == model


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


# === Errors ===


@pytest.mark.parametrize("change, match", [
    ({"num_layers": 1}, "init_model: num_layers is 1; an induction head needs 2 layers"),
    ({"min_len": 1}, "init_model: min_len is 1; a sequence too short to repeat"),
    ({"max_len": 9}, "init_model: max_len is 9; a run is distinct tokens, so it can be at most vocab_size = 8"),
    ({"vocab_size": 27}, "init_model: vocab_size is 27; the limit is 26"),
    ({"steps": 10 ** 6}, "init_model: steps is 1000000; the limit is 5000"),
    ({"d_model": 7}, "init_model: d_model 7 is not divisible by num_heads 2"),
])
def test_bad_settings(change, match):
    with pytest.raises((ValueError, ShapeError), match=match):
        init_model(Settings()._replace(**change))


def test_bad_sequences_and_models():
    model = hand_built_model(4, 7)
    with pytest.raises(ShapeError, match="model_gradients: seq has 2 tokens; .* too short to repeat"):
        model_gradients(model, [0, 0])
    with pytest.raises(ValueError, match="second half must repeat"):
        model_gradients(model, [0, 1, 1, 0])
    with pytest.raises(ShapeError, match="the model reads 9 tokens but has 7 positions"):
        head_scores(model, [[0, 1, 2, 3, 0, 0, 1, 2, 3, 0][:0] + [0, 1, 2, 3, 1, 0, 1, 2, 3, 1]])
    with pytest.raises(ValueError, match="forward: ids\\[1\\] is 4; token ids must be 0 to 3"):
        forward(model, [0, 4])
    with pytest.raises(TypeError, match="predict: model must be an InductionModel"):
        predict("model", [0])
    with pytest.raises(ValueError, match="hand_built_model: vocab_size is 1; a repeat needs at least 2"):
        hand_built_model(1, 5)
    with pytest.raises(ValueError, match="make_sequence: min_len is 0"):
        make_sequence(random.Random(0), 5, 0, 3)
    broken = model._replace(W_U=model.W_U[:-1])
    with pytest.raises(ShapeError, match="predict: model.W_U is 18x4; it must be"):
        predict(broken, [0])


def test_arguments_are_not_changed():
    model = init_model(Settings(vocab_size=4, d_model=4, max_len=3))
    before = flatten(model)
    seq = [1, 2, 1, 2]
    model_gradients(model, seq)
    assert flatten(model) == before and seq == [1, 2, 1, 2]


# === The command ===


def test_command_output_format_on_a_short_run():
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert command.main(["--steps", "2", "--seed", "1"]) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("trained 2 steps, seed 1: loss on the repeated half ")
    heads = lines[1:5]
    for line, (layer, head) in zip(heads, [(0, 0), (0, 1), (1, 0), (1, 1)]):
        prefix = f"layer {layer} head {head}: previous-token "
        assert line.startswith(prefix)
        prev, ind = line[len(prefix):].split(", induction ")
        assert 0 <= float(prev) <= 1 and 0 <= float(ind) <= 1 and len(prev) == len(ind) == 4
    assert lines[5].startswith("accuracy on the repeated halves: ") and len(lines) == 6
    progress = err.getvalue()
    assert progress.startswith("\rstep 1/2  loss (repeat) ") and "\rstep 2/2" in progress
    assert all(len(line) == 72 for line in progress.rstrip("\n").split("\r")[1:])
    assert progress.endswith("\n") and progress.count("\n") == 1


def test_command_quiet_and_save_and_check(tmp_path):
    path = tmp_path / "run.json"
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        assert command.main(["--steps", "1", "--quiet", "--save", str(path)]) == 0
    assert err.getvalue() == ""
    settings, model, history = command.load_run(str(path))
    assert settings.steps == 1 and len(history.repeat_loss) == 1
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert command.main(["--quiet", "--check", str(path)]) == 0
    assert out.getvalue().endswith("bit for bit: True\n")


@pytest.mark.parametrize("args", [["--steps", "0"], ["--steps", "x"], ["--steps", "5001"], ["--seed", "1.5"],
                                  ["--bogus"]])
def test_command_bad_input_is_one_line_and_exit_2(args):
    result = subprocess.run([sys.executable, "-m", "mha_lists.tools.induction", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("python -m mha_lists.tools.induction: error: ")


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
