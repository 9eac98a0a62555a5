"""The wait between stop and start: until the old run's GPU memory is released, proven by fresh readings.

No fixed sleep: a `sleep 8` was not enough for a 548 GB model, and every config of a sweep died of CUDA OOM
because the old process still held its memory. Readings that stop (a dropped link) are no proof of release, and
readings that never come (a wrong `nvidia_smi`, one that hangs or is not permitted) are none either: a user's
restart started at once on "cannot verify", 20 s before the old run's memory was released, and died of CUDA OOM.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence

from tui.errors import PermanentError
from tui.lifecycle.gpu_room import Room, StartNeed, free_beside, free_now, room_for
from tui.lifecycle.release import OtherHolder, Owner, OwnerKind, ReleaseStatus, describe_others, release_status
from tui.managers import ManagerError
from tui.model import GpuSnapshot, Step, StepStatus
from tui.ops.engine_view import EngineView
from tui.ops.errors import HeldByOthers, ReleaseUnverified, RestartError
from tui.ops.evidence import OVERRIDE, declared_without_gpus
from tui.ops.guard import LockGuard
from tui.transport import TransportError

#: how the risk of starting without GPU readings is accepted: named in every refusal and every unverified start
ACCEPT_RISK = ("--unverified-release-grace SECONDS (unverified_release_grace_s in the config) goes on without "
               f"readings that long after the old run's processes are gone, {OVERRIDE} as soon as they are")

__all__ = ["ACCEPT_RISK", "declared_without_gpus", "no_room_beside_others", "old_pids", "stop_progress",
           "wait_for_release"]


async def _old_run_gone(engine: EngineView) -> bool:
    """The manager's word that no process of the old run is left (a grace counts from then, never from before)."""
    try:
        unit = await engine.poll_unit()
    except (TransportError, ManagerError, OSError):
        return False
    return not unit.running and not unit.lingering and unit.active != "deactivating"


async def _whose(engine: EngineView, snap: GpuSnapshot, gpus: Sequence[int],
                 old: set[int]) -> tuple[set[int], dict[int, Owner]]:
    """The old run's processes, less those another deployment's manager names as its own (a snapshot's every process
    on the deployment's GPUs is taken as the old run's where its own are not known, and a neighbour on the same GPUs
    was waited for as this one's), and whose the others on its GPUs are: another deployment's, or, when nothing of
    this deployment's ran (`old` empty), another user's. Processes of no one known stay unnamed: waited for."""
    on = set(gpus)
    listed = {p.pid for p in snap.processes if p.gpu_index in on}
    if not listed:
        return old, {}
    ask = listed - (engine.run_pids or set()) - engine.previous_pids
    if not ask:
        return old, {}
    try:
        who = await engine.others_on_gpus(ask, users=not old)
    except (TransportError, ManagerError, OSError):
        return old, {}
    theirs = {p: o for p, o in who.items() if o.kind is OwnerKind.DEPLOYMENT or p not in old}
    return old - theirs.keys(), theirs


def _holding(st: ReleaseStatus, tolerance_mib: float) -> list[OtherHolder]:
    """The others' holdings worth naming (a bare CUDA context below the tolerance is not)."""
    return [o for o in st.others if o.mib > tolerance_mib]


def _no_room(engine: EngineView, others: Sequence[OtherHolder], names: Sequence[str], need: StartNeed,
             room: Room) -> str:
    """The refusal, in one line: whose memory it is, what the start needs and what is left, and how to go on."""
    fixes = [f"`bringup stop {o.owner.name}` frees its memory" if o.owner.kind is OwnerKind.DEPLOYMENT
             else f"user {o.owner.name}'s processes are theirs to stop" for o in others]
    if need.flag:
        fixes.append(f"a smaller {need.flag} (`--set {need.flag.lstrip('-')}=...`) needs less")
    return (f"not started: {describe_others(others, names)}, not {engine.name}'s; its start needs {need.words()}, "
            f"{room.words()} beside it; {'; '.join(dict.fromkeys(fixes))}")


