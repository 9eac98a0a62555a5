"""A hung link (a network that swallows packets, a host that hangs) on a real SSH connection to the systemd test
host, through a proxy of the test's own: the engine the console and `wait` use says within 10 s that its data are
old (phase unknown, "no news from ..."), the outage is a segment of its own in the timeline, and the truth is back
once the link is.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.e2e.test_ssh_faults import HostInfo, Proxy, testhost, write_config  # noqa: F401 - fixture
from tests.helpers.config_toml import ConfigFile
from tests.helpers.simdeploy import sim_port_on_testhost, systemd_deployment
from tests.helpers.wait import until_async
from tests.unit.test_reducer import SGLANG, feed, warmup_seen
from tui.config import HostConfig, load
from tui.engine import Engine
from tui.model import NewsResumed, NewsStopped, Phase, ProbeResult


def test_an_outage_is_a_segment_of_its_own_and_the_phase_is_kept() -> None:
    s = feed([*warmup_seen(), ProbeResult(at=106.0, kind="generate", ok=True, status=200)])
    assert s.phase == Phase.READY
    s = feed([NewsStopped(110.0, "no news from gpu-box"), NewsResumed(150.0)], s, preset=SGLANG)
    assert [t.phase for t in s.timeline][-3:] == [Phase.READY, Phase.UNKNOWN, Phase.READY]
    assert s.timeline[-2].at == 110.0 and s.timeline[-1].at == 150.0 and s.phase == Phase.READY


@pytest.mark.slow
async def test_a_hung_link_is_marked_stale_within_10_s_and_recovers(testhost: HostInfo,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    proxy = await Proxy(testhost.port).start()
    pinned = "".join(ln.replace(f"[127.0.0.1]:{testhost.port}", f"[127.0.0.1]:{proxy.port}") + "\n"
                     for ln in testhost.known_hosts)
    ssh = write_config(tmp_path, proxy.port, testhost.key, pinned)
    cfg = ConfigFile(state_dir=tmp_path / "state", hosts={"th": HostConfig(ssh="th", ssh_config=str(ssh))},
                     deployments={"remote": systemd_deployment(sim_port_on_testhost(), host="th")}
                     ).write(tmp_path / "c.toml")
    settings = load(str(cfg))
    w = Engine(settings, "remote", settings.deployments["remote"])
    try:
        await w.start()
        await until_async("a first reading", lambda: w.snapshot(time.time()).phase != Phase.UNKNOWN, 30)
        before = w.snapshot(time.time()).phase
        t0 = time.monotonic()
        proxy.blackhole()
        await until_async("marked stale", lambda: w.snapshot(time.time()).phase == Phase.UNKNOWN, 10)
        took = time.monotonic() - t0
        snap = w.snapshot(time.time())
        assert snap.stale.startswith("no news from th for ") and f"(last seen: {before})" in snap.stale, snap.stale
        await until_async("an outage segment", lambda: any(t.phase == Phase.UNKNOWN for t in w.state.timeline), 5)
        proxy.resume()
        t1 = time.monotonic()
        await until_async("the truth back", lambda: w.snapshot(time.time()).phase == before, 30)
        print(f"stale after {took:.1f} s; back {time.monotonic() - t1:.1f} s after the link")
        assert w.state.timeline[-1].phase == before
    finally:
        await w.close()
        await proxy.close()
