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
- The log: `logs --timestamps --follow --since`, both streams; a dropped stream resumes from the last stamp, the
  lines of that stamp already delivered skipped, so nothing is lost or repeated. A run's log read back (`read_log`)
  is bounded (log_window.py): its first lines and its last (`--tail`), each read within its window
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
from typing import Any

from tui.errors import PermanentError
from tui.guard.files import UnsafeLocation, private_dir, write_private
from tui.guard.text import split_lines
from tui.managers import AsyncLock, ManagerError, PermanentManagerError, Report, unreported
from tui.managers.container_create import create_options, env_to_file, split_command, unsupported
from tui.managers.container_state import (
    command_of,
    engine_error,
    invocation_of,
    parse_time,
    pull_error,
    stamp_key,
    stamp_text,
    unit_of,
)
from tui.managers.file_lock import FileLock
from tui.managers.log_window import HEAD_BYTES, TAIL_BYTES, Window, join
from tui.managers.pids import pids_in
from tui.managers.remote_lock import RemoteLock
from tui.model import LogLine, UnitState
from tui.transport import Transport, TransportError
from tui.transport.capped import Keep, read_capped
from tui.transport.remote_dir import private_dir as remote_private_dir

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: `sh -c` with the command as its arguments: the container's stderr joins its stdout on the one stream a
#: transport reads (over SSH a pty merges them already); no user text is in the script itself
_BOTH_STREAMS = ["sh", "-c", 'exec "$@" 2>&1', "bringup-logs"]
#: one of the two streams alone (podman: see _joined)
_ONE_STREAM = {"stdout": ["sh", "-c", 'exec "$@" 2>/dev/null', "bringup-logs"],
               "stderr": ["sh", "-c", 'exec "$@" 2>&1 >/dev/null', "bringup-logs"]}
