"""``python -m mha_lists.tools.read_text``: train two attention layers on a book, then read their heads' jobs.

Trains ``mha_lists.teaching.reading`` from random parameters on windows of
Genesis (King James Bible) in which a passage repeats, one character per token,
then prints what the heads do, found twice:

    layer L head H: previous-token X.XX, induction Y.YY      (by their attention)
    in-context: loss on first copy A.AA, second copy B.BB
    validation loss per character V.VV (unigram U.UU, bigram B.BB)
    K-composition L0Hg -> L1Hh: S.SS                          (by their weights)

and a last line saying whether the run succeeded: a layer-0 head with
previous-token score >= 0.5, a layer-1 head with induction score >= 0.3, the
second copy of a passage at most 0.85x the first copy's loss, and the top
K-composition pair being those two heads. While it trains, one line on stderr,
rewritten in place, shows the step, the loss, characters per second and the
time left (``--quiet`` turns it off).

``--save FILE`` writes the run (settings, every parameter, each step's loss) as
JSON; ``--check FILE`` trains again with that file's settings and says whether
the result is the same, bit for bit (exit 1 if not). The shipped run is
``mha_lists/data/read_text_run.json``; notebook 07b and ``running_example(trained=True)``
load it.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, TextIO

from ..core.checks import shorten
from ..teaching.circuits import Composition, k_composition
from ..teaching.model import Model
from ..teaching.reading import (HELD_OUT, INDUCTION, LIMITS, PREVIOUS_TOKEN, HeadScore, History, Settings, baselines,
                                check_settings, head_scores, in_context_loss, run_from_json, run_to_json, train,
                                validation_loss)
from .induction import (file_name, line_printer, parse_arguments, read_file, read_saved, run_parser,
                        same_as_saved, write_saved)

__all__ = []

# The success rule: a layer-0 head with at least PREVIOUS_TOKEN previous-token score, a later head with at
# least INDUCTION induction score (the thresholds head_jobs names jobs with, from teaching.reading) ...
IN_CONTEXT = 0.85  # ... the second copy's loss at most this times the first copy's ...
# ... and the top K-composition pair is those two heads.


def build_parser() -> argparse.ArgumentParser:
    return run_parser("python -m mha_lists.tools.read_text",
                      "Train two attention layers on Genesis, a character at a time; print what each head does. "
                      "Every training window repeats a passage at a random place: repetition is what rewards an "
                      "induction head.",
                      Settings(), LIMITS["steps"])


def heads_found(scores: list[HeadScore], pairs: list[Composition]) -> tuple[list, list, Composition, bool]:
    """The previous-token heads (layer 0, score >= PREVIOUS_TOKEN), the induction heads (later layers,
    >= INDUCTION), the top K-composition pair, and whether it joins one of each. Every head over a
    threshold has that job: a run may have two previous-token heads, and the top pair may start from either."""
    previous = [s for s in scores if s.layer == 0 and s.previous_token >= PREVIOUS_TOKEN]
    induction = [s for s in scores if s.layer > 0 and s.induction >= INDUCTION]
    top = max(pairs, key=lambda c: c.score)
    same = top.earlier in [(s.layer, s.head) for s in previous] and top.later in [(s.layer, s.head) for s in induction]
    return previous, induction, top, same


def _names(heads: list) -> str:
    return " ".join(f"L{s.layer}H{s.head}" for s in heads) or "none"


def report_lines(model: Model) -> list[str]:
    """What the heads do, by attention and by weights, the losses, and whether the run succeeded."""
    scores = head_scores(model, HELD_OUT)
    lines = [f"layer {s.layer} head {s.head}: previous-token {s.previous_token:.2f}, induction {s.induction:.2f}"
             for s in scores]
    first, second = in_context_loss(model, HELD_OUT)
    lines.append(f"in-context: loss on first copy {first:.2f}, second copy {second:.2f}")
    unigram, bigram = baselines()
    lines.append(f"validation loss per character {validation_loss(model, HELD_OUT):.2f} "
                 f"(unigram {unigram:.2f}, bigram {bigram:.2f})")
    pairs = k_composition(model)
    lines += [f"K-composition L{c.earlier[0]}H{c.earlier[1]} -> L{c.later[0]}H{c.later[1]}: {c.score:.2f}"
              for c in pairs]
    previous, induction, top, same = heads_found(scores, pairs)
    ok = bool(previous) and bool(induction) and second <= IN_CONTEXT * first and same
    lines.append(f"previous-token heads {_names(previous)}, induction heads {_names(induction)}, "
                 f"top K-composition pair L{top.earlier[0]}H{top.earlier[1]} -> L{top.later[0]}H{top.later[1]}")
    lines.append(f"succeeded: {ok} (previous-token >= {PREVIOUS_TOKEN}, induction >= {INDUCTION}, second copy "
                 f"<= {IN_CONTEXT} x first: {second / first:.2f}, top K-composition pair = such heads: {same})")
    return lines


def progress_printer(stream: TextIO, settings: Settings, clock=time.monotonic):
    """A ``progress`` function for ``train`` that rewrites one line on ``stream``: the step, the batch's loss,
    characters read per second and the time left at that pace (only this line looks at the clock)."""
    check_settings("progress_printer", settings)
    if not callable(clock):
        raise TypeError(f"progress_printer: clock must be a function giving seconds, got {shorten(clock)}")
    start = clock()

    def line(step: int, history: History) -> str:
        elapsed = max(clock() - start, 1e-9)
        left = round(elapsed / step * (settings.steps - step))
        return (f"step {step}/{settings.steps}  loss {history.loss[-1]:.3f}  "
                f"{step * settings.batch_size * settings.window / elapsed:,.0f} characters/s  "
                f"time left {left // 60}:{left % 60:02d}")
    return line_printer("progress_printer", stream, settings.steps, line)


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parse_arguments(parser, argv)
    settings = Settings(seed=args.seed, steps=args.steps, warmup=min(Settings().warmup, args.steps - 1))
    saved = read_saved(parser, args.check, lambda path: run_from_json(
        read_file(parser.prog, path, "a saved run"), file_name(path))) if args.check else None
    if isinstance(saved, int):
        return saved
    if saved:
        settings = saved[0]
    start = time.monotonic()
    progress = None if args.quiet else progress_printer(sys.stderr, settings)
    try:
        model, history = train(settings, progress=progress)
    except ValueError as error:  # a saved run's settings past the work limit: train names the limit
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 2
    if not args.quiet:
        seconds = round(time.monotonic() - start)
        print(f"trained in {seconds // 60}:{seconds % 60:02d}", file=sys.stderr)
    print(f"trained {settings.steps:,} steps, seed {settings.seed}: loss per character "
          f"{history.loss[0]:.2f} -> {history.loss[-1]:.2f}")
    text = run_to_json(settings, model, history)
    if args.save and write_saved(parser, args.save, text):
        return 2
    for line in report_lines(model):
        print(line)
    return same_as_saved(args.check, text, run_to_json(*saved)) if saved else 0


if __name__ == "__main__":
    sys.exit(main())
