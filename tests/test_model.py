"""The one model (mha_lists/teaching/model.py): forward through the core, gradients by central differences
for every option, the loss, flat parameters, Adam, the training loop, its checks and limits."""

import copy
import math
import random

import pytest

from mha_lists import MHAWeights, ShapeError, attention_trace, causal_mask, matmul
from mha_lists.core import attention as core_attention
from mha_lists.core import gradients as core_gradients
from mha_lists.teaching import model as M
from mha_lists.teaching.model import (AdamState, Model, Step, adam_step, batch_gradients, cross_entropy, flatten,
                                      forward, loss_and_gradients, train, unflatten)
from mha_lists.teaching.weights import derive_rng

# Each message's wording, pinned once; the other tests match the start (function: argument).
MESSAGES = {
    "model type": "forward: model must be a Model, got str",
    "positions width": "forward: model.position_embeddings rows have 3 entries and model.token_embeddings rows "
                       "have 4; both must be d_model wide",
    "layers": "forward: model.layers must be a list of 1 to 12 MHAWeights (one per layer), got []",
    "biases": "forward: model.layers[0] has biases (b_O); this model's attention has none",
    "layer width": "forward: model.layers[1] is for d_model 6 but the embeddings are 4 wide",
    "grouped heads": "forward: model.layers[0] has 2 query heads and 1 key/value heads; this model gives each "
                     "query head its own",
    "W_U": "forward: model.W_U is 4x2; it must be d_model x vocab_size = 4x3",
    "b_U": "forward: model.b_U has 2 entries; it needs one per token (3)",
    "positions rows": "forward: model.position_embeddings has 4,097 rows; attention here reads at most 4,096 tokens",
    "positions option": "forward: model.positions is 'middle'; it must be 'input' or 'queries and keys'",
    "residual option": "forward: model.residual must be True or False, got 1 (int)",
    "ids empty": "forward: ids must be a non-empty list of token ids, got []",
    "ids long": "forward: ids has 5 tokens but the position table has 4 rows; it needs one row per position",
    "ids range": "forward: ids[1] is 3; token ids must be 0 to 2",
    "ids negative": "targets: ids[0] is -1; token ids are 0 or more",
    "targets length": "cross_entropy: target must be a list with one entry (a token id or None) per row of "
                      "logits (1), got [0, 1]",
    "targets column": "cross_entropy: target[0] is 2; a target must be None or a column of logits, 0 to 1",
    "targets none": "cross_entropy: every entry of target is None; there is nothing to score",
    "too large": "{func}: {what} are too large: a product or sum overflowed float64 (largest about 1.8e308); "
                 "scale the inputs down",
    "work": "{func}: {what} = {work} multiply-adds; one call does at most 200,000,000 (about ten seconds)",
    "training work": "train: steps x batch_size x work per sequence = {steps} x {batch} x {per} = {work} "
                     "multiply-adds; one call does at most 30,000,000,000 (about half an hour of plain Python)",
    "flat length": "unflatten: flat has 1 numbers but a model shaped like `like` has {n}",
    "adam lengths": "adam_step: params has 2 entries and grads has 1; one gradient per parameter",
    "adam v": "adam_step: state.v[0] is -1.0; a running mean of squares is 0 or more",
    "adam step": "adam_step: state.step is 0; a step count is 1 to 1,000,000,000,000",
    "adam state": "adam_step: state must be None (the first step) or the AdamState of the previous step, got str",
    "betas": "adam_step: betas must be two numbers in [0, 1), got (0.9, 1.0)",
    "batch": "batch_gradients: batch must be a list of 1 to 1,000 (ids, targets) pairs, got []",
    "pair": "train: batches[0][0] must be a pair (ids, targets), got [0, 1, 2]",
    "batches": "train: batches must be a non-empty list of batches, got []",
    "progress": "train: progress must be a function or None, got 5",
}


def message(key, **values):
    return MESSAGES[key].format(**values)


