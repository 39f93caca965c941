"""``python -m mha_lists.tools.bench``: how fast is pure-Python attention?

Measures, on this machine (numbers vary between machines and runs; nothing
here is asserted by the test suite):

0. At the running example's size (5 tokens, d_model 16, 2 heads, causal mask):
   what one forward pass walks through (frames of the package, functions, files,
   counted with ``sys.setprofile``); the checked forward pass against the same
   arithmetic with no checks and no calls into the package; forward + backward against
   the forward pass, against the same arithmetic unchecked (the floor of an
   fsum per entry) and against a scalar autograd engine: its best run, and the
   mean of runs in a row with Python's cycle collector on (as a learner runs
   it) and off (the arithmetic alone). The engine's graph is cyclic garbage,
   which the collector has to find; the lists here are freed as they go.
1. ``matmul`` against the textbook triple index loop at 16x768 @ 768x768, and
   that both give bit-identical results. The textbook loop is timed twice: as
   usually written, with ``sum`` (whose last digits changed in CPython 3.12),
   and with ``math.fsum``, which gives exactly matmul's numbers. And against
   the fastest fsum formulation measured so far (B's columns copied to floats
   first), the limit for a product whose every sum is correctly rounded.
2. One forward pass of ``multi_head_attention`` at GPT-2-small width
   (d_model 768, 12 heads, 16 tokens), and the forward + backward pass
   (``multi_head_attention_backward``) against it.
3. Gradients of a small layer (d_model 32, 4 heads, 32 tokens): forward +
   backward against the forward alone, and against a scalar autograd engine
   on the same layer -- micrograd's design, one object per number, a graph,
   the chain rule applied node by node -- written below for this comparison
   only, and checked to give the same gradients.

Why two layers for the backward pass: the weight gradients X^T dQ are
d_model x d_k sums of seq_len products each, where the forward projections
are seq_len x d_k sums of d_model products. With few tokens and a wide model
(GPT-2 width, 16 tokens) the backward pass makes many short sums, each with
the cost of a call; with as many tokens as d_model the counts are alike.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from itertools import repeat
from operator import mul

from ..core.attention import MHAWeights, multi_head_attention
from ..teaching.weights import kv_head_for
from ..core.checks import check_type, check_positive_int, shorten
from ..core.gradients import multi_head_attention_backward
from ..core.matrix import Matrix
from ..teaching.lists_as_matrices import matmul
from ..core.softmax_and_masks import causal_mask
from ..teaching.example import running_example
from ..teaching.weights import derive_rng, init_mha_weights
from .cli import OneLineErrorParser, size_type

MAX_REPEAT = 100  # --repeat: runs of each measurement
MAX_RUNS = 100 * MAX_REPEAT  # runs of one timing (main times the running example 100 * --repeat times)
MAX_ENTRIES = 10_000_000  # entries of a random matrix (a 768x768 matrix has 589,824)


def check_function(func: str, name: str, value: object) -> Callable:
    """A function of no arguments, to time or to count."""
    if not callable(value):
        raise TypeError(f"{func}: {name} must be a function of no arguments (a lambda), got {shorten(value)}")
    return value


def textbook_matmul(A: Matrix, B: Matrix, total: Callable = sum) -> Matrix:
    """The triple index loop as textbooks write it; ``total=math.fsum`` gives matmul's exact numbers."""
    n = len(B)
    return [[total(A[i][t] * B[t][j] for t in range(n)) for j in range(len(B[0]))] for i in range(len(A))]


def copied_columns_matmul(A: Matrix, B: Matrix) -> Matrix:
    """matmul with B's columns copied into new floats first (adjacent in memory): the fastest
    fsum formulation measured; ``float.__mul__(x, 1.0)`` is exact, so the numbers are matmul's."""
    columns = [list(map(float.__mul__, col, repeat(1.0))) for col in zip(*B)]
    return [[math.fsum(map(mul, row, col)) for col in columns] for row in A]


def _product(A: Matrix, B: Matrix) -> Matrix:
    """A B, as matmul computes it, without its checks."""
    columns = list(zip(*B))
    return [[math.fsum(map(mul, row, col)) for col in columns] for row in A]


def _product_t(A: Matrix, B: Matrix) -> Matrix:
    """A B^T: the rows of A times the rows of B, the same sums as matmul(A, transpose(B))."""
    return [[math.fsum(map(mul, row, other)) for other in B] for row in A]


def _transposed(M: Matrix) -> Matrix:
    return [list(col) for col in zip(*M)]


