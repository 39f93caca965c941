"""Pictures drawn from the live numbers: SVG written as strings, with the standard library only.

Each function returns a ``Picture``: Jupyter shows its SVG (``_repr_svg_``), a
terminal and nbval's text comparison see a short text description (``repr``),
and ``.save(path)`` writes the SVG for a web page or for print. Every coordinate
is rounded to one decimal, so a stored notebook output is the same on every run;
every head has a colour AND a dash pattern, so nothing is told by colour alone.

=============================================  ===================================================
pipeline(ex)                                   the whole layer with the example's real shapes
attention_lines(tokens, weights, heads=...)    a line from each query to each key it reads,
                                               width = weight, one colour and dash per head
query_key_arrows(Q, K, tokens, query=i)        d_k = 2: queries and keys as arrows, each score
                                               q.k written beside its key, the winner marked
induction_circuit(tokens, prev, induction)      an induction circuit's two links at one query
                                               (by default clearest_copy's: its clearest right copy)
line_chart(values, title=, x_label=, ...)      a curve, e.g. the loss of a training run
Picture                                        .svg, .text, .save(path)
=============================================  ===================================================

    python -m mha_lists.teaching.pictures docs/pipeline.svg    # the pipeline of the default example
"""

from __future__ import annotations

import html
import math
import pathlib
import sys
from collections.abc import Mapping, Sequence
from typing import Optional, Union

from ..core.attention import check_layer, check_weights, trace_layer
from ..core.checks import check_type, ShapeError, all_finite, check_int, check_matrix, check_number, check_vector, \
    describe, is_number, shorten, too_large
from ..core.matrix import Matrix, Vector
from ..core.softmax_and_masks import Mask
from .block import LAYER_NORM_EPS, BlockWeights, block_steps, check_block
from .example import Example, running_example
from .induction import followers

__all__ = ["pipeline", "attention_lines", "query_key_arrows", "induction_circuit", "line_chart", "block_diagram"]

MAX_TOKENS = 32  # tokens (queries or keys) in one picture
MAX_HEADS = 16  # heads in one attention_lines picture
OVERLAY_HEADS = 1  # this many heads share one panel; with more, each head gets a panel of its own (small multiples)
MAX_POINTS = 10_000  # values in one line_chart

# One (colour, dash pattern) per head. The colours are Okabe and Ito's, told apart by most
# colour-blind readers; 7 colours and 5 dash patterns give 35 different pairs.
_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
_DASHES = ["", "7 3", "2 2", "9 3 2 3", "4 4"]


def _style(h: int) -> tuple[str, str]:
    """Head h's (colour, dash pattern), for any h: the pipeline draws head num_heads - 1 of any number of heads."""
    return _COLOURS[h % len(_COLOURS)], _DASHES[h % len(_DASHES)]


HEAD_STYLES = [_style(h) for h in range(MAX_HEADS)]
_FONT = 'font-family="sans-serif"'


# === The picture ===


def check_path(func: str, name: str, path: object) -> pathlib.Path:
    """A file to write: a str or a Path, in a folder that exists, not a folder or a pipe (writing to a pipe
    waits for a reader that may never come); return it as a Path."""
    if not isinstance(path, (str, pathlib.PurePath)):
        raise TypeError(f"{func}: {name} must be a str or a Path, got {type(path).__name__}")
    if "\0" in str(path):
        raise ValueError(f"{func}: {name} is {shorten(str(path))}; a file name cannot hold a NUL character")
    target = pathlib.Path(path)
    try:
        exists, is_file, in_a_folder = target.exists(), target.is_file(), target.parent.is_dir()
    except OSError as error:  # a name too long, a folder we may not read
        raise ValueError(f"{func}: {name} {shorten(str(path))} cannot be written: {error.strerror}") from None
    if exists and not is_file:
        raise ValueError(f"{func}: {name} {shorten(str(path))} is not a regular file (a folder, a pipe or a "
                         "device); give the name of a file to write")
    if not in_a_folder:
        raise ValueError(f"{func}: {name} {shorten(str(path))} is in a folder that does not exist")
    return target


class Picture:
    """An SVG string and a text description of it; Jupyter shows the SVG, print shows the text."""

    def __init__(self, svg: str, text: str) -> None:
        self.svg = check_type("Picture", "svg", svg, str, "a str")
        self.text = check_type("Picture", "text", text, str, "a str")

    def _repr_svg_(self) -> str:
        return self.svg

    def __repr__(self) -> str:
        return self.text

    def save(self, path: Union[str, pathlib.Path]) -> None:
        """Write the SVG to ``path`` (UTF-8, one newline at the end)."""
        target = check_path("save", "path", path)
        try:
            target.write_text(self.svg + "\n", encoding="utf-8")
        except OSError as error:  # no permission, a name too long, a full disk
            raise ValueError(f"save: path {shorten(str(path))} cannot be written: {error.strerror}") from None


def _n(x: float) -> str:
    """A coordinate rounded to one decimal, as short as it goes: 12.0 -> '12', -0.04 -> '0'.

    >>> _n(12.0), _n(3.14159), _n(-0.04)
    ('12', '3.1', '0')
    """
    r = round(x, 1)
    if r == 0:
        return "0"
    return str(int(r)) if r == int(r) else f"{r:.1f}"


def _value(x: float) -> str:
    """A number for a label: whole numbers as integers, others with two decimals.

    >>> _value(4.0), _value(-0.5), _value(0.004)
    ('4', '-0.50', '0.00')
    """
    if float(x).is_integer():
        return str(int(x))
    text = f"{x:.2f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _esc(text: str) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: float, height: float, title: str, desc: str, body: list[str]) -> str:
    """The document: size, accessible title and description, a white background, then the body."""
    return "\n".join([
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(width)}" height="{_n(height)}" '
        f'viewBox="0 0 {_n(width)} {_n(height)}" role="img" aria-label="{_esc(title)}" {_FONT} font-size="12">',
        f"<title>{_esc(title)}</title>",
        f"<desc>{_esc(desc)}</desc>",
        f'<rect x="0" y="0" width="{_n(width)}" height="{_n(height)}" fill="#ffffff"/>',
        *body,
        "</svg>",
    ])


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12, weight: str = "normal",
          fill: str = "#000000") -> str:
    extra = "" if weight == "normal" else f' font-weight="{weight}"'
    return (f'<text x="{_n(x)}" y="{_n(y)}" text-anchor="{anchor}" font-size="{size}" fill="{fill}"{extra}>'
            f"{_esc(text)}</text>")


def _text_width(text: str, size: float) -> float:
    """About how wide ``text`` is at font size ``size``: 0.6 of the size per character (sans-serif)."""
    return 0.6 * size * len(text)


