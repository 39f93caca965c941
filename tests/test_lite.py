"""The JupyterLite site: built by ``python lite/build.py``, runnable with no internet.

The site is built once; then
  - its files: every notebook, the exercise student copies, the module beside both, Pyodide
    with every wheel the kernel loads (hashes checked), among them mha_lists and the files the
    notebooks read, installed by every kernel as it starts; no address of a CDN in its settings;
  - served as the README says (``python -m http.server -d SITE``), in headless Chromium with
    every host but the server unreachable, twice: as http://127.0.0.1 (a secure origin: a
    service worker gives the kernel the files beside the notebooks, /drive) and as
    http://classroom.lan (a lab's server over plain http: no service worker, no /drive). Each
    time the REPL app (``repl/index.html?kernel=python&code=...``) starts the real kernel,
    imports mha_lists, runs the code of every notebook and compares what each cell printed
    with the stored output, and runs the exercise student copies;
  - on classroom.lan, notebook 00a in the notebook app, Run All, as a learner does it;
  - an exercise's student copy in the notebook app as a student works it: Run All, an answer typed in,
    its check, the self-check's total, saved, File > Download; score grades the downloaded file;
  - the same site pointed at the CDN instead (what it was before), or missing the module's
    wheel: the learner reads a message saying what failed.
Needs the `lite` extra, node and `npm ci` to build, Debian's chromium and Playwright for the
browser; skips without them, fails instead where MHA_LISTS_REQUIRE_BROWSER=1 (CI).
"""

from __future__ import annotations

import hashlib
import html
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
from no_install_helpers import ROOT, chromium, need, need_node_and_pyodide, serve_as_the_readme_does

KERNEL_SETTINGS = "@jupyterlite/pyodide-kernel-extension:kernel"
# A lab's server reached over plain http under its own name: not a secure origin, so no service worker.
SCHOOL_HOST = "classroom.lan"
SITE_PACKAGES = "/lib/python3.14/site-packages/"
LITE_KERNELSPEC = {"display_name": "Python (Pyodide)", "language": "python", "name": "python"}

# Differences of a few units in the last place, which some cells print, depend on the
# platform's math library: WebAssembly's exp, log and cos round a few inputs differently
# from glibc's (see README, "Same numbers everywhere"). So do the one-digit errors that notebook
# 16 prints for finite differences with tiny steps, where rounding, not the step, sets the error.
# Every other printed character must match.
LAST_PLACE = r"\b\d\.\de-1[5-8]\b|\b\d+ ulp\b|\berror \de-\d\d\b"

