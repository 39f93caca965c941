"""The copy-the-previous-token task (mha_lists/teaching/training.py): its model, sequences, targets,
gradients, training run and measures; its checks and limits."""

import copy
import math
import random

import pytest

from mha_lists import ShapeError, attention_trace, causal_mask, running_example
from mha_lists.core.gradients import multi_head_attention_backward
from mha_lists.teaching import training
from mha_lists.teaching.training import (accuracy, attention_weights, batch_gradients, flatten, forward, init_model,
                                         make_sequences, model_from_example, model_gradients, previous_token_weight,
                                         previous_token_weights, targets, train, unflatten)
from mha_lists.teaching.weights import derive_rng, init_mha_weights

# Each message's wording, pinned once; the other tests match the start (function: argument).
MESSAGES = {
    "example settings": "model_from_example: ex.settings must be the dict of running_example's settings, with the seed",
    "example seed": "model_from_example: ex.seed must be an int, got 1.5 (float)",
    "example positions": "model_from_example: ex.position_embeddings must be a non-empty list of rows, got None",
    "example positions width": "model_from_example: ex.position_embeddings rows have 3 entries and ex.x rows have "
                               "16; both must be d_model wide",
    "example tokens width": "model_from_example: ex.token_embeddings rows have 8 entries and ex.x rows have 16; "
                            "both must be d_model wide",
    "example weights": "model_from_example: ex.weights must be an MHAWeights, got NoneType",
    "example weights width": "model_from_example: ex.weights is for d_model 8 but the embeddings are 16 wide",
    "example biases": "model_from_example: ex.weights has biases (b_Q, b_K, b_V, b_O); the model trained here has "
                      "none (build the example with bias=False)",
    "ids": "forward: ids must be a non-empty list of token ids, got []",
    "targets ids": "targets: ids must be a non-empty list of token ids, got []",
    "sequence": "model_gradients: ids must be a list of at least 2 token ids, got [0]",
    "batch": "batch_gradients: batch must be a non-empty list of sequences (lists of token ids), got []",
    "batch entry": "batch_gradients: batch[1] must be a list of at least 2 token ids, got [0]",
    "batch size": "batch_gradients: batch has 1,001 sequences; at most 1,000 at once",
    "token": "accuracy: sequences[0][1] is 5; token ids must be 0 to 2",
    "seq_len": "train: seq_len is 5; it must be at least 2 (position 0 has no target) and at most the 4 rows of "
               "the position table",
    "square": "previous_token_weight: attention is 1x2; it must be square (self-attention) with at least 2 rows",
    "size limit": "init_model: vocab_size is 10000000; at most 1000",
    "budget": "train: steps x batch_size x work per sequence = 10,000 x 1,000 x {per} = {work} multiply-adds; "
              "one call does at most 30,000,000,000 (about half an hour of plain Python)",
    "biases": "forward: model.layers[0] has biases (b_O); this model's attention has none",
    "too large": "{func}: the values are too large: a product or sum overflowed float64 (largest about 1.8e308); "
                 "scale the inputs down",
}

TOY = init_model(3, 4, 4, 2, seed=0)  # vocab 3, 4 positions, d_model 4, 2 heads
EX = running_example()


# === The task and the model ===


def test_targets_and_sequences():
    assert targets([2, 0, 1]) == [None, 2, 0]
    seqs = make_sequences(3, 5, 4, random.Random(7))
    assert len(seqs) == 3 and all(len(s) == 5 and all(0 <= t < 4 for t in s) for s in seqs)
    assert seqs == make_sequences(3, 5, 4, random.Random(7))


def test_the_model_is_one_layer_positions_at_the_input_no_residual():
    model = model_from_example(EX)
    assert (len(model.layers), model.positions, model.residual) == (1, "input", False)
    assert model.layers[0] is EX.weights and model.token_embeddings == EX.token_embeddings
    fwd = forward(model, EX.ids)
    assert fwd.streams[0] == EX.x and fwd.streams[1] == attention_trace(EX.x, EX.weights, mask=causal_mask(5)).output