def _arrow(x1: float, y1: float, x2: float, y2: float, *, colour: str = "#000000", width: float = 1.5,
           dash: str = "", head: float = 8.0) -> list[str]:
    """A line from (x1, y1) to (x2, y2) with a filled triangle at the end (no markers, no ids)."""
    length = math.hypot(x2 - x1, y2 - y1)
    if length == 0:
        return [f'<circle cx="{_n(x1)}" cy="{_n(y1)}" r="3" fill="{colour}"/>']
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    head = min(head, length)
    bx, by = x2 - ux * head, y2 - uy * head  # the base of the head
    px, py = -uy * head / 2.5, ux * head / 2.5
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return [
        f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(bx)}" y2="{_n(by)}" stroke="{colour}" '
        f'stroke-width="{_n(width)}"{dash_attr}/>',
        f'<polygon points="{_n(x2)},{_n(y2)} {_n(bx + px)},{_n(by + py)} {_n(bx - px)},{_n(by - py)}" '
        f'fill="{colour}"/>',
    ]


def _label_beyond(x0: float, y0: float, x: float, y: float, label: str, **style: str) -> str:
    """A label just past the tip (x, y) of an arrow from (x0, y0), anchored so it reads away from the arrow."""
    length = math.hypot(x - x0, y - y0)
    ux, uy = ((x - x0) / length, (y - y0) / length) if length else (0.7, 0.7)
    anchor = "start" if ux > 0.3 else "end" if ux < -0.3 else "middle"
    return _text(x + ux * 16, y + uy * 16 + 4, label, anchor=anchor, **style)


# === What the pictures take ===


def check_labels(func: str, name: str, labels: object, count: Optional[int] = None) -> int:
    """Tokens or names: a non-empty list of str (``count`` of them, one per row, when given); return how many."""
    if not isinstance(labels, (list, tuple)) or not all(isinstance(s, str) for s in labels):
        raise TypeError(f"{func}: {name} must be a list of str, got {shorten(labels)}")
    if not labels:
        raise ShapeError(f"{func}: {name} is empty; give at least one")
    if count is not None and len(labels) != count:
        raise ShapeError(f"{func}: {name} has {len(labels)} entries; it needs one per row ({count})")
    return len(labels)


def check_plane(func: str, name: str, M: object) -> int:
    """Vectors to draw as arrows in the plane: a finite matrix with two columns (d_k = 2); return its rows."""
    rows, d = check_matrix(func, name, M)
    if d != 2:
        raise ShapeError(f"{func}: {name} is {describe((rows, d))}; the picture is a plane, so it needs d_k = 2 "
                         f"(two columns), got {d}")
    if not all_finite(M):  # ints too large for a float that cancel in check_matrix's quick sum
        for i, row in enumerate(M):
            check_vector(func, f"{name}[{i}]", row)
    return rows


def check_example(func: str, name: str, ex: object) -> tuple[int, dict[str, int]]:
    """The running example, every part of it the picture uses (it may have been edited); its tokens and sizes."""
    if not isinstance(ex, Example):
        raise TypeError(f"{func}: {name} must be the running example (ex = running_example(...)), "
                        f"got {type(ex).__name__}")
    if not isinstance(ex.tokens, list) or not all(isinstance(t, str) for t in ex.tokens) or not ex.tokens:
        raise TypeError(f"{func}: {name}.tokens must be a non-empty list of str, got {shorten(ex.tokens)}")
    T = len(ex.tokens)
    if T > MAX_TOKENS:
        raise ShapeError(f"{func}: the sentence has {T} tokens; at most {MAX_TOKENS} fit in one picture "
                         "(MAX_TOKENS)")
    rows, d_model = check_matrix(func, f"{name}.x", ex.x)
    if rows != T:
        raise ShapeError(f"{func}: {name}.x has {rows} rows but {name}.tokens has {T}; one row per token")
    dims = check_weights(func, f"{name}.weights", ex.weights)
    if dims["d_model"] != d_model:
        raise ShapeError(f"{func}: {name}.x has {d_model} columns but {name}.weights expect d_model = "
                         f"{dims['d_model']}")
    return T, dims


# === The pipeline ===


