"""The model that read a book (mha_lists/teaching/reading.py) and the circuits read from its weights
(mha_lists/teaching/circuits.py): hand-built models whose answers are known, independent computations,
and the shipped run itself."""

import collections
import copy
import math
import random
import re

import pytest

from mha_lists import MHAWeights, ShapeError, softmax
from mha_lists.teaching import circuits, reading
from mha_lists.teaching.model import Model, flatten, run

V = len(reading.VOCAB)
STEPS = reading.Settings().steps  # the default run's


def zeros(rows, cols):
    return [[0.0] * cols for _ in range(rows)]


def eye(n, scale=1.0):
    return [[scale if i == j else 0.0 for j in range(n)] for i in range(n)]


def previous_token_model(T=8, strength=20.0):
    """One layer, one head of width T: positions are one-hot, W_Q = I, W_K shifts e_j to e_{j+1}, so
    query i scores key i - 1 at strength / sqrt(T) and every other key 0. Tokens are 0: the head sees
    positions only."""
    shift = [[strength if j == i + 1 else 0.0 for j in range(T)] for i in range(T)]
    layer = MHAWeights([eye(T)], [shift], [eye(T)], eye(T))
    return Model(zeros(V, T), eye(T), [layer], zeros(T, V), positions="queries and keys")


def uniform_model(T=8, layers=2):
    """Every query 0: each position attends to every key it sees equally; W_U = 0: every logit 0."""
    layer = MHAWeights([zeros(T, T)], [eye(T)], [eye(T)], eye(T))
    return Model([[random.Random(t).gauss(0, 1) for _ in range(T)] for t in range(V)], eye(T), [layer] * layers,
                 zeros(T, V), positions="queries and keys")


# === Characters ===


def test_the_characters_are_every_character_of_the_lowercased_book():
    assert set(reading.book()) == set(reading.CHARACTERS)
    assert len(reading.CHARACTERS) == len(set(reading.CHARACTERS)) == V - 1
    assert reading.VOCAB[0] == reading.UNKNOWN


def test_any_text_is_read_one_token_per_character():
    rng = random.Random(5)
    for _ in range(200):
        text = "".join(chr(rng.choice([rng.randrange(32, 127), rng.randrange(128, 0x2FFFF)])) for _ in range(30))
        ids = reading.encode(text)
        assert len(ids) == len(text) == len(reading.labels(text))
        assert all(0 <= t < V for t in ids)
    assert reading.encode("Let THERE be") == reading.encode("let there be")
    assert reading.decode(reading.encode("in the beginning, god.")) == "in the beginning, god."
    assert reading.encode("é4🙂İ") == [0, 0, 0, 0]  # İ lowercases to two characters: unknown too
    assert reading.labels("a b") == ["a", "␣", "b"]


@pytest.mark.parametrize("call, message", [
    (lambda: reading.encode(b"abc"), "encode: text must be a str"),
    (lambda: reading.decode([1, 37]), "decode: ids[1] is 37; token ids are 0 to 36"),
    (lambda: reading.decode("ab"), "decode: ids must be a list of token ids"),
    (lambda: reading.labels(None), "labels: text must be a str"),
])
def test_bad_text_is_named(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value).startswith(message)


def test_training_and_validation_text_split_the_book():
    text, train, valid = reading.book(), reading.training_text(), reading.validation_text()
    assert train + valid == text
    assert len(valid) == int(len(text) * reading.VALIDATION_SHARE)


# === Windows ===


def test_every_window_repeats_a_passage_at_a_random_place():
    ids = reading.encode(reading.training_text())
    rng = random.Random(0)
    offsets = set()
    for _ in range(500):
        w = reading.make_window(rng, ids, 24)
        assert len(w.ids) == 25
        assert 4 <= w.length <= 12
        assert w.first + w.length <= w.second and w.second + w.length <= 25
        assert w.ids[w.second:w.second + w.length] == w.ids[w.first:w.first + w.length]
        offsets.add(w.second - w.first)
    assert len(offsets) > 10  # no fixed offset: copying by position does not pay


