"""The JupyterLite site: built by ``python lite/build.py``, runnable with no internet.

The site is built once; then
  - its files: every notebook, the exercise student copies, the module beside both, Pyodide
    with every wheel the kernel loads (hashes checked), no address of a CDN in its settings;
  - in headless Chromium with every host but the serving 127.0.0.1 unreachable: the REPL app
    (``repl/index.html?kernel=python&code=...``) starts the real kernel, imports mha_lists,
    runs the code of every notebook and prints what each cell printed, compared with the
    stored output; and the exercise student copies import the mha_lists beside them;
  - the same site pointed at the CDN instead (what it was before): the kernel cannot load,
    and the learner reads a message saying so.
Needs the `lite` extra, node and `npm ci` to build, Debian's chromium and Playwright for the
browser; skips without them, fails instead where MHA_LISTS_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import zipfile
from urllib.parse import quote, urlsplit

import pytest

from mha_lists.tools.site import PYODIDE_VERSION
from no_install_helpers import ROOT, chromium, need, need_node_and_pyodide, serve

KERNEL_SETTINGS = "@jupyterlite/pyodide-kernel-extension:kernel"
LITE_KERNELSPEC = {"display_name": "Python (Pyodide)", "language": "python", "name": "python"}

# Differences of a few units in the last place, which some cells print, depend on the
# platform's math library: WebAssembly's exp, log and cos round a few inputs differently
# from glibc's (see README, "Same numbers everywhere"). So do the one-digit errors that notebook
# 16 prints for finite differences with tiny steps, where rounding, not the step, sets the error.
# Every other printed character must match.
LAST_PLACE = r"\b\d\.\de-1[5-8]\b|\b\d+ ulp\b|\berror \de-\d\d\b"

# Run in the kernel, in the REPL, with /drive (the site's files) as the working directory.
RUN_NOTEBOOKS = r"""
import contextlib, glob, io, json, os, re, sys
LAST_PLACE = re.compile(LAST_PLACE_PATTERN)
report = {"python": "%d.%d.%d" % sys.version_info[:3], "cwd": os.getcwd(), "notebooks": [], "compared": 0,
          "mismatches": [], "exercises": {}}