def pipeline(ex: Example, *, mask: Optional[Mask] = None) -> Picture:  # mask (T, T)
    """The layer from X to the output, with ``ex``'s shapes and each head's attention weights drawn.

    ``mask`` (T, T), True where a query may attend to a key, is the one the weights are drawn with.

    Columns, left to right: X (T, d_model); per head Q, K, V (T, d_k); the scores
    Q K^T / sqrt(d_k) (T, T); the weights, drawn as a T x T grid of grey cells
    (darker = more weight); the head outputs (T, d_v); the concatenation
    (T, num_heads * d_v); the output after W_O (T, d_model). With more than four
    heads, heads 0, 1 and the last are drawn and a row says how many are left out.

    >>> print(pipeline(running_example()))
    pipeline: X 5×16 -> 2 heads, each: Q, K, V 5×8 -> scores 5×5 -> weights 5×5 -> head output 5×8 -> concat 5×16 -> × W_O 16×16 -> output 5×16
    """
    T, dims = check_example("pipeline", "ex", ex)
    c = check_layer("pipeline", ex.x, ex.weights, None, mask, None)  # the mask, and the limit on the work
    try:
        trace = trace_layer(ex.x, ex.weights, None, mask, c)
    except OverflowError as error:
        raise too_large("pipeline", error) from None
    d_model, H, d_k, d_v = dims["d_model"], dims["h"], dims["d_k"], dims["d_v"]
    T_k = len(trace.K[0])
    x_shape, qk_shape, v_shape = f"{T}×{d_model}", f"{T}×{d_k}", f"{T_k}×{d_v}"
    s_shape, h_shape, c_shape = f"{T}×{T_k}", f"{T}×{d_v}", f"{T}×{H * d_v}"
    wo_shape = f"{len(ex.weights.W_O)}×{len(ex.weights.W_O[0])}"
    text = (f"pipeline: X {x_shape} -> {H} head{'s' if H != 1 else ''}, each: Q, K, V {qk_shape} -> "
            f"scores {s_shape} -> weights {s_shape} -> head output {h_shape} -> concat {c_shape} -> "
            f"× W_O {wo_shape} -> output {x_shape}")

    shown = list(range(H)) if H <= 4 else [0, 1, None, H - 1]  # None: the row that says "... more"
    lane_h, top, left = 92.0, 96.0, 20.0
    box_w, box_h = 78.0, 24.0
    cols = [left, left + 120, left + 240, left + 360, left + 480, left + 600, left + 730]
    width = cols[-1] + box_w + 30
    height = top + lane_h * len(shown) + 20
    body: list[str] = []

    def box(x: float, y: float, name: str, shape: str, *, w: float = box_w, h: float = box_h, fill: str = "#f2f2f2") -> None:
        body.append(f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" rx="3" fill="{fill}" '
                    f'stroke="#333333"/>')
        body.append(_text(x + w / 2, y + h / 2 - 1, name, anchor="middle", weight="bold"))
        body.append(_text(x + w / 2, y + h / 2 + 11, shape, anchor="middle", size=10))

    body.append(_text(left, 20, "tokens: " + " ".join(ex.tokens), size=12))
    headers = [("X = embeddings", ""), ("× W_Q, W_K, W_V", f"each {d_model}×{d_k}"), ("Q Kᵀ / √" + str(d_k), "scores"),
               ("softmax by row", "weights"), ("weights × V", "head output"), ("concatenate", "the heads"),
               ("× W_O", wo_shape)]
    for x, (line1, line2) in zip(cols, headers):
        body.append(_text(x + box_w / 2, 48, line1, anchor="middle", weight="bold"))
        body.append(_text(x + box_w / 2, 63, line2, anchor="middle", size=11))
    lanes_top, lanes_bottom = top, top + lane_h * len(shown) - 12
    mid = (lanes_top + lanes_bottom) / 2
    box(cols[0], mid - 20, "X", x_shape, h=40)
    box(cols[5], lanes_top, "concat", c_shape, h=lanes_bottom - lanes_top, fill="#e8eef8")
    box(cols[6], mid - 20, "output", x_shape, h=40, fill="#e8eef8")
    body += _arrow(cols[5] + box_w, mid, cols[6] - 2, mid)
    for row, h in enumerate(shown):
        y0 = top + row * lane_h
        if h is None:
            body.append(_text((cols[1] + cols[4] + box_w) / 2, y0 + 40, f"⋮  {H - 3} more heads, each the same shapes",
                              anchor="middle", size=12))
            continue
        colour, dash = _style(h)
        q_y = [y0, y0 + 27, y0 + 54]
        for y, name, shape in zip(q_y, ("Q", "K", "V"), (qk_shape, f"{T_k}×{d_k}", v_shape)):
            body += _arrow(cols[0] + box_w, mid, cols[1] - 2, y + box_h / 2, colour="#888888", width=1)
            box(cols[1], y, f"{name}{_sub(h)}", shape, h=box_h)
        lane_mid = y0 + 39
        body += _arrow(cols[1] + box_w, q_y[0] + 12, cols[2] - 2, lane_mid, colour=colour, dash=dash)
        body += _arrow(cols[1] + box_w, q_y[1] + 12, cols[2] - 2, lane_mid, colour=colour, dash=dash)
        box(cols[2], lane_mid - 18, f"scores{_sub(h)}", s_shape, h=36)
        body += _arrow(cols[2] + box_w, lane_mid, cols[3] - 2, lane_mid, colour=colour, dash=dash)
        grid = 54.0
        body += _grid(cols[3] + (box_w - grid) / 2, lane_mid - grid / 2 - 4, trace.attention[h], size=grid,
                      colour=colour, label=lambda i, j, w, h=h: f"head {h}: {ex.tokens[i]} reads {ex.tokens[j]}, "
                                                                  f"weight {w:.2f}")
        body += _arrow(cols[3] + (box_w + grid) / 2, lane_mid, cols[4] - 2, lane_mid, colour=colour, dash=dash)
        # V goes below the weights to the head output: weights x V.
        v_y, turn_x = q_y[2] + box_h / 2, cols[4] + box_w / 2
        body.append(f'<polyline points="{_n(cols[1] + box_w)},{_n(v_y)} {_n(turn_x)},{_n(v_y)}" fill="none" '
                    f'stroke="{colour}" stroke-width="1.5"' + (f' stroke-dasharray="{dash}"' if dash else "") + "/>")
        body += _arrow(turn_x, v_y, turn_x, lane_mid + 20, colour=colour, dash=dash)
        box(cols[4], lane_mid - 18, f"head{_sub(h)}", h_shape, h=36)
        body += _arrow(cols[4] + box_w, lane_mid, cols[5] - 2, lane_mid, colour=colour, dash=dash)
        body.append(_text(cols[2] + box_w / 2, y0 + 12, f"head {h}", anchor="middle", size=11, weight="bold",
                          fill=colour))
    desc = text.replace("pipeline: ", "Multi-head attention of the running example: ")
    return Picture(_svg(width, height, "Multi-head attention, step by step, with the example's shapes", desc, body),
                   text)


_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _sub(h: int) -> str:
    return str(h).translate(_SUBSCRIPTS)


def _grid(x: float, y: float, M: Matrix, *, size: float, colour: str, label) -> list[str]:
    """A matrix of weights in [0, 1] as a square of cells whose opacity is the weight; ``label(i, j, w)`` is
    each cell's tooltip."""
    n, m = len(M), len(M[0])
    cw, ch = size / m, size / n
    out = [f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(size)}" height="{_n(size)}" fill="#ffffff" stroke="#333333"/>']
    for i, row in enumerate(M):
        for j, w in enumerate(row):
            if w > 0:
                out.append(f'<rect x="{_n(x + j * cw)}" y="{_n(y + i * ch)}" width="{_n(cw)}" height="{_n(ch)}" '
                           f'fill="{colour}" fill-opacity="{w:.2f}"><title>{_esc(label(i, j, w))}</title></rect>')
    return out


# === Attention as lines ===


def _heads(weights: Union[Matrix, Sequence[Matrix]]) -> list[Matrix]:
    """One matrix (a list of rows of numbers) or a list of them, one per head: the list."""
    first = weights[0]
    one = isinstance(first, (list, tuple)) and bool(first) and not isinstance(first[0], (list, tuple))
    return [weights] if one else list(weights)


def check_head_weights(func: str, name: str, weights: object, shape: tuple[int, int]) -> int:
    """One matrix or a list of matrices (at most MAX_HEADS), each of ``shape`` (T, T_k), of weights
    from 0 to 1; return how many heads."""
    if not isinstance(weights, (list, tuple)) or not weights:
        raise TypeError(f"{func}: {name} must be one (T, T_k) matrix or a list of them (one per head), "
                        f"got {type(weights).__name__}")
    mats = _heads(weights)
    if len(mats) > MAX_HEADS:
        raise ShapeError(f"{func}: {len(mats)} heads; at most {MAX_HEADS} fit in one picture (MAX_HEADS)")
    for h, M in enumerate(mats):
        label = name if mats[0] is weights else f"{name}[{h}]"  # one matrix, or head h of a list
        found = check_matrix(func, label, M)
        if found != shape:
            raise ShapeError(f"{func}: {label} is {describe(found)}; every head must be {describe(shape)} "
                             f"(one row per query token, one column per key token)")
        for i, row in enumerate(M):
            for j, w in enumerate(row):
                if not 0 <= w <= 1:
                    raise ValueError(f"{func}: {label}[{i}][{j}] is {shorten(w)}; attention weights must be "
                                     "from 0 to 1")
    return len(mats)


