"""The console on a Slurm deployment of the real test cluster (.ci/slurm.sh): the whole app (Textual's Pilot) with
its real Engine, reaching the cluster through the login host's sshd as `tester`, as an operator's console would.

One bring-up as the operator sees it: started from the console while another job holds every GPU, the job waits
in the queue and the lifecycle panel says so in Slurm's words (its reason); once a GPU frees, the job starts, the
panel follows it to ready and the console names the node it landed on; then a restart from the console (r, yes)
cancels that job, submits the next and follows it to ready too. The CLI's side of each case is
tests/e2e/test_slurm_manager.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.console_app import record_shown_notifications, region_text, screen_text, shown
from tests.helpers.pilot import until
from tests.helpers.slurm_cluster import SlurmCluster
from tests.helpers.slurm_deploy import deployment
from tui.config.settings import load
from tui.console.control import ControlConsoleApp
from tui.model import Phase
from tui.screens.confirm import ConfirmScreen

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[SlurmCluster]:
    """The cluster, left idle again whatever the test did; no BRINGUP_ variable of the test run reaches the
    console's settings (as the CLI tests run bringup without them)."""
    for k in [k for k in os.environ if k.startswith("BRINGUP_")]:
        monkeypatch.delenv(k)
    yield slurm_cluster
    slurm_cluster.reset()


def lifecycle(app: ControlConsoleApp) -> str:
    """What the lifecycle panel shows now (the screen's text within the panel's region)."""
    return region_text(app, app.screen.query_one("#lifecycle").region)


async def test_queued_with_slurms_reason_then_ready_on_its_node_then_restarted(
        tmp_path: Path, cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    record_shown_notifications(monkeypatch)
    blockers = {n: cluster.submit_blocker(node=n) for n in ("n1", "n2")}  # every GPU of the partition held
    dep = deployment(tmp_path, cluster)
    app = ControlConsoleApp(load(str(dep.config)), dep.name)
    async with app.run_test(size=(200, 50)) as pilot:
        try:
            assert await until(pilot, lambda: app.engine is not None and app.engine.state.unit is not None, 60)
            await pilot.press("s")
            assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30), screen_text(app)
            await pilot.press("y")

            # queued behind the blockers: the phase, and Slurm's reason in its words, in the lifecycle panel
            queued = "queued: Resources (the nodes or GPUs it asks for are held by other jobs)"
            assert await until(pilot, lambda: app.engine.state.phase == Phase.QUEUED and
                               queued in " ".join(lifecycle(app).split()), 90), screen_text(app)
            first = app.engine.state.invocation
            assert first.isdigit() and cluster.job(int(first)).reason == "Resources"

            cluster.ctl("scancel", str(blockers["n2"]))  # n2's GPUs freed: the job starts there
            assert await until(pilot, lambda: app.engine.state.phase == Phase.READY, 180), screen_text(app)
            assert cluster.job(int(first)).nodes == "n2"
            panel = lifecycle(app)
            assert "queued" in panel and "ready" in panel, panel
            assert await until(pilot, lambda: "n2" in screen_text(app), 30), screen_text(app)  # its node named

            # a restart from the console: the old job cancelled and gone from its node, the next one followed
            assert await until(pilot, lambda: not app.restarting, 30), shown(app)  # the start's worker done
            await pilot.press("r")
            assert await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), 30), (shown(app),
                                                                                           screen_text(app))
            await pilot.press("y")
            assert await until(pilot, lambda: app.engine.state.invocation not in ("", first) and
                               app.engine.state.phase == Phase.READY, 240), screen_text(app)
            second = app.engine.state.invocation
            assert cluster.job(int(first)).state == "CANCELLED"
            assert cluster.job(int(second)).state == "RUNNING" and cluster.job(int(second)).nodes == "n2"
            assert await until(pilot, lambda: ("follow", "done") in [(s.name, s.status) for s in app.shown.steps],
                               30), app.shown.steps
            steps = [(s.name, s.status) for s in app.shown.steps]
            assert ("stop", "done") in steps and ("start", "done") in steps, steps
            assert await until(pilot, lambda: f"run {second}" in lifecycle(app) and "READY" in lifecycle(app), 30), \
                lifecycle(app)  # the panel on the new job, ready
        finally:
            w = app.engine
            if w is not None:
                w.action("stop")
                await w.manager.stop()
                await w.close()
                app.engine = None