# Run in the kernel, in the REPL. Its working directory is /drive (the site's files) where a service
# worker serves it; without one there is no /drive and the kernel stays in /home/pyodide. The
# notebooks' cells are what the notebook app would send: read from /drive, or else from the site.
RUN_NOTEBOOKS = r"""
import contextlib, importlib.metadata, io, json, os, re, sys
from pyodide.http import open_url
LAST_PLACE = re.compile(LAST_PLACE_PATTERN)
DRIVE = os.path.isdir("/drive")

def code_cells(folder, name):
    text = open(name, encoding="utf-8").read() if DRIVE else open_url(SITE + "files/" + folder + name).read()
    return [c for c in json.loads(text)["cells"] if c["cell_type"] == "code"]

report = {"python": "%d.%d.%d" % sys.version_info[:3], "cwd": os.getcwd(), "drive": DRIVE,
          "beside": sorted(os.listdir(".")), "installed": None,
          "notebooks": [], "compared": 0, "mismatches": [], "errors": [], "exercises": {}}
with contextlib.suppress(importlib.metadata.PackageNotFoundError):
    report["installed"] = importlib.metadata.version("mha-lists")
try:
    import mha_lists
    report["mha_lists"] = mha_lists.__file__
except ImportError as error:
    report["mha_lists"] = f"{type(error).__name__}: {error}"
for path in NOTEBOOKS:
    namespace = {"__name__": "__main__"}
    for n, cell in enumerate(code_cells("", path)):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile("".join(cell["source"]), f"{path}, code cell {n}", "exec"), namespace)
        except Exception as error:
            report["errors"].append([path, n, f"{type(error).__name__}: {error}"])
            break
        if cell["outputs"] and all(o["output_type"] == "stream" and o["name"] == "stdout" for o in cell["outputs"]):
            stored = "".join("".join(o["text"]) for o in cell["outputs"])
            report["compared"] += 1
            if LAST_PLACE.sub("~", out.getvalue()) != LAST_PLACE.sub("~", stored):
                report["mismatches"].append([path, n, stored[:300], out.getvalue()[:300]])
    report["notebooks"].append(path)
if DRIVE:
    os.chdir("exercises")  # as a student copy's kernel starts: in its own folder
for name in [m for m in sys.modules if m == "mha_lists" or m.startswith("mha_lists.")]:
    del sys.modules[name]
for path in EXERCISES:
    namespace = {"__name__": "__main__"}
    stopped = "ran to the end"
    *cells, last = code_cells("exercises/", path)
    for cell in cells:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec("".join(cell["source"]), namespace)
        except Exception as error:
            stopped = type(error).__name__
            break
    checked = io.StringIO()  # then the last cell, the self-check, as a student runs it after a Run All that stopped
    try:
        with contextlib.redirect_stdout(checked):
            exec("".join(last["source"]), namespace)
    except Exception as error:
        checked.write(f"{type(error).__name__}: {error}")
    report["exercises"][path] = [stopped, getattr(sys.modules.get("mha_lists"), "__file__", None), checked.getvalue()]
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


def lite_build():
    """lite/build.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("lite_build", ROOT / "lite" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_cells_lines_are_joined_into_one_string_as_jupyters_server_does():
    cell = {"cell_type": "code", "source": ["x = 1\n", "x"], "metadata": {}, "execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]},
        {"output_type": "execute_result", "execution_count": 1, "metadata": {},
         "data": {"text/html": ['<a title="one\n', 'two">1</a>'], "text/plain": "1", "application/json": {"a": 1}}}]}
    joined = lite_build().rejoined(cell)
    assert joined["source"] == "x = 1\nx" and joined["outputs"][0]["text"] == "a\nb\n"
    assert joined["outputs"][1]["data"] == {"text/html": '<a title="one\ntwo">1</a>', "text/plain": "1",
                                            "application/json": {"a": 1}}
    assert cell["source"] == ["x = 1\n", "x"]  # the notebook's own cell is left as it was