#: a stamp as podman 4 prints it before each piece of a line (always nine digits)
_PIECE_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}(?:Z|[+-]\d\d:\d\d)) ")
#: how long a pull may take: a server image is tens of GB
PULL_TIMEOUT_S = 3600.0
#: how far before the newest line a resumed log starts: further than stderr ever lags stdout in the CLI's output
RESUME_MARGIN_NS = 5_000_000_000
#: the fewest and most lines `logs --tail` asks for when a run's log is read back longer than its head (the engines
#: count a tail in lines only): twice as many as TAIL_BYTES holds at the head's mean line length (`tail_lines`), of
#: which the last TAIL_BYTES are kept (log_window.py)
TAIL_LINES_MIN = 1024
TAIL_LINES_MAX = 262_144
#: how long podman's whole log may take to read through for its tail (read_log says why): bounded in memory, not in
#: time
PODMAN_TAIL_TIMEOUT_S = 600.0


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

    def _since(self, unit: UnitState) -> str:
        """Where this run's log begins: after the previous run of the same container ended (inspect shows that
        end while the new run lives), else the container's whole log (a new container has no older lines)."""
        info = self._info
        if info is None or invocation_of(info) != unit.invocation or not unit.running:
            return ""
        state = info.get("State") or {}
        finished = str(state.get("FinishedAt") or "")
        if self.engine == "podman" and parse_time(finished) is not None:
            # conmon stamps a line when it reads it, after the previous run's FinishedAt for its last lines: this
            # run's start is the floor then (a line of this run is read, so stamped, after its process started)
            started = str(state.get("StartedAt") or "")
            if parse_time(started) is not None and (stamp_key(started) or 0) > (stamp_key(finished) or 0):
                return started
        return finished

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """This run's lines from its first on, then live, both streams; ends when the run has ended.

        The engine's CLI does not keep stdout and stderr in order with each other (a stderr line can arrive after
        later stdout lines), so a resume after a drop starts RESUME_MARGIN_NS before the newest stamp seen and
        skips, stamp by stamp, the lines already delivered: none lost, none twice.

        podman keeps a line that reached it in pieces as pieces, each printed with its own stamp and only the
        last with a newline, in the order of its log file: a piece of stdout can be followed by a line of stderr
        before the rest of it. So for podman each stream is followed on its own, where a line's pieces are
        consecutive, and joined (_joined)."""
        if self._info is None or invocation_of(self._info) != unit.invocation:
            await self.inspect()
        if self.engine != "podman":
            async with contextlib.aclosing(self._follow(unit, _BOTH_STREAMS)) as lines:
                async for line in lines:
                    yield line
            return
        queue: asyncio.Queue[LogLine | None] = asyncio.Queue(maxsize=1000)

        async def pump(which: list[str]) -> None:
            try:
                async with contextlib.aclosing(self._follow(unit, which)) as lines:
                    async for line in lines:
                        await queue.put(line)
            finally:
                await queue.put(None)

        tasks = [asyncio.create_task(pump(w)) for w in _ONE_STREAM.values()]
        try:
            ended = 0
            while ended < len(tasks):
                item = await queue.get()
                if item is None:
                    ended += 1
                else:
                    yield item
            for t in tasks:
                await t  # a stream that failed says so here
        finally:
            for t in tasks:
                t.cancel()
            # each pump's stream is closed (its command reaped) before this one's close returns
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _follow(self, unit: UnitState, streams: list[str]) -> AsyncGenerator[LogLine, None]:
        since = self._since(unit)
        floor = stamp_key(since) if parse_time(since) is not None else None
        delivered: dict[int, int] = {}  # stamp -> lines of that stamp delivered
        newest = 0
        at = 0.0
        backoff = 0.5
        while True:
            argv = [self.engine, "logs", "--timestamps", "--follow"]
            start = max(newest - RESUME_MARGIN_NS, floor or 0) if newest else floor
            if start:
                argv += ["--since", stamp_text(start)]
            again: dict[int, int] = {}  # stamp -> lines of that stamp read on this stream
            delivering = False  # whether the stamped line that the current pieces continue was delivered
            try:
                async with contextlib.aclosing(self.transport.stream([*streams, *argv, self.container])) as raws:
                    async for raw in raws:
                        stamp, _, text = raw.partition(" ")
                        if self.engine == "podman":
                            text = _joined(stamp, text)
                        key = stamp_key(stamp)
                        if key is None:
                            # a piece after a carriage return (a progress bar) continues its stamped line; before any
                            # stamped line it is the engine's own words (no such container...): the state says those
                            if delivering:
                                yield LogLine(at=at, text=raw, invocation=unit.invocation)
                            continue
                        delivering = False
                        if floor is not None and key <= floor:
                            continue  # the previous run's last lines
                        n = again[key] = again.get(key, 0) + 1
                        if n <= delivered.get(key, 0):
                            continue  # delivered before the stream dropped
                        delivered[key] = n
                        newest = max(newest, key)
                        if len(delivered) > 20000:  # only the margin's stamps can come again
                            delivered = {k: v for k, v in delivered.items() if k >= newest - 2 * RESUME_MARGIN_NS}
                            again = {k: v for k, v in again.items() if k in delivered}
                        delivering = True
                        at = key / 1e9
                        yield LogLine(at=at, text=text, invocation=unit.invocation)
                        backoff = 0.5
            except TransportError:
                pass
            # `logs --follow` ends with the run, or when its stream drops: which of the two, the container says
            try:
                now = await self.inspect()
            except (ManagerError, TransportError):
                now = self._info
            if now is None or invocation_of(now) != unit.invocation or not (now.get("State") or {}).get("Running"):
                return
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    def log_source(self, invocation: str) -> str:
        return f"`{self.engine} logs {self.container}` on {self.transport.name}"

    async def read_log(self, invocation: str) -> list[LogLine]:
        """The log of a run that ended before it was followed (only the container's latest run can be told), bounded
        (log_window.py): its first lines (`logs --since` its start, ended at the head's window), and unless those
        were all of it, its last (`logs --tail`), never the whole log."""
        info = self._info if self._info is not None else await self.inspect()
        if info is None or invocation_of(info) != invocation:
            return []
        st = info.get("State") or {}
        # a second's margin before the start: the engine stamps StartedAt after the process may have printed
        begin = (parse_time(str(st.get("StartedAt") or "")) or 0.0) - 1.0
        argv = [self.engine, "logs", "--timestamps"]
        if begin > 0:
            argv += ["--since", stamp_text(int(begin * 1e9))]
        # no --until FinishedAt: both engines stamp a line when they read it from the pipe, so the last lines of a
        # run killed right after writing them (SGLang's fatal line, then its SIGKILL of the tree) can be stamped
        # after the exit; a stopped container's run is the last in its log anyway
        # podman: each stream on its own, where a line's stamped pieces are consecutive (follow says why)
        streams = list(_ONE_STREAM.values()) if self.engine == "podman" else [_BOTH_STREAMS]
        out: list[LogLine] = []
        for which in streams:
            head = await self._read_window([*which, *argv, self.container], begin, invocation, Keep.FIRST)
            tail = None
            if head.cut and self.engine == "podman":
                # podman's `--tail` counts the pieces conmon logged a line in, and prints them apart, out of order:
                # lines are lost. Its tail is the whole log read through, of which the last TAIL_BYTES are kept
                tail = await self._read_window([*which, *argv, self.container], begin, invocation, Keep.LAST,
                                               timeout=PODMAN_TAIL_TIMEOUT_S)
            elif head.cut:
                n = tail_lines(head)
                tail = await self._read_window([*which, *argv, "--tail", str(n), self.container], begin,
                                               invocation, Keep.LAST, asked=n)
            out += join(head, tail, invocation, self.log_source(invocation))
        return sorted(out, key=lambda x: x.at)  # stable: a line's pieces stay in order

    async def _read_window(self, argv: list[str], begin: float, invocation: str, keep: Keep, *, asked: int = 0,
                           timeout: float = 60.0) -> Window:
        """One end of the run's log on one stream: its first HEAD_BYTES (Keep.FIRST) or, of the lines `argv` prints
        (the `asked` last ones with `--tail`), the last TAIL_BYTES (Keep.LAST)."""
        got = await read_capped(self.transport, argv, limit=HEAD_BYTES if keep is Keep.FIRST else TAIL_BYTES,
                                keep=keep, timeout=timeout)
        raws = [_podman_line(raw) for raw in got.lines] if self.engine == "podman" else got.lines
        lines = [LogLine(at=p[0], text=p[1], invocation=invocation) for p in _stamped(raws)
                 if p is not None and p[0] >= begin]
        # `--tail N` that printed N lines may have had more before them
        return Window(lines, got.cut or (asked > 0 and len(got.lines) >= asked))

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


