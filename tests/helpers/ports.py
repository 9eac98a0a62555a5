"""The one way the tests and benchmarks pick a TCP port: never a fixed number, so that two suites, a demo or a
server of someone else's on the machine cannot collide with a test."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nobody listens on now (bound and released; the OS hands out ephemeral ports round-robin, so a
    port just released is not handed out again soon, even to the other workers of a parallel run)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
