"""One plan for "change these flags and restart" (tui/ops/change.py): its refusals, its no-ops and its diff, the last
flags that reached ready, the same words for a dialog's edits. The CLI and the console refusing alike:
tests/console/test_change_plan_words.py; the protocol running a plan on the simulated server: tests/e2e/
test_change_plan.py."""

from __future__ import annotations

import pytest

from tests.helpers.flag_view import Flags, SavedArgv
from tui.lifecycle.flags import FlagChange, current_values
from tui.lifecycle.presets import get_preset
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
