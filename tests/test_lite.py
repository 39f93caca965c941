"""The JupyterLite site: built by ``python lite/build.py``, holding every notebook and the module.

Its kernel is Pyodide, which loads from the network at run time, so the site is not opened
in a browser here. Instead the notebooks are run the way its kernel runs them: the built
site's files (notebooks and mha_lists/ side by side) in Pyodide's file system, every code
cell executed by CPython 3.14 on WebAssembly in Node, and each printed output compared with
the stored one. Needs the `lite` extra, node and `npm ci`; skips without them, fails instead
where MHA_LISTS_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import zipfile

import pytest

from no_install_helpers import ROOT, need, need_node_and_pyodide, run_in_pyodide

RUN_NOTEBOOKS = r"""
import contextlib, glob, io, json
report = []
for path in sorted(glob.glob("*.ipynb")):
    namespace = {"__name__": "__main__"}
    cells = [c for c in json.load(open(path, encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    for n, cell in enumerate(cells):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile("".join(cell["source"]), f"{path}, code cell {n}", "exec"), namespace)
        if cell["outputs"] and all(o["output_type"] == "stream" and o["name"] == "stdout" for o in cell["outputs"]):
            stored = "".join("".join(o["text"]) for o in cell["outputs"])
            report.append([path, n, stored, out.getvalue()])
print(json.dumps(report))
"""

# Differences of a few units in the last place, which some cells print, depend on the
# platform's math library: WebAssembly's exp, log and cos round a few inputs differently
# from glibc's (see README, "Same numbers everywhere"). So do the one-digit errors that notebook
# 16 prints for finite differences with tiny steps, where rounding, not the step, sets the error.
# Every other printed character must match.
LAST_PLACE = re.compile(r"\b\d\.\de-1[5-8]\b|\b\d+ ulp\b|\berror \de-\d\d\b")


@pytest.fixture(scope="module")
def lite_site(tmp_path_factory):
    need(importlib.util.find_spec("jupyterlite_core") is not None,
         'jupyterlite-core is not installed (pip install -e ".[lite]")')
    out = tmp_path_factory.mktemp("lite") / "site"
    result = subprocess.run([sys.executable, str(ROOT / "lite" / "build.py"), str(out)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out


def test_the_site_holds_every_notebook_and_the_module(lite_site):
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 14
    for notebook in notebooks:
        assert (lite_site / "files" / notebook.name).read_bytes() == notebook.read_bytes()
    for source in sorted((ROOT / "mha_lists").rglob("*.py")):
        relative = source.relative_to(ROOT / "mha_lists")
        assert (lite_site / "files" / "mha_lists" / relative).read_bytes() == source.read_bytes()
    assert (lite_site / "lab" / "index.html").exists() and (lite_site / "notebooks" / "index.html").exists()
    listing = json.loads((lite_site / "api" / "contents" / "all.json").read_text(encoding="utf-8"))
    assert {n.name for n in notebooks} <= {entry["name"] for entry in listing["content"]}


def test_the_site_carries_the_module_as_a_wheel_for_piplite(lite_site):
    index = json.loads((lite_site / "pypi" / "all.json").read_text(encoding="utf-8"))
    assert "mha-lists" in index or "mha_lists" in index
    (wheel,) = (lite_site / "pypi").glob("mha_lists-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mha_lists/__init__.py" in names and "mha_lists/tools/site_files/index.html" in names


def test_every_notebook_runs_on_the_kernels_python_and_prints_the_stored_output(lite_site):
    need_node_and_pyodide()
    report = json.loads(run_in_pyodide(lite_site / "files", RUN_NOTEBOOKS))
    assert len({path for path, *_ in report}) >= 14 and len(report) > 300
    for path, n, stored, printed in report:
        assert LAST_PLACE.sub("<last place>", printed) == LAST_PLACE.sub("<last place>", stored), (path, n)
