"""A command's main(argv) run in-process, its output caught: for the tests of the commands that train,
and for the many bad-argument cases of every command (a process each would cost a second of the quick run
per ten cases; each command's file keeps one case that starts the real `python -m` process)."""

from contextlib import redirect_stderr, redirect_stdout
import io
import subprocess


def run_main(main, argv):
    """(exit code, stdout, stderr) of ``main(argv)``; an argparse error's SystemExit gives its code."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as done:
            code = done.code
    return code, out.getvalue(), err.getvalue()


def completed(main, argv):
    """run_main's result in subprocess.run's shape, so a test reads .returncode, .stdout and .stderr either way."""
    code, out, err = run_main(main, list(argv))
    return subprocess.CompletedProcess(list(argv), code, out, err)