def kernel_settings(site) -> dict:
    config = json.loads((site / "jupyter-lite.json").read_text(encoding="utf-8"))
    return config["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]


def test_the_site_holds_every_notebook_the_exercises_and_the_module(lite_site):
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 14
    for notebook in notebooks:  # as stored, outputs and all; only the kernel's name is JupyterLite's
        ours, theirs = (json.loads(path.read_text(encoding="utf-8")) for path in (notebook, lite_site / "files" / notebook.name))
        assert theirs["cells"] == [lite_build().rejoined(cell) for cell in ours["cells"]]  # one string each
        for cell in theirs["cells"]:  # no list of lines left for the notebook app to join with commas
            assert isinstance(cell["source"], str)
            for output in cell.get("outputs", []):
                assert not any(isinstance(v, list) for m, v in output.get("data", {}).items() if m != "application/json")
                assert isinstance(output.get("text", ""), str)
        assert theirs["metadata"] == {**ours["metadata"], "kernelspec": LITE_KERNELSPEC}
    assert (lite_site / "files" / "glossary.md").read_bytes() == (ROOT / "notebooks" / "glossary.md").read_bytes()
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


def test_the_site_carries_the_kernels_other_wheels_for_piplite(lite_site):
    index = json.loads((lite_site / "pypi" / "all.json").read_text(encoding="utf-8"))
    assert {name.replace("_", "-") for name in index} == {"comm", "ipython-pygments-lexers"}
    assert not list((lite_site / "pypi").glob("mha_lists*"))  # one way in for the module: at kernel start


def test_every_kernel_installs_the_module_and_the_notebooks_files_as_it_starts(lite_site):
    """From static/pyodide, by Pyodide as it starts, on any origin: no service worker needed."""
    settings = kernel_settings(lite_site)
    assert settings["loadPyodideOptions"] == {"packages": ["mha-lists", "mha-lists-notebook-files"]}
    pyodide = lite_site / "static" / "pyodide"
    lock = json.loads((pyodide / "pyodide-lock.json").read_text(encoding="utf-8"))["packages"]
    module = zipfile.ZipFile(pyodide / lock["mha-lists"]["file_name"])
    assert lock["mha-lists"]["imports"] == ["mha_lists"]
    for source in sorted((ROOT / "mha_lists").rglob("*.py")):  # the module beside the notebooks, byte for byte
        assert module.read(source.relative_to(ROOT).as_posix()) == source.read_bytes(), source
    for data in ("mha_lists/data/read_text_run.json", "mha_lists/data/genesis.txt",
                 "mha_lists/tools/site_files/index.html"):
        assert module.read(data) == (ROOT / data).read_bytes(), data
    files = zipfile.ZipFile(pyodide / lock["mha-lists-notebook-files"]["file_name"])
    beside = sorted((ROOT / "notebooks").glob("*.json"))
    assert [p.name for p in beside] == ["19_induction_run.json"]
    data = sorted(name for name in files.namelist() if ".data/" in name)
    assert data == [f"mha_lists_notebook_files-0.1.0.data/data/home/pyodide/{p.name}" for p in beside]
    for name, path in zip(data, beside):
        assert files.read(name) == path.read_bytes()
        assert (lite_site / "files" / path.name).read_bytes() == path.read_bytes()  # and beside the notebooks


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


def origin(page) -> dict:
    """What the browser allows this page: a secure context, service workers."""
    return page.evaluate("({secure: window.isSecureContext, serviceWorker: 'serviceWorker' in navigator})")


@pytest.mark.parametrize("host", ["127.0.0.1", SCHOOL_HOST])
def test_offline_the_kernel_starts_and_runs_every_notebook(lite_site, tmp_path, host):
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    exercises = sorted(p.name for p in (lite_site / "files" / "exercises").glob("*.ipynb"))
    with serve_as_the_readme_does(lite_site) as port, chromium(tmp_path / "profile", host=host) as context:
        site = f"http://{host}:{port}/"
        code = (f"LAST_PLACE_PATTERN = {LAST_PLACE!r}\nSITE = {site!r}\nNOTEBOOKS = {notebooks!r}\n"
                f"EXERCISES = {exercises!r}\n" + RUN_NOTEBOOKS)
        page, output, banner = run_in_the_repl(context, site, code)
        assert banner is None, banner
        line = next((line for line in output.splitlines() if line.startswith("REPORT ")), None)
        assert line is not None, output[-3000:]
        report = json.loads(line[len("REPORT "):])
        allowed = origin(page)
        service_workers = [worker.url for worker in context.service_workers]
        page.close()
        requests, blocked = list(context.requests), list(context.blocked)
    assert report["python"].startswith("3.14.")
    if host == "127.0.0.1":  # a secure origin: the kernel reads the notebooks' folder through the service worker
        assert allowed == {"secure": True, "serviceWorker": True} and service_workers, service_workers
        assert report["drive"] and report["cwd"] == "/drive" and set(notebooks) <= set(report["beside"])
        # The notebook's folder comes first, as on a desktop: the mha_lists beside it, not the wheel's.
        beside, beside_exercises = "/drive/mha_lists/__init__.py", "/drive/exercises/mha_lists/__init__.py"
    else:  # no service worker: nothing beside the notebooks reaches the kernel but what the wheels installed
        assert allowed == {"secure": False, "serviceWorker": False} and service_workers == []
        assert not report["drive"] and report["cwd"] == "/home/pyodide"
        assert [name for name in report["beside"] if not name.startswith(".")] == ["19_induction_run.json"]
        beside = beside_exercises = SITE_PACKAGES + "mha_lists/__init__.py"
    assert report["mha_lists"] == beside
    assert report["installed"] == "0.1.0"  # from the wheel, wherever the import found the module
    assert report["errors"] == []
    assert report["notebooks"] == notebooks and report["compared"] > 300
    assert report["mismatches"] == []
    # Each student copy runs, with the module, until the first answer left to write; its self-check gives
    # every task 0 points, the total and the file to hand in.
    assert len(report["exercises"]) == len(exercises) >= 1
    for name, (stopped, imported, checked) in report["exercises"].items():
        assert (stopped, imported) == ("NotImplementedError", beside_exercises), (name, stopped, imported)
        teacher = json.loads((ROOT / "notebooks" / "exercises" / name).read_text(encoding="utf-8"))
        possible = sum(c["metadata"]["nbgrader"]["points"] for c in teacher["cells"]
                       if c["metadata"].get("nbgrader", {}).get("grade"))
        assert f"Total: 0 of {possible} points on these checks" in checked, checked
        assert checked.endswith(f"hand in this notebook's file, {name} (in JupyterLite: File > Download; "
                                "the name the browser gives it is fine).\n"), checked
    assert blocked == [], f"the kernel asked outside {host}: {blocked}"
    fetched = [urlsplit(r).path for r in requests]
    assert {"/static/pyodide/pyodide.asm.wasm", "/static/pyodide/micropip-0.11.1-py3-none-any.whl",
            "/static/pyodide/mha_lists-0.1.0-py3-none-any.whl"} <= set(fetched)


def test_on_a_school_server_over_http_notebook_00a_runs_in_the_notebook_app(lite_site, tmp_path):
    """The report that started this: served over plain http under the lab's name, 00a's first cell
    raised ModuleNotFoundError and every later cell failed. As a learner does it: open 00a, Run All."""
    with serve_as_the_readme_does(lite_site) as port, chromium(tmp_path / "profile", host=SCHOOL_HOST) as context:
        page = context.new_page()
        page.goto(f"http://{SCHOOL_HOST}:{port}/notebooks/index.html?path=00a_attention_on_paper.ipynb")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=120_000)
        last_output = ("[...document.querySelectorAll('.jp-OutputArea-output')]"  # the last cell's
                       ".some((o) => /two heads: .* one head: /.test(o.textContent))")
        page.get_by_role("menuitem", name="Edit").click()
        page.get_by_text("Clear Outputs of All Cells", exact=True).click()  # the stored ones
        page.wait_for_function("!" + last_output)
        page.get_by_role("menuitem", name="Run").click()
        page.get_by_text("Run All Cells", exact=True).click()
        page.wait_for_function("document.querySelector('.jp-OutputArea-output[data-mime-type="
                               "\"application/vnd.jupyter.stderr\"]') || document.getElementById('mha-kernel-failed') "
                               "|| " + last_output, timeout=180_000)
        # textContent, not innerText: a cell scrolled out of view shows no innerText
        streams = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']").all_text_contents()
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_text_contents()
        banner = page.query_selector("#mha-kernel-failed")
        allowed = origin(page)
        page.screenshot(path=str(tmp_path / "00a.png"))
        page.close()
        blocked = list(context.blocked)
    assert allowed == {"secure": False, "serviceWorker": False}
    assert banner is None and errors == [], errors
    assert streams[0].startswith("3 tokens, d_model = 4, 2 heads")  # the first cell that prints: the module works
    # Step 7's last line (its output cell's last), the check the instructor guide asks for on a lab machine
    assert any(s.endswith("\nQ, K, V, weights and output equal the module's: True\n") for s in streams)
    assert streams == stored_stdout(ROOT / "notebooks" / "00a_attention_on_paper.ipynb")  # every cell, as stored
    assert blocked == []