def small(positions="input", residual=True, b_U=True, layers=2, seed=0, vocab=3, d=4, heads=2, T=5, scale=None):
    """A random model of the given options: every table a seeded Gaussian draw."""
    rng = random.Random(seed)

    def draw(rows, cols, sigma=0.7):
        return [[rng.gauss(0.0, sigma) for _ in range(cols)] for _ in range(rows)]

    d_k = d // heads
    ws = [MHAWeights([draw(d, d_k) for _ in range(heads)], [draw(d, d_k) for _ in range(heads)],
                     [draw(d, d_k) for _ in range(heads)], draw(heads * d_k, d)) for _ in range(layers)]
    return Model(draw(vocab, d, 1.0), draw(T, d, 1.0), ws, draw(d, vocab), [rng.gauss(0, 0.5) for _ in range(vocab)]
                 if b_U else None, scale, positions, residual)


TOY = small()


# === Forward: through the core ===


def test_forward_is_the_core_layer_by_layer():
    # positions="input", residual: x_0 = E_tok + E_pos, each layer the core's attention_trace, x_{l+1} = x_l + a_l.
    ids = [2, 0, 1, 1]
    trace = forward(TOY, ids)
    x = [[a + b for a, b in zip(TOY.token_embeddings[t], TOY.position_embeddings[i])] for i, t in enumerate(ids)]
    assert trace.streams[0] == x
    for n, w in enumerate(TOY.layers):
        core = attention_trace(x, w, mask=causal_mask(4))
        assert trace.layers[n].attention == core.attention and trace.layers[n].output == core.output
        x = [[a + b for a, b in zip(r, s)] for r, s in zip(x, core.output)]
        assert trace.streams[n + 1] == x
    assert trace.logits == [[z + b for z, b in zip(row, TOY.b_U)] for row in matmul(x, TOY.W_U)]


def test_without_the_residual_a_layer_replaces_the_stream():
    model = TOY._replace(residual=False)
    trace = forward(model, [0, 1, 2])
    assert trace.streams[1] == trace.layers[0].output and trace.streams[2] == trace.layers[1].output


def test_positions_in_queries_and_keys_only():
    # Layer 0's Q and K read x_0 + E_pos, its V reads x_0; the stream itself never holds a position.
    model = TOY._replace(positions="queries and keys")
    ids = [1, 2, 1]
    trace = forward(model, ids)
    x0 = [list(model.token_embeddings[t]) for t in ids]
    qk = [[a + b for a, b in zip(r, p)] for r, p in zip(x0, model.position_embeddings)]
    w, layer = model.layers[0], trace.layers[0]
    assert trace.streams[0] == x0
    assert layer.Q == [matmul(qk, W) for W in w.W_Q] and layer.K == [matmul(qk, W) for W in w.W_K]
    assert layer.V == [matmul(x0, W) for W in w.W_V]
    for h in range(2):
        head = core_attention.one_head(layer.Q[h], layer.K[h], layer.V[h], mask=causal_mask(3), scale=1 / math.sqrt(2))
        assert layer.attention[h] == head.weights and layer.head_outputs[h] == head.output
    # Layer 1 reads the stream only: the core's attention_trace of it.
    assert trace.layers[1].attention == attention_trace(trace.streams[1], model.layers[1], mask=causal_mask(3)).attention


def test_every_head_runs_through_the_core_head_loop(monkeypatch):
    """Forward and backward, every layer's heads go through core.attention.head_loop (the one head loop)."""
    calls = []
    loop = core_attention.head_loop

    def counting(*args, **kwargs):
        calls.append(kwargs.get("step", core_attention.one_head).__name__)
        return loop(*args, **kwargs)

    monkeypatch.setattr(core_attention, "head_loop", counting)
    monkeypatch.setattr(core_gradients, "head_loop", counting)
    for positions in M.POSITIONS:
        calls.clear()
        loss_and_gradients(TOY._replace(positions=positions), [0, 1, 2], [None, 0, 1])
        assert calls == ["one_head", "one_head", "head_backward", "head_backward"], positions


def test_no_task_writes_the_attention_formula_or_loops_over_one_head():
    """training.py, induction.py and model.py call no one-head function themselves: the core's head loop does."""
    import ast
    import inspect

    from mha_lists.teaching import induction, training
    banned = {"one_head", "attention", "attention_steps", "attention_backward", "head_backward", "softmax",
              "softmax_rows", "softmax_backward", "matmul"}
    for module in (M, training, induction):
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", getattr(node.func, "attr", None))
                assert name not in banned, f"{module.__name__} calls {name}"
            if isinstance(node, ast.FunctionDef) and node.name != "loss_of":  # the loss's softmax, over logits
                assert "softmax_of_rows" not in ast.unparse(node), f"{module.__name__}.{node.name}"


