"""Showing matrices to people: labelled text tables, HTML heatmaps and bar charts.

Everything here returns or prints strings at a fixed number of digits, so a
notebook's stored output is the same on every machine. The HTML objects are
plain HTML/CSS (no plotting library); outside Jupyter they print as text.

``explained_scores``, ``explained_weights`` and ``explained_outputs`` compute one
head's scores, weights or outputs with the module's own arithmetic and show them
as a heatmap in which every number says how it was made: pointing at it shows
its products (or exponentials) and their sum in a tooltip, and ``.explain(i, j)``
returns the same text anywhere. How the tooltip reaches the learner: an HTML
``title`` on a focusable ``<a tabindex="0">`` in each cell, because JupyterLab and
JupyterLite sanitise an untrusted output (a notebook opened with its stored
outputs) and keep ``title`` everywhere and ``tabindex`` only on ``a``, ``button``
and form fields -- not on ``td``; they drop ``<style>`` and ``<script>``
(packages/apputils/src/sanitizer.ts). So no CSS :hover or :focus rule is relied
on. A browser shows a title on hover, not on keyboard focus, so a screen reader
reads it as the focused number's description, a small table also lists every
explanation in a ``<details>`` under it (it opens from the keyboard, with no
script), and ``.explain(i, j)`` returns it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Optional

from ..core.checks import check_type, ShapeError, check_int, check_number, check_rows, check_sizes, check_vector, \
    is_number, shorten
from ..core.matrix import Matrix
from ..core.softmax_and_masks import Mask, check_mask, check_scores, masked

__all__ = ["format_number", "format_matrix", "print_matrix", "heatmap", "attention_heatmap", "bar_chart",
           "panels", "show", "explained_scores", "explained_weights", "explained_outputs"]


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


MAX_SHOWN = 16_384  # entries of a table or a heatmap (128 x 128): past this it is a wall, and slow to draw


def check_shown(func: str, name: str, M: object) -> tuple[int, int]:
    """A matrix to show: a non-empty rectangular list of rows of numbers, or of True/False (a mask), of at
    most MAX_SHOWN entries."""
    shape = check_rows(func, name, M)
    if shape[0] * shape[1] > MAX_SHOWN:
        raise ValueError(f"{func}: {name} is {shape[0]} x {shape[1]}, {shape[0] * shape[1]:,} entries; a table shows at "
                         f"most {MAX_SHOWN:,}, so show a corner of it, such as [row[:16] for row in {name}[:16]]")
    for i, row in enumerate(M):
        for j, x in enumerate(row):
            if not (is_number(x) or isinstance(x, bool)):
                raise TypeError(f"{func}: {name}[{i}][{j}] is {shorten(x)}; entries must be numbers (or True/False)")
            check_entry(func, f"{name}[{i}][{j}]", x)
    return shape


def check_labels(func: str, name: str, labels: object, count: int, what: str) -> None:
    """Labels of rows or columns, one per ``what``, or None; each a text or a number."""
    if labels is None:
        return
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: {name} must be a list of labels, got {shorten(labels)}")
    if len(labels) != count:
        raise ShapeError(f"{func}: {what} but {len(labels)} {name.replace('_', ' ')} were given")
    check_each_label(func, name, labels)


def check_each_label(func: str, name: str, labels: Sequence) -> None:
    """Each label is shown with str(), so each is a text or a number (an int of at most 100 digits)."""
    for i, label in enumerate(labels):
        if isinstance(label, int) and not isinstance(label, bool):
            check_int(func, f"{name}[{i}]", label)  # str() of a 5,000-digit int fails
        elif not isinstance(label, (str, float)):
            raise TypeError(f"{func}: {name}[{i}] must be a str or a number, got {shorten(label)} "
                            f"({type(label).__name__})")


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
    """Background and text colour for a value scaled to t in [-1, 1]: deep red at -1, white at 0, deep blue
    at 1 (a table with no negative entry uses only the blue half)."""
    t = min(max(t, -1.0), 1.0)
    if t <= -0.999:
        background = "rgb(214,39,40)"
    elif t < 0:
        background = f"rgb({round(255 - 41 * -t)},{round(255 - 216 * -t)},{round(255 - 215 * -t)})"
    else:
        background = f"rgb({round(255 - 222 * t)},{round(255 - 153 * t)},255)" if t < 0.999 else "rgb(33,102,255)"
    return background, "#fff" if abs(t) > 0.55 else "#000"


def check_colour_range(func: str, vmin: object, vmax: object) -> None:
    for name, value in (("vmin", vmin), ("vmax", vmax)):
        if value is not None:
            check_number(func, name, value)
    if vmin is not None and vmax is not None and vmin >= vmax:
        raise ValueError(f"{func}: vmin is {vmin} and vmax is {vmax}; vmin must be below vmax")


# A table drawn wider than this gets a line under it saying it scrolls: about what fits beside the prompts of
# JupyterLab on a 1024-px screen (16 columns of 4 digits are about 1,300 px; 8 are about 700).
WIDE_PX = 900
SQUARE_PX = 18  # a cell of a heatmap drawn without its numbers: wide enough for a label like k15 in small type


class Heatmap:
    """A matrix drawn as an HTML table whose cell colour follows the value.

    Jupyter calls ``_repr_html_``; a terminal shows the text table instead. With ``numbers=False`` the
    HTML shows only the colours, in small squares, and each square's number when pointed at (its title):
    a picture of a large matrix rather than a wall of its numbers.
    """

    def __init__(self, M, *, row_labels=None, col_labels=None, digits=2, title=None, vmin=None, vmax=None, note=None,
                 numbers=True):
        self.n, self.m = check_table("Heatmap", M, row_labels, col_labels, digits, title)
        check_colour_range("Heatmap", vmin, vmax)
        if note is not None:
            check_type("Heatmap", "note", note, str, "a str")
        self.numbers = check_type("Heatmap", "numbers", numbers, bool, "True or False")
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
        """The table in a box of its own that scrolls sideways, and under it, when the table is wide, a line
        saying so."""
        out = ['<div style="overflow-x:auto;max-width:100%;">', self.table_html(), "</div>"]
        if self.width_px() > WIDE_PX:
            out.append(f'<div style="font-size:85%;color:#777;">{self.m} columns: on a narrow screen, scroll the '
                       "table sideways</div>")
        return "\n".join(out)

    def table_html(self) -> str:
        """The bare HTML table, for a page that puts it in a scrolling box of its own."""
        # A table with a negative entry is coloured around 0: red below, blue above, white at 0, on one scale
        # for both signs (the largest size either way). Otherwise white at vmin, blue at vmax. Halves: halving
        # is exact (short of subnormals), so the fractions are the same, and a range as wide as float64's
        # (1e308 - -1e308) stays finite.
        signed = self.vmin < 0
        half_span = (max(-self.vmin, self.vmax) / 2 if signed else self.vmax / 2 - self.vmin / 2) or 1.0
        low = 0.0 if signed else self.vmin
        # nowrap: a narrow screen scrolls the table rather than split a minus sign from its number
        cell = "padding:4px 8px;text-align:center;font-family:monospace;border:1px solid #ddd;white-space:nowrap;"
        head = "padding:4px 8px;font-family:monospace;white-space:nowrap;"
        if not self.numbers:  # colours only: squares of SQUARE_PX, labels in a smaller type
            cell = f"width:{SQUARE_PX}px;height:{SQUARE_PX}px;padding:0;border:1px solid #eee;"
            head = "padding:0 3px;font-family:monospace;font-size:75%;white-space:nowrap;"
        # Row labels stay in view while the table scrolls sideways: Jupyter keeps position:sticky in the output
        # of a cell the learner ran (its sanitiser drops it from outputs stored in a file, which still scroll).
        label = "position:sticky;left:0;background:var(--jp-layout-color0,#fff);text-align:right;"
        out = ['<table style="border-collapse:collapse;margin:4px 0;">']
        if self.title is not None or self.note is not None:
            title = "" if self.title is None else f"{html.escape(self.title)} ({self.n}x{self.m})"
            words = [self.note] if self.note is not None else []
            if signed:
                words.append("red: below 0, blue: above 0, white: 0")
            note = "" if not words else \
                f'<div style="font-weight:normal;font-size:90%;">{html.escape("; ".join(words))}</div>'
            out.append(f'<caption style="caption-side:top;text-align:left;font-weight:bold;">{title}{note}</caption>')
        out.append(f"<tr><th style=\"{label}\"></th>" + "".join(
            f'<th style="{head}">{html.escape(c)}</th>' for c in self.cols) + "</tr>")
        for i, (name, row) in enumerate(zip(self.rows, self.M)):
            tds = []
            for j, x in enumerate(row):
                t = 0.0 if not math.isfinite(x) else (x / 2 - low / 2) / half_span
                bg, fg = _cell_colour(t)
                if self.numbers:
                    tds.append(self._cell(i, j, format_number(x, self.digits), f"{cell}background:{bg};color:{fg};"))
                else:
                    title = html.escape(f"{self.rows[i]} · {self.cols[j]}: {format_number(x, self.digits)}", quote=True)
                    tds.append(f'<td style="{cell}background:{bg};" title="{title}"></td>')
            out.append(f'<tr><th style="{head}{label}">{html.escape(name)}</th>{"".join(tds)}</tr>')
        out.append("</table>")
        return "\n".join(out)

    def width_px(self) -> int:
        """About how wide the table is drawn, in pixels: 8 per monospace character and 17 of padding and
        border per column, the row labels' column included."""
        widths = [max(len(label) for label in self.rows)]
        if not self.numbers:  # a square, or its label in the smaller type (6 px a character) if that is wider
            return 8 * widths[0] + 17 + sum(max(SQUARE_PX, 6 * len(name) + 6) + 1 for name in self.cols)
        for j, name in enumerate(self.cols):
            widths.append(max([len(name)] + [len(format_number(row[j], self.digits)) for row in self.M]))
        return sum(8 * w + 17 for w in widths)

    def _cell(self, i: int, j: int, text: str, style: str) -> str:
        """The td of entry [i][j], shown as ``text``, in the given style."""
        return f'<td style="{style}">{text}</td>'