def test_flatten_and_unflatten_round_trip():
    model = init_model(4, 5, 6, 3, seed=2)
    flat = flatten(model)
    assert len(flat) == 4 * 6 + 5 * 6 + 3 * 6 * 6 + 6 * 6 + 6 * 4 + 4
    assert unflatten(flat, model) == model
    assert flatten(unflatten(flatten(model_from_example(EX)), model_from_example(EX))) == flatten(model_from_example(EX))


# === Gradients ===


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


def test_model_gradients_are_the_steps_of_notebook_17_bit_for_bit():
    # The cross-entropy, the unembedding's gradients, then the core's backward pass: the same bits.
    model, ids = model_from_example(EX), EX.ids
    loss, grads = model_gradients(model, ids)
    fwd = forward(model, ids)
    ce_loss, d_logits = training.cross_entropy(fwd.logits, targets(ids))
    X, H = fwd.streams
    dH = [[math.fsum(a * b for a, b in zip(row, col)) for col in model.W_U] for row in d_logits]
    g = multi_head_attention_backward(X, model.layers[0], dH, mask=causal_mask(len(ids)))
    assert loss == ce_loss and grads.layers[0].W_Q == g.W_Q and grads.position_embeddings[:len(ids)] == g.x
    assert grads.b_U == [math.fsum(col) for col in zip(*d_logits)]


def test_batch_gradients_are_the_mean():
    model = init_model(3, 4, 4, 2, seed=4)
    batch = [[0, 1, 2, 0], [2, 2, 1, 0]]
    loss, g = batch_gradients(model, batch)
    (l0, g0), (l1, g1) = (model_gradients(model, ids) for ids in batch)
    assert loss == pytest.approx((l0 + l1) / 2)
    assert g == pytest.approx([(a + b) / 2 for a, b in zip(flatten(g0), flatten(g1))])


# === Training and what it learned ===


def test_previous_token_weight():
    assert previous_token_weight([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]) == 1.0
    assert previous_token_weight([[1.0, 0.0], [0.5, 0.5]]) == 0.5


def test_training_learns_to_look_at_the_previous_token():
    model = init_model(5, 6, 8, 2, seed=0)
    test_set = make_sequences(20, 6, 5, derive_rng(0, "test/held-out"))
    trained, losses = train(model, steps=50, batch_size=8, seq_len=6, seed=0, lr=0.05)
    assert len(losses) == 50 and losses[-1] < losses[0] / 100
    assert accuracy(model, test_set) < 0.5 < 0.95 < accuracy(trained, test_set)
    x = forward(trained, test_set[0]).streams[0]
    heads = attention_trace(x, trained.layers[0], mask=causal_mask(6)).attention
    assert attention_weights(trained, test_set[0]) == heads
    assert max(previous_token_weight(A) for A in heads) > 0.9
    before, after = previous_token_weights(model, test_set), previous_token_weights(trained, test_set)
    assert len(after) == 2 and max(before) < 0.6 < 0.9 < max(after)
    # the same run gives the same bits
    assert train(model, steps=3, batch_size=2, seq_len=4, seed=5) == train(model, steps=3, batch_size=2, seq_len=4, seed=5)


def test_train_is_a_replay_of_batch_gradients_and_adam():
    model = init_model(3, 4, 4, 2, seed=1)
    trained, losses = train(model, steps=3, batch_size=2, seq_len=4, seed=9, lr=0.02)
    rng, params, state = derive_rng(9, "toy/batches"), flatten(model), None
    for loss in losses:
        step_loss, grads = batch_gradients(unflatten(params, model), make_sequences(2, 4, 3, rng))
        params, state = training.adam_step(params, grads, state, lr=0.02)
        assert step_loss == loss
    assert params == flatten(trained)


# === Checks: one message per rule ===


@pytest.mark.parametrize("key, ex", [
    ("example settings", EX._replace(settings={})),
    ("example seed", EX._replace(settings={**EX.settings, "seed": 1.5})),
    ("example positions", EX._replace(position_embeddings=None)),
    ("example positions width", EX._replace(position_embeddings=[[0.0] * 3] * 2)),
    ("example tokens width", EX._replace(token_embeddings=[[0.0] * 8] * 6)),
    ("example weights", EX._replace(weights=None)),
    ("example weights width", EX._replace(weights=init_mha_weights(8, 2, seed=0))),
    ("example biases", running_example(bias=True)),
])
def test_model_from_example_refuses_an_example_that_makes_no_model(key, ex):
    with pytest.raises((TypeError, ValueError)) as info:
        model_from_example(ex)
    assert str(info.value) == MESSAGES[key]


