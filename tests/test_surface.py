"""The core a reader can hold: a small public surface, and a forward pass one can follow.

These are counts, not timings (``python -m mha_lists.tools.bench`` prints the times).
"""

import ast
import importlib
import io
import json
import pathlib
import pkgutil
import re
import tokenize

import mha_lists
from mha_lists import causal_mask, multi_head_attention, running_example
from mha_lists.tools.bench import count_calls

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULES = [importlib.import_module(m.name) for m in pkgutil.walk_packages(mha_lists.__path__, "mha_lists.")]


def exported_names() -> set[str]:
    names = set(mha_lists.__all__)
    for module in MODULES:
        names |= set(getattr(module, "__all__", []))
    return names


def test_at_most_30_names_at_the_top_and_few_exported_in_all():
    assert len(mha_lists.__all__) <= 30
    # Issue 13's goal was 100; each module exports what the notebooks import from it, and a strided
    # tensor's operations are its methods, as in PyTorch (t.view(...)). Issue 23's block around
    # attention adds four: feed_forward, encoder_layer, BlockWeights and its picture, block_diagram.
    # Issue 22's model that read a book adds the 9 names notebook 07b imports from reading.py and
    # the 6 circuits it reads from the weights (circuits.py). Issue 23's numbers that explain themselves add
    # the 3 explained views notebook 02-06 shows in parts 03-05 (display.py), and its small multiples one: panels
    # (heatmaps side by side, as 07b draws each head). Its cold readers asked to see 07b's climax, the induction
    # circuit at one character, as a picture: induction_circuit (pictures.py). 07c's readers asked to see
    # K-composition as a picture from the weights, the twin of its copying diagonal: composed_qk (circuits.py).
    assert len(exported_names()) <= 122


def test_every_exported_name_is_used_by_a_notebook_the_docs_or_another_module():
    texts = [p.read_text(encoding="utf-8") for p in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *ROOT.glob("docs/*.md")] if p.exists()]
    for path in [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("notebooks/exercises/*.ipynb")]:
        texts.append("\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"]))
    for module in MODULES:
        for name in getattr(module, "__all__", []):
            others = [pathlib.Path(m.__file__).read_text(encoding="utf-8") for m in MODULES if m is not module]
            pattern = re.compile(rf"\b{re.escape(name)}\b")
            assert any(pattern.search(text) for text in texts + others), f"{module.__name__}.{name} is used nowhere"


def test_imports_only_point_down():
    layers = {"core": 0, "teaching": 1, "tools": 2}
    for module in MODULES:
        parts = module.__name__.split(".")
        if len(parts) < 3:
            continue
        here = layers[parts[1]]
        for node in ast.walk(ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
                assert layers[node.module.split(".")[0]] <= here, f"{module.__name__} imports {node.module}"


def test_one_forward_pass_enters_at_most_45_frames_of_16_functions_in_4_files():
    # Issue 21's goal: every frame of the package counts, the checks' too (there is no wrapper to leave out).
    ex = running_example()
    mask = causal_mask(len(ex.x))
    frames, functions, files = count_calls(lambda: multi_head_attention(ex.x, ex.weights, mask=mask))
    assert frames <= 45 and functions <= 16 and files <= 4, (frames, functions, files)


def code_lines(text: str) -> int:
    """Lines that hold code: not blank, not only a comment, not part of a docstring (read with ast and tokenize)."""
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first.value, "value", None), str):
                docstrings.update(range(first.lineno, first.end_lineno + 1))
    lines = set()
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skip:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - docstrings)


def test_code_lines_counts_code_and_nothing_else():
    text = ('"""A module\'s docstring,\n\non three lines."""\n\n# a comment\nimport math  # a comment after code\n\n\n'
            'def f(x):\n    """One line."""\n    y = (x +\n         1)\n    return """a string\n    that is code"""\n\n\n'
            'class A:\n    """Doc."""\n\n    z = 1\n')
    # import, def, y = (two lines), return (two lines), class, z = 1
    assert code_lines(text) == 8


def test_the_core_stays_at_most_450_code_lines_and_its_checks_120():
    # Issue 21's goal. core/ is the formula, its checks and the arithmetic it is written with; the
    # checked operations a learner calls by hand are in teaching/ (lists_as_matrices.py, masks.py,
    # softmax_row.py), so they are counted there. 904 lines before issue 21.
    core = ROOT / "mha_lists" / "core"
    counts = {path.name: code_lines(path.read_text(encoding="utf-8")) for path in core.glob("*.py")}
    assert sum(counts.values()) <= 450 and counts["checks.py"] <= 120, counts
