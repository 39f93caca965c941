""""Change any number": every notebook, re-run with other settings, still runs and keeps every check.

Each notebook builds its example in one place, ``ex = running_example(...)``. This test
re-executes every notebook with that call's settings changed (another seed and head count,
another sentence, ...) and fails when a cell raises, or when a check that prints only True
with the default example prints False. A cell whose default output already shows False (a
demonstration such as ``0.1 + 0.2 == 0.3``) must print the same True/False sequence.

    python -m pytest -m slow tests/test_notebook_variants.py            # every notebook, every variant
    python -m pytest -m slow tests/test_notebook_variants.py -k 02-06   # one notebook
    python -m pytest -m slow tests/test_notebook_variants.py -k 2-tokens  # one variant, every notebook
    python -m pytest -m slow tests/test_notebook_variants.py -k trained   # the trained model, core notebooks

The core notebooks 01, 02-06 and 07 also run on the first layer of the model that read a book,
``running_example(trained=True, sentence=...)``: one token per character, for sentences with
punctuation, digits, accents, an emoji, two characters and a repeated phrase.

The re-executions carry the marker ``slow``: the README's fast command leaves them out,
``python -m pytest -m slow`` and ``.ci/run`` run them.
"""

import ast
import copy
import json
import pathlib
import re

import pytest
from kernel_sockets import over_socket_files

from mha_lists import running_example

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
AsyncKernelManager = pytest.importorskip("jupyter_client").AsyncKernelManager

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Notebooks 18 and 19 (induction heads) build their own model from a sequence and Settings, not
# from running_example; their learner's edits are tested in tests/test_induction.py. Notebooks 07b,
# 07c and 07d open the trained model with a sentence of their own; their edits are tested below (BOOK_EDITS).
NOTEBOOKS = [path for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
             if not path.name.startswith(("07b_", "07c_", "07d_", "18_", "19_"))]
VARIANTS = {
    "seed7-4heads": {"seed": 7, "num_heads": 4},
    "another-sentence": {"sentence": "<BOS> I like transformers like I <EOS>"},
    "3-tokens-8heads-seed123": {"sentence": "<BOS> transformers <EOS>", "num_heads": 8, "seed": 123},
    "2-tokens": {"sentence": "<BOS> I"},
    "16-heads-of-width-1": {"d_model": 16, "num_heads": 16},
    "d_model24-3heads": {"d_model": 24, "num_heads": 3},
}
# The core path, 01, 02-06 and 07 (not 00, 00a, 07a): each offers the trained example in its "Try this".
CORE = [path for path in NOTEBOOKS if re.match(r"(01|02-06|07)_", path.name)]
# At most 16 characters, the trained model's position table; "4", "é", "ï" and "🙂" are <unk> to it.
TRAINED_VARIANTS = {
    "trained-punctuation-digits": {"trained": True, "sentence": "Hi, world! 4:30?"},
    "trained-accents": {"trained": True, "sentence": "Café naïve, olé"},
    "trained-emoji": {"trained": True, "sentence": "the cat 🙂 sat"},
    "trained-2-characters": {"trained": True, "sentence": "ab"},
    "trained-repeated-phrase": {"trained": True, "sentence": "the cat. the cat"},
}
BOOL = re.compile(r"\b(True|False)\b")


def settings_cell(nb) -> int:
    """Index of the code cell that builds the example: ``ex = running_example(...)``."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and re.search(r"^ex = running_example\(", cell.source, re.M):
            return index
    raise AssertionError("no cell builds the example with `ex = running_example(...)`")


def builds_the_paper_example(nb) -> bool:
    """Notebook 00a builds the hand-chosen example, ``ex = paper_example()``, which has no settings
    (its "Try this" edits are run below: PAPER_EDITS)."""
    return any(cell.cell_type == "code" and re.search(r"^ex = paper_example\(\)", cell.source, re.M)
               for cell in nb.cells)


def with_settings(source: str, settings: dict) -> str:
    """The cell's source with the keyword arguments of ``ex = running_example(...)`` replaced."""
    tree = ast.parse(source)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "running_example"
                and [getattr(t, "id", None) for t in node.targets] == ["ex"]):
            call = node.value
            call.keywords = [k for k in call.keywords if k.arg not in settings]
            call.keywords += [ast.keyword(arg=k, value=ast.Constant(v)) for k, v in settings.items()]
            lines = source.splitlines()
            new = ast.unparse(node).splitlines()
            lines[node.lineno - 1:node.end_lineno] = new
            return "\n".join(lines)
    raise AssertionError("the settings cell has no `ex = running_example(...)` statement")


