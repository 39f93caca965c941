"""Build the static JupyterLite site of the notebooks: ``python lite/build.py [OUTDIR]`` (default ``_lite``).

Needs the ``lite`` extra (``pip install -e ".[lite]"``) and ``npm ci`` (the ``pyodide`` npm
package); it downloads the kernel's pure-Python wheels from PyPI. The site needs no network
afterwards: every file the kernel asks for is in it.

  - files/*.ipynb               every notebook, as stored (with outputs), its kernel named as
                                JupyterLite names it ("python", not "python3"), each multiline
                                string joined into one (``rejoined``), and the files a
                                notebook reads beside it (notebooks/*.json: 19's saved run);
  - files/mha_lists/**          the module beside them, to read and edit in the file browser;
  - files/exercises/NN_*.ipynb  the exercise notebooks' student copies
                                (``python -m mha_lists.tools.exercises student-copies``), with
                                files/exercises/mha_lists/ beside them;
  - static/pyodide/             the npm ``pyodide`` package (the web page's version,
                                ``mha_lists.tools.site.PYODIDE_VERSION``) with the wheels the
                                kernel loads through it (micropip, IPython, jedi and their
                                dependencies, the versions its pyodide-lock.json names, from
                                PyPI), and two of ours: mha_lists (``pip wheel .``, so its
                                mha_lists/data/ too) and mha_lists_notebook_files (the files a
                                notebook reads beside it, as wheel data for /home/pyodide); the
                                lock is cut down to these, with their hashes;
  - pypi/                       piplite's wheels: the kernel's wheels that Pyodide does not
                                list (comm, ipython-pygments-lexers);
  - kernel-check.js             shows a message over the page when the kernel cannot start, or
                                starts without mha_lists (jupyterlite-pyodide-kernel itself only
                                turns an icon red).

Where the kernel finds mha_lists. Files beside a notebook reach the kernel only through a service
worker (the /drive folder), and browsers allow one only on a secure origin: https, or http on
localhost. Served as ``http://classroom.lan`` the kernel sees none of them. So every kernel
installs our two wheels as it starts (``loadPyodideOptions.packages``, the setting
jupyterlite-pyodide-kernel's own lock addon writes): ``import mha_lists`` and the files a
notebook opens work on any origin, with no service worker. Where there is a /drive, the
kernel's working directory is the notebook's folder, first on sys.path as on a desktop, so the
mha_lists beside the notebook is the one imported, a learner's edit included (after a kernel
restart). Without one, the working directory is /home/pyodide, the wheels' copy is imported,
and an edit in the file browser does not reach the kernel.

The kernel is told never to fall back to PyPI (``disablePyPIFallback``). Publish OUTDIR as it
is, from any static server over http or https; check it with ``python -m http.server -d OUTDIR``
and open http://127.0.0.1:8000/lab/index.html.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from base64 import urlsafe_b64encode

LITE = pathlib.Path(__file__).resolve().parent
ROOT = LITE.parent
sys.path.insert(0, str(ROOT))

from mha_lists.tools.cli import OneLineErrorParser  # noqa: E402  (the repository's own package)
from mha_lists.tools.site import PYODIDE_VERSION  # noqa: E402

PYODIDE_DIR = ROOT / "node_modules" / "pyodide"
# What jupyterlite-pyodide-kernel loads when its kernel starts: micropip through Pyodide's
# loadPackage, then piplite.install of ipykernel, comm, pyodide-kernel, jedi and ipython.
# ipykernel (a shim), piplite and pyodide-kernel come inside the kernel's extension.
LOCK_PACKAGES = ("micropip", "ipython", "jedi")  # with their "depends", as Pyodide's lock lists them
EXTRA_WHEELS = ("comm==0.2.3", "ipython-pygments-lexers==1.1.1")  # required, but not in Pyodide's lock
PYODIDE_KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
APPS_WITH_A_KERNEL = ("lab", "notebooks", "repl", "consoles")
LITE_KERNELSPEC = {"display_name": "Python (Pyodide)", "language": "python", "name": "python"}
# Installed by every kernel as Pyodide starts, from static/pyodide, whatever the origin.
KERNEL_START_PACKAGES = ("mha-lists", "mha-lists-notebook-files")
# Pyodide's sys.prefix is "/", its HOME /home/pyodide, which is the kernel's working directory
# when there is no /drive: a wheel's data files land in sys.prefix, so here.
KERNEL_HOME = "home/pyodide"


def fail(message: str) -> None:
    """One line on stderr, exit code 2."""
    print(f"lite/build.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def pip_download(requirements: list[str], into: pathlib.Path) -> list[pathlib.Path]:
    """Pure-Python wheels for CPython 3.14 (Pyodide's), exactly these versions, no dependencies."""
    into.mkdir(parents=True, exist_ok=True)
    before = set(into.glob("*.whl"))
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                             "--no-deps", "--only-binary", ":all:", "--python-version", "3.14",
                             "--dest", str(into), *requirements], capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
        fail(f"could not download the kernel's wheels from PyPI: {(errors or ['pip failed'])[-1]}")
    return sorted(set(into.glob("*.whl")) - before)