def test_make_window_checks_its_arguments():
    with pytest.raises(TypeError, match="make_window: rng must be a random.Random"):
        reading.make_window(1, [1] * 30, 24)
    with pytest.raises(ValueError, match="make_window: ids must be a list of at least window"):
        reading.make_window(random.Random(0), [1] * 10, 24)
    with pytest.raises(ValueError, match="make_window: window is 7"):
        reading.make_window(random.Random(0), [1] * 30, 7)


# === Training ===


def test_training_gives_the_same_bits_twice_and_lowers_the_loss():
    s = reading.Settings(d_model=8, heads=(2, 1), window=8, batch_size=2, steps=12, warmup=3, seed=3)
    a, history = reading.train(s)
    b, again = reading.train(s)
    assert flatten(a) == flatten(b) and history == again
    assert len(history.loss) == 12 and history.loss[-1] < history.loss[0]
    assert flatten(a) != flatten(reading.init_model(s))
    other, _ = reading.train(s._replace(seed=4))
    assert flatten(other) != flatten(a)


@pytest.mark.parametrize("change, message", [
    (dict(d_model=10, heads=(2, 3)), "train: d_model 10 is not divisible by heads[1] = 3"),
    (dict(heads=2), "train: heads must be a tuple of 1 to 4 head counts, one per layer, got 2"),
    (dict(heads=()), "train: heads must be a tuple of 1 to 4 head counts"),
    (dict(heads=(1, 1, 1, 1, 1)), "train: heads must be a tuple of 1 to 4 head counts"),
    (dict(heads=(2, 0)), "train: heads[1] must be a positive int, got 0"),
    (dict(heads=(9,)), "train: heads[0] is 9; it is at most 8 here"),
    (dict(heads=(2.0,)), "train: heads[0] must be an int"),
    (dict(window=7), "train: window is 7; a window needs at least 8 characters"),
    (dict(steps=9_001), "train: steps is 9001; the limit is 9000"),
    (dict(steps=9_000, batch_size=64), "train: steps x batch_size x work per sequence = 9,000 x 64"),
    (dict(lr=0.0), "train: lr"),
    (dict(lr_end=0.0), "train: lr_end"),
    (dict(lr_end=0.03), "train: lr_end is 0.03, above lr (0.02); the rate falls to lr_end"),
    (dict(warmup=-1), f"train: warmup is -1; it must be 0 to steps - 1 ({STEPS - 1:,})"),
    (dict(warmup=STEPS), f"train: warmup is {STEPS}; it must be 0 to steps - 1 ({STEPS - 1:,})"),
    (dict(warmup=1.5), "train: warmup must be an int"),
    (dict(seed=1.5), "train: seed"),
])
def test_bad_settings_are_named(change, message):
    with pytest.raises((TypeError, ValueError)) as info:
        reading.train(reading.Settings()._replace(**change))
    assert str(info.value).startswith(message)


def test_a_saved_run_reads_back_bit_for_bit_and_a_broken_one_is_named():
    s = reading.Settings(d_model=8, heads=(2, 1), window=8, batch_size=1, steps=2, warmup=1)
    model, history = reading.train(s)
    text = reading.run_to_json(s, model, history)
    settings, back, history_back = reading.run_from_json(text, "f: run.json")
    assert (settings, flatten(back), history_back) == (s, flatten(model), history)
    for broken, why in [(text.replace(reading.RUN_FORMAT, "x"), "it is not a saved run"),
                        (text.replace('"steps": 2', '"steps": 3'), "its loss is not one number per step (3)"),
                        ("[]", "it is not a saved run"), ("{", "Expecting")]:
        with pytest.raises(ValueError) as info:
            reading.run_from_json(broken, "f: run.json")
        assert str(info.value).startswith("f: run.json cannot be used: ") and why in str(info.value)


# === What a model does, measured ===


def test_a_previous_token_head_is_found_by_its_attention():
    model = previous_token_model()
    (score,) = reading.head_scores(model, 12)
    weight = math.exp(20 / math.sqrt(8))  # the score of key i - 1; every other key scores 0
    expected = math.fsum(weight / (weight + i) for i in range(1, 8)) / 7  # query i sees i + 1 keys
    assert score.previous_token == pytest.approx(expected, rel=1e-12)
    assert score.previous_token > 0.99
    (job,) = reading.head_jobs(model, "abcabcab")
    assert job.job == "previous character" and job.previous_token == pytest.approx(expected, rel=1e-12)


