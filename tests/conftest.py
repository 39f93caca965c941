"""Shared pytest setup.

Tests marked ``@pytest.mark.slow`` are the slow sweeps (each re-runs whole
notebooks): the README's test command, ``python -m pytest``, leaves them out
(pyproject's addopts), ``python -m pytest -m slow`` runs them, and so does .ci/run.
"""
from kernel_sockets import over_socket_files


def pytest_configure(config):
    """nbval's kernels talk over socket files, not TCP ports (kernel_sockets.py says why)."""
    try:
        import nbval.kernel
    except ImportError:  # no nbval, no notebooks to run
        return
    nbval.kernel.KernelManager = over_socket_files(nbval.kernel.KernelManager)