def normalize(name: str) -> str:
    """A package name as the lock's keys and wheel names compare (PEP 503): "prompt_toolkit" -> "prompt-toolkit"."""
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_closure(packages: dict, names: tuple[str, ...]) -> list[str]:
    """names and everything they depend on, by the lock's "depends", sorted."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = normalize(todo.pop())
        if name not in seen:
            seen.add(name)
            todo.extend(packages[name]["depends"])
    return sorted(seen)


def check_the_kernel_fits(python: str) -> None:
    """jupyterlite-pyodide-kernel names the Pyodide it was built for (314.0.6 in 0.8.6, as its CDN default);
    the site runs the web page's (PYODIDE_VERSION) instead, which must be the same series and CPython."""
    from jupyterlite_pyodide_kernel import constants

    if constants.PYODIDE_VERSION.split(".")[0] != PYODIDE_VERSION.split(".")[0]:
        fail(f"jupyterlite-pyodide-kernel is built for Pyodide {constants.PYODIDE_VERSION}, not the "
             f"{PYODIDE_VERSION.split('.')[0]}.x series of the web page's {PYODIDE_VERSION}")
    if not python.startswith(constants.PYODIDE_PYTHON_VERSION + "."):
        fail(f"Pyodide {PYODIDE_VERSION} is CPython {python}; the kernel expects {constants.PYODIDE_PYTHON_VERSION}")