def heatmap(M, *, row_labels=None, col_labels=None, digits: int = 2, title=None, vmin=None, vmax=None,
            numbers: bool = True) -> Heatmap:
    """Any matrix as a heatmap; colours span vmin..vmax (default: the smallest and largest finite value).
    ``numbers=False``: colours only, each number shown when its square is pointed at."""
    check_table("heatmap", M, row_labels, col_labels, digits, title)
    check_colour_range("heatmap", vmin, vmax)
    check_type("heatmap", "numbers", numbers, bool, "True or False")
    return Heatmap(M, row_labels=row_labels, col_labels=col_labels, digits=digits, title=title, vmin=vmin, vmax=vmax,
                   numbers=numbers)


def attention_heatmap(weights, tokens, key_tokens=None, *, digits: int = 2, title: Optional[str] = None,
                      numbers: bool = True) -> Heatmap:
    """Attention weights (queries x keys) as a heatmap on a fixed 0..1 colour scale.

    ``tokens`` label the query rows; ``key_tokens`` the key columns (default:
    the same tokens, as in self-attention). The caption says which is which.
    ``numbers=False``: colours only, each weight shown when its square is pointed at.

    >>> attention_heatmap([[1.0, 0.0], [0.5, 0.5]], ["a", "b"], title="head 0")
    rows = queries (who looks), columns = keys (what is looked at)
    head 0 (2x2)
          a     b
    a  1.00  0.00
    b  0.50  0.50
    """
    func = "attention_heatmap"
    n, m = check_shown(func, "weights", weights)
    keys = check_tokens(func, tokens, key_tokens, "weights", f"weights has {m} columns", n, m, one_per="column")
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")
    check_type(func, "numbers", numbers, bool, "True or False")
    note = "rows = queries (who looks), columns = keys (what is looked at)"
    if not numbers:
        note += "; point at a square to see its weight"
    return Heatmap(weights, row_labels=tokens, col_labels=keys, digits=digits, title=title, vmin=0.0, vmax=1.0,
                   note=note, numbers=numbers)