async def no_room_beside_others(engine: EngineView, argv: Sequence[str], own: set[int]) -> str | None:
    """Before anything is changed: whether a start of `argv` cannot fit beside the memory another deployment or
    another user holds on the deployment's GPUs, whatever else is released first (its own run, processes of no one
    known). The refusal's line, or None (it fits, or nothing says it would not: no readings, no others, no need
    known). Stopping this deployment frees none of that memory: a restart went on to wait 10 minutes for it."""
    try:
        snap = await engine.fresh_gpus(max_age=1.5)
    except (TransportError, OSError):
        return None
    if snap is None or snap.error or not snap.gpus:
        return None
    gpus = engine.deployment_gpus(snap) or [g.index for g in snap.gpus]
    mine, theirs = await _whose(engine, snap, gpus, own)
    if not theirs:
        return None
    tolerance = engine.dep.release_tolerance_mib
    st = release_status(snap, gpus, mine, engine.baseline_mib, tolerance, others=theirs)
    others = _holding(st, tolerance)
    need = engine.start_need(argv, snap) if others else None
    if need is None:
        return None
    room = room_for(need, free_beside(snap, gpus, others), snap)
    return None if room.fits else f"{_no_room(engine, others, st.names, need, room)}; nothing changed"


def _unverified(timeout: float, why: str, purpose: str, host: str, gone: bool, permanent: bool = False) -> str:
    """The refusal, in one line: what could not be read, what was (not) done, and how to go on. A reading that
    cannot be had at all (`permanent`: the command cannot be run) is said at once, not after the timeout."""
    fix = (f"fix the GPU readings of {host} (its gpu_source, nvidia_smi), or accept the risk of a CUDA OOM: "
           f"{ACCEPT_RISK}")
    if not gone:
        fix = "the old run's processes are not gone either; " + fix
    done = ("the new run was NOT started, to avoid a CUDA OOM" if purpose == "start" else
            "its GPUs may still hold the old run's memory: a start now could hit a CUDA OOM")
    when = "(a permanent error: waiting will not fix it)" if permanent else f"in {timeout:g} s"
    return f"GPU memory release not verified: no GPU readings from {host} {when} ({why}); {done}; {fix}"