def cell_texts(cell) -> str:
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            texts.append(out.get("data", {}).get("text/plain", ""))
    return "".join(texts)


def test_every_notebook_builds_its_example_in_one_place():
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        if not builds_the_paper_example(nb):
            settings_cell(nb)


def executed(nb, path):
    """nb run top to bottom in a fresh kernel (over socket files: kernel_sockets.py)."""
    run = copy.deepcopy(nb)
    nbclient.NotebookClient(run, timeout=300, kernel_name="python3",
                            kernel_manager_class=over_socket_files(AsyncKernelManager),
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return run


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_survives_a_learners_edit(path, variant):
    check_variant(path, VARIANTS[variant])


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(TRAINED_VARIANTS))
@pytest.mark.parametrize("path", CORE, ids=lambda p: p.stem)
def test_core_notebook_runs_on_the_trained_model(path, variant):
    check_variant(path, TRAINED_VARIANTS[variant])


def test_the_trained_sentences_fit_the_trained_model():
    """The core is 01, 02-06 and 07; each trained sentence builds its example, one token per character."""
    assert [path.name.split("_")[0] for path in CORE] == ["01", "02-06", "07"]
    for settings in TRAINED_VARIANTS.values():
        assert len(running_example(**settings).tokens) == len(settings["sentence"])


# Notebooks 07b, 07c and 07d set plain variables in their first code cell (sentence, count; 07b and 07d
# length; 07c and 07d seed; 07d prompt and temperature): a learner's edits.
READ_A_BOOK = ROOT / "notebooks" / "07b_a_model_that_read_a_book.ipynb"
CIRCUITS = ROOT / "notebooks" / "07c_circuits_in_the_weights.ipynb"
CHOOSES = ROOT / "notebooks" / "07d_how_it_chooses.ipynb"
BOOK_EDITS = {
    (READ_A_BOOK, "2-characters"): {"sentence": "ab"},
    (READ_A_BOOK, "emoji-digits-no-repeat"): {"sentence": "Year 2024 \U0001F642!", "length": 5},
    (READ_A_BOOK, "one-character"): {"sentence": "a"},
    (READ_A_BOOK, "16-characters-repeated"): {"sentence": "abcdabcdabcdabcd", "count": 3},
    (CHOOSES, "2-characters"): {"sentence": "ab"},
    (CHOOSES, "emoji-digits-no-repeat"): {"sentence": "Year 2024 \U0001F642!", "prompt": "X", "length": 5},
    (CHOOSES, "one-character"): {"sentence": "a", "temperature": 2.0, "seed": 7},
    (CHOOSES, "ends-inside-a-repeat"): {"sentence": "abcabcabcabc", "count": 3},
    (CIRCUITS, "one-character"): {"sentence": "a", "seed": 7},
    (CIRCUITS, "no-space-16-characters"): {"sentence": "godgodgodgodgodg", "count": 3},
}


@pytest.mark.slow
@pytest.mark.parametrize("path, edit", sorted(BOOK_EDITS), ids=lambda x: x.stem[:3] if hasattr(x, "stem") else x)
def test_the_book_notebooks_survive_a_learners_edit(path, edit):
    stored = nbformat.read(path, as_version=4)
    nb = copy.deepcopy(stored)
    cell = next(c for c in nb.cells if c.cell_type == "code" and re.search(r"^sentence = ", c.source, re.M))
    for name, value in BOOK_EDITS[path, edit].items():
        cell.source, n = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", cell.source, count=1, flags=re.M)
        assert n == 1, f"{path.name}'s first cell sets no {name}"
    try:
        nb = executed(nb, path)
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name} with {BOOK_EDITS[path, edit]}: a cell raised:\n{str(error)[-1500:]}")
    for before, after in zip(stored.cells, nb.cells):
        if before.cell_type == "code" and "False" not in BOOL.findall(cell_texts(before)):
            assert "False" not in BOOL.findall(cell_texts(after)), (BOOK_EDITS[path, edit], after.source[:200])