def _joined(stamp: str, text: str) -> str:
    """A podman line whose later pieces each carry a stamp of their own (`ab<stamp> cd`), as the line it was.

    A stamp counts as a piece's only when it is no earlier than the line's and within a minute of it: a server
    printing nanosecond RFC 3339 stamps of its own then loses only those that fall in that minute, after a word."""
    first = stamp_key(stamp)
    if first is None or "T" not in text:
        return text
    out: list[str] = []
    at = 0
    for m in _PIECE_STAMP.finditer(text):
        key = stamp_key(m[1])
        if m.start() > 0 and key is not None and first <= key <= first + 60_000_000_000:
            out.append(text[at:m.start()])
            at = m.end()
    return "".join(out) + text[at:] if out else text


def tail_lines(head: Window) -> int:
    """How many lines `logs --tail` asks for: twice what TAIL_BYTES holds at the head's mean line length, so that the
    tail is about its window when the run's lines are like its first ones (the last TAIL_BYTES of them are kept
    whatever their length), within TAIL_LINES_MIN..TAIL_LINES_MAX."""
    chars = sum(len(x.text) + 1 for x in head.lines)
    mean = chars / len(head.lines) if head.lines else 64.0
    return max(TAIL_LINES_MIN, min(TAIL_LINES_MAX, int(2 * TAIL_BYTES / max(mean, 1.0))))


def _image_id(ref: str) -> str:
    """An image ID as both engines can compare it (docker prefixes `sha256:`, podman does not)."""
    return ref.removeprefix("sha256:")


def _podman_line(raw: str) -> str:
    stamp, sep, text = raw.partition(" ")
    return f"{stamp}{sep}{_joined(stamp, text)}"


def _stamped(lines: Sequence[str]) -> list[tuple[float, str] | None]:
    """`docker logs --timestamps` lines as (time, text); a piece after a carriage return keeps its line's time."""
    out: list[tuple[float, str] | None] = []
    at: float | None = None
    for raw in lines:
        for piece_no, piece in enumerate(raw.split("\r")):
            stamp, _, text = piece.partition(" ")
            t = parse_time(stamp) if piece_no == 0 and stamp_key(stamp) is not None else None
            if t is not None:
                at = t
                out.append((t, text))
            elif at is not None:
                out.append((at, piece))
    return out
