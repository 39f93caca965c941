"""Induction heads at the door: every public function declares its arguments with @checked.

The rules enforced here are the ones the door newly holds to (a bad input that used to slip
through, or was named after another function); the messages of the others are pinned in
tests/test_induction.py and in notebook 19.
"""

import io
import json
import math
import os
from contextlib import redirect_stderr, redirect_stdout

import pytest

from mha_lists import ShapeError
from mha_lists.core.checks import too_large
from mha_lists.teaching import induction
from mha_lists.teaching.induction import (History, Settings, first_half_targets, flatten, forward, hand_built_model,
                                          head_scores, init_model, model_gradients, predict, repeat_accuracy,
                                          repeat_targets, train, unflatten)
from mha_lists.tools import induction as command

HAND = hand_built_model(4, 7)  # vocab 4, d_model 19, 7 positions
SMALL = Settings(vocab_size=4, d_model=4, num_heads=2, max_len=3, batch_size=2, steps=2)


def _public_functions(module):
    return {name: f for name, f in vars(module).items()
            if callable(f) and not name.startswith("_") and not isinstance(f, type)
            and getattr(f, "__module__", None) == module.__name__}


def test_every_public_function_has_a_door():
    helpers = {"check_settings", "build_parser"}  # a check helper (the kinds run it); a function of no arguments
    for module in (induction, command):
        functions = _public_functions(module)
        assert functions
        for name, f in functions.items():
            assert name in helpers or hasattr(f, "contract"), f"{module.__name__}.{name} has no door"
    assert not hasattr(induction, "_reported_as")  # no message rewriting


# === Overflow inside: named after the function the learner called, by the door ===

# Token embeddings of 10 times unembedding weights of 1e308: a logit of 1e309 is inf.
OVERFLOWING = HAND._replace(token_embeddings=[[10 * x for x in row] for row in HAND.token_embeddings],
                            W_U=[[1e308 * x for x in row] for row in HAND.W_U])
