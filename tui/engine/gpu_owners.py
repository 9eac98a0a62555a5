"""Whose are the processes on a deployment's GPUs that are not its own run's: another deployment's configured on the
same host, or another user's. The release wait asks (tui/ops/release_wait.py): memory someone else holds is named
and not waited for, since stopping this deployment does not free it (issue 51: a start waited 10 minutes for
another deployment's server, then blamed "the running server" of a deployment that was stopped).

A deployment's processes are what its own manager says they are (its unit's main PID and its run's processes), asked
of every other deployment configured on the same machine, each within a few seconds; a fleet's engines add what
they know (the run before, while it releases). A process's user is its real UID (`/proc/PID/status`), told from the
user bringup reads the host as (`/proc/self/status`: bringup itself here, the SSH session's server there).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from tui.config.deployments import DeploymentConfig
from tui.config.parts import HostConfig
from tui.config.settings import Settings
from tui.guard.numbers import whole_or_none
from tui.guard.text import split_lines
from tui.lifecycle.release import Neighbours, Owner, OwnerKind
from tui.managers import ManagerError
from tui.managers.placement import Placed
from tui.transport import Transport, TransportError

if TYPE_CHECKING:
    from tui.managers import Manager

#: the other deployments' processes are asked again after this long (a release wait polls five times a second)
FRESH_S = 5.0
#: each other deployment is given this long to say its processes
ASK_EACH_S = 5.0
#: the highest UID taken from /proc (Linux's is 2**32 - 2)
MAX_UID = (1 << 32) - 1


def same_machine(a: HostConfig, b: HostConfig) -> bool:
    """Two host entries of the config on one machine (one PID space): both this machine, or one SSH destination."""
    return (a.is_local and b.is_local) or (bool(a.ssh) and a.ssh == b.ssh and a.ssh_config == b.ssh_config)


def _uid(status: bytes | None) -> int | None:
    """A process's real UID from its /proc/PID/status (`Uid:\treal\teffective...`); None when gone or unreadable."""
    if status is None:
        return None
    for line in split_lines(status.decode("utf-8", "replace")):
        if line.startswith("Uid:"):
            words = line.split()
            return whole_or_none(words[1], low=0, high=MAX_UID, text=True) if len(words) > 1 else None
    return None


def _users(passwd: bytes | None) -> dict[int, str]:
    """UID -> user name, from the host's /etc/passwd (users from a directory service are named by UID)."""
    out: dict[int, str] = {}
    for line in split_lines((passwd or b"").decode("utf-8", "replace")):
        parts = line.split(":")
        if len(parts) > 2 and (uid := whole_or_none(parts[2], low=0, high=MAX_UID, text=True)) is not None:
            out.setdefault(uid, parts[0])
    return out


class GpuOwners:
    """Asks, for one deployment, whose the other processes on its GPUs are (`who`); answers kept FRESH_S."""

    def __init__(self, settings: Settings, name: str, dep: DeploymentConfig, transport: Transport,
                 known: Callable[[], Neighbours]) -> None:
        self.settings = settings
        self.name = name
        self.dep = dep
        self.transport = transport
        #: what a fleet's engines know of the host's other deployments (none outside a fleet)
        self.known = known
        self._managers: dict[str, Manager] | None = None
        self._pids: dict[int, str] = {}
        self._pids_at = -FRESH_S
        self._me: int | None = None
        self._uids: dict[int, int | None] = {}
        self._uids_at = -FRESH_S
        self._names: dict[int, str] | None = None
        self.clock: Callable[[], float] = time.monotonic

    def _others(self) -> dict[str, Manager]:
        """The managers of the other deployments on the deployment's machine (built once, on this transport)."""
        if self._managers is None:
            from .build import make_manager

            self._managers = {}
            if not self.dep.multinode:  # a node's PIDs are keyed by node: another deployment's are not comparable
                here = self.settings.host(self.dep.host)
                for name, dep in self.settings.deployments.items():
                    if name == self.name or dep.multinode or not same_machine(here, self.settings.host(dep.host)):
                        continue
                    with contextlib.suppress(ValueError, TypeError, OSError, ManagerError):
                        mgr = make_manager(self.settings, name, dep, self.settings.host(dep.host), self.transport)
                        if not isinstance(mgr, Placed):  # a scheduler's run is on another node: not these PIDs
                            self._managers[name] = mgr
        return self._managers

    async def _ask(self, name: str, mgr: Manager) -> set[int]:
        try:
            async with asyncio.timeout(ASK_EACH_S):
                unit = await mgr.state()
                if not (unit.running or unit.lingering or unit.active == "deactivating"):
                    return set()
                pids = await mgr.pids(unit) or set()
                return pids | ({unit.main_pid} if unit.main_pid > 0 else set())
        except (TimeoutError, TransportError, ManagerError, OSError):
            return set()

    async def deployments(self) -> dict[int, str]:
        """PID -> the other deployment whose it is (asked at most every FRESH_S)."""
        if self.clock() - self._pids_at >= FRESH_S:
            others = self._others()
            answers = await asyncio.gather(*(self._ask(n, m) for n, m in others.items()))
            pids: dict[int, str] = {}
            for name, got in zip(others, answers, strict=True):
                for pid in got:
                    pids.setdefault(pid, name)
            self._pids, self._pids_at = pids, self.clock()
        return {**self.known().pids, **self._pids}

    async def _owners(self, pids: Collection[int]) -> tuple[int | None, dict[int, int]]:
        """The UID bringup reads the host as, and each process's UID (those gone or unreadable left out); a PID's
        kept FRESH_S (over SSH each file is a round trip, and the release wait polls five times a second)."""
        if self.clock() - self._uids_at >= FRESH_S:
            self._uids, self._uids_at = {}, self.clock()
        order = sorted(p for p in pids if p not in self._uids)
        if order or self._me is None:
            me_path = [] if self._me is not None else ["/proc/self/status"]
            try:
                got = await self.transport.read_files([*me_path, *(f"/proc/{p}/status" for p in order)])
            except (TransportError, OSError):
                return self._me, {}
            if me_path:
                self._me = _uid(got[0])
            for p, raw in zip(order, got[len(me_path):], strict=True):
                self._uids[p] = _uid(raw)
        return self._me, {p: uid for p in pids if (uid := self._uids.get(p)) is not None}

    async def _user(self, uid: int) -> str:
        if self._names is None:
            try:
                self._names = _users(await self.transport.read_file("/etc/passwd"))
            except (TransportError, OSError):
                self._names = {}
        return self._names.get(uid, f"uid {uid}")

    async def who(self, pids: Collection[int], users: bool) -> dict[int, Owner]:
        """Whose each of `pids` is, for those that are someone else's: another deployment's (by its manager's
        word), else, with `users`, another user's (a UID neither bringup's on the host nor root's: root's may be
        this deployment's own server). PIDs of no one known are left out: the release wait waits for them."""
        if not pids:
            return {}
        theirs = await self.deployments()
        out = {p: Owner(OwnerKind.DEPLOYMENT, theirs[p]) for p in pids if p in theirs}
        rest = [p for p in pids if p not in out]
        if users and rest:
            me, uids = await self._owners(rest)
            for p, uid in uids.items():
                if me is not None and uid not in (me, 0):
                    out[p] = Owner(OwnerKind.USER, await self._user(uid))
        return out
