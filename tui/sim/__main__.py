"""``python3 -m tui.sim ARGS``: run the simulated SGLang server (see server.py)."""

import sys

from .server import main

if __name__ == "__main__":
    sys.exit(main())