SEQ = [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("func, args", [
    (forward, (OVERFLOWING, SEQ[:5])),
    (predict, (OVERFLOWING, SEQ[:5])),  # its result is token ids: the overflow is seen in forward's logits
    (head_scores, (OVERFLOWING, [SEQ])),
    (repeat_accuracy, (OVERFLOWING, [SEQ])),
    (model_gradients, (OVERFLOWING, SEQ)),  # before cross_entropy meets an inf logit
])
def test_an_overflow_inside_is_named_after_the_function_called(func, args):
    with pytest.raises(ValueError) as error:
        func(*args)
    assert str(error.value) == str(too_large(func.__name__))


def test_an_overflow_while_training_is_trains():
    settings = Settings(vocab_size=4, d_model=19, num_heads=1, max_len=4, steps=1, batch_size=2)
    with pytest.raises(ValueError, match=r"^train: the values are too large"):
        train(settings, model=OVERFLOWING)


# === Rules newly enforced ===


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
    with pytest.raises(error, match=match):
        unflatten(bad, HAND)


def test_messages_name_the_argument():
    with pytest.raises(ShapeError, match=r"^repeat_targets: seq has 2 tokens"):
        repeat_targets([0, 1])
    with pytest.raises(ValueError, match=r"^first_half_targets: seq\[1\] is -1"):
        first_half_targets([0, -1, 0, -1])
    with pytest.raises(TypeError, match=r"^unflatten: like must be an InductionModel"):
        unflatten([0.0], "model")


def test_train_checks_settings_then_the_model_then_progress():
    with pytest.raises(TypeError, match=r"^train: settings must be a Settings"):
        train("settings", progress=5, model="model")
    with pytest.raises(TypeError, match=r"^train: model must be an InductionModel"):
        train(SMALL, progress=5, model="model")
    with pytest.raises(TypeError, match=r"^train: progress must be a function"):
        train(SMALL, progress=5)
    with pytest.raises(ShapeError, match=r"^train: model does not have the sizes of settings"):
        train(SMALL, model=HAND)


# === The command's functions ===


def _saved(**change):
    settings = SMALL
    model = init_model(settings)
    data = json.loads(command.run_to_json(settings, model, History(*[[1.0, 0.5]] * 4)))
    data.update(change)
    return json.dumps(data)


def test_a_saved_run_reads_back():
    settings, model, history = command.run_from_json(_saved())
    assert settings == SMALL and model == init_model(SMALL) and history.repeat_loss == [1.0, 0.5]


@pytest.mark.parametrize("change, error, match", [
    ({"settings": None}, ValueError, r'^run_from_json: not a saved run \("settings" must be an object with the fields '
                                     r"vocab_size, d_model, .*, seed\)$"),
    ({"settings": {"bogus": 1}}, ValueError, r'"settings" must be an object'),
    ({"settings": dict(SMALL._asdict(), vocab_size=99)}, ValueError, r"^run_from_json: vocab_size is 99; the limit is 26"),
    ({"parameters": [1.0]}, ValueError, r'^run_from_json: not a saved run \("parameters" has 1 numbers; its settings '
                                        r"need \d+\)$"),
    ({"parameters": None}, ValueError, r'"parameters" has NoneType numbers'),
    ({"history": {"x": [1.0]}}, ValueError, r'^run_from_json: not a saved run \("history" must be an object'),
    ({"history": dict.fromkeys(History._fields, [1.0])}, ShapeError,
     r"^run_from_json: history.repeat_loss has 1 entries; it needs one per step \(settings.steps = 2\)$"),
])
def test_a_broken_saved_run_is_named(change, error, match):
    with pytest.raises(error, match=match):
        command.run_from_json(_saved(**change))


def test_a_saved_run_missing_a_part_or_with_bad_numbers_is_named():
    data = json.loads(_saved())
    for key in ("settings", "parameters", "history"):
        text = json.dumps({k: v for k, v in data.items() if k != key})
        with pytest.raises(ValueError, match=rf'^run_from_json: not a saved run \("{key}"'):
            command.run_from_json(text)
    n = len(data["parameters"])
    with pytest.raises(TypeError, match=r"^run_from_json: parameters\[0\] is None"):
        command.run_from_json(_saved(parameters=[None] * n))
    with pytest.raises(ValueError, match=r"^run_from_json: parameters\[0\] is nan"):
        command.run_from_json(_saved(parameters=[math.nan] * n))  # json writes and reads NaN
    with pytest.raises(TypeError, match=r"^run_from_json: text must be a str, got b'\{\}' \(bytes\)$"):
        command.run_from_json(b"{}")


def test_run_to_json_checks_the_history():
    model = init_model(SMALL)
    with pytest.raises(TypeError, match=r"^run_to_json: history must be a History \(from train\), got NoneType$"):
        command.run_to_json(SMALL, model, None)
    with pytest.raises(ShapeError, match=r"^run_to_json: history.induction has 1 entries; it needs one per step"):
        command.run_to_json(SMALL, model, History([1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0]))
    with pytest.raises(TypeError, match=r"^run_to_json: model must be an InductionModel"):
        command.run_to_json(SMALL, "model", History(*[[1.0, 0.5]] * 4))


def test_report_lines_needs_a_model_that_reads_the_settings_sequences():
    few_positions = init_model(SMALL)._replace(position_embeddings=init_model(SMALL).position_embeddings[:3])
    with pytest.raises(ShapeError, match=r"^report_lines: settings draw runs of up to 3 of 4 tokens \(the model reads "
                                         r"5\), but the model has 4 tokens and 3 positions$"):
        command.report_lines(few_positions, SMALL)
    with pytest.raises(TypeError, match=r"^report_lines: settings must be a Settings, got str$"):
        command.report_lines(HAND, "settings")
    assert len(command.report_lines(HAND, SMALL)) == 3  # a bigger model may be reported on: 2 heads and the accuracy


def test_progress_printer_load_run_and_main_check_their_arguments():
    with pytest.raises(TypeError, match=r"^progress_printer: stream must be a text stream \(with write and flush\)"):
        command.progress_printer(None, 5)
    with pytest.raises(ValueError, match=r"^progress_printer: steps must be a positive int, got 0$"):
        command.progress_printer(io.StringIO(), 0)
    with pytest.raises(TypeError, match=r"^load_run: path must be a file name \(a str\), got 5 \(int\)$"):
        command.load_run(5)
    with pytest.raises(ValueError, match=r"^load_run: path has a NUL character in it, which no file name has$"):
        command.load_run("run\0.json")


def test_load_run_names_a_file_that_is_not_text_or_never_ends(tmp_path):
    path = tmp_path / "run.json"
    path.write_bytes(b'\xff{"format": 1}')
    with pytest.raises(ValueError, match=r"^load_run: .*run.json is not UTF-8 text \(invalid start byte at byte 0\)$"):
        command.load_run(str(path))
    if os.path.exists("/dev/zero"):
        with pytest.raises(ValueError, match=r"^load_run: /dev/zero is larger than 50,000,000 bytes; it is not a saved run$"):
            command.load_run("/dev/zero")
    with pytest.raises(TypeError, match=r"^main: argv must be a list of str"):
        command.main("--steps 2")


def test_the_command_says_what_is_wrong_in_a_saved_run_in_one_line(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(_saved(parameters=[1.0]), encoding="utf-8")
    err = io.StringIO()
    with redirect_stdout(io.StringIO()), redirect_stderr(err):
        assert command.main(["--quiet", "--check", str(path)]) == 2
    assert err.getvalue() == (f"python -m mha_lists.tools.induction: error: cannot read {path}: run_from_json: not a "
                              f"saved run (\"parameters\" has 1 numbers; its settings need {len(flatten(init_model(SMALL)))})\n")


def test_arguments_are_not_changed_by_a_refusal():
    flat = flatten(HAND)
    bad = [math.nan] + flat[1:]
    before = list(bad)
    with pytest.raises(ValueError):
        unflatten(bad, HAND)
    assert bad[1:] == before[1:] and math.isnan(bad[0])


def test_a_progress_callback_is_the_learners_code_and_its_calls_are_checked():
    """train trusts what it calls itself, but the learner's callback runs outside: a bad call there gets
    its own door's message, not a raw TypeError from deep in the arithmetic."""
    from mha_lists import matmul, softmax

    with pytest.raises(TypeError, match=r"^matmul: B must be a list of rows, got str$"):
        induction.train(induction.Settings(steps=1), progress=lambda step, history: matmul([[1.0]], "x"))
    with pytest.raises(ValueError, match=r"^softmax: v is empty"):
        induction.train(induction.Settings(steps=1), progress=lambda step, history: softmax([]))
    seen = []
    induction.train(induction.Settings(steps=2), progress=lambda step, history: seen.append(softmax([0.0, 0.0])))
    assert seen == [[0.5, 0.5]] * 2
