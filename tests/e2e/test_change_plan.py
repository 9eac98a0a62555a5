"""One plan for "change these flags and restart" (tui/ops/change.py): its refusals, its no-ops and its diff, the
last flags that reached ready, and the same plan (the same words) whichever front end asks."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.console.test_app_faults import console, record_notes
from tests.helpers.flag_view import Flags, SavedArgv
from tests.helpers.pilot import until
from tests.helpers.simdeploy import settings_for, write_config
from tui.cli import main
from tui.engine import Engine
from tui.lifecycle.flags import FlagChange, current_values
from tui.lifecycle.presets import get_preset
from tui.managers import Report, unreported
from tui.model import Result, Step, StepStatus
from tui.ops import restart as protocol
from tui.ops.change import ChangePlan, ChangeRefused, Refusal, last_ready, moved_since, plan_argv, plan_change

SPECS = list(get_preset("sglang").flags)
ARGV = ["python", "-m", "sglang.launch_server", "--tp-size", "8", "--enable-metrics"]


def sim(now: list[str] | None = None, saved: list[str] | None = None) -> Flags:
    return Flags("sim", list(ARGV if now is None else now), SPECS,
                 manager=SavedArgv({"ready": saved} if saved is not None else {}))


async def refusal(view: Flags, sets: list[str] | None = None, unsets: list[str] | None = None, *,
                  force: bool = False, edits: list[FlagChange] | None = None) -> ChangeRefused:
    plan = await plan_change(view, sets or [], unsets or [], edits=edits or [], force=force)
    assert isinstance(plan, ChangeRefused), plan
    return plan


async def planned(view: Flags, sets: list[str] = [], unsets: list[str] = [],  # noqa: B006 - read only
                  force: bool = False) -> ChangePlan:
    plan = await plan_change(view, sets, unsets, force=force)
    assert isinstance(plan, ChangePlan), plan
    return plan


async def test_a_change_is_the_new_flags_the_old_ones_and_the_diff_in_words() -> None:
    view = sim()
    plan = await planned(view, ["disable-cuda-graph", "tp-size=4"], ["enable-metrics"])
    assert plan.old == tuple(ARGV)
    assert plan.new == ("python", "-m", "sglang.launch_server", "--disable-cuda-graph", "--tp-size", "4")
    assert plan.changes == ("+ --disable-cuda-graph", "- --enable-metrics", "~ --tp-size 8 -> 4")
    assert plan.change == "+ --disable-cuda-graph; - --enable-metrics; ~ --tp-size 8 -> 4"
    assert plan.noops == () and view.reads == 1


async def test_a_plain_restart_plans_no_change_and_is_not_refused() -> None:
    plan = await planned(sim())
    assert plan.new == plan.old and plan.changes == () and plan.describe() == "no flag change"


@pytest.mark.parametrize(("sets", "unsets", "reason", "message"), [
    (["tp-size=4"], ["tp-size"], Refusal.CONTRADICTION, "--set tp-size=4 and --unset tp-size contradict: give one "
                                                        "of them"),
    (["tp-size=4", "tp=2"], [], Refusal.CONTRADICTION, "--set tp-size=4 and --set tp=2 contradict: give one of them"),
    (["disable-cuda-graph", "disable-cuda-graph=false"], [], Refusal.CONTRADICTION,
     "--set disable-cuda-graph and --set disable-cuda-graph=false contradict: give one of them"),
    (["tpsize=8"], [], Refusal.UNKNOWN_FLAG, "unknown flag 'tpsize' (did you mean 'tp-size'?); `bringup flags sim` "
                                             "lists the flags this preset knows"),
    ([], ["enable_metrics"], Refusal.UNKNOWN_FLAG, "unknown flag 'enable_metrics' (did you mean 'enable-metrics'?)"),
    (["tp-size=four"], [], Refusal.BAD_VALUE, "tp-size"),
])
async def test_requests_that_cannot_be_done_are_refused_before_the_flags_are_read(
        sets: list[str], unsets: list[str], reason: Refusal, message: str) -> None:
    view = sim()
    refused = await refusal(view, sets, unsets)
    assert refused.reason is reason and message in refused.message, refused
    assert view.reads == 0  # a typo is said as such even when the host cannot be reached


async def test_a_contradiction_is_refused_even_with_force() -> None:
    assert (await refusal(sim(), ["tp-size=4"], ["tp-size"], force=True)).reason is Refusal.CONTRADICTION


async def test_a_flag_of_another_release_is_named_as_such() -> None:
    offered = [f for f in SPECS if f.name != "disable-cuda-graph"]
    view = Flags("sim", ARGV, SPECS, offered, "SGLang 0.5.23")
    refused = await refusal(view, ["disable-cuda-graph"])
    assert refused.reason is Refusal.OTHER_RELEASE
    assert refused.message.startswith("--disable-cuda-graph is not a flag of SGLang 0.5.23: the server would refuse")
    # unsetting it is fine: any flag bringup knows may be removed
    assert (await planned(Flags("sim", [*ARGV, "--disable-cuda-graph"], SPECS, offered), [],
                          ["disable-cuda-graph"])).changes == ("- --disable-cuda-graph",)


async def test_requests_that_change_nothing_are_refused_unless_forced_and_noted_beside_a_change() -> None:
    refused = await refusal(sim(), ["tp-size=8"], ["skip-server-warmup"])
    assert refused.reason is Refusal.NOTHING_TO_CHANGE
    assert refused.message == ("nothing to change: --tp-size is already '8'; --skip-server-warmup is not set; "
                               "restarting would change no flag (--force restarts anyway)")
    forced = await planned(sim(), ["tp-size=8"], force=True)
    assert current_values(forced.new, SPECS) == current_values(forced.old, SPECS) and forced.noops == ()
    beside = await planned(sim(), ["enable-metrics", "disable-cuda-graph"])
    assert beside.noops == ("--enable-metrics is already on",) and beside.changes == ("+ --disable-cuda-graph",)


async def test_a_dialogs_edits_are_planned_in_the_same_words() -> None:
    refused = await refusal(sim(), edits=[FlagChange("tp-size", "4"), FlagChange("tp-size", None, remove=True)])
    assert refused.message == "--set tp-size=4 and --unset tp-size contradict: give one of them"
    plan = await plan_change(sim(), edits=[FlagChange("disable-cuda-graph", None)])
    assert isinstance(plan, ChangePlan) and plan.changes == ("+ --disable-cuda-graph",)


async def test_moved_since_says_how_the_flags_changed_after_the_plan() -> None:
    view = sim()
    plan = await planned(view, ["disable-cuda-graph"])
    assert await moved_since(view, plan) == []
    view.now = [*ARGV, "--mem-fraction-static", "0.8"]
    assert await moved_since(view, plan) == ["+ --mem-fraction-static 0.8"]


async def test_last_ready_is_the_saved_flags_and_the_way_back() -> None:
    failed = [*ARGV, "--disable-cuda-graph"]
    assert await last_ready(sim(failed)) is None
    good = await last_ready(sim(failed, saved=ARGV))
    assert good is not None and not good.same
    assert good.argv == tuple(ARGV) and good.failed == tuple(failed)
    assert good.flags == {"tp-size": "8", "enable-metrics": None}
    assert good.back == plan_argv(failed, ARGV, SPECS) and good.back.changes == ("- --disable-cuda-graph",)
    assert good.command == "bringup restart sim --unset disable-cuda-graph --yes"
    same = await last_ready(sim(ARGV, saved=ARGV), failed=ARGV)
    assert same is not None and same.same and same.command == ""
    # other arguments differ: --set/--unset cannot say it
    other = await last_ready(sim(saved=[*ARGV[:2], "other.server", *ARGV[3:]]))
    assert other is not None and other.command == ""


async def test_the_cli_and_the_console_refuse_a_contradictory_change_in_the_same_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Both front ends plan through plan_change: the same refusal, word for word, and nothing restarted."""
    said = "--set tp-size=4 and --unset tp-size contradict: give one of them"
    config = write_config(tmp_path)
    rc = await asyncio.to_thread(main, ["--config", str(config), "restart", "sim", "--yes", "--set", "tp-size=4",
                                        "--unset", "tp-size"])
    assert rc == 2 and capsys.readouterr().err.strip() == f"bringup: {said}"

    app, w = console(tmp_path)  # the same deployment, in the console
    async with app.run_test(size=(100, 30)) as pilot:
        notes = record_notes(app)
        app.confirm_restart([FlagChange("tp-size", "4"), FlagChange("tp-size", None, remove=True)])
        assert await until(pilot, lambda: bool(notes))
        assert [(n.message, n.severity) for n in notes] == [(said, "error")]
        assert not app.restarting
    await w.close()


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
