"""`bringup status` with no name and several deployments (issue 51, item 7): the refusal names every deployment it
would take, the built-in demo too, and the command that shows them all (`status --all`); it listed the configured
ones only, with no hint."""

from __future__ import annotations

from collections.abc import Callable

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import process_deployment, sim_host


def test_status_without_a_name_names_the_demo_and_status_all(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    deps = {name: process_deployment(bu.sim_command(), bu.port) for name in ("k26", "k27")}
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)}, deployments=deps).write(bu.config)
    r = bu.run("status")
    assert r.rc != 0, r.describe()
    line = r.err.strip().splitlines()[-1]
    assert "k26, k27, demo" in line and "status --all" in line, r.describe()
