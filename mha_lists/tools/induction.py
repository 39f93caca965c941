"""``python -m mha_lists.tools.induction``: train a two-layer attention-only model until induction heads form.

Trains ``mha_lists.teaching.induction`` from random parameters on runs of
distinct tokens followed by their repeat, then prints, last, one line per head

    layer L head H: previous-token X.XX, induction Y.YY

(scores on held-out sequences) and the accuracy on their repeated halves.
While it trains, one line on stderr, rewritten in place, shows the step, the
loss on the repeated half and the best two scores of the current batch
(``--quiet`` turns it off).

``--save FILE`` writes the run (settings, every parameter, the per-step
history) as JSON; ``--check FILE`` trains again and says whether the result is
the same, bit for bit (exit 1 if not). Notebook 19 loads such a file. A file
that cannot be used (missing, not a regular file, not a saved run; a folder to
save into that does not exist) is said in one line, with exit 2, before training.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Callable
from typing import Optional, TextIO

from ..core.checks import check_type, MAX_INT_DIGITS, ShapeError, check_positive_int, check_vector, shorten
from ..teaching.induction import (LIMITS, History, Settings, check_settings, head_scores, init_model, make_sequences,
                                  repeat_accuracy, train)
from ..teaching.model import Model, check_model, flatten, unflatten
from .cli import OneLineErrorParser

__all__ = ["load_run"]  # what notebook 19 imports

HELD_OUT = 200  # held-out sequences for the scores and the accuracy
FORMAT = "mha-lists induction run 1"
MAX_RUN_BYTES = 50_000_000  # a saved run of the largest settings is far smaller


def file_name(path: str) -> str:
    """A file name as a message shows it: quoted, and cut short past 200 characters."""
    return shorten(path, 200)


def _seed(text: str) -> int:
    if len(text.strip().lstrip("+-")) > MAX_INT_DIGITS:  # before int(): CPython refuses over 4,300 digits
        raise argparse.ArgumentTypeError(f"a number of {len(text.strip()):,} characters; "
                                         f"at most {MAX_INT_DIGITS} digits")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} is not a whole number") from None


def build_parser() -> argparse.ArgumentParser:
    return run_parser("python -m mha_lists.tools.induction",
                      "Train a two-layer attention-only model on repeated runs; print each head's scores.",
                      Settings(), LIMITS["steps"])


def run_parser(prog: str, description: str, default: tuple, most_steps: int) -> argparse.ArgumentParser:
    """The options of a training command (this one, read_text): --seed, --steps, --quiet, --save, --check."""

    def steps(text: str) -> int:
        value = _seed(text)
        if not 1 <= value <= most_steps:
            raise argparse.ArgumentTypeError(f"{value} must be 1 to {most_steps:,}")
        return value

    parser = OneLineErrorParser(prog=prog, description=description)
    parser.add_argument("--seed", type=_seed, default=default.seed,
                        help=f"seed of every random draw (default {default.seed})")
    parser.add_argument("--steps", type=steps, default=default.steps,
                        help=f"Adam steps, 1 to {most_steps:,} (default {default.steps:,})")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument("--save", metavar="FILE", help="write the run (settings, parameters, losses) as JSON")
    parser.add_argument("--check", metavar="FILE", help="train and compare with a saved run, bit for bit")
    return parser


# === Saving a run ===


def check_history(func: str, history: object, steps: int) -> None:
    """A History of ``steps`` steps: four lists of that many finite numbers."""
    if not isinstance(history, History):
        raise TypeError(f"{func}: history must be a History (from train), got {type(history).__name__}")
    for field in History._fields:
        n = check_vector(func, f"history.{field}", getattr(history, field))
        if n != steps:
            raise ShapeError(f"{func}: history.{field} has {n:,} entries; it needs one per step "
                             f"(settings.steps = {steps})")


def run_to_json(settings: Settings, model: Model, history: History) -> str:
    """The run as JSON text; floats are written with repr, so reading them back gives the same bits."""
    check_settings("run_to_json", settings)
    check_model("run_to_json", "model", model)
    check_history("run_to_json", history, settings.steps)
    return json.dumps({"format": FORMAT, "settings": settings._asdict(), "parameters": flatten(model),
                       "history": history._asdict()}, indent=0) + "\n"


def run_from_json(text: str) -> tuple[Settings, Model, History]:
    """Read what ``run_to_json`` wrote: settings, the trained model, its History."""
    return read_run("run_from_json", check_type("run_from_json", "text", text, str, "a str"))


def read_run(func: str, text: str) -> tuple[Settings, Model, History]:
    """``run_from_json``; ``func`` says where the text came from (``load_run`` names its file there)."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: arrays nested thousands deep
        raise ValueError(f"{func}: not a saved run ({shorten(str(error), 120)})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{func}: not a saved run (no \"format\": \"{FORMAT}\")")
    settings = check_settings(func, Settings(**_part(func, data, "settings", Settings._fields)))
    like = init_model(settings)
    parameters, size = data.get("parameters"), len(flatten(like))
    if not isinstance(parameters, list) or len(parameters) != size:
        n = f"{len(parameters):,}" if isinstance(parameters, list) else type(parameters).__name__
        raise ValueError(f"{func}: not a saved run (\"parameters\" has {n} numbers; its settings need {size:,})")
    check_vector(func, "parameters", parameters)
    history = History(**_part(func, data, "history", History._fields))
    check_history(func, history, settings.steps)
    return settings, unflatten(parameters, like), history