# Every entry's title in the notebook's outputs, and whether each is still a focusable <a tabindex="0">.
TITLES = """() => [...document.querySelectorAll('.jp-OutputArea-output td a[title]')].map((a) => [a.title,
    a.getAttribute('tabindex')])"""


def stored_titles(notebook) -> list[list[str]]:
    """Cell by cell, the titles of the entries of its stored HTML outputs, as a browser reads the attribute."""
    return [[html.unescape(title) for output in cell.get("outputs", []) if "text/html" in output.get("data", {})
             for title in re.findall(r'<a tabindex="0" title="([^"]*)"', "".join(output["data"]["text/html"]))]
            for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]]


# Every table's box in the outputs: [its overflow-x, its first row label's position].
BOXES = """() => [...document.querySelectorAll('.jp-OutputArea-output div > table')].map((t) => [
    getComputedStyle(t.parentElement).overflowX, getComputedStyle(t.querySelector('tr:last-child > th')).position])"""


def test_numbers_explain_themselves_in_the_notebook_app_as_stored_and_when_run(lite_site, tmp_path):
    """Notebook 02-06's explained tables (display.explained_scores in part 03, the first; the weights of part 04
    and the outputs of part 05): opened as stored, an untrusted output that JupyterLite's sanitiser cleans,
    every entry keeps its title, line for line (the build joins the stored lines: served as a list, they came
    back joined by commas), and its tabindex; no stray comma shows above the first table; after Run All, the
    kernel's output carries CPython's .explain(i, j) for every entry of the scores."""
    from mha_lists import attention_trace, running_example
    from mha_lists.teaching.display import explained_scores
    notebook = ROOT / "notebooks" / "02-06_the_layer_step_by_step.ipynb"
    cell = next(n for n, c in enumerate(json.loads(notebook.read_text(encoding="utf-8"))["cells"])
                if "explained_scores(trace.Q[0]" in "".join(c["source"]))
    by_cell = stored_titles(notebook)
    stored, every = by_cell[cell], [title for titles in by_cell for title in titles]
    before = sum(len(titles) for titles in by_cell[:cell])  # the entries of earlier cells' tables
    ex = running_example()
    trace = attention_trace(ex.x, ex.weights)
    view = explained_scores(trace.Q[0], trace.K[0], ex.tokens, title="scores, head 0")
    expected = [view.explain(i, j) for i in range(view.n) for j in range(view.m)]
    assert len(stored) == len(expected) == len(ex.tokens) ** 2 and all(stored)
    with serve_as_the_readme_does(lite_site) as port, chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/notebooks/index.html?path={notebook.name}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
        page.wait_for_function(f"({TITLES})().length >= {len(every)}", timeout=120_000)
        as_opened = page.evaluate(TITLES)
        boxes_as_opened = page.evaluate(BOXES)
        first_table = page.locator(".jp-OutputArea-output").filter(has=page.locator("td a[title]")).first
        first_table.scroll_into_view_if_needed()  # part 03 is far down: a cell out of view lays out no text
        page.wait_for_function("(output) => output.innerText.trim().length > 0", arg=first_table.element_handle())
        shown = first_table.inner_text()
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator, .jp-KernelStatus", timeout=120_000)
        page.get_by_role("menuitem", name="Edit").click()
        page.get_by_text("Clear Outputs of All Cells", exact=True).click()  # the stored ones
        page.wait_for_function(f"({TITLES})().length === 0")
        page.get_by_role("menuitem", name="Run").click()
        page.get_by_text("Run All Cells", exact=True).click()
        page.wait_for_function(f"({TITLES})().length >= {len(every)} || document.getElementById('mha-kernel-failed') || "
                               "document.querySelector('.jp-OutputArea-output[data-mime-type="
                               "\"application/vnd.jupyter.stderr\"]')", timeout=180_000)
        errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_text_contents()
        when_run = page.evaluate(TITLES)
        boxes_when_run = page.evaluate(BOXES)
        figure = page.locator(".jp-OutputArea-output td a[title]").first
        figure.focus()
        page.screenshot(path=str(tmp_path / "02-06.png"))
        page.close()
        blocked = list(context.blocked)
    assert errors == [], errors
    assert as_opened == [[title, "0"] for title in every]  # the sanitiser kept every title, and the tabindex
    assert shown.startswith("scores, head 0 (5x5)\n"), shown[:80]  # nothing above the table's caption
    assert len(when_run) == len(every) and all(tabindex == "0" for _, tabindex in when_run)
    # the kernel's scores: CPython's explanations, entry by entry
    assert when_run[before:before + len(expected)] == [[title, "0"] for title in expected]
    # Each matrix scrolls in a box of its own; its row labels stay in view in a cell's output the learner ran
    # (JupyterLab trusts it), not in the stored one (the sanitiser allows position static, relative, absolute).
    assert boxes_as_opened and {tuple(box) for box in boxes_as_opened} == {("auto", "static")}, boxes_as_opened
    assert boxes_when_run and {tuple(box) for box in boxes_when_run} == {("auto", "sticky")}, boxes_when_run
    assert blocked == []


