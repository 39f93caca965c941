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

from ..core.checks import check_type, ShapeError, check_int, check_number, check_rows, check_vector, is_number, \
    shorten

__all__ = ["format_number", "format_matrix", "print_matrix", "heatmap", "attention_heatmap", "bar_chart",
           "show"]


# === What the display functions take ===


def check_digits(func: str, digits: object) -> int:
    """Digits after the point: an int from 0 to 17."""
    if not 0 <= check_int(func, "digits", digits) <= 17:
        raise ValueError(f"{func}: digits is {digits}; give 0 to 17 digits after the point")
    return digits


def check_entry(func: str, name: str, x: object) -> object:
    """One entry to show: a number (inf and nan too) or True/False; an int of at most 100 digits."""
    if not (is_number(x) or isinstance(x, bool)):
        raise TypeError(f"{func}: {name} must be a number, got {shorten(x)} ({type(x).__name__})")
    if type(x) is int:  # printed in full: at most 100 digits (Python won't print 4,300)
        check_int(func, name, x)
    return x


def check_shown(func: str, name: str, M: object) -> tuple[int, int]:
    """A matrix to show: a non-empty rectangular list of rows of numbers, or of True/False (a mask)."""
    shape = check_rows(func, name, M)
    for i, row in enumerate(M):
        for j, x in enumerate(row):
            if not (is_number(x) or isinstance(x, bool)):
                raise TypeError(f"{func}: {name}[{i}][{j}] is {shorten(x)}; entries must be numbers (or True/False)")
            check_entry(func, f"{name}[{i}][{j}]", x)
    return shape


def check_labels(func: str, name: str, labels: object, count: int, what: str) -> None:
    """Labels of rows or columns, one per ``what`` (each is shown with str()), or None."""
    if labels is None:
        return
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of labels, got {shorten(labels)}")
    if len(labels) != count:
        raise ShapeError(f"{func}: {what} but {len(labels)} {name.replace('_', ' ')} were given")


def check_table(func: str, M: object, row_labels: object, col_labels: object, digits: object,
                title: object) -> tuple[int, int]:
    """What format_matrix takes, and print_matrix and the heatmaps too; return M's shape."""
    n, m = check_shown(func, "M", M)
    check_labels(func, "row_labels", row_labels, n, f"M has {n} rows")
    check_labels(func, "col_labels", col_labels, m, f"M has {m} columns")
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")
    return n, m


# === Text ===


def format_number(x: float, digits: int = 4) -> str:
    """Fixed-point text for one entry: ``format_number(-0.00001)`` is ``'0.0000'``, not ``'-0.0000'``.

    -inf (a masked score) prints as ``-inf``; True/False (a mask) as ``1``/``0``.

    >>> format_number(1 / 3), format_number(float("-inf")), format_number(True)
    ('0.3333', '-inf', '1')
    """
    check_entry("format_number", "x", x)
    check_digits("format_number", digits)
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
    n, m = check_table("format_matrix", M, row_labels, col_labels, digits, title)
    rows, cols = _labels(M, row_labels, col_labels)
    text = [[format_number(x, digits) for x in row] for row in M]
    label_width = max(len(r) for r in rows)
    widths = [max(len(cols[j]), *(len(text[i][j]) for i in range(n))) for j in range(m)]
    lines = [] if title is None else [f"{title} ({n}x{m})"]
    lines.append(" " * label_width + "".join("  " + c.rjust(w) for c, w in zip(cols, widths)))
    for label, row in zip(rows, text):
        lines.append(label.ljust(label_width) + "".join("  " + t.rjust(w) for t, w in zip(row, widths)))
    return "\n".join(line.rstrip() for line in lines)


def print_matrix(M: Sequence[Sequence[float]], **options) -> None:  # (n, m)
    """Print ``format_matrix(M, **options)``: row_labels, col_labels, digits, title."""
    unknown = sorted(set(options) - {"row_labels", "col_labels", "digits", "title"})
    if unknown:
        raise TypeError(f"print_matrix: unknown option {shorten(unknown[0])}; the options are row_labels, "
                        "col_labels, digits and title")
    check_table("print_matrix", M, options.get("row_labels"), options.get("col_labels"), options.get("digits", 4),
                options.get("title"))
    print(format_matrix(M, **options))


def _cell_colour(t: float) -> tuple[str, str]:
    """Background and text colour for a value scaled to t in [0, 1]: white to deep blue."""
    t = min(max(t, 0.0), 1.0)
    red, green = round(255 - 222 * t), round(255 - 153 * t)
    return f"rgb({red},{green},255)" if t < 0.999 else "rgb(33,102,255)", "#fff" if t > 0.55 else "#000"


