"""Re-execute notebooks top to bottom in a fresh kernel and store them clean.

    python tools/execute_notebooks.py                 # every notebook in notebooks/
    python tools/execute_notebooks.py notebooks/03_scores.ipynb

Each notebook runs in its own folder (as nbval runs it), with no timing
metadata recorded; volatile metadata is stripped, outputs and execution counts
are kept. Run it after any change to mha_lists that changes what a notebook
prints, then commit the notebooks.
"""

import pathlib
import sys

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = pathlib.Path(__file__).resolve().parent.parent


def execute(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    ep = ExecutePreprocessor(timeout=600, kernel_name="python3", record_timing=False)
    ep.preprocess(nb, {"metadata": {"path": str(path.parent)}})
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            for out in cell.outputs:
                out.get("metadata", {}).clear() if out.get("output_type") in ("display_data", "execute_result") else None
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print(f"executed {path.relative_to(ROOT)}")


def main(argv: list[str]) -> None:
    paths = [pathlib.Path(a).resolve() for a in argv] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    for path in paths:
        execute(path)


if __name__ == "__main__":
    main(sys.argv[1:])
