"""tools/cli.py, ``python -m mha_lists``: the trace, its options (``--weights`` too), and one-line errors with
exit code 2."""

import argparse
import contextlib
import io
import pathlib
import re
import subprocess
import sys

import pytest
from bad_inputs import assert_template, refused

from mha_lists.core.checks import ShapeError
from mha_lists.teaching.display import format_matrix
from mha_lists.teaching.example import running_example
from mha_lists.tools import cli
from mha_lists.tools.cli import Table, build_parser, format_table, render, trace_items

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
PROJECTOR = ("--d-model", "8", "--heads", "2", "--digits", "2", "--weights")
OPTIONS = "sentence, seed, heads, d_model, causal, digits"

# Every message the module writes, once. Other tests match only the start.
MESSAGES = {
    "one line": "{prog}: error: {message} (see --help)\n",
    "digits of a number": "a number of {n} digits; at most 100",
    "not a whole number": "{value} is not a whole number",
    "at least 1": "{value} must be at least 1",
    "too large": "{value} is too large; at most {limit}",
    "digits": "{value} digits is more than a float holds; use at most 12",
    "tokens": "argument --sentence: {n} tokens; at most 64",
    "options": "{func}: {name} must have " + OPTIONS + " (build_parser().parse_args(...)), "
               "got {type} without {missing}",
    "sentence": "{func}: {name}.sentence has {n} tokens; at most 64",
    "size": "{func}: {name}.{option} is {value}; the trace prints at most 128",
    "table": "format_table: table must be a Table (from trace_items), got {type}",
}


def options(**changes):
    return argparse.Namespace(**{**vars(build_parser().parse_args([])), **changes})


