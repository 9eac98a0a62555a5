"""The demo's port-clash advice names a port that is free now (issue 28): the port after a taken one is often taken
too (a second demo, a neighbour's server), and advice that fails the same way sends the user round in circles."""

from __future__ import annotations

import contextlib
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.ports import bindable, free_port
from tui.ops.demo import free_port_after


@contextlib.contextmanager
def listening_run(n: int) -> Iterator[int]:
    """`n` consecutive ports on 127.0.0.1, each with a listening socket held until the block ends; the first one's
    number. Tried again from another base where one of them is someone else's."""
    for _ in range(50):
        base = free_port()
        if base + n > 65535:
            continue
        with contextlib.ExitStack() as stack:
            try:
                for port in range(base, base + n):
                    s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                    s.bind(("127.0.0.1", port))
                    s.listen()
            except OSError:
                continue
            yield base
            return
    pytest.skip("no run of free ports on 127.0.0.1")


def test_the_suggestion_skips_taken_ports() -> None:
    with listening_run(3) as base:
        got = free_port_after(base)
        assert got is not None and got > base + 2 and bindable(got), (base, got)
        assert free_port_after(base, tries=2) is None  # only taken ones within reach: no port named


def test_demo_on_a_taken_port_suggests_a_free_one_not_the_next_taken_one(tmp_path: Path) -> None:
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with listening_run(2) as port:  # the demo's port and the one after it, both someone else's
        env = {**b.env, "BRINGUP_DEMO_PORT": str(port)}
        r = b.run("demo", "--headless", config=False, env=env, cwd=empty, timeout=30)
        assert r.rc == 1, r.describe()
        m = re.fullmatch(rf"bringup: port {port} on 127\.0\.0\.1 is taken by another program: run the demo on "
                         r"another port, e\.g\. BRINGUP_DEMO_PORT=(\d+) bringup demo", r.err.strip())
        assert m is not None, r.describe()
        suggested = int(m.group(1))
        assert suggested not in (port, port + 1) and bindable(suggested), (port, suggested)