def check_bars(func: str, labels: object, values: object, digits: object, title: object, width: object) -> None:
    """One label per value, no negative value (a bar has a length), and a text bar that fits a line."""
    n = check_vector(func, "values", values)
    if not isinstance(labels, (list, tuple)):
        raise TypeError(f"{func}: labels must be a list, got {shorten(labels)}")
    if len(labels) != n:
        raise ShapeError(f"{func}: {len(labels)} labels for {n} values; give one label per value")
    check_each_label(func, "labels", labels)
    if min(values) < 0:
        raise ValueError(f"{func}: values must not be negative, got {shorten(min(values))}")
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")
    if not 1 <= check_int(func, "width", width) <= MAX_BAR_WIDTH:
        raise ValueError(f"{func}: width is {width}; give 1 to {MAX_BAR_WIDTH} characters")


BAR_TRACK_EM = 24  # the longest bar's length in HTML, in em (the largest value's bar fills its track)


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
        # Each bar is a percentage of a track of fixed width (BAR_TRACK_EM), never of the page: its
        # length is then proportional to its value whatever the window's width.
        for label, text, v in zip(self.labels, self._value_texts(), self.values):
            pct = f"{100 * (v / self.top):.1f}"
            out.append(
                '<div style="display:flex;align-items:center;gap:8px;">'
                f'<span style="width:14em;flex:none;text-align:right;">{html.escape(label)}</span>'
                f'<span style="display:inline-block;flex:none;width:{BAR_TRACK_EM}em;height:1em;">'
                f'<span style="display:block;height:1em;width:{pct}%;background:rgb(33,102,255);"></span>'
                f'</span><span>{text}</span></div>'
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


MAX_PANELS = 16  # side by side: past this, no one compares them at a glance


class Panels:
    """Several heatmaps or charts side by side (small multiples), wrapping onto the next line on a narrow
    screen; a terminal shows each one's text in turn."""

    def __init__(self, items) -> None:
        self.items = list(items)

    def _repr_html_(self) -> str:
        boxes = "".join(f'<div style="margin:0 16px 8px 0;">{item._repr_html_()}</div>' for item in self.items)
        return f'<div style="display:flex;flex-wrap:wrap;align-items:flex-start;">{boxes}</div>'

    def __repr__(self) -> str:
        return "\n\n".join(repr(item) for item in self.items)


def panels(items) -> Panels:
    """Heatmaps or bar charts side by side, for comparing them at a glance (one panel per head). Pictures
    (SVG) draw their own panels: attention_lines puts each head in one.

    >>> panels([heatmap([[1.0]], title="a"), heatmap([[2.0]], title="b")])
    a (1x1)
         d0
    0  1.00
    <BLANKLINE>
    b (1x1)
         d0
    0  2.00
    """
    func = "panels"
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"{func}: items must be a list of heatmaps or bar charts, got a "
                        f"{type(items).__name__}")
    if not 1 <= len(items) <= MAX_PANELS:
        raise ValueError(f"{func}: items holds {len(items)}; give 1 to {MAX_PANELS} to put side by side")
    for k, item in enumerate(items):
        if not isinstance(item, (Heatmap, BarChart)):
            raise TypeError(f"{func}: items[{k}] must be a heatmap or a bar chart, got a "
                            f"{type(item).__name__}")
    return Panels(items)


