"""The teaching modules training, block, torch_init and decoding check at the door (issue 13, item 2).

Every public function declares its contract with ``@checked``; no body calls a check helper by
hand. The rules the contracts added (inputs that used to slip through, or errors that used to be
named after an inner function) are pinned here word for word.
"""

import ast
import inspect
import math

import pytest

from mha_lists import ShapeError, running_example
from mha_lists.teaching import block, decoding, torch_init, training
from mha_lists.teaching.training import AdamState
from mha_lists.teaching.weights import init_mha_weights

MODULES = [training, block, torch_init, decoding]
TOY = training.init_model(3, 4, 4, 2, seed=0)  # vocab 3, 4 positions, d_model 4, 2 heads
TOO_LARGE = "the values are too large: a product or sum overflowed float64"


def public_functions(module):
    """(name, function) for every function a module defines without a leading underscore."""
    return [(name, f) for name, f in vars(module).items()
            if inspect.isfunction(f) and not name.startswith("_") and f.__module__ == module.__name__]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_every_public_function_has_a_door_with_a_contract(module):
    functions = public_functions(module)
    assert functions
    for name, f in functions:
        assert hasattr(f, "contract"), f"{module.__name__}.{name} has no @checked door"
        assert f.contract, f"{module.__name__}.{name}: the door declares no argument"


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_no_public_body_checks_by_hand(module):
    tree = ast.parse(inspect.getsource(module))
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            hand = sorted(c for c in called if c.startswith("check_") or c.startswith("_check"))
            assert not hand, f"{module.__name__}.{node.name} calls {hand}"
            raises = [n for n in ast.walk(node) if isinstance(n, ast.Raise)]
            assert not raises, f"{module.__name__}.{node.name} raises in its body; the door checks"


# === model_from_example: the example must make a model (these used to slip through) ===

EX = running_example()


@pytest.mark.parametrize("ex, error, message", [
    (EX._replace(settings={}), TypeError,  # was a raw KeyError: 'seed'
     "model_from_example: ex.settings must be the dict of running_example's settings, with the seed"),
    (EX._replace(settings={**EX.settings, "seed": 1.5}), TypeError,  # was named after derive_rng
     "model_from_example: ex.seed must be an int, got 1.5 (float)"),
    (EX._replace(position_embeddings=None), TypeError,  # was a raw "'NoneType' object is not iterable"
     "model_from_example: ex.position_embeddings must be a list of rows, got NoneType"),
    (EX._replace(position_embeddings=[[0.0] * 3] * 2), ShapeError,  # was a model that cannot run
     "model_from_example: ex.position_embeddings rows have 3 entries and ex.x rows have 16; both must be d_model wide"),
    (EX._replace(token_embeddings=[[0.0] * 8] * 6), ShapeError,
     "model_from_example: ex.token_embeddings rows have 8 entries and ex.x rows have 16; both must be d_model wide"),
    (EX._replace(weights=None), TypeError, "model_from_example: ex.weights must be an MHAWeights, got NoneType"),
    (EX._replace(weights=init_mha_weights(8, 2, seed=0)), ShapeError,
     "model_from_example: ex.weights is for d_model 8 but the embeddings are 16 wide"),
])
def test_model_from_example_refuses_an_example_that_makes_no_model(ex, error, message):
    with pytest.raises(error) as info:
        training.model_from_example(ex)
    assert str(info.value) == message


def test_model_from_example_makes_a_model_every_training_function_accepts():
    model = training.model_from_example(EX)
    assert training.flatten(model) == training.flatten(training.unflatten(training.flatten(model), model))


# === Messages that name the argument the learner passed ===