async def wait_for_release(engine: EngineView, old_pids: set[int], on_step: Callable[[Step], None],
                           timeout: float, baseline: dict[int, float] | None = None,
                           guard: LockGuard | None = None, *, purpose: str = "start",
                           without_evidence: bool = False, argv: Sequence[str] | None = None) -> GpuSnapshot | None:
    """Poll until the old run's memory is released; returns the snapshot that showed it (the new baseline).

    No readings is no release. A host that declares no GPU telemetry (`gpu_source = "none"`) has nothing to wait
    for (None, said as unverified). Any other host whose readings fail is waited on for them up to `timeout`, then
    refused (`ReleaseUnverified`) -- unless the deployment accepts the risk (`unverified_release_grace_s`, the
    CLI's `--unverified-release-grace`): then it goes on that many seconds after the old run's processes are gone,
    saying the release was NOT verified; `without_evidence` (the operator's `--without-gpu-evidence`) is a grace
    of 0 s where the deployment has none. A reading that cannot be had at all (the command cannot be run: missing,
    not executable) is refused at once, not waited on. `purpose` ("start" or "stop") words the refusal.

    Memory another deployment on the host or another user holds (`_whose`) is not waited for: it is named, and a
    start of `argv` goes on when what is left free is enough for it (`tui/lifecycle/gpu_room.py`), else it is
    refused at once (`HeldByOthers`) naming the holder. Processes no one is known to own are waited for, named."""
    gpus = engine.deployment_gpus()
    deadline = time.monotonic() + timeout
    shown = ""
    t0 = time.monotonic()
    host = engine.dep.host_label
    without = declared_without_gpus(engine)
    if without:
        on_step(Step("release", StepStatus.SKIPPED, f"GPU memory release not verified: {without} declares no GPU "
                     "telemetry (gpu_source = \"none\"), so there is nothing to wait for"))
        return None
    seen_gpus = engine.gpus is not None and bool(engine.gpus.gpus)
    grace = engine.dep.unverified_release_grace_s
    by = "the unverified_release_grace_s grace"
    if grace is None and without_evidence:
        grace, by = 0.0, f"{OVERRIDE}, as asked"
    gone_at: float | None = None  # when the old run's processes were seen gone: the grace counts from then
    said: set[str] = set()
    going_on = "starting" if purpose == "start" else "calling the stop done"
    polls = 0  # readings of the GPUs taken
    while True:
        if guard is not None:
            await guard.check(every=2.0)
        try:  # a fresh query each poll: stream samples and process lists lag
            snap: GpuSnapshot | None = await engine.fresh_gpus(max_age=0)
        except (TransportError, OSError) as e:
            snap = GpuSnapshot(at=time.time(), error=str(e), permanent=isinstance(e, PermanentError))
        if snap is None or snap.error or not snap.gpus:
            why = snap.error if snap is not None and snap.error else "no GPU telemetry"
            # no source at all (NVML asked for and missing), or a command that cannot be run: no wait will help
            permanent = snap is None or snap.permanent
            now = time.monotonic()
            if not seen_gpus:  # never a reading: no evidence of anything, least of all of a release
                if grace is not None and gone_at is None and await _old_run_gone(engine):
                    on_step(Step("release", StepStatus.RUNNING, f"no GPU readings ({why}); the old run's processes are "
                                 f"gone: {going_on} in {grace:g} s WITHOUT verifying the release ({by}), "
                                 "at the risk of a CUDA OOM"))
                    # counted from after the answer and its step, not from before asking: never shorter than said
                    gone_at = now = time.monotonic()
                    said.add(why)
                if gone_at is not None and grace is not None:
                    if now - gone_at >= grace:
                        on_step(Step("release", StepStatus.SKIPPED, "GPU memory release NOT verified (no GPU readings: "
                                     f"{why}); {going_on} after {by} ({grace:g} s "
                                     "since the old run's processes were gone), at the risk of a CUDA OOM"))
                        return None
                    await asyncio.sleep(max(0.05, min(0.5, grace - (now - gone_at))))
                    continue
                if now > deadline or (permanent and grace is None):
                    when = "(it cannot be read at all)" if permanent else f"in {timeout:g} s"
                    on_step(Step("release", StepStatus.FAILED, f"GPU memory release NOT verified: no GPU readings "
                                                               f"{when} ({why})"))
                    raise ReleaseUnverified(_unverified(timeout, why, purpose, host, gone=grace is None,
                                                        permanent=permanent and now <= deadline))
                if why not in said:  # once per distinct reason
                    on_step(Step("release", StepStatus.RUNNING,
                                 f"no GPU readings ({why}): waiting up to {timeout:g} s for "
                                 "them (no readings is no proof of release)" if grace is None else
                                 f"no GPU readings ({why}): waiting up to {timeout:g} s for them, or for the old "
                                 f"run's processes to go (then {grace:g} s of unverified release grace)"))
                    said.add(why)
                await asyncio.sleep(0.5)
                continue
            # telemetry that worked and is gone for a moment (a dropped link) is no proof of release: wait on,
            # unless its command cannot be run any more (no wait brings that back)
            if time.monotonic() > deadline or permanent:
                within = "" if permanent else f" within {timeout:g} s"
                on_step(Step("release", StepStatus.FAILED, f"GPU memory release not verified{within}: {why}"))
                raise RestartError(f"GPU memory release could not be verified{within} ({why}); "
                                   "not starting, to avoid a CUDA OOM")
            if shown != why:
                on_step(Step("release", StepStatus.RUNNING, f"GPU readings lost ({why}); waiting for them"))
                shown = why
            await asyncio.sleep(0.5)
            continue
        seen_gpus = True
        on = gpus or [g.index for g in snap.gpus]
        mine, theirs = await _whose(engine, snap, on, old_pids)
        tolerance = engine.dep.release_tolerance_mib
        st = release_status(snap, on, mine, baseline if baseline is not None else engine.baseline_mib,
                            tolerance, others=theirs)
        polls += 1
        if st.released:
            engine.previous_pids = set()  # released: no panel may still say the previous run holds memory
        # the panels show the very sample the step is about: a step and a panel never give two figures
        engine.observe_gpus(snap)
        if st.released:
            done = (f"GPU memory released after {time.monotonic() - t0:.1f} s" if old_pids or polls > 1 else
                    f"no GPU memory of {engine.name}'s to wait for")
            others = _holding(st, tolerance)
            if others:
                done += f"; not waited for: {describe_others(others, st.names)}, not {engine.name}'s"
                if purpose == "start" and argv is not None:
                    done += _beside(engine, argv, snap, on, others, st.names, on_step)
            on_step(Step("release", StepStatus.DONE, done))
            return snap
        desc = f"waiting for GPU memory: {st.describe()}"
        if desc != shown:
            on_step(Step("release", StepStatus.RUNNING, desc))
            shown = desc
        if time.monotonic() > deadline:
            on_step(Step("release", StepStatus.FAILED, f"not released after {timeout:g} s: {st.describe()}"))
            raise RestartError(f"GPU memory was not released within {timeout:g} s ({st.describe()}); "
                               "not starting, to avoid a CUDA OOM")
        await asyncio.sleep(0.2)