def _part(func: str, data: dict, key: str, fields: tuple[str, ...]) -> dict:
    """``data[key]``, an object with exactly these fields (the settings or the history of a saved run)."""
    part = data.get(key)
    if not isinstance(part, dict) or set(part) != set(fields):
        raise ValueError(f"{func}: not a saved run (\"{key}\" must be an object with the fields {', '.join(fields)})")
    return part


def load_run(path: str) -> tuple[Settings, Model, History]:
    """``run_from_json`` of the file at ``path``; every message names the file.

    A file that cannot be opened raises OSError; anything but a regular file (a
    FIFO, a device, a folder) is refused at once, before a byte is read.
    """
    text = read_file("load_run", path, "a saved run")
    return read_run(f"load_run: {file_name(os.fspath(path))}", text)


def read_file(func: str, path: str, what: str) -> str:
    """The UTF-8 text of the regular file at ``path`` (at most MAX_RUN_BYTES); ``what`` says what it should be.

    A file that cannot be opened raises OSError; anything but a regular file (a
    FIFO, a device, a folder) is refused at once, before a byte is read.
    """
    path = os.fspath(path) if isinstance(path, os.PathLike) else path
    if not isinstance(path, str):
        raise TypeError(f"{func}: path must be a file name (a str), got {shorten(path)} ({type(path).__name__})")
    name = file_name(path)
    if "\0" in path:
        raise ValueError(f"{func}: path {name} has a NUL character in it, which no file name has")
    # O_NONBLOCK: opening a FIFO waits for a writer without it; a regular file reads the same either way.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{func}: {name} is not a regular file (a FIFO, a device or a folder); "
                             f"{what} is a file")
        if info.st_size > MAX_RUN_BYTES:
            raise ValueError(f"{func}: {name} has {info.st_size:,} bytes, more than {MAX_RUN_BYTES:,}; "
                             f"it is not {what}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(MAX_RUN_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{func}: {name} is not UTF-8 text ({error.reason} at byte {error.start})") from None


def check_save_path(path: str) -> Optional[str]:
    """What is wrong with saving to ``path`` (a missing folder, a folder given as the file), or None."""
    if "\0" in path:
        return f"cannot save to {file_name(path)}: it has a NUL character in it, which no file name has"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"cannot save to {file_name(path)}: the folder {file_name(folder)} does not exist"
    if os.path.isdir(path):
        return f"cannot save to {file_name(path)}: it is a folder; give a file name"
    if not os.access(folder, os.W_OK):
        return f"cannot save to {file_name(path)}: the folder {file_name(folder)} is not writable"
    return None


# === Reporting ===


def report_lines(model: Model, settings: Settings) -> list[str]:
    """One line per head, then the accuracy, all on ``HELD_OUT`` held-out sequences."""
    sizes = check_model("report_lines", "model", model)
    s = check_settings("report_lines", settings)
    if s.vocab_size > sizes.vocab_size or 2 * s.max_len - 1 > sizes.positions:
        raise ShapeError(
            f"report_lines: settings draw runs of up to {s.max_len} of {s.vocab_size} tokens (the model reads "
            f"{2 * s.max_len - 1}), but the model has {sizes.vocab_size} tokens and {sizes.positions} positions")
    held_out = make_sequences(HELD_OUT, settings, "held-out")
    lines = [f"layer {h.layer} head {h.head}: previous-token {h.previous_token:.2f}, induction {h.induction:.2f}"
             for h in head_scores(model, held_out)]
    accuracy = repeat_accuracy(model, held_out)
    lines.append(f"accuracy on the repeated halves: {accuracy:.2f} ({HELD_OUT} held-out sequences)")
    return lines