def stored_stdout(notebook) -> list[str]:
    """What a notebook's cells printed, as the notebook app shows it: one text per run of stdout outputs."""
    texts = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        previous = None
        for output in cell.get("outputs", []):
            stdout = output["output_type"] == "stream" and output["name"] == "stdout"
            if stdout and previous == "stdout":
                texts[-1] += "".join(output["text"])
            elif stdout:
                texts.append("".join(output["text"]))
            previous = "stdout" if stdout else output["output_type"]
    return texts


def test_when_the_kernel_cannot_load_the_learner_reads_why(lite_site, tmp_path):
    """The site as it was before: Pyodide from the CDN, which a classroom without internet cannot reach."""
    site = tmp_path / "site"
    shutil.copytree(lite_site, site)
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    cdn = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/pyodide.mjs"
    config["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]["pyodideUrl"] = cdn
    config_path.write_text(json.dumps(config), encoding="utf-8")
    with serve_as_the_readme_does(site) as port, chromium(tmp_path / "profile") as context:
        page, output, banner = run_in_the_repl(context, f"http://127.0.0.1:{port}/", "print(6 * 7)", wait_ms=120_000)
        assert banner is not None, output
        assert banner.startswith("Python could not start here, so the code cells will not run.")
        assert cdn in banner  # the reason: the module that did not load
        assert page.get_by_role("alert").filter(has_text="Python could not start").is_visible()
        page.close()
        assert context.blocked == [cdn]
    assert "42" not in output


def test_when_the_module_cannot_be_installed_the_learner_reads_why(lite_site, tmp_path):
    """A copy of the site without the module's wheel: Python starts, without mha_lists, and says so."""
    site = tmp_path / "site"
    shutil.copytree(lite_site, site)
    (wheel,) = (site / "static" / "pyodide").glob("mha_lists-*.whl")
    wheel.unlink()
    with serve_as_the_readme_does(site) as port, chromium(tmp_path / "profile", host=SCHOOL_HOST) as context:
        page, output, banner = run_in_the_repl(context, f"http://{SCHOOL_HOST}:{port}/", "import mha_lists",
                                               wait_ms=120_000)
        assert banner is not None, output
        assert banner.startswith("Python started without mha-lists, so the notebooks' code cells will fail. "
                                 "Reason: mha-lists could not be installed (")
        assert "copy of the site is missing files" in banner
        assert page.get_by_role("alert").filter(has_text="Python started without mha-lists").is_visible()
        page.close()
        assert context.blocked == []


def test_a_student_copy_runs_checks_itself_and_is_handed_in_from_the_notebook_app(lite_site, tmp_path):
    """As a learner does it: open an exercise in the notebook app, Run All (it stops at the first answer to
    write); write the first answer and run its check; run the self-check at the end; save; File > Download.
    The downloaded file is what is handed in, and score grades it."""
    (copy, *_) = sorted((lite_site / "files" / "exercises").glob("*.ipynb"))
    teacher = json.loads((ROOT / "notebooks" / "exercises" / copy.name).read_text(encoding="utf-8"))
    code = [c for c in teacher["cells"] if c["cell_type"] == "code"]
    first = next(n for n, c in enumerate(code) if c["metadata"].get("nbgrader", {}).get("solution"))
    points = [c["metadata"]["nbgrader"]["points"] for c in code if c["metadata"].get("nbgrader", {}).get("grade")]
    with serve_as_the_readme_does(lite_site) as port, chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/notebooks/index.html?path=exercises/" + copy.name)
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
        # The first answer, typed in (the teacher's, as one paste), then its check, then the self-check.
        cells = page.locator(".jp-Notebook .jp-CodeCell")
        cells.nth(first).locator(".cm-content").click()
        page.keyboard.press("Control+a")
        page.keyboard.insert_text("".join(code[first]["source"]))
        page.keyboard.press("Shift+Enter")  # runs the answer; the check cell below is selected
        page.keyboard.press("Shift+Enter")
        cells.last.locator(".cm-content").click()
        page.keyboard.press("Shift+Enter")
        total = f"Total: {points[0]} of {sum(points)} points on these checks"
        output = page.locator(".jp-OutputArea-output", has_text=total)
        output.wait_for(timeout=60_000)
        checked = output.inner_text()
        page.keyboard.press("Control+s")
        page.wait_for_function("!document.title.startsWith('*') && !document.querySelector('.jp-mod-dirty')",
                               timeout=30_000)
        page.get_by_role("menuitem", name="File").click()
        with page.expect_download() as download:
            page.get_by_text("Download", exact=True).click()
        handed_in = tmp_path / download.value.suggested_filename
        download.value.save_as(handed_in)
        page.screenshot(path=str(tmp_path / "exercise.png"))
        page.close()
        blocked = list(context.blocked)
    assert streams, "no cell printed anything"
    assert errors and "NotImplementedError" in errors[0], errors
    assert not any("ModuleNotFoundError" in e or "ImportError" in e for e in errors)
    assert checked.splitlines()[1].endswith(f"{points[0]} of {points[0]} point{'s' * (points[0] != 1)}; correct")
    assert f"hand in this notebook's file, {copy.name} (in JupyterLite: File > Download;" in checked
    assert handed_in.name.endswith(".ipynb")
    graded = subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "score", str(handed_in)],
                            cwd=ROOT, capture_output=True, text=True)
    assert graded.returncode == 0, graded.stderr
    assert graded.stdout.splitlines()[0].endswith(f": {points[0]}/{sum(points)} points"), graded.stdout
    assert blocked == []


