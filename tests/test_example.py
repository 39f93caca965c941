"""teaching/example.py: the running example every notebook shares. Pinned numbers, the pieces, the messages."""

import math

import pytest

from mha_lists import ShapeError, running_example
from mha_lists.teaching import example, weights
from mha_lists.teaching.display import format_number
from mha_lists.teaching.example import (EMBED_STD, MAX_LEN, MAX_TOKENS, SENTENCE, VOCAB, embed, embedding_table, encode,
                                        tokenize)
from bad_inputs import assert_no_mutation, assert_template, refused

NAN, INF = math.nan, math.inf
VOCAB_TEXT = "<PAD> <BOS> <EOS> I like transformers"

# Every message this module writes itself, once (the shared ones are in test_checks.py and test_weights.py).
MESSAGES = {
    "empty sentence": "{func}: the sentence is empty; give at least one token",
    "long sentence": "{func}: the sentence has {n} tokens; at most 512",
    "words": "{func}: {name} must be a list of str, got {value}",
    "empty vocabulary": "{func}: the vocabulary is empty",
    # notebook 01 prints this one: the vocabulary as the words it is, not a quoted str
    "unknown token": "{func}: {token} is not in the vocabulary; the vocabulary is {vocab}",
    "embed widths": "embed: token rows have {d} entries but position rows have {d_P}; both must be d_model wide",
    "embed ids": "embed: ids must be a non-empty list of ints, got {value}",
    "embed positions": "embed: {n} tokens but the position table has {rows} rows; it needs one row per position",
    "embed id range": "embed: ids[{i}] is {t}; token ids must be ints from 0 to {last}",
    "embed overflow": "embed: the sums of token and position rows are too large: a product or sum overflowed "
                      "float64 (largest about 1.8e308); scale the inputs down",
    "unknown setting": "running_example: unknown setting {name}; the settings of the weights are bias, d_k, d_v, "
                       "num_kv_heads, init, std, n_layer",
}

