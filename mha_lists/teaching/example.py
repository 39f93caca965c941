"""The running example every notebook and the CLI share.

Vocabulary ``<PAD> <BOS> <EOS> I like transformers``, the sentence
``<BOS> I like transformers <EOS>``, d_model 16, 2 heads (d_k = d_v = 8),
seed 42. ``running_example()`` rebuilds all of it in one call, from generators
of its own, so no notebook depends on another having run.

``running_example(trained=True, sentence="any text")`` is the same example on the
first layer of a model trained on a book (``teaching/reading.py``): one token per
character, the trained token and position tables, the trained W_Q, W_K, W_V, W_O of
layer 0, whose heads have jobs (a previous-token head, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

from ..core.attention import MHAWeights
from ..core.checks import check_type, ShapeError, all_finite, check_int, check_matrix, check_positive_int, \
    quote_int, shorten, too_large
from ..core.matrix import Matrix
from .weights import check_layer_settings, check_std, check_weight_count, derive_rng, init_mha_weights

__all__ = ["VOCAB", "PAD_ID", "running_example", "tokenize", "encode", "embedding_table", "embed"]

VOCAB = ["<PAD>", "<BOS>", "<EOS>", "I", "like", "transformers"]
SENTENCE = "<BOS> I like transformers <EOS>"
D_MODEL = 16
NUM_HEADS = 2
SEED = 42
MAX_LEN = 8  # rows of the position table; longer sentences get a longer table
PAD_ID = 0
EMBED_STD = 0.5  # small enough that the first softmax is not saturated; try 1.0 and watch
MAX_TOKENS = 512  # longest sentence running_example takes: its attention is (tokens x tokens) per head
# The settings running_example passes on to init_mha_weights.
WEIGHT_OPTIONS = ("bias", "d_k", "d_v", "num_kv_heads", "init", "std", "n_layer")
TRAINED_SENTENCE = "in the beginning"  # the trained example's default: one token per character (16, the window)


def check_sentence(func: str, sentence: object) -> list[str]:
    """A str with at least one token (and at most MAX_TOKENS); return its tokens."""
    tokens = check_type(func, "sentence", sentence, str, "a str").split()
    if not tokens:
        raise ValueError(f"{func}: the sentence is empty; give at least one token")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(f"{func}: the sentence has {len(tokens):,} tokens; at most {MAX_TOKENS}")
    return tokens


def tokenize(sentence: str) -> list[str]:
    """Split a sentence on spaces: ``"<BOS> I like"`` -> ``['<BOS>', 'I', 'like']``."""
    return check_sentence("tokenize", sentence)


def check_known(func: str, tokens: object, vocab: object) -> None:
    """tokens and vocab are lists of str, and every token is in the vocabulary."""
    for name, words in (("tokens", tokens), ("vocab", vocab)):
        if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
            raise TypeError(f"{func}: {name} must be a list of str, got {shorten(words)}")
    if not vocab:
        raise ValueError(f"{func}: the vocabulary is empty")
    for token in tokens:
        if token not in vocab:
            words = " ".join(vocab[:100])
            raise ValueError(f"{func}: {shorten(token)} is not in the vocabulary; the vocabulary is "
                             f"{words if len(words) <= 200 else words[:196] + ' ...'}")


def encode(tokens: Sequence[str], vocab: Sequence[str] = VOCAB) -> list[int]:
    """Each token's position in the vocabulary.

    >>> encode(["<BOS>", "I", "like", "transformers", "<EOS>"])
    [1, 3, 4, 5, 2]
    """
    check_known("encode", tokens, vocab)
    return [list(vocab).index(token) for token in tokens]


def embedding_table(num_rows: int, d_model: int, *, seed: int, name: str, std: float = EMBED_STD) -> Matrix:  # (num_rows, d_model)
    """A table of N(0, std) draws from the generator ``derive_rng(seed, name)``.

    Rows are drawn in order, so a longer table starts with the same rows.

    >>> embedding_table(2, 3, seed=42, name="demo") == embedding_table(5, 3, seed=42, name="demo")[:2]
    True
    """
    check_positive_int("embedding_table", "num_rows", num_rows)
    check_positive_int("embedding_table", "d_model", d_model)
    check_int("embedding_table", "seed", seed)
    check_type("embedding_table", "name", name, str, "a str")
    check_std("embedding_table", "std", std)
    check_weight_count("embedding_table", num_rows * d_model, f"num_rows {num_rows} and d_model {d_model}")
    rng = derive_rng(seed, name)
    return [[rng.gauss(0.0, std) for _ in range(d_model)] for _ in range(num_rows)]


def embed(ids: Sequence[int], token_table: Matrix, position_table: Matrix) -> Matrix:  # (T,) -> (T, d_model)
    """X[i] = token_table[ids[i]] + position_table[i].

    >>> embed([1, 0], [[1, 2], [10, 20]], [[0.5, 0.5], [0.25, 0.25]])
    [[10.5, 20.5], [1.25, 2.25]]
    """
    n_tokens, d_model = check_matrix("embed", "token_table", token_table)
    n_positions, d_model_P = check_matrix("embed", "position_table", position_table)
    if d_model_P != d_model:
        raise ShapeError(f"embed: token rows have {d_model} entries but position rows have {d_model_P}; "
                         "both must be d_model wide")
    if not isinstance(ids, (list, tuple)) or not ids:
        raise TypeError(f"embed: ids must be a non-empty list of ints, got {shorten(ids)}")
    if len(ids) > n_positions:
        raise ShapeError(f"embed: {len(ids)} tokens but the position table has {n_positions} rows; "
                         "it needs one row per position")
    for i, t in enumerate(ids):
        if not 0 <= check_int("embed", f"ids[{i}]", t) < n_tokens:
            raise ValueError(f"embed: ids[{i}] is {quote_int(t)}; token ids must be ints from 0 to {n_tokens - 1}")
    X = [[a + b for a, b in zip(token_table[t], position_table[i])] for i, t in enumerate(ids)]
    if not all_finite(X):  # two entries near float64's largest add up to inf
        raise too_large("embed", "the sums of token and position rows")
    return X


class Example(NamedTuple):
    """Everything the running example is made of, and the settings it was built from.

    ``ex.seed``, ``ex.num_heads``, ``ex.d_k`` ... read the settings back, so a
    notebook derives every later number from ``ex``; ``ex.rebuild(bias=True)``
    is the same example with one setting changed.
    """

    tokens: list[str]  # the sentence, one token per row of x
    ids: list[int]  # each token's index in VOCAB
    token_embeddings: Matrix  # (len(VOCAB), d_model)
    position_embeddings: Matrix  # (max_len, d_model)
    x: Matrix  # (seq_len, d_model) = token + position
    weights: MHAWeights  # the layer's W_Q, W_K, W_V, W_O
    settings: dict[str, Any]  # every argument running_example was called with

    @property
    def seed(self) -> int:
        return self.settings["seed"]

    @property
    def trained(self) -> bool:
        """True: the trained model's first layer, one token per character; False: seeded random weights."""
        return self.settings["trained"]

    @property
    def vocab(self) -> list[str]:
        """What each token id stands for, written as ``ex.tokens`` writes it: VOCAB, or the trained model's
        characters (``reading.VOCAB``, with a space as "␣", as ``reading.labels`` shows it).

        >>> ex = running_example(trained=True, sentence="a b")
        >>> ex.vocab[:3], [ex.vocab[t] for t in ex.ids] == ex.tokens
        (['<unk>', '␣', '!'], True)
        """
        if self.trained:
            from .reading import CHARACTERS, UNKNOWN, labels
            return [UNKNOWN, *labels(CHARACTERS)]
        return list(VOCAB)

    @property
    def sentence(self) -> str:
        return self.settings["sentence"]

    @property
    def embed_std(self) -> float:
        return self.settings["embed_std"]

    @property
    def seq_len(self) -> int:
        return len(self.tokens)

    @property
    def d_model(self) -> int:
        return len(self.x[0])

    @property
    def num_heads(self) -> int:
        return len(self.weights.W_Q)

    @property
    def num_kv_heads(self) -> int:
        return len(self.weights.W_K)

    @property
    def d_k(self) -> int:
        return len(self.weights.W_Q[0][0])

    @property
    def d_v(self) -> int:
        return len(self.weights.W_V[0][0])

    def rebuild(self, **changes: Any) -> "Example":
        """The same example with some settings changed: ``ex.rebuild(bias=True)``."""
        return running_example(**{**self.settings, **changes})

    def require_standard_heads(self, notebook: str, *, kv_per_head: bool = True, equal_sizes: bool = True) -> None:
        """Refuse, naming the setting, heads other than the ones ``notebook``'s formulas are written for: a K
        and a V for every query head (``num_kv_heads == num_heads``; not checked with ``kv_per_head=False``),
        and ``d_k == d_v == d_model / num_heads`` (not checked with ``equal_sizes=False``). Notebook 12 shares
        K and V among heads; notebook 15 sizes heads in other ways.

        >>> running_example(num_kv_heads=1).require_standard_heads("09")
        Traceback (most recent call last):
        ...
        ValueError: notebook 09 needs num_kv_heads == num_heads (2), got num_kv_heads=1: its formulas give every head its own K and V (notebook 12 shares them)
        >>> running_example(d_k=3, d_v=5).require_standard_heads("13")
        Traceback (most recent call last):
        ...
        ValueError: notebook 13 needs d_k == d_v == d_model / num_heads (8), got d_k=3, d_v=5: its formulas cut d_model into num_heads equal heads (notebook 15 sizes heads in other ways)
        """
        check_type("require_standard_heads", "notebook", notebook, str, "a str (the notebook's number)")
        check_type("require_standard_heads", "kv_per_head", kv_per_head, bool, "True or False")
        check_type("require_standard_heads", "equal_sizes", equal_sizes, bool, "True or False")
        if kv_per_head and self.num_kv_heads != self.num_heads:
            raise ValueError(f"notebook {notebook} needs num_kv_heads == num_heads ({self.num_heads}), got "
                             f"num_kv_heads={self.num_kv_heads}: its formulas give every head its own K and V "
                             f"(notebook 12 shares them)")
        width = self.d_model // self.num_heads
        if equal_sizes and (self.num_heads * width != self.d_model or self.d_k != width or self.d_v != width):
            raise ValueError(f"notebook {notebook} needs d_k == d_v == d_model / num_heads ({self.d_model / self.num_heads:g}), "
                             f"got d_k={self.d_k}, d_v={self.d_v}: its formulas cut d_model into num_heads equal heads "
                             f"(notebook 15 sizes heads in other ways)")


