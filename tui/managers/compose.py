"""The `compose` manager: one service of a Compose project, its container watched like any other (docker.py).

The user's docker-compose.yml is never edited: a flag change is written as an override file next to it,
`docker-compose.bringup.yml` (the service's `command:` only), passed after the project's own files, and only that
service is recreated (`up -d --no-deps SERVICE`). Compose itself recreates the container, so everything else the
project says about it (GPU reservations, volumes, ports, networks) comes from the project, as it would by hand.
Compose v1 (`docker-compose`) is what these hosts have; `podman-compose` takes the same arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from tui.managers import ManagerError, PermanentError
from tui.managers.container_state import command_of, engine_error, entrypoint_of, invocation_of
from tui.managers.docker import DockerManager
from tui.model import UnitState
from tui.transport import Transport

OVERRIDE = "docker-compose.bringup.yml"
PROJECT_FILES = ("docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml")
_VERSION = re.compile(r"""^version:\s*['"]?([0-9.]+)['"]?\s*$""", re.M)
_SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def project_name(directory: str) -> str:
    """Compose v1's default project name: the directory's name, lower case, letters, digits, - and _ only."""
    return re.sub(r"[^-_a-z0-9]", "", PurePosixPath(directory.rstrip("/")).name.lower())


def override_text(service: str, command: Sequence[str], entrypoint: Sequence[str] | None, version: str) -> str:
    """The override file: JSON values are valid YAML, and `$` is doubled so Compose interpolates nothing."""
    def q(v: str) -> str:
        return json.dumps(v.replace("$", "$$"))

    lines = ["# written by bringup: the server's flags for this service. Delete it to go back to the project's "
             "own command.", *([f"version: {q(version)}"] if version else []), "services:", f"  {q(service)}:"]
    if entrypoint is not None:
        lines.append(f"    entrypoint: [{', '.join(q(a) for a in entrypoint)}]")
    lines.append(f"    command: [{', '.join(q(a) for a in command)}]")
    return "\n".join(lines) + "\n"


class ComposeManager(DockerManager):
    kind = "compose"

    def __init__(self, transport: Transport, compose_dir: str, service: str, state_dir: str, *, engine: str = "docker",
                 compose: Sequence[str] = ("docker-compose",), container: str = "",
                 stop_timeout: float = 120.0) -> None:
        if not _SERVICE.match(service):
            raise PermanentError(f"not a Compose service name: {service!r}")
        self.compose_dir = compose_dir.rstrip("/") or "/"
        self.service = service
        self.project = project_name(self.compose_dir)
        self.compose = list(compose)
        self._named = bool(container)
        super().__init__(transport, container or f"{self.project}_{service}_1", state_dir, engine=engine,
                         stop_timeout=stop_timeout)
        self.target = f"service {service} of {self.compose_dir}"

    # ------------------------------------------------------------------ the service's container

    async def inspect(self) -> dict[str, Any] | None:
        if not self._named:
            # v1 names it project_service_1, v2 and podman-compose with dashes: the labels say which it is
            text = await self._cli(["ps", "-a", "--filter", f"label=com.docker.compose.project={self.project}",
                                    "--filter", f"label=com.docker.compose.service={self.service}",
                                    "--format", "{{.Names}}"], what="ps")
            names = [n for n in text.split() if "bringup-old" not in n]
            if not names:
                self._info = None
                return None
            self.container = sorted(names)[0]
        return await super().inspect()

    async def _container(self) -> dict[str, Any]:
        info = await self.inspect()
        if info is None:
            raise PermanentError(f"{self.transport.name}: service {self.service} of {self.compose_dir} has no "
                                 f"container yet")
        return info

    async def state(self) -> UnitState:
        info = await self.inspect()
        if info is None:
            await self._files()  # a project that is not there says so
            return UnitState(active="inactive", sub="no container", argv=tuple(await self.read_argv()))
        return await super().state()

    # ------------------------------------------------------------------ the project's files

    async def _files(self) -> list[str]:
        """-f for the project's file, its own override if it has one, then ours."""
        main = ""
        for name in PROJECT_FILES:
            if await self.transport.read_file(f"{self.compose_dir}/{name}") is not None:
                main = name
                break
        if not main:
            raise PermanentError(f"{self.transport.name}: no docker-compose.yml in {self.compose_dir}")
        files = [main] + [n for n in ("docker-compose.override.yml", OVERRIDE)
                          if await self.transport.read_file(f"{self.compose_dir}/{n}") is not None]
        return [a for n in files for a in ("-f", f"{self.compose_dir}/{n}")]

    async def _compose(self, args: Sequence[str], timeout: float = 120.0) -> str:
        # podman-compose has no --project-directory: it takes the first file's directory, the same one
        where = [] if PurePosixPath(self.compose[0]).name == "podman-compose" else ["--project-directory",
                                                                                     self.compose_dir]
        argv = [*self.compose, *where, *await self._files(), *args]
        res = await self.transport.run(argv, timeout=timeout)
        if res.rc != 0:
            err = " ".join((res.error_text or res.text).split())[:300]
            if "no such service" in err.lower():
                raise PermanentError(f"{self.transport.name}: service {self.service} not found in "
                                     f"{self.compose_dir} ({err})")
            raise engine_error(self.engine, self.transport.name, f"{self.compose[0]} {args[0]}", err, res.rc,
                               name=self.service, image="the service's image")
        return res.text

    async def _write_override(self, argv: Sequence[str], info: dict[str, Any] | None) -> None:
        entry = entrypoint_of(info) if info else []
        argv = list(argv)
        if argv[:len(entry)] == entry:
            ep, cmd = None, argv[len(entry):]
        else:
            ep, cmd = argv[:1], argv[1:]
        main = await self.transport.read_file((await self._files())[1])
        m = _VERSION.search((main or b"").decode("utf-8", "replace"))
        await self.transport.write_file(f"{self.compose_dir}/{OVERRIDE}",
                                        override_text(self.service, cmd, ep, m[1] if m else "").encode())

    # ------------------------------------------------------------------ start / stop

    async def start(self, argv: Sequence[str]) -> None:
        info = await self.inspect()
        if info is not None and (info.get("State") or {}).get("Running"):
            raise ManagerError(f"{self.target} is already running; stop it first")
        if argv and (info is None or command_of(info) != list(argv)):
            await self._write_override(argv, info)
        await self._compose(["up", "-d", "--no-deps", self.service])
        self._info = None

    async def stop(self) -> None:
        info = await self.inspect()
        if info is None or not (info.get("State") or {}).get("Running"):
            return
        await self._write_json("stop.json", {"invocation": invocation_of(info)})
        await self._compose(["stop", "-t", f"{self.stop_timeout:.0f}", self.service], timeout=self.stop_timeout + 60)
