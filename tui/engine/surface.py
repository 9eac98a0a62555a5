"""What code above the engine reads of it, and asks it: the protocols (ops/engine_view.py: `EngineView`,
ops/wait.py: `WaitEngine`), `bringup status` (engine/settle.py), the console (console/port.py) and the exporter.

`EngineSurface` is the part of the `Engine` (core.py) they see: each member is the state of the part that keeps it
(the listeners, the unit follower, the GPU tracker, the throughput tracker), or a plain function of the engine's
state (view.py), so nothing here keeps state of its own. The flags a run is offered and the words for its release
are here too: read from the preset for the release the run said (else the one learnt before the engine followed it).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from tui.config.deployments import DeploymentConfig
from tui.guard.redact import BOOK
from tui.lifecycle.flags import current_values
from tui.lifecycle.gpu_room import StartNeed, start_need
from tui.lifecycle.presets import FlagSpec, Preset
from tui.lifecycle.presets.facts import resolve
from tui.lifecycle.reducer import LifecycleState
from tui.lifecycle.release import Owner
from tui.managers import LockInfo, Manager
from tui.managers.lock_record import other_holder
from tui.model import Failure, GpuSnapshot, Phase, ProbeResult, ThroughputSample, UnitState

from . import view
from .gpu_owners import GpuOwners
from .gpus import GpuTracker
from .history import RunRecorder
from .listeners import Listeners
from .throughput import MetricsState, ThroughputTracker
from .unit import UnitFollower
from .updates import Update


class EngineSurface:
    """The engine's members that code above it reads (core.py's `Engine` is one); the attributes below are the
    engine's parts they read from."""

    name: str
    preset: Preset
    flag_specs: list[FlagSpec]
    _extra_specs: list[FlagSpec]
    learned_release: str | None
    history: RunRecorder
    state: LifecycleState
    manager: Manager
    unit_follower: UnitFollower
    gpu: GpuTracker
    owners: GpuOwners
    tput: ThroughputTracker
    listening: tuple[str, int] | None
    last_probe: ProbeResult | None
    listeners: Listeners

    @property
    def dep(self) -> DeploymentConfig:
        raise NotImplementedError  # the engine's

    # ------------------------------------------------------------------ listening

    def subscribe(self, fn: Callable[[Update], None]) -> None:
        self.listeners.subscribe(fn)

    def unsubscribe(self, fn: Callable[[Update], None]) -> None:
        """A console that shows another of the fleet's engines stops listening to this one, which keeps running."""
        self.listeners.unsubscribe(fn)

    async def wait_changed(self, timeout: float) -> None:
        await self.listeners.wait_changed(timeout)

    @property
    def pictures(self) -> bool:
        """Whether the listeners are told the whole picture every second (`PictureTaken`)."""
        return self.listeners.pictures

    @pictures.setter
    def pictures(self, on: bool) -> None:
        self.listeners.pictures = on

    # ------------------------------------------------------------------ the flags and the release

    def known_release(self) -> tuple[str | None, str]:
        """The release the flags are read with, and whose word it is: the run's own ("run"), the running server's
        learnt before this engine followed it ("learnt"), else the one the deployment's last run said ("last run":
        a stopped server says nothing, and the newest known release's flags refused the flags of the 0.5.18 it
        will start again, while the console, `flags` and `--set` each guessed on their own; issue 51); (None, "")
        when none was ever said."""
        if self.state.release is not None:
            return self.state.release.version, "run"
        if self.learned_release is not None:
            return self.learned_release, "learnt"
        last = next((r.release for r in reversed(self.history.store.runs()) if r.release), None)
        return (last, "last run") if last is not None else (None, "")

    @property
    def offered_flags(self) -> list[FlagSpec]:
        """The flags this release takes (`known_release`), with its own choices (the newest release's when none was
        ever said): what the flags dialog lists and `--set` validates, so no edit makes the server refuse its
        command line."""
        return [*self.preset.for_version(self.known_release()[0]).flags, *self._extra_specs]

    def editable_flags(self, values: Mapping[str, str | None]) -> list[FlagSpec]:
        """The offered flags, and any flag the run's argv gives that its release does not offer (set by hand, or for
        an older release): listed too, so it can be seen and removed."""
        offered = self.offered_flags
        names = {f.name for f in offered}
        return [*offered, *(f for f in self.flag_specs if f.name in values and f.name not in names)]

    def release_words(self) -> str:
        """`SGLang 0.5.23`, `SGLang 0.5.18 (its last run's release)`, or `SGLang (release not said yet; flags of
        0.5.23, the newest known)`."""
        name = self.preset.display_name or self.preset.name
        version, source = self.known_release()
        if version is not None:
            return f"{name} {version}" + (" (its last run's release)" if source == "last run" else "")
        facts = resolve(self.preset.name, None).facts
        return f"{name} (release not said yet{'; flags of ' + facts.version + ', the newest known' if facts else ''})"

    # ------------------------------------------------------------------ the run, its lock and its failure

    @property
    def unit_seen_at(self) -> float | None:
        return self.unit_follower.seen_at

    @property
    def other_holder(self) -> LockInfo | None:
        return self.unit_follower.other_holder

    async def holder_now(self) -> LockInfo | None:
        """Another bringup's restart, start or stop on this deployment, read at once (not at the follower's pace):
        a console asks before it opens a restart dialog, which the lock would refuse only after the operator said
        yes."""
        return await other_holder(self.manager.lock("watch"))

    @property
    def permanent_error(self) -> Exception | None:
        return self.unit_follower.permanent_error

    async def poll_unit(self) -> UnitState:
        return await self.unit_follower.poll()

    async def replay_history(self, invocation: str, ended: bool = False) -> None:
        await self.unit_follower.replay_history(invocation, ended)

    async def refresh_pids(self, unit: UnitState) -> None:
        await self.gpu.refresh_pids(self.manager, unit, settled=self.state.phase == Phase.READY)

    async def argv(self) -> list[str]:
        argv = await self.manager.read_argv()
        BOOK.learn_argv(argv)  # its secrets hidden in whatever shows them after (tui/guard/redact.py)
        return argv

    @property
    def configured_command(self) -> list[str] | None:
        """The config's command line, where the manager keeps flags apart from it (tui/ops/config_drift.py)."""
        return self.dep.configured_command

    async def flag_values(self) -> dict[str, str | None]:
        return current_values(await self.argv(), self.flag_specs)

    def named(self, failure: Failure | None) -> Failure | None:
        return view.named(failure, self.name)

    def endpoint_mismatch(self) -> str:
        return view.endpoint_mismatch(self.listening, self.state.invocation, self.dep.endpoint)

    def stall_note(self) -> str:
        return view.stall_note(self.state)

    def current_probe(self) -> ProbeResult | None:
        return view.current_probe(self.last_probe, self.state)

    @property
    def gpus(self) -> GpuSnapshot | None:
        return self.gpu.latest

    @gpus.setter
    def gpus(self, snap: GpuSnapshot | None) -> None:  # a one-shot reading (`bringup status`)
        self.gpu.latest = snap

    @property
    def run_pids(self) -> set[int] | None:
        return self.gpu.run_pids

    @property
    def previous_pids(self) -> set[int]:
        return self.gpu.previous_pids

    @previous_pids.setter
    def previous_pids(self, pids: set[int]) -> None:  # released: no panel may still say the old run holds memory
        self.gpu.previous_pids = pids

    @property
    def baseline_mib(self) -> dict[int, float]:
        return self.gpu.baseline_mib

    def save_baseline(self, snap: GpuSnapshot) -> None:
        self.gpu.save_baseline(snap)

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None:
        return await self.gpu.fresh(max_age)

    def deployment_gpus(self, snap: GpuSnapshot | None = None) -> list[int]:
        return self.gpu.deployment_gpus(snap)

    async def others_on_gpus(self, pids: Collection[int], users: bool) -> dict[int, Owner]:
        """Whose `pids` are, of those that are another deployment's or (with `users`) another user's."""
        return await self.owners.who(pids, users)

    def start_need(self, argv: Sequence[str], snap: GpuSnapshot) -> StartNeed | None:
        """What a start of `argv` needs free on each of the deployment's GPUs, from its run history and its memory
        budget flag (tui/lifecycle/gpu_room.py); None when it is not known."""
        return start_need(self.history.store.runs(), argv, self.preset.memory_budget, snap,
                          self.deployment_gpus(snap))

    @property
    def throughput(self) -> ThroughputSample | None:
        return self.tput.latest

    @property
    def metrics_state(self) -> MetricsState:
        return self.tput.metrics