def _beside(engine: EngineView, argv: Sequence[str], snap: GpuSnapshot, gpus: Sequence[int],
            others: Sequence[OtherHolder], names: Sequence[str], on_step: Callable[[Step], None]) -> str:
    """Once this deployment's memory is released: whether its start fits in what the others leave free. The words
    that say so, or the refusal (`HeldByOthers`, its step said first)."""
    need = engine.start_need(argv, snap)
    if need is None:
        return ("; how much the start needs is not known (no ready run on record, no memory budget flag): "
                "starting beside it")
    room = room_for(need, free_now(snap, gpus), snap)
    if room.fits:
        return f"; {room.words()}, enough for the start's {need.words()}"
    line = _no_room(engine, others, names, need, room)
    on_step(Step("release", StepStatus.FAILED, line))
    raise HeldByOthers(line)


@contextlib.asynccontextmanager
async def stop_progress(engine: EngineView, old: set[int], on_step: Callable[[Step], None],
                        every: float = 1.0) -> AsyncIterator[None]:
    """While a stop is under way, what the old run still holds, once a second from fresh GPU readings ("stopping:
    30.0 GiB held on GPU 3 by PID 5127"): a tree whose ranks leave one by one takes a while to stop (the manager
    waits for every process), and which rank is the straggler is the thing to know then."""
    async def watch() -> None:
        shown = ""
        gpus = engine.deployment_gpus()
        while True:
            await asyncio.sleep(every)
            try:
                snap = await engine.fresh_gpus(max_age=every)
            except (TransportError, OSError):
                continue
            if snap is None or snap.error or not snap.gpus:
                continue
            on = gpus or [g.index for g in snap.gpus]
            mine, theirs = await _whose(engine, snap, on, old)  # a neighbour's processes are no straggler of ours
            st = release_status(snap, on, mine, engine.baseline_mib, engine.dep.release_tolerance_mib, others=theirs)
            engine.observe_gpus(snap)
            desc = "" if st.released else f"stopping: {st.describe()}"
            if desc and desc != shown:
                on_step(Step("stop", StepStatus.RUNNING, desc))
                shown = desc
    task = asyncio.create_task(watch(), name="bringup-stop-progress")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


def old_pids(engine: EngineView) -> set[int]:
    """The running server's processes, taken before it is stopped: the release wait waits for these to leave."""
    pids: set[int] = set()
    unit = engine.state.unit
    if unit is not None and unit.main_pid:
        pids.add(unit.main_pid)
    pids |= engine.run_pids or set()
    snap = engine.gpus
    if snap is not None and unit is not None and unit.running:
        gpus = set(engine.deployment_gpus())
        pids.update(p.pid for p in snap.processes if p.gpu_index in gpus)
    return pids