def parser_error(call):
    """What a parser's error() printed, and its exit code."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        call()
    return err.getvalue(), info.value.code


def type_error(parse, text):
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    return info.value


# key -> (error type, a real bad call, the fields of the template)
BAD_CALLS = {
    "one line": (SystemExit, lambda: cli.OneLineErrorParser(prog="demo").error("first line\nsecond line"),
                 dict(prog="demo", message="first line second line")),
    "digits of a number": (argparse.ArgumentTypeError, lambda: cli._whole_number("-" + "7" * 4400), dict(n="4,400")),
    "not a whole number": (argparse.ArgumentTypeError, lambda: cli._whole_number("1.5"), dict(value="'1.5'")),
    "at least 1": (argparse.ArgumentTypeError, lambda: cli._positive_int("-" + "9" * 30),
                   dict(value="an int of 30 digits")),
    "too large": (argparse.ArgumentTypeError, lambda: cli.size_type(256)("9" * 40),
                  dict(value="an int of 40 digits", limit=256)),
    "digits": (argparse.ArgumentTypeError, lambda: cli._digits("40"), dict(value=40)),
    "tokens": (SystemExit, lambda: cli.main(["--sentence", "I " * 65]), dict(n=65)),
    "options": (TypeError, lambda: trace_items(argparse.Namespace(sentence="I", seed=1)),
                dict(func="trace_items", name="args", type="Namespace", missing="heads, d_model, causal, digits")),
    "sentence": (ValueError, lambda: render(options(sentence="I " * 65)), dict(func="render", name="args", n=65)),
    "size": (ValueError, lambda: trace_items(options(d_model=10**30)),
             dict(func="trace_items", name="args", option="d_model", value="an int of 31 digits")),
    "table": (TypeError, lambda: format_table([[1.0]]), dict(type="list")),
}


def test_every_template_has_a_bad_call():
    assert sorted(MESSAGES) == sorted(BAD_CALLS)


@pytest.mark.parametrize("key", MESSAGES)
def test_message(key):
    error, call, fields = BAD_CALLS[key]
    if error is SystemExit:  # a parser's error: one line on stderr, exit code 2
        printed, code = parser_error(call)
        expected = MESSAGES[key].format(**fields)
        assert code == 2 and (printed == expected or printed == MESSAGES["one line"].format(
            prog="python -m mha_lists", message=expected))
        return
    assert_template(MESSAGES, {key: (error, call, fields)}, key)


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


def widest(text):
    return max(len(line) for line in text.split("\n"))


# === The trace ===


@pytest.mark.parametrize("args, golden", [
    ((), "cli_default.txt"),
    (("--causal", "--heads", "4", "--seed", "7", "--digits", "3"), "cli_causal_4_heads.txt"),
    (PROJECTOR, "cli_weights_d8_digits2.txt"),
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


def test_render_is_what_main_prints():
    args = build_parser().parse_args(["--heads", "4", "--causal"])
    assert render(args) == run("--heads", "4", "--causal").stdout
    tables = [item for item in trace_items(args) if isinstance(item, Table)]
    assert format_table(tables[0], 2) == format_matrix(tables[0].matrix, row_labels=tables[0].row_labels,
                                                       col_labels=tables[0].col_labels, digits=2,
                                                       title=tables[0].title)


# === --weights, and a trace that fits a projector ===


def test_projector_trace_fits_80_columns():
    out = run(*PROJECTOR).stdout
    assert widest(out) <= 80
    assert "seq_len = 5, d_model = 8, num_heads = 2, d_k = d_v = 8 / 2 = 4,\nseed = 42, mask = none\n" in out


@pytest.mark.parametrize("heads", [2, 4])
def test_weights_prints_every_heads_W_Q_W_K_W_V_exactly(heads):
    out = run("--d-model", "8", "--heads", str(heads), "--digits", "3", "--weights").stdout
    weights = running_example(d_model=8, num_heads=heads).weights
    d_k = 8 // heads
    for h in range(heads):
        for name in ("W_Q", "W_K", "W_V"):
            table = format_matrix(getattr(weights, name)[h], row_labels=[f"d{j}" for j in range(8)],
                                  col_labels=[f"d{j}" for j in range(d_k)], digits=3, title=f"{name}, head {h}")
            assert table + "\n" in out
    assert f"W_O ({heads * d_k}x8)" in out


def test_weights_adds_lines_and_changes_none():
    plain, with_weights = run().stdout, run("--weights").stdout
    # Every line of the default trace is still there, in order; only the weight tables are new.
    lines = iter(with_weights.split("\n"))
    assert all(any(line == other for other in lines) for line in plain.split("\n"))
    assert len(re.findall(r"^W_[QKV], head \d \(16x8\)$", with_weights, re.M)) == 6
    assert "W_Q, head" not in plain


def test_the_guides_widths_are_what_is_printed():
    readme = (ROOT / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
    claims = {
        (): r"default output is (\d+) columns wide",
        ("--digits", "2"): r"`--digits 2` alone (\d+)",
        PROJECTOR: r"widest line is (\d+) columns",
    }
    for args, pattern in claims.items():
        found = re.search(pattern, readme)
        assert found, f"the instructor guide no longer says {pattern!r}"
        assert int(found.group(1)) == widest(run(*args).stdout), args


# === Bad input: one line on stderr, exit code 2, never a traceback ===


@pytest.mark.parametrize("args, expected", [
    (("--heads", "3"), "argument --heads: --d-model 16 is not divisible by --heads 3"),  # in the options' names
    (("--heads", "3"), "--heads can be 1, 2, 4, 8, 16"),
    (("--d-model", "12", "--heads", "5"), "with --d-model 12, --heads can be 1, 2, 3, 4, 6, 12"),
    (("--sentence", "I like cats"), "running_example: 'cats' is not in the vocabulary"),
    (("--sentence", "  "), "running_example: the sentence is empty"),
    (("--heads", "two"), "argument --heads: " + MESSAGES["not a whole number"].format(value="'two'")),
    (("--d-model", "0"), "argument --d-model: " + MESSAGES["at least 1"].format(value=0)),
    (("--d-model", "4096"), "argument --d-model: " + MESSAGES["too large"].format(value=4096, limit=128)),
    (("--d-model", "256"), "argument --d-model: " + MESSAGES["too large"].format(value=256, limit=128)),
    (("--digits", "40"), "argument --digits: " + MESSAGES["digits"].format(value=40)),
    (("--seed", "9" * 5000), "argument --seed: " + MESSAGES["digits of a number"].format(n="5,000")),
    (("--seed", "1" * 101), "argument --seed: " + MESSAGES["digits of a number"].format(n=101)),
    (("--seed", "x" * 5000), "argument --seed: 'xxxxxxxxx"),
    (("--heads", "-" + "9" * 5000), "argument --heads: " + MESSAGES["digits of a number"].format(n="5,000")),
    (("--sentence", "I " * 1000), MESSAGES["tokens"].format(n=1000)),
    (("--bogus",), "unrecognized arguments: --bogus"),  # argparse's words
])
def test_bad_options_give_one_line_and_exit_code_2(args, expected):
    result = run(*args)
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.startswith("python -m mha_lists: error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr and len(result.stderr) < 300, result.stderr


CLI_BAD = [["--d-model", "1000000000"], ["--d-model", "4096"], ["--heads", "0"], ["--heads", "-1"],
           ["--heads", "3"], ["--heads", "1000000"], ["--sentence", ""], ["--sentence", "I like cats"],
           ["--sentence", "I " * 1000], ["--sentence", "I " * 63 + "x" * 100_000], ["--digits", "99"],
           ["--digits", "0"], ["--digits", "x"], ["--d-model", "abc"], ["--seed", "x"], ["--seed", "1.5"],
           ["--seed", "-" + "9" * 4400], ["--frobnicate"], ["extra"], ["--d-model", "16", "--heads", "32"], ["--d"],
           ["--heads"], ["--d-model", "255"], ["--heads", "256"]]


def command_problem(main, argv):
    """Run a command's main in this process; None when it printed one short line to stderr and exited with 2."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    except Exception as error:  # noqa: BLE001
        return f"raw {type(error).__name__}: {error!s:.200}"
    lines = err.getvalue().splitlines()
    if code != 2 or len(lines) != 1 or out.getvalue() or len(lines[0]) > 500:
        return f"exit {code}, stdout {len(out.getvalue())} chars, stderr {err.getvalue()!r:.300}"
    return None


