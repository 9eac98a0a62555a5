"""Entry point: `bringup` == `python -m tui`."""

from __future__ import annotations

import sys


def main() -> None:
    from tui.cli import main as cli_main

    sys.exit(cli_main())


if __name__ == "__main__":
    main()
