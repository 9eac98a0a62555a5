"""The `docker` manager: a container by name, driven with the `docker` (or `podman`) CLI on its host.

- State from `inspect` (container_state.py); a run is the container's ID plus its StartedAt, so a restart by the
  container's restart policy is a new run.
- The server's flags are the container's command (entrypoint + command). A change is written as the next command
  (`argv.json`, for the container it was written against); the start that follows recreates the container with
  everything else it was made with (container_create.py) and the new command, from the same image (by its ID when
  its tag has moved since); what it cannot carry (an anonymous volume's data) is told as a step. The previous
  command is kept.
- A container that does not exist yet is created from `image`, pulled first when it is not on the host (a pull
  that fails is one line: the image and why).
- The log (container_log.py): `logs --timestamps --follow --since`, both streams; a dropped stream resumes from the
  last stamp, the lines of that stamp already delivered skipped, so nothing is lost or repeated. A run's log read
  back (`read_log`) is bounded (log_window.py): its first lines and its last (`--tail`), each read within its window
  (tui/transport/capped.py), never the whole log.
- GPU attribution: the container's processes as host PIDs (`docker top`; podman's `hpid`), which is what the
  driver reports, not the container's own PID namespace.
- Bringup's own records (next/previous/last-ready command, the stop asked, the lock) live in a state directory on
  the container's host, reached through the same transport, local or SSH; every command is an argv list.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncGenerator, Sequence
from functools import partial
from typing import Any

from tui.errors import PermanentError
from tui.guard.files import UnsafeLocation, private_dir, write_private
from tui.guard.text import split_lines
from tui.managers import AsyncLock, ManagerError, PermanentManagerError, Report, unreported
from tui.managers.container_create import create_options, env_to_file, split_command, unsupported
from tui.managers.container_log import follow_log, log_start, read_log_back
from tui.managers.container_state import (
    command_of,
    engine_error,
    invocation_of,
    parse_time,
    pull_error,
    unit_of,
)
from tui.managers.file_lock import FileLock
from tui.managers.pids import pids_in
from tui.managers.remote_lock import RemoteLock
from tui.model import LogLine, UnitState
from tui.transport import Transport, TransportError
from tui.transport.remote_dir import private_dir as remote_private_dir

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: how long a pull may take: a server image is tens of GB
PULL_TIMEOUT_S = 3600.0


class DockerManager:
    kind = "docker"
    can_control = True
    sees_run = True

    def __init__(self, transport: Transport, container: str, state_dir: str, *, engine: str = "docker",
                 image: str = "", run_args: Sequence[str] = (), command: Sequence[str] = (),
                 stop_timeout: float = 120.0) -> None:
        if not NAME.match(container):
            raise PermanentManagerError(f"not a container name: {container!r} (letters, digits, _ . -)")
        self.transport = transport
        self.container = container
        self.state_dir = state_dir.rstrip("/")
        self.engine = engine
        self.image = image
        self.run_args = list(run_args)
        self.command = list(command)
        self.stop_timeout = stop_timeout
        self.target = f"container {container}"
        self._dir_made = False
        #: the last inspect record of the container (None: there is none)
        self._info: dict[str, Any] | None = None
        #: what the last recreate could not carry over
        self._caveats: list[str] = []

    # ------------------------------------------------------------------ the engine's CLI

    @property
    def where(self) -> str:
        return f"{self.transport.name}: {self.engine}"

    async def _cli(self, args: Sequence[str], timeout: float = 30.0, *, what: str = "", input: bytes | None = None
                   ) -> str:
        res = await self.transport.run([self.engine, *args], timeout=timeout, input=input)
        if res.rc != 0:
            raise engine_error(self.engine, self.transport.name, what or args[0], res.error_text or res.text,
                               res.rc, name=self.container, image=self.image)
        return res.text

    async def inspect(self) -> dict[str, Any] | None:
        """The container's inspect record, or None when there is no such container."""
        res = await self.transport.run([self.engine, "container", "inspect", self.container], timeout=30)
        if res.rc != 0:
            err = engine_error(self.engine, self.transport.name, "inspect", res.error_text, res.rc,
                               name=self.container)
            if isinstance(err, PermanentManagerError) and "not found" in str(err):
                self._info = None
                return None
            raise err
        try:
            data = json.loads(res.text)
        except ValueError:
            raise ManagerError(f"{self.where} inspect printed no JSON: {res.text[:200]}") from None
        self._info = data[0] if isinstance(data, list) and data else None
        return self._info

    async def _container(self) -> dict[str, Any]:
        info = await self.inspect()
        if info is None:
            raise PermanentManagerError(
                f"{self.transport.name}: container {self.container} not found (`{self.engine} ps "
                "-a` lists what is there; set image and command to let bringup create it)")
        return info

    # ------------------------------------------------------------------ bringup's records on the host

    def _p(self, name: str) -> str:
        return f"{self.state_dir}/{name}"

    async def _ensure_dir(self) -> None:
        """The state directory, 0700 (made so; one of ours that others could enter is tightened): its records and lock
        are the operator's. Through the guarded places, never `mkdir -p` and `chmod` (which follow a link another
        user planted at the name, so that root's chmod reaches /etc): here `guard/files.private_dir`, on another
        host `transport/remote_dir.py`'s helper; a place another user could have planted in is refused."""
        if self._dir_made:
            return
        try:
            if self.transport.name == "local":
                await asyncio.to_thread(private_dir, self.state_dir)
            else:
                await remote_private_dir(self.transport, self.state_dir)
        except UnsafeLocation as e:
            raise PermanentManagerError(f"{self.transport.name}: {e}") from None
        except PermanentError as e:
            raise PermanentManagerError(str(e)) from None
        except TransportError as e:
            raise ManagerError(f"{self.transport.name}: cannot create {self.state_dir}: {e}") from None
        self._dir_made = True

    async def _read_json(self, name: str) -> Any:
        data = await self.transport.read_file(self._p(name))
        try:
            return json.loads(data) if data else None
        except ValueError:
            return None

    async def _write_json(self, name: str, value: Any) -> None:
        await self._ensure_dir()
        if self.transport.name == "local":  # created 0600 (the transport's write takes the umask's 0644)
            try:
                await asyncio.to_thread(write_private, self._p(name), json.dumps(value).encode())
            except OSError as e:
                raise ManagerError(f"cannot write {self._p(name)}: {e.strerror or e}") from None
            return
        await self.transport.write_file(self._p(name), json.dumps(value).encode())

    # ------------------------------------------------------------------ state

    async def state(self) -> UnitState:
        info = await self.inspect()
        if info is None:
            if not self.image:
                await self._container()  # says so, permanently: nothing can create it
            return UnitState(active="inactive", sub="no container", argv=tuple(await self.read_argv()))
        stop = await self._read_json("stop.json")
        asked = str(stop.get("invocation") or "") if isinstance(stop, dict) else ""
        return unit_of(info, stop_asked=asked)

    async def pids(self, unit: UnitState) -> set[int] | None:
        """Host PIDs of the container's processes: what the GPU driver reports, whatever namespace they are in."""
        if not unit.running:
            return set()
        args = ["top", self.container, "hpid"] if self.engine == "podman" else ["top", self.container, "-eo", "pid"]
        try:
            text = await self._cli(args, timeout=10)
        except ManagerError:
            return None
        # the first word of each row, taken as a pid only if it is one (managers/pids.py: not `²`, not 30 digits)
        pids = pids_in(w for line in split_lines(text)[1:] for w in line.split()[:1])
        return pids | ({unit.main_pid} if unit.main_pid > 0 else set())

    # ------------------------------------------------------------------ start / stop

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        if not argv:
            raise ManagerError("refusing to start a container with an empty command")
        info = await self.inspect()
        if info is None:
            await self._create_new(argv, report)
        elif (info.get("State") or {}).get("Running"):
            raise ManagerError(f"{self.target} is already running; stop it first")
        elif command_of(info) != list(argv):
            await self._recreate(info, argv, report)
        await self._cli(["start", self.container], timeout=60)
        self._info = None

    async def _image_config(self, image: str, *, pull: bool = False, report: Report = unreported
                            ) -> dict[str, Any]:
        """`image inspect` of the image; one not on the host is pulled first when `pull`, and a pull that fails
        says so in one line (the image, why)."""
        res = await self.transport.run([self.engine, "image", "inspect", image], timeout=30)
        if res.rc != 0:
            err = engine_error(self.engine, self.transport.name, "image inspect", res.error_text or res.text, res.rc,
                               image=image)
            if not (pull and "is not on the host" in str(err)):
                raise err
            report("start", f"pulling image {image} ({self.engine} pull on {self.transport.name})")
            t0 = time.monotonic()
            pulled = await self.transport.run([self.engine, "pull", image], timeout=PULL_TIMEOUT_S)
            if pulled.rc != 0:
                raise pull_error(self.engine, self.transport.name, image, pulled.error_text or pulled.text, pulled.rc)
            report("start", f"pulled image {image} in {time.monotonic() - t0:.0f} s")
            return await self._image_config(image)
        try:
            data = json.loads(res.text)
        except ValueError:
            data = None
        return data[0] if isinstance(data, list) and data else {}

    async def _create_new(self, argv: Sequence[str], report: Report) -> None:
        if not self.image:
            await self._container()
        image = await self._image_config(self.image, pull=True, report=report)
        entry = (image.get("Config") or {}).get("Entrypoint") or []
        ep, cmd = split_command(argv, entry)
        await self._create(["--name", self.container, *self.run_args, *ep, self.image, *cmd],
                           len(self.run_args) + 2)

    async def _create(self, args: Sequence[str], n_options: int) -> None:
        """`create` with the first `n_options` of `args` (the options, before the image) rid of their `-e KEY=VALUE`s,
        which go in on stdin as `--env-file /dev/stdin` (container_create.env_to_file: never in argv)."""
        options, env = env_to_file(args[:n_options])
        if env:
            options += ["--env-file", "/dev/stdin"]
        await self._cli(["create", *options, *args[n_options:]], timeout=120, what="create",
                        input=env.encode() if env else None)

    async def _image_of(self, info: dict[str, Any], report: Report) -> tuple[str, dict[str, Any]]:
        """The image to make the container again from, and its `image inspect`: its tag while the tag still names
        the container's own image, else that image by ID (a tag moved by a pull or a build since must not change
        the image under a flag change)."""
        tag = str((info.get("Config") or {}).get("Image") or "")
        own = str(info.get("Image") or "")
        try:
            icfg = await self._image_config(tag) if tag else {}
        except PermanentManagerError:
            icfg = {}  # the tag is gone: the container's image is still there, by its ID
        if not own or _image_id(str(icfg.get("Id") or "")) == _image_id(own):
            return tag, icfg
        report("start", f"the tag {tag} now names another image than the container's: recreating it from its "
                            f"own image {_image_id(own)[:12]} (recreate it by hand to move to the new one)")
        return own, await self._image_config(own)

    async def _recreate(self, info: dict[str, Any], argv: Sequence[str], report: Report) -> None:
        """The container again, with the new command: the old one is renamed aside until the new one exists, and
        put back if it cannot be made."""
        image, icfg = await self._image_of(info, report)
        opts, more_networks = create_options(info, icfg, self.engine)
        ep, cmd = split_command(argv, (icfg.get("Config") or {}).get("Entrypoint") or [])
        self._caveats = unsupported(info)
        for what in self._caveats:
            report("start", f"not carried over by the recreate: the {what} (a new, empty one takes its place; "
                                "a named volume keeps its data)")
        aside = f"{self.container}-bringup-old-{str(info.get('Id', ''))[:8]}"
        await self._cli(["rename", self.container, aside])
        try:
            await self._create([*opts, *ep, image, *cmd], len(opts) + len(ep))
            for net in more_networks:
                await self._cli(["network", "connect", net, self.container])
        except BaseException:
            await self.transport.run([self.engine, "rm", "-f", self.container], timeout=30)
            await self.transport.run([self.engine, "rename", aside, self.container], timeout=30)
            raise
        await self._cli(["rm", aside])

    def recreate_caveats(self) -> list[str]:
        """What the last recreate could not carry over (anonymous volumes); each was told as it happened."""
        return list(self._caveats)

    async def stop(self, report: Report = unreported) -> None:
        info = await self.inspect()
        if info is None or not (info.get("State") or {}).get("Running"):
            return
        await self._write_json("stop.json", {"invocation": invocation_of(info), "at": time.time()})
        await self._cli(["stop", "-t", f"{self.stop_timeout:.0f}", self.container], timeout=self.stop_timeout + 30)

    # ------------------------------------------------------------------ logs

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """This run's lines from its first on, then live, both streams; ends when the run has ended (container_log.py:
        a dropped stream resumed with no line lost or repeated, podman's pieces of a line joined)."""
        if self._info is None or invocation_of(self._info) != unit.invocation:
            await self.inspect()
        since = log_start(self._info, unit, self.engine)
        async with contextlib.aclosing(follow_log(self, unit, since, partial(self._run_ended, unit))) as lines:
            async for line in lines:
                yield line

    async def _run_ended(self, unit: UnitState) -> bool:
        """`logs --follow` ends with the run, or when its stream drops: which of the two, the container says (its last
        inspect record when it cannot be asked now)."""
        try:
            now = await self.inspect()
        except (ManagerError, TransportError):
            now = self._info
        return now is None or invocation_of(now) != unit.invocation or not (now.get("State") or {}).get("Running")

    def log_source(self, invocation: str) -> str:
        return f"`{self.engine} logs {self.container}` on {self.transport.name}"

    async def read_log(self, invocation: str) -> list[LogLine]:
        """The log of a run that ended before it was followed (only the container's latest run can be told), bounded:
        its first lines and, unless those were all of it, its last, never the whole log (container_log.py)."""
        info = self._info if self._info is not None else await self.inspect()
        if info is None or invocation_of(info) != invocation:
            return []
        st = info.get("State") or {}
        # a second's margin before the start: the engine stamps StartedAt after the process may have printed
        begin = (parse_time(str(st.get("StartedAt") or "")) or 0.0) - 1.0
        return await read_log_back(self, invocation, begin, self.log_source(invocation))

    # ------------------------------------------------------------------ flags

    async def read_argv(self) -> list[str]:
        """The command the next start uses: one written for the container that still exists, else its own."""
        info = self._info if self._info is not None else await self.inspect()
        pending = await self._read_json("argv.json")
        cid = str(info.get("Id", "")) if info else ""
        if isinstance(pending, dict) and pending.get("container", "") == cid and isinstance(pending.get("argv"), list):
            return [str(a) for a in pending["argv"]]
        if info is not None:
            return command_of(info)
        return list(self.command)

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        if not argv:
            raise ManagerError("refusing to write an empty command")
        info = await self.inspect()
        await self.save_argv("previous", await self.read_argv())
        await self._write_json("argv.json", {"argv": list(argv), "container": str(info.get("Id", "")) if info else ""})

    async def read_saved_argv(self, which: str) -> list[str] | None:
        saved = await self._read_json(f"argv.{which}.json")
        return [str(a) for a in saved] if isinstance(saved, list) else None

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self._write_json(f"argv.{which}.json", list(argv))

    def lock(self, purpose: str, change: str = "") -> AsyncLock:
        if self.transport.name == "local":
            return FileLock(self._p("restart.lock"), purpose, change)
        return _DirLock(self, purpose, change)


class _DirLock(RemoteLock):
    """The remote lock, in a state directory made first (flock(1) cannot open a file in a missing one)."""

    def __init__(self, manager: DockerManager, purpose: str, change: str) -> None:
        super().__init__(manager.transport, manager._p("restart.lock"), purpose, change)
        self._manager = manager

    async def __aenter__(self) -> Any:
        await self._manager._ensure_dir()
        return await super().__aenter__()

    async def holder(self) -> Any:
        await self._manager._ensure_dir()
        return await super().holder()


def _image_id(ref: str) -> str:
    """An image ID as both engines can compare it (docker prefixes `sha256:`, podman does not)."""
    return ref.removeprefix("sha256:")
