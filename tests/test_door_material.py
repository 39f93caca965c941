"""The teaching material (weights, example, paper, strided, cost) checks at the door: ``@checked``.

Each public function declares its arguments above its def; what it calls trusts them. So the
contract of a function that calls others (running_example) must cover what they would have
checked, and an overflow inside is reported by the door, with the OverflowError kept as the cause.
"""

import inspect
import math
import random

import pytest

from mha_lists import ShapeError
from mha_lists.core.checks import checked
from mha_lists.teaching import cost, example, paper, strided, weights
from mha_lists.teaching.strided import Strided

# Functions that take nothing to check (paper_example), and the check helpers other modules call by hand.
NO_DOOR = {"paper_example", "check_size", "check_std", "check_weight_count", "check_layer_settings"}


def public_functions(module):
    for name, obj in vars(module).items():
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_"):
            yield name, obj


@pytest.mark.parametrize("module", [weights, example, paper, strided, cost], ids=lambda m: m.__name__)
def test_every_public_function_has_a_door(module):
    without = [name for name, f in public_functions(module) if name not in NO_DOOR and not hasattr(f, "contract")]
    assert without == []


def test_every_method_of_the_strided_tensor_has_a_door_for_self():
    methods = {name: inspect.getattr_static(Strided, name) for name in vars(Strided)
               if not name.startswith("_") and inspect.isfunction(inspect.getattr_static(Strided, name))}
    assert sorted(methods) == ["contiguous", "element", "is_contiguous", "storage_index", "tolist", "transpose", "view"]
    assert all(f.contract["self"] == "strided tensor" for f in methods.values())
    assert Strided.row_major_strides.contract == {"shape": "strided shape"}  # a staticmethod: it takes a shape
    with pytest.raises(ShapeError, match=r"^view: t's storage has 1 entries but its shape \(2,\)"):
        Strided([1], (2,), (1,)).view((2,))  # the messages call a method's tensor t, as the docs do


def test_the_counter_has_a_door_and_speaks_as_matmul():
    assert cost.MultiplyAddCounter.matmul.contract["A"] == "finite matrix n m"
    with pytest.raises(ShapeError, match=r"^matmul: A is 1x2 and B is 3x1; A's columns \(2\) must equal B's rows \(3\)$"):
        cost.MultiplyAddCounter().matmul("demo", [[1.0, 2.0]], [[1.0], [2.0], [3.0]])
    with pytest.raises(TypeError, match=r"^matmul: step must be a str \(the name to count under\), got 5$"):
        cost.MultiplyAddCounter().matmul(5, [[1.0]], [[1.0]])


def test_an_overflowing_product_is_refused_and_its_work_counted():
    counter = cost.MultiplyAddCounter()
    with pytest.raises(ValueError, match=r"^matmul: the values are too large"):
        counter.matmul("big", [[1e200, 1.0]], [[1e200], [1.0]])
    assert counter.counts == {"big": 2}  # 1 row x 2 x 1 column: done, then refused


# === running_example: its contract covers everything it calls ===


def test_running_example_limits_its_position_table_under_its_own_name():
    # Small heads keep the layer under the limit; the tables (8 positions x d_model) are not.
    with pytest.raises(ValueError) as info:
        example.running_example(d_model=10**6, num_heads=1, d_k=1, d_v=1)
    assert str(info.value) == "running_example: 8 positions and d_model 1000000 make 8,000,000 weights; at most 5,000,000"


def test_running_example_is_the_pieces_called_one_by_one():
    ex = example.running_example(sentence="<BOS> I like I", d_model=8, num_heads=4, seed=7, embed_std=0.25, bias=True)
    ids = example.encode(example.tokenize("<BOS> I like I"))
    tokens = example.embedding_table(len(example.VOCAB), 8, seed=7, name="token_embedding", std=0.25)
    positions = example.embedding_table(example.MAX_LEN, 8, seed=7, name="position_embedding", std=0.25)
    assert ex.ids == ids == [1, 3, 4, 3]
    assert ex.x == example.embed(ids, tokens, positions)
    assert ex.weights == weights.init_mha_weights(8, 4, seed=7, bias=True)


