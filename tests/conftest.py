"""Shared pytest setup: which tests are the slow sweeps.

The README's test command (``python -m pytest``) leaves them out, so it finishes
in a minute or two; ``python -m pytest -m slow`` runs them, and ``.ci/run`` does.
"""

import pytest

# Each of these re-runs whole notebooks (a kernel per notebook and setting).
SLOW_FILES = {"test_notebook_variants.py"}


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