def show(obj) -> None:
    """Display a picture, a Heatmap, a BarChart or panels of them: as HTML or SVG in Jupyter, as text anywhere
    else."""
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


# === Numbers that explain themselves ===

MAX_EXPLAINED_TOKENS = 32  # rows or columns of an explained heatmap: past this, no one points at cells
MAX_EXPLAINED_WIDTH = 1024  # d_k (or the keys a weighted sum adds): products behind one number
MAX_EXPLAINED_COLUMNS = 32  # d_v: the columns of an explained output table
MAX_LISTED = 64  # a table of at most this many entries also lists every explanation under it
SHOWN_TERMS = 16  # a sum of at most this many terms is written out in full; a longer one shows its largest
LARGEST_TERMS = 8  # ... this many, in order, then "+ ... N more"
POINT_NOTE = "point at a number (or Tab to it) to see how it was made"


class Explained(Heatmap):
    """A Heatmap whose entry [i][j] carries ``explanations[i][j]``: the title of its cell in HTML (and, for a
    small table, a list under it a keyboard can open), and ``explain(i, j)`` anywhere."""

    def __init__(self, M, explanations, *, note: str, **options):
        super().__init__(M, note=f"{note}; {POINT_NOTE}", **options)
        self.explanations = [list(row) for row in explanations]
        self.text_note = f"{note}; .explain(i, j) says how entry [i][j] was made"

    def explain(self, i: int, j: int) -> str:
        """How entry [i][j] was made, with its own numbers."""
        for name, index, size in (("i", i, self.n), ("j", j, self.m)):
            if not -size <= check_int("explain", name, index) < size:
                raise ValueError(f"explain: {name} is {index}; the table is {self.n}x{self.m}")
        return self.explanations[i][j]

    def __repr__(self) -> str:
        table = format_matrix(self.M, row_labels=self.rows, col_labels=self.cols, digits=self.digits, title=self.title)
        return f"{self.text_note}\n{table}"

    def _repr_html_(self) -> str:
        # A title shows on hover, not on keyboard focus: a small table also lists every explanation in a
        # <details>, which opens from the keyboard with no script and survives the sanitiser.
        if self.n * self.m > MAX_LISTED:
            return super()._repr_html_()
        items = "\n\n".join(html.escape(text) for row in self.explanations for text in row)
        return (super()._repr_html_() + '\n<details style="margin:0 0 4px 0;"><summary>how each number was made'
                f'</summary><div style="white-space:pre-wrap;font-family:monospace;font-size:90%;">{items}</div>'
                "</details>")

    def _cell(self, i: int, j: int, text: str, style: str) -> str:
        # The padding moves onto the <a>, so pointing anywhere in the cell shows the title.
        style = style.replace("padding:4px 8px;", "padding:0;")
        title = html.escape(self.explanations[i][j], quote=True)
        return (f'<td style="{style}"><a tabindex="0" title="{title}" style="display:block;padding:4px 8px;">'
                f"{text}</a></td>")


