"""Re-execute notebooks top to bottom in a fresh kernel and store them clean.

    python tools/execute_notebooks.py                 # every notebook in notebooks/ and notebooks/exercises/
    python tools/execute_notebooks.py notebooks/02-06_the_layer_step_by_step.ipynb

Each notebook runs in its own folder (as nbval runs it), with no timing
metadata recorded; volatile metadata is stripped, printed chunks are joined,
outputs and execution counts are kept, so executing twice stores the same file. Run it after any change to mha_lists that changes what a notebook
prints, then commit the notebooks.
"""

import pathlib
import sys

import nbformat
from nbconvert.preprocessors import ExecutePreprocessor

ROOT = pathlib.Path(__file__).resolve().parent.parent


def coalesce_streams(outputs: list) -> list:
    """Join consecutive stdout (or stderr) chunks into one output.

    How a cell's printing is cut into chunks depends on timing; joined, the
    stored notebook is the same on every run.
    """
    joined = []
    for out in outputs:
        previous = joined[-1] if joined else None
        if (out.output_type == "stream" and previous is not None
                and previous.output_type == "stream" and previous.name == out.name):
            previous.text += out.text
        else:
            joined.append(out)
    return joined


def execute(path: pathlib.Path) -> None:
    nb = nbformat.read(path, as_version=4)
    ep = ExecutePreprocessor(timeout=600, kernel_name="python3", record_timing=False)
    ep.preprocess(nb, {"metadata": {"path": str(path.parent)}})
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
            for out in cell.outputs:
                if out.output_type in ("display_data", "execute_result"):
                    out.metadata = {}
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(nb)
    nbformat.write(nb, path)
    print(f"executed {path.relative_to(ROOT)}")


def main(argv: list[str]) -> None:
    every = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "notebooks" / "exercises").glob("*.ipynb"))
    paths = [pathlib.Path(a).resolve() for a in argv] or every
    for path in paths:
        execute(path)


if __name__ == "__main__":
    main(sys.argv[1:])
