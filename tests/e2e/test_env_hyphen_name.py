"""A deployment whose name has a hyphen is overridden from the environment (issue 51, item 7): no variable name
takes a hyphen, so `BRINGUP_DEPLOYMENTS__SIM_A__ENDPOINT` stands for deployment `sim-a`; it made a new deployment
`sim_a` with no manager instead, and every command failed. Real `bringup` processes against the simulated server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup, free_port
from tests.helpers.simdeploy import process_deployment, sim_host

pytestmark = pytest.mark.slow


def test_an_env_variable_overrides_a_deployment_with_a_hyphen(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(name="sim-a")
    dep = process_deployment(bu.sim_command(), free_port(), release_timeout_s=60.0, stop_timeout_s=20.0)
    # the file's endpoint is wrong (nothing listens there); the environment's is the server's
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)}, deployments={bu.name: dep}) \
        .write(bu.config)
    real = bu.endpoint
    env = {**bu.env, "BRINGUP_DEPLOYMENTS__SIM_A__ENDPOINT": real}
    r = bu.run("restart", bu.name, "--yes", env=env)
    assert r.rc == 0, r.describe()  # ready: the server was probed at the environment's endpoint
    d = bu.run("status", bu.name, "--json", env=env).json()
    assert d["phase"] == "ready", d
