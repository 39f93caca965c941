"""The toy model: its loss, its gradients (checked by finite differences), Adam, and that it learns."""

import copy
import math
import random

import pytest

from mha_lists import attention_trace, causal_mask
from mha_lists.teaching.training import (
    AdamState,
    accuracy,
    adam_step,
    attention_weights,
    batch_gradients,
    cross_entropy,
    flatten,
    forward,
    init_model,
    make_sequences,
    model_gradients,
    previous_token_weight,
    previous_token_weights,
    targets,
    train,
    unflatten,
)
from mha_lists.teaching.weights import derive_rng


def test_cross_entropy_by_hand():
    # Two equal logits: p = (1/2, 1/2), loss = log 2, gradient p - onehot(1) = (1/2, -1/2).
    loss, d = cross_entropy([[0.0, 0.0]], [1])
    assert loss == pytest.approx(math.log(2)) and d == [[0.5, -0.5]]
    # logits (log 3, 0): p = (3/4, 1/4); target 0: loss -log(3/4); two rows with a target: / 2.
    loss, d = cross_entropy([[math.log(3), 0.0], [0.0, 0.0], [7.0, 7.0]], [0, None, 1])
    assert loss == pytest.approx((-math.log(0.75) + math.log(2)) / 2)
    assert d[0] == pytest.approx([-0.125, 0.125]) and d[1] == [0.0, 0.0] and d[2] == pytest.approx([0.25, -0.25])


def test_cross_entropy_gradient_by_central_differences():
    rng = random.Random(1)
    logits = [[rng.gauss(0, 2) for _ in range(4)] for _ in range(3)]
    target = [None, 2, 0]
    _, d = cross_entropy(logits, target)
    for i in range(3):
        for j in range(4):
            up, down = copy.deepcopy(logits), copy.deepcopy(logits)
            up[i][j] += 1e-6
            down[i][j] -= 1e-6
            numeric = (cross_entropy(up, target)[0] - cross_entropy(down, target)[0]) / 2e-6
            assert numeric == pytest.approx(d[i][j], abs=1e-8)


def test_targets_and_sequences():
    assert targets([2, 0, 1]) == [None, 2, 0]
    seqs = make_sequences(3, 5, 4, random.Random(7))
    assert len(seqs) == 3 and all(len(s) == 5 and all(0 <= t < 4 for t in s) for s in seqs)
    assert seqs == make_sequences(3, 5, 4, random.Random(7))


def test_flatten_and_unflatten_round_trip():
    model = init_model(4, 5, 6, 3, seed=2)
    flat = flatten(model)
    assert len(flat) == 4 * 6 + 5 * 6 + 3 * 6 * 6 + 6 * 6 + 6 * 4 + 4
    assert unflatten(flat, model) == model


def test_model_gradients_by_central_differences():
    # Every parameter, embeddings included, on a small model; positions past the sequence get 0.
    model = init_model(3, 5, 4, 2, seed=3)
    ids = [2, 0, 2, 1]  # token 2 appears twice: its embedding gradient is the sum of two rows
    loss, grads = model_gradients(model, ids)
    flat, g = flatten(model), flatten(grads)
    assert loss == pytest.approx(model_gradients(unflatten(flat, model), ids)[0])
    for n in range(len(flat)):
        up, down = list(flat), list(flat)
        up[n] += 1e-6
        down[n] -= 1e-6
        numeric = (model_gradients(unflatten(up, model), ids)[0]
                   - model_gradients(unflatten(down, model), ids)[0]) / 2e-6
        assert numeric == pytest.approx(g[n], abs=1e-7), n
    assert grads.position_embeddings[4] == [0.0] * 4
    assert grads.token_embeddings[2] != [0.0] * 4


def test_batch_gradients_are_the_mean():
    model = init_model(3, 4, 4, 2, seed=4)
    batch = [[0, 1, 2, 0], [2, 2, 1, 0]]
    loss, g = batch_gradients(model, batch)
    (l0, g0), (l1, g1) = (model_gradients(model, ids) for ids in batch)
    assert loss == pytest.approx((l0 + l1) / 2)
    assert g == pytest.approx([(a + b) / 2 for a, b in zip(flatten(g0), flatten(g1))])


def test_adam_by_hand():
    # Step 1: m = 0.1 g, v = 0.001 g^2; bias-corrected they are g and g^2, so p moves by lr * g / |g|.
    p, s = adam_step([1.0, -1.0], [0.5, -2.0], None, lr=0.1)
    assert p == pytest.approx([0.9, -0.9]) and s.step == 1
    assert s.m == pytest.approx([0.05, -0.2]) and s.v == pytest.approx([0.00025, 0.004])
    # Step 2 with gradient 0: m = 0.045, v = 0.00024975; m_hat = 0.045 / 0.19, v_hat = 0.00024975 / 0.001999.
    p2, s2 = adam_step(p, [0.0, 0.0], s, lr=0.1)
    m_hat, v_hat = 0.045 / (1 - 0.9 ** 2), 0.00024975 / (1 - 0.999 ** 2)
    assert p2[0] == pytest.approx(0.9 - 0.1 * m_hat / (math.sqrt(v_hat) + 1e-8))
    assert s2 == AdamState(2, pytest.approx([0.045, -0.18]), pytest.approx([0.00024975, 0.003996]))


def test_adam_changes_nothing_in_place():
    params, grads = [1.0, 2.0], [0.1, 0.2]
    _, state = adam_step(params, grads, None)
    before = copy.deepcopy((params, grads, state))
    adam_step(params, grads, state)
    assert (params, grads, state) == before


def test_previous_token_weight():
    assert previous_token_weight([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) == 1.0
    assert previous_token_weight([[1.0, 0.0], [0.5, 0.5]]) == 0.5


def test_training_learns_to_look_at_the_previous_token():
    model = init_model(5, 6, 8, 2, seed=0)
    test_set = make_sequences(20, 6, 5, derive_rng(0, "test/held-out"))
    trained, losses = train(model, steps=50, batch_size=8, seq_len=6, seed=0, lr=0.05)
    assert len(losses) == 50 and losses[-1] < losses[0] / 100
    assert accuracy(model, test_set) < 0.5 < 0.95 < accuracy(trained, test_set)
    x = forward(trained, test_set[0]).x
    heads = attention_trace(x, trained.attention, mask=causal_mask(6)).attention
    assert attention_weights(trained, test_set[0]) == heads
    assert max(previous_token_weight(A) for A in heads) > 0.9
    before, after = previous_token_weights(model, test_set), previous_token_weights(trained, test_set)
    assert len(after) == 2 and max(before) < 0.6 < 0.9 < max(after)
    # the same run gives the same bits
    assert train(model, steps=3, batch_size=2, seq_len=4, seed=5) == train(model, steps=3, batch_size=2, seq_len=4, seed=5)
