"""The `compose` manager: one service of a Compose project, its container watched like any other (docker.py).

The user's docker-compose.yml is never edited: a flag change is written as an override file next to it,
`docker-compose.bringup.yml` (the service's `command:` only), passed after the project's own files, and only that
service is recreated (`up -d --no-deps SERVICE`). Compose itself recreates the container, so everything else the
project says about it (GPU reservations, volumes, ports, networks) comes from the project, as it would by hand.
Compose v1 (`docker-compose`) is what these hosts have; `podman-compose` takes the same arguments. The project's
files and name are found as Compose finds them (its own override file by any of Compose's names; the name from `-p`,
COMPOSE_PROJECT_NAME in the environment or `.env`, the file's `name:`, else the directory), and the name is passed
with `-p`, so what bringup starts is what it watches.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from pathlib import PurePosixPath
from typing import Any

from tui.guard.text import split_lines
from tui.managers import ManagerError, PermanentManagerError, Report, unreported
from tui.managers.container_state import command_of, engine_error, entrypoint_of, invocation_of
from tui.managers.docker import DockerManager
from tui.model import UnitState
from tui.transport import Transport

OVERRIDE = "docker-compose.bringup.yml"
PROJECT_FILES = ("docker-compose.yml", "docker-compose.yaml", "compose.yml", "compose.yaml")
#: the project's own override files, Compose's names for them
OVERRIDE_FILES = ("docker-compose.override.yml", "docker-compose.override.yaml", "compose.override.yml",
                  "compose.override.yaml")
_NAME = re.compile(r"""^name:[ \t]*([^#\n]*?)[ \t]*(?:#.*)?$""", re.M)
_VERSION = re.compile(r"""^version:\s*['"]?([0-9.]+)['"]?\s*$""", re.M)
_SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _normal(name: str) -> str:
    """A project name as Compose makes one of any text: lower case, letters, digits, - and _ only."""
    return re.sub(r"[^-_a-z0-9]", "", name.lower())


def dotenv_value(text: str, key: str) -> str:
    """`key`'s value in a project's `.env` file (KEY=VALUE lines, `export ` allowed, quotes stripped); "" if unset."""
    value = ""
    for line in split_lines(text):
        k, sep, v = line.strip().removeprefix("export ").partition("=")
        if sep and k.strip() == key:
            v = v.strip()
            if v[:1] in ("'", '"') and v[-1:] == v[:1] and len(v) >= 2:
                v = v[1:-1]
            elif " #" in v:
                v = v[:v.index(" #")].rstrip()
            value = v
    return value


def top_level_name(text: str) -> str:
    """The compose file's top-level `name:` ("" when it has none, or one Compose would interpolate)."""
    m = _NAME.search(text)
    if not m:
        return ""
    v = m[1].strip()
    if v[:1] in ("'", '"') and v[-1:] == v[:1] and len(v) >= 2:
        v = v[1:-1]
    return "" if "$" in v else v


def project_name(directory: str, *, explicit: str = "", environ: str = "", dotenv: str = "",
                 compose_file: str = "") -> str:
    """The project's name as Compose decides it, first given first: an explicit one (`-p`), COMPOSE_PROJECT_NAME
    from the environment (`environ`), then from the project's `.env` (its text, `dotenv`), the compose file's
    top-level `name:` (its text, `compose_file`), and last the directory's name; normalised as Compose does."""
    for name in (explicit, environ, dotenv_value(dotenv, "COMPOSE_PROJECT_NAME"), top_level_name(compose_file)):
        if name and _normal(name):
            return _normal(name)
    return _normal(PurePosixPath(directory.rstrip("/")).name)


def override_files(main: str, present: Collection[str]) -> list[str]:
    """The project's own override file that Compose reads next to its main file, if there is one: the one named
    after the main file first (compose.yaml -> compose.override.yaml), then the others of Compose's names."""
    stem = main.rsplit(".", 1)[0]
    names = [f"{stem}.override.yml", f"{stem}.override.yaml", *OVERRIDE_FILES]
    return next(([n] for n in names if n in present), [])


def _explicit_project(compose: Sequence[str]) -> str:
    """The project name the configured Compose command gives itself (`-p NAME`, `--project-name[=]NAME`)."""
    for i, a in enumerate(compose):
        if a in ("-p", "--project-name") and i + 1 < len(compose):
            return compose[i + 1]
        if a.startswith("--project-name="):
            return a.split("=", 1)[1]
    return ""


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
                 compose: Sequence[str] = ("docker-compose",), container: str = "", project: str = "",
                 stop_timeout: float = 120.0) -> None:
        if not _SERVICE.match(service):
            raise PermanentManagerError(f"not a Compose service name: {service!r}")
        self.compose_dir = compose_dir.rstrip("/") or "/"
        self.service = service
        self.compose = list(compose)
        #: the project's name given by the configuration (`project`, or `-p` in the Compose command), else ""
        self._explicit = project or _explicit_project(self.compose)
        #: the project's name: the directory's until the first reading looks at what else can name it
        self.project = project_name(self.compose_dir, explicit=self._explicit)
        self._resolved = bool(self._explicit)
        #: the project's services, once they are known to include ours
        self._services: list[str] | None = None
        self._named = bool(container)
        super().__init__(transport, container or f"{self.project}_{service}_1", state_dir, engine=engine,
                         stop_timeout=stop_timeout)
        self.target = f"service {service} of {self.compose_dir}"

    # ------------------------------------------------------------------ the service's container

    async def _project(self) -> str:
        """The project's name as Compose decides it (project_name), looked up once."""
        if not self._resolved:
            main = await self._main()
            text = await self.transport.read_file(f"{self.compose_dir}/{main}") or b""
            dotenv = await self.transport.read_file(f"{self.compose_dir}/.env") or b""
            env = await self.transport.run(["printenv", "COMPOSE_PROJECT_NAME"], timeout=10)
            self.project = project_name(self.compose_dir, environ=env.text.strip() if env.rc == 0 else "",
                                        dotenv=dotenv.decode("utf-8", "replace"),
                                        compose_file=text.decode("utf-8", "replace"))
            self._resolved = True
        return self.project

    async def inspect(self) -> dict[str, Any] | None:
        if not self._named:
            # v1 names it project_service_1, v2 and podman-compose with dashes: the labels say which it is
            project = await self._project()
            text = await self._cli(["ps", "-a", "--filter", f"label=com.docker.compose.project={project}",
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
            raise PermanentManagerError(f"{self.transport.name}: service {self.service} of {self.compose_dir} has no "
                                        f"container yet")
        return info

    async def state(self) -> UnitState:
        info = await self.inspect()
        if info is None:
            await self._check_service()  # a project that is not there, or has no such service, says so
            return UnitState(active="inactive", sub="no container", argv=tuple(await self.read_argv()))
        return await super().state()

    async def _check_service(self) -> None:
        """The project has the service (`config --services`, asked until it is there)."""
        if self._services is not None:
            return
        services = (await self._compose(["config", "--services"], timeout=60)).split()
        if self.service not in services:
            raise PermanentManagerError(
                f"{self.transport.name}: the Compose project in {self.compose_dir} has no service "
                f"{self.service} (its services: {', '.join(services) or 'none'})")
        self._services = services

    # ------------------------------------------------------------------ the project's files

    async def _main(self) -> str:
        for name in PROJECT_FILES:
            if await self.transport.read_file(f"{self.compose_dir}/{name}") is not None:
                return name
        raise PermanentManagerError(
            f"{self.transport.name}: no docker-compose.yml (nor {', '.join(PROJECT_FILES[1:])}) in "
            f"{self.compose_dir}")

    async def _files(self) -> list[str]:
        """-f for the project's file, its own override if it has one (as Compose finds them), then ours."""
        main = await self._main()
        present = [n for n in OVERRIDE_FILES if await self.transport.read_file(f"{self.compose_dir}/{n}") is not None]
        ours = [OVERRIDE] if await self.transport.read_file(f"{self.compose_dir}/{OVERRIDE}") is not None else []
        files = [main, *override_files(main, present), *ours]
        return [a for n in files for a in ("-f", f"{self.compose_dir}/{n}")]

    @property
    def _program(self) -> str:
        """The Compose CLI's own words (`docker-compose`, `docker compose`), without its options."""
        words: list[str] = []
        for w in self.compose:
            if w.startswith("-"):
                break
            words.append(PurePosixPath(w).name if not words else w)
        return " ".join(words) or "docker-compose"

    async def _compose(self, args: Sequence[str], timeout: float = 120.0) -> str:
        # podman-compose has no --project-directory: it takes the first file's directory, the same one
        where = [] if PurePosixPath(self.compose[0]).name == "podman-compose" else ["--project-directory",
                                                                                     self.compose_dir]
        # the project's name, as this reads it: what bringup starts is what it watches
        name = [] if self._explicit else ["-p", await self._project()]
        argv = [*self.compose, *where, *name, *await self._files(), *args]
        res = await self.transport.run(argv, timeout=timeout)
        if res.rc != 0:
            lines = [x for x in split_lines(res.error_text or res.text) if x.strip()]
            if any(x.startswith("Traceback (most recent call last)") for x in lines):
                lines = lines[-1:]  # Compose v1's own failure: its last line says what it was
            err = " ".join(" ".join(lines).split())[:300]
            if "no such service" in err.lower():
                raise PermanentManagerError(f"{self.transport.name}: the Compose project in {self.compose_dir} has no "
                                            f"service {self.service} ({err})")
            raise engine_error(self.engine, self.transport.name, args[0], err, res.rc, name=self.service,
                               image="the service's image", tool=self._program)
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
        # 0600 (the transport's default): it holds the server's command line, and the compose tool that reads it
        # runs as the user bringup acts as
        await self.transport.write_file(f"{self.compose_dir}/{OVERRIDE}",
                                        override_text(self.service, cmd, ep, m[1] if m else "").encode())

    # ------------------------------------------------------------------ start / stop

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        info = await self.inspect()
        if info is not None and (info.get("State") or {}).get("Running"):
            raise ManagerError(f"{self.target} is already running; stop it first")
        if argv and (info is None or command_of(info) != list(argv)):
            await self._write_override(argv, info)
        await self._compose(["up", "-d", "--no-deps", self.service])
        self._info = None

    async def stop(self, report: Report = unreported) -> None:
        info = await self.inspect()
        if info is None or not (info.get("State") or {}).get("Running"):
            return
        await self._write_json("stop.json", {"invocation": invocation_of(info)})
        await self._compose(["stop", "-t", f"{self.stop_timeout:.0f}", self.service], timeout=self.stop_timeout + 60)