def test_forward_keeps_the_scale_and_checks_the_mask_shape():
    model = TOY._replace(scale=2.0)
    trace = forward(model, [0, 1])
    assert trace.layers[0].scores[0][1][0] == pytest.approx(2.0 * sum(
        q * k for q, k in zip(trace.layers[0].Q[0][1], trace.layers[0].K[0][0])))
    assert trace.layers[0].attention[0][0] == [1.0, 0.0]  # the causal mask: query 0 sees key 0 only


# === Loss ===


def test_cross_entropy_by_hand():
    # Two equal logits: p = (1/2, 1/2), loss = log 2, gradient p - onehot(1) = (1/2, -1/2).
    loss, d = cross_entropy([[0.0, 0.0]], [1])
    assert loss == pytest.approx(math.log(2)) and d == [[0.5, -0.5]]
    # logits (log 3, 0): p = (3/4, 1/4); target 0: loss -log(3/4); two rows with a target: / 2.
    loss, d = cross_entropy([[math.log(3), 0.0], [0.0, 0.0], [7.0, 7.0]], [0, None, 1])
    assert loss == pytest.approx((-math.log(0.75) + math.log(2)) / 2)
    assert d[0] == pytest.approx([-0.125, 0.125]) and d[1] == [0.0, 0.0] and d[2] == pytest.approx([0.25, -0.25])


def test_cross_entropy_of_large_equal_logits_is_log_2():
    # Adding the top back before subtracting z_t loses log 2 in 1e17's spacing (16): the loss came out 0.0.
    assert cross_entropy([[1e17, 1e17]], [0])[0] == math.log(2)
    assert cross_entropy([[1e300, 1e300, 1e300, 1e300]], [3])[0] == math.log(4)


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


def test_cross_entropy_refuses_an_infinite_loss():
    with pytest.raises(ValueError) as info:
        cross_entropy([[1e308, -1e308]], [1])
    assert str(info.value) == message("too large", func="cross_entropy", what="the losses")


# === Gradients: central differences, every option ===


@pytest.mark.parametrize("positions", M.POSITIONS)
@pytest.mark.parametrize("residual", [True, False])
@pytest.mark.parametrize("b_U", [True, False])
def test_gradients_match_central_differences(positions, residual, b_U):
    model = small(positions, residual, b_U, seed=3)
    ids, target = [2, 0, 2, 1], [None, 1, 0, 2]  # token 2 twice: its embedding gradient is a sum of two rows
    loss, grads = loss_and_gradients(model, ids, target)
    params, analytic = flatten(model), flatten(grads)
    assert len(analytic) == len(params) and loss == forward_loss(model, ids, target)
    h = 1e-6
    for n in range(0, len(params), 3):  # every third parameter: every table, both layers
        up, down = list(params), list(params)
        up[n] += h
        down[n] -= h
        numeric = (forward_loss(unflatten(up, model), ids, target)
                   - forward_loss(unflatten(down, model), ids, target)) / (2 * h)
        assert numeric == pytest.approx(analytic[n], rel=1e-5, abs=1e-8), n
    assert grads.position_embeddings[4] == [0.0] * 4  # a position the sequence does not reach
    assert grads.token_embeddings[2] != [0.0] * 4
    assert (grads.positions, grads.residual, grads.scale) == (positions, residual, None)


def forward_loss(model, ids, target):
    return cross_entropy(forward(model, ids).logits, target)[0]


def test_one_layer_gradients_are_the_cores_bit_for_bit():
    model = small(layers=1, residual=False)
    ids, target = [0, 1, 2], [None, 0, 1]
    _, grads = loss_and_gradients(model, ids, target)
    trace = forward(model, ids)
    _, d_logits = cross_entropy(trace.logits, target)
    dH = matmul(d_logits, [list(col) for col in zip(*model.W_U)])
    g = core_gradients.multi_head_attention_backward(trace.streams[0], model.layers[0], dH, mask=causal_mask(3))
    assert grads.layers[0] == MHAWeights(g.W_Q, g.W_K, g.W_V, g.W_O)
    assert grads.position_embeddings[:3] == g.x


# === A batch and flat parameters ===


