"""tools/bench.py, ``python -m mha_lists.bench``: the benchmark's references compute the library's numbers bit for
bit, so its ratios compare like with like; what it counts; its command line."""

import gc
import subprocess
import sys

import pytest
from bad_inputs import assert_template

from mha_lists import causal_mask, init_mha_weights, multi_head_attention, running_example
from mha_lists.core.gradients import multi_head_attention_backward
from mha_lists.tools.bench import (count_calls, random_matrix, run_times, unchecked_forward,
                                   unchecked_forward_backward)
from mha_lists.tools.bench import best_time, best_times
from mha_lists.tools.bench import main as bench_main

# Every message the module writes, once (the sizes' messages are core/checks.py's).
MESSAGES = {
    "function": "{func}: {name} must be a function of no arguments (a lambda), got {value}",
    "functions": "best_times: funcs must be a non-empty list of functions, got {value}",
    "entries": "random_matrix: {shape} is {n} entries; at most 10,000,000",
}

BAD_CALLS = {
    "function": (TypeError, lambda: count_calls("x" * 1000), dict(func="count_calls", name="run",
                                                                   value="'" + "x" * 55 + " ...")),
    "functions": (TypeError, lambda: best_times(len, 3), dict(value="<built-in function len>")),
    "entries": (ValueError, lambda: random_matrix(10**5, 10**5, "x"), dict(shape="100,000x100,000",
                                                                          n="10,000,000,000")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


@pytest.mark.parametrize("call, error, start", [
    (lambda: best_time(None, 3), TypeError, "best_time: func "),
    (lambda: best_time(list, 10**9), ValueError, "best_time: repeat "),  # it would run for hours
    (lambda: run_times(list, 0), ValueError, "run_times: runs "),
    (lambda: run_times(list, 2, collector="no"), TypeError, "run_times: collector "),
    (lambda: best_times([list, 5], 2), TypeError, "best_times: funcs[1] "),
    (lambda: best_times([list], True), TypeError, "best_times: repeat "),
    (lambda: random_matrix(0, 3, "x"), ValueError, "random_matrix: rows "),
    (lambda: random_matrix(3, 2.0, "x"), TypeError, "random_matrix: cols "),
    (lambda: random_matrix(3, 3, None), TypeError, "random_matrix: name "),
])
def test_the_helpers_check_their_arguments(call, error, start):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error and str(info.value).startswith(start)


@pytest.mark.parametrize("d_model, num_heads, seed", [(16, 2, 0), (12, 3, 7), (8, 8, 1)])
def test_the_unchecked_arithmetic_is_the_librarys_bit_for_bit(d_model, num_heads, seed):
    ex = running_example(d_model=d_model, num_heads=num_heads, seed=seed)
    G = random_matrix(len(ex.x), d_model, f"test/{seed}")
    mask = causal_mask(len(ex.x))
    assert unchecked_forward(ex.x, ex.weights, mask) == multi_head_attention(ex.x, ex.weights, mask=mask)
    dx, dW, dW_O = unchecked_forward_backward(ex.x, ex.weights, G)
    grads = multi_head_attention_backward(ex.x, ex.weights, G)
    assert dx == grads.x and dW == grads.W_Q + grads.W_K + grads.W_V and dW_O == grads.W_O


def test_the_unchecked_arithmetic_differs_when_the_weights_do():
    w = init_mha_weights(4, 2, seed=0)
    x = [[1.0, 2.0, 3.0, 4.0], [0.5, -1.0, 0.0, 2.0]]
    G = [[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    other = w._replace(W_O=[[2 * v for v in row] for row in w.W_O])
    assert unchecked_forward_backward(x, w, G)[0] != unchecked_forward_backward(x, other, G)[0]


@pytest.mark.parametrize("collector", [True, False])
def test_run_times_times_each_run_and_leaves_the_cycle_collector_as_it_was(collector):
    calls = []
    assert gc.isenabled()
    times = run_times(lambda: calls.append(gc.isenabled()), 4, collector=collector)
    assert len(times) == 4 and all(t >= 0.0 for t in times)
    assert calls == [collector] * 4  # on or off while the runs run, as asked
    assert gc.isenabled()


# === count_calls: every frame of the package ===


def test_count_calls_counts_every_frame_of_the_package_and_nothing_else():
    from mha_lists.core.checks import describe, quote_int, shorten
    assert count_calls(lambda: None) == (0, 0, 0)
    assert count_calls(lambda: [describe((5, 16)) for _ in range(3)]) == (3, 1, 1)  # its generator expression: no
    assert count_calls(lambda: shorten(10**20)) == (2, 2, 1)  # shorten, then quote_int
    assert count_calls(lambda: (quote_int(1), sorted([3, 1]), gc.isenabled())) == (1, 1, 1)  # C functions: no
    from mha_lists.teaching.weights import kv_head_for
    frames, functions, files = count_calls(lambda: kv_head_for(1, 2, 1))
    assert functions >= 2 and files == 2 and frames >= functions  # attention.py and checks.py


# === The command: one line and exit code 2 for bad arguments ===


BENCH_BAD = [["--repeat", "0"], ["--repeat", "-1"], ["--repeat", "x"], ["--repeat", "1000000000"],
             ["--repeat", "2.5"], ["--repeat", "9" * 5000], ["--bogus"], ["positional"], ["--repeat"]]


@pytest.mark.parametrize("argv", BENCH_BAD, ids=lambda argv: " ".join(argv)[:30])
def test_a_bad_command_line_prints_one_line_and_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        bench_main(argv)
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == "" and len(err.splitlines()) == 1 and len(err) < 300, err
    assert err.startswith("python -m mha_lists.tools.bench: error: ") and err.endswith(" (see --help)\n")


@pytest.mark.parametrize("module", ["mha_lists.tools.bench", "mha_lists.bench"])  # the charter's name for it
def test_the_real_commands_print_one_line_and_exit_2(module):
    done = subprocess.run([sys.executable, "-m", module, "--repeat", "0"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
