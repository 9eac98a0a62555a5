"""Entry point: `bringup` == `python -m tui`."""

from __future__ import annotations

import gc
import sys


def main() -> None:
    # nothing that loading the modules creates is garbage to collect: the collector's passes meanwhile (a gen-0 pass
    # every 700 new objects) are a twentieth of the load's CPU, which every `bringup` command pays
    gc.disable()
    try:
        from tui.cli import main as cli_main
    except KeyboardInterrupt:
        # Ctrl-C while the modules load (a second or more on a busy host): nothing was done yet, so no traceback
        # and nothing to undo; 130 as for any Ctrl-C
        print("interrupted (nothing was done)", file=sys.stderr)
        if "--json" in sys.argv[1:]:
            print('{"error": "interrupted (nothing was done)", "code": 130}')
        sys.exit(130)
    # the modules just loaded (about 60,000 objects) live as long as the process: out of the collector's passes,
    # the full one every command makes before its event loop closes included (50-60 ms of CPU a command on a 2-core
    # VM, an eighth of a `bringup status`), as the console does for its own (tui/console/run.py)
    gc.freeze()
    gc.enable()
    sys.exit(cli_main())


if __name__ == "__main__":
    main()
