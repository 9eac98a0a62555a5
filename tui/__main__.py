"""Entry point: `bringup` == `python -m tui`."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from tui.cli import main as cli_main
    except KeyboardInterrupt:
        # Ctrl-C while the modules load (a second or more on a busy host): nothing was done yet, so no traceback
        # and nothing to undo; 130 as for any Ctrl-C
        print("interrupted (nothing was done)", file=sys.stderr)
        if "--json" in sys.argv[1:]:
            print('{"error": "interrupted (nothing was done)", "code": 130}')
        sys.exit(130)
    sys.exit(cli_main())


if __name__ == "__main__":
    main()
