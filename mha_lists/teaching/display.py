"""Showing matrices to people: labelled text tables, HTML heatmaps and bar charts.

Everything here returns or prints strings at a fixed number of digits, so a
notebook's stored output is the same on every machine. The HTML objects are
plain HTML/CSS (no plotting library); outside Jupyter they print as text.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Optional

from ..core.checks import ShapeError, check_int, check_rows, check_str, checked, is_number, kind

__all__ = ["format_number", "format_matrix", "print_matrix", "heatmap", "attention_heatmap", "bar_chart",
           "show"]


# === What the display functions take (kinds of argument for @checked) ===


@kind("display digits")
def _check_digits(func: str, name: str, digits: object, expected: tuple = ()) -> int:
    """Digits after the point: an int from 0 to 17."""
    if not 0 <= check_int(func, name, digits) <= 17:
        raise ValueError(f"{func}: {name} is {digits}; give 0 to 17 digits after the point")
    return digits


def _an_int_to_print(func: str, name: str, x: object) -> None:
    """An int entry is printed in full: at most 100 digits, as check_int allows (Python won't print 4,300)."""
    if type(x) is int:
        check_int(func, name, x)


@kind("display entry")
def _check_entry(func: str, name: str, x: object, expected: tuple = ()) -> object:
    """One entry to show: a number (inf and nan too) or True/False."""
    if not (is_number(x) or isinstance(x, bool)):
        raise TypeError(f"{func}: {name} must be a number, got {x!r} ({type(x).__name__})")
    _an_int_to_print(func, name, x)
    return x


@kind("display matrix", ("rows", "columns"))
def _check_shown(func: str, name: str, M: object, expected: tuple = ()) -> tuple[int, int]:
    """A matrix to show: a non-empty rectangular list of rows of numbers, or of True/False (a mask)."""
    shape = check_rows(func, name, M)
    for i, row in enumerate(M):
        for j, x in enumerate(row):
            if not (is_number(x) or isinstance(x, bool)):
                raise TypeError(f"{func}: {name}[{i}][{j}] is {x!r}; entries must be numbers (or True/False)")
            _an_int_to_print(func, f"{name}[{i}][{j}]", x)
    return shape


@kind("display labels", ("labels",))
def _check_labels(func: str, name: str, labels: object, expected: tuple = ()) -> int:
    """Labels of rows or columns: a list or tuple (each is shown with str()); return how many."""
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of labels, got {type(labels).__name__}")
    return len(labels)


@kind("display tokens", ("labels",))
def _check_tokens(func: str, name: str, tokens: object, expected: tuple = ()) -> int:
    """The query tokens of an attention heatmap: a list or tuple of labels; return how many."""
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of labels, one per query, got {tokens!r}")
    return len(tokens)


_LABELS_FIT = {"row_labels": "M has {expected} rows but {value} row labels were given",
               "col_labels": "M has {expected} columns but {value} column labels were given"}
_TABLE = dict(M="display matrix n m", digits="display digits", row_labels="optional display labels n",
              col_labels="optional display labels m", title="optional str", why=_LABELS_FIT)


# === Text ===


@checked(digits="display digits", x="display entry")
def format_number(x: float, digits: int = 4) -> str:
    """Fixed-point text for one entry: ``format_number(-0.00001)`` is ``'0.0000'``, not ``'-0.0000'``.

    -inf (a masked score) prints as ``-inf``; True/False (a mask) as ``1``/``0``.

    >>> format_number(1 / 3), format_number(float("-inf")), format_number(True)
    ('0.3333', '-inf', '1')
    """
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        return str(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = f"{x:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text


MAX_BAR_WIDTH = 200  # characters of the longest text bar


def _labels(M, row_labels, col_labels) -> tuple[list[str], list[str]]:
    """Row labels (default 0, 1, ...) and column labels (default d0, d1, ...) as text."""
    rows = [str(i) for i in range(len(M))] if row_labels is None else [str(r) for r in row_labels]
    cols = [f"d{j}" for j in range(len(M[0]))] if col_labels is None else [str(c) for c in col_labels]
    return rows, cols


@checked(**_TABLE)
def format_matrix(
    M: Sequence[Sequence[float]],
    *,
    row_labels: Optional[Sequence[str]] = None,
    col_labels: Optional[Sequence[str]] = None,
    digits: int = 4,
    title: Optional[str] = None,
) -> str:
    """A labelled, fixed-precision text table of M, with its shape in the title line.

    Row labels default to 0, 1, ... and column labels to d0, d1, ...

    >>> print(format_matrix([[1.0, 0.5], [0.25, 0.0]], row_labels=["a", "b"], digits=2, title="W"))
    W (2x2)
         d0    d1
    a  1.00  0.50
    b  0.25  0.00
    """
    n, m = len(M), len(M[0])
    rows, cols = _labels(M, row_labels, col_labels)
    text = [[format_number(x, digits) for x in row] for row in M]
    label_width = max(len(r) for r in rows)
    widths = [max(len(cols[j]), *(len(text[i][j]) for i in range(n))) for j in range(m)]
    lines = [] if title is None else [f"{title} ({n}x{m})"]
    lines.append(" " * label_width + "".join("  " + c.rjust(w) for c, w in zip(cols, widths)))
    for label, row in zip(rows, text):
        lines.append(label.ljust(label_width) + "".join("  " + t.rjust(w) for t, w in zip(row, widths)))
    return "\n".join(line.rstrip() for line in lines)


def _print_options(func: str, arguments: dict, sizes: dict) -> None:
    """print_matrix's options are format_matrix's keywords, checked as format_matrix checks them."""
    options = arguments["options"]
    unknown = sorted(set(options) - {"row_labels", "col_labels", "digits", "title"})
    if unknown:
        raise TypeError(f"{func}: unknown option {unknown[0]!r}; the options are row_labels, col_labels, "
                        "digits and title")
    if "digits" in options:
        _check_digits(func, "digits", options["digits"])
    for name, n in (("row_labels", sizes["n"]), ("col_labels", sizes["m"])):
        if options.get(name) is not None and _check_labels(func, name, options[name]) != n:
            raise ShapeError(f"{func}: " + _LABELS_FIT[name].format(expected=n, value=len(options[name])))
    if options.get("title") is not None:
        check_str(func, "title", options["title"])


@checked(M="display matrix n m", also=_print_options)
def print_matrix(M: Sequence[Sequence[float]], **options) -> None:
    """Print ``format_matrix(M, **options)``: row_labels, col_labels, digits, title."""
    print(format_matrix(M, **options))


def _cell_colour(t: float) -> tuple[str, str]:
    """Background and text colour for a value scaled to t in [0, 1]: white to deep blue."""
    t = min(max(t, 0.0), 1.0)
    red, green = round(255 - 222 * t), round(255 - 153 * t)
    return f"rgb({red},{green},255)" if t < 0.999 else "rgb(33,102,255)", "#fff" if t > 0.55 else "#000"


def _colour_range(func: str, arguments: dict, sizes: dict) -> None:
    vmin, vmax = arguments["vmin"], arguments["vmax"]
    if vmin is not None and vmax is not None and vmin >= vmax:
        raise ValueError(f"{func}: vmin is {vmin} and vmax is {vmax}; vmin must be below vmax")


_HEATMAP = dict(_TABLE, vmin="optional number", vmax="optional number", also=_colour_range)


class Heatmap:
    """A matrix drawn as an HTML table whose cell colour follows the value.

    Jupyter calls ``_repr_html_``; a terminal shows the text table instead.
    """

    @checked(**_HEATMAP, note="optional str", called="Heatmap")
    def __init__(self, M, *, row_labels=None, col_labels=None, digits=2, title=None, vmin=None, vmax=None, note=None):
        self.n, self.m = len(M), len(M[0])
        self.rows, self.cols = _labels(M, row_labels, col_labels)
        self.M = [list(row) for row in M]
        self.digits, self.title, self.note = digits, title, note
        # The colours are worked out in floats: an int past float64's range stops here (OverflowError),
        # and the door reports it as too large.
        finite = [x for row in self.M for x in row if not isinstance(x, bool) and math.isfinite(x)]
        self.vmin = (min(finite) if finite else 0.0) if vmin is None else vmin
        self.vmax = (max(finite) if finite else 1.0) if vmax is None else vmax

    def __repr__(self) -> str:
        table = format_matrix(self.M, row_labels=self.rows, col_labels=self.cols, digits=self.digits, title=self.title)
        return table if self.note is None else f"{self.note}\n{table}"

    def _repr_html_(self) -> str:
        # Halves: halving is exact (short of subnormals), so the fractions are the same, and a range as
        # wide as float64's (1e308 - -1e308) stays finite.
        half_span = (self.vmax / 2 - self.vmin / 2) or 1.0
        cell = "padding:4px 8px;text-align:center;font-family:monospace;border:1px solid #ddd;"
        head = "padding:4px 8px;font-family:monospace;"
        out = ['<table style="border-collapse:collapse;margin:4px 0;">']
        if self.title is not None or self.note is not None:
            title = "" if self.title is None else f"{html.escape(self.title)} ({self.n}x{self.m})"
            note = "" if self.note is None else f'<div style="font-weight:normal;font-size:90%;">{html.escape(self.note)}</div>'
            out.append(f'<caption style="caption-side:top;text-align:left;font-weight:bold;">{title}{note}</caption>')
        out.append("<tr><th></th>" + "".join(
            f'<th style="{head}">{html.escape(c)}</th>' for c in self.cols) + "</tr>")
        for label, row in zip(self.rows, self.M):
            tds = []
            for x in row:
                t = 0.0 if not math.isfinite(x) else (x / 2 - self.vmin / 2) / half_span
                bg, fg = _cell_colour(t)
                tds.append(f'<td style="{cell}background:{bg};color:{fg};">{format_number(x, self.digits)}</td>')
            out.append(f'<tr><th style="{head}text-align:right;">{html.escape(label)}</th>{"".join(tds)}</tr>')
        out.append("</table>")
        return "\n".join(out)


@checked(**_HEATMAP)
def heatmap(M, *, row_labels=None, col_labels=None, digits: int = 2, title=None, vmin=None, vmax=None) -> Heatmap:
    """Any matrix as a heatmap; colours span vmin..vmax (default: the smallest and largest finite value)."""
    return Heatmap(M, row_labels=row_labels, col_labels=col_labels, digits=digits, title=title, vmin=vmin, vmax=vmax)


def _keys_fit(func: str, arguments: dict, sizes: dict) -> None:
    """Without key_tokens the tokens label the keys too: one per column of weights."""
    if arguments["key_tokens"] is None and sizes["n"] != sizes["m"]:
        raise ShapeError(f"{func}: weights has {sizes['m']} columns but {sizes['n']} tokens were given; "
                         "give key_tokens, one per column")


@checked(weights="display matrix n m", tokens="display tokens n", key_tokens="optional display labels m",
         digits="display digits", title="optional str", also=_keys_fit,
         why={"tokens": "weights has {expected} rows but {value} tokens were given",
              "key_tokens": "weights has {expected} columns but {value} key tokens were given"})
def attention_heatmap(weights, tokens, key_tokens=None, *, digits: int = 2, title: Optional[str] = None) -> Heatmap:
    """Attention weights (queries x keys) as a heatmap on a fixed 0..1 colour scale.

    ``tokens`` label the query rows; ``key_tokens`` the key columns (default:
    the same tokens, as in self-attention). The caption says which is which.

    >>> attention_heatmap([[1.0, 0.0], [0.5, 0.5]], ["a", "b"], title="head 0")
    rows = queries (who looks), columns = keys (what is looked at)
    head 0 (2x2)
          a     b
    a  1.00  0.00
    b  0.50  0.50
    """
    keys = tokens if key_tokens is None else key_tokens
    return Heatmap(weights, row_labels=tokens, col_labels=keys, digits=digits, title=title, vmin=0.0, vmax=1.0,
                   note="rows = queries (who looks), columns = keys (what is looked at)")


def _bars_fit(func: str, arguments: dict, sizes: dict) -> None:
    """One label per value, no negative value (a bar has a length), and a text bar that fits a line."""
    labels, values, width = arguments["labels"], arguments["values"], arguments.get("width", 40)
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: labels must be a list, got {type(labels).__name__}")
    if len(labels) != len(values) or not labels:
        raise ShapeError(f"{func}: {len(labels)} labels for {len(values)} values; give one label per value")
    if min(values) < 0:
        raise ValueError(f"{func}: values must not be negative")
    if not 1 <= width <= MAX_BAR_WIDTH:
        raise ValueError(f"{func}: width is {width}; give 1 to {MAX_BAR_WIDTH} characters")


_BARS = dict(digits="display digits", values="finite vector n", title="optional str")


class BarChart:
    """Labelled horizontal bars in HTML; ``#`` bars as text outside Jupyter."""

    @checked(**_BARS, width="int", also=_bars_fit, called="BarChart")
    def __init__(self, labels, values, *, digits=3, title=None, width=40):
        self.labels, self.values = [str(s) for s in labels], list(values)
        self.digits, self.title, self.width = digits, title, width
        self.top = max(self.values) or 1.0

    def _value_texts(self) -> list[str]:
        return [f"{v:,.{self.digits}f}" for v in self.values]

    def __repr__(self) -> str:
        label_width = max(len(s) for s in self.labels)
        texts = self._value_texts()
        value_width = max(len(t) for t in texts)
        lines = [] if self.title is None else [self.title]
        for label, text, v in zip(self.labels, texts, self.values):
            bar = "#" * round(self.width * (v / self.top))  # v / top first: at most 1, even for v near 1e308
            lines.append(f"{label.ljust(label_width)}  {text.rjust(value_width)}  {bar}".rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        out = ['<div style="font-family:monospace;margin:4px 0;">']
        if self.title is not None:
            out.append(f"<div style=\"font-weight:bold;\">{html.escape(self.title)}</div>")
        for label, text, v in zip(self.labels, self._value_texts(), self.values):
            pct = f"{100 * (v / self.top):.1f}"
            out.append(
                '<div style="display:flex;align-items:center;gap:8px;">'
                f'<span style="width:14em;text-align:right;">{html.escape(label)}</span>'
                f'<span style="display:inline-block;height:1em;width:{pct}%;max-width:30em;'
                f'background:rgb(33,102,255);"></span><span>{text}</span></div>'
            )
        out.append("</div>")
        return "\n".join(out)


@checked(**_BARS, also=_bars_fit)
def bar_chart(labels: Sequence[str], values: Sequence[float], *, digits: int = 3, title: Optional[str] = None) -> BarChart:
    """A bar per (label, value), longest bar for the largest value; values must be >= 0.

    Values print with thousands separators and ``digits`` after the point.

    >>> bar_chart(["Q", "scores"], [1280, 400], digits=0)
    Q       1,280  ########################################
    scores    400  ############
    """
    return BarChart(labels, values, digits=digits, title=title)


def show(obj) -> None:
    """Display a Heatmap or BarChart: as HTML in Jupyter, as text anywhere else."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(repr(obj))
        return
    if get_ipython() is None:
        print(repr(obj))
    else:
        display(obj)