def test_batch_gradients_weigh_each_scored_position_once():
    pairs = [([0, 1, 2], [None, 0, 1]), ([2, 2], [None, 2])]  # 2 scored positions and 1: shares 2/3 and 1/3
    loss, g = batch_gradients(TOY, pairs)
    (l0, g0), (l1, g1) = (loss_and_gradients(TOY, ids, t) for ids, t in pairs)
    assert loss == pytest.approx(2 / 3 * l0 + 1 / 3 * l1)
    assert g == pytest.approx([2 / 3 * a + 1 / 3 * b for a, b in zip(flatten(g0), flatten(g1))])


def test_flatten_and_unflatten_round_trip():
    for model in (TOY, small(b_U=False, positions="queries and keys", residual=False, layers=3)):
        flat = flatten(model)
        expected = 3 * 4 + 5 * 4 + len(model.layers) * 4 * 4 * 4 + 4 * 3 + (3 if model.b_U else 0)
        assert len(flat) == expected and unflatten(flat, model) == model


# === Adam ===


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


@pytest.mark.parametrize("call", [lambda: adam_step([-1e308], [1.0], None, lr=1e308),
                                  lambda: adam_step([1.0], [1e300], None)])
def test_adam_refuses_updates_past_float64(call):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message("too large", func="adam_step", what="the updates")


# === Training ===


def batches(model, steps, size, T, seed=0):
    rng = derive_rng(seed, "test/batches")
    vocab = len(model.token_embeddings)
    return [[(ids, [None] + ids[:-1]) for ids in ([rng.randrange(vocab) for _ in range(T)] for _ in range(size))]
            for _ in range(steps)]


def test_train_is_adam_on_each_batch_and_calls_progress():
    data = batches(TOY, 4, 3, 4)
    seen = []
    trained, losses = train(TOY, data, lr=0.05, progress=seen.append)
    params, state = flatten(TOY), None
    for batch, loss, step in zip(data, losses, seen):
        expected, grads = batch_gradients(unflatten(params, TOY), batch)
        params, state = adam_step(params, grads, state, lr=0.05)
        assert loss == expected == step.loss and step.batch is batch and len(step.traces) == 3
    assert flatten(trained) == params and [s.number for s in seen] == [1, 2, 3, 4]
    assert all(isinstance(s, Step) and s.shares == [1 / 3] * 3 for s in seen)


def test_training_lowers_the_loss_and_gives_the_same_bits_twice():
    model = small(layers=1, residual=False, seed=5)
    data = batches(model, 40, 8, 5)
    trained, losses = train(model, data, lr=0.05)
    assert sum(losses[-5:]) < sum(losses[:5]) / 2
    assert train(model, data, lr=0.05) == (trained, losses)


def test_a_progress_callback_is_simply_called():
    from mha_lists import softmax
    with pytest.raises(TypeError, match=r"^matmul: B must be a non-empty list of rows, got '[^']*'$"):
        train(TOY, batches(TOY, 1, 1, 3), progress=lambda step: matmul([[1.0]], "x"))
    seen = []
    train(TOY, batches(TOY, 2, 1, 3), progress=lambda step: seen.append(softmax([0.0, 0.0])))
    assert seen == [[0.5, 0.5]] * 2


def test_an_overflow_while_training_is_named_train():
    model = TOY._replace(W_U=[[1e300] * 3] * 4)
    with pytest.raises(ValueError, match=r"^train: the "):
        train(model, batches(model, 1, 1, 3))


# === Checks: one message per rule ===

W6 = small(d=6, layers=1).layers[0]


@pytest.mark.parametrize("key, model", [
    ("model type", "model"),
    ("positions width", TOY._replace(position_embeddings=[[0.0] * 3] * 4)),
    ("layers", TOY._replace(layers=[])),
    ("biases", TOY._replace(layers=[TOY.layers[0]._replace(b_O=[0.0] * 4)])),
    ("layer width", TOY._replace(layers=[TOY.layers[0], W6])),
    ("grouped heads", TOY._replace(layers=[TOY.layers[0]._replace(W_K=TOY.layers[0].W_K[:1],
                                                                    W_V=TOY.layers[0].W_V[:1])])),
    ("W_U", TOY._replace(W_U=[[0.0] * 2] * 4)),
    ("b_U", TOY._replace(b_U=[0.0] * 2)),
    ("positions option", TOY._replace(positions="middle")),
    ("positions rows", TOY._replace(position_embeddings=[[0.0] * 4] * 4097)),
    ("residual option", TOY._replace(residual=1)),
])
def test_a_model_that_does_not_fit_is_named(key, model):
    with pytest.raises((TypeError, ValueError)) as info:
        forward(model, [0, 1])
    assert str(info.value) == message(key)