def test_a_head_that_attends_evenly_scores_what_counting_says():
    model = uniform_model()
    jobs = reading.head_jobs(model, "abab")  # characters 2 and 3 repeat; 'b' at 3 follows 'a' at 0: key 1
    prev = (1 / 2 + 1 / 3 + 1 / 4) / 3
    # position 2 ('a', seen at 0): key 1 gets 1/3; position 3 ('b', seen at 1): key 2 gets 1/4
    induction = (1 / 3 + 1 / 4) / 2
    for job in jobs:
        assert job.previous_token == pytest.approx(prev, rel=1e-12)
        assert job.induction == pytest.approx(induction, rel=1e-12)
        assert job.job == ""
    assert reading.head_jobs(model, "abc")[0].induction is None  # nothing repeats
    for job in reading.head_jobs(model, "ab"):  # the one query puts 1/2 on the character before: the threshold,
        assert job.previous_token == 0.5 and job.job == ""  # but no more than an even head's share
    first, second = reading.in_context_loss(model, 12)
    assert first == second == pytest.approx(math.log(V), rel=1e-12)  # every logit 0: each character 1/37
    assert reading.validation_loss(model, 12) == pytest.approx(math.log(V), rel=1e-12)


def test_the_baselines_are_counts_of_the_training_text():
    train, valid = reading.encode(reading.training_text()), reading.encode(reading.validation_text())
    counts = collections.Counter(train[1:])
    total = len(train) - 1 + V
    unigram = sum(-math.log((counts[b] + 1) / total) for b in valid[1:]) / (len(valid) - 1)
    pairs = collections.Counter(zip(train, train[1:]))
    firsts = collections.Counter(train[:-1])
    bigram = sum(-math.log((pairs[a, b] + 1) / (firsts[a] + V)) for a, b in zip(valid, valid[1:])) / (len(valid) - 1)
    u, b = reading.baselines()
    assert u == pytest.approx(unigram, rel=1e-12) and b == pytest.approx(bigram, rel=1e-12)
    assert b < u < math.log(V)


def test_generate_writes_what_the_logits_say():
    e = reading.encode("e")[0]
    model = previous_token_model()._replace(b_U=[3.0 if t == e else 0.0 for t in range(V)])  # every logit 0 but e's
    assert reading.generate(model, "ab", 0) == "ab"
    assert reading.generate(model, "ab", 5) == "abeeeee"
    sampled = reading.generate(model, "ab", 20, temperature=1.0, seed=1)
    assert sampled == reading.generate(model, "ab", 20, temperature=1.0, seed=1)
    assert sampled != reading.generate(model, "ab", 20, temperature=1.0, seed=2)
    assert 0.2 < sampled.count("e") / 20 < 0.8  # e has e^3 / (e^3 + 36) = 0.36 of the weight
    for call, message in [(lambda: reading.generate(model, "", 3), "generate: prompt is empty"),
                          (lambda: reading.generate(model, "a", -1), "generate: length is -1"),
                          (lambda: reading.generate(model, "a", 3, temperature=-1), "generate: temperature is -1"),
                          (lambda: reading.generate(model._replace(W_U=zeros(8, 5)), "a", 3), "generate: model.W_U")]:
        with pytest.raises((TypeError, ValueError, ShapeError)) as info:
            call()
        assert str(info.value).startswith(message)


def test_read_gives_every_heads_attention_on_the_text():
    model = uniform_model(layers=2)
    labels, attention = reading.read(model, "a b")
    assert labels == ["a", "␣", "b"]
    assert attention == [layer.attention for layer in run(model, reading.encode("a b")).layers]
    with pytest.raises(ValueError, match="read: text has 9 characters; the model reads 1 to 8"):
        reading.read(model, "abcdefghi")
    for measure in (reading.head_scores, reading.in_context_loss, reading.validation_loss):
        with pytest.raises(ValueError, match=f"{measure.__name__}: count is 2001; it is at most 2,000 here"):
            measure(model, 2001)


# === Circuits ===