def _bracketed(text: str) -> str:
    """A number shown after an operator: a negative one in brackets (``0.410×(-0.120)``, ``s - (-0.36)``)."""
    return f"({text})" if text.startswith("-") else text


def _short(x: float) -> str:
    """A factor inside an explanation: 3 decimals, a negative one in brackets (``0.410×(-0.120)``)."""
    return _bracketed(format_number(x, 3))


def _long(x: float) -> str:
    """A sum or a result inside an explanation: 4 decimals."""
    return format_number(x, 4)


def _sum_of(terms: list[str], values: list[float]) -> str:
    """The terms joined by " + "; past SHOWN_TERMS terms, the LARGEST_TERMS largest (in order), then how many
    more and what they add up to."""
    if len(terms) <= SHOWN_TERMS:
        return " + ".join(terms)
    keep = sorted(sorted(range(len(values)), key=lambda t: -abs(values[t]))[:LARGEST_TERMS])
    rest = math.fsum(v for t, v in enumerate(values) if t not in keep)
    return " + ".join(terms[t] for t in keep) + f" + ... {len(terms) - len(keep)} more (adding to {_long(rest)})"


def _finite_sum(func: str, name: str, products: list[float], c: float) -> float:
    """fsum of the products, when it (and it times c) is a finite float; else a message naming the entry."""
    try:
        total = math.fsum(products)
    except (OverflowError, ValueError):  # fsum's running total, or inf - inf
        total = math.inf
    if not (math.isfinite(total) and math.isfinite(total * c)):
        raise ValueError(f"{func}: {name} is too large for a float (about 1.8e308 at most)")
    return total


def check_tokens(func: str, tokens: object, key_tokens: object, queries: str, keys: str, T: int, T_k: int,
                 one_per: str = "key") -> list:
    """Labels of the T queries (tokens: ``queries`` has T rows) and of the T_k keys (key_tokens, default tokens;
    ``keys`` says where the T_k keys are, count included: "K's rows are 5"); return the key labels."""
    if not isinstance(tokens, (list, tuple)):
        raise TypeError(f"{func}: tokens must be a list of labels, one per query, got {shorten(tokens)}")
    check_labels(func, "tokens", tokens, T, f"{queries} has {T} rows")
    check_labels(func, "key_tokens", key_tokens, T_k, keys)
    if key_tokens is None and T != T_k:
        raise ShapeError(f"{func}: {keys} but {T} tokens were given; give key_tokens, one per {one_per}")
    return list(tokens if key_tokens is None else key_tokens)


def check_explained_sizes(func: str, sizes: dict, limits: tuple) -> None:
    """Each (name, size name, limit) within its limit, or a message naming the argument and the limit."""
    for name, size, most in limits:
        if sizes[size] > most:
            raise ValueError(f"{func}: {name} gives {size} = {sizes[size]:,}; an explained table takes at most "
                             f"{most:,} (use heatmap for a bigger one)")


def check_view(func: str, digits: object, title: object) -> None:
    """Digits after the point, and a title that is a str or None."""
    check_digits(func, digits)
    if title is not None:
        check_type(func, "title", title, str, "a str")


