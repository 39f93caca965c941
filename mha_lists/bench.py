"""``python -m mha_lists.bench``: how fast is pure-Python attention?

Measures, on this machine (numbers vary between machines and runs; nothing
here is asserted by the test suite):

1. ``matmul`` against the textbook triple index loop at 16x768 @ 768x768, and
   that both give bit-identical results. The textbook loop is timed twice: as
   usually written, with ``sum`` (whose last digits changed in CPython 3.12),
   and with ``math.fsum``, which gives exactly matmul's numbers.
2. One forward pass of ``multi_head_attention`` at GPT-2-small width
   (d_model 768, 12 heads, 16 tokens).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

from .multi_head import multi_head_attention
from .matrix import Matrix, matmul
from .weights import derive_rng, init_mha_weights


def textbook_matmul(A: Matrix, B: Matrix, total: Callable = sum) -> Matrix:
    """The triple index loop as textbooks write it; ``total=math.fsum`` gives matmul's exact numbers."""
    n = len(B)
    return [[total(A[i][t] * B[t][j] for t in range(n)) for j in range(len(B[0]))] for i in range(len(A))]


def best_time(func: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of ``repeat`` runs, in seconds, and the last result."""
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def random_matrix(rows: int, cols: int, name: str) -> Matrix:
    rng = derive_rng(0, name)
    return [[rng.gauss(0.0, 1.0) for _ in range(cols)] for _ in range(rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha_lists.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; the best counts (default 3)")
    args = parser.parse_args(argv)

    A, B = random_matrix(16, 768, "bench/A"), random_matrix(768, 768, "bench/B")
    t_fast, fast = best_time(lambda: matmul(A, B), args.repeat)
    t_sum, _ = best_time(lambda: textbook_matmul(A, B), args.repeat)
    t_fsum, slow = best_time(lambda: textbook_matmul(A, B, math.fsum), args.repeat)
    print("matmul, 16x768 @ 768x768")
    print(f"  textbook triple loop, sum:   {t_sum:8.3f} s")
    print(f"  textbook triple loop, fsum:  {t_fsum:8.3f} s")
    print(f"  mha_lists.matmul:            {t_fast:8.3f} s")
    print(f"  speed-up over the triple loop with sum:  {t_sum / t_fast:.2f}x")
    print(f"  speed-up over the triple loop with fsum: {t_fsum / t_fast:.2f}x")
    print(f"  bit-identical to the fsum triple loop: {fast == slow}")

    weights = init_mha_weights(768, 12, seed=0)
    x = random_matrix(16, 768, "bench/x")
    t_pass, out = best_time(lambda: multi_head_attention(x, weights), args.repeat)
    print("multi_head_attention at GPT-2-small width (d_model 768, 12 heads, 16 tokens)")
    print(f"  one forward pass: {t_pass:.3f} s (output {len(out)}x{len(out[0])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
