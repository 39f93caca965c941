"""``python -m mha_lists --weights``: every head's W_Q, W_K, W_V, and a trace that fits a projector."""

import pathlib
import re
import subprocess
import sys

import pytest

from mha_lists import format_matrix, running_example

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
PROJECTOR = ("--d-model", "8", "--heads", "2", "--digits", "2", "--weights")


def run(*args):
    return subprocess.run([sys.executable, "-m", "mha_lists", *args], cwd=ROOT,
                          capture_output=True, text=True, encoding="utf-8")


def widest(text):
    return max(len(line) for line in text.split("\n"))


def test_projector_trace_matches_the_stored_output_byte_for_byte():
    # After a deliberate change: python -m mha_lists --d-model 8 --heads 2 --digits 2 --weights \
    #   > tests/golden/cli_weights_d8_digits2.txt
    result = run(*PROJECTOR)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == (GOLDEN / "cli_weights_d8_digits2.txt").read_text(encoding="utf-8")


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
