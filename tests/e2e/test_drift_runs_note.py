"""The config-drift note's `runs:` is what runs (issue 51, finding 6): after an edit of the config, `restart sim-a
--unset disable-cuda-graph` printed `note: runs: ... --disable-cuda-graph`, and on the very next line `-
--disable-cuda-graph`. Real `bringup` processes against the simulated server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import process_deployment, sim_host

pytestmark = pytest.mark.slow


def _configure(bu: Bringup, tp: str) -> None:
    cmd = bu.sim_command()
    cmd[cmd.index("--tp-size") + 1] = tp
    dep = process_deployment(cmd, bu.port, release_timeout_s=bu.release_timeout_s, stop_timeout_s=bu.stop_timeout_s)
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)},
               deployments={bu.name: dep}).write(bu.config)


def test_the_runs_line_of_a_restart_over_an_edited_config_is_the_command_that_runs(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    _configure(bu, "2")
    bu.ok("restart", bu.name, "--set", "disable-cuda-graph", "--yes", "--no-wait")
    bu.ok("stop", bu.name)
    _configure(bu, "4")
    r = bu.ok("restart", bu.name, "--unset", "disable-cuda-graph", "--yes", "--no-wait")
    runs = [ln for ln in r.err.splitlines() if "runs:" in ln]
    assert len(runs) == 1, r.describe()
    assert "--disable-cuda-graph" not in runs[0] and "--tp-size 4" in runs[0], r.describe()
    cur = bu.current()
    assert cur is not None and "--disable-cuda-graph" not in [str(a) for a in cur["argv"]], cur