def test_the_widest_model_the_help_allows_is_traced():
    """--help's "at most MAX_D_MODEL" is what the trace can print: W_O, d_model x d_model, fits a table."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--d-model", str(cli.MAX_D_MODEL), "--heads", "1"])
    assert code in (0, None) and err.getvalue() == ""
    assert f"d_model = {cli.MAX_D_MODEL}" in out.getvalue()
    assert f"at most {cli.MAX_D_MODEL}" in cli.build_parser().format_help()


@pytest.mark.parametrize("argv", CLI_BAD, ids=lambda argv: " ".join(argv)[:40])
def test_a_bad_command_line_prints_one_line_and_exits_2(argv):
    assert command_problem(cli.main, argv) is None


def test_a_parsers_own_message_is_cut_short():
    # argparse quotes what was typed in full: "invalid choice: 'xxx...'", "unrecognized arguments: ..."
    printed, code = parser_error(lambda: cli.OneLineErrorParser(prog="demo").error("x" * 5000))
    assert code == 2 and printed == MESSAGES["one line"].format(prog="demo", message="x" * 396 + " ...")
    assert command_problem(cli.main, ["y" * 5000]) is None


def test_the_real_command_prints_one_line_and_exits_2():
    done = run("--heads", "0")
    assert done.returncode == 2 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr


# === The functions, called with what is not what the parser makes ===


@pytest.mark.parametrize("call, error, start", [
    (lambda: trace_items(None), TypeError, "trace_items: args "),
    (lambda: trace_items(options(causal="yes")), TypeError, "trace_items: args.causal "),
    (lambda: trace_items(options(digits=0)), ValueError, "trace_items: args.digits "),
    (lambda: trace_items(options(digits=40)), ValueError, "trace_items: args.digits "),
    (lambda: trace_items(options(heads=10**6)), ValueError, "trace_items: args.heads "),
    (lambda: trace_items(options(sentence="I " * 10_000)), ValueError, "trace_items: args.sentence "),
    (lambda: trace_items(options(heads=3)), ShapeError, "running_example: "),  # the library's own rule
    (lambda: trace_items(options(sentence=5)), TypeError, "running_example: "),
    (lambda: render({"sentence": "I"}), TypeError, "render: args "),
    (lambda: format_table(None), TypeError, "format_table: table "),
    (lambda: format_table(Table("t", [[1.0]], ["a"], ["b"]), 40), ValueError, "format_table: digits "),
    (lambda: format_table(Table("t", [[1.0]], ["a"], ["b"]), "2"), TypeError, "format_table: digits "),
])
def test_the_functions_check_their_arguments(call, error, start):
    named = refused(start.split(":")[0], call, error)
    assert type(named) is error and str(named).startswith(start)
