"""The CLI's `demo` is the demo last brought up (issue 51, finding 2): after `bringup demo --scenario
dflash-graph-crash`, the record's way back `bringup restart demo --set cuda-graph-backend-*=disabled`, run from a
shell, restarted the plain built-in demo: `- --speculative-algorithm DFLASH ...`, `--scenario` dropped, as a config
"edit" (`none still apply`). Real `bringup demo --headless` and `bringup restart demo` processes on a free port."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.e2e import Bringup, free_port, wait_no_sim_processes

pytestmark = pytest.mark.slow


def test_the_records_way_back_restarts_the_scenario_demo_that_ran(tmp_path: Path) -> None:
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(free_port())}

    def run(*args: str, timeout: float = 60) -> tuple[int, str, str]:
        r = b.run(*args, config=False, env=env, cwd=empty, timeout=timeout)
        return r.rc, r.out, r.err

    try:
        rc, _, err = run("demo", "--headless", "--scenario", "dflash-graph-crash", "--time-scale", "0.1", "--keep")
        assert rc != 0, err  # the DFlash run crashes in graph capture
        back = ["restart", "demo", "--set", "cuda-graph-backend-decode=disabled",
                "--set", "cuda-graph-backend-prefill=disabled", "--yes"]
        rc, out, err = run(*back, timeout=90)
        assert rc == 0, out + err
        assert "config's command was edited" not in err, err
        assert "- --speculative-algorithm" not in out + err, out + err
        status = b.run("status", "demo", "--json", config=False, env=env, cwd=empty).json()
        assert status["phase"] == "ready", status
        assert status["flags"].get("speculative-algorithm") == "DFLASH", status["flags"]
        argv = status["argv"]
        assert argv[argv.index("--scenario") + 1] == "dflash-graph-crash", argv
    finally:
        b.run("stop", "demo", config=False, env=env, cwd=empty)
    assert not wait_no_sim_processes(str(tmp_path), timeout=20.0)


def test_a_scenario_asked_again_runs_as_defined_and_says_which_flags_it_does_not_keep(tmp_path: Path) -> None:
    """Finding 3: `bringup demo --scenario dflash-graph-crash` after a demo with graphs turned off reached ready,
    the flags kept silently defeating the crash asked for."""
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(free_port())}
    demo = ("demo", "--headless", "--scenario", "dflash-graph-crash", "--time-scale", "0.1", "--keep")
    try:
        assert b.run(*demo, config=False, env=env, cwd=empty, timeout=60).rc != 0
        r = b.run("restart", "demo", "--set", "cuda-graph-backend-decode=disabled", "--set",
                  "cuda-graph-backend-prefill=disabled", "--yes", config=False, env=env, cwd=empty, timeout=90)
        assert r.rc == 0, r.describe()
        b.run("stop", "demo", config=False, env=env, cwd=empty)
        again = b.run(*demo, config=False, env=env, cwd=empty, timeout=60)
        assert again.rc != 0, again.describe()  # the crash asked for
        assert "not keeping the flags set on the last demo (+ --cuda-graph-backend-decode disabled" in again.err, \
            again.describe()
        assert "--scenario dflash-graph-crash runs as it is defined" in again.err, again.describe()
    finally:
        b.run("stop", "demo", config=False, env=env, cwd=empty)
    assert not wait_no_sim_processes(str(tmp_path), timeout=20.0)