@pytest.mark.parametrize("key, call", [
    ("ids empty", lambda: forward(TOY, [])),
    ("ids long", lambda: forward(TOY._replace(position_embeddings=TOY.position_embeddings[:4]), [0] * 5)),
    ("ids range", lambda: forward(TOY, [0, 3])),
    ("targets length", lambda: cross_entropy([[0.0, 0.0]], [0, 1])),
    ("targets column", lambda: cross_entropy([[0.0, 0.0]], [2])),
    ("targets none", lambda: cross_entropy([[0.0, 0.0]], [None])),
    ("adam lengths", lambda: adam_step([1.0, 2.0], [1.0], None)),
    ("adam v", lambda: adam_step([1.0], [1.0], AdamState(1, [0.0], [-1.0]))),
    ("adam step", lambda: adam_step([1.0], [1.0], AdamState(0, [0.0], [0.0]))),
    ("adam state", lambda: adam_step([1.0], [1.0], "state")),
    ("betas", lambda: adam_step([1.0], [1.0], None, betas=(0.9, 1.0))),
    ("batch", lambda: batch_gradients(TOY, [])),
    ("pair", lambda: train(TOY, [[[0, 1, 2]]])),
    ("batches", lambda: train(TOY, [])),
    ("progress", lambda: train(TOY, batches(TOY, 1, 1, 2), progress=5)),
])
def test_messages(key, call):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == message(key)


def test_unflatten_names_its_sizes_and_entries():
    with pytest.raises(ShapeError) as info:
        unflatten([0.0], TOY)
    assert str(info.value) == message("flat length", n=len(flatten(TOY)))
    flat = flatten(TOY)
    for bad, error in ((["a"] + flat[1:], TypeError), ([math.nan] + flat[1:], ValueError),
                       ([True] + flat[1:], TypeError)):
        with pytest.raises(error, match=r"^unflatten: flat\[0\] is "):
            unflatten(bad, TOY)


# === Limits: nothing hangs ===


def test_a_forward_pass_too_large_is_refused_at_once():
    d, T = 1024, 300  # zeros: the refusal depends on the sizes alone (a random draw this size takes seconds)

    def table(rows, cols):
        return [[0.0] * cols for _ in range(rows)]

    wide = Model(table(2, d), table(T, d), [MHAWeights([table(d, d)], [table(d, d)], [table(d, d)], table(d, d))],
                 table(d, 2), [0.0, 0.0], None, "input", True)
    with pytest.raises(ValueError) as info:
        forward(wide, [0] * 300)
    work = M.forward_work(M.check_model("demo", "model", wide), 300)
    assert str(info.value) == message("work", func="forward", what="one forward pass", work=f"{work:,}")


def test_a_training_run_too_large_is_refused_before_it_starts():
    sizes = M.check_model("demo", "model", TOY)
    per = 3 * M.forward_work(sizes, 2)
    with pytest.raises(ValueError) as info:
        M.check_training_work("train", 10_000, 1000, per)
    assert str(info.value) == message("training work", steps="10,000", batch="1,000", per=f"{per:,}",
                                      work=f"{10_000 * 1000 * per:,}")
    M.check_training_work("train", 500, 16, 3 * M.forward_work(sizes, 5))  # a usual run passes


# === Nothing is changed ===


def test_a_long_value_is_shortened_in_a_message():
    for call in (lambda: cross_entropy([[0.0, 0.0]], [0] * 100_000), lambda: train(TOY, "x" * 100_000),
                 lambda: batch_gradients(TOY, [[0, 1]] * 100_000), lambda: forward(TOY, [[0]] * 100_000)):
        with pytest.raises((TypeError, ValueError)) as info:
            call()
        assert len(str(info.value)) < 200, str(info.value)[:300]


def test_arguments_are_not_changed():
    model, ids, target = copy.deepcopy(TOY), [1, 2, 1], [None, 1, 2]
    before = copy.deepcopy((model, ids, target))
    loss_and_gradients(model, ids, target)
    train(model, [[(ids, target)]])
    assert (model, ids, target) == before
