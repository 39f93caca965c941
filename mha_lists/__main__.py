"""``python -m mha_lists``: the whole trace of the running example (see mha_lists/tools/cli.py)."""

import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