def explained_scores(Q: Matrix, K: Matrix, tokens: Sequence[str], key_tokens: Optional[Sequence[str]] = None, *,
                     mask: Optional[Mask] = None, scale: Optional[float] = None, digits: int = 2,
                     title: Optional[str] = None) -> Explained:  # (T, d_k), (T_k, d_k) -> (T, T_k)
    """One head's scores Q K^T / sqrt(d_k), each cell explained by its d_k products.

    The scores are the module's: ``fsum`` of q_i's and k_j's products, times ``scale`` (default
    1 / sqrt(d_k)), -inf where ``mask`` (T, T_k) is False, as ``attention`` computes them.

    >>> view = explained_scores([[1, 2]], [[3, 4], [0, 1]], ["a"], ["b", "c"])
    >>> print(view.explain(0, 0))
    score[0][0], a → b = (q0·k0) / √2
    = 1×3 + 2×4
    = 11.0000 × 1/√2 (0.7071) = 7.7782
    """
    func = "explained_scores"
    n = check_sizes(func, ("Q", Q, "T d_k"), ("K", K, "T_k d_k"))
    check_explained_sizes(func, n, (("Q", "T", MAX_EXPLAINED_TOKENS), ("K", "T_k", MAX_EXPLAINED_TOKENS),
                                    ("Q", "d_k", MAX_EXPLAINED_WIDTH)))
    keys = check_tokens(func, tokens, key_tokens, "Q", f"K's rows are {n['T_k']}", n["T"], n["T_k"])
    if mask is not None:
        check_mask(func, "mask", mask, (n["T"], n["T_k"]))
    c = 1 / math.sqrt(n["d_k"]) if scale is None else float(check_number(func, "scale", scale, positive=True))
    check_view(func, digits, title)
    how = f"1/√{n['d_k']} ({_long(c)})" if scale is None else f"scale {_long(c)}"
    head = f"/ √{n['d_k']}" if scale is None else f"× {_long(c)}"
    scores, texts = [], []
    for i, q in enumerate(Q):
        scores.append([])
        texts.append([])
        for j, k in enumerate(K):
            products = [a * b for a, b in zip(q, k)]  # what matrix.product adds, in the same order
            dot_qk = _finite_sum(func, f"score[{i}][{j}]", products, c)
            name = f"score[{i}][{j}], {tokens[i]} → {keys[j]}"
            if mask is not None and not mask[i][j]:
                scores[-1].append(-math.inf)
                texts[-1].append(f"{name} = -inf: the mask hides this key from this query\n"
                                 f"(q{i}·k{j} would be {_long(dot_qk)}; softmax gives it weight exactly 0)")
                continue
            scores[-1].append(dot_qk * c)
            terms = [f"{_short(a)}×{_short(b)}" for a, b in zip(q, k)]
            texts[-1].append(f"{name} = (q{i}·k{j}) {head}\n= {_sum_of(terms, products)}\n"
                             f"= {_long(dot_qk)} × {how} = {_long(dot_qk * c)}")
    return Explained(scores, texts, row_labels=list(tokens), col_labels=keys, digits=digits, title=title,
                     note="rows = queries, columns = keys")


