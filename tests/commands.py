"""A command's main(argv) run in-process, its output caught: for the tests of the commands that train."""

from contextlib import redirect_stderr, redirect_stdout
import io


def run_main(main, argv):
    """(exit code, stdout, stderr) of ``main(argv)``; an argparse error's SystemExit gives its code."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code
    return code, out.getvalue(), err.getvalue()
