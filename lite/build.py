"""Build the static JupyterLite site of the notebooks: ``python lite/build.py [OUTDIR]`` (default ``_lite``).

Needs the ``lite`` extra (``pip install -e ".[lite]"``); builds offline. The site holds:
  - files/NN_*.ipynb        every notebook, as stored (with outputs);
  - files/mha_lists/*.py    the module beside them, so ``import mha_lists`` works in the
                            kernel (its working directory is the notebook's folder, /drive);
  - pypi/mha_lists-*.whl    the module as a wheel for piplite: where the browser gives the
                            kernel no /drive (Firefox private windows), ``%pip install mha_lists``
                            installs it from the site itself.
At run time the Pyodide kernel loads Pyodide and its packages from the network (the CDN
URL built into jupyterlite-pyodide-kernel); everything of this project comes from the site.
Publish OUTDIR as it is (e.g. GitHub Pages); check it locally with
``python -m http.server -d OUTDIR`` and open http://127.0.0.1:8000/lab/index.html.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

LITE = pathlib.Path(__file__).resolve().parent
ROOT = LITE.parent


def stage(content: pathlib.Path) -> None:
    """The notebooks at the top, the module's .py files in mha_lists/ beside them."""
    (content / "mha_lists").mkdir(parents=True)
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        shutil.copyfile(notebook, content / notebook.name)
    for source in sorted((ROOT / "mha_lists").rglob("*.py")):
        target = content / "mha_lists" / source.relative_to(ROOT / "mha_lists")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: python lite/build.py [OUTDIR]", file=sys.stderr)
        return 2
    outdir = pathlib.Path(argv[0] if argv else ROOT / "_lite").resolve()
    with tempfile.TemporaryDirectory() as tmp:
        content, wheels = pathlib.Path(tmp) / "content", pathlib.Path(tmp) / "wheels"
        stage(content)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                        "--wheel-dir", str(wheels), str(ROOT)], check=True)
        wheel = next(wheels.glob("mha_lists-*.whl"))
        subprocess.run([sys.executable, "-m", "jupyter", "lite", "build", "--lite-dir", str(LITE),
                        "--contents", str(content), "--piplite-wheels", str(wheel),
                        "--output-dir", str(outdir)], check=True, cwd=LITE)
    notebooks = sorted(p.name for p in (outdir / "files").glob("*.ipynb"))
    print(f"JupyterLite site in {outdir}: {len(notebooks)} notebooks, mha_lists, {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
