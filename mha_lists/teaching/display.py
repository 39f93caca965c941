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

from ..core.checks import (ShapeError, check_int, check_number, check_rows, check_vector, is_number, too_large)

__all__ = ["format_number", "format_matrix", "print_matrix", "heatmap", "attention_heatmap", "bar_chart",
           "show"]


def format_number(x: float, digits: int = 4) -> str:
    """Fixed-point text for one entry: ``format_number(-0.00001)`` is ``'0.0000'``, not ``'-0.0000'``.

    -inf (a masked score) prints as ``-inf``; True/False (a mask) as ``1``/``0``.

    >>> format_number(1 / 3), format_number(float("-inf")), format_number(True)
    ('0.3333', '-inf', '1')
    """
    _check_digits("format_number", digits)
    if isinstance(x, bool):
        return "1" if x else "0"
    if not is_number(x):
        raise TypeError(f"format_number: x must be a number, got {x!r} ({type(x).__name__})")
    if isinstance(x, int):
        return str(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = f"{x:.{digits}f}"
    if text.startswith("-") and float(text) == 0:
        text = text[1:]
    return text


MAX_BAR_WIDTH = 200  # characters of the longest text bar


def _check_digits(func: str, digits: object) -> int:
    if not 0 <= check_int(func, "digits", digits) <= 17:
        raise ValueError(f"{func}: digits is {digits}; give 0 to 17 digits after the point")
    return digits


def _table_cells(M, row_labels, col_labels, func, digits):
    """Check a matrix to show (numbers, or True/False for a mask) and its labels; return them."""
    n, m = check_rows(func, "M", M)
    for i, row in enumerate(M):
        for j, x in enumerate(row):
            if not (is_number(x) or isinstance(x, bool)):
                raise TypeError(f"{func}: M[{i}][{j}] is {x!r}; entries must be numbers (or True/False)")
    _check_digits(func, digits)
    for name, labels in (("row_labels", row_labels), ("col_labels", col_labels)):
        if labels is not None and not isinstance(labels, (list, tuple)):
            raise TypeError(f"{func}: {name} must be a list of labels, got {type(labels).__name__}")
    rows = [str(i) for i in range(n)] if row_labels is None else [str(r) for r in row_labels]
    cols = [f"d{j}" for j in range(m)] if col_labels is None else [str(c) for c in col_labels]
    if len(rows) != n:
        raise ShapeError(f"{func}: M has {n} rows but {len(rows)} row labels were given")
    if len(cols) != m:
        raise ShapeError(f"{func}: M has {m} columns but {len(cols)} column labels were given")
    return n, m, rows, cols


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
    return _format_matrix("format_matrix", M, row_labels, col_labels, digits, title)


def _format_matrix(func, M, row_labels=None, col_labels=None, digits=4, title=None) -> str:
    n, m, rows, cols = _table_cells(M, row_labels, col_labels, func, digits)
    text = [[format_number(x, digits) for x in row] for row in M]
    label_width = max(len(r) for r in rows)
    widths = [max(len(cols[j]), *(len(text[i][j]) for i in range(n))) for j in range(m)]
    lines = [] if title is None else [f"{title} ({n}x{m})"]
    lines.append(" " * label_width + "".join("  " + c.rjust(w) for c, w in zip(cols, widths)))
    for label, row in zip(rows, text):
        lines.append(label.ljust(label_width) + "".join("  " + t.rjust(w) for t, w in zip(row, widths)))
    return "\n".join(line.rstrip() for line in lines)


def print_matrix(M: Sequence[Sequence[float]], **options) -> None:
    """Print ``format_matrix(M, **options)``: row_labels, col_labels, digits, title."""
    unknown = sorted(set(options) - {"row_labels", "col_labels", "digits", "title"})
    if unknown:
        raise TypeError(f"print_matrix: unknown option {unknown[0]!r}; the options are row_labels, col_labels, "
                        "digits and title")
    print(_format_matrix("print_matrix", M, **options))


def _cell_colour(t: float) -> tuple[str, str]:
    """Background and text colour for a value scaled to t in [0, 1]: white to deep blue."""
    t = min(max(t, 0.0), 1.0)
    red, green = round(255 - 222 * t), round(255 - 153 * t)
    return f"rgb({red},{green},255)" if t < 0.999 else "rgb(33,102,255)", "#fff" if t > 0.55 else "#000"


class Heatmap:
    """A matrix drawn as an HTML table whose cell colour follows the value.

    Jupyter calls ``_repr_html_``; a terminal shows the text table instead.
    """

    def __init__(self, M, *, row_labels=None, col_labels=None, digits=2, title=None, vmin=None, vmax=None,
                 func="Heatmap", note=None):
        self.n, self.m, self.rows, self.cols = _table_cells(M, row_labels, col_labels, func, digits)
        for name, value in (("vmin", vmin), ("vmax", vmax)):
            if value is not None:
                check_number(func, name, value)
        if vmin is not None and vmax is not None and vmin >= vmax:
            raise ValueError(f"{func}: vmin is {vmin} and vmax is {vmax}; vmin must be below vmax")
        try:  # the colours are computed in floats
            _ = [float(x) for row in M for x in row]
        except OverflowError:  # an int past float64's largest
            raise too_large(func) from None
        self.M = [list(row) for row in M]
        self.digits, self.title, self.note = digits, title, note
        finite = [x for row in self.M for x in row if not isinstance(x, bool) and math.isfinite(x)]
        self.vmin = (min(finite) if finite else 0.0) if vmin is None else vmin
        self.vmax = (max(finite) if finite else 1.0) if vmax is None else vmax

    def __repr__(self) -> str:
        table = format_matrix(self.M, row_labels=self.rows, col_labels=self.cols, digits=self.digits, title=self.title)
        return table if self.note is None else f"{self.note}\n{table}"

    def _repr_html_(self) -> str:
        span = (self.vmax - self.vmin) or 1.0
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
                t = 0.0 if not math.isfinite(x) else (x - self.vmin) / span
                bg, fg = _cell_colour(t)
                tds.append(f'<td style="{cell}background:{bg};color:{fg};">{format_number(x, self.digits)}</td>')
            out.append(f'<tr><th style="{head}text-align:right;">{html.escape(label)}</th>{"".join(tds)}</tr>')
        out.append("</table>")
        return "\n".join(out)


def heatmap(M, *, row_labels=None, col_labels=None, digits: int = 2, title=None, vmin=None, vmax=None) -> Heatmap:
    """Any matrix as a heatmap; colours span vmin..vmax (default: the smallest and largest finite value)."""
    return Heatmap(M, row_labels=row_labels, col_labels=col_labels, digits=digits, title=title, vmin=vmin, vmax=vmax,
                   func="heatmap")


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
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"attention_heatmap: tokens must be a list of labels, one per query, got {tokens!r}")
    keys = tokens if key_tokens is None else key_tokens
    return Heatmap(weights, row_labels=tokens, col_labels=keys, digits=digits, title=title, vmin=0.0, vmax=1.0,
                   func="attention_heatmap", note="rows = queries (who looks), columns = keys (what is looked at)")


