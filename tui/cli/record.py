"""`bringup record DEPLOYMENT [RUN]`: one run's incident record, as a Markdown file a person pastes into a ticket
(`--json`: the same as one object, with the file's `path`). Read from the deployment's run history
(tui/engine/history.py), which every bringup watching it writes; nothing on the server's host is read or written."""

from __future__ import annotations

import argparse
import json
import sys

from tui.config.settings import Settings
from tui.engine.incident_file import write_record
from tui.exit_codes import ExitCode
from tui.guard.files import UnsafeLocation
from tui.lifecycle.incident import NoSuchRun

from .args import UsageError
from .report import error


async def cmd_record(settings: Settings, args: argparse.Namespace) -> int:
    name, dep = settings.deployment(args.deployment)
    try:
        path, d, text = write_record(settings.state_path(), name, args.run or "", args.out or "",
                                     note=lambda n: print(f"bringup: {n}", file=sys.stderr, flush=True), dep=dep)
    except NoSuchRun as e:
        return error(str(e), ExitCode.USAGE, args.json)
    except UnsafeLocation as e:  # already one line naming the place
        raise UsageError(f"record: {e}") from None
    except OSError as e:
        raise UsageError(f"record: {e.filename or args.out}: {e.strerror or e}") from None
    if args.json:
        print(json.dumps({**d, "path": None if path is None else str(path)}, default=str))
    elif path is None:
        print(text, end="")
    else:
        print(f"wrote {path}")
    return ExitCode.OK
