"""The instructor guide and the README's classroom claims hold: timings add up, counts match, commands run."""

import json
import pathlib
import re
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "instructor-guide.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))


def section(title):
    found = re.search(rf"^## {re.escape(title)}.*?(?=^## |\Z)", GUIDE, re.S | re.M)
    assert found, f"the guide has no section {title!r}"
    return found.group(0)


def test_guide_has_every_part_the_issue_asks_for():
    for title in ("Prerequisites", "Learning objectives", "Session 1 (90 minutes)", "Session 2 (90 minutes)",
                  "Misconceptions the notebooks correct", "Worksheets and answer keys",
                  "Exercises that check themselves", "No-install options"):
        section(title)
    assert "each head reads only its slice of x" in GUIDE.lower()


@pytest.mark.parametrize("title, notebooks", [
    ("Session 1 (90 minutes)", ["00_", "00a_", "01_", "02_", "03_", "04_", "05_", "06_", "07_"]),
    ("Session 2 (90 minutes)", ["08_", "09_", "10_", "11_", "12_", "13_"]),
])
def test_each_session_is_90_minutes_without_gaps_and_covers_its_notebooks(title, notebooks):
    text = section(title)
    spans = [(int(a), int(b)) for a, b in re.findall(r"^\| (\d+)–(\d+) \|", text, re.M)]
    assert spans[0][0] == 0 and spans[-1][1] == 90
    assert all(b == c for (_, b), (c, _) in zip(spans, spans[1:])), spans
    named = re.findall(r"`(\d\da?_[a-z_]+)`", text)
    assert all(name in NOTEBOOKS for name in named), named
    assert [n for n in notebooks if not any(name.startswith(n) for name in named)] == []


def test_exercise_counts_in_the_guide_match_the_notebooks():
    cells = [c for p in EXERCISES for c in json.loads(p.read_text(encoding="utf-8"))["cells"]]
    checks = [c["metadata"]["nbgrader"] for c in cells if c["metadata"].get("nbgrader", {}).get("grade")]
    claim = re.search(r"\((\d+) exercises, (\d+) points\)", GUIDE)
    assert claim and (int(claim.group(1)), int(claim.group(2))) == (len(checks), sum(c["points"] for c in checks))
    total = sum(c["points"] for c in checks)
    assert f"{total} of {total} points" in " ".join(GUIDE.split())


def test_readme_lists_every_notebook():
    for name in NOTEBOOKS:
        assert f"`{name}.ipynb`" in README, name


def commands(text, prefix):
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith(prefix):
            yield shlex.split(line.split("#")[0].split(">")[0])


@pytest.mark.parametrize("argv", [*commands(GUIDE, "python -m mha_lists.tools.worksheet"),
                                  *commands(README, "python -m mha_lists.tools.worksheet")], ids=" ".join)
def test_worksheet_commands_of_the_guide_and_readme_run(argv):
    result = subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0 and result.stderr == "" and result.stdout


def test_every_public_name_of_the_classroom_modules_is_in_the_readme():
    from mha_lists.teaching import paper
    from mha_lists.tools import exercises, worksheet
    for module in (paper, worksheet, exercises):
        for name in module.__all__:
            assert f"`{name}" in README, f"{module.__name__}.{name} is not in the README's API table"