def unchecked_forward(x: Matrix, weights: MHAWeights, mask: list[list[bool]]) -> Matrix:
    """Multi-head attention, the same arithmetic in the same order as the library, with no
    checks and no call into the library's core: what the checks and the named steps cost is the
    difference. (No biases, one key/value head per query head, the default scale.)"""
    heads = []
    for W_Q, W_K, W_V in zip(weights.W_Q, weights.W_K, weights.W_V):
        Q, K, V = _product(x, W_Q), _product(x, W_K), _product(x, W_V)
        c = 1 / math.sqrt(len(K[0]))
        scores = [[s * c if keep else -math.inf for s, keep in zip(row, keep_row)]
                  for row, keep_row in zip(_product(Q, _transposed(K)), mask)]
        weights_ = []
        for row in scores:
            top = max(row)
            exps = [math.exp(s - top) for s in row]
            total = math.fsum(exps)
            weights_.append([e / total for e in exps])
        heads.append(_product(weights_, V))
    concat = [[v for head in heads for v in head[i]] for i in range(len(x))]
    return _product(concat, weights.W_O)


def unchecked_forward_backward(x: Matrix, weights: MHAWeights, G: Matrix) -> tuple[Matrix, list[Matrix], Matrix]:
    """Forward and backward of multi-head attention, the same arithmetic as
    ``multi_head_attention_backward`` with no checks and no call into the library's core: the floor
    of this formulation (an ``fsum`` per entry). Returns dx, the dW of every head (W_Q, then
    W_K, then W_V) and dW_O. (No biases, one key/value head per query head, the default scale.)"""
    Q = [_product(x, W) for W in weights.W_Q]
    K = [_product(x, W) for W in weights.W_K]
    V = [_product(x, W) for W in weights.W_V]
    c = 1 / math.sqrt(len(K[0][0]))
    A, heads = [], []
    for Q_h, K_h, V_h in zip(Q, K, V):
        A_h = []
        for row in _product_t(Q_h, K_h):
            scores = [s * c for s in row]
            top = max(scores)
            exps = [math.exp(s - top) for s in scores]
            total = math.fsum(exps)
            A_h.append([e / total for e in exps])
        A.append(A_h)
        heads.append(_product(A_h, V_h))
    concat = [[v for head in heads for v in head[i]] for i in range(len(x))]
    dW_O = _product(_transposed(concat), G)
    d_concat = _product_t(G, weights.W_O)
    d_v = len(V[0][0])
    dQ, dK, dV = [], [], []
    for h, (Q_h, K_h, V_h, A_h) in enumerate(zip(Q, K, V, A)):
        d_head = [row[h * d_v:(h + 1) * d_v] for row in d_concat]
        dS = []
        for p, dp in zip(A_h, _product_t(d_head, V_h)):
            dot = math.fsum(map(mul, p, dp))
            dS.append([p_j * (dp_j - dot) for p_j, dp_j in zip(p, dp)])
        dQ.append([[v * c for v in row] for row in _product(dS, K_h)])
        dK.append([[v * c for v in row] for row in _product(_transposed(dS), Q_h)])
        dV.append(_product(_transposed(A_h), d_head))
    x_T = _transposed(x)
    dW = [_product(x_T, d) for d in dQ + dK + dV]
    d_all = [[v for d in dQ + dK + dV for v in d[i]] for i in range(len(x))]
    W_all = [[v for W in weights.W_Q + weights.W_K + weights.W_V for v in W[r]] for r in range(len(x[0]))]
    return _product_t(d_all, W_all), dW, dW_O


def count_calls(run: Callable[[], object]) -> tuple[int, int, int]:
    """What ``run`` walks through in the package: (frames, distinct functions, files).

    Every frame of a Python function of the package counts, each time one starts
    (``sys.setprofile``'s "call" event; a generator's frame counts each time it resumes).
    Comprehensions, generator expressions and lambdas (code named ``<...>``) are not
    functions a reader follows, and are left out.
    """
    check_function("count_calls", "run", run)
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    seen: Counter = Counter()

    def profile(frame, event, arg):
        code = frame.f_code
        if event == "call" and code.co_filename.startswith(package) and not code.co_name.startswith("<"):
            seen[(code.co_filename, code.co_firstlineno, code.co_name)] += 1  # one function: where it starts

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return sum(seen.values()), len(seen), len({file for file, _, _ in seen})


