"""What `docker inspect` (or `podman inspect`) says about a container, as the UnitState every manager reports, and
the container engine's error messages as the one line a user can act on.

Pure functions of the CLI's JSON and text, so the rules are tested on real outputs without a daemon. A run of a
container is its ID plus its `State.StartedAt`: a restart by the container's own restart policy gets a new
StartedAt, so it is a new invocation (its readiness must be proven again), never "still ready".
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Any

from tui.guard.numbers import real_or_none, whole_or_none
from tui.guard.text import split_lines
from tui.lifecycle.failures import OOM_KILLED
from tui.managers import ManagerError, PermanentManagerError
from tui.model import UnitState

#: exit statuses of a run that was stopped, not crashed: 0, and SIGTERM as a Python server without a handler
#: reports it (systemd counts SIGTERM as a clean end too)
CLEAN_EXITS = frozenset({0, 143})
#: the init process podman puts before the container's command with `--init` (inspect's Path)
INIT_PATH = "/run/podman-init"
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?")


def parse_time(text: str) -> float | None:
    """RFC 3339 with nanoseconds (Go's format) as epoch seconds; None for Go's zero time (never happened)."""
    m = _STAMP.match(text or "")
    if not m or text.startswith("0001-"):
        return None
    tz = m[3] or "Z"
    base = datetime.fromisoformat(m[1] + ("+00:00" if tz == "Z" else tz))
    frac = (real_or_none("0." + m[2], text=True) or 0.0) if m[2] else 0.0
    return base.astimezone(UTC).timestamp() + frac


def stamp_key(text: str) -> int | None:
    """One of `docker logs --timestamps`' stamps as exact nanoseconds since the epoch (a float loses the
    nanoseconds that tell two lines apart); None when it is no stamp."""
    m = _STAMP.match(text)
    if not m:
        return None
    # podman's log file keeps the offset of the host's time zone where conmon wrote it (docker's is always Z)
    tz = "+00:00" if m[3] in (None, "Z") else m[3]
    seconds = int(datetime.fromisoformat(m[1] + tz).timestamp())
    nanos = whole_or_none((m[2] or "0").ljust(9, "0")[:9], low=0, text=True)
    return None if nanos is None else seconds * 1_000_000_000 + nanos


def stamp_text(ns: int) -> str:
    """Nanoseconds since the epoch as the RFC 3339 stamp `logs --since` takes (docker and podman alike)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 1_000_000_000)) + f".{ns % 1_000_000_000:09d}Z"


def invocation_of(info: dict[str, Any]) -> str:
    """The run: the container's ID and the start of this run; "" for a container never started."""
    started = str(info.get("State", {}).get("StartedAt") or "")
    if parse_time(started) is None:
        return ""
    return f"{str(info.get('Id', ''))[:12]}@{started}"


def entrypoint_of(info: dict[str, Any]) -> list[str]:
    """The container's entrypoint, word by word."""
    cfg = info.get("Config") or {}
    entry = cfg.get("Entrypoint") or []
    if isinstance(entry, str):
        # podman 4 joins the entrypoint's words with spaces, which loses where one ends: the process it runs
        # (Path + Args, after podman's own init) still has them, ending with the command
        cmd = [str(a) for a in (cfg.get("Cmd") or [])]
        full = [str(info.get("Path") or ""), *[str(a) for a in (info.get("Args") or [])]]
        if full[:1] == [INIT_PATH]:
            full = full[2:] if full[1:2] == ["--"] else full[1:]
        entry = full[:len(full) - len(cmd)] if full[len(full) - len(cmd):] == cmd else entry.split()
    return [str(a) for a in entry]


def command_of(info: dict[str, Any]) -> list[str]:
    """The server's command line: the entrypoint and the command, as the container runs them."""
    return entrypoint_of(info) + [str(a) for a in ((info.get("Config") or {}).get("Cmd") or [])]


def unit_of(info: dict[str, Any], *, stop_asked: str = "") -> UnitState:
    """The container's state; `stop_asked` is the run bringup was asked to stop (its exit is then a clean one)."""
    st = info.get("State") or {}
    inv = invocation_of(info)
    argv = tuple(command_of(info))
    started, finished = parse_time(str(st.get("StartedAt") or "")), parse_time(str(st.get("FinishedAt") or ""))
    # docker's numbers, taken as every number from outside is (tui/guard/numbers.py): a bool or text is none
    restarts = whole_or_none(info.get("RestartCount"), low=0) or 0
    status = str(st.get("Status") or "")
    code = st.get("ExitCode")
    code = whole_or_none(code)
    if status == "restarting" or st.get("Restarting"):
        # the run has ended and the restart policy will start the next one: that one is a new invocation
        return UnitState(active="failed", sub="restarting", invocation=inv, exit_status=code, n_restarts=restarts,
                         started_at=started, exited_at=finished, argv=argv)
    if status in ("running", "paused") or (st.get("Running") and status != "removing"):
        health = str((st.get("Health") or st.get("Healthcheck") or {}).get("Status") or "")
        sub = "paused" if status == "paused" else health or "running"
        return UnitState(active="active", sub=sub, main_pid=whole_or_none(st.get("Pid"), low=0) or 0, invocation=inv,
                         n_restarts=restarts, started_at=started, argv=argv)
    if not inv:
        return UnitState(active="inactive", sub=status or "created", argv=argv)
    if st.get("OOMKilled"):
        return UnitState(active="failed", sub=OOM_KILLED, invocation=inv, exit_status=code, n_restarts=restarts,
                         started_at=started, exited_at=finished, argv=argv)
    clean = stop_asked == inv or code in CLEAN_EXITS
    return UnitState(active="inactive" if clean else "failed", sub="dead" if clean else "exited", invocation=inv,
                     exit_status=code, n_restarts=restarts, started_at=started, exited_at=finished, argv=argv)