def test_qk_and_ov_circuits_and_positional_scores_against_loops():
    rng = random.Random(2)
    d, d_k, h = 6, 3, 2
    m = lambda r, c: [[rng.gauss(0, 1) for _ in range(c)] for _ in range(r)]
    w = MHAWeights([m(d, d_k) for _ in range(h)], [m(d, d_k) for _ in range(h)], [m(d, d_k) for _ in range(h)],
                   m(h * d_k, d))
    for head in range(h):
        QK = circuits.qk_circuit(w, head)
        OV = circuits.ov_circuit(w, head)
        for a in range(d):
            for b in range(d):
                assert QK[a][b] == pytest.approx(sum(w.W_Q[head][a][k] * w.W_K[head][b][k] for k in range(d_k)))
                assert OV[a][b] == pytest.approx(sum(w.W_V[head][a][k] * w.W_O[head * d_k + k][b]
                                                     for k in range(d_k)))
    model = Model(m(V, d), m(5, d), [w, w], m(d, V), positions="queries and keys")
    P = model.position_embeddings
    S = circuits.positional_scores(model, 1)
    QK = circuits.qk_circuit(w, 1)
    for i in range(5):
        for j in range(5):
            direct = sum(P[i][a] * QK[a][b] * P[j][b] for a in range(d) for b in range(d)) / math.sqrt(d_k)
            assert S[i][j] == pytest.approx(direct, rel=1e-9, abs=1e-12)


def test_k_composition_is_the_cosine_for_rank_one_circuits():
    """For W_QK = a b^T and W_OV = c e^T, ||W_QK W_OV^T|| / (||W_QK|| ||W_OV||) = |b . e| / (|b| |e|)."""
    d = 4
    col = lambda v: [[x] for x in v]
    a, c = [1.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]
    for b, e, cosine in [([1.0, 0, 0, 0], [1.0, 0, 0, 0], 1.0), ([1.0, 0, 0, 0], [0, 1.0, 0, 0], 0.0),
                         ([1.0, 1.0, 0, 0], [1.0, 0, 0, 0], 1 / math.sqrt(2))]:
        earlier = MHAWeights([col(a)], [col(a)], [col(c)], [e])  # W_OV = c e^T
        later = MHAWeights([col(a)], [col(b)], [col(a)], [a])  # W_QK = a b^T
        model = Model(zeros(V, d), zeros(3, d), [earlier, later], zeros(d, V))
        (pair,) = circuits.k_composition(model)
        assert pair.earlier == (0, 0) and pair.later == (1, 0)
        assert pair.score == pytest.approx(cosine, abs=1e-15)


def test_k_composition_reaches_1_only_at_rank_one_and_identities_score_one_over_sqrt_n():
    """07c: the score is at most 1, reached only by rank-one circuits; two identity matrices of size n score
    1/sqrt(n), whatever they agree on (a reader's run: 0.204 at n = 24, the untrained models' mean)."""
    for n in (2, 5, 24):
        eye = [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]
        score = circuits.frobenius(eye) / (circuits.frobenius(eye) * circuits.frobenius(eye))  # I I^T = I
        assert math.isclose(score, 1 / math.sqrt(n), rel_tol=1e-15)
    rng = random.Random(0)
    for _ in range(200):  # ||A B^T|| <= ||A|| ||B||, for any two matrices of one width
        A = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(3)]
        B = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(3)]
        AB = [[math.fsum(a * b for a, b in zip(ra, rb)) for rb in B] for ra in A]
        assert circuits.frobenius(AB) <= circuits.frobenius(A) * circuits.frobenius(B) * (1 + 1e-12)


