"""Loading the SSH transport in a fresh interpreter prints nothing, even with every warning an error: asyncssh names
cryptography's deprecated DSA types at import, and ten warnings before every command broke bringup's one-line errors
(the filter: tui/transport/__init__.py; its rules: tests/unit/test_transport_warnings.py)."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.wait import slack


def test_loading_the_ssh_transport_prints_nothing_even_with_warnings_as_errors() -> None:
    r = subprocess.run([sys.executable, "-W", "error", "-c", "import tui.transport.ssh"], capture_output=True,
                       text=True, timeout=slack(60))
    assert r.returncode == 0 and r.stderr == "", r.stderr
