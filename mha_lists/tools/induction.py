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
the same, bit for bit (exit 1 if not). Notebook 19 loads such a file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional, TextIO

from ..core.checks import ShapeError, check_vector, checked
from ..teaching.induction import (LIMITS, History, InductionModel, Settings, check_settings, flatten, head_scores,
                                  init_model, make_sequences, repeat_accuracy, train, unflatten)
from .cli import OneLineErrorParser

__all__ = ["load_run"]  # what notebook 19 imports

HELD_OUT = 200  # held-out sequences for the scores and the accuracy
FORMAT = "mha-lists induction run 1"


def _steps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= LIMITS["steps"]:
        raise argparse.ArgumentTypeError(f"{value} must be 1 to {LIMITS['steps']}")
    return value


def _seed(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def build_parser() -> argparse.ArgumentParser:
    default = Settings()
    parser = OneLineErrorParser(
        prog="python -m mha_lists.tools.induction",
        description="Train a two-layer attention-only model on repeated runs; print each head's scores.",
    )
    parser.add_argument("--seed", type=_seed, default=default.seed, help=f"seed of every random draw (default {default.seed})")
    parser.add_argument("--steps", type=_steps, default=default.steps,
                        help=f"Adam steps, 1 to {LIMITS['steps']} (default {default.steps})")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    parser.add_argument("--save", metavar="FILE", help="write the run (settings, parameters, history) as JSON")
    parser.add_argument("--check", metavar="FILE", help="train and compare with a saved run, bit for bit")
    return parser


# === Saving a run ===


def _check_history(func: str, history: object, steps: int) -> None:
    """A History of ``steps`` steps: four lists of that many finite numbers."""
    if not isinstance(history, History):
        raise TypeError(f"{func}: history must be a History (from train), got {type(history).__name__}")
    for field in History._fields:
        n = check_vector(func, f"history.{field}", getattr(history, field), finite=True)
        if n != steps:
            raise ShapeError(f"{func}: history.{field} has {n} entries; it needs one per step (settings.steps = {steps})")


def _history_of_the_run(func: str, arguments: dict, sizes: dict) -> None:
    _check_history(func, arguments["history"], arguments["settings"].steps)


@checked(settings="induction settings", model="induction model", also=_history_of_the_run)
def run_to_json(settings: Settings, model: InductionModel, history: History) -> str:
    """The run as JSON text; floats are written with repr, so reading them back gives the same bits."""
    return json.dumps({"format": FORMAT, "settings": settings._asdict(), "parameters": flatten(model),
                       "history": history._asdict()}, indent=0) + "\n"


def _part(func: str, data: dict, key: str, fields: tuple[str, ...]) -> dict:
    """``data[key]``, an object with exactly these fields (the settings or the history of a saved run)."""
    part = data.get(key)
    if not isinstance(part, dict) or set(part) != set(fields):
        raise ValueError(f"{func}: not a saved run (\"{key}\" must be an object with the fields {', '.join(fields)})")
    return part


@checked(text="str")
def run_from_json(text: str) -> tuple[Settings, InductionModel, History]:
    """Read what ``run_to_json`` wrote: settings, the trained model, its History.

    The text is a file's, not an argument a program got wrong: what is wrong in it
    is said here, in the body, whether ``load_run`` or a learner called it.
    """
    func = "run_from_json"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as error:  # RecursionError: arrays nested thousands deep
        raise ValueError(f"{func}: not a saved run ({error})") from error
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{func}: not a saved run (no \"format\": \"{FORMAT}\")")
    settings = check_settings(func, Settings(**_part(func, data, "settings", Settings._fields)))
    like = init_model(settings)
    parameters, size = data.get("parameters"), len(flatten(like))
    if not isinstance(parameters, list) or len(parameters) != size:
        n = len(parameters) if isinstance(parameters, list) else type(parameters).__name__
        raise ValueError(f"{func}: not a saved run (\"parameters\" has {n} numbers; its settings need {size})")
    check_vector(func, "parameters", parameters, finite=True)
    history = History(**_part(func, data, "history", History._fields))
    _check_history(func, history, settings.steps)
    return settings, unflatten(parameters, like), history


MAX_RUN_BYTES = 50_000_000  # a saved run of the largest settings is far smaller; /dev/zero never ends


def _a_path(func: str, arguments: dict, sizes: dict) -> None:
    if not isinstance(arguments["path"], (str, os.PathLike)):
        raise TypeError(f"{func}: path must be a file name (a str), got {arguments['path']!r:.60} "
                        f"({type(arguments['path']).__name__})")
    if "\0" in os.fspath(arguments["path"]):
        raise ValueError(f"{func}: path has a NUL character in it, which no file name has")


@checked(also=_a_path)
def load_run(path: str) -> tuple[Settings, InductionModel, History]:
    """``run_from_json`` of the file at ``path`` (a file that cannot be opened raises OSError)."""
    with open(path, "rb") as f:
        data = f.read(MAX_RUN_BYTES + 1)
    if len(data) > MAX_RUN_BYTES:
        raise ValueError(f"load_run: {path} is larger than {MAX_RUN_BYTES:,} bytes; it is not a saved run")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"load_run: {path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    return run_from_json(text)


# === Reporting ===


def _held_out_fits(func: str, arguments: dict, sizes: dict) -> None:
    s = arguments["settings"]
    if s.vocab_size > sizes["vocab_size"] or 2 * s.max_len - 1 > sizes["positions"]:
        raise ShapeError(
            f"{func}: settings draw runs of up to {s.max_len} of {s.vocab_size} tokens (the model reads "
            f"{2 * s.max_len - 1}), but the model has {sizes['vocab_size']} tokens and {sizes['positions']} positions")


@checked(model="induction model", settings="induction settings", also=_held_out_fits)
def report_lines(model: InductionModel, settings: Settings) -> list[str]:
    """One line per head, then the accuracy, all on ``HELD_OUT`` held-out sequences."""
    held_out = make_sequences(HELD_OUT, settings, "held-out")
    lines = [f"layer {s.layer} head {s.head}: previous-token {s.previous_token:.2f}, induction {s.induction:.2f}"
             for s in head_scores(model, held_out)]
    accuracy = repeat_accuracy(model, held_out)
    lines.append(f"accuracy on the repeated halves: {accuracy:.2f} ({HELD_OUT} held-out sequences)")
    return lines


def _a_stream(func: str, arguments: dict, sizes: dict) -> None:
    stream = arguments["stream"]
    if not (callable(getattr(stream, "write", None)) and callable(getattr(stream, "flush", None))):
        raise TypeError(f"{func}: stream must be a text stream (with write and flush), got {type(stream).__name__}")


@checked(steps="positive int", also=_a_stream)
def progress_printer(stream: TextIO, steps: int):
    """A ``progress`` function for ``train`` that rewrites one line on ``stream``: the step, the batch's
    loss on the repeated half, its best layer-0 previous-token and best last-layer induction score."""
    def show(step: int, history: History) -> None:
        # Under 80 columns, padded so a shorter line covers a longer one before it.
        line = (f"step {step}/{steps}  loss (repeat) {history.repeat_loss[-1]:.3f}  "
                f"previous-token {history.previous_token[-1]:.2f}  induction {history.induction[-1]:.2f}")
        stream.write("\r" + line.ljust(72))
        if step == steps:
            stream.write("\n")
        stream.flush()
    return show


def _argv(func: str, arguments: dict, sizes: dict) -> None:
    argv = arguments["argv"]
    if argv is not None and not (isinstance(argv, list) and all(isinstance(a, str) for a in argv)):
        raise TypeError(f"{func}: argv must be a list of str (the command's arguments) or None, got {argv!r:.60}")


@checked(also=_argv)
def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.save and args.check:
        parser.error("give --save or --check, not both")
    settings = Settings(seed=args.seed, steps=args.steps)
    progress = None if args.quiet else progress_printer(sys.stderr, settings.steps)
    if args.check:
        try:
            saved = load_run(args.check)
        except (OSError, ValueError, TypeError, KeyError) as error:
            print(f"{parser.prog}: error: cannot read {args.check}: {error}", file=sys.stderr)
            return 2
        settings = saved[0]
        progress = None if args.quiet else progress_printer(sys.stderr, settings.steps)
    model, history = train(settings, progress=progress)
    print(f"trained {settings.steps} steps, seed {settings.seed}: loss on the repeated half "
          f"{history.repeat_loss[0]:.3f} -> {history.repeat_loss[-1]:.3f}")
    if args.save:
        with open(args.save, "w", encoding="utf-8") as f:
            f.write(run_to_json(settings, model, history))
        print(f"saved to {args.save}")
    for line in report_lines(model, settings):
        print(line)
    if args.check:
        same = run_to_json(settings, model, history) == run_to_json(*saved)
        print(f"same as {args.check}, bit for bit: {same}")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