class BarChart:
    """Labelled horizontal bars in HTML; ``#`` bars as text outside Jupyter."""

    def __init__(self, labels, values, *, digits=3, title=None, width=40, func="BarChart"):
        _check_digits(func, digits)
        check_vector(func, "values", values, finite=True)
        if not isinstance(labels, (list, tuple)):
            raise TypeError(f"{func}: labels must be a list, got {type(labels).__name__}")
        if len(labels) != len(values) or not labels:
            raise ShapeError(f"{func}: {len(labels)} labels for {len(values)} values; give one label per value")
        if min(values) < 0:
            raise ValueError(f"{func}: values must not be negative")
        if not 1 <= check_int(func, "width", width) <= MAX_BAR_WIDTH:
            raise ValueError(f"{func}: width is {width}; give 1 to {MAX_BAR_WIDTH} characters")
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
            bar = "#" * round(self.width * v / self.top)
            lines.append(f"{label.ljust(label_width)}  {text.rjust(value_width)}  {bar}".rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        out = ['<div style="font-family:monospace;margin:4px 0;">']
        if self.title is not None:
            out.append(f"<div style=\"font-weight:bold;\">{html.escape(self.title)}</div>")
        for label, text, v in zip(self.labels, self._value_texts(), self.values):
            pct = f"{100 * v / self.top:.1f}"
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
    return BarChart(labels, values, digits=digits, title=title, func="bar_chart")


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
