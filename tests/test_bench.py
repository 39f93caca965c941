"""The benchmark's references compute the library's numbers bit for bit, so its ratios compare like with like."""

import gc

import pytest

from mha_lists import causal_mask, init_mha_weights, multi_head_attention, running_example
from mha_lists.core.gradients import multi_head_attention_backward
from mha_lists.tools.bench import random_matrix, run_times, unchecked_forward, unchecked_forward_backward


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
