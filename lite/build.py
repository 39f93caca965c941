"""Build the static JupyterLite site of the notebooks: ``python lite/build.py [OUTDIR]`` (default ``_lite``).

Needs the ``lite`` extra (``pip install -e ".[lite]"``) and ``npm ci`` (the ``pyodide`` npm
package); it downloads the kernel's pure-Python wheels from PyPI. The site needs no network
afterwards: every file the kernel asks for is in it.

  - files/NN_*.ipynb            every notebook, as stored (with outputs), its kernel named as
                                JupyterLite names it ("python", not "python3");
  - files/mha_lists/**.py       the module beside them, so ``import mha_lists`` works in the
                                kernel (its working directory is the notebook's folder, /drive);
  - files/exercises/NN_*.ipynb  the exercise notebooks' student copies
                                (``python -m mha_lists.tools.exercises student-copies``), with
                                files/exercises/mha_lists/ beside them;
  - static/pyodide/             the npm ``pyodide`` package (the web page's version,
                                ``mha_lists.tools.site.PYODIDE_VERSION``) with the wheels the
                                kernel loads through it (micropip, IPython, jedi and their
                                dependencies, the versions its pyodide-lock.json names, from
                                PyPI); the lock file is cut down to those, with their hashes;
  - pypi/                       piplite's wheels: mha_lists itself (for a browser that gives the
                                kernel no /drive, e.g. a Firefox private window:
                                ``%pip install mha_lists``), and the kernel's wheels that Pyodide
                                does not list (comm, ipython-pygments-lexers);
  - kernel-check.js             shows a message over the page when the kernel cannot start
                                (jupyterlite-pyodide-kernel itself only turns an icon red).
The kernel is told never to fall back to PyPI (``disablePyPIFallback``). Publish OUTDIR as it
is; check it locally with ``python -m http.server -d OUTDIR`` and open
http://127.0.0.1:8000/lab/index.html.
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


def stage_pyodide(target: pathlib.Path, downloads: pathlib.Path) -> list[str]:
    """The npm pyodide package in target, with the kernel's wheels and a lock that lists only them."""
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
        kept[name] = {**entry, "file_name": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}
    (target / "pyodide-lock.json").write_text(json.dumps({**lock, "packages": kept}, indent=1), encoding="utf-8")
    return [f"{name}=={entry['version']}" for name, entry in kept.items()]


def use_the_lite_kernel(notebook: pathlib.Path) -> None:
    """Name JupyterLite's kernel ("python") in the notebook's metadata, where ours say "python3":
    JupyterLite has no kernel of that name and would ask each learner to pick one. Cells are kept as they are."""
    data = json.loads(notebook.read_text(encoding="utf-8"))
    data["metadata"]["kernelspec"] = LITE_KERNELSPEC
    notebook.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def stage_contents(content: pathlib.Path) -> None:
    """The notebooks at the top, the exercise student copies in exercises/, mha_lists/ beside both."""
    content.mkdir(parents=True, exist_ok=True)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, content / notebook.name)
    for data in sorted((ROOT / "notebooks").glob("*.json")):  # what a notebook loads (19's saved run)
        shutil.copyfile(data, content / data.name)
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
    """The build's configuration: ours, plus a kernel that never asks PyPI for a wheel."""
    shutil.copyfile(LITE / "jupyter_lite_config.json", lite_dir / "jupyter_lite_config.json")
    settings = {"litePluginSettings": {PYODIDE_KERNEL_PLUGIN: {"disablePyPIFallback": True}}}
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
        in_lock = stage_pyodide(lite_dir / "static" / "pyodide", downloads)
        stage_contents(content)
        extra = pip_download(list(EXTRA_WHEELS), downloads / "piplite")
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--wheel-dir", str(downloads / "own"), str(ROOT)], check=True)
        own = next((downloads / "own").glob("mha_lists-*.whl"))
        wheels = [arg for wheel in (own, *extra) for arg in ("--piplite-wheels", str(wheel))]
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
          f"mha_lists, Pyodide {PYODIDE_VERSION} with {len(in_lock)} wheels, "
          f"{', '.join(w.name.split('-')[0] for w in (own, *extra))} for piplite; no CDN needed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
