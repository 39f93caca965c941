"""``python -m mha_lists.tools.induction`` (mha_lists/tools/induction.py): its output, saving and checking a
run, the files it refuses at once, its one-line errors."""

import io
import json
import math
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from mha_lists import ShapeError
from mha_lists.teaching.induction import History, Settings, flatten, hand_built_model, init_model
from mha_lists.tools import induction as command
import commands

ROOT = Path(__file__).resolve().parents[1]
PROG = "python -m mha_lists.tools.induction"
SMALL = Settings(vocab_size=4, d_model=4, num_heads=2, max_len=3, batch_size=2, steps=2)
HAND = hand_built_model(4, 7)

# Each message's wording, pinned once; the other tests match the start (function: argument).
MESSAGES = {
    "fields": 'run_from_json: not a saved run ("settings" must be an object with the fields vocab_size, d_model, '
              'num_heads, num_layers, min_len, max_len, batch_size, lr, steps, seed)',
    "parameters": 'run_from_json: not a saved run ("parameters" has 1 numbers; its settings need {size})',
    "history length": "run_from_json: history.repeat_loss has 1 entries; it needs one per step (settings.steps = 2)",
    "format": 'run_from_json: not a saved run (no "format": "mha-lists induction run 1")',
    "text": "run_from_json: text must be a str, got b'{}' (bytes)",
    "history type": "run_to_json: history must be a History (from train), got NoneType",
    "report": "report_lines: settings draw runs of up to 3 of 4 tokens (the model reads 5), but the model has "
              "4 tokens and 3 positions",
    "stream": "progress_printer: stream must be a text stream (with write and flush), got NoneType",
    "path": "load_run: path must be a file name (a str), got 5 (int)",
    "nul": "load_run: path 'run\\x00.json' has a NUL character in it, which no file name has",
    "not regular": "load_run: {name} is not a regular file (a FIFO, a device or a folder); a saved run is a file",
    "utf-8": "load_run: {name} is not UTF-8 text (invalid start byte at byte 0)",
    "in file": 'load_run: {name}: not a saved run ("parameters" has 1 numbers; its settings need {size})',
    "argv": "main: argv must be a list of str (the command's arguments) or None, got '--steps 2'",
    "command": PROG + ": error: {message}",
    "save folder": PROG + ": error: cannot save to {path}: the folder {folder} does not exist (see --help)",
}


def _saved(**change):
    model = init_model(SMALL)
    data = json.loads(command.run_to_json(SMALL, model, History(*[[1.0, 0.5]] * 4)))
    data.update(change)
    return json.dumps(data)


def run_main(argv):
    return commands.run_main(command.main, argv)


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


# === Saving and reading a run ===


def test_a_saved_run_reads_back():
    settings, model, history = command.run_from_json(_saved())
    assert settings == SMALL and model == init_model(SMALL) and history.repeat_loss == [1.0, 0.5]


@pytest.mark.parametrize("change, key", [
    ({"settings": None}, "fields"), ({"settings": {"bogus": 1}}, "fields"),
    ({"parameters": [1.0]}, "parameters"),
    ({"history": dict.fromkeys(History._fields, [1.0])}, "history length"),
    ({"format": "other"}, "format"),
])
def test_a_broken_saved_run_is_named(change, key):
    with pytest.raises(ValueError) as info:
        command.run_from_json(_saved(**change))
    assert str(info.value) == MESSAGES[key].format(size=f"{len(flatten(init_model(SMALL))):,}")


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
    with pytest.raises(ValueError, match=r"^run_from_json: vocab_size is 99; the limit is 26"):
        command.run_from_json(_saved(settings=dict(SMALL._asdict(), vocab_size=99)))
    with pytest.raises(ValueError, match=r"^run_from_json: not a saved run \("):
        command.run_from_json("[" * 100_000)  # nested too deep for json
    with pytest.raises(TypeError) as info:
        command.run_from_json(b"{}")
    assert str(info.value) == MESSAGES["text"]


def test_run_to_json_checks_the_history_and_the_model():
    model = init_model(SMALL)
    with pytest.raises(TypeError) as info:
        command.run_to_json(SMALL, model, None)
    assert str(info.value) == MESSAGES["history type"]
    with pytest.raises(ShapeError, match=r"^run_to_json: history\.induction has 1 entries; it needs one per step"):
        command.run_to_json(SMALL, model, History([1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0]))
    with pytest.raises(TypeError, match=r"^run_to_json: model must be a Model"):
        command.run_to_json(SMALL, "model", History(*[[1.0, 0.5]] * 4))


