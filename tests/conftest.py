"""Shared pytest setup.

Tests marked ``@pytest.mark.slow`` are the slow sweeps (each re-runs whole
notebooks): the README's test command, ``python -m pytest``, leaves them out
(pyproject's addopts), ``python -m pytest -m slow`` runs them, and so does .ci/run.

Every Jupyter kernel the tests start talks over socket files of its own, never TCP ports
(kernel_sockets.py says why); each test process removes its folder of them when it ends.
"""
from kernel_sockets import over_socket_files, remove_folder


def pytest_configure(config):
    """nbval's kernels talk over socket files, not TCP ports (kernel_sockets.py says why)."""
    try:
        import nbval.kernel
    except ImportError:  # no nbval, no notebooks to run
        return
    nbval.kernel.KernelManager = over_socket_files(nbval.kernel.KernelManager)


def pytest_unconfigure(config):
    """This process's kernel socket folder goes (an xdist worker ends without atexit hooks)."""
    remove_folder()
