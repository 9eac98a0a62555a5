"""A demo started again keeps the flags set on the last one, and says so (issue 51, item 7): it ran the configured
command, silently dropping them, and its record then said someone had removed them. Real `bringup demo
--headless` and `bringup restart demo` processes on a free port; the demo's simulated server is real too."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.e2e import Bringup, free_port, wait_no_sim_processes

pytestmark = pytest.mark.slow


def test_a_demo_started_again_keeps_the_last_ones_flags(tmp_path: Path) -> None:
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(free_port())}

    def run(*args: str, timeout: float = 60) -> str:
        r = b.run(*args, config=False, env=env, cwd=empty, timeout=timeout)
        assert r.rc == 0, r.describe()
        return r.err

    try:
        run("demo", "--headless", "--time-scale", "0.1", "--keep")
        run("restart", "demo", "--set", "mem-fraction-static=0.8", "--yes", "--no-wait")
        run("stop", "demo")
        err = run("demo", "--headless", "--time-scale", "0.1", "--keep")
        assert "keeping the flags set on the last demo: + --mem-fraction-static 0.8" in err, err
        r = b.run("status", "demo", "--json", config=False, env=env, cwd=empty)
        assert r.json()["flags"].get("mem-fraction-static") == "0.8", r.describe()
        record = b.run("record", "demo", "--out", "-", "--json", config=False, env=env, cwd=empty).json()
        assert not any("- --mem-fraction-static" in (a["change"] or "") for a in record["actions"]), record["actions"]
    finally:
        b.run("stop", "demo", config=False, env=env, cwd=empty)
    assert not wait_no_sim_processes(str(tmp_path), timeout=20.0)