def engine_error(engine: str, where: str, what: str, stderr: str, rc: int, *, name: str = "",
                 image: str = "", tool: str = "") -> ManagerError:
    """The one line for a failed `docker`/`podman` command: what is wrong and what fixes it, the engine's own words
    after it. Permanent when waiting cannot fix it (a missing image, a taken port, no NVIDIA runtime). `tool` is
    the program that ran when it is not the engine itself (`docker-compose`)."""
    err = " ".join(stderr.split())[:300] or f"exit {rc}"
    low = err.lower()
    # Compose v1 ends a traceback with "Error while fetching server API version: (... the socket's error)"
    v1 = "fetching server api version" in low
    if "permission denied" in low and ("socket" in low or "docker.sock" in low or v1):
        return PermanentManagerError(
            f"{where}: permission denied on the {engine} socket: add the user to the `{engine}` "
            f"group (usermod -aG {engine} USER, then log in again) ({err})")
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low or \
            "cannot connect to podman" in low or "couldn't connect to docker daemon" in low or v1:
        return ManagerError(f"{where}: the {engine} daemon is not running (start it: systemctl start {engine}) "
                            f"({err})")
    if "could not select device driver" in low or "unresolvable cdi devices" in low:
        fix = "generate its CDI spec (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml)" \
            if engine == "podman" else f"restart {engine}"
        return PermanentManagerError(
            f"{where}: the NVIDIA container runtime is missing: install nvidia-container-toolkit "
            f"and {fix}, or remove the GPU request ({err})")
    if "port is already allocated" in low or "address already in use" in low:
        port = re.search(r":(\d+)(?: failed|: bind)", err)
        which = f"port {port[1]}" if port else "a published port"
        return PermanentManagerError(f"{where}: {which} is already taken on the host: stop what holds it, or publish "
                                     f"another port ({err})")
    if ("unable to find image" in low or "no such image" in low or "pull access denied" in low
            or "manifest unknown" in low or "repository does not exist" in low
            or "image not known" in low or "did not resolve to an alias" in low
            or "initializing source docker://" in low):
        return PermanentManagerError(f"{where}: image {image or '?'} is not on the host and could not be pulled: "
                                     f"`{engine} load` or build it there ({err})")
    if "no such container" in low or "no such object" in low or "no container with name" in low:
        return PermanentManagerError(f"{where}: container {name or '?'} not found (`{engine} ps -a` lists what is "
                                     f"there) ({err})")
    if ("executable file not found" in low or "no such file or directory" in low) and "exec" in low:
        return PermanentManagerError(f"{where}: the container's command cannot be run ({err})")
    return ManagerError(f"{where}: `{tool or engine} {what}` failed: {err}")


#: what a failed pull says, as the reason in words: the registry cannot be reached, has no such image, or refuses
_PULL_REASONS = (
    ("not in its registry, or this host may not pull it", ("pull access denied",)),
    ("unauthorized", ("unauthorized", "authentication required", "requested access to the resource is denied",
                      "may require 'docker login'", "denied:")),
    ("not found in its registry", ("manifest unknown", "not found", "repository does not exist",
                                   "name unknown", "reading manifest")),
    ("its registry cannot be reached", ("connection refused", "no such host", "i/o timeout", "timeout",
                                        "network is unreachable", "tls", "http response to https client",
                                        "connection reset", "temporary failure in name resolution", "dial tcp",
                                        "pinging container registry")),
)


def pull_error(engine: str, where: str, image: str, stderr: str, rc: int) -> ManagerError:
    """The one line for an image that is not on the host and whose pull failed: the image, why in words (its
    registry cannot be reached, has no such image, refuses this host), the engine's own last error line. The
    engine's environment errors (its daemon down, its socket refused) are told as such."""
    env = engine_error(engine, where, "pull", stderr, rc, image=image)
    if "daemon is not running" in str(env) or "socket" in str(env):
        return env
    # podman prints a warning line per retry before its error: the last error line is the one
    lines = [x.strip() for x in split_lines(stderr) if x.strip()]
    last = next((x for x in reversed(lines) if x.lower().startswith(("error", "fatal"))), lines[-1] if lines else "")
    err = " ".join(last.split())[:300] or f"exit {rc}"
    low = err.lower()
    why = next((w for w, signs in _PULL_REASONS if any(x in low for x in signs)), "")
    return PermanentManagerError(
        f"{where}: image {image} is not on the host and could not be pulled"
        f"{': ' + why if why else ''}: `{engine} load` or build it there, or fix the image name "
        f"or registry access ({err})")
