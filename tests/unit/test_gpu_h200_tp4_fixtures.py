"""Real readings of one H200 holding four ranks of the tensor-parallel stand-in (tests/fixtures/gpu_h200_tp4/,
captured by benchmarks/multigpu_restart.py): four PIDs on one GPU, nvidia-smi and NVML (memory v2) at the same
moment, and bringup's release rule on them."""

from __future__ import annotations

import json
from pathlib import Path

from tui.lifecycle.release import release_status
from tui.model import GpuProcess, GpuSample, GpuSnapshot

D = Path(__file__).parents[1] / "fixtures" / "gpu_h200_tp4"


def rows(name: str) -> list[list[str]]:
    return [[x.strip() for x in ln.split(",")] for ln in (D / name).read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def test_nvidia_smi_and_nvml_v2_agree_on_the_memory_used() -> None:
    (gpu,) = rows("smi_serving.csv")
    nvml = json.loads((D / "nvml.json").read_text())["gpus"][0]
    assert float(gpu[2]) == round(nvml["used"] / 2**20)  # memory info v2: `used` is nvidia-smi's figure
    apps = rows("smi_apps_serving.csv")
    assert len({a[0] for a in apps}) == 4 and {int(p) for p, _ in nvml["procs"]} == {int(a[0]) for a in apps}


def test_release_waits_for_every_rank_and_names_the_straggler() -> None:
    (gpu,) = rows("smi_serving.csv")
    (idle,) = rows("smi_idle.csv")
    apps = rows("smi_apps_serving.csv")
    pids = {int(a[0]) for a in apps}
    snap = GpuSnapshot(at=0.0, gpus=(GpuSample(0, uuid=gpu[1], mem_used_mib=float(gpu[2]),
                                               mem_total_mib=float(gpu[3])),),
                       processes=tuple(GpuProcess(int(a[0]), "python3", float(a[2]), a[1], 0) for a in apps))
    st = release_status(snap, [0], pids, {0: float(idle[2])}, 1024.0)
    assert not st.released and set(st.holders) == pids
    straggler = max(pids)
    one_left = GpuSnapshot(at=0.0, gpus=(GpuSample(0, mem_used_mib=float(idle[2]) + 31330, mem_total_mib=143771.0),),
                           processes=(GpuProcess(straggler, "python3", 31330.0, gpu_index=0),))
    st = release_status(one_left, [0], pids, {0: float(idle[2])}, 1024.0)
    assert not st.released and st.describe() == f"30.6 GiB held on GPU 0 by PID {straggler}"
