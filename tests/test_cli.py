"""``python -m mha_lists``: the trace, its options, and one-line errors with exit code 2."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")


@pytest.mark.parametrize("args, golden", [
    ((), "cli_default.txt"),
    (("--causal", "--heads", "4", "--seed", "7", "--digits", "3"), "cli_causal_4_heads.txt"),
])
def test_trace_matches_the_stored_output_byte_for_byte(args, golden):
    # The same bytes on CPython 3.10-3.13 (.ci/run also diffs the versions against each other).
    # After a deliberate change: python -m mha_lists [args] > tests/golden/<file>
    result = run(*args)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == (GOLDEN / golden).read_text(encoding="utf-8")


def test_trace_shows_every_step_with_labels():
    out = run().stdout
    for heading in ("X (5x16)", "Q, head 0 (5x8)", "K, head 1 (5x8)", "V, head 1 (5x8)",
                    "scores, head 0 (5x5)", "weights, head 1 (5x5)", "output, head 0 (5x8)",
                    "concat (5x16)", "W_O (16x16)", "output (5x16)"):
        assert heading in out
    assert "sentence: <BOS> I like transformers <EOS>" in out
    assert out.isascii()


def test_causal_option_masks_the_future():
    out = run("--causal").stdout
    assert "mask = causal" in out and "-inf" in out


def test_sentence_option():
    out = run("--sentence", "<BOS> transformers like I <EOS>").stdout
    assert "sentence: <BOS> transformers like I <EOS>" in out and "token ids: 1 5 4 3 2" in out


@pytest.mark.parametrize("args, message", [
    (("--heads", "3"), "running_example: d_model 16 is not divisible by num_heads 3"),
    (("--sentence", "I like cats"), "running_example: 'cats' is not in the vocabulary; the vocabulary is <PAD> <BOS> <EOS> I like transformers"),
    (("--heads", "two"), "argument --heads: 'two' is not a whole number"),
    (("--d-model", "0"), "argument --d-model: 0 must be at least 1"),
    (("--sentence", "  "), "running_example: the sentence is empty"),
    (("--digits", "40"), "use at most 12"),
    (("--bogus",), "unrecognized arguments: --bogus"),
])
def test_bad_options_give_one_line_and_exit_code_2(args, message):
    result = run(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert "Traceback" not in result.stderr