def test_load_run_names_the_file_in_every_message(tmp_path):
    path = tmp_path / "run.json"
    name = repr(str(path))
    path.write_bytes(b'\xff{"format": 1}')
    with pytest.raises(ValueError) as info:
        command.load_run(str(path))
    assert str(info.value) == MESSAGES["utf-8"].format(name=name)
    path.write_text(_saved(parameters=[1.0]), encoding="utf-8")
    with pytest.raises(ValueError) as info:
        command.load_run(path)  # a Path is a file name too
    assert str(info.value) == MESSAGES["in file"].format(name=name, size=f"{len(flatten(init_model(SMALL))):,}")
    path.write_text(_saved(settings=dict(SMALL._asdict(), seed=1.5)), encoding="utf-8")
    with pytest.raises(TypeError, match=rf"^load_run: {name}: seed must be an int"):
        command.load_run(str(path))


def test_load_run_refuses_a_fifo_a_device_and_a_folder_at_once(tmp_path):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)  # opened for reading the usual way, it waits for a writer: forever
    for path in (str(fifo), "/dev/zero", str(tmp_path)):
        with pytest.raises(ValueError) as info:
            command.load_run(path)
        assert str(info.value) == MESSAGES["not regular"].format(name=repr(path))


def test_load_run_checks_its_argument():
    with pytest.raises(TypeError) as info:
        command.load_run(5)
    assert str(info.value) == MESSAGES["path"]
    with pytest.raises(ValueError) as info:
        command.load_run("run\0.json")
    assert str(info.value) == MESSAGES["nul"]
    with pytest.raises(FileNotFoundError):
        command.load_run("/nonexistent/run.json")


# === Reporting ===


def test_report_lines_needs_a_model_that_reads_the_settings_sequences():
    few_positions = init_model(SMALL)._replace(position_embeddings=init_model(SMALL).position_embeddings[:3])
    with pytest.raises(ShapeError) as info:
        command.report_lines(few_positions, SMALL)
    assert str(info.value) == MESSAGES["report"]
    with pytest.raises(TypeError, match=r"^report_lines: settings must be a Settings, got str$"):
        command.report_lines(HAND, "settings")
    assert len(command.report_lines(HAND, SMALL)) == 3  # a bigger model may be reported on: 2 heads and the accuracy


def test_progress_printer_and_main_check_their_arguments():
    with pytest.raises(TypeError) as info:
        command.progress_printer(None, 5)
    assert str(info.value) == MESSAGES["stream"]
    with pytest.raises(ValueError, match=r"^progress_printer: steps must be a positive int, got 0$"):
        command.progress_printer(io.StringIO(), 0)
    with pytest.raises(TypeError) as info:
        command.main("--steps 2")
    assert str(info.value) == MESSAGES["argv"]


# === The command: one line and exit 2 on anything it cannot use, before training ===


def test_the_command_says_what_is_wrong_in_a_saved_run_in_one_line(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(_saved(parameters=[1.0]), encoding="utf-8")
    code, out, err = run_main(["--quiet", "--check", str(path)])
    size = f"{len(flatten(init_model(SMALL))):,}"
    assert (code, out) == (2, "")
    assert err == MESSAGES["command"].format(message=MESSAGES["in file"].format(name=repr(str(path)), size=size)) + "\n"


def test_the_command_refuses_a_fifo_at_once(tmp_path):
    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "mha_lists.tools.induction", "--quiet", "--check", str(fifo)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == MESSAGES["command"].format(
        message=MESSAGES["not regular"].format(name=repr(str(fifo)))) + "\n"


def test_save_into_a_missing_folder_fails_before_training(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(command, "train", lambda *args, **kwargs: trained.append(1))
    path = tmp_path / "missing" / "run.json"
    code, out, err = run_main(["--quiet", "--save", str(path)])
    assert (code, out, trained) == (2, "", [])
    assert err == MESSAGES["save folder"].format(path=repr(str(path)), folder=repr(str(path.parent))) + "\n"
    code, out, err = run_main(["--quiet", "--save", str(tmp_path)])  # a folder, not a file
    assert (code, trained) == (2, []) and err.startswith(f"{PROG}: error: cannot save to ") and "folder" in err


def test_save_into_a_missing_folder_is_one_line_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mha_lists.tools.induction", "--save", str(tmp_path / "no" / "r.json")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and "step" not in done.stderr


def test_a_missing_file_to_check_is_one_line(tmp_path):
    code, out, err = run_main(["--quiet", "--check", str(tmp_path / "none.json")])
    assert (code, out) == (2, "")
    assert err == f"{PROG}: error: cannot read {str(tmp_path / 'none.json')!r}: No such file or directory\n"


@pytest.mark.parametrize("args", [["--steps", "0"], ["--steps", "x"], ["--steps", "5001"], ["--seed", "1.5"],
                                  ["--seed", "9" * 101], ["--steps", "9" * 5000], ["--bogus"],
                                  ["--save", "a.json", "--check", "b.json"]])
def test_command_bad_input_is_one_line_and_exit_2(args):
    code, out, err = run_main(args)
    assert (code, out) == (2, "") and err.count("\n") == 1 and err.startswith(f"{PROG}: error: ")


def test_the_real_command_prints_one_line_and_exits_2():
    done = subprocess.run([sys.executable, "-m", "mha_lists.tools.induction", "--steps", "0"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"{PROG}: error: ")