def check_colour_range(func: str, vmin: object, vmax: object) -> None:
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if value is not None:
            check_number(func, name, value)
    if vmin is not None and vmax is not None and vmin >= vmax:
        raise ValueError(f"{func}: vmin is {vmin} and vmax is {vmax}; vmin must be below vmax")


class Heatmap:
    """A matrix drawn as an HTML table whose cell colour follows the value.

    Jupyter calls ``_repr_html_``; a terminal shows the text table instead.
    """

    def __init__(self, M, *, row_labels=None, col_labels=None, digits=2, title=None, vmin=None, vmax=None, note=None):
        self.n, self.m = check_table("Heatmap", M, row_labels, col_labels, digits, title)
        check_colour_range("Heatmap", vmin, vmax)
        if note is not None:
            check_type("Heatmap", "note", note, str, "a str")
        self.rows, self.cols = _labels(M, row_labels, col_labels)
        self.M = [list(row) for row in M]
        self.digits, self.title, self.note = digits, title, note
        # The colours are worked out in floats (an int entry has at most 100 digits: a float).
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


def heatmap(M, *, row_labels=None, col_labels=None, digits: int = 2, title=None, vmin=None, vmax=None) -> Heatmap:
    """Any matrix as a heatmap; colours span vmin..vmax (default: the smallest and largest finite value)."""
    check_table("heatmap", M, row_labels, col_labels, digits, title)
    check_colour_range("heatmap", vmin, vmax)
    return Heatmap(M, row_labels=row_labels, col_labels=col_labels, digits=digits, title=title, vmin=vmin, vmax=vmax)


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
    func = "attention_heatmap"
    n, m = check_shown(func, "weights", weights)
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"{func}: tokens must be a list of labels, one per query, got {shorten(tokens)}")
    check_labels(func, "tokens", tokens, n, f"weights has {n} rows")
    check_labels(func, "key_tokens", key_tokens, m, f"weights has {m} columns")
    if key_tokens is None and n != m:
        raise ShapeError(f"{func}: weights has {m} columns but {n} tokens were given; give key_tokens, one per column")
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")
    keys = tokens if key_tokens is None else key_tokens
    return Heatmap(weights, row_labels=tokens, col_labels=keys, digits=digits, title=title, vmin=0.0, vmax=1.0,
                   note="rows = queries (who looks), columns = keys (what is looked at)")


def check_bars(func: str, labels: object, values: object, digits: object, title: object, width: object) -> None:
    """One label per value, no negative value (a bar has a length), and a text bar that fits a line."""
    n = check_vector(func, "values", values)
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: labels must be a list, got {shorten(labels)}")
    if len(labels) != n:
        raise ShapeError(f"{func}: {len(labels)} labels for {n} values; give one label per value")
    if min(values) < 0:
        raise ValueError(f"{func}: values must not be negative, got {shorten(min(values))}")
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")
    if not 1 <= check_int(func, "width", width) <= MAX_BAR_WIDTH:
        raise ValueError(f"{func}: width is {width}; give 1 to {MAX_BAR_WIDTH} characters")


class BarChart:
    """Labelled horizontal bars in HTML; ``#`` bars as text outside Jupyter."""

    def __init__(self, labels, values, *, digits=3, title=None, width=40):
        check_bars("BarChart", labels, values, digits, title, width)
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


def bar_chart(labels: Sequence[str], values: Sequence[float], *, digits: int = 3, title: Optional[str] = None) -> BarChart:
    """A bar per (label, value), longest bar for the largest value; values must be >= 0.

    Values print with thousands separators and ``digits`` after the point.

    >>> bar_chart(["Q", "scores"], [1280, 400], digits=0)
    Q       1,280  ########################################
    scores    400  ############
    """
    check_bars("bar_chart", labels, values, digits, title, 40)
    return BarChart(labels, values, digits=digits, title=title)


def show(obj) -> None:
    """Display a picture, a Heatmap or a BarChart: as HTML or SVG in Jupyter, as text anywhere else."""
    if not any(hasattr(obj, name) for name in ("_repr_html_", "_repr_svg_")):
        raise TypeError(f"show: obj must be a picture, a Heatmap or a BarChart (something Jupyter can draw), "
                        f"got {shorten(obj)} ({type(obj).__name__})")
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