BAD_CALLS = {
    "empty sentence": (ValueError, lambda: tokenize("   "), dict(func="tokenize")),
    "long sentence": (ValueError, lambda: running_example(sentence="I " * 600), dict(func="running_example", n=600)),
    "words": (TypeError, lambda: encode("I like"), dict(func="encode", name="tokens", value="'I like'")),
    "empty vocabulary": (ValueError, lambda: encode(["I"], []), dict(func="encode")),
    "unknown token": (ValueError, lambda: encode(["cats"]), dict(func="encode", token="'cats'", vocab=VOCAB_TEXT)),
    "embed widths": (ShapeError, lambda: embed([0], [[1.0]], [[1.0, 2.0]]), dict(d=1, d_P=2)),
    "embed ids": (TypeError, lambda: embed([], [[1.0]], [[1.0]]), dict(value="[]")),
    "embed positions": (ShapeError, lambda: embed([0, 0], [[1.0]], [[1.0]]), dict(n=2, rows=1)),
    "embed id range": (ValueError, lambda: embed([1, 9], [[1.0], [2.0]], [[1.0], [1.0]]), dict(i=1, t=9, last=1)),
    "embed overflow": (ValueError, lambda: embed([0], [[1e308]], [[1e308]]), {}),
    "unknown setting": (TypeError, lambda: running_example(foo=1), dict(name="'foo'")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    assert_template(MESSAGES, BAD_CALLS, key)


# === The running example ===


def test_running_example_shapes_and_pinned_numbers():
    ex = running_example()
    assert ex.tokens == SENTENCE.split() and ex.ids == [1, 3, 4, 5, 2]
    assert len(ex.token_embeddings) == len(VOCAB) and len(ex.position_embeddings) == MAX_LEN == 8
    assert len(ex.x) == 5 and len(ex.x[0]) == 16
    assert (ex.seq_len, ex.d_model, ex.num_heads, ex.num_kv_heads, ex.d_k, ex.d_v, ex.seed) == (5, 16, 2, 2, 8, 8, 42)
    assert ex.sentence == SENTENCE and ex.embed_std == EMBED_STD == 0.5
    # Pinned: a change to seeding or drawing must be deliberate (re-execute the notebooks).
    assert format_number(ex.x[0][0]) == "0.9290"
    assert format_number(ex.weights.W_Q[0][0][0]) == "-0.2188"
    assert embed(ex.ids, ex.token_embeddings, ex.position_embeddings) == ex.x


def test_running_example_is_the_pieces_called_one_by_one():
    ex = running_example(sentence="<BOS> I like I", d_model=8, num_heads=4, seed=7, embed_std=0.25, bias=True)
    ids = encode(tokenize("<BOS> I like I"))
    tokens = embedding_table(len(VOCAB), 8, seed=7, name="token_embedding", std=0.25)
    positions = embedding_table(MAX_LEN, 8, seed=7, name="position_embedding", std=0.25)
    assert ex.ids == ids == [1, 3, 4, 3]
    assert ex.x == embed(ids, tokens, positions)
    assert ex.weights == weights.init_mha_weights(8, 4, seed=7, bias=True)


def test_rebuild_changes_one_setting():
    ex = running_example()
    assert ex.rebuild(bias=True) == running_example(bias=True)
    assert ex.rebuild(seed=1).settings == {**ex.settings, "seed": 1}
    assert ex.rebuild() == ex


def test_a_long_sentence_gets_a_longer_position_table():
    ex = running_example(sentence=" ".join(["I"] * 10))
    assert len(ex.position_embeddings) == 10 and len(ex.x) == 10
    assert ex.position_embeddings[:MAX_LEN] == running_example().position_embeddings
    assert len(running_example(sentence=" ".join(["I"] * MAX_TOKENS)).x) == MAX_TOKENS


def test_embedding_tables_are_independent_streams():
    a = embedding_table(6, 16, seed=42, name="token_embedding")
    longer = embedding_table(10, 16, seed=42, name="token_embedding")
    assert longer[:6] == a
    assert running_example(num_heads=4).x == running_example().x  # weights draw from other streams
    assert embedding_table(2, 2, seed=0, name="\udcff") == embedding_table(2, 2, seed=0, name="\udcff")


def test_tokenize_encode_embed_by_hand():
    assert tokenize(" <BOS>  I ") == ["<BOS>", "I"]
    assert encode(["<BOS>", "I", "like", "transformers", "<EOS>"]) == [1, 3, 4, 5, 2]
    assert encode(["b"], ["a", "b"]) == [1]
    assert embed([1, 0], [[1, 2], [10, 20]], [[0.5, 0.5], [0.25, 0.25]]) == [[10.5, 20.5], [1.25, 2.25]]


# === Errors name the function and the argument ===


@pytest.mark.parametrize("call, error, start", [
    (lambda: tokenize(5), TypeError, "tokenize: sentence must be a str"),
    (lambda: running_example(sentence=5), TypeError, "running_example: sentence must be a str"),
    (lambda: embedding_table(2, 4, seed=0, name=5), TypeError, "embedding_table: name must be a str"),
    (lambda: embedding_table(10**9, 10**9, seed=0, name="t"), ValueError, "embedding_table: num_rows 1000000000"),
    (lambda: embed([9], embedding_table(6, 4, seed=0, name="t"), embedding_table(8, 4, seed=0, name="p")),
     ValueError, r"embed: ids\[0\] is 9"),
    (lambda: running_example(d_model=10**6, num_heads=1, d_k=1, d_v=1), ValueError,
     "running_example: 8 positions and d_model 1000000 make 8,000,000 weights"),
    (lambda: encode(["I"], [1, 2]), TypeError, "encode: vocab must be a list of str"),
])
def test_errors_name_the_function_and_the_argument(call, error, start):
    with pytest.raises(error, match=f"^{start}"):
        call()


def test_running_example_reports_under_its_own_name():
    for options in (dict(seed="x"), dict(seed=1.5), dict(embed_std=NAN), dict(embed_std=-1.0), dict(sentence=""),
                    dict(num_heads=3), dict(bias="no"), dict(init="normal", std=NAN), dict(init="normal", std=-1),
                    dict(init="he"), dict(d_model=0), dict(num_kv_heads=3),
                    dict(sentence="I " * 100_000), dict(d_model=10**9), dict(d_model="16"), dict(num_heads=10**9),
                    dict(num_heads=2.0), dict(seed=None), dict(embed_std=0), dict(embed_std="1"), dict(d_k=10**9),
                    dict(seed=10**5000), dict(n_layer=0), dict(trained="yes"), dict(trained=True, sentence="x" * 25),
                    dict(trained=True, sentence=""), dict(trained=True, sentence=5), dict(trained=True, d_model=16),
                    dict(trained=True, num_heads=4), dict(trained=True, init="normal"), dict(trained=True, bias="no"),
                    dict(trained=True, bias=1), dict(trained=True, seed="x")):
        refused("running_example", lambda: running_example(**options))


# === Bad inputs of every kind: a named error of one short line, never a raw one ===


def test_bad_arguments_are_refused_by_name():
    for sentence in ["", "   ", None, ["a"], 5, b"I like", "I " * 1000]:
        refused("tokenize", lambda: tokenize(sentence))
    for args in [(["cats"],), ("I like",), ([1, 2],), (None,), (["I"], []), (["I"], "I like"), (["I"], None),
                 ([["I"]],), (["I"], [1, 2]), (["x" * 10**6],), (["I"], ["a"] * 10**5)]:
        refused("encode", lambda: encode(*args))
    for name in [None, 5, ["t"]]:
        refused("embedding_table", lambda: embedding_table(2, 4, seed=0, name=name))
    for n in [None, "2", 2.5, 2.0, 0, -1, True, [2], 10**400, 10**9]:
        refused("embedding_table", lambda: embedding_table(n, 4, seed=0, name="t"))
        refused("embedding_table", lambda: embedding_table(2, n, seed=0, name="t"))
    for std in [None, "1", NAN, INF, -INF, 0, -1.0, True, [1.0], 1e301]:
        refused("embedding_table", lambda: embedding_table(2, 4, seed=0, name="t", std=std))
    for seed in [None, "x", 1.5, True, [1], 10**100, -10**5000]:
        refused("embedding_table", lambda: embedding_table(2, 4, seed=seed, name="t"))
    for args in [([9], [[1.0]], [[1.0]]), ([0, 0], [[1.0]], [[1.0]]), ([0], [[1.0]], [[1.0, 2.0]]),
                 ([0], [[NAN]], [[1.0]]), ([0], [[1.0]], [[INF]]), (None, [[1.0]], [[1.0]]), ([True], [[1.0]], [[1.0]]),
                 ([0], None, [[1.0]]), ([0], [[1.0]], None), ([], [[1.0]], [[1.0]]), ([-1], [[1.0]], [[1.0]]),
                 ([0.0], [[1.0]], [[1.0]]), ("0", [[1.0]], [[1.0]]), ([0], [[1e308]], [[1e308]]),
                 ([10**400], [[1.0]], [[1.0]]), ([0], [[10**400]], [[1.0]]), (list(range(10**5)), [[1.0]], [[1.0]])]:
        refused("embed", lambda: embed(*args))


# === Nothing is changed ===


@pytest.mark.parametrize("call, args, kwargs", [
    (tokenize, ("<BOS> I",), {}), (encode, (["I", "like"], ["I", "like"]), {}), (encode, (["cats"],), {}),
    (embed, ([1, 0], [[1.0, 2.0], [3.0, 4.0]], [[0.5, 0.5], [0.25, 0.25]]), {}),
    (embed, ([5], [[1.0]], [[1.0]]), {}), (embedding_table, (2, 3), dict(seed=1, name="t")),
    (running_example, (), dict(sentence="<BOS> I like", bias=True)),
])
def test_every_public_function_leaves_its_arguments_alone(call, args, kwargs):
    assert_no_mutation(call, *args, **kwargs)


def test_require_standard_heads_names_the_setting_it_refuses():
    for settings in ({}, {"num_heads": 16}, {"d_model": 24, "num_heads": 3}, {"d_k": 8, "d_v": 8}):
        assert running_example(**settings).require_standard_heads("09") is None
    with pytest.raises(ValueError, match=r"^notebook 09 needs num_kv_heads == num_heads \(2\), got num_kv_heads=1: "):
        running_example(num_kv_heads=1).require_standard_heads("09")
    running_example(num_kv_heads=1).require_standard_heads("12", kv_per_head=False)  # 12 shares K and V itself
    running_example(d_k=4, d_v=12).require_standard_heads("02-06", equal_sizes=False)  # 02-06 counts any sizes
    for settings, got in (({"d_k": 3, "d_v": 5}, "d_k=3, d_v=5"), ({"d_k": 4}, "d_k=4, d_v=8"),
                          ({"num_heads": 3, "d_k": 5, "d_v": 5}, "d_k=5, d_v=5")):
        with pytest.raises(ValueError, match=rf"^notebook 13 needs d_k == d_v == d_model / num_heads \(.*\), got {got}: "):
            running_example(**settings).require_standard_heads("13", kv_per_head=False)
    with pytest.raises(TypeError, match=r"^require_standard_heads: notebook must be a str"):
        running_example().require_standard_heads(9)
    with pytest.raises(TypeError, match=r"^require_standard_heads: kv_per_head must be True or False"):
        running_example().require_standard_heads("09", kv_per_head=1)
    with pytest.raises(TypeError, match=r"^require_standard_heads: equal_sizes must be True or False"):
        running_example().require_standard_heads("09", equal_sizes=None)


def test_the_example_is_not_shared_between_calls():
    ex = running_example()
    ex.x[0][0] = 99.0
    ex.weights.W_Q[0][0][0] = 99.0
    again = running_example()
    assert again.x[0][0] != 99.0 and again.weights.W_Q[0][0][0] != 99.0
    assert VOCAB == ["<PAD>", "<BOS>", "<EOS>", "I", "like", "transformers"] and example.PAD_ID == 0


# === The trained example: one token per character ===


def test_the_vocabulary_names_every_token_as_the_tokens_write_it():
    assert running_example().vocab == VOCAB and running_example().trained is False
    assert running_example(sentence=None) == running_example()  # None: the default sentence of its kind
    for sentence in ("Hi, world! 4:30?", "Café naïve, olé", "the cat 🙂 sat", "ab"):
        ex = running_example(trained=True, sentence=sentence)
        assert ex.trained and len(ex.tokens) == len(sentence)
        assert [ex.vocab[t] for t in ex.ids] == ex.tokens  # a space is "␣", a character the book lacks "<unk>"
        assert encode(ex.tokens, ex.vocab) == ex.ids
    vocab = running_example(trained=True).vocab
    assert vocab[:2] == ["<unk>", "␣"] and len(vocab) == len(set(vocab)) == len(running_example(trained=True).token_embeddings)


def test_the_trained_example_has_the_models_attention_weights_but_not_its_values():
    """02-06 and 07b say: `running_example(trained=True)` has exactly the trained model's layer-0 attention weights
    (under the causal mask), while its values, made from x (characters plus positions), are not the model's."""
    from mha_lists import attention_trace, causal_mask
    from mha_lists.teaching.model import run
    from mha_lists.teaching.reading import encode as encode_text, trained_model
    model = trained_model()
    for sentence in ("and god said", "In the beginning", "ab", "x", "the cat 🙂 sat on"[:16]):
        ex = running_example(trained=True, sentence=sentence)
        ours = attention_trace(ex.x, ex.weights, mask=causal_mask(len(ex.tokens)))
        layer_0 = run(model, encode_text(sentence)).layers[0]
        assert ours.attention == layer_0.attention, sentence
        if len(sentence) > 1:
            assert ours.V != layer_0.V, sentence


@pytest.mark.parametrize("setting", [dict(num_heads=3.0), dict(num_heads=True), dict(d_model="24"),
                                     dict(d_model=24.0)])
def test_the_trained_examples_sizes_are_ints_like_the_random_ones(setting):
    """With trained=True, d_model and num_heads may be given only as the model's own sizes, and only as ints:
    3.0 is refused as it is without trained=True."""
    assert isinstance(refused("running_example", lambda: running_example(trained=True, **setting), TypeError),
                      TypeError)
    assert running_example(trained=True, num_heads=3, d_model=24).weights is not None
