"""`restart --set` and `sweep` validate flags against the running server's release (issue 51, item 6): they
validated against the newest known release, since the engine had not yet heard the run's release when the change
was planned, so a flag of an older running release (SGLang 0.5.18's `--cuda-graph-max-bs`, removed in 0.5.20) was
refused as "not a flag of SGLang (release not said yet; flags of 0.5.23...)", while `bringup flags` listed it.
Real `bringup` processes against the simulated server imitating 0.5.18."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def test_restart_set_takes_a_flag_of_the_running_release(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--release", "0.5.18"))
    bu.bring_up()
    r = bu.run("restart", bu.name, "--set", "cuda-graph-max-bs=16", "--yes", timeout=90)
    assert r.rc == 0, r.describe()
    assert "--cuda-graph-max-bs" in " ".join(bu.argv_json() or []), bu.argv_json()


def test_sweep_plan_is_read_with_the_running_release(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--release", "0.5.18"))
    bu.bring_up()
    plan = bu.tmp / "plan.toml"
    plan.write_text('name = "old"\n[[configs]]\nname = "tc"\nset = { cuda-graph-max-bs = 16 }\n'
                    '[matrix]\nprompt_tokens = [16]\noutput_tokens = [8]\nconcurrency = [1]\nrequests = 2\n',
                    encoding="utf-8")
    r = bu.run("sweep", bu.name, str(plan), "--dry-run", timeout=60)
    assert r.rc == 0, r.describe()


def test_restart_set_on_a_stopped_server_takes_a_flag_of_its_last_runs_release(
        make_bringup: Callable[..., Bringup]) -> None:
    """Stopped, the server cannot say its release: the last run's word is taken (it was the newest known's, which
    refused `--cuda-graph-max-bs` of the 0.5.18 that the restart is about to start again)."""
    bu = make_bringup(sim_args=("--release", "0.5.18"))
    bu.bring_up()
    r = bu.run("stop", bu.name, timeout=60)
    assert r.rc == 0, r.describe()
    r = bu.run("restart", bu.name, "--set", "cuda-graph-max-bs=16", "--yes", timeout=90)
    assert r.rc == 0, r.describe()
    assert "--cuda-graph-max-bs" in " ".join(bu.argv_json() or []), bu.argv_json()


def test_flags_of_a_stopped_server_are_its_last_runs_release(make_bringup: Callable[..., Bringup]) -> None:
    """`flags` of a stopped deployment: its last run said 0.5.18, so 0.5.18's flags and keys, said as the last run's
    release (issue 51: "release not said yet; flags of 0.5.23", `g` on another flag than a running one's)."""
    bu = make_bringup(sim_args=("--release", "0.5.18"))
    bu.bring_up()
    r = bu.run("stop", bu.name, timeout=60)
    assert r.rc == 0, r.describe()
    r = bu.run("flags", bu.name, timeout=60)
    assert r.rc == 0, r.describe()
    assert "SGLang 0.5.18 (its last run's release)" in r.out.splitlines()[0], r.out
    assert "cuda-graph-max-bs" in r.out, r.out
