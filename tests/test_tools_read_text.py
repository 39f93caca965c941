"""``python -m mha_lists.tools.read_text`` (mha_lists/tools/read_text.py): its report, saving and checking a
run, its one-line errors."""

import re

import pytest

from mha_lists.teaching import reading
from mha_lists.tools import read_text as command
import commands

PROG = "python -m mha_lists.tools.read_text"
TINY = reading.Settings(d_model=8, heads=(2, 1), window=8, batch_size=1, steps=2, warmup=1)


@pytest.fixture
def tiny(monkeypatch):
    """The command with tiny settings and 6 held-out windows per measure, so a run takes a second."""
    monkeypatch.setattr(command, "Settings", lambda seed=0, steps=2, **changes: TINY._replace(seed=seed, steps=steps, **changes))
    monkeypatch.setattr(command, "HELD_OUT", 6)


def run_main(argv):
    return commands.run_main(command.main, argv)


LINES = [
    r"trained 2 steps, seed 0: loss per character \d+\.\d\d -> \d+\.\d\d",
    *[rf"layer {layer} head {head}: previous-token [01]\.\d\d, induction [01]\.\d\d"
      for layer, heads in enumerate(TINY.heads) for head in range(heads)],
    r"in-context: loss on first copy \d+\.\d\d, second copy \d+\.\d\d",
    r"validation loss per character \d+\.\d\d \(unigram 2\.90, bigram 2\.25\)",
    *[rf"K-composition L0H{g} -> L1H{h}: 0\.\d\d" for g in range(TINY.heads[0]) for h in range(TINY.heads[1])],
    r"previous-token heads (none|L0H\d( L0H\d)*), induction heads (none|L1H\d( L1H\d)*), "
    r"top K-composition pair L0H\d -> L1H\d",
    r"succeeded: (True|False) \(previous-token >= 0\.5, induction >= 0\.3, second copy <= 0\.85 x first: \d\.\d\d, "
    r"top K-composition pair = such heads: (True|False)\)",
]


def test_the_report_has_a_line_per_head_pair_and_measure(tiny):
    code, out, err = run_main(["--steps", "2"])
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(LINES)
    for line, pattern in zip(lines, LINES):
        assert re.fullmatch(pattern, line), line
    assert "step 2/2" in err and "characters/s" in err and "time left" in err and "trained in" in err


def test_save_then_check_is_bit_for_bit_and_another_seed_is_not(tiny, tmp_path):
    path = tmp_path / "run.json"
    code, out, _ = run_main(["--steps", "2", "--seed", "4", "--save", str(path), "--quiet"])
    assert code == 0 and f"saved to {path}" in out
    code, out, err = run_main(["--check", str(path), "--quiet"])
    assert (code, err) == (0, "") and out.endswith(f"same as {path}, bit for bit: True\n")
    assert "seed 4" in out  # the settings come from the file
    settings, model, history = reading.run_from_json(path.read_text(), "run")
    other = reading.train(settings._replace(seed=5))
    path.write_text(reading.run_to_json(settings, *other))
    code, out, _ = run_main(["--check", str(path), "--quiet"])
    assert code == 1 and out.endswith("bit for bit: False\n")


@pytest.mark.parametrize("args, message", [
    (["--steps", "0"], "argument --steps: 0 must be 1 to 9,000"),
    (["--steps", "x"], "argument --steps: 'x' is not a whole number"),
    (["--seed", "1.5"], "argument --seed: '1.5' is not a whole number"),
    (["--save", "a.json", "--check", "b.json"], "give --save or --check, not both"),
])
def test_bad_arguments_are_one_line_and_exit_2(args, message):
    code, out, err = run_main(args)
    assert code == 2 and out == ""
    assert err.startswith(f"{PROG}: error: {message}") and err.count("\n") == 1


def test_a_file_that_is_not_a_run_is_named_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    code, out, err = run_main(["--check", str(bad)])
    assert code == 2 and out == ""
    assert err == f"{PROG}: error: {str(bad)!r} cannot be used: it is not a saved run (its format is not " \
                  f"{reading.RUN_FORMAT!r})\n"
    code, _, err = run_main(["--check", str(tmp_path / "missing.json")])
    assert code == 2 and err.startswith(f"{PROG}: error: cannot read ") and "No such file" in err
    code, _, err = run_main(["--check", str(tmp_path)])
    assert code == 2 and "is not a regular file" in err
    code, _, err = run_main(["--save", str(tmp_path / "no" / "run.json")])
    assert code == 2 and "does not exist" in err


def test_progress_printer_checks_its_stream():
    with pytest.raises(TypeError, match="progress_printer: stream must be a text stream"):
        command.progress_printer(None, TINY)


def test_any_head_over_a_threshold_has_the_job_and_the_top_pair_must_join_two_of_them():
    from mha_lists.teaching.circuits import Composition
    from mha_lists.teaching.reading import HeadScore
    scores = [HeadScore(0, 0, 0.11, 0.24), HeadScore(0, 1, 0.85, 0.0), HeadScore(0, 2, 0.69, 0.01),
              HeadScore(1, 0, 0.16, 0.25), HeadScore(1, 1, 0.12, 0.41)]  # seed 8's: two previous-token heads
    pairs = [Composition((0, g), (1, h), s) for (g, h), s in {(0, 0): 0.17, (0, 1): 0.16, (1, 0): 0.24, (1, 1): 0.30,
                                                             (2, 0): 0.24, (2, 1): 0.31}.items()]
    previous, induction, top, same = command.heads_found(scores, pairs)
    assert [(s.layer, s.head) for s in previous] == [(0, 1), (0, 2)] and [(s.head) for s in induction] == [1]
    assert (top.earlier, top.later, same) == ((0, 2), (1, 1), True)  # the second previous-token head: still one
    weaker = [s._replace(previous_token=0.49) if s.head == 2 and s.layer == 0 else s for s in scores]
    assert command.heads_found(weaker, pairs)[3] is False  # under 0.5, L0H2 has no job: the pair joins none
    no_induction = [s._replace(induction=0.29) if s.layer == 1 else s for s in scores]
    assert command.heads_found(no_induction, pairs)[1:] == ([], pairs[5], False)