@pytest.mark.parametrize("key, call", [
    ("ids", lambda: forward(TOY, [])),
    ("targets ids", lambda: targets([])),
    ("sequence", lambda: model_gradients(TOY, [0])),
    ("batch", lambda: batch_gradients(TOY, [])),
    ("batch entry", lambda: batch_gradients(TOY, [[0, 1], [0]])),
    ("batch size", lambda: batch_gradients(TOY, [[0, 1]] * 1001)),
    ("token", lambda: accuracy(TOY, [[0, 5]])),
    ("seq_len", lambda: train(TOY, steps=1, batch_size=2, seq_len=5, seed=0)),
    ("square", lambda: previous_token_weight([[1.0, 0.0]])),
    ("size limit", lambda: init_model(10**7, 4, 4, 2, seed=0)),
])
def test_messages(key, call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == MESSAGES[key]


def test_a_model_with_attention_biases_is_refused_rather_than_trained_without_them():
    biased = TOY._replace(layers=[TOY.layers[0]._replace(b_O=[0.0] * 4)])
    for call in (lambda: forward(biased, [0, 1]), lambda: train(biased, steps=1, batch_size=1, seq_len=2, seed=0)):
        with pytest.raises(ValueError, match=r"^(forward|train): model\.layers\[0\] has biases \(b_O\)"):
            call()
    with pytest.raises(ValueError) as info:
        forward(biased, [0, 1])
    assert str(info.value) == MESSAGES["biases"]


def test_settings_that_add_up_to_hours_are_refused_naming_the_budget():
    from mha_lists.teaching.model import check_model, forward_work
    per = 3 * forward_work(check_model("demo", "model", TOY), 2)
    with pytest.raises(ValueError) as info:
        train(TOY, steps=10_000, batch_size=1000, seq_len=2, seed=0)
    assert str(info.value) == MESSAGES["budget"].format(per=f"{per:,}", work=f"{10_000 * 1000 * per:,}")


# === Overflow inside: named after the function called ===


def test_an_overflowing_adam_step_inside_train_is_named_train():
    with pytest.raises(ValueError, match=r"^train: the updates are too large"):
        train(TOY._replace(W_U=[[1e300] * 3] * 4), steps=1, batch_size=1, seq_len=2, seed=0)


def test_an_infinite_loss_inside_model_gradients_is_named_model_gradients():
    model = TOY._replace(b_U=[1e308, -1e308, 0.0])
    with pytest.raises(ValueError, match=r"^model_gradients: the losses are too large"):
        model_gradients(model, [1, 1])


@pytest.mark.parametrize("name", ["forward", "attention_weights", "model_gradients", "accuracy",
                                  "previous_token_weights"])
def test_embeddings_that_add_up_past_float64_are_named(name):
    model = TOY._replace(token_embeddings=[[1.7e308] * 4] * 3, position_embeddings=[[1.7e308] * 4] * 4)
    arg = [0, 1] if name in ("forward", "attention_weights", "model_gradients") else [[0, 1]]
    with pytest.raises(ValueError, match=rf"^{name}: the embeddings are too large"):
        getattr(training, name)(model, arg)


# === The sweep: every bad call gets a named one-line error and changes nothing ===

NAN, INF, HUGE = math.nan, math.inf, 10**9
GOOD_W = init_mha_weights(4, 2, seed=0)
BAD_SIZES = [None, "2", 2.5, 2.0, 0, -1, True, [2], {}, HUGE, 10**400]
BAD_MODELS = [None, GOOD_W, "model", (1, 2, 3, 4, 5), TOY._replace(token_embeddings=None),
              TOY._replace(token_embeddings=[]), TOY._replace(token_embeddings=[[NAN] * 4] * 3),
              TOY._replace(position_embeddings=[[0.0] * 3] * 4), TOY._replace(layers=None),
              TOY._replace(layers=[init_mha_weights(6, 2, seed=0)]), TOY._replace(W_U=[[0.0] * 3] * 3),
              TOY._replace(W_U=[[0.0] * 2] * 4), TOY._replace(b_U=[0.0] * 2), TOY._replace(b_U=[NAN] * 3)]
BAD_IDS = [None, [], [0, 3], [0, -1], [0, 1.0], [0, True], [0, 1, 2, 0, 1], "ab", 5, [[0]], [0, HUGE], [0, 10**400]]
R = random.Random(0)
CASES = (
    [("init_model", lambda n=n, at=at: init_model(*[n if k == at else v for k, v in enumerate([3, 4, 4, 2])], seed=0))
     for n in BAD_SIZES for at in range(4)]
    + [("init_model", lambda s=s: init_model(3, 4, 4, 2, seed=s)) for s in [None, "x", 1.5, True, 10**100]]
    + [("init_model", lambda e=e: init_model(3, 4, 4, 2, seed=0, embed_std=e)) for e in [None, NAN, INF, 0, -1.0]]
    + [("model_from_example", lambda ex=ex: model_from_example(ex)) for ex in [None, TOY, "ex", GOOD_W]]
    + [("make_sequences", lambda n=n: make_sequences(n, 4, 3, random.Random(0))) for n in BAD_SIZES]
    + [("make_sequences", lambda rng=rng: make_sequences(2, 4, 3, rng)) for rng in [None, 0, "rng", random]]
    + [("targets", lambda ids=ids: targets(ids)) for ids in [None, [], [1, "a"], "ab", [True], 5, [[1]], [-1, 0]]]
    + [(name, lambda f=f, ids=ids: f(TOY, ids)) for ids in BAD_IDS
       for name, f in (("forward", forward), ("model_gradients", model_gradients),
                       ("attention_weights", attention_weights))]
    + [(name, lambda f=f, m=m: f(m)) for m in BAD_MODELS
       for name, f in (("forward", lambda m: forward(m, [0, 1])), ("model_gradients", lambda m: model_gradients(m, [0, 1])),
                       ("batch_gradients", lambda m: batch_gradients(m, [[0, 1]])), ("flatten", flatten),
                       ("train", lambda m: train(m, steps=1, batch_size=2, seq_len=2, seed=0)),
                       ("accuracy", lambda m: accuracy(m, [[0, 1]])))]
    + [(name, lambda f=f, b=b: f(TOY, b)) for b in [[], None, [[0, 1], [0, 3]], [[0]], "ab", [None], 5]
       for name, f in (("batch_gradients", batch_gradients), ("previous_token_weights", previous_token_weights),
                       ("accuracy", accuracy))]
    + [("accuracy", lambda: accuracy(TOY, [[0, 1]] * 10_001))]
    + [("unflatten", lambda flat=flat: unflatten(flat, TOY)) for flat in [None, [0.0], [NAN] * 77, "ab"]]
    + [("train", lambda kw=kw: train(TOY, **{**dict(steps=1, batch_size=2, seq_len=2, seed=0), **kw}))
       for kw in [dict(steps=n) for n in BAD_SIZES] + [dict(batch_size=n) for n in BAD_SIZES]
       + [dict(seq_len=n) for n in BAD_SIZES + [9]] + [dict(seed=s) for s in [None, 1.5, 10**100]]
       + [dict(lr=lr) for lr in [None, NAN, 0, -1.0, True]]]
    + [("previous_token_weight", lambda A=A: previous_token_weight(A))
       for A in [None, [[1.0]], [[1.0, 0.0]], [[NAN, 0.0], [0.5, 0.5]], [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]]]
)


@pytest.mark.parametrize("name, call", CASES, ids=[f"{name}-{n}" for n, (name, _) in enumerate(CASES)])
def test_every_bad_call_gets_a_named_one_line_error(name, call):
    before = copy.deepcopy(TOY)
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value).startswith(f"{name}: ") and "\n" not in str(info.value) and len(str(info.value)) < 400
    assert TOY == before


def test_a_bad_model_is_named_by_its_part():
    with pytest.raises(ValueError, match=r"^forward: model\.token_embeddings\[0\]\[0\] is nan"):
        forward(TOY._replace(token_embeddings=[[NAN] * 4] * 3), [0, 1])
    with pytest.raises(ShapeError, match=r"^train: model\.W_U is 3x3"):
        train(TOY._replace(W_U=[[0.0] * 3] * 3), steps=1, batch_size=1, seq_len=2, seed=0)
