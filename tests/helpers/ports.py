"""The one way the tests and benchmarks pick a TCP port: never a fixed number, so that two suites, a demo or a
server of someone else's on the machine cannot collide with a test.

A port is picked below the kernel's ephemeral range, never in it: a port of that range that was free a moment ago
can be any outgoing connection's local port by the time the server binds it (a suite makes thousands of loopback
connections; CI saw a simulated server fail with "address already in use" on a port just picked that way). Below
it, only a listener takes a port, and each pytest-xdist worker picks from a slice of its own, starting at a random
place in it (another suite on the machine), each port checked free by binding it.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
from pathlib import Path

#: the lowest port picked: above the well-known and registered ports most services keep to
LOW = 15000
#: the highest, whatever the ephemeral range: the test hosts' and the servers' own defaults (30000 and up) stay clear
HIGH = 29000


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _slice() -> range:
    """This worker's ports."""
    high = min(HIGH, _ephemeral_low())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    index = int(worker) % count if worker.isdigit() else 0
    size = (high - LOW) // count
    return range(LOW + index * size, LOW + (index + 1) * size)


_PORTS = _slice()
_NEXT = itertools.count(random.randrange(len(_PORTS))) if len(_PORTS) >= 16 else None


def bindable(port: int) -> bool:
    """Whether a server could listen on `port` of 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port nobody listens on now, outside the ephemeral range, not handed out before by this process."""
    if _NEXT is not None:
        for _ in range(len(_PORTS)):
            port = _PORTS[next(_NEXT) % len(_PORTS)]
            if bindable(port):
                return port
    # a machine whose ephemeral range leaves no room below it: the kernel's pick
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
