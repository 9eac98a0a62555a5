"""A hung link (a network that swallows packets, a host that hangs) on a real SSH connection to the systemd test
host, through a proxy of the test's own: the engine the console and `wait` use says within 10 s that its data are
old (phase unknown, "no news from ..."), the outage is a segment of its own in the timeline, and the truth is back
once the link is.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.simdeploy import sim_port_on_testhost, systemd_deployment
from tests.helpers.ssh_proxy import Proxy
from tests.helpers.testhost import HostInfo, write_ssh_config
from tests.helpers.wait import until_async
from tui.config.parts import HostConfig
from tui.config.settings import load
from tui.engine import Engine
from tui.model import Phase


@pytest.mark.slow
async def test_a_hung_link_is_marked_stale_within_10_s_and_recovers(testhost: HostInfo,
                                                                   tmp_path: Path) -> None:
    proxy = await Proxy(testhost.port).start()
    pinned = "".join(ln.replace(f"[127.0.0.1]:{testhost.port}", f"[127.0.0.1]:{proxy.port}") + "\n"
                     for ln in testhost.known_hosts)
    ssh = write_ssh_config(tmp_path, proxy.port, testhost.key, pinned)
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
