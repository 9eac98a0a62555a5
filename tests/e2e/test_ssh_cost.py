"""What keeps a fleet's SSH links cheap, against the real systemd and OpenSSH of the test host. The units of one
host read at one moment go out as one `systemctl show` (tui/managers/systemd_show.py): each reader gets its own
unit's state, a unit that is not there is that reader's error only, and a fleet's engines read on a shared grid so
their readings do coincide. The link's cipher is AES-GCM unless the ssh_config chooses.

Only reads: the units read are the host's own (sshd, journald), so these tests run next to any other. The
batch's own rules on stand-in transports: tests/unit/test_systemd_show_batch.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.testhost import require_up, ssh_config_at, texec
from tests.helpers.wait import until_async
from tui.config.parts import HostConfig
from tui.engine.build import make_transport
from tui.managers import PermanentManagerError
from tui.managers.systemd import SystemdManager
from tui.managers.systemd_show import batch_for

pytestmark = pytest.mark.slow
require_up()
HOST_UNITS = ("ssh.service", "systemd-journald.service")


@pytest.fixture
async def transport(tmp_path: Path) -> AsyncIterator[object]:
    cfg = ssh_config_at(tmp_path / "ssh-config")
    t = make_transport(HostConfig(ssh="testhost", ssh_config=str(cfg)))
    yield t
    await t.close()


async def test_units_read_together_are_one_command_and_each_gets_its_own(transport: object) -> None:
    managers = [SystemdManager(transport, u) for u in (*HOST_UNITS, "no-such-unit-here.service")]  # type: ignore[arg-type]
    batch = batch_for(transport)  # type: ignore[arg-type]
    before = batch.commands
    got = await asyncio.gather(*(m.state() for m in managers), return_exceptions=True)
    assert batch.commands - before == 1, batch.commands - before
    for unit, st in zip(HOST_UNITS, got[:2], strict=True):
        assert not isinstance(st, BaseException), st
        pid = int(texec("systemctl", "show", "-p", "MainPID", "--value", unit))
        inv = texec("systemctl", "show", "-p", "InvocationID", "--value", unit).strip()
        assert (st.active, st.main_pid, st.invocation) == ("active", pid, inv), (unit, st)
        # the cgroup came with the reading: the run's processes need no command of their own for it
        pids = await managers[HOST_UNITS.index(unit)].pids(st)
        assert pids is not None and pid in pids
    assert isinstance(got[2], PermanentManagerError) and "no-such-unit-here.service not found" in str(got[2])
    # asked alone, a unit is read alone, as before
    before = batch.commands
    assert (await managers[0].state()).main_pid == got[0].main_pid  # type: ignore[union-attr]
    assert batch.commands - before == 1


async def test_a_fleets_engines_on_one_host_read_their_units_together(transport: object) -> None:
    """Two followers reading every half second on the shared grid: about one command per reading, not two."""
    from tui.engine.grid import on_grid

    managers = [SystemdManager(transport, u) for u in HOST_UNITS]  # type: ignore[arg-type]
    batch = batch_for(transport)  # type: ignore[arg-type]
    readings = 0

    async def follow(m: SystemdManager) -> None:
        nonlocal readings
        for _ in range(6):
            await asyncio.sleep(on_grid(0.5) - asyncio.get_running_loop().time())
            await m.state()
            readings += 1

    before = batch.commands
    await asyncio.gather(*(follow(m) for m in managers))
    assert readings == 12
    assert batch.commands - before <= 7, batch.commands - before  # 6 instants; one may straddle a tick


async def test_a_reading_nobody_waits_for_any_more_is_not_sent(transport: object) -> None:
    """A reader cancelled before its batch goes out (an engine closing, a command ending) costs no command: sent
    anyway, it would outlive its reader and, in a CLI exiting meanwhile, fail on the closed link after the loop."""
    m = SystemdManager(transport, HOST_UNITS[0])  # type: ignore[arg-type]
    batch = batch_for(transport)  # type: ignore[arg-type]
    assert (await m.state()).active == "active"  # connected
    before = batch.commands
    reader = asyncio.ensure_future(m.state())
    await asyncio.sleep(0)  # its first step: it has asked
    assert batch.waiting == 1
    reader.cancel()
    assert await until_async("the batch flushed", lambda: batch.waiting == 0, 5, every=0.005)
    await asyncio.sleep(0)
    assert batch.commands == before
    assert (await m.state()).active == "active" and batch.commands == before + 1


async def test_the_link_prefers_aes_gcm_unless_the_ssh_config_chooses(transport: object, tmp_path: Path) -> None:
    from tui.transport.ssh import SshTransport

    assert isinstance(transport, SshTransport)
    conn = await transport.connection()
    assert conn.get_extra_info("send_cipher") == "aes128-gcm@openssh.com"
    cfg = Path(transport.config[0])
    chosen = tmp_path / "chosen"
    chosen.write_text(cfg.read_text() + "\nHost *\n    Ciphers chacha20-poly1305@openssh.com\n")
    own = SshTransport("testhost", config=[str(chosen)])
    try:
        assert (await own.connection()).get_extra_info("send_cipher") == "chacha20-poly1305@openssh.com"
    finally:
        await own.close()