def attention_lines(tokens: Sequence[str], weights: Union[Matrix, Sequence[Matrix]], *,
                    heads: Optional[Sequence[str]] = None, title: Optional[str] = None,
                    key_tokens: Optional[Sequence[str]] = None) -> Picture:  # weights (T, T_k) or H x (T, T_k)
    """Queries on the left, keys on the right, a line from query i to key j for each head's weight.

    ``weights`` is one (T, T_k) matrix or a list of them, one per head (the
    ``attention`` of ``attention_trace``). A line's width and opacity grow with
    the weight; a weight of 0 (a masked key) draws no line. Each head has its own
    colour and dash pattern, named in the legend (``heads``: the names, default
    "head 0", "head 1", ...). Each head gets a panel of its own, side by side
    (small multiples: lines of several heads on one canvas tangle). ``key_tokens`` label the
    keys when they differ from the queries (cross-attention). The text says where
    each query looks most.

    >>> attention_lines(["a", "b"], [[1.0, 0.0], [0.25, 0.75]])
    attention_lines: 2 queries, 2 keys, 1 head; the key each query reads most:
      head 0: a -> a 1.00, b -> b 0.75
    """
    func = "attention_lines"
    T = check_labels(func, "tokens", tokens)
    T_k = T if key_tokens is None else check_labels(func, "key_tokens", key_tokens)
    for name, n in (("tokens", T), ("key_tokens", T_k)):
        if n > MAX_TOKENS:
            raise ShapeError(f"{func}: {name} has {n} tokens; at most {MAX_TOKENS} fit in one picture (MAX_TOKENS)")
    H = check_head_weights(func, "weights", weights, (T, T_k))
    if heads is not None and check_labels(func, "heads", heads) != H:
        raise ShapeError(f"{func}: heads has {len(heads)} names for {H} heads; give one name per head")
    if title is not None:
        check_type(func, "title", title, str, "a str")
    tokens = list(tokens)
    keys = tokens if key_tokens is None else list(key_tokens)
    mats = _heads(weights)
    names = [f"head {h}" for h in range(H)] if heads is None else list(heads)
    heading = title if title is not None else "Who reads whom: attention weights as lines"
    if H <= OVERLAY_HEADS:
        width, height, body = _lines_overlaid(mats, tokens, keys, names)
    else:
        width, height, body = _lines_panels(mats, tokens, keys, names)
    body.insert(0, _text(width / 2, 22, heading, anchor="middle", size=14, weight="bold"))

    lines = [f"{func}: {_count(T, 'query', 'queries')}, {_count(T_k, 'key', 'keys')}, {_count(H, 'head', 'heads')}; "
             "the key each query reads most:"]
    for name, M in zip(names, mats):
        best = [f"{tokens[i]} -> {keys[max(range(T_k), key=row.__getitem__)]} {max(row):.2f}" for i, row in enumerate(M)]
        lines.append(f"  {name}: " + ", ".join(best))
    text = "\n".join(lines)
    desc = (f"Each query token on the left has a line to each key token on the right that it reads; the line is "
            f"wider and darker for a larger attention weight. {text}")
    return Picture(_svg(width, height, heading, desc, body), text)


def _head_lines(h: int, M: Matrix, tokens: Sequence[str], keys: Sequence[str], name: str, *, x1: float, x2: float,
                top: float, row_h: float, offset: float, thickness: float) -> list[str]:
    """Head h's lines from query i (at x1) to key j (at x2), one per positive weight, with a tooltip."""
    colour, dash = HEAD_STYLES[h]
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    out = []
    for i, row in enumerate(M):
        for j, w in enumerate(row):
            if w <= 0:
                continue
            y1, y2 = top + i * row_h + offset, top + j * row_h + offset
            out.append(
                f'<line x1="{_n(x1)}" y1="{_n(y1)}" x2="{_n(x2)}" y2="{_n(y2)}" stroke="{colour}" '
                f'stroke-width="{_n(max(0.1, thickness * w))}" stroke-opacity="{0.25 + 0.75 * w:.2f}"{dash_attr} '
                f'data-head="{h}" data-query="{i}" data-key="{j}" data-weight="{w:.4f}">'
                f"<title>{_esc(name)}: {_esc(tokens[i])} reads {_esc(keys[j])}, weight {w:.2f}</title></line>")
    return out


def _style_sample(h: int, x: float, y: float) -> str:
    colour, dash = HEAD_STYLES[h]
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<line x1="{_n(x)}" y1="{_n(y)}" x2="{_n(x + 34)}" y2="{_n(y)}" stroke="{colour}" stroke-width="3"{dash_attr}/>'


