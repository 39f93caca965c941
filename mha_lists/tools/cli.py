"""``python -m mha_lists``: print the whole trace of the running example.

Every number is printed at fixed precision with row and column labels, so a
teacher can project it and students can check entries by hand. The output is
byte-identical on CPython 3.10 to 3.13.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import NamedTuple, Optional, Union

from ..core.checks import check_type, MAX_INT_DIGITS, check_positive_int, quote_int, shorten
from ..core.softmax_and_masks import causal_mask
from ..core.attention import attention_trace
from ..teaching.display import MAX_SHOWN, format_matrix
from ..teaching.example import D_MODEL, NUM_HEADS, SEED, SENTENCE, VOCAB, running_example
from ..core.matrix import Matrix


WIDTH = 80  # columns of a projector-friendly terminal
MAX_D_MODEL = math.isqrt(MAX_SHOWN)  # 128: the trace prints every matrix, W_O is d_model x d_model, and a table
# shows at most MAX_SHOWN entries; wider ones are for the library, not a terminal
MAX_TOKENS = 64


MAX_MESSAGE = 400  # characters of an error message: argparse's own quote whatever was typed, in full


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line and exit code 2 (every command of the package)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        one_line = " ".join(message.split())
        if len(one_line) > MAX_MESSAGE:  # "invalid choice: 'xxx...'", "unrecognized arguments: ..."
            one_line = one_line[:MAX_MESSAGE - 4] + " ..."
        self.exit(2, f"{self.prog}: error: {one_line} (see --help)\n")


def _whole_number(text: str) -> int:
    """An argparse type: a whole number of at most MAX_INT_DIGITS digits (a seed)."""
    digits = text.strip().lstrip("+-")
    if digits.isdigit() and len(digits) > MAX_INT_DIGITS:  # before int(): CPython refuses > 4300 digits
        raise argparse.ArgumentTypeError(f"a number of {len(digits):,} digits; at most {MAX_INT_DIGITS}")
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shorten(text, 40)} is not a whole number") from None


def _positive_int(text: str) -> int:
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{quote_int(value)} must be at least 1")
    return value


def size_type(limit: int):
    """An argparse type: a whole number from 1 to ``limit``, with a one-line message otherwise."""
    def size(text: str) -> int:
        value = _positive_int(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"{quote_int(value)} is too large; at most {limit}")
        return value
    return size


def _digits(text: str) -> int:
    value = _positive_int(text)
    if value > 12:
        raise argparse.ArgumentTypeError(f"{value} digits is more than a float holds; use at most 12")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="python -m mha_lists",
        description="Print every number of multi-head attention on the running example.",
        epilog=f"Vocabulary: {' '.join(VOCAB)}",
    )
    parser.add_argument("--sentence", default=SENTENCE, help=f"tokens separated by spaces (default: {SENTENCE!r})")
    parser.add_argument("--seed", type=_whole_number, default=SEED, help=f"seed of every random draw (default: {SEED})")
    parser.add_argument("--heads", type=size_type(MAX_D_MODEL), default=NUM_HEADS,
                        help=f"number of heads (default: {NUM_HEADS})")
    parser.add_argument("--d-model", type=size_type(MAX_D_MODEL), default=D_MODEL,
                        help=f"model width, at most {MAX_D_MODEL} (default: {D_MODEL})")
    parser.add_argument("--causal", action="store_true", help="apply the causal mask (no attending to later tokens)")
    parser.add_argument("--digits", type=_digits, default=4, help="digits after the point (default: 4)")
    parser.add_argument("--weights", action="store_true",
                        help="also print every head's W_Q, W_K and W_V (W_O is always printed)")
    return parser


def _section(title: str) -> str:
    return f"\n=== {title} ===\n"


class Table(NamedTuple):
    """One labelled matrix of the trace, printed by ``format_matrix`` (which adds the shape to the title)."""

    title: str  # "Q, head 0"
    matrix: Matrix
    row_labels: list[str]
    col_labels: list[str]
    kind: str = "matrix"  # "weights": softmax weights, each row sums to 1 (the web page draws a heatmap)


_OPTIONS = ("sentence", "seed", "heads", "d_model", "causal", "digits")


def check_options(func: str, name: str, args: object) -> None:
    """What build_parser() parses (or the page's Settings): sentence, seed, heads, d_model, causal, digits.

    Here: at most MAX_TOKENS tokens and sizes up to MAX_D_MODEL (the trace prints every matrix), a
    causal switch, 1-12 digits. The rest (the vocabulary, the seed, heads that divide d_model) is
    running_example's to check, with its own messages.
    """
    missing = [option for option in _OPTIONS if not hasattr(args, option)]
    if missing:
        raise TypeError(f"{func}: {name} must have {', '.join(_OPTIONS)} (build_parser().parse_args(...)), "
                        f"got {type(args).__name__} without {', '.join(missing)}")
    if isinstance(args.sentence, str) and len(args.sentence.split()) > MAX_TOKENS:
        raise ValueError(f"{func}: {name}.sentence has {len(args.sentence.split()):,} tokens; at most {MAX_TOKENS}")
    for option in ("heads", "d_model"):
        value = getattr(args, option)
        if type(value) is int and value > MAX_D_MODEL:
            raise ValueError(f"{func}: {name}.{option} is {quote_int(value)}; the trace prints at most {MAX_D_MODEL}")
    check_type(func, f"{name}.causal", args.causal, bool, "True or False")
    check_positive_int(func, f"{name}.digits", args.digits, most=12)


def trace_items(args: argparse.Namespace) -> list[Union[str, Table]]:
    """The whole trace as a list of lines and Tables, in print order (``render`` joins them).

    ``args`` needs sentence, seed, heads, d_model, causal and digits (what ``build_parser`` gives).
    Bad settings raise the library's own error. The web page (``mha_lists.tools.site``) draws
    the same items, so its numbers are the CLI's.
    """
    check_options("trace_items", "args", args)
    ex = running_example(sentence=args.sentence, d_model=args.d_model, num_heads=args.heads, seed=args.seed)
    T, d_model, h = len(ex.tokens), args.d_model, args.heads
    d_k = d_model // h
    mask = causal_mask(T) if args.causal else None
    trace = attention_trace(ex.x, ex.weights, mask=mask)
    dims = [f"d{j}" for j in range(d_model)]
    kdims = [f"d{j}" for j in range(d_k)]
    sizes = f"seq_len = {T}, d_model = {d_model}, num_heads = {h}, d_k = d_v = {d_model} / {h} = {d_k},"
    settings = f"seed = {args.seed}, mask = {'causal' if args.causal else 'none'}"
    items: list[Union[str, Table]] = [
        "Multi-head attention, traced by hand",
        f"sentence: {' '.join(ex.tokens)}",
        f"token ids: {' '.join(str(i) for i in ex.ids)}",
        f"{sizes} {settings}",
        _section("Step 1. Embeddings: X = token embedding + position embedding"),
        Table("X", ex.x, ex.tokens, dims),
    ]
    for head in range(h):
        items.append(_section(f"Head {head}"))
        if getattr(args, "weights", False):
            items.append(f"Weights of head {head}: W_Q, W_K, W_V, each (d_model, d_k) = ({d_model}, {d_k})")
            for name, W in (("W_Q", ex.weights.W_Q[head]), ("W_K", ex.weights.W_K[head]), ("W_V", ex.weights.W_V[head])):
                items.append(Table(f"{name}, head {head}", W, dims, kdims))
            items.append("")
        items.append("Step 2. Projections: Q = X W_Q, K = X W_K, V = X W_V")
        for name, M in (("Q", trace.Q[head]), ("K", trace.K[head]), ("V", trace.V[head])):
            items.append(Table(f"{name}, head {head}", M, ex.tokens, kdims))
        items.append(f"\nStep 3. Scores: Q K^T / sqrt({d_k}){' (masked: -inf)' if args.causal else ''}")
        items.append(Table(f"scores, head {head}", trace.scores[head], ex.tokens, ex.tokens))
        items.append("\nStep 4. Attention weights: softmax of each row (each row sums to 1)")
        items.append(Table(f"weights, head {head}", trace.attention[head], ex.tokens, ex.tokens, kind="weights"))
        items.append("\nStep 5. Head output: weights V")
        items.append(Table(f"output, head {head}", trace.head_outputs[head], ex.tokens, kdims))
    items.append(_section("Step 6. Concatenate the heads: [head 0 | head 1 | ...]"))
    items.append(Table("concat", trace.concat, ex.tokens, dims))
    items.append(_section("Step 7. Output projection: output = concat W_O"))
    items.append(Table("W_O", ex.weights.W_O, [f"c{j}" for j in range(h * d_k)], dims))
    items.append("")
    items.append(Table("output", trace.output, ex.tokens, dims))
    # For the projector: when every table fits 80 columns, the one long line of sizes and
    # settings is split in two, so nothing is wider than 80. (Wider tables keep it whole.)
    header = items.index(f"{sizes} {settings}")
    widest = max(len(line) for item in items if isinstance(item, Table)
                 for line in format_table(item, args.digits).split("\n"))
    if len(items[header]) > WIDTH and widest <= WIDTH:
        items[header:header + 1] = [sizes, settings]
    return items


def format_table(table: Table, digits: int = 4) -> str:
    """One Table as ``format_matrix`` prints it: title with shape, labels, fixed-point entries."""
    if not isinstance(table, Table):
        raise TypeError(f"format_table: table must be a Table (from trace_items), got {type(table).__name__}")
    check_positive_int("format_table", "digits", digits, most=12)
    return format_matrix(table.matrix, row_labels=table.row_labels, col_labels=table.col_labels,
                         digits=digits, title=table.title)


def render(args: argparse.Namespace) -> str:
    """The whole trace as one string (what main prints); bad settings raise the library's own error."""
    check_options("render", "args", args)
    lines = [item if isinstance(item, str) else format_table(item, args.digits) for item in trace_items(args)]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if len(args.sentence.split()) > MAX_TOKENS:
        parser.error(f"argument --sentence: {len(args.sentence.split())} tokens; at most {MAX_TOKENS}")
    if args.d_model % args.heads:  # here, in the options' own names
        divisors = ", ".join(str(h) for h in range(1, args.d_model + 1) if args.d_model % h == 0)
        parser.error(f"argument --heads: --d-model {args.d_model} is not divisible by --heads {args.heads}, and each head "
                     f"gets d_model / heads numbers; with --d-model {args.d_model}, --heads can be {divisors}")
    try:
        text = render(args)
    except (ValueError, TypeError) as error:  # the library's own message: it names the rule
        parser.error(str(error))
    sys.stdout.write(text)
    return 0
