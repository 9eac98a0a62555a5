"""The batch of `systemctl show` (tui/managers/systemd_show.py) on stand-in transports: a command whose readers
have all gone is cancelled, an answer that does not split into one block per unit is asked again unit by unit. The
batch against the real systemd of the test host: tests/e2e/test_ssh_cost.py."""

from __future__ import annotations

import asyncio

from tests.helpers.wait import until_async
from tui.managers.systemd_show import ShowBatch, split_blocks
from tui.transport import CommandResult


class _Blocking:
    """A transport whose command never answers until told (a stand-in for a slow host: the real one is above)."""

    name = "fake"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = False

    async def run(self, argv: list[str], **_: object) -> CommandResult:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        raise AssertionError("unreachable")


async def test_a_command_whose_readers_have_all_gone_is_cancelled() -> None:
    t = _Blocking()
    b = ShowBatch(t)  # type: ignore[arg-type]
    readers = [asyncio.ensure_future(b.show(u, ["-p", "Id"])) for u in ("a.service", "b.service")]
    await asyncio.wait_for(t.started.wait(), 5)
    readers[0].cancel()
    await asyncio.sleep(0)
    assert not t.cancelled  # one reader still waits
    readers[1].cancel()
    assert await until_async("the command cancelled", lambda: t.cancelled, 5)


class _Refusing:
    """A transport whose batch answer cannot be split (a stand-in: the real host covers the batch itself above)."""

    name = "fake"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def run(self, argv: list[str], **_: object) -> CommandResult:
        self.calls.append(list(argv))
        units = [a for a in argv if a.endswith(".service")]
        if len(units) > 1:
            return CommandResult(0, b"ActiveState=active\n", b"")  # one block for two units
        if units == ["bad.service"]:
            return CommandResult(1, b"", b"Failed to get properties: Access denied")
        return CommandResult(0, f"Id={units[0]}\nActiveState=active\n".encode(), b"")


async def test_a_batch_that_does_not_split_is_asked_unit_by_unit() -> None:
    t = _Refusing()
    b = ShowBatch(t)  # type: ignore[arg-type]
    good, bad = await asyncio.gather(b.show("good.service", ["-p", "Id"]), b.show("bad.service", ["-p", "Id"]))
    assert len(t.calls) == 3 and b.commands == 3
    assert good.rc == 0 and "Id=good.service" in good.text
    assert bad.rc == 1 and "Access denied" in bad.error_text


def test_split_blocks() -> None:
    assert split_blocks("A=1\nB=2\n\nA=3\nB=\n\n") == ["A=1\nB=2", "A=3\nB="]
    assert split_blocks("") == []