def explained_weights(scores: Matrix, tokens: Sequence[str], key_tokens: Optional[Sequence[str]] = None, *,
                      mask: Optional[Mask] = None, digits: int = 2,
                      title: Optional[str] = None) -> Explained:  # (T, T_k) -> (T, T_k)
    """Softmax of each row of scores, each weight explained by its exponential and its row's total.

    The weights are the module's: exp(s - max) / fsum of the row's exponentials, a masked key
    (score -inf, or False in ``mask``) exactly 0, as ``attention`` computes them.

    >>> view = explained_weights([[0.0, 0.0], [0.0, float("-inf")]], ["a", "b"])
    >>> print(view.explain(0, 1))
    weight[0][1], a → b = e^(s - max) / total
    = e^(0.0000 - 0.0000) / 2.0000 = 1.0000 / 2.0000 = 0.5000
    the row's e^(s - max): 1.0000 (a) + 1.0000 (b) = 2.0000
    >>> print(view.explain(1, 1))
    weight[1][1], b → b = 0 exactly: the mask hides this key (score -inf, e^-inf = 0)
    """
    func = "explained_weights"
    T, T_k = check_scores(func, "scores", scores)
    check_explained_sizes(func, {"T": T, "T_k": T_k}, (("scores", "T", MAX_EXPLAINED_TOKENS),
                                                      ("scores", "T_k", MAX_EXPLAINED_TOKENS)))
    keys = check_tokens(func, tokens, key_tokens, "scores", f"scores' columns are {T_k}", T, T_k)
    if mask is not None:
        check_mask(func, "mask", mask, (T, T_k))
    check_view(func, digits, title)
    weights, texts = [], []
    for i, row in enumerate(masked([list(r) for r in scores], mask)):
        top = max(row)  # softmax_of_rows' arithmetic, step by step
        exps = [math.exp(s - top) for s in row]
        total = math.fsum(exps)
        weights.append([e / total for e in exps])
        row_sum = _sum_of([f"{_long(e)} ({keys[j]})" for j, e in enumerate(exps) if row[j] != -math.inf],
                          [e for j, e in enumerate(exps) if row[j] != -math.inf])
        hidden = sum(s == -math.inf for s in row)
        total_text = f"the row's e^(s - max): {row_sum} = {_long(total)}" + (
            f" ({hidden} masked key{'s' if hidden > 1 else ''} add 0)" if hidden else "")
        texts.append([])
        for j, s in enumerate(row):
            name = f"weight[{i}][{j}], {tokens[i]} → {keys[j]}"
            if s == -math.inf:
                texts[-1].append(f"{name} = 0 exactly: the mask hides this key (score -inf, e^-inf = 0)")
            else:
                texts[-1].append(f"{name} = e^(s - max) / total\n"
                                 f"= e^({_long(s)} - {_bracketed(_long(top))}) / {_long(total)} = "
                                 f"{_long(exps[j])} / {_long(total)} = {_long(weights[-1][j])}\n{total_text}")
    return Explained(weights, texts, row_labels=list(tokens), col_labels=keys, digits=digits, title=title,
                     vmin=0.0, vmax=1.0, note="rows = queries, columns = keys")


def explained_outputs(A: Matrix, V: Matrix, tokens: Sequence[str], key_tokens: Optional[Sequence[str]] = None, *,
                      digits: int = 2, title: Optional[str] = None) -> Explained:  # (T, T_k), (T_k, d_v) -> (T, d_v)
    """One head's output A V, each entry explained as the weighted values it adds up.

    Entry [i][c] is ``fsum`` of a[i][j] × V[j][c] over the keys j, as ``attention`` computes it.

    >>> view = explained_outputs([[0.25, 0.75]], [[4.0], [8.0]], ["a"], ["b", "c"])
    >>> print(view.explain(0, 0))
    output[0][0], a, d0 = Σ_j a[0][j] × V[j][0]
    = 0.250×4.000 (b) + 0.750×8.000 (c)
    = 7.0000
    """
    func = "explained_outputs"
    n = check_sizes(func, ("A", A, "T T_k"), ("V", V, "T_k d_v"))
    check_explained_sizes(func, n, (("A", "T", MAX_EXPLAINED_TOKENS), ("A", "T_k", MAX_EXPLAINED_WIDTH),
                                    ("V", "d_v", MAX_EXPLAINED_COLUMNS)))
    keys = check_tokens(func, tokens, key_tokens, "A", f"A's columns are {n['T_k']}", n["T"], n["T_k"])
    check_view(func, digits, title)
    columns = [f"d{c}" for c in range(n["d_v"])]
    outputs, texts = [], []
    for i, a in enumerate(A):
        outputs.append([])
        texts.append([])
        for c in range(n["d_v"]):
            products = [a[j] * V[j][c] for j in range(n["T_k"])]  # what matrix.product adds, in the same order
            entry = _finite_sum(func, f"output[{i}][{c}]", products, 1.0)
            outputs[-1].append(entry)
            shown = [j for j in range(n["T_k"]) if a[j] != 0]
            zeros = n["T_k"] - len(shown)
            terms = _sum_of([f"{_short(a[j])}×{_short(V[j][c])} ({keys[j]})" for j in shown],
                            [products[j] for j in shown]) or "0"
            note = f"\n({zeros} key{'s' if zeros > 1 else ''} with weight 0 add nothing)" if zeros else ""
            texts[-1].append(f"output[{i}][{c}], {tokens[i]}, d{c} = Σ_j a[{i}][j] × V[j][{c}]\n= {terms}\n"
                             f"= {_long(entry)}{note}")
    return Explained(outputs, texts, row_labels=list(tokens), col_labels=columns, digits=digits, title=title,
                     note="rows = queries, columns = value columns")
