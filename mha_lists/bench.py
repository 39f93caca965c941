"""``python -m mha_lists.bench``: the benchmark, by the name the project's charter gives it.

It lives with the other commands in tools/bench.py; ``python -m mha_lists.tools.bench`` is the same.
"""

import sys

from .tools.bench import main

if __name__ == "__main__":
    sys.exit(main())