def running_example(
    *,
    sentence: Optional[str] = None,
    d_model: Optional[int] = None,
    num_heads: Optional[int] = None,
    seed: int = SEED,
    embed_std: float = EMBED_STD,
    trained: bool = False,
    **weight_options,
) -> Example:
    """Build the running example; ``weight_options`` go to ``init_mha_weights`` (bias, init, ...).

    ``embed_std`` is the spread of both embedding tables: larger embeddings give
    larger scores and a more peaked softmax. ``trained=True`` takes the first layer of the
    model trained on a book instead (``trained_example``): any sentence, one token per character.

    >>> ex = running_example()
    >>> ex.tokens, len(ex.x), len(ex.x[0]), ex.num_heads, ex.d_k, ex.seed
    (['<BOS>', 'I', 'like', 'transformers', '<EOS>'], 5, 16, 2, 8, 42)
    >>> running_example(trained=True, sentence="Hi 2").tokens
    ['h', 'i', '␣', '<unk>']
    """
    func = "running_example"
    unknown = sorted(set(weight_options) - set(WEIGHT_OPTIONS))
    if unknown:
        raise TypeError(f"{func}: unknown setting {shorten(unknown[0])}; the settings of the weights are "
                        f"{', '.join(WEIGHT_OPTIONS)}")
    check_type(func, "trained", trained, bool, "True or False")
    if trained:
        return trained_example(sentence=TRAINED_SENTENCE if sentence is None else sentence, d_model=d_model,
                               num_heads=num_heads, seed=seed, embed_std=embed_std, **weight_options)
    sentence = SENTENCE if sentence is None else sentence
    d_model = D_MODEL if d_model is None else d_model
    num_heads = NUM_HEADS if num_heads is None else num_heads
    tokens = check_sentence(func, sentence)
    check_layer_settings(func, d_model, num_heads, seed=seed, **weight_options)
    check_std(func, "embed_std", embed_std)
    positions = max(MAX_LEN, len(tokens))  # the longer of the two tables
    check_weight_count(func, positions * d_model, f"{positions} positions and d_model {d_model}")
    check_known(func, tokens, VOCAB)
    settings = dict(sentence=sentence, d_model=d_model, num_heads=num_heads, seed=seed,
                    embed_std=embed_std, trained=False, **weight_options)
    weights = init_mha_weights(d_model, num_heads, seed=seed, **weight_options)
    tokens = tokenize(sentence)
    ids = encode(tokens)
    token_table = embedding_table(len(VOCAB), d_model, seed=seed, name="token_embedding", std=embed_std)
    position_table = embedding_table(
        max(MAX_LEN, len(ids)), d_model, seed=seed, name="position_embedding", std=embed_std
    )
    x = embed(ids, token_table, position_table)
    return Example(tokens, ids, token_table, position_table, x, weights, settings)