def progress_printer(stream: TextIO, steps: int):
    """A ``progress`` function for ``train`` that rewrites one line on ``stream``: the step, the batch's
    loss on the repeated half, its best layer-0 previous-token and best last-layer induction score."""
    return line_printer("progress_printer", stream, steps, lambda step, history: (
        f"step {step}/{steps}  loss (repeat) {history.repeat_loss[-1]:.3f}  "
        f"previous-token {history.previous_token[-1]:.2f}  induction {history.induction[-1]:.2f}"))


def line_printer(func: str, stream: TextIO, steps: int, line_of: Callable[[int, object], str]):
    """A ``progress(step, history)`` that rewrites one line, ``line_of(step, history)``, on ``stream``,
    padded so a shorter line covers a longer one before it, and ends it after the last step."""
    if not (callable(getattr(stream, "write", None)) and callable(getattr(stream, "flush", None))):
        raise TypeError(f"{func}: stream must be a text stream (with write and flush), got {type(stream).__name__}")
    check_positive_int(func, "steps", steps)

    def show(step: int, history: object) -> None:
        stream.write("\r" + line_of(step, history).ljust(72))
        if step == steps:
            stream.write("\n")
        stream.flush()
    return show


def parse_arguments(parser: argparse.ArgumentParser, argv: Optional[list[str]]) -> argparse.Namespace:
    """A command's ``main(argv)``: argv checked (a list of str, or None for the command line), parsed, and its
    --save and --check files checked before any training."""
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise TypeError(f"main: argv must be a list of str (the command's arguments) or None, got {shorten(argv)}")
    args = parser.parse_args(argv)
    check_file_arguments(parser, args)
    return args


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parse_arguments(parser, argv)
    settings = Settings(seed=args.seed, steps=args.steps)
    saved = read_saved(parser, args.check, load_run) if args.check else None
    if isinstance(saved, int):
        return saved
    if saved:
        settings = saved[0]
    progress = None if args.quiet else progress_printer(sys.stderr, settings.steps)
    model, history = train(settings, progress=progress)
    print(f"trained {settings.steps} steps, seed {settings.seed}: loss on the repeated half "
          f"{history.repeat_loss[0]:.3f} -> {history.repeat_loss[-1]:.3f}")
    text = run_to_json(settings, model, history)
    if args.save and write_saved(parser, args.save, text):
        return 2
    for line in report_lines(model, settings):
        print(line)
    return same_as_saved(args.check, text, run_to_json(*saved)) if saved else 0


# === What both training commands (this one and read_text) do with --save and --check ===


def check_file_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--save and --check together, or a file to save into a folder that does not exist: one line, exit 2."""
    if args.save and args.check:
        parser.error("give --save or --check, not both")
    if args.save and check_save_path(args.save):
        parser.error(check_save_path(args.save))


def read_saved(parser: argparse.ArgumentParser, path: str, load: Callable[[str], tuple]):
    """``load(path)``, or 2 after one line on stderr when the file cannot be read or is not a saved run."""
    try:
        return load(path)
    except OSError as error:
        print(f"{parser.prog}: error: cannot read {file_name(path)}: {error.strerror or error}", file=sys.stderr)
    except ValueError as error:  # ShapeError is a ValueError; the message names the file
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
    return 2


def write_saved(parser: argparse.ArgumentParser, path: str, text: str) -> int:
    """Write a run to ``path`` and say so; 2 after one line on stderr if it cannot be written."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as error:
        print(f"{parser.prog}: error: cannot save to {file_name(path)}: {error.strerror or error}", file=sys.stderr)
        return 2
    print(f"saved to {path}")
    return 0


def same_as_saved(path: str, text: str, saved: str) -> int:
    """Say whether a run retrained from a saved file's settings is that file, bit for bit; 0 if so, else 1."""
    same = text == saved
    print(f"same as {path}, bit for bit: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
