"""The notebooks are stored as a reader and nbval need them; the module needs nothing outside the stdlib."""

import ast
import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MODULE_FILES = sorted((ROOT / "mha_lists").rglob("*.py"))
STDLIB = set(sys.stdlib_module_names) | {"__future__"}
NOTEBOOK_IMPORTS = STDLIB | {"IPython", "mha_lists"}


def imported_modules(tree):
    """(top-level module name, import node) for every absolute import in a syntax tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name.split(".")[0], node) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node


def code_cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb, [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_the_series_is_there():
    names = [p.name for p in NOTEBOOKS]
    assert len(names) >= 14
    assert names == sorted(names) and names[0].startswith("00_")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_was_run_top_to_bottom_in_a_fresh_kernel(path):
    _, cells = code_cells(path)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    assert sum(1 for c in cells if c["outputs"]) >= len(cells) // 2, "the outputs are stored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_errors_stderr_or_timings(path):
    nb, cells = code_cells(path)
    for c in cells:
        assert "execution" not in c.get("metadata", {}), "timing metadata: re-execute with tools/execute_notebooks.py"
        for out in c["outputs"]:
            assert out["output_type"] != "error"
            assert out.get("name") != "stderr"
    text = json.dumps(nb)
    assert "0x7f" not in text, "a memory address in an output"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_only_stdlib_ipython_and_mha_lists(path):
    _, cells = code_cells(path)
    for c in cells:
        source = "".join(c["source"])
        assert "random.seed(" not in source, "use random.Random(seed), never the global generator"
        for name, _ in imported_modules(ast.parse(source)):
            assert name in NOTEBOOK_IMPORTS, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_opens_with_a_title_and_ends_with_try_this(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    first, markdown = nb["cells"][0], [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert first["cell_type"] == "markdown" and "".join(first["source"]).startswith("# ")
    assert any("Try this" in "".join(c["source"]) for c in markdown[-3:])


@pytest.mark.parametrize("path", MODULE_FILES, ids=lambda p: p.name)
def test_module_imports_only_the_standard_library(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top_level = set(tree.body)
    for name, node in imported_modules(tree):
        if name == "IPython":
            assert node not in top_level, "IPython is imported lazily, inside the function that displays"
        else:
            assert name in STDLIB, f"{path.name} imports {name}"
