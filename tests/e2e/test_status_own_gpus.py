"""`bringup status` of a deployment on GPUs 0-1 of an 8-GPU host says its own two GPUs' memory (issue 51, item 7):
it summed all eight as the deployment's. Real `bringup` processes against the simulated server and `nvidia-smi`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import process_deployment, sim_host

pytestmark = pytest.mark.slow


def test_status_sums_only_the_deployments_gpus(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--tp-size", "2"))
    dep = process_deployment(bu.sim_command(), bu.port, release_timeout_s=60.0, stop_timeout_s=20.0)
    dep = dep.model_copy(update={"gpus": [0, 1]})
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)}, deployments={bu.name: dep}) \
        .write(bu.config)
    bu.bring_up()
    d = bu.status()
    rows = d["gpus"]["gpus"]
    assert len(rows) == 8, rows
    assert d["deployment_gpus"] == [0, 1], d.get("deployment_gpus")
    own_total = sum(g["mem_total_mib"] for g in rows if g["index"] in (0, 1))
    assert d["deployment_mem_total_mib"] == own_total, d
    text = bu.ok("status", bu.name).out
    line = next(x for x in text.splitlines() if x.startswith("GPUs:"))
    assert line.startswith("GPUs: 0, 1 (of 8 on the host), ") and f"/{own_total / 1024:.0f} GiB" in line, text
