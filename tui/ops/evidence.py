"""No evidence, no change: a restart or start whose release wait would have no GPU readings to go on is refused
before anything is touched.

The release wait refuses to start a new run while no GPU reading shows the old run's memory released. Asked only
after the stop, that refusal was an outage: with nvidia-smi missing, `restart` stopped a ready server, waited the
whole release timeout, refused to start, and left it stopped. So the readings are asked for first, here, by every
path: `plan_change` (what the CLI and the console ask before they confirm) and the restart protocol itself under the
lock (what sweeps, rollbacks and starts go through), and a host that gives none is refused with the server still
up and its flags unwritten. An operator who knows better says so by name (`--without-gpu-evidence`, the console's
"restart WITHOUT GPU evidence"; or the deployment's unverified_release_grace_s), and the restart then says in its
steps, and the run history in its actions, that it went on without evidence.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tui.config.parts import ConfigError
from tui.errors import PermanentError
from tui.model import GpuSnapshot
from tui.transport import TransportError

if TYPE_CHECKING:
    from tui.config.deployments import DeploymentConfig
    from tui.config.settings import Settings

__all__ = ["CONSOLE_OVERRIDE", "OVERRIDE", "Blind", "EvidenceView", "accepted_by", "declared_without_gpus",
           "no_evidence", "refusal"]

#: the command line's override, named in every refusal
OVERRIDE = "--without-gpu-evidence"
#: the console's, on the refusal dialog's button
CONSOLE_OVERRIDE = "restart WITHOUT GPU evidence"
#: the action written into the run history when a restart goes on without evidence
ACTION = "without GPU evidence"
#: readings that fail for a reason that may pass (a link's blip, a slow nvidia-smi) are asked this often before a
#: refusal; one that cannot be run at all is refused at the first
TRIES = 3
TRY_GAP_S = 0.5


class EvidenceView(Protocol):
    """What the check reads of an engine: the deployment, the hosts' configuration and a fresh GPU reading."""

    @property
    def dep(self) -> DeploymentConfig: ...

    @property
    def settings(self) -> Settings: ...

    async def fresh_gpus(self, max_age: float = 1.5) -> GpuSnapshot | None: ...


@dataclass(frozen=True, slots=True)
class Blind:
    """The host gives no GPU readings: from where, why, and whether waiting could change it (`permanent`: the
    command cannot be run, or there is no GPU source at all)."""

    host: str
    why: str
    permanent: bool


def declared_without_gpus(engine: EvidenceView) -> str:
    """The deployment's host(s), when every one of them declares no GPU telemetry (`gpu_source = "none"`: a host
    without GPUs, or none to read): then there is nothing to wait for. "" otherwise: a host configured with a GPU
    source whose readings fail (a wrong `nvidia_smi`, a hang, no permission) is no host without GPUs."""
    dep = engine.dep
    names = list(dict.fromkeys(n.host for n in dep.nodes)) if dep.multinode else [dep.host]
    try:
        hosts = [engine.settings.host(h) for h in names]
    except ConfigError:
        return ""
    return ", ".join(names) if hosts and all(h.gpu_source == "none" for h in hosts) else ""


async def _reading(engine: EvidenceView) -> GpuSnapshot | None:
    try:
        return await engine.fresh_gpus()
    except (TransportError, OSError) as e:
        return GpuSnapshot(at=0.0, error=str(e), permanent=isinstance(e, PermanentError))


async def no_evidence(engine: EvidenceView) -> Blind | None:
    """Why the release wait would have no GPU readings to go on, or None when it would (a host that declares no
    GPU telemetry has nothing to wait for: None too)."""
    if declared_without_gpus(engine):
        return None
    blind: Blind | None = None
    for attempt in range(TRIES):
        if attempt:
            await asyncio.sleep(TRY_GAP_S)
        snap = await _reading(engine)
        if snap is None:  # the host's source cannot be used at all (NVML asked for, and not available)
            return Blind(engine.dep.host_label, "no GPU telemetry", True)
        if snap.gpus and not snap.error:
            return None
        blind = Blind(engine.dep.host_label, snap.error or "no GPUs listed", snap.permanent)
        if blind.permanent:
            return blind
    return blind


def accepted_by(dep: DeploymentConfig, override: bool) -> str:
    """How going on without GPU readings was accepted ("" for not at all): the override for this command, or the
    deployment's unverified_release_grace_s (a grace after the old run's processes are gone)."""
    if override:
        return OVERRIDE
    if dep.unverified_release_grace_s is not None:
        return f"unverified_release_grace_s = {dep.unverified_release_grace_s:g}"
    return ""


def refusal(blind: Blind, what: str = "restart") -> str:
    """The refusal, in one line: what could not be read, that nothing was done, and the two ways on."""
    cause = "a permanent error, which waiting will not fix" if blind.permanent else "it may come back"
    would = ("wait for readings and then refuse to start" if what in ("start", "demo") else
             "stop the server and then refuse to start it")
    return (f"no GPU readings from {blind.host} ({blind.why}; {cause}): without them the old run's GPU memory "
            f"release cannot be verified, so this {what} would {would}; nothing was done (the server is as it "
            f"was, its flags not written). Fix the GPU readings of {blind.host} (its "
            f"gpu_source, nvidia_smi), or go on without GPU evidence at the risk of a CUDA OOM: {OVERRIDE} (the "
            f"console: \"{CONSOLE_OVERRIDE}\" in the restart dialog), or unverified_release_grace_s in the config")


def going_on(blind: Blind, how: str) -> str:
    """The step that says a restart goes on without evidence, and by whose word."""
    return (f"no GPU readings from {blind.host} ({blind.why}): going on WITHOUT GPU evidence, as accepted by "
            f"{how}: the start follows the old run's processes gone, its GPU memory release NOT verified "
            "(risk of a CUDA OOM)")