import mha_lists
report["mha_lists"] = mha_lists.__file__
for path in sorted(glob.glob("*.ipynb")):
    namespace = {"__name__": "__main__"}
    cells = [c for c in json.load(open(path, encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    for n, cell in enumerate(cells):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile("".join(cell["source"]), f"{path}, code cell {n}", "exec"), namespace)
        if cell["outputs"] and all(o["output_type"] == "stream" and o["name"] == "stdout" for o in cell["outputs"]):
            stored = "".join("".join(o["text"]) for o in cell["outputs"])
            report["compared"] += 1
            if LAST_PLACE.sub("~", out.getvalue()) != LAST_PLACE.sub("~", stored):
                report["mismatches"].append([path, n, stored[:300], out.getvalue()[:300]])
    report["notebooks"].append(path)
os.chdir("exercises")  # as a student copy's kernel starts: in its own folder
for name in [m for m in sys.modules if m == "mha_lists" or m.startswith("mha_lists.")]:
    del sys.modules[name]
for path in sorted(glob.glob("*.ipynb")):
    namespace = {"__name__": "__main__"}
    cells = [c for c in json.load(open(path, encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    stopped = "ran to the end"
    for cell in cells:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec("".join(cell["source"]), namespace)
        except Exception as error:
            stopped = type(error).__name__
            break
    report["exercises"][path] = [stopped, sys.modules["mha_lists"].__file__]
print("REPORT " + json.dumps(report))
"""


@pytest.fixture(scope="module")
def lite_site(tmp_path_factory):
    need(importlib.util.find_spec("jupyterlite_core") is not None,
         'jupyterlite-core is not installed (pip install -e ".[lite]")')
    need_node_and_pyodide()
    out = tmp_path_factory.mktemp("lite") / "site"
    result = subprocess.run([sys.executable, str(ROOT / "lite" / "build.py"), str(out)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "no CDN needed" in result.stdout
    return out


@pytest.mark.parametrize("args, message", [
    (["{file}"], "lite/build.py: OUTDIR {file} is a file, not a folder"),
    (["one", "two"], "python lite/build.py: error: unrecognized arguments: two (see --help)"),
])
def test_the_build_says_what_is_wrong_in_one_line_and_exits_2(args, message, tmp_path):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a folder\n", encoding="utf-8")
    result = subprocess.run([sys.executable, str(ROOT / "lite" / "build.py"), *(a.format(file=a_file) for a in args)],
                            cwd=ROOT, capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message.format(file=a_file) + "\n")
    assert a_file.read_text(encoding="utf-8") == "not a folder\n"


def kernel_settings(site) -> dict:
    config = json.loads((site / "jupyter-lite.json").read_text(encoding="utf-8"))
    return config["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]


def test_the_site_holds_every_notebook_the_exercises_and_the_module(lite_site):
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 14
    for notebook in notebooks:  # as stored, outputs and all; only the kernel's name is JupyterLite's
        ours, theirs = (json.loads(path.read_text(encoding="utf-8")) for path in (notebook, lite_site / "files" / notebook.name))
        assert theirs["cells"] == ours["cells"]
        assert theirs["metadata"] == {**ours["metadata"], "kernelspec": LITE_KERNELSPEC}
    exercises = sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
    assert len(exercises) >= 1
    copies = sorted((lite_site / "files" / "exercises").glob("*.ipynb"))
    assert [p.name for p in copies] == [p.name for p in exercises]
    assert all(json.loads(p.read_text(encoding="utf-8"))["metadata"]["kernelspec"]["name"] == "python" for p in copies)
    for folder in (lite_site / "files", lite_site / "files" / "exercises"):
        for source in sorted((ROOT / "mha_lists").rglob("*.py")):
            relative = source.relative_to(ROOT / "mha_lists")
            assert (folder / "mha_lists" / relative).read_bytes() == source.read_bytes()
    for app in ("lab", "notebooks", "repl", "consoles"):
        page = (lite_site / app / "index.html").read_text(encoding="utf-8")
        assert page.index('<script src="../kernel-check.js">') < page.index("config-utils.js"), app
    listing = json.loads((lite_site / "api" / "contents" / "all.json").read_text(encoding="utf-8"))
    assert {n.name for n in notebooks} | {"exercises"} <= {entry["name"] for entry in listing["content"]}


def test_the_student_copies_hold_no_solution(lite_site):
    for copy in sorted((lite_site / "files" / "exercises").glob("*.ipynb")):
        text = copy.read_text(encoding="utf-8")
        assert "### BEGIN SOLUTION" not in text and "raise NotImplementedError()" in text, copy.name


def test_the_site_carries_the_module_and_the_kernels_other_wheels_for_piplite(lite_site):
    index = json.loads((lite_site / "pypi" / "all.json").read_text(encoding="utf-8"))
    assert {"mha-lists", "comm", "ipython-pygments-lexers"} <= {name.replace("_", "-") for name in index}
    (wheel,) = (lite_site / "pypi").glob("mha_lists-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "mha_lists/__init__.py" in names and "mha_lists/tools/site_files/index.html" in names


def test_the_site_bundles_the_pages_pyodide_with_every_wheel_its_lock_names(lite_site):
    pyodide = lite_site / "static" / "pyodide"
    package = json.loads((pyodide / "package.json").read_text(encoding="utf-8"))
    assert package["version"] == PYODIDE_VERSION  # the web page's, and the one package.json installs
    lock = json.loads((pyodide / "pyodide-lock.json").read_text(encoding="utf-8"))
    assert {"micropip", "ipython", "jedi", "traitlets", "pygments"} <= set(lock["packages"])
    for name, entry in lock["packages"].items():
        wheel = pyodide / entry["file_name"]
        assert hashlib.sha256(wheel.read_bytes()).hexdigest() == entry["sha256"], name
        for dependency in entry["depends"]:
            assert re.sub(r"[-_.]+", "-", dependency).lower() in lock["packages"], (name, dependency)
    settings = kernel_settings(lite_site)
    assert settings["pyodideUrl"] == "./static/pyodide/pyodide.mjs"
    assert settings["disablePyPIFallback"] is True
    assert "://" not in json.dumps(settings)


def run_in_the_repl(context, url: str, code: str, wait_ms: int = 300_000):
    """Open the REPL with code; return (its output text, the failure banner's text or None)."""
    page = context.new_page()
    page.goto(url + "repl/index.html?kernel=python&code=" + quote(code))
    page.wait_for_function(
        "document.getElementById('mha-kernel-failed') || [...document.querySelectorAll('.jp-OutputArea-output')]"
        ".some((o) => /REPORT |Error/.test(o.textContent))", timeout=wait_ms)
    output = "\n".join(o.inner_text() for o in page.query_selector_all(".jp-OutputArea-output"))
    banner = page.query_selector("#mha-kernel-failed")
    return page, output, banner.inner_text() if banner else None


def test_offline_the_kernel_starts_and_runs_every_notebook(lite_site, tmp_path):
    code = f"LAST_PLACE_PATTERN = {LAST_PLACE!r}\n" + RUN_NOTEBOOKS
    with serve(lite_site) as url, chromium(tmp_path / "profile") as context:
        page, output, banner = run_in_the_repl(context, url, code)
        assert banner is None, banner
        line = next((line for line in output.splitlines() if line.startswith("REPORT ")), None)
        assert line is not None, output[-3000:]
        report = json.loads(line[len("REPORT "):])
        page.close()
        requests, blocked = list(context.requests), list(context.blocked)
    assert report["python"].startswith("3.14.") and report["cwd"] == "/drive"
    assert report["mha_lists"] == "/drive/mha_lists/__init__.py"
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert report["notebooks"] == notebooks and report["compared"] > 300
    assert report["mismatches"] == []
    # Each student copy runs, with the mha_lists beside it, until the first answer left to write.
    assert report["exercises"] and all(stopped == ["NotImplementedError", "/drive/exercises/mha_lists/__init__.py"]
                                       for stopped in report["exercises"].values()), report["exercises"]
    assert blocked == [], f"the kernel asked outside 127.0.0.1: {blocked}"
    fetched = [urlsplit(r).path for r in requests]
    assert "/static/pyodide/pyodide.asm.wasm" in fetched and "/static/pyodide/micropip-0.11.1-py3-none-any.whl" in fetched


def test_when_the_kernel_cannot_load_the_learner_reads_why(lite_site, tmp_path):
    """The site as it was before: Pyodide from the CDN, which a classroom without internet cannot reach."""
    site = tmp_path / "site"
    shutil.copytree(lite_site, site)
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    cdn = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/pyodide.mjs"
    config["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]["pyodideUrl"] = cdn
    config_path.write_text(json.dumps(config), encoding="utf-8")
    with serve(site) as url, chromium(tmp_path / "profile") as context:
        page, output, banner = run_in_the_repl(context, url, "print(6 * 7)", wait_ms=120_000)
        assert banner is not None, output
        assert banner.startswith("Python could not start here, so the code cells will not run.")
        assert cdn in banner  # the reason: the module that did not load
        assert page.get_by_role("alert").filter(has_text="Python could not start").is_visible()
        page.close()
        assert context.blocked == [cdn]
    assert "42" not in output


def test_a_student_copy_runs_in_the_notebook_app_with_the_module_beside_it(lite_site, tmp_path):
    """As a learner does it: open an exercise in the notebook app, Run All; it stops at the first answer to write."""
    (copy, *_) = sorted((lite_site / "files" / "exercises").glob("*.ipynb"))
    with serve(lite_site) as url, chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(url + "notebooks/index.html?path=exercises/" + copy.name)
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=120_000)
        assert page.locator(".jp-Dialog").count() == 0  # no "Select Kernel": the copy names JupyterLite's kernel
        page.get_by_role("menuitem", name="Run").click()
        page.get_by_text("Run All Cells", exact=True).click()
        page.wait_for_function("document.querySelector('.jp-OutputArea-output[data-mime-type="
                               "\"application/vnd.jupyter.stderr\"]') || document.getElementById('mha-kernel-failed')",
                               timeout=180_000)
        streams = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']").all_inner_texts()
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
        page.screenshot(path=str(tmp_path / "exercise.png"))
        page.close()
        blocked = list(context.blocked)
    assert streams, "no cell printed anything"
    assert len(errors) == 1 and "NotImplementedError" in errors[0], errors
    assert "ModuleNotFoundError" not in errors[0] and "ImportError" not in errors[0]
    assert blocked == []