def test_composed_qk_is_the_later_heads_score_of_what_the_earlier_head_wrote():
    trained = reading.trained_model()
    E, (w0, w1) = trained.token_embeddings, trained.layers
    d_v, d_k = len(w0.W_V[0][0]), len(w1.W_Q[0][0])
    for h, g in ((1, 0), (0, 2)):
        M = circuits.composed_qk(trained, 1, h, g)
        for t, u in ((5, 7), (11, 11), (0, 36)):  # by loops: q = E_t W_Q; k = (E_u W_V^g W_O^g) W_K
            q = [math.fsum(E[t][r] * w1.W_Q[h][r][c] for r in range(len(E[t]))) for c in range(d_k)]
            v = [math.fsum(E[u][r] * w0.W_V[g][r][c] for r in range(len(E[u]))) for c in range(d_v)]
            wrote = [math.fsum(v[c] * w0.W_O[g * d_v + c][m] for c in range(d_v)) for m in range(len(E[u]))]
            k = [math.fsum(wrote[r] * w1.W_K[h][r][c] for r in range(len(wrote))) for c in range(d_k)]
            assert math.isclose(M[t][u], math.fsum(a * b for a, b in zip(q, k)) / math.sqrt(d_k), rel_tol=1e-9, abs_tol=1e-12)
    # 07c: through the previous-character head, the induction head's rows peak on the diagonal far more often
    # than any other pair's
    diagonal = {(g, h): sum(row.index(max(row)) == t for t, row in enumerate(circuits.composed_qk(trained, 1, h, g)) if t)
                for g in range(3) for h in range(2)}
    assert max(diagonal, key=diagonal.get) == (0, 1) and diagonal[0, 1] > 2 * max(n for k, n in diagonal.items() if k != (0, 1))
    for args, message in (((0, 0, 0), "composed_qk: layer is 0; its heads read no earlier head"),
                          ((2, 0, 0), "composed_qk: layer is 2; the model's layers are 0 to 1"),
                          ((1, 2, 0), "composed_qk: head is 2; this layer's heads are 0 to 1"),
                          ((1, 0, 3), "composed_qk: head is 3; this layer's heads are 0 to 2")):
        with pytest.raises(ValueError, match=re.escape(message)):
            circuits.composed_qk(trained, *args)


def test_a_head_that_copies_gives_every_token_back():
    I = eye(V)
    layer = MHAWeights([I], [I], [I], I)
    assert circuits.copies(Model(I, zeros(2, V), [layer], I), 0, 0) == list(range(V))
    shifted = [row[1:] + row[:1] for row in I]  # W_U maps token t to t - 1
    assert circuits.copies(Model(I, zeros(2, V), [layer], shifted), 0, 0) == [(t - 1) % V for t in range(V)]
    with pytest.raises(ValueError, match="copies: layer is 1; the model's layers are 0 to 0"):
        circuits.copies(Model(I, zeros(2, V), [layer], I), 1, 0)
    with pytest.raises(ValueError, match="qk_circuit: head is 1; this layer's heads are 0 to 0"):
        circuits.qk_circuit(layer, 1)


# === The shipped run ===


# Slow (11 s): the quick run's 07b recomputes these scores from the shipped run on a smaller sample, under nbval.
@pytest.mark.slow
def test_the_shipped_run_is_a_model_of_the_book_that_learned_its_jobs():
    settings, model, history = reading.run_from_json(reading.RUN_FILE.read_text(encoding="utf-8"), "run")
    assert settings == reading.Settings()
    scores = reading.head_scores(model)
    prev = max(s.previous_token for s in scores if s.layer == 0)
    ind = max(s.induction for s in scores if s.layer == 1)
    first, second = reading.in_context_loss(model)
    assert prev >= 0.5 and ind >= 0.3 and second <= 0.85 * first
    top = max(circuits.k_composition(model), key=lambda c: c.score)
    assert top.earlier == max((s for s in scores if s.layer == 0), key=lambda s: s.previous_token)[:2]
    assert top.later == max((s for s in scores if s.layer == 1), key=lambda s: s.induction)[:2]


def test_circuits_name_an_overflow_and_a_circuit_of_zeros():
    with pytest.raises(ValueError, match="frobenius: the squares are too large"):
        circuits.frobenius([[1e200, 1.0]])
    zero = MHAWeights([zeros(4, 2)], [zeros(4, 2)], [zeros(4, 2)], zeros(2, 4))
    with pytest.raises(ValueError, match="k_composition: .*every circuit must be finite and not all zeros"):
        circuits.k_composition(Model(zeros(V, 4), zeros(3, 4), [zero, zero], zeros(4, V)))