def trained_example(*, sentence: str, d_model: Optional[int], num_heads: Optional[int], seed: int, embed_std: float,
                    **weight_options) -> Example:
    """``running_example(trained=True, ...)``: layer 0 of the model trained on a book (``reading.trained_model``).

    Every character of the sentence is a token (``reading.encode``: lowercased; one the book lacks is
    ``<unk>``); x = E_tok[ids] + E_pos[0..T-1], what the trained layer 0's queries and keys read. (That
    model's values read E_tok[ids] alone; here, as in every core notebook, one x feeds Q, K and V, so the
    attention weights are the trained model's and its values also carry the positions.) The sizes come
    from the model; ``bias=True`` adds the biases ``init_mha_weights`` draws with ``seed`` (the trained
    model has none); ``embed_std`` is not used.
    """
    from .reading import encode as encode_characters, labels, trained_model
    func = "running_example"
    check_type(func, "sentence", sentence, str, "a str")
    check_int(func, "seed", seed)
    check_std(func, "embed_std", embed_std)
    other = sorted(set(weight_options) - {"bias"})
    if other:
        raise ValueError(f"{func}: trained=True takes the trained model's weights as they are; {other[0]} cannot "
                         "be set (bias=True can: it adds seeded biases)")
    model = trained_model()
    T, width, heads = len(model.position_embeddings), len(model.token_embeddings[0]), len(model.layers[0].W_Q)
    for name, value, actual in (("d_model", d_model, width), ("num_heads", num_heads, heads)):
        if value is not None and check_int(func, name, value) != actual:  # 3.0 is not a size
            raise ValueError(f"{func}: {name} is {shorten(value)}, but the trained model has {name} {actual}; "
                             f"leave {name} out with trained=True")
    if not sentence:
        raise ValueError(f"{func}: the sentence is empty; give at least one character")
    if len(sentence) > T:
        raise ValueError(f"{func}: the sentence has {len(sentence):,} characters; the trained model reads at most "
                         f"{T} (its position table has {T} rows)")
    if "bias" in weight_options:
        check_type(func, "bias", weight_options["bias"], bool, "True or False")
    weights = model.layers[0]
    if weight_options.get("bias"):
        b = init_mha_weights(width, heads, seed=seed, bias=True)
        weights = weights._replace(b_Q=b.b_Q, b_K=b.b_K, b_V=b.b_V, b_O=b.b_O)
    ids = encode_characters(sentence)
    settings = dict(sentence=sentence, d_model=width, num_heads=heads, seed=seed, embed_std=embed_std, trained=True,
                    **weight_options)
    x = embed(ids, model.token_embeddings, model.position_embeddings)
    return Example(labels(sentence), ids, model.token_embeddings, model.position_embeddings, x, weights, settings)