def stage_pyodide(target: pathlib.Path, downloads: pathlib.Path, ours: list[pathlib.Path]) -> list[str]:
    """The npm pyodide package in target, with the kernel's wheels and ours, and a lock that lists only them."""
    package = json.loads((PYODIDE_DIR / "package.json").read_text(encoding="utf-8"))
    if package["version"] != PYODIDE_VERSION:
        fail(f"node_modules/pyodide is {package['version']}, the web page uses {PYODIDE_VERSION}; run npm ci")
    shutil.copytree(PYODIDE_DIR, target, ignore=shutil.ignore_patterns("*.map", "*.d.ts", "*.html", "README.md"))
    lock = json.loads((PYODIDE_DIR / "pyodide-lock.json").read_text(encoding="utf-8"))
    check_the_kernel_fits(lock["info"]["python"])
    names = lock_closure(lock["packages"], LOCK_PACKAGES)
    wanted = {name: lock["packages"][name] for name in names}
    wheels = pip_download([f"{name}=={entry['version']}" for name, entry in wanted.items()], downloads / "lock")
    by_name = {normalize(wheel.name.split("-")[0]): wheel for wheel in wheels}
    kept = {}
    for name, entry in wanted.items():
        wheel = by_name.get(name) or fail(f"PyPI gave no wheel for {name}=={entry['version']}")
        shutil.copyfile(wheel, target / wheel.name)
        # PyPI's wheel, not Pyodide's rebuild of it: the lock names the file that is there.
        kept[name] = {**entry, "file_name": wheel.name, "sha256": sha256(wheel)}
    for wheel in ours:
        shutil.copyfile(wheel, target / wheel.name)
        name, version = wheel.name.split("-")[:2]
        imports = sorted({n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/__init__.py")})
        kept[normalize(name)] = {"name": normalize(name), "version": version, "file_name": wheel.name,
                                 "install_dir": "site", "package_type": "package", "imports": imports,
                                 "depends": [], "sha256": sha256(wheel), "unvendored_tests": False, "tool": {}}
    (target / "pyodide-lock.json").write_text(json.dumps({**lock, "packages": kept}, indent=1), encoding="utf-8")
    return [f"{name}=={entry['version']}" for name, entry in kept.items()]


def sha256(path: pathlib.Path) -> str:
    """The file's SHA-256 in hex, as Pyodide's lock writes it and checks it."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def notebook_files() -> list[pathlib.Path]:
    """What a notebook opens from its own folder (19's saved run), to put beside it."""
    return sorted((ROOT / "notebooks").glob("*.json"))


def notebook_files_wheel(version: str, into: pathlib.Path) -> pathlib.Path:
    """A wheel whose only content is notebook_files() as data for KERNEL_HOME, the kernel's working
    directory when it has no /drive; the same bytes from the same files (every date 1980-01-01)."""
    stem = f"mha_lists_notebook_files-{version}"
    entries = {f"{stem}.data/data/{KERNEL_HOME}/{path.name}": path.read_bytes() for path in notebook_files()}
    entries[f"{stem}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: mha-lists-notebook-files\nVersion: {version}\n"
        "Summary: the files the notebooks of mha-lists read beside them, for JupyterLite's kernel\n").encode()
    entries[f"{stem}.dist-info/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: lite/build.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    record = [f"{name},sha256={urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"
              for name, data in entries.items()]
    entries[f"{stem}.dist-info/RECORD"] = "\n".join([*record, f"{stem}.dist-info/RECORD,,", ""]).encode()
    into.mkdir(parents=True, exist_ok=True)
    wheel = into / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return wheel


def rejoined(cell: dict) -> dict:
    """The cell with every multiline string joined into one, as Jupyter's server serves a notebook
    (nbformat's ``rejoin_lines``): its source, its outputs' text and their data (but JSON's).

    A notebook file stores a long string as a list of lines; JupyterLite serves the file as it is,
    and its notebook app shows a stored output's list of lines joined by commas: ", , ," above a
    heatmap, and every line of a number's explanation (a title) starting with a comma.

    >>> rejoined({"cell_type": "code", "source": ["a\\n", "b"], "outputs": [{"output_type": "display_data",
    ...           "data": {"text/html": ["<p>\\n", "</p>"], "application/json": ["x"]}, "metadata": {}}]})["outputs"]
    [{'output_type': 'display_data', 'data': {'text/html': '<p>\\n</p>', 'application/json': ['x']}, 'metadata': {}}]
    """
    def joined(value):
        return "".join(value) if isinstance(value, list) else value

    cell = {**cell, "source": joined(cell["source"])}
    if "outputs" in cell:
        outputs = []
        for output in cell["outputs"]:
            output = dict(output)
            if "text" in output:
                output["text"] = joined(output["text"])
            if "data" in output:
                output["data"] = {mime: value if mime.endswith("json") else joined(value)
                                  for mime, value in output["data"].items()}
            outputs.append(output)
        cell["outputs"] = outputs
    return cell


def use_the_lite_kernel(notebook: pathlib.Path) -> None:
    """Name JupyterLite's kernel ("python") in the notebook's metadata, where ours say "python3":
    JupyterLite has no kernel of that name and would ask each learner to pick one. Each cell's lines
    are joined (``rejoined``); what they say is kept as it is."""
    data = json.loads(notebook.read_text(encoding="utf-8"))
    data["metadata"]["kernelspec"] = LITE_KERNELSPEC
    data["cells"] = [rejoined(cell) for cell in data["cells"]]
    notebook.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def stage_contents(content: pathlib.Path) -> None:
    """The notebooks (and the glossary they link to) at the top, the exercise student copies in exercises/,
    mha_lists/ beside both."""
    content.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, content / notebook.name)
    for data in notebook_files():
        shutil.copyfile(data, content / data.name)
    for page in sorted((ROOT / "notebooks").glob("*.md")):  # the glossary the notebooks link to
        shutil.copyfile(page, content / page.name)
    subprocess.run([sys.executable, "-m", "mha_lists.tools.exercises", "student-copies", str(content / "exercises")],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    for notebook in sorted(content.rglob("*.ipynb")):
        use_the_lite_kernel(notebook)
    for folder in (content, content / "exercises"):
        # the module, and the book and trained run it reads (mha_lists/data/)
        for source in sorted([*(ROOT / "mha_lists").rglob("*.py"), *(ROOT / "mha_lists" / "data").glob("*")]):
            target = folder / "mha_lists" / source.relative_to(ROOT / "mha_lists")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)


def write_lite_dir(lite_dir: pathlib.Path) -> None:
    """The build's configuration: ours, plus a kernel that never asks PyPI for a wheel and installs
    KERNEL_START_PACKAGES as it starts."""
    shutil.copyfile(LITE / "jupyter_lite_config.json", lite_dir / "jupyter_lite_config.json")
    kernel = {"disablePyPIFallback": True, "loadPyodideOptions": {"packages": list(KERNEL_START_PACKAGES)}}
    settings = {"litePluginSettings": {PYODIDE_KERNEL_PLUGIN: kernel}}
    (lite_dir / "jupyter-lite.json").write_text(
        json.dumps({"jupyter-lite-schema-version": 0, "jupyter-config-data": settings}), encoding="utf-8")


def add_kernel_check(outdir: pathlib.Path) -> None:
    """kernel-check.js into every app that starts a kernel, before the app's own scripts."""
    shutil.copyfile(LITE / "kernel-check.js", outdir / "kernel-check.js")
    for app in APPS_WITH_A_KERNEL:
        page = outdir / app / "index.html"
        text = page.read_text(encoding="utf-8")
        tag = '<script src="../kernel-check.js"></script>\n'
        if tag in text:  # a rebuild into the same folder
            continue
        if "<head>" not in text:
            fail(f"{page} has no <head> to put kernel-check.js into")
        page.write_text(text.replace("<head>", "<head>\n" + tag, 1), encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="python lite/build.py",
                                description="Build the JupyterLite site of the notebooks, runnable offline.")
    parser.add_argument("outdir", nargs="?", default=str(ROOT / "_lite"), help="folder to write (default: _lite)")
    args = parser.parse_args(argv)
    outdir = pathlib.Path(args.outdir).resolve()
    if outdir.exists() and not outdir.is_dir():
        fail(f"OUTDIR {args.outdir} is a file, not a folder")
    if not (PYODIDE_DIR / "pyodide.mjs").exists():
        fail(f"the pyodide npm package is missing: run npm ci in {ROOT}")
    try:
        import jupyterlite_core  # noqa: F401
        import jupyterlite_pyodide_kernel  # noqa: F401
    except ImportError:
        fail('jupyterlite is not installed: pip install -e ".[lite]"')
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(tmp)
        lite_dir, content, downloads = work / "lite", work / "content", work / "downloads"
        (lite_dir / "static").mkdir(parents=True)
        write_lite_dir(lite_dir)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--wheel-dir", str(downloads / "own"), str(ROOT)], check=True)
        own = next((downloads / "own").glob("mha_lists-*.whl"))
        ours = [own, notebook_files_wheel(own.name.split("-")[1], downloads / "own")]
        in_lock = stage_pyodide(lite_dir / "static" / "pyodide", downloads, ours)
        stage_contents(content)
        extra = pip_download(list(EXTRA_WHEELS), downloads / "piplite")
        wheels = [arg for wheel in extra for arg in ("--piplite-wheels", str(wheel))]
        result = subprocess.run([sys.executable, "-m", "jupyter", "lite", "build", "--lite-dir", str(lite_dir),
                                 "--contents", str(content), *wheels, "--output-dir", str(outdir)],
                                cwd=lite_dir, capture_output=True, text=True)
        if result.returncode != 0:
            print(result.stdout[-3000:] + result.stderr[-3000:], file=sys.stderr)
            fail("jupyter lite build failed (its output is above)")
    add_kernel_check(outdir)
    notebooks = sorted(p.name for p in (outdir / "files").glob("*.ipynb"))
    exercises = sorted(p.name for p in (outdir / "files" / "exercises").glob("*.ipynb"))
    print(f"JupyterLite site in {outdir}: {len(notebooks)} notebooks, {len(exercises)} exercise student copies, "
          f"mha_lists, Pyodide {PYODIDE_VERSION} with {len(in_lock)} wheels "
          f"({', '.join(KERNEL_START_PACKAGES)} installed by every kernel as it starts), "
          f"{', '.join(w.name.split('-')[0] for w in extra)} for piplite; no CDN needed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