def _lines_overlaid(mats: list[Matrix], tokens: list[str], keys: list[str], names: list[str]):
    """A few heads in one panel, each head's lines shifted a little so that none hides another; a legend below."""
    T, T_k, H = len(tokens), len(keys), len(mats)
    row_h, top, left_x, right_x, width = 32.0, 62.0, 150.0, 410.0, 560.0
    spread = min(8.0, 28.0 / H)
    body = [_text(left_x, 46, "query (reads)", anchor="end", size=11, fill="#555555"),
            _text(right_x, 46, "key (is read)", anchor="start", size=11, fill="#555555")]
    for h, M in enumerate(mats):
        body += _head_lines(h, M, tokens, keys, names[h], x1=left_x + 8, x2=right_x - 8, top=top, row_h=row_h,
                            offset=(h - (H - 1) / 2) * spread, thickness=9.0)
    for i, token in enumerate(tokens):
        body.append(_text(left_x, top + i * row_h + 4, token, anchor="end"))
    for j, token in enumerate(keys):
        body.append(_text(right_x, top + j * row_h + 4, token, anchor="start"))
        if T == 1 and H == 1:  # one query: write each weight beside its key, the shares of a weighted sum
            body.append(_text(right_x + 12 + 7 * max(map(len, keys)), top + j * row_h + 4, f"{mats[0][0][j]:.2f}",
                              anchor="start", size=11, fill=HEAD_STYLES[0][0]))
    legend_y = top + max(T, T_k) * row_h + 12
    slot = 50 + 6.5 * max(len(name) for name in names)  # one legend entry: a sample line and the name
    legend_cols = max(1, min(4, int((width - 20) // slot)))
    for h, name in enumerate(names):
        x = 20 + (h % legend_cols) * (width - 20) / legend_cols
        y = legend_y + 20 * (h // legend_cols)
        body += [_style_sample(h, x, y), _text(x + 40, y + 4, name, size=11)]
    return width, legend_y + 20 * math.ceil(H / legend_cols) + 8, body


def _lines_panels(mats: list[Matrix], tokens: list[str], keys: list[str], names: list[str]):
    """Several heads: one panel per head, up to four to a row, each titled with its name and line style;
    up to four heads get larger panels."""
    T, T_k, H = len(tokens), len(keys), len(mats)
    few = H <= 4
    per_row, row_h, top, size = min(4, H), (28.0 if few else 15.0), 44.0, (13 if few else 9)
    label_w = max(_text_width(t, size) for t in [*tokens, *keys]) + 6
    panel_w = 2 * label_w + (200 if few else 80)  # the lines' run, with a margin between panels
    panel_h = 34 + max(T, T_k) * row_h
    width = per_row * panel_w + 20
    body = []
    for h, M in enumerate(mats):
        x0 = 10 + (h % per_row) * panel_w
        y0 = top + (h // per_row) * panel_h
        body += [_style_sample(h, x0 + 4, y0 + 6), _text(x0 + 44, y0 + 10, names[h], size=11, weight="bold")]
        lines_top = y0 + 28
        margin = 30 if few else 10  # between this panel's keys and the next panel's queries
        body += _head_lines(h, M, tokens, keys, names[h], x1=x0 + label_w + 4,
                            x2=x0 + panel_w - margin - label_w - 4, top=lines_top, row_h=row_h, offset=0.0,
                            thickness=8.0 if few else 5.0)
        for i, token in enumerate(tokens):
            body.append(_text(x0 + label_w, lines_top + i * row_h + 4, token, anchor="end", size=size))
        for j, token in enumerate(keys):
            body.append(_text(x0 + panel_w - margin - label_w, lines_top + j * row_h + 4, token, anchor="start",
                              size=size))
    body.append(_text(10, 36, "in each panel: queries (read) on the left, keys (are read) on the right", size=11,
                      fill="#555555"))
    return max(width, 500.0), top + math.ceil(H / per_row) * panel_h + 8, body


# === Queries and keys as arrows (d_k = 2) ===


def query_key_arrows(Q: Matrix, K: Matrix, tokens: Sequence[str], *, query: int,
                     key_tokens: Optional[Sequence[str]] = None,
                     title: Optional[str] = None) -> Picture:  # Q (T, 2), K (T_k, 2)
    """For d_k = 2: query ``query`` and every key as arrows from the origin, each key labelled with q·k.

    The score of a key is the dot product q·k: large when the arrows point the
    same way and are long. The key with the largest score (the one softmax gives
    the most weight) is circled and labelled "wins"; ties are all marked.

    >>> print(query_key_arrows([[2, 0], [0, 1]], [[2, 0], [0, 2]], ["a", "b"], query=0))
    query_key_arrows: query a = (2, 0); q·k: a 4, b 0; wins: a
    """
    func = "query_key_arrows"
    T = check_plane(func, "Q", Q)
    T_k = check_plane(func, "K", K)
    check_labels(func, "tokens", tokens, T)
    if key_tokens is None and T_k != T:
        raise ShapeError(f"{func}: K has {T_k} rows but there are {T} tokens; give key_tokens, one per row of K")
    if key_tokens is not None:
        check_labels(func, "key_tokens", key_tokens, T_k)
    if T_k > MAX_TOKENS:
        raise ShapeError(f"{func}: K has {T_k} keys; at most {MAX_TOKENS} fit in one picture (MAX_TOKENS)")
    if not 0 <= check_int(func, "query", query) < T:
        raise ValueError(f"{func}: query is {shorten(query)}; it must be a query row from 0 to {T - 1}")
    if title is not None:
        check_type(func, "title", title, str, "a str")
    tokens = list(tokens)
    keys = tokens if key_tokens is None else list(key_tokens)
    q = Q[query]
    try:
        scores = [math.fsum(a * b for a, b in zip(q, k)) for k in K]
    except (OverflowError, ValueError):  # fsum's inf - inf, or an int product too large for a float
        scores = [math.inf]
    if not all_finite([scores]):  # a product past float64's range: no score to write
        raise too_large(func, "the scores q·k")
    best = max(scores)
    winners = [j for j, s in enumerate(scores) if s == best]

    size, margin, side = 360.0, 40.0, 130.0  # the plane, the space around the arrows, room for labels
    reach = max(abs(v) for row in [q, *K] for v in row) or 1.0
    half = size / 2 - margin  # where the largest coordinate lands, from the centre of the page
    cx, cy = side + size / 2, size / 2 + 20

    def at(v: Vector) -> tuple[float, float]:  # v / reach first: within [-1, 1] even when reach is tiny
        return cx + v[0] / reach * half, cy - v[1] / reach * half

    heading = title if title is not None else f"Query of {tokens[query]!s} against every key"
    width, height = size + 2 * side, size + 60
    body = [_text(width / 2, 18, heading, anchor="middle", size=14, weight="bold"),
            f'<line x1="{_n(cx - size / 2 + 10)}" y1="{_n(cy)}" x2="{_n(cx + size / 2 - 10)}" y2="{_n(cy)}" '
            'stroke="#bbbbbb"/>',
            f'<line x1="{_n(cx)}" y1="{_n(cy - size / 2 + 10)}" x2="{_n(cx)}" y2="{_n(cy + size / 2 - 10)}" '
            'stroke="#bbbbbb"/>']
    body += _arrow(cx, cy, *at(q), colour="#9CC8EA", width=12, head=22)  # a pale band under the keys: a key on it shows
    # Keys at the same point share one label.
    groups: dict[tuple[float, float], list[int]] = {}
    for j, k in enumerate(K):
        groups.setdefault((float(k[0]), float(k[1])), []).append(j)
    for (k0, k1), js in groups.items():
        won = any(j in winners for j in js)
        colour = "#D55E00" if won else "#555555"
        x, y = at([k0, k1])
        body += _arrow(cx, cy, x, y, colour=colour, width=2.5 if won else 1.5, dash="" if won else "5 3")
        if won:
            body.append(f'<circle cx="{_n(x)}" cy="{_n(y)}" r="9" fill="none" stroke="{colour}" stroke-width="2"/>')
        label = ", ".join(keys[j] for j in js) + f": q·k = {_value(scores[js[0]])}" + ("  ★ wins" if won else "")
        body.append(_label_beyond(cx, cy, x, y, label, weight="bold" if won else "normal", fill=colour))
    # The query's label sits beside the middle of its arrow, away from the keys' labels at the tips.
    qx, qy = at(q)
    length = math.hypot(qx - cx, qy - cy) or 1.0
    nx, ny = -(qy - cy) / length, (qx - cx) / length  # a unit normal to the query arrow
    if nx < 0 or (nx == 0 and ny > 0):
        nx, ny = -nx, -ny
    mx, my = (cx + qx) / 2 + nx * 14, (cy + qy) / 2 + ny * 14 + 4
    body.append(_text(mx, my, f"q ({tokens[query]}) = ({_value(q[0])}, {_value(q[1])})",
                      anchor="start" if nx > 0.3 else "middle", weight="bold", fill="#0072B2"))
    body.append(_text(10, height - 10, "wide pale-blue arrow: the query; dashed grey: keys; solid orange, ringed ★: "
                      "the key with the largest q·k", size=11, fill="#333333"))
    text = (f"{func}: query {tokens[query]} = ({_value(q[0])}, {_value(q[1])}); q·k: "
            + ", ".join(f"{keys[j]} {_value(s)}" for j, s in enumerate(scores))
            + "; wins: " + ", ".join(keys[j] for j in winners))
    return Picture(_svg(width, height, heading, text, body), text)


def clearest_copy(tokens: Sequence[str], induction: Matrix) -> int:  # (T,), (T, T) -> a position
    """Where an induction head copies most clearly: among the tokens seen before whose heaviest key followed an
    earlier copy of them and is the token that comes next, the one with the largest weight there; else the last
    token seen before; else the last token. ``induction_circuit`` draws there when given no query.

    >>> clearest_copy(list("abab"), [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0.2, 0.8, 0]])
    2
    """
    T = check_labels("clearest_copy", "tokens", tokens)
    check_head_weights("clearest_copy", "induction", induction, (T, T))
    after = followers(tokens)  # for each token, what followed its earlier copies
    seen_before = [q for q in range(T) if after[q]]
    reads = {q: max(range(T), key=induction[q].__getitem__) for q in seen_before}  # the key each row reads most
    right = [q for q in seen_before if q + 1 < T and reads[q] in after[q] and tokens[reads[q]] == tokens[q + 1]]
    if right:
        return max(right, key=lambda q: induction[q][reads[q]])
    return seen_before[-1] if seen_before else T - 1


def induction_circuit(tokens: Sequence[str], previous: Matrix, induction: Matrix, query: Optional[int] = None, *,
                      title: Optional[str] = None, unit: str = "token") -> Picture:  # previous, induction (T, T)
    """The two heads of an induction circuit at one query, drawn on the sentence itself.

    ``previous`` is a previous-token head's attention and ``induction`` an induction head's, each
    (T, T) (a later layer's head reads what an earlier one wrote). Below the row of tokens: the
    induction head's strongest link from ``query``, to key k. Above it: the previous-token head's
    strongest link from k, to p. When p holds the query's token, k is what followed that token last
    time, and the induction head hands it on: the circuit predicts tokens[k] next. The text says
    whether it does. ``unit`` names what a token is in the labels: "previous-character head" for a
    model that reads characters. With no ``query``, the picture takes the clearest right copy:
    ``clearest_copy``.

    >>> induction_circuit(list("abxab"), [[1, 0, 0, 0, 0], [1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0],
    ...                   [0, 0, 0, 1, 0]], [[1, 0, 0, 0, 0]] * 3 + [[0, 1, 0, 0, 0]] * 2, query=3)
    induction_circuit: the induction head at 3 'a' reads 1 'b' most (1.00); the previous-token head at 1 'b' reads 0 'a' most (1.00); 0 holds 'a', the query's token: 'b' followed 'a' last time, so the circuit predicts 'b'
    """
    func = "induction_circuit"
    T = check_labels(func, "tokens", tokens)
    if T > MAX_TOKENS:
        raise ShapeError(f"{func}: tokens has {T} tokens; at most {MAX_TOKENS} fit in one picture (MAX_TOKENS)")
    for name, M in (("previous", previous), ("induction", induction)):
        if (not isinstance(M, (list, tuple)) or not M or not isinstance(M[0], (list, tuple))
                or (M[0] and isinstance(M[0][0], (list, tuple)))):  # a list of heads is not one head
            raise TypeError(f"{func}: {name} must be one head's (T, T) attention matrix, got {shorten(M)}")
        check_head_weights(func, name, M, (T, T))
    if query is None:
        query = clearest_copy(tokens, induction)
    elif not 0 <= check_int(func, "query", query) < T:
        raise ValueError(f"{func}: query is {shorten(query)}; it must be a position from 0 to {T - 1}")
    if title is not None:
        check_type(func, "title", title, str, "a str")
    check_type(func, "unit", unit, str, "a str")

    k = max(range(T), key=induction[query].__getitem__)  # the key the induction head reads most (the first of ties)
    p = max(range(T), key=previous[k].__getitem__)  # what the previous-token head reads from there
    copies = tokens[p] == tokens[query] and p < k
    shown = [t if t.strip() else "␣" for t in tokens]
    said = (f"the induction head at {query} {shown[query]!r} reads {k} {shown[k]!r} most ({induction[query][k]:.2f}); "
            f"the previous-{unit} head at {k} {shown[k]!r} reads {p} {shown[p]!r} most ({previous[k][p]:.2f}); ")
    said += (f"{p} holds {shown[p]!r}, the query's token: {shown[k]!r} followed {shown[p]!r} last time, so the circuit "
             f"predicts {shown[k]!r}" if copies else
             f"{p} does not hold the query's token {shown[query]!r} before {k}: no copy to hand on here")
    if copies:
        verdict = (f"{shown[p]!r} came before {shown[k]!r}, and {shown[query]!r} is here now: the circuit predicts "
                   f"{shown[k]!r} next")
    elif p >= k:  # the previous-token head at k reads k itself (or, unmasked, a later token)
        verdict = (f"the previous-{unit} head at {shown[k]!r} reads {'itself' if p == k else 'a later ' + unit}, "
                   f"not the {unit} before it: no copy here")
    else:
        verdict = f"the previous-{unit} head at {shown[k]!r} reads {shown[p]!r}, not {shown[query]!r}: no copy here"
    text = f"{func}: {said}"

    box, gap, side = 26.0, 6.0, 30.0
    box_w = max(box, max(_text_width(t, 14) for t in shown) + 8.0)  # wide enough for the longest token ("<unk>")
    width = max(2 * side + T * (box_w + gap) - gap, 560.0)
    left = (width - (T * (box_w + gap) - gap)) / 2
    row_y, height = 150.0, 300.0

    def centre(j: int) -> float:
        return left + j * (box_w + gap) + box_w / 2

    heading = title if title is not None else f"The induction circuit at {shown[query]!r}, position {query}"
    body = [_text(width / 2, 22, heading, anchor="middle", size=14, weight="bold")]
    for j, t in enumerate(shown):  # the sentence, one box per token, the three that matter filled
        fill = {query: "#cfe3f5", k: "#fbd9c4", p: "#e3e3e3"}.get(j, "#ffffff")
        body.append(f'<rect x="{_n(centre(j) - box_w / 2)}" y="{_n(row_y - box / 2)}" width="{_n(box_w)}" '
                    f'height="{_n(box)}" fill="{fill}" stroke="#888888"/>')
        weight = "bold" if j in (query, k, p) else "normal"
        body.append(_text(centre(j), row_y + 5, t, anchor="middle", size=14, weight=weight))
        body.append(_text(centre(j), row_y + box / 2 + 12, str(j), anchor="middle", size=9, fill="#777777"))

    def arc(a: int, b: int, up: bool, colour: str, label: str) -> list[str]:
        """A curved arrow from box a to box b, above the row (up) or below it, with its label at its peak."""
        x1, x2 = centre(a), centre(b)
        y = row_y - box / 2 - 2 if up else row_y + box / 2 + 16
        bend = min(90.0, 25.0 + 6.0 * abs(a - b)) * (-1 if up else 1)
        peak_y = y + bend * 0.75
        parts = [f'<path d="M {_n(x1)} {_n(y)} Q {_n((x1 + x2) / 2)} {_n(y + bend * 1.5)} {_n(x2)} {_n(y)}" '
                 f'fill="none" stroke="{colour}" stroke-width="2.5"/>']
        if a != b:  # the arrowhead at b, pointing back at the row
            d = 6.0 if up else -6.0
            parts.append(f'<polygon points="{_n(x2)},{_n(y)} {_n(x2 - 5)},{_n(y - d * 1.6)} '
                         f'{_n(x2 + 5)},{_n(y - d * 1.6)}" fill="{colour}"/>')
        middle = min(max((x1 + x2) / 2, 160.0), width - 160.0)  # a label of about 40 characters stays on the page
        parts.append(_text(middle, peak_y + (-6 if up else 14), label, anchor="middle", weight="bold", fill=colour))
        return parts

    body += arc(k, p, True, "#D55E00",
                f"previous-{unit} head: {shown[k]!r} reads {shown[p]!r} ({previous[k][p]:.2f})")
    body += arc(query, k, False, "#0072B2",
                f"induction head: {shown[query]!r} reads {shown[k]!r} ({induction[query][k]:.2f})")
    body.append(_text(width / 2, height - 14, verdict, anchor="middle", size=13, weight="bold", fill="#333333"))
    desc = (f"The sentence as a row of boxes. Above it, an orange arc: where the previous-{unit} head reads from "
            f"key k. Below it, a blue arc: where the induction head reads from the query. {text}")
    return Picture(_svg(width, height, heading, desc, body), text)


# === A line chart ===


def check_marks(func: str, name: str, marks: object, first: float, last: float) -> None:
    """A dict {x: label}: each x a number on the chart, from ``first`` to ``last``, each label a str."""
    if not isinstance(marks, Mapping):
        raise TypeError(f"{func}: {name} must be a dict {{x: label}}, got {type(marks).__name__}")
    if len(marks) > MAX_POINTS:
        raise ShapeError(f"{func}: {name} has {len(marks)} entries; at most {MAX_POINTS} (MAX_POINTS)")
    for x, label in marks.items():
        if not is_number(x) or not first <= x <= last:
            raise ValueError(f"{func}: {name} has x = {shorten(x)}; marks must be numbers from {shorten(first)} to "
                             f"{shorten(last)}")
        if not isinstance(label, str):
            raise TypeError(f"{func}: {name}[{shorten(x)}] must be a str label, got {shorten(label)}")


def _round_ticks(lo: float, hi: float) -> Optional[tuple[float, float, list[float], int]]:
    """About five round ticks that cover lo..hi: a step of 1, 2, 2.5 or 5 times a power of ten. Returns the
    new ends, the ticks and how many decimals show them; None where no round step fits (float64's edges)."""
    try:
        raw = (hi - lo) / 4
        power = 10.0 ** math.floor(math.log10(raw))
        step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
        first, last = math.floor(lo / step) * step, math.ceil(hi / step) * step
        ticks = [first + k * step for k in range(round((last - first) / step) + 1)]
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    if not all_finite([ticks]) or len(ticks) > 12:
        return None
    decimals = max(0, -math.floor(math.log10(step) + 1e-9) + (step / power == 2.5))
    return first, last, ticks, decimals


def line_chart(values: Sequence[float], *, title: str, x_label: str, y_label: str,
               marks: Optional[Mapping[float, str]] = None, x_values: Optional[Sequence[float]] = None,
               guides: Optional[Mapping[float, str]] = None) -> Picture:  # values (n,), x_values (n,)
    """``values`` as a line over x = 0, 1, 2, ... (or over ``x_values``); ``marks`` = {x: label} draws a dashed
    vertical line, ``guides`` = {y: label} a dashed horizontal one (the loss of guessing, say). The y axis has
    round ticks.

    >>> print(line_chart([2.0, 1.0, 0.5], title="loss", x_label="step", y_label="loss"))
    line_chart loss: 3 values from 2.0000 (step 0) to 0.5000 (step 2); lowest 0.5000 at step 2
    """
    func = "line_chart"
    if isinstance(values, (list, tuple)) and len(values) > MAX_POINTS:
        raise ShapeError(f"{func}: values has {len(values)} entries; at most {MAX_POINTS} (MAX_POINTS)")
    n = check_vector(func, "values", values)
    for name, label in (("title", title), ("x_label", x_label), ("y_label", y_label)):
        check_type(func, name, label, str, "a str")
    if x_values is not None:
        if check_vector(func, "x_values", x_values) != n:
            raise ShapeError(f"{func}: x_values has {len(x_values)} entries for {n} values; give one x per value")
        if any(b <= a for a, b in zip(x_values, x_values[1:])):
            raise ValueError(f"{func}: x_values must increase from left to right")
    for name, v in (("values", values), ("x_values", x_values or [0])):  # the chart scales by the span
        if not all_finite([[max(v) - min(v)]]):
            raise too_large(func, f"the {name}")  # largest minus smallest overflows
    if marks is not None:
        check_marks(func, "marks", marks, *((0, n - 1) if x_values is None else (x_values[0], x_values[-1])))
    if guides is not None:
        if not isinstance(guides, Mapping) or len(guides) > 10:
            raise TypeError(f"{func}: guides must be a dict {{y: label}} of at most 10 lines, got {shorten(guides)}")
        for y, label in guides.items():
            check_number(func, "a guide's y", y)
            check_type(func, f"guides[{_value(y)}]", label, str, "a str label")
    xs = list(range(n)) if x_values is None else list(x_values)
    mark_items = sorted((marks or {}).items())
    guide_items = sorted((guides or {}).items())

    width, height = 560.0, 320.0
    left, right, top, bottom = 70.0, 20.0, 40.0, 50.0
    lo, hi = min([*values, *(y for y, _ in guide_items)]), max([*values, *(y for y, _ in guide_items)])
    if not all_finite([[hi - lo]]):
        raise too_large(func, "the values and guides")  # largest minus smallest overflows
    if hi == lo:
        lo, hi = lo - 1, hi + 1  # past 2**53, a float plus 1 is itself: the spans below can still be 0
    rounded = _round_ticks(lo, hi) if hi > lo else None
    if rounded is not None:
        lo, hi = rounded[0], rounded[1]
    x_lo, x_hi = xs[0], xs[-1] if xs[-1] > xs[0] else xs[0] + 1
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:  # one x, or one past 2**53: at the left edge
        return left + ((x - x_lo) / (x_hi - x_lo) if x_hi > x_lo else 0.0) * plot_w

    def py(v: float) -> float:  # a flat line past 2**53: in the middle
        return top + ((hi - v) / (hi - lo) if hi > lo else 0.5) * plot_h

    body = [_text(width / 2, 22, title, anchor="middle", size=14, weight="bold"),
            f'<line x1="{_n(left)}" y1="{_n(top)}" x2="{_n(left)}" y2="{_n(top + plot_h)}" stroke="#333333"/>',
            f'<line x1="{_n(left)}" y1="{_n(top + plot_h)}" x2="{_n(left + plot_w)}" y2="{_n(top + plot_h)}" '
            'stroke="#333333"/>',
            _text(left + plot_w / 2, height - 10, x_label, anchor="middle"),
            f'<text x="16" y="{_n(top + plot_h / 2)}" text-anchor="middle" font-size="12" '
            f'transform="rotate(-90 16 {_n(top + plot_h / 2)})">{_esc(y_label)}</text>']
    # Round y ticks; at float64's edges, five evenly spaced: t / 4 first, so a span near float64's largest is not
    # multiplied past it.
    ticks = rounded[2] if rounded else [lo + (hi - lo) * (t / 4) for t in range(5)] if hi > lo else [lo]
    for v in ticks:
        y = py(v)
        shown = f"{v:.{rounded[3]}f}" if rounded and abs(v) < 1e6 else f"{v:.3g}"
        body.append(f'<line x1="{_n(left - 4)}" y1="{_n(y)}" x2="{_n(left + plot_w)}" y2="{_n(y)}" stroke="#e0e0e0"/>')
        body.append(_text(left - 6, y + 4, shown, anchor="end", size=10))
    for v, label in guide_items:
        body.append(f'<line x1="{_n(left)}" y1="{_n(py(v))}" x2="{_n(left + plot_w)}" y2="{_n(py(v))}" '
                    'stroke="#009E73" stroke-dasharray="6 3"/>')
        body.append(_text(left + plot_w - 4, py(v) - 5, label, anchor="end", size=11, fill="#009E73"))
    for x in sorted({xs[0], xs[len(xs) // 2], xs[-1]}):
        body.append(_text(px(x), top + plot_h + 16, _value(x), anchor="middle", size=10))
    for x, label in mark_items:
        body.append(f'<line x1="{_n(px(x))}" y1="{_n(top)}" x2="{_n(px(x))}" y2="{_n(top + plot_h)}" '
                    'stroke="#D55E00" stroke-dasharray="5 3"/>')
        body.append(_text(px(x) + 4, top + 12, label, size=11, fill="#D55E00"))
    points = " ".join(f"{_n(px(x))},{_n(py(v))}" for x, v in zip(xs, values))
    body.append(f'<polyline points="{points}" fill="none" stroke="#0072B2" stroke-width="2"/>')
    low = min(range(n), key=lambda i: (values[i], i))
    text = (f"{func} {title}: {n} values from {values[0]:.4f} ({x_label} {_value(xs[0])}) to {values[-1]:.4f} "
            f"({x_label} {_value(xs[-1])}); lowest {values[low]:.4f} at {x_label} {_value(xs[low])}")
    if mark_items:
        text += "; marks: " + ", ".join(f"{_value(x)} {label}" for x, label in mark_items)
    if guide_items:
        text += "; guides: " + ", ".join(f"{label} at {v:.4f}" for v, label in guide_items)
    return Picture(_svg(width, height, title, f"A line chart of {y_label} against {x_label}. {text}", body), text)


# === The command ===


# === The block around attention ===


def block_diagram(x: Matrix, weights: BlockWeights, *, mask: Optional[Mask] = None, norm_first: bool = False,
                  activation: str = "relu") -> Picture:  # x (T, d_model)
    """Where multi-head attention sits in a transformer encoder layer, drawn from ``encoder_layer``'s own steps.

    One box per step, left to right, each with the shape of what it outputs and that output's size
    (rms, the square root of the mean square of its entries); the residual paths jump over
    attention and over the feed-forward layer to the "+" boxes. ``norm_first`` puts LayerNorm
    before each sub-layer (pre-norm) instead of after each sum (post-norm).

    >>> from mha_lists import init_mha_weights
    >>> w = BlockWeights(init_mha_weights(2, 1, seed=0), [[1.0], [1.0]], [0.0], [[1.0, -1.0]], [0.0, 0.0],
    ...                  [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0])
    >>> print(block_diagram([[1.0, 0.0], [0.0, 1.0]], w))
    encoder layer (post-norm): x 2×2 (rms 0.71) -> attention 2×2 (rms 0.35) -> + 2×2 (rms 0.82) -> LayerNorm 1 2×2 (rms 1.00) -> feed-forward 2×2, hidden 2×1 (rms 0.00) -> + 2×2 (rms 1.00) -> LayerNorm 2 2×2 (rms 1.00)
    """
    scale = check_block("block_diagram", x, weights, mask, norm_first, activation, LAYER_NORM_EPS)
    try:
        steps = block_steps(x, weights, mask, scale, norm_first, activation, LAYER_NORM_EPS)
        sizes = [math.sqrt(math.fsum(v * v for row in M for v in row) / (len(M) * len(M[0]))) for _, M in steps]
    except OverflowError as error:
        raise too_large("block_diagram", error) from None
    d_ff = len(weights.W_1[0])
    labels = [f"{len(M)}×{len(M[0])}" + (f", hidden {len(M)}×{d_ff}" if name == "feed-forward" else "")
              for name, M in steps]
    kind = "pre-norm" if norm_first else "post-norm"
    text = f"encoder layer ({kind}): " + " -> ".join(
        f"{name} {label} (rms {size:.2f})" for (name, _), label, size in zip(steps, labels, sizes))
    box, gap, top = 118.0, 26.0, 70.0
    width = len(steps) * (box + gap) + gap
    body = [_text(width / 2, 22, f"One encoder layer ({kind}, {activation}): where multi-head attention sits",
                  anchor="middle", size=14, weight="bold")]
    x_of = [gap + k * (box + gap) for k in range(len(steps))]
    sums = [k for k, (name, _) in enumerate(steps) if name == "+"]
    for k, ((name, _), label, size) in enumerate(zip(steps, labels, sizes)):
        colour = {"attention": "#dbe9f6", "feed-forward": "#fde7cf"}.get(name, "#f2f2f2")
        weight = "bold" if name == "attention" else "normal"
        body.append(f'<rect x="{_n(x_of[k])}" y="{_n(top)}" width="{_n(box)}" height="64" rx="6" fill="{colour}" '
                    f'stroke="#555555"><title>{_esc(name)}: {_esc(label)}, rms {size:.4f}</title></rect>')
        body.append(_text(x_of[k] + box / 2, top + 20, name, anchor="middle", weight=weight))
        body.append(_text(x_of[k] + box / 2, top + 38, label, anchor="middle", size=11))
        body.append(_text(x_of[k] + box / 2, top + 54, f"rms {size:.2f}", anchor="middle", size=11, fill="#444444"))
        if k:
            body += _arrow(x_of[k - 1] + box, top + 32, x_of[k], top + 32)
    for n, k in enumerate(sums):  # each sum adds the stream from before its sub-layer
        start = 0 if n == 0 else sums[0] + (0 if norm_first else 1)
        lift = top - 18 - 12 * n
        body.append(f'<polyline points="{_n(x_of[start] + box / 2)},{_n(top)} {_n(x_of[start] + box / 2)},{_n(lift)} '
                    f'{_n(x_of[k] + box / 2)},{_n(lift)}" fill="none" stroke="#888888" stroke-width="1.5"/>')
        body += _arrow(x_of[k] + box / 2, lift, x_of[k] + box / 2, top, colour="#888888")
        body.append(_text((x_of[start] + x_of[k] + box) / 2, lift - 4, "residual", anchor="middle", size=10,
                          fill="#666666"))
    desc = text
    return Picture(_svg(width, top + 80, f"encoder layer, {kind}", desc, body), text)


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m mha_lists.teaching.pictures PATH.svg``: write the pipeline of the default example."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].endswith(".svg"):
        print("usage: python -m mha_lists.teaching.pictures PATH.svg  (writes the pipeline of the default example)",
              file=sys.stderr)
        return 2
    try:
        pipeline(running_example()).save(args[0])
    except ValueError as error:  # save says what is wrong with the path
        print(f"pictures: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