def test_the_learning_rate_climbs_then_falls_to_lr_end():
    s = reading.Settings(lr=0.02, warmup=100, lr_end=0.001, steps=1500)
    rates = [reading.learning_rate(s, t) for t in range(1, s.steps + 1)]
    assert rates[0] == 0.02 / 100 and rates[99] == 0.02  # a straight climb over the warm-up
    assert all(a > b for a, b in zip(rates[99:], rates[100:]))  # then always down
    assert rates[-1] == 0.001  # to lr_end exactly: cos(pi) = -1
    assert reading.learning_rate(s._replace(warmup=0), 1) < 0.02  # no warm-up: the fall starts at once
    for step, message in [(0, "learning_rate: step is 0; it must be 1 to steps (1,500)"),
                          (1501, "learning_rate: step is 1501; it must be 1 to steps (1,500)")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            reading.learning_rate(s, step)
    with pytest.raises(TypeError, match="learning_rate: step must be an int"):
        reading.learning_rate(s, 1.0)


def test_on_text_where_an_even_head_scores_high_no_head_gets_a_job_for_it():
    """On one character repeated, what followed an earlier copy is every earlier character, so a head that
    spreads its weight evenly has an induction share of 0.73; a job must beat that by JOB_MARGIN."""
    model = reading.trained_model()
    text = "a" * len(model.position_embeddings)
    ids = range(len(text))
    even = math.fsum((i - 1) / (i + 1) for i in ids if i >= 2) / (len(text) - 2)
    for job in reading.head_jobs(model, text):
        if job.layer > 0:
            assert job.induction >= 0.3 and job.job != "copies what came next last time"
            assert job.induction < even + reading.JOB_MARGIN
    jobs = reading.head_jobs(model, "and god, and god")  # the default sentence keeps its two jobs
    assert [(j.layer, j.head) for j in jobs if j.job] == [(0, 0), (1, 1)]


def test_previous_share_refuses_what_has_no_token_before_with_its_own_message():
    from mha_lists.teaching.model import previous_share
    assert previous_share([[1.0, 0.0], [0.25, 0.75]]) == 0.25
    for A, why in (([[1.0]], "1 x 1"), ([[0.5, 0.5]], "1 x 2"), ([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], "3 x 2")):
        with pytest.raises(ValueError, match=f"previous_share: A is {why}; it must be one head's"):
            previous_share(A)
    with pytest.raises(ValueError, match="previous_share: A is ragged"):
        previous_share([[1.0, 0.0], [1.0]])


def test_repeat_scores_names_itself_in_its_messages():
    """07b calls repeat_scores; its checks used to speak as induction.head_scores, a name 07b never uses."""
    model = reading.trained_model()
    with pytest.raises(ValueError, match="^repeat_scores: sequences must be"):
        reading.repeat_scores(model, [])
    runs = [[1, 2, 3, 1, 2, 3]]
    from mha_lists.teaching import induction
    assert reading.repeat_scores(model, runs) == induction.head_scores(model, runs)


def test_without_switches_off_one_head_and_leaves_the_model_alone():
    model = reading.trained_model()
    before = copy.deepcopy(model)
    off = reading.without(model, 1, 1)
    assert model == before  # not mutated
    d_v = len(model.layers[1].W_V[1][0])
    for r, (row, new) in enumerate(zip(model.layers[1].W_O, off.layers[1].W_O)):
        assert new == ([0.0] * len(row) if d_v <= r < 2 * d_v else row)
    assert off.layers[0] == model.layers[0] and off.token_embeddings == model.token_embeddings
    for args, message in (((2, 0), "without: layer is 2; the model's layers are 0 to 1"),
                          ((1, 2), "without: head is 2; layer 1's heads are 0 to 1"),
                          ((0, -1), "without: head is -1; layer 0's heads are 0 to 2")):
        with pytest.raises(ValueError, match=re.escape(message)):
            reading.without(model, *args)


def test_copying_follows_the_longest_earlier_match_within_the_window():
    say = reading._copy_says
    assert say([1, 2, 3, 1, 2], 16) == 3  # "1 2" matched at 0: then 3
    assert say([1, 2, 3, 4, 2, 3, 1, 2, 3], 16) == 4  # "1 2 3" at 0 beats "2 3" at 4
    assert say([5, 6, 7], 16) is None  # 7 is new
    assert say([1, 2, 9, 9, 9, 1], 3) is None  # the 1 at 0 is out of a window of 3
    model = reading.trained_model()
    assert reading.copying(model, "abab", "ababab") == reading.Copying(2, 2, None, None, None, None)
    stop = reading.copying(model, "abcabcabcabc", reading.generate(model, "abcabcabcabc", 3))
    ids = reading.encode("abcabcabcabca")  # the sentence and the one character it copied
    p = softmax(run(model, ids).logits[-1])
    assert (stop.copied, stop.copy) == (1, "b") and stop.p_copy == p[reading.VOCAB.index("b")]
    assert stop.p_wrote == max(p) and stop.wrote == reading.VOCAB[p.index(max(p))]  # greedy wrote the likeliest
    assert str(stop) == f"copies 1 character, then stops: copying says 'b' (probability {stop.p_copy:.2f}), it writes {stop.wrote!r} ({max(p):.2f})"
    with pytest.raises(ValueError, match="copying: text must begin with sentence"):
        reading.copying(model, "abc", "xbcabc")
    with pytest.raises(ValueError, match="copying: sentence is empty"):
        reading.copying(model, "", "abc")


def test_votes_split_the_logit_difference_among_the_parts_of_the_stream():
    # By hand: one head reads the character before with weight 1.0 (a score of 200/sqrt(8) against 0), its values
    # and W_O are the identity; 'a' is e_0, 'b' is e_1, and W_U scores 'a' 2 x column 0 and 'b' 3 x column 1.
    a, b = reading.VOCAB.index("a"), reading.VOCAB.index("b")
    tokens, W_U = zeros(V, 8), zeros(8, V)
    tokens[a][0], tokens[b][1], W_U[0][a], W_U[1][b] = 1.0, 1.0, 2.0, 3.0
    model = previous_token_model(strength=200.0)._replace(token_embeddings=tokens, W_U=W_U)
    # after "ab": 'b' itself (e_1) votes 0 - 3 for 'a' against 'b'; the head hands on 'a' (e_0): 2 - 0
    assert reading.votes(model, "ab", "a", "b") == [reading.Vote("the character itself", -3.0), reading.Vote("L0H0", 2.0)]
    assert reading.votes(model, "ab", "b", "a") == [reading.Vote("the character itself", 3.0), reading.Vote("L0H0", -2.0)]

    trained = reading.trained_model()
    text = "and god, and god"
    logits = run(trained, reading.encode(text)).logits[-1]
    p = softmax(logits)
    ballot = reading.votes(trained, text, ",", " ")
    total = math.fsum(v.vote for v in ballot)
    i, j = reading.VOCAB.index(","), reading.VOCAB.index(" ")
    assert [v.part for v in ballot] == ["the character itself", "L0H0", "L0H1", "L0H2", "L1H0", "L1H1"]
    assert math.isclose(total, logits[i] - logits[j], rel_tol=1e-12)  # the split is exact
    assert math.isclose(math.exp(total), p[i] / p[j], rel_tol=1e-12)
    # switching a head off takes away its vote and nothing else (layer 0 and L1H0 read the same stream)
    off = reading.votes(reading.without(trained, 1, 1), text, ",", " ")
    assert off == [v if v.part != "L1H1" else reading.Vote("L1H1", 0.0) for v in ballot]
    unknown = reading.votes(trained, text, "<unk>", " ")  # the token of every character the book lacks
    logit = reading.VOCAB.index("<unk>")
    assert math.isclose(math.fsum(v.vote for v in unknown), logits[logit] - logits[j], rel_tol=1e-12)
    # only the last 16 characters are read, as generate reads them
    assert reading.votes(trained, "xyz" * 10 + text, ",", " ") == ballot

    # W_U's bias gets a vote of its own, and the split stays exact
    biased = trained._replace(b_U=[0.01 * k for k in range(V)])
    ballot = reading.votes(biased, text, ",", " ")
    logits = run(biased, reading.encode(text)).logits[-1]
    assert ballot[-1] == reading.Vote("b_U", 0.01 * i - 0.01 * j)
    assert math.isclose(math.fsum(v.vote for v in ballot), logits[i] - logits[j], rel_tol=1e-12)


@pytest.mark.parametrize("args, message", [
    (("", ",", " "), "votes: text has 0 characters; it must have 1 to"),
    (("ab", "4", " "), "votes: a is '4'; it must be one character of the book"),
    (("ab", ",", "xy"), "votes: b is 'xy'; it must be one character of the book"),
    (("ab", "A", "a"), "votes: a and b are both 'a'; give two different characters"),
    (("ab", "<unk>", "<unk>"), "votes: a and b are both '<unk>'; give two different characters"),
    ((5, ",", " "), "votes: text must be a str"),
])
def test_votes_names_what_is_wrong(args, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        reading.votes(reading.trained_model(), *args)


def test_key_parts_split_a_layer_1_score_among_the_parts_of_the_stream():
    # By hand: a two-layer model whose layer-1 head has W_Q = W_K = identity; the token rows are e_0, e_1, ...
    trained = reading.trained_model()
    text = "and god, and god"
    trace = run(trained, reading.encode(text))
    for head in range(len(trained.layers[1].W_Q)):
        for query in range(len(text)):
            parts = reading.key_parts(trained, text, head, query)
            assert [p.part for p in parts] == ["the character itself", "L0H0", "L0H1", "L0H2"]
            assert all(len(p.scores) == query + 1 for p in parts)
            for j in range(query + 1):  # the split is exact: the terms add up to the score the model computes
                assert math.isclose(math.fsum(p.scores[j] for p in parts), trace.layers[1].scores[head][query][j],
                                    rel_tol=1e-9, abs_tol=1e-12)
    # 07c's default: at the last 'd', the score peaks at the ',' after the first "god", and L0H0's part decides
    parts = reading.key_parts(trained, text, 1, 15)
    score = [math.fsum(p.scores[j] for p in parts) for j in range(16)]
    best = score.index(max(score))
    assert text[best] == "," and max(parts, key=lambda p: p.scores[best]).part == "L0H0"
    assert parts[1].scores[best] > 0.8 * score[best]  # "nearly all of it comes from what L0H0 wrote"
    # the instructor guide's answer for 07c's Try this ("in the beginning"): the last 'g' scores the 'i' after
    # the earlier 'g' highest, +8.7, of which +7.4 from what L0H0 wrote there
    parts = reading.key_parts(trained, "in the beginning", 1, 15)
    score = [math.fsum(p.scores[j] for p in parts) for j in range(16)]
    assert score.index(max(score)) == 10 and f"{score[10]:+.1f}" == "+8.7" and f"{parts[1].scores[10]:+.1f}" == "+7.4"
    # switching L0H0 off leaves its part at 0
    off = reading.key_parts(reading.without(trained, 0, 0), text, 1, 15)
    assert off[1].scores == [0.0] * 16


@pytest.mark.parametrize("args, message", [
    (("", 1, 0), "key_parts: text has 0 characters; the model reads 1 to"),
    (("ab", 2, 0), "key_parts: head is 2; layer 1 has heads 0 to 1"),
    (("ab", -1, 0), "key_parts: head is -1; layer 1 has heads 0 to 1"),
    (("ab", 1, 2), "key_parts: query is 2; text has positions 0 to 1"),
    (("ab", 1.0, 0), "key_parts: head must be an int"),
    ((5, 1, 0), "key_parts: text must be a str"),
])
def test_key_parts_names_what_is_wrong(args, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        reading.key_parts(reading.trained_model(), *args)


def test_copying_never_prints_a_probability_as_zero():
    """A reader saw `copying says ',' (probability 0.00)` for a probability of about 0.003."""
    from mha_lists.teaching.reading import Copying
    small = Copying(copied=3, written=10, copy=",", wrote="r", p_copy=0.0031, p_wrote=0.91)
    assert str(small) == "copies 3 characters, then stops: copying says ',' (probability 0.0031), it writes 'r' (0.91)"
    assert str(small._replace(copied=0)) == "stops at once: copying says ',' (probability 0.0031), it writes 'r' (0.91)"
    assert str(small._replace(wrote=None)) == "copies all 10 characters it writes"
    assert str(small._replace(copy=None)).endswith("then stops: it comes to a character seen nowhere earlier, with nothing to copy")
    assert "(probability 0.15)" in str(small._replace(p_copy=0.149))
