"""A plan of "change these flags and restart" (tui/ops/change.py) run by the restart protocol on the simulated server:
the flags read once by the plan and once under the lock, the timeout an argument, a plan gone stale refused. The
plan's own rules: tests/unit/test_change_plan_rules.py."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.simdeploy import settings_for
from tui.engine import Engine
from tui.managers import Report, unreported
from tui.model import Result, Step, StepStatus
from tui.ops import restart as protocol
from tui.ops.change import ChangePlan, plan_change

# ---------------------------------------------------------------------------------------------------- the protocol


async def test_the_protocol_reads_the_flags_once_under_the_lock_and_takes_its_timeout_as_an_argument(
        tmp_path: Path) -> None:
    """A plan is run as planned: the flags read once by the plan, once by the protocol under the lock (none to
    describe the lock's change: the plan has it), and the timeout given to it, not written into the deployment."""
    settings = settings_for(tmp_path)
    w = Engine(settings, "sim", settings.deployments["sim"])
    dep = w.dep
    reads: list[str] = []
    read, write = w.manager.read_argv, w.manager.write_argv
    writing = False

    async def counted() -> list[str]:
        if not writing:  # the process manager reads its own record to write one: not a reading of the protocol's
            reads.append("read")
        return await read()

    async def written(argv: list[str], report: Report = unreported) -> None:
        nonlocal writing
        writing = True
        try:
            await write(argv, report)
        finally:
            writing = False

    w.manager.read_argv = counted  # type: ignore[method-assign]
    w.manager.write_argv = written  # type: ignore[method-assign]
    try:
        await w.start()
        plan = await plan_change(w, ["disable-cuda-graph"])
        assert isinstance(plan, ChangePlan) and len(reads) == 1
        steps: list[Step] = []
        out = await protocol.run(w, plan, steps.append, stop_first=False, purpose="start", ready_timeout_s=120)
        assert out.result is Result.DONE and out.message == "ready", out
        assert len(reads) == 2, reads
        assert w.dep is dep and w.dep.ready_timeout_s == dep.ready_timeout_s
        assert "--disable-cuda-graph" in await read()

        stale = await plan_change(w, [], ["disable-cuda-graph"])
        assert isinstance(stale, ChangePlan)
        await w.manager.write_argv([*stale.old, "--mem-fraction-static", "0.8"])  # another operator, meanwhile
        steps.clear()
        refused = await protocol.run(w, stale, steps.append)
        assert refused.result is Result.REFUSED and refused.message.startswith("not done: the flags changed"), refused
        assert [(s.name, s.status) for s in steps][-1] == ("flags", StepStatus.FAILED)
        assert "--mem-fraction-static" in await read()
    finally:
        await protocol.stop(w, lambda s: None)
        await w.close()