@pytest.mark.parametrize("call, message", [
    (lambda: example.tokenize(5), "tokenize: sentence must be a str, got 5 (int)"),
    (lambda: example.running_example(sentence=5), "running_example: sentence must be a str, got 5 (int)"),
    (lambda: example.embedding_table(2, 4, seed=0, name=5), "embedding_table: name must be a str, got 5 (int)"),
    (lambda: weights.derive_rng(1, 5), "derive_rng: name must be a str, got 5 (int)"),
    (lambda: weights.init_matrix(2, 2, random), "init_matrix: rng must be a random.Random (e.g. derive_rng(seed, name)), "
                                                "got module"),
    (lambda: example.running_example(d_model=16, num_heads=2, seed=0, foo=1),
     "running_example: unknown setting 'foo'; the settings of the weights are bias, d_k, d_v, num_kv_heads, init, std, n_layer"),
    (lambda: example.embed([0], [[1.0]], [[1.0, 2.0]]),
     "embed: token rows have 1 entries but position rows have 2; both must be d_model wide"),
])
def test_the_door_words_the_message(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == message


# === Overflow: the door reports it, and keeps the traceback ===


@pytest.mark.parametrize("name, call", [
    ("exp_table", lambda: paper.exp_table([800], 1.0)),  # math.exp raises OverflowError
    ("score_differences", lambda: paper.score_differences([[[-1.7e308, 1.7e308]]])),  # int(-inf)
])
def test_an_overflow_inside_is_named_and_its_cause_kept(name, call):
    with pytest.raises(ValueError, match=rf"^{name}: the values are too large") as info:
        call()
    assert isinstance(info.value.__cause__, OverflowError)


def test_an_overflow_in_the_result_is_named():
    with pytest.raises(ValueError, match=r"^exp_table: the values are too large"):
        paper.exp_table([-1e308], 10.0)  # x = -inf: e^x would be a silent 0
    with pytest.raises(ValueError, match=r"^raw_scores: the values are too large"):
        paper.raw_scores([[1e200]], [[1e200]])
    with pytest.raises(ValueError, match=r"^embed: the values are too large"):
        example.embed([0], [[1e308]], [[1e308]])
    assert paper.exp_table([709], 1.0)[0].exp == round(math.exp(709), 4)  # the largest whole exponent still fits


# === The kinds the material registers, usable in any contract ===


@checked(t="strided tensor", shape="optional strided shape", std="init std", rng="rng")
def demo(t, shape=None, std=1.0, rng=None):
    return "ran"


def test_the_registered_kinds_name_the_function_and_the_argument():
    good = strided.tensor([1, 2])
    assert demo(good, rng=random.Random(0)) == "ran"
    with pytest.raises(ShapeError, match=r"^demo: t's storage has 1 entries but its shape \(2,\)"):
        demo(Strided([1], (2,), (1,)), rng=random.Random(0))
    with pytest.raises(ValueError, match=r"^demo: shape\[1\] must be a positive int, got 0$"):
        demo(good, (2, 0), rng=random.Random(0))
    with pytest.raises(ValueError, match=r"^demo: std is 1e\+301; at most 1e\+300"):
        demo(good, std=1e301, rng=random.Random(0))
    with pytest.raises(TypeError, match=r"^demo: rng must be a random.Random"):
        demo(good, rng=None)


def test_the_tensor_checks_walk_every_branch_before_copying():
    with pytest.raises(ShapeError, match=r"^tensor: ragged at depth 1; every list there must have 2 items$"):
        strided.tensor([[1, 2], [3, 4], [5]])
    with pytest.raises(TypeError, match=r"^tensor: an entry is 'x' \(str\); entries must be numbers$"):
        strided.tensor([[[1], [2]], [[3], ["x"]]])
    assert strided.tensor(((1, 2), (3, 4))) == Strided([1, 2, 3, 4], (2, 2), (2, 1))
