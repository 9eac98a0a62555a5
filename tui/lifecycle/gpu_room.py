"""Is there room for a start beside the memory others hold on the deployment's GPUs? Pure (no I/O): the restart
protocol asks before it changes anything, and again once the old run's memory is released.

A start beside another deployment's server used to wait for that server's memory to be released, which it never
is: 10 minutes, then a refusal blaming "the running server" of a deployment that was stopped (issue 51). Memory
another deployment or another user holds is not waited for: the start goes on when what is left free is enough for
it, and is refused at once, naming the holder, when it is not.

What a start needs on each GPU: what the deployment's last ready run held there, when its memory budget flag
(`--mem-fraction-static`, `--gpu-memory-utilization`) gives the same share now as then; else that share of each
GPU's memory (the flag's default when it is not given). Neither known (no ready run on record, a server whose
budget flag bringup does not know): not known, and the start goes on, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tui.lifecycle.nodes import describe_gpus, host_names
from tui.lifecycle.presets import MemoryBudget
from tui.lifecycle.release import GIB, OtherHolder
from tui.lifecycle.run_record import RunRecord
from tui.model import GpuSnapshot


@dataclass(frozen=True, slots=True)
class StartNeed:
    """The memory a start needs free on each of the deployment's GPUs (MiB), and where that figure comes from."""

    per_gpu: Mapping[int, float]
    #: "its last ready run's", "--mem-fraction-static 0.9 of each GPU's memory"
    basis: str
    #: the server's memory budget flag, where it has one: a smaller share is a way to fit beside others
    flag: str = ""

    def words(self) -> str:
        most = max(self.per_gpu.values(), default=0.0)
        return f"{most / GIB:.1f} GiB a GPU ({self.basis})"


@dataclass(frozen=True, slots=True)
class Room:
    """Whether the start fits: each GPU's free memory against the need; `short`, the GPUs where it does not."""

    fits: bool
    free_mib: Mapping[int, float]
    short: tuple[int, ...]
    names: tuple[str, ...] = ()

    def words(self) -> str:
        """`111.6 GiB free on GPU 0-7`, or the GPU with the least when they differ: `at most 80.2 GiB free (GPU 3)`."""
        if not self.free_mib:
            return "no GPU's free memory is known"
        values = sorted(self.free_mib.items(), key=lambda kv: kv[1])
        low_i, low = values[0]
        if values[-1][1] - low < GIB / 2:
            return f"{low / GIB:.1f} GiB free on GPU {describe_gpus(self.free_mib, self.names)}"
        return f"at most {low / GIB:.1f} GiB free on GPU {describe_gpus([low_i], self.names)}"


def _ready_mib(run: RunRecord) -> float | None:
    """What a run held on the deployment's GPUs once ready: its own processes' memory at its ready step, else the
    GPUs' memory then less what others held (None where neither was seen)."""
    ready = [s for s in run.gpu_steps if s.step == "ready"]
    if ready:
        s = ready[-1]
        if s.this_run_mib:
            return s.this_run_mib
        if s.used_mib is not None:
            return max(0.0, s.used_mib - (s.other_mib or 0.0))
    return run.gpu_mib_at_ready


def start_need(runs: Sequence[RunRecord], argv: Sequence[str], budget: MemoryBudget | None, snap: GpuSnapshot,
               gpus: Sequence[int]) -> StartNeed | None:
    """What a start of `argv` needs free on each of `gpus` (see the module's rule); None when it is not known."""
    if not gpus:
        return None
    share = budget.share(argv) if budget is not None else None
    for run in reversed(runs):
        mib = _ready_mib(run)
        if mib is None or mib <= 0:
            continue
        if budget is not None and budget.share(run.argv) != share:
            break  # the budget changed since: the last ready run says nothing of this start
        return StartNeed({i: mib / len(gpus) for i in gpus}, "its last ready run's",
                         budget.flag if budget is not None else "")
    if budget is None or share is None:
        return None
    totals = {g.index: g.mem_total_mib for g in snap.gpus if g.index in set(gpus) and g.mem_total_mib}
    if not totals:
        return None
    given = any(a.partition("=")[0].replace("_", "-") == budget.flag for a in argv)
    return StartNeed({i: share * t for i, t in totals.items()},
                     f"{budget.flag} {share:g}{'' if given else ', its default,'} of each GPU's memory", budget.flag)


def free_now(snap: GpuSnapshot, gpus: Sequence[int]) -> dict[int, float]:
    """Each GPU's free memory now (its total less what it holds), where both are read."""
    return {g.index: g.mem_total_mib - g.mem_used_mib for g in snap.gpus
            if g.index in set(gpus) and g.mem_total_mib is not None and g.mem_used_mib is not None}


def free_beside(snap: GpuSnapshot, gpus: Sequence[int], others: Sequence[OtherHolder]) -> dict[int, float]:
    """Each GPU's memory less what `others` hold on it: the most a start could have, whatever else goes first."""
    held: dict[int, float] = {}
    for o in others:
        for i, mib in o.by_gpu:
            held[i] = held.get(i, 0.0) + mib
    return {g.index: g.mem_total_mib - held.get(g.index, 0.0) for g in snap.gpus
            if g.index in set(gpus) and g.mem_total_mib is not None}


def room_for(need: StartNeed, free: Mapping[int, float], snap: GpuSnapshot) -> Room:
    """Whether each GPU's free memory is at least what the start needs there."""
    short = tuple(sorted(i for i, mib in need.per_gpu.items() if free.get(i, 0.0) < mib))
    return Room(not short, dict(free), short, host_names(snap.gpus))
