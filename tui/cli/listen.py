"""`--listen HOST:PORT` of `bringup exporter` and `bringup serve`: parsed, and a non-loopback address refused unless
the caller allows it (the exporter: `--allow-remote`; serve: with an access token, its own rule in cli/serve.py).

Both serve what names every deployment, host and run (the metrics; the console), so an address other programs on the
network could reach is a choice the user makes out loud, never a default or a typo.
"""

from __future__ import annotations

import ipaddress

from tui.guard.numbers import whole


class ListenError(ValueError):
    """A --listen that cannot be used as given: the message says why, in one line."""


def parse_listen(text: str, allow_remote: bool = False) -> tuple[str, int]:
    """HOST:PORT (an IPv6 address in brackets) -> (host, port). Anything but a loopback address is refused unless
    `allow_remote`: the metrics name every deployment, host and run, and the exporter has no authentication."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ListenError(f"--listen takes HOST:PORT, not {text!r}")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = whole(port_text, "--listen", text=True)  # digits only (tui/guard/numbers.py)
    except ValueError:
        raise ListenError(f"--listen: the port must be a number, not {port_text!r}") from None
    if not 0 < port < 65536:
        raise ListenError(f"--listen: port {port} is out of range (1-65535)")
    if not allow_remote and not is_loopback(host):
        raise ListenError(f"--listen {text}: refusing a non-loopback address, the metrics have no authentication "
                          "and name every deployment and run (pass --allow-remote to serve it anyway)")
    return host, port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: which address it binds to is not ours to know
        return False
