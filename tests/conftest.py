"""Shared pytest setup.

Tests marked ``@pytest.mark.slow`` are the slow sweeps (each re-runs whole
notebooks): the README's test command, ``python -m pytest``, leaves them out
(pyproject's addopts), ``python -m pytest -m slow`` runs them, and so does .ci/run.
"""
