"""A manager whose run lands where a scheduler places it: the run's nodes, its endpoint and the command that reads
each node's GPUs are found from the run's allocation, never configured by hand (the Slurm manager; Kubernetes
would be one too).

The engine asks the manager through this Protocol (as it asks `LogHistory`), never by its kind: it probes the
endpoint the placement names (through the manager's host: a port forward over its SSH connection), and reads the
GPUs of each node the placement lists with the command it gives (through the allocation where a compute node cannot
be reached by SSH).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tui.model import GpuSnapshot, UnitState


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the current run is, as last read: `run` its invocation, `nodes` its nodes (the head first), the
    endpoint on the head node as the manager's host reaches it, and each node's GPU command (an argv prefix that
    nvidia-smi's options follow), in the order of `nodes`."""

    run: str
    nodes: tuple[str, ...]
    endpoint: str
    gpu_commands: tuple[tuple[str, ...], ...]


@runtime_checkable
class Placed(Protocol):
    async def state(self) -> UnitState: ...

    def placement(self) -> Placement | None:
        """The current run's placement as of the last reading of the run (None: it holds no node: queued, ended,
        never started)."""
        ...

    async def unplaced_gpus(self) -> GpuSnapshot:
        """The deployment's GPUs while no run of it holds any, as the scheduler lists them: which there are, not
        their memory (there is no allocation to read them through), and that no run of this deployment holds
        them. What the release wait and the evidence check go by between two runs."""
        ...


def node_names(placement: Placement | None) -> Sequence[str]:
    return placement.nodes if placement is not None else ()
