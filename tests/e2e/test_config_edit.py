"""An edited config's command takes effect (issue 51, item 1): real `bringup` processes against the simulated
server. A `process` deployment started with `--tp-size 2`, restarted with `--set disable-cuda-graph` and stopped;
its `command` then edited to `--tp-size 4`: `bringup start` used to run the saved `--tp-size 2
--disable-cuda-graph` and say "flags unchanged". Now it says so before acting and runs the config's command with
the flag change made since replayed on it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import process_deployment, sim_host

pytestmark = pytest.mark.slow


def _configure(bu: Bringup, tp: str) -> None:
    """The deployment's config with the command's `--tp-size` edited to `tp`."""
    cmd = bu.sim_command()
    cmd[cmd.index("--tp-size") + 1] = tp
    dep = process_deployment(cmd, bu.port, release_timeout_s=bu.release_timeout_s, stop_timeout_s=bu.stop_timeout_s)
    ConfigFile(state_dir=bu.state_dir, hosts={"simhost": sim_host(bu.sim_state)},
               deployments={bu.name: dep}).write(bu.config)


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_an_edited_command_runs_with_the_flag_changes_made_since(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    _configure(bu, "2")
    bu.ok("restart", bu.name, "--set", "disable-cuda-graph", "--yes", "--no-wait")
    bu.ok("stop", bu.name)
    _configure(bu, "4")
    r = bu.ok("start", bu.name, "--no-wait")
    # said before acting, naming both
    assert "config's command was edited" in r.err, r.describe()
    assert "--tp-size 4" in r.err and "--tp-size 2" in r.err, r.describe()
    assert "flags unchanged" not in r.out, r.describe()
    cur = bu.current()
    assert cur is not None
    argv = [str(a) for a in cur["argv"]]
    assert _flag(argv, "--tp-size") == "4", argv  # the config's edit
    assert "--disable-cuda-graph" in argv, argv  # the change made since, replayed
    bu.ok("stop", bu.name)
    # reconciled once: the next start runs the same flags and says nothing more
    again = bu.ok("start", bu.name, "--no-wait")
    assert "config's command was edited" not in again.err, again.describe()
    cur = bu.current()
    assert cur is not None and [str(a) for a in cur["argv"]] == argv


def test_the_config_wins_where_its_edit_and_a_saved_change_touch_one_flag(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup()
    _configure(bu, "2")
    bu.ok("restart", bu.name, "--set", "tp-size=8", "--set", "disable-cuda-graph", "--yes", "--no-wait")
    bu.ok("stop", bu.name)
    _configure(bu, "4")
    r = bu.ok("start", bu.name, "--no-wait")
    assert "dropped" in r.err and "--tp-size 8" in r.err, r.describe()
    cur = bu.current()
    assert cur is not None
    argv = [str(a) for a in cur["argv"]]
    assert _flag(argv, "--tp-size") == "4" and "--disable-cuda-graph" in argv, argv


def test_status_of_one_deployment_names_the_config_file_it_read(make_bringup: Callable[..., Bringup]) -> None:
    """Issue 51, item 5: `status NAME` says which config it read, as `status --all` does (text and --json)."""
    bu = make_bringup()
    d = bu.status()
    assert d.get("config") == str(bu.config.resolve()), d.get("config")
    r = bu.run("status", bu.name)
    assert r.out.splitlines()[0] == f"config: {bu.config.resolve()}", r.describe()