def test_folded_cells_open_folded_in_the_notebook_app(lite_site, tmp_path):
    """A cell stored with `jupyter.source_hidden` (tests/test_docs.py says which may be) opens with its code folded
    in the notebook app and its output in view; the other code cells open with their code in view."""
    notebook = ROOT / "notebooks" / "07b_a_model_that_read_a_book.ipynb"
    code = [c for c in json.loads(notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    folded = [n for n, c in enumerate(code) if c["metadata"].get("jupyter", {}).get("source_hidden")]
    assert folded
    with serve_as_the_readme_does(lite_site) as port, chromium(tmp_path / "profile") as context:
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{port}/notebooks/index.html?path={notebook.name}")
        page.wait_for_selector(".jp-Notebook .jp-CodeCell", timeout=120_000)
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-CodeCell').length === {len(code)}",
                               timeout=120_000)
        shown = page.evaluate("[...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map((cell) => ["
                              "!!cell.querySelector('.jp-InputPlaceholder'),"
                              "cell.querySelectorAll('.jp-OutputArea-output').length])")
        page.screenshot(path=str(tmp_path / "07b.png"))
        page.close()
    assert [n for n, (placeholder, _) in enumerate(shown) if placeholder] == folded
    assert all(shown[n][1] >= 1 for n in folded)  # the output stays in view