@pytest.mark.parametrize("call, error, message", [
    (lambda: training.forward(TOY, []), ShapeError, "forward: ids must be a non-empty list of token ids, got []"),
    (lambda: training.targets([]), ShapeError, "targets: ids must be a non-empty list of token ids, got []"),
    (lambda: training.model_gradients(TOY, [0]), ShapeError,
     "model_gradients: ids must be a list of at least 2 token ids, got [0]"),
    (lambda: training.batch_gradients(TOY, []), ShapeError,
     "batch_gradients: batch must be a non-empty list of sequences (lists of token ids), got []"),
    (lambda: training.batch_gradients(TOY, [[0, 1], [0]]), ShapeError,
     "batch_gradients: batch[1] must be a list of at least 2 token ids, got [0]"),
    (lambda: training.accuracy(TOY, [[0, 5]]), ValueError, "accuracy: sequences[0][1] is 5; token ids must be 0 to 2"),
    (lambda: training.unflatten([0.0], None), TypeError,
     "unflatten: like must be a Model (from model_from_example or init_model), got NoneType"),
    (lambda: training.unflatten([0.0], TOY), ShapeError,
     f"unflatten: flat has 1 numbers but a model shaped like `like` has {len(training.flatten(TOY))}"),
    (lambda: training.adam_step([1.0], [1.0], AdamState(1, [0.0], [-1.0])), ValueError,
     "adam_step: state.v[0] is -1.0; a running mean of squares is 0 or more"),
    (lambda: training.adam_step([1.0, 2.0], [1.0], None), ShapeError,
     "adam_step: params has 2 entries and grads has 1; one gradient per parameter"),
    (lambda: training.train(TOY, steps=1, batch_size=2, seq_len=5, seed=0), ValueError,
     "train: seq_len is 5; it must be at least 2 (position 0 has no target) and at most the 4 rows of the position table"),
    (lambda: training.previous_token_weight([[1.0, 0.0]]), ShapeError,
     "previous_token_weight: attention is 1x2; it must be square (self-attention) with at least 2 rows"),
])
def test_messages(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


# === Overflow inside is named after the function the learner called ===


def test_an_overflowing_adam_step_inside_train_is_named_train():
    # W_vocab near float64's largest: the first step's squared gradients overflow (it said "adam_step:").
    with pytest.raises(ValueError, match=f"^train: {TOO_LARGE}"):
        training.train(TOY._replace(W_vocab=[[1e300] * 3] * 4), steps=1, batch_size=1, seq_len=2, seed=0)


def test_an_infinite_loss_inside_model_gradients_is_named_model_gradients():
    # logits 1e308 and -1e308: the loss on the -1e308 column is inf (it said "cross_entropy:").
    model = TOY._replace(b_vocab=[1e308, -1e308, 0.0])
    with pytest.raises(ValueError, match=f"^model_gradients: {TOO_LARGE}"):
        training.model_gradients(model, [1, 1])
    with pytest.raises(ValueError, match=f"^cross_entropy: {TOO_LARGE}"):
        training.cross_entropy([[1e308, -1e308, 0.0]], [1])


@pytest.mark.parametrize("name", ["forward", "attention_weights", "model_gradients"])
def test_embeddings_that_add_up_past_float64_are_named(name):
    model = TOY._replace(token_embeddings=[[1.7e308] * 4] * 3, position_embeddings=[[1.7e308] * 4] * 4)
    with pytest.raises(ValueError, match=f"^{name}: {TOO_LARGE}"):
        getattr(training, name)(model, [0, 1])


def test_the_door_leaves_the_numbers_alone():
    # Trusted inside: model_gradients is the forward pass, the loss and the backward pass, the same bits.
    ids = [2, 0, 1, 1]
    loss, grads = training.model_gradients(TOY, ids)
    fwd = training.forward(TOY, ids)
    assert loss == training.cross_entropy(fwd.logits, training.targets(ids))[0]
    assert all(math.isfinite(v) for v in training.flatten(grads))


def test_a_model_with_attention_biases_is_refused_rather_than_trained_without_them():
    from mha_lists import running_example
    from mha_lists.teaching.training import forward, model_from_example, train
    with pytest.raises(ValueError, match=r"^model_from_example: ex\.weights has biases \(b_Q, b_K, b_V, b_O\); "
                                         r"the model trained here has none"):
        model_from_example(running_example(bias=True))
    model = model_from_example(running_example())
    biased = model._replace(attention=model.attention._replace(b_O=[0.0] * len(model.attention.W_O[0])))
    for call in (lambda: forward(biased, [0, 1]), lambda: train(biased, steps=1, batch_size=1, seq_len=2, seed=0)):
        with pytest.raises(ValueError, match=r"^(forward|train): model\.attention has biases \(b_O\)"):
            call()