def check_variant(path, settings):
    """Run the notebook with its example built from settings: no cell raises, no check turns False."""
    stored = nbformat.read(path, as_version=4)
    if builds_the_paper_example(stored):
        pytest.skip("the hand-chosen example has no settings; its edits are tested with the paper example")
    nb = copy.deepcopy(stored)
    index = settings_cell(nb)
    nb.cells[index].source = with_settings(nb.cells[index].source, settings)
    runs_and_keeps_its_checks(path, stored, nb, settings)


def runs_and_keeps_its_checks(path, stored, nb, edit):
    """nb, stored with an edit, runs in a fresh kernel, and no check that printed only True prints False."""
    try:
        nb = executed(nb, path)
    except nbclient.exceptions.CellExecutionError as error:
        pytest.fail(f"{path.name} with {edit}: a cell raised:\n{str(error)[-1500:]}")
    flipped = []
    for number, (before, after) in enumerate(zip(stored.cells, nb.cells)):
        if before.cell_type != "code":
            continue
        old, new = BOOL.findall(cell_texts(before)), BOOL.findall(cell_texts(after))
        if ("False" not in old and "False" in new) or ("False" in old and old != new):
            flipped.append(f"cell {number}: {before.source[:120]!r}\n    now prints: {cell_texts(after)[:300]!r}")
    assert not flipped, f"{path.name} with {edit}: checks changed:\n" + "\n".join(flipped)


# Notebook 00a's "Try this" edits, each added to the cell that builds its example (paper_example()).
PAPER = ROOT / "notebooks" / "00a_attention_on_paper.ipynb"
PAPER_EDITS = {
    "head-1-finds-the-verb": "weights.W_K[1][:] = [[0, 0], [1, 1], [0, 0], [1, 1]]",
    "head-0-keys-doubled": "weights.W_K[0][:] = [[2 * v for v in row] for row in weights.W_K[0]]",
    "transformers-a-verb": "x[2][2:] = [0, 1]",
    "a-fourth-token": 'tokens.append("today")\nx.append([0, -1, 1, 0])',
}


@pytest.mark.slow
@pytest.mark.parametrize("edit", sorted(PAPER_EDITS))
def test_the_paper_notebook_survives_its_try_this(edit):
    stored = nbformat.read(PAPER, as_version=4)
    nb = copy.deepcopy(stored)
    cell = next(c for c in nb.cells if c.cell_type == "code" and re.search(r"^ex = paper_example\(\)", c.source, re.M))
    if edit != "head-0-keys-doubled":  # the others are quoted in the Try this, as a learner types them
        assert PAPER_EDITS[edit].split("\n")[0] in "".join(c.source for c in stored.cells if c.cell_type == "markdown")
    cell.source += "\n" + PAPER_EDITS[edit]
    runs_and_keeps_its_checks(PAPER, stored, nb, PAPER_EDITS[edit])


@pytest.mark.slow
def test_the_paper_notebooks_titles_follow_a_learners_edit():
    """Notebook 00a names each head by what it reads most, computed from its weights: give head 1 head 0's
    queries and keys, and head 1's titles say so (they used to keep saying "subject")."""
    path = ROOT / "notebooks" / "00a_attention_on_paper.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and re.search(r"^ex = paper_example\(\)", c.source, re.M))
    cell.source = re.sub(r"^(ex = paper_example\(\).*)$", r"\1\nex.weights.W_Q[1], ex.weights.W_K[1] = "
                         r"ex.weights.W_Q[0], ex.weights.W_K[0]", cell.source, count=1, flags=re.M)
    shown = "".join(cell_texts(c) for c in executed(nb, path).cells)
    assert "head 1: I→I/transformers, like→I, transformers→like" in shown  # the heatmap's title (I ties)
    assert "head 1: I→I, like→I, transformers→I" not in shown
