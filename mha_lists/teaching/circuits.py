"""Reading a head's job from its weights alone (Elhage et al. 2021, "A Mathematical Framework for
Transformer Circuits"), with rows as tokens (x W), as everywhere in this project.

A head's score between a query row x_i and a key row x_j is x_i W_Q W_K^T x_j^T (times the
scale), and what it writes for a mix of rows x is x W_V W_O^h, where W_O^h is the head's
d_v rows of W_O. So two d_model x d_model matrices say everything a head does:

    W_QK = W_Q W_K^T      the QK circuit: which rows attend to which
    W_OV = W_V W_O^h      the OV circuit: what a head writes for the row it attends to

Read through the tables the model has:

    P W_QK P^T            positional scores of layer 0 (its queries and keys read x + P):
                          a previous-token head is a stripe just below the diagonal
    E W_OV W_U            what a head copies: row t, the logits it adds when it attends to token t

**K-composition.** A layer-1 head's keys read the residual stream, which holds what layer-0
heads wrote: y W_OV^g for head g. The part of its scores that comes from head g's output is
q W_QK^h (y W_OV^g)^T = q (W_QK^h (W_OV^g)^T) y^T, and the K-composition score of the pair is

    || W_QK^h (W_OV^g)^T ||_F  /  ( ||W_QK^h||_F ||W_OV^g||_F )

(||M||_F = sqrt of the sum of squares): near 0 when head g writes where head h's keys do not
read, larger when they line up. An induction head's keys read what a previous-token head
wrote, so that pair should score highest. Two random matrices give about 1/sqrt(d_model).

================================  ===================================================
qk_circuit, ov_circuit            a head's W_QK and W_OV (d_model, d_model)
positional_scores                 P W_QK P^T (times the scale) of a layer-0 head
k_composition, Composition        the K-composition score of every earlier-later pair
composed_qk                       E W_QK (E W_OV)^T: which token a later head's query looks for in
                                  what an earlier head wrote at the key
copies                            for each token, the token a head's OV circuit raises most
frobenius                         ||M||_F
================================  ===================================================
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..core.attention import MHAWeights, check_weights
from ..core.checks import check_int, check_matrix, quote_int, too_large
from ..core.matrix import Matrix, finite, product
from .model import Model, check_model

__all__ = ["qk_circuit", "ov_circuit", "positional_scores", "k_composition", "composed_qk", "copies", "frobenius"]


def _check_head(func: str, w: object, head: object) -> dict[str, int]:
    d = check_weights(func, "w", w)
    if not 0 <= check_int(func, "head", head) < d["h"]:
        raise ValueError(f"{func}: head is {quote_int(head)}; this layer's heads are 0 to {d['h'] - 1}")
    if d["g"] != d["h"]:
        raise ValueError(f"{func}: w has {d['h']} query heads and {d['g']} key/value heads; a head's circuits here "
                         "need its own keys and values")
    return d


def _check_layer_head(func: str, model: object, layer: object, head: object) -> MHAWeights:
    check_model(func, "model", model)
    if not 0 <= check_int(func, "layer", layer) < len(model.layers):
        raise ValueError(f"{func}: layer is {quote_int(layer)}; the model's layers are 0 to {len(model.layers) - 1}")
    _check_head(func, model.layers[layer], head)
    return model.layers[layer]


def qk_circuit(w: MHAWeights, head: int) -> Matrix:  # -> (d_model, d_model)
    """W_QK = W_Q^h (W_K^h)^T: x_i W_QK x_j^T is head h's (unscaled) score of query row x_i for key row x_j.

    >>> w = MHAWeights([[[1.0], [0.0]]], [[[0.0], [2.0]]], [[[1.0], [1.0]]], [[3.0, 0.0]])
    >>> qk_circuit(w, 0)
    [[0.0, 2.0], [0.0, 0.0]]
    """
    _check_head("qk_circuit", w, head)
    return product(w.W_Q[head], [list(col) for col in zip(*w.W_K[head])])


def ov_circuit(w: MHAWeights, head: int) -> Matrix:  # -> (d_model, d_model)
    """W_OV = W_V^h W_O^h, W_O^h the head's d_v rows of W_O: a row x attended to adds x W_OV to the output.

    >>> w = MHAWeights([[[1.0], [0.0]]], [[[0.0], [2.0]]], [[[1.0], [1.0]]], [[3.0, 0.0]])
    >>> ov_circuit(w, 0)
    [[3.0, 0.0], [3.0, 0.0]]
    """
    d = _check_head("ov_circuit", w, head)
    return product(w.W_V[head], w.W_O[head * d["d_v"]:(head + 1) * d["d_v"]])


def positional_scores(model: Model, head: int) -> Matrix:  # -> (positions, positions)
    """P W_QK P^T times the scale, for head ``head`` of layer 0: the part of its scores that positions
    alone give (row i: query position i; column j: key position j). Only layer 0 reads positions when
    they enter its queries and keys, as in the models that train here."""
    w = _check_layer_head("positional_scores", model, 0, head)
    scale = 1 / math.sqrt(len(w.W_Q[0][0])) if model.scale is None else model.scale
    P = model.position_embeddings
    PW = product(P, qk_circuit(w, head))
    return [[scale * s for s in row] for row in product(PW, [list(col) for col in zip(*P)])]


def frobenius(M: Matrix) -> float:
    """||M||_F: the square root of the sum of the squares of every entry.

    >>> frobenius([[3.0, 0.0], [0.0, 4.0]])
    5.0
    """
    check_matrix("frobenius", "M", M)
    try:
        return _norm(M)
    except OverflowError as error:
        raise too_large("frobenius", error) from None


def _norm(M: Matrix) -> float:
    squares = math.fsum(x * x for row in M for x in row)
    if squares == math.inf:  # entries past 1e154 square past float64's range
        raise OverflowError("the squares")
    return math.sqrt(squares)


class Composition(NamedTuple):
    earlier: tuple[int, int]  # (layer, head) whose output is read
    later: tuple[int, int]  # (layer, head) whose keys read it
    score: float


def k_composition(model: Model) -> list[Composition]:
    """The K-composition score of every pair (earlier head, later head) of consecutive layers, in order:
    ||W_QK^later (W_OV^earlier)^T||_F / (||W_QK^later||_F ||W_OV^earlier||_F)."""
    check_model("k_composition", "model", model)
    try:
        return _k_composition(model)
    except (OverflowError, ZeroDivisionError) as error:  # a circuit of zeros has no direction to compare
        raise ValueError(f"k_composition: {error}; every circuit must be finite and not all zeros") from None


def _k_composition(model: Model) -> list[Composition]:
    out = []
    for layer in range(1, len(model.layers)):
        earlier, later = model.layers[layer - 1], model.layers[layer]
        for g in range(len(earlier.W_Q)):
            OV = ov_circuit(earlier, g)
            OV_T = [list(col) for col in zip(*OV)]
            for h in range(len(later.W_Q)):
                QK = qk_circuit(later, h)
                score = _norm(product(QK, OV_T)) / (_norm(QK) * _norm(OV))
                out.append(Composition((layer - 1, g), (layer, h), score))
    return out


def composed_qk(model: Model, layer: int, head: int, earlier: int) -> Matrix:  # -> (vocab_size, vocab_size)
    """E W_QK (E W_OV)^T times the scale, W_QK head ``head``'s of ``layer`` and W_OV head ``earlier``'s of the
    layer before: row t, a query holding token t's embedding; column u, a key holding what the earlier head
    writes when it attends to token u. Its part of the later head's score, from the weights alone. When the
    earlier head reads the token before, a head that looks for "the token after an earlier copy of mine"
    (an induction head) draws a diagonal.

    >>> earlier = MHAWeights([[[1.0], [0.0]]], [[[1.0], [0.0]]], [[[0.0], [1.0]]], [[1.0, 0.0]])  # W_OV: e_1 -> e_0
    >>> later = MHAWeights([[[1.0], [0.0]]], [[[1.0], [0.0]]], [[[1.0], [0.0]]], [[1.0, 0.0]])  # W_QK: e_0 . e_0
    >>> model = Model([[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0]], [earlier, later], [[1.0, 0.0], [0.0, 1.0]], scale=1.0)
    >>> composed_qk(model, 1, 0, 0)  # a query holding token 0 looks for a key where token 1 was read
    [[0.0, 1.0], [0.0, 0.0]]
    """
    if isinstance(layer, int) and not isinstance(layer, bool) and layer == 0:
        raise ValueError("composed_qk: layer is 0; its heads read no earlier head (give layer 1 or later)")
    w = _check_layer_head("composed_qk", model, layer, head)
    _check_layer_head("composed_qk", model, layer - 1, earlier)
    scale = 1 / math.sqrt(len(w.W_Q[0][0])) if model.scale is None else model.scale
    E = model.token_embeddings
    try:
        written = product(E, ov_circuit(model.layers[layer - 1], earlier))  # row u: what the earlier head writes
        scores = product(product(E, qk_circuit(w, head)), [list(col) for col in zip(*written)])
        return finite([[scale * s for s in row] for row in scores], "the scores")
    except OverflowError as error:
        raise too_large("composed_qk", error) from None


def copies(model: Model, layer: int, head: int) -> list[int]:
    """For each token t, the token whose logit head ``head`` of ``layer`` raises most when it attends to
    a row holding t: the argmax of row t of E W_OV W_U. A head that copies gives t back for most t."""
    w = _check_layer_head("copies", model, layer, head)
    logits = product(product(model.token_embeddings, ov_circuit(w, head)), model.W_U)
    return [row.index(max(row)) for row in logits]