def best_time(func: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of ``repeat`` runs, in seconds, and the last result."""
    check_function("best_time", "func", func)
    check_positive_int("best_time", "repeat", repeat, most=MAX_RUNS)
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def run_times(func: Callable[[], object], runs: int, *, collector: bool = True) -> list[float]:
    """The time of each of ``runs`` calls in a row, in seconds.

    With ``collector=False`` Python's cycle collector is off while they run, and
    collects once before each call (outside the timing): what the arithmetic
    alone costs, without finding garbage.
    """
    check_function("run_times", "func", func)
    check_positive_int("run_times", "runs", runs, most=MAX_RUNS)
    check_type("run_times", "collector", collector, bool, "True or False")
    times = []
    was_on = gc.isenabled()
    try:
        if not collector:
            gc.disable()
        for _ in range(runs):
            if not collector:
                gc.collect()
            start = time.perf_counter()
            func()
            times.append(time.perf_counter() - start)
    finally:
        if was_on:
            gc.enable()
    return times


def best_times(funcs: list[Callable[[], object]], repeat: int) -> list[tuple[float, object]]:
    """``best_time`` for several functions, run in turns (a, b, a, b, ...).

    Taking turns means a busy spell of the machine slows each of them alike,
    so their ratio holds better than with one function timed after the other.
    """
    if not isinstance(funcs, (list, tuple)) or not funcs:
        raise TypeError(f"best_times: funcs must be a non-empty list of functions, got {shorten(funcs)}")
    for n, func in enumerate(funcs):
        check_function("best_times", f"funcs[{n}]", func)
    check_positive_int("best_times", "repeat", repeat, most=MAX_RUNS)
    best, results = [math.inf] * len(funcs), [None] * len(funcs)
    for _ in range(repeat):
        for n, func in enumerate(funcs):
            start = time.perf_counter()
            results[n] = func()
            best[n] = min(best[n], time.perf_counter() - start)
    return list(zip(best, results))


def random_matrix(rows: int, cols: int, name: str) -> Matrix:
    """(rows, cols) draws of a standard normal, from the generator ``derive_rng(0, name)``."""
    check_positive_int("random_matrix", "rows", rows)
    check_positive_int("random_matrix", "cols", cols)
    check_type("random_matrix", "name", name, str, "a str")
    if rows * cols > MAX_ENTRIES:
        raise ValueError(f"random_matrix: {rows:,}x{cols:,} is {rows * cols:,} entries; at most {MAX_ENTRIES:,}")
    rng = derive_rng(0, name)
    return [[rng.gauss(0.0, 1.0) for _ in range(cols)] for _ in range(rows)]


# === A scalar autograd engine, for comparison only ===


class Scalar:
    """One number in a graph, as in micrograd's Value: its data, its grad, its inputs, its chain rule."""

    __slots__ = ("data", "grad", "_inputs", "_backward")

    def __init__(self, data: float, inputs: tuple = ()) -> None:
        self.data, self.grad, self._inputs, self._backward = data, 0.0, inputs, None

    def __add__(self, other: Scalar | float) -> Scalar:
        other = other if isinstance(other, Scalar) else Scalar(other)
        out = Scalar(self.data + other.data, (self, other))

        def backward() -> None:
            self.grad += out.grad
            other.grad += out.grad
        out._backward = backward
        return out

    def __mul__(self, other: Scalar | float) -> Scalar:
        other = other if isinstance(other, Scalar) else Scalar(other)
        out = Scalar(self.data * other.data, (self, other))

        def backward() -> None:
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = backward
        return out

    def exp(self) -> Scalar:
        out = Scalar(math.exp(self.data), (self,))

        def backward() -> None:
            self.grad += out.data * out.grad
        out._backward = backward
        return out

    def reciprocal(self) -> Scalar:
        out = Scalar(1.0 / self.data, (self,))

        def backward() -> None:
            self.grad -= out.grad / (self.data * self.data)
        out._backward = backward
        return out

    def backward(self) -> None:
        """Set d self / d node for every node of the graph: visit in reverse topological order."""
        order, seen, stack = [], set(), [(self, False)]
        while stack:  # an explicit stack: the graph is deeper than Python's recursion limit
            node, inputs_done = stack.pop()
            if inputs_done:
                order.append(node)
            elif id(node) not in seen:
                seen.add(id(node))
                stack.append((node, True))
                stack.extend((child, False) for child in node._inputs)
        self.grad = 1.0
        for node in reversed(order):
            if node._backward is not None:
                node._backward()


def scalar_sum(values) -> Scalar:
    total = Scalar(0.0)
    for v in values:
        total = total + v
    return total


def scalar_matmul(A: list[list[Scalar]], B: list[list[Scalar]]) -> list[list[Scalar]]:
    return [[scalar_sum(a * b for a, b in zip(row, col)) for col in zip(*B)] for row in A]


def scalar_attention_gradients(x: Matrix, weights: MHAWeights, grad_output: Matrix) -> tuple[Matrix, list[Matrix]]:
    """d sum(output * grad_output) / d x and / d W_Q by the scalar engine (no biases, no mask)."""
    wrap = lambda M: [[Scalar(v) for v in row] for row in M]  # noqa: E731
    X, W_O = wrap(x), wrap(weights.W_O)
    W_Q, W_K, W_V = ([wrap(M) for M in group] for group in (weights.W_Q, weights.W_K, weights.W_V))
    c = 1 / math.sqrt(len(weights.W_Q[0][0]))
    heads = []
    for h in range(len(W_Q)):
        g = kv_head_for(h, len(W_Q), len(W_K))
        Q, K, V = scalar_matmul(X, W_Q[h]), scalar_matmul(X, W_K[g]), scalar_matmul(X, W_V[g])
        head = []
        for q in Q:
            scores = [scalar_sum(a * b for a, b in zip(q, k)) * c for k in K]
            top = max(s.data for s in scores)
            exps = [(s + -top).exp() for s in scores]
            inverse_total = scalar_sum(exps).reciprocal()
            p = [e * inverse_total for e in exps]
            head.append([scalar_sum(p_j * V[j][col] for j, p_j in enumerate(p)) for col in range(len(V[0]))])
        heads.append(head)
    concat = [[v for head in heads for v in head[i]] for i in range(len(X))]
    output = scalar_matmul(concat, W_O)
    loss = scalar_sum(o * gv for out_row, g_row in zip(output, grad_output) for o, gv in zip(out_row, g_row))
    loss.backward()
    return [[v.grad for v in row] for row in X], [[[v.grad for v in row] for row in M] for M in W_Q]


def max_difference(A: list, B: list) -> float:
    if isinstance(A, list):
        return max(max_difference(a, b) for a, b in zip(A, B))
    return abs(A - B)


# === The measurements ===


def main(argv: list[str] | None = None) -> int:
    parser = OneLineErrorParser(prog="python -m mha_lists.tools.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=size_type(MAX_REPEAT), default=3,
                        help=f"runs of each measurement, 1 to {MAX_REPEAT}; the best counts (default 3)")
    args = parser.parse_args(argv)

    ex = running_example()
    mask = causal_mask(len(ex.x))
    frames, functions, files = count_calls(lambda: multi_head_attention(ex.x, ex.weights, mask=mask))
    print(f"the running example ({len(ex.x)} tokens, d_model {len(ex.x[0])}, {len(ex.weights.W_Q)} heads, "
          "causal mask)")
    print(f"  one multi_head_attention call enters {frames} frames of the package, "
          f"through {functions} functions in {files} files")
    (t_checked, out), (t_plain, plain) = best_times(
        [lambda: multi_head_attention(ex.x, ex.weights, mask=mask),
         lambda: unchecked_forward(ex.x, ex.weights, mask)], 100 * args.repeat)
    print(f"  forward pass, checked:                        {t_checked * 1e3:8.3f} ms")
    print(f"  the same arithmetic, no checks and no calls:  {t_plain * 1e3:8.3f} ms "
          f"(same bits: {out == plain})")
    print(f"  the checked forward pass takes {t_checked / t_plain:.2f}x the same arithmetic unchecked")
    G = random_matrix(len(ex.x), len(ex.x[0]), "bench/example_grad_output")
    (t_forward, _), (t_both, grads), (t_floor, (fx, fW, fW_O)) = best_times(
        [lambda: multi_head_attention(ex.x, ex.weights), lambda: multi_head_attention_backward(ex.x, ex.weights, G),
         lambda: unchecked_forward_backward(ex.x, ex.weights, G)], 100 * args.repeat)
    t_scalar, (dx, dW_Q) = best_time(lambda: scalar_attention_gradients(ex.x, ex.weights, G), 10 * args.repeat)
    same = fx == grads.x and fW == grads.W_Q + grads.W_K + grads.W_V and fW_O == grads.W_O
    print(f"  forward + backward: {t_both * 1e3:.3f} ms = {t_both / t_forward:.2f}x the forward pass (no mask)")
    print(f"  the same arithmetic, no checks and no calls: {t_floor * 1e3:.3f} ms (same bits: {same}); "
          f"the checked forward + backward takes {t_both / t_floor:.2f}x that")
    print(f"  scalar autograd engine, forward + backward, best of {10 * args.repeat} runs: {t_scalar * 1e3:.3f} ms = "
          f"{t_scalar / t_both:.1f}x the matrix-level gradients, {t_scalar / t_floor:.1f}x the same arithmetic "
          f"unchecked (largest difference {max(max_difference(dx, grads.x), max_difference(dW_Q, grads.W_Q)):.1e})")
    # The engine's graph is cyclic (each node's chain rule is a closure that holds the node), so
    # Python's cycle collector has to find it; the lists of the matrix-level code are freed as they go.
    runs = 10 * args.repeat
    mean = {collector: [math.fsum(run_times(func, runs, collector=collector)) / runs for func in (
        lambda: multi_head_attention_backward(ex.x, ex.weights, G),
        lambda: scalar_attention_gradients(ex.x, ex.weights, G))] for collector in (True, False)}
    for collector, words in ((True, "the cycle collector on, as usual"), (False, "the cycle collector off")):
        ours, engine = mean[collector]
        print(f"  the same two, the mean of {runs} runs in a row with {words}: "
              f"{ours * 1e3:.3f} ms and {engine * 1e3:.3f} ms = {engine / ours:.1f}x")

    A, B = random_matrix(16, 768, "bench/A"), random_matrix(768, 768, "bench/B")
    t_fast, fast = best_time(lambda: matmul(A, B), args.repeat)
    t_sum, _ = best_time(lambda: textbook_matmul(A, B), args.repeat)
    t_fsum, slow = best_time(lambda: textbook_matmul(A, B, math.fsum), args.repeat)
    (t_matmul, _), (t_copied, copied) = best_times([lambda: matmul(A, B), lambda: copied_columns_matmul(A, B)],
                                                   args.repeat)
    print("matmul, 16x768 @ 768x768")
    print(f"  textbook triple loop, sum:   {t_sum:8.3f} s")
    print(f"  textbook triple loop, fsum:  {t_fsum:8.3f} s")
    print(f"  mha_lists.matmul:            {t_fast:8.3f} s")
    print(f"  speed-up over the triple loop with sum:  {t_sum / t_fast:.2f}x")
    print(f"  speed-up over the triple loop with fsum: {t_fsum / t_fast:.2f}x")
    print(f"  bit-identical to the fsum triple loop: {fast == slow}")
    print(f"  columns copied to floats first (the fastest fsum formulation measured): {t_copied:8.3f} s; "
          f"matmul takes {t_matmul / t_copied:.2f}x that (same bits: {copied == fast})")

    weights = init_mha_weights(768, 12, seed=0)
    x = random_matrix(16, 768, "bench/x")
    G = random_matrix(16, 768, "bench/grad_output")
    (t_pass, out), (t_both, _) = best_times(
        [lambda: multi_head_attention(x, weights), lambda: multi_head_attention_backward(x, weights, G)], args.repeat)
    print("multi_head_attention at GPT-2-small width (d_model 768, 12 heads, 16 tokens)")
    print(f"  one forward pass: {t_pass:.3f} s (output {len(out)}x{len(out[0])})")
    print(f"  forward + backward (multi_head_attention_backward): {t_both:.3f} s = "
          f"{t_both / t_pass:.2f}x the forward pass")

    d_model, num_heads, seq_len = 32, 4, 32
    small = init_mha_weights(d_model, num_heads, seed=0)
    x = random_matrix(seq_len, d_model, "bench/small_x")
    G = random_matrix(seq_len, d_model, "bench/small_grad_output")
    # A pass of this small layer takes milliseconds: take the best of many.
    (t_forward, _), (t_matrix, grads) = best_times(
        [lambda: multi_head_attention(x, small), lambda: multi_head_attention_backward(x, small, G)],
        10 * args.repeat)
    # The scalar engine takes seconds and hundreds of thousands of objects: once is enough.
    t_scalar, (dx, dW_Q) = best_time(lambda: scalar_attention_gradients(x, small, G), 1)
    print(f"gradients of one layer (d_model {d_model}, {num_heads} heads, {seq_len} tokens)")
    print(f"  forward alone (multi_head_attention):                {t_forward:8.4f} s")
    print(f"  forward + backward (multi_head_attention_backward):  {t_matrix:8.4f} s = "
          f"{t_matrix / t_forward:.2f}x the forward alone")
    print(f"  scalar autograd engine, forward + backward:          {t_scalar:8.4f} s = "
          f"{t_scalar / t_matrix:.1f}x the matrix-level gradients")
    print(f"  largest difference between their gradients (x, W_Q): "
          f"{max(max_difference(dx, grads.x), max_difference(dW_Q, grads.W_Q)):.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
