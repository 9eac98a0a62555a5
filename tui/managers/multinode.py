"""A deployment over several nodes, as one manager: a node manager (systemd or process) per host, head first.

Why one manager rather than an engine per node: the deployment has one phase, one lock and one restart, and the
engine, the restart protocol and the console already speak to one manager. What makes several nodes one run:

- The run is the head's invocation. A worker's run belongs to it once it is seen after the head's previous run
  (a new invocation of its own, or its first): until every worker's has, the deployment is `activating` and says
  which node it waits for. A bound worker that exits, or restarts by itself, fails the deployment at once with
  the node named: a head whose worker died hangs in its next collective until its watchdog fires, minutes later,
  and says nothing meanwhile.
- The log is every node's journal, each line tagged with its node (`lifecycle.lines.node_tag`), so a worker's
  fatal line is the deployment's, and the excerpt names where it was printed.
- Flags are edited once (the head's command line); each node's keeps its node-specific flags
  (`lifecycle.nodes.node_argv`). The lock is the head's; taking it first proves every node answers, so a node
  that cannot be reached stops a restart before anything is stopped.
- GPU readings and PIDs of node N are keyed apart from other nodes' (`lifecycle.nodes`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from tui.lifecycle.lines import node_tag
from tui.lifecycle.nodes import node_argv, pid_key
from tui.managers import AsyncLock, LogHistory, Manager, ManagerError, Report, unreported
from tui.model import LockInfo, LogLine, UnitState
from tui.transport import TransportError
from tui.words import plural

T = TypeVar("T")

#: how long the lock waits for each node to answer before a restart is refused
REACH_TIMEOUT_S = 15.0


@dataclass
class Node:
    name: str
    manager: Manager
    #: whether the deployment's flags are written to this node's command line
    flags: bool = True


def _named(name: str, e: Exception) -> Exception:
    """The same error, saying which node it came from (its kind and permanence kept)."""
    if isinstance(e, TransportError):
        return type(e)(f"node {name}: {e}", kind=e.kind)
    return type(e)(f"node {name}: {e}") if isinstance(e, ManagerError) else ManagerError(f"node {name}: {e}")


class MultiNodeManager:
    can_control = True
    sees_run = True

    def __init__(self, nodes: Sequence[Node], node_flags: Sequence[str]) -> None:
        self.nodes = list(nodes)
        self.node_flags = tuple(node_flags)
        head = self.nodes[0].manager
        self.kind = head.kind
        self.target = f"{head.target} on {plural(len(self.nodes), 'node')} ({', '.join(n.name for n in self.nodes)})"
        #: head invocation -> the worker invocations bound to that run ("" while not yet seen)
        self._bound: dict[str, list[str]] = {}
        self._head = ""  # the head invocation last seen
        #: every node's reading of the run last seen, head first: what follow() and pids() work from
        self._parts: dict[str, tuple[UnitState, ...]] = {}
        self._bound_changed = asyncio.Event()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    async def _each(self, fn: Callable[[Node], Awaitable[T]]) -> list[T]:
        """`fn` on every node at once; the first failure, named by its node, is raised once all have answered."""
        async def one(n: Node) -> T:
            try:
                return await fn(n)
            except (TransportError, ManagerError, OSError) as e:
                raise _named(n.name, e) from e
        results = await asyncio.gather(*(one(n) for n in self.nodes), return_exceptions=True)
        out: list[T] = []
        for r in results:
            if isinstance(r, BaseException):
                raise r
            out.append(r)
        return out

    # ------------------------------------------------------------------ the run

    async def state(self) -> UnitState:
        """Every node's state at once. A worker that does not answer while the head does is not the deployment's
        blindness: the head's state stands, the worker's last reading stands in for it (never a guess of a new
        one), and the state says the node is not answering. A head that does not answer, or a worker never yet
        read, is the deployment's error as before."""
        got = await asyncio.gather(*(n.manager.state() for n in self.nodes), return_exceptions=True)
        known = self._parts.get(self._head)
        parts: list[UnitState] = []
        silent: list[str] = []
        for i, (n, g) in enumerate(zip(self.nodes, got, strict=True)):
            if not isinstance(g, BaseException):
                parts.append(g)
                continue
            if not isinstance(g, (TransportError, ManagerError, OSError)):
                raise g
            if i == 0:
                raise _named(n.name, g) from g
            silent.append(f"node {n.name} not answering ({g})")
            if known is None or len(known) != len(self.nodes):
                parts.append(parts[0])  # a place holder only: the head's reading alone is returned below
                continue
            parts.append(known[i])
        if silent and (known is None or len(known) != len(self.nodes)):
            # never read before (a `bringup stop` run while the node is down): the head's run, as the head says,
            # and nothing bound or claimed of the silent node's
            return replace(parts[0], sub="; ".join([parts[0].sub, *silent]) if parts[0].sub else "; ".join(silent))
        unit = self.combine(parts)
        return replace(unit, sub="; ".join([unit.sub, *silent]) if unit.sub else "; ".join(silent)) if silent \
            else unit

    def combine(self, parts: Sequence[UnitState]) -> UnitState:
        """The deployment's state from every node's, head first (pure but for the bindings it keeps)."""
        head, workers = parts[0], parts[1:]
        inv = head.invocation
        if inv and inv not in self._bound:
            before = self._bound.get(self._head)
            # first sight: whatever the workers run now is this run's; after a run of the head's we saw, a worker's
            # run is this one's only when it is not the run it had then
            self._bound[inv] = [w.invocation if before is None or w.invocation != before[i] else ""
                                for i, w in enumerate(workers)]
            for old in [k for k in self._bound if k not in (inv, self._head)]:
                del self._bound[old]
            self._bound_changed.set()
        if inv:
            self._head = inv
        bound = self._bound.get(inv, [""] * len(workers))
        for i, w in enumerate(workers):
            if not bound[i] and w.invocation and (self._prev_of(inv, i) != w.invocation):
                bound[i] = w.invocation
                self._bound_changed.set()
        self._parts[inv] = tuple(parts)
        if len(self._parts) > 4:
            for k in list(self._parts)[:-4]:
                del self._parts[k]
        started = [head.started_at] + [w.started_at for i, w in enumerate(workers) if bound[i]]
        unit = replace(head, started_at=max((s for s in started if s is not None), default=None))
        if not head.running:
            others = [self.nodes[i + 1].name for i, w in enumerate(workers) if w.running]
            return replace(unit, lingering=bool(others), ended_on=self.nodes[0].name if inv else "",
                           sub=unit.sub + (f"; still running on {', '.join(others)}" if others else ""))
        for i, w in enumerate(workers):
            name = self.nodes[i + 1].name
            if bound[i] and (w.invocation != bound[i] or not w.running):
                why = (f"node {name} exited" + (f" (status {w.exit_status})" if w.exit_status is not None else "")
                       if w.invocation == bound[i] else f"node {name} restarted by itself")
                return replace(unit, active="failed", sub=why, exit_status=w.exit_status, lingering=True,
                               exited_at=w.exited_at or head.exited_at, ended_on=name)
        waiting = [self.nodes[i + 1].name for i in range(len(workers)) if not bound[i]]
        if waiting:
            return replace(unit, active="activating", sub=f"waiting for {', '.join(waiting)} to start")
        return unit

    def _prev_of(self, inv: str, i: int) -> str:
        """Worker i's run bound to the head's run before `inv` (a leftover: not `inv`'s)."""
        keys = list(self._bound)
        at = keys.index(inv) if inv in keys else len(keys)
        return self._bound[keys[at - 1]][i] if at > 0 else ""

    def _node_units(self, unit: UnitState) -> tuple[UnitState, ...] | None:
        return self._parts.get(unit.invocation)

    async def start(self, argv: Sequence[str], report: Report = unreported) -> None:
        """Head first (it hosts the rendezvous) with `argv`, then each worker with its own command line (written
        with the head's by write_argv)."""
        for i, n in enumerate(self.nodes):
            line = list(argv) if i == 0 else await n.manager.read_argv()
            report("start", f"{n.name}: starting" + (" (head)" if i == 0 else ""))
            try:
                await n.manager.start(line)
            except (TransportError, ManagerError, OSError) as e:
                raise _named(n.name, e) from e
            report("start", f"{n.name}: start asked")

    async def stop(self, report: Report = unreported) -> None:
        """Every node at once: a worker left running holds its GPUs and its end of the collectives. A node that
        cannot be reached does not keep the others running: they are stopped, and the error names it."""
        async def one(n: Node) -> None:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            report("stop", f"{n.name}: stopping")
            await n.manager.stop()
            report("stop", f"{n.name}: stopped in {loop.time() - t0:.1f} s")
        got = await asyncio.gather(*(one(n) for n in self.nodes), return_exceptions=True)
        failed = [(n, g) for n, g in zip(self.nodes, got, strict=True) if isinstance(g, BaseException)]
        if not failed:
            return
        n, first = failed[0]
        if not isinstance(first, (TransportError, ManagerError, OSError)):
            raise first
        done = [m.name for m, g in zip(self.nodes, got, strict=True) if not isinstance(g, BaseException)]
        err = _named(n.name, first)
        if done:  # say what was stopped: the error alone reads as if nothing was
            err.args = (f"stopped on {', '.join(done)}; {err.args[0]} (its run may still hold its GPUs)",)
        raise err from first

    async def follow(self, unit: UnitState) -> AsyncGenerator[LogLine, None]:
        """Every node's log of the run, merged as it arrives, each line tagged with its node; a worker whose run
        is bound later (started after the head) is followed from its first line once it is."""
        parts = self._node_units(unit)
        if parts is None:
            return
        queue: asyncio.Queue[LogLine | int] = asyncio.Queue()
        tasks: dict[int, asyncio.Task[None]] = {}

        async def pump(i: int, st: UnitState) -> None:
            tag = node_tag(self.nodes[i].name)
            try:
                async with contextlib.aclosing(self.nodes[i].manager.follow(st)) as lines:
                    async for line in lines:
                        queue.put_nowait(LogLine(line.at, tag + line.text, unit.invocation, line.cursor))
            finally:
                queue.put_nowait(i)

        def bind_new() -> None:
            now = self._node_units(unit) or parts
            bound = self._bound.get(unit.invocation, [])
            for i, st in enumerate(now):
                if i in tasks:
                    continue
                if i == 0 or (i - 1 < len(bound) and bound[i - 1] and st.invocation == bound[i - 1]):
                    tasks[i] = asyncio.create_task(pump(i, st), name=f"bringup-node-log-{self.nodes[i].name}")

        bind_new()
        ended: set[int] = set()
        try:
            while True:
                if 0 in ended and ended >= set(tasks):
                    return  # the head's log has ended, and every log followed with it
                self._bound_changed.clear()
                bind_new()
                getter = asyncio.ensure_future(queue.get())
                waker = asyncio.ensure_future(self._bound_changed.wait())
                done, _ = await asyncio.wait({getter, waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                if getter not in done:
                    getter.cancel()
                    continue
                item = getter.result()
                if isinstance(item, int):
                    ended.add(item)
                    continue
                yield item
        finally:
            for t in tasks.values():
                t.cancel()
            with contextlib.suppress(Exception):
                await asyncio.gather(*tasks.values(), return_exceptions=True)

    def log_source(self, invocation: str) -> str:
        head_mgr = self.nodes[0].manager
        head = head_mgr.log_source(invocation) if isinstance(head_mgr, LogHistory) else ""
        return f"{head} (head); each node's own log on its host" if head else ""

    async def read_log(self, invocation: str) -> list[LogLine]:
        """An ended run's log on every node, merged by time (a run that came and went between two readings)."""
        parts = self._parts.get(invocation)
        if parts is None:
            return []
        out: list[LogLine] = []
        for i, st in enumerate(parts):
            mgr = self.nodes[i].manager
            if not isinstance(mgr, LogHistory) or not st.invocation:
                continue
            tag = node_tag(self.nodes[i].name)
            with contextlib.suppress(TransportError, ManagerError, OSError):
                lines = await mgr.read_log(st.invocation)
                out += [LogLine(ln.at, tag + ln.text, invocation, ln.cursor) for ln in lines]
        out.sort(key=lambda ln: ln.at)
        return out

    async def pids(self, unit: UnitState) -> set[int] | None:
        parts = self._node_units(unit)
        if parts is None:
            return None
        out: set[int] = set()
        for i, st in enumerate(parts):
            got = await self.nodes[i].manager.pids(st)
            if got is None:
                return None
            out |= {pid_key(i, p) for p in got}
        return out

    # ------------------------------------------------------------------ flags

    async def read_argv(self) -> list[str]:
        return await self.nodes[0].manager.read_argv()

    async def write_argv(self, argv: Sequence[str], report: Report = unreported) -> None:
        """The head's line as given; each worker's with the same edit (node_argv). Every node's new line is
        computed before any is written: a node that cannot be read leaves every node as it was."""
        lines = await self._each(lambda n: n.manager.read_argv())
        before = lines[0]
        for i, (n, own) in enumerate(zip(self.nodes, lines, strict=True)):
            if not n.flags and i:
                continue
            try:
                await n.manager.write_argv(list(argv) if i == 0 else node_argv(before, argv, own, self.node_flags))
            except (TransportError, ManagerError, OSError) as e:
                written = [m.name for m in self.nodes[:i] if m.flags or m is self.nodes[0]]
                err = _named(n.name, e)
                if written:  # the nodes disagree now: say which have the new line (a retry writes every node again)
                    err.args = (f"{err.args[0]}; the new flags are written on {', '.join(written)} only",)
                raise err from e
            report("flags", f"{n.name}: flags written")

    async def read_saved_argv(self, which: str) -> list[str] | None:
        return await self.nodes[0].manager.read_saved_argv(which)

    async def save_argv(self, which: str, argv: Sequence[str]) -> None:
        await self.nodes[0].manager.save_argv(which, argv)

    def lock(self, purpose: str, change: str = "") -> AsyncLock:
        # a stop stops what it can reach (a worker host that is down must not keep the head's GPUs held); a
        # restart or start needs every node first
        return NodesLock(self, self.nodes[0].manager.lock(purpose, change), reach_all=not purpose.startswith("stop"))


class NodesLock:
    """The head's lock, taken only once every node has answered: a restart that could reach the head but not a
    worker would stop the head and leave the worker's run holding its GPUs."""

    def __init__(self, mgr: MultiNodeManager, head: AsyncLock, *, reach_all: bool = True) -> None:
        self.mgr, self.head, self.reach_all = mgr, head, reach_all

    async def __aenter__(self) -> LockInfo:
        info = await self.head.__aenter__()
        if not self.reach_all:
            return info
        try:
            async with asyncio.timeout(REACH_TIMEOUT_S):
                await self.mgr._each(lambda n: n.manager.state())
        except BaseException as e:
            await self.head.__aexit__(None, None, None)
            if isinstance(e, TimeoutError):
                raise ManagerError(f"a node did not answer within {REACH_TIMEOUT_S:g} s: nothing was stopped") from e
            if isinstance(e, TransportError):
                raise type(e)(f"{e}: nothing was stopped", kind=e.kind) from e
            if isinstance(e, ManagerError):
                raise ManagerError(f"{e}: nothing was stopped") from e
            raise
        return info

    async def __aexit__(self, *exc: object) -> None:
        await self.head.__aexit__(*exc)

    async def still_held(self) -> bool:
        return await self.head.still_held()

    async def retake(self) -> LockInfo:
        return await self.head.retake()

    async def holder(self) -> LockInfo | None:
        return await self.head.holder()

    async def note(self, step: str) -> None:
        await self.head.note(step)
