""""Change these flags and restart", planned once for every front end: the CLI's `--set`/`--unset`, the console's
flags dialog and its rollback offer all ask `plan_change` and get the same checks, the same refusals in the same
words, and one diff; the restart protocol then runs the plan under the lock (`restart.run`), refusing it if the
flags are no longer those it was computed from. What is left to a front end is its own: asking for the
confirmation, and printing or drawing.

`last_ready` is the other half: after a failed run, the last flags that reached ready and the change back to them,
which the CLI prints as advice and the console offers as a rollback.
"""

from __future__ import annotations

import enum
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.guard.redact import scrub
from tui.lifecycle.flags import (
    FlagChange,
    apply_changes,
    current_values,
    diff,
    parse_changes,
    remove_flag,
    unknown_flag,
)
from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.lifecycle.secrets import is_secret_flag, redact_text
from tui.ops.config_drift import config_drift
from tui.ops.evidence import EvidenceView, accepted_by, no_evidence, refusal

__all__ = ["ChangePlan", "ChangeRefused", "FlagView", "LastReady", "Refusal", "last_ready", "moved_since",
           "plan_argv", "plan_change"]


class SavedFlags(Protocol):
    async def read_saved_argv(self, which: str) -> list[str] | None: ...


class FlagView(Protocol):
    """What planning a change reads of a deployment: its name, its flags, and the specs that read them."""

    @property
    def name(self) -> str: ...

    @property
    def flag_specs(self) -> Sequence[FlagSpec]:
        """Every release's flags: what any argv is read with, and what `--unset` may name."""
        ...

    @property
    def offered_flags(self) -> Sequence[FlagSpec]:
        """The run's release's flags: what `--set` may name."""
        ...

    def release_words(self) -> str: ...

    async def argv(self) -> list[str]: ...

    @property
    def configured_command(self) -> list[str] | None:
        """The config's command line, where the manager keeps flags apart from it (config_drift.py)."""
        ...

    @property
    def manager(self) -> SavedFlags:
        """Where the protocol saved the last flags that reached ready."""
        ...


class Refusal(enum.StrEnum):
    """Why a change is not planned: each has one wording, the same in every front end."""

    #: a flag no spec knows (a typo, or one that needs declaring in extra_flags)
    UNKNOWN_FLAG = "unknown-flag"
    #: a flag of another release than the run's: its server would refuse the command line
    OTHER_RELEASE = "other-release"
    #: a value that does not fit its flag
    BAD_VALUE = "bad-value"
    #: two requests for one flag that cannot both be done: which is meant is the operator's to say (no --force)
    CONTRADICTION = "contradiction"
    #: every request leaves the flags as they are (--force restarts anyway)
    NOTHING_TO_CHANGE = "nothing-to-change"
    #: the host gives no GPU readings, so the release wait could not verify anything: the restart would stop the
    #: server and then refuse to start it (--without-gpu-evidence goes on all the same)
    NO_GPU_EVIDENCE = "no-gpu-evidence"


@dataclass(frozen=True, slots=True)
class ChangeRefused:
    reason: Refusal
    message: str


@dataclass(frozen=True, slots=True)
class ChangePlan:
    """The flags to restart with, and the flags they were computed (and perhaps confirmed) from: the protocol
    refuses the plan if the flags are no longer `old` by the time it holds the lock, since writing `new` then would
    silently undo another operator's change."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    #: the change in words, one line a flag (`+ --disable-cuda-graph`), secrets' values `***` (`shown_diff`): what
    #: is confirmed and noted in the lock
    changes: tuple[str, ...]
    #: the requests that change nothing, each with why (`--unset X` when X is not set), said as notes
    noops: tuple[str, ...] = ()
    #: the config's command edited since the flags were saved (config_drift.py): what runs instead, in lines
    #: said before acting
    drift: tuple[str, ...] = ()

    @property
    def change(self) -> str:
        """The change on one line, "" for none: what the lock's record says this restart is doing."""
        return "; ".join(self.changes)

    def describe(self) -> str:
        return self.change or "no flag change"


@dataclass(frozen=True, slots=True)
class _Asked:
    """One request as the operator said it (`--set tp-size=4`), and what it asks."""

    said: str
    change: FlagChange


def _said(change: FlagChange) -> str:
    """A dialog's edit in the words `--set`/`--unset` take, so that a refusal reads the same in every front end."""
    if change.remove:
        return f"--unset {change.name}"
    return f"--set {change.name}" + ("" if change.value is None else f"={change.value}")


def _spec_names(specs: Sequence[FlagSpec]) -> dict[str, FlagSpec]:
    return {n: f for f in specs for n in (f.name, *f.aliases)}


def _from_words(view: FlagView, sets: Sequence[str], unsets: Sequence[str]) -> list[_Asked] | ChangeRefused:
    """`--set` names the release's own flags (the newest's until the run says which it is), `--unset` any flag
    bringup knows. An unknown flag is refused, never written: bringup cannot tell a switch from an option that
    takes a value without its spec, and a server given an option it does not know exits at once (the running one
    already stopped). A close known name is suggested (`tpsize` -> `tp-size`). A flag of another release is named
    as such: SGLang 0.5.20 removed `--cuda-graph-max-bs`."""
    listing = f"bringup flags {view.name}"
    for items, specs, others in ((sets, view.offered_flags, view.flag_specs), (unsets, view.flag_specs, ())):
        known, other = _spec_names(specs), _spec_names(others)
        for item in items:
            flag = item.partition("=")[0].strip().lstrip("-")
            if flag not in known and flag in other:
                return ChangeRefused(Refusal.OTHER_RELEASE, f"--{flag} is not a flag of {view.release_words()}: the "
                                     f"server would refuse its command line; `{listing}` lists the flags it takes")
            if flag not in known:
                return ChangeRefused(Refusal.UNKNOWN_FLAG, unknown_flag(flag, list(known), listing))
    try:
        return [*(_Asked(f"--set {item}", parse_changes([item], [], view.offered_flags)[0]) for item in sets),
                *(_Asked(f"--unset {item}", parse_changes([], [item], view.flag_specs)[0]) for item in unsets)]
    except FlagValueError as e:
        return ChangeRefused(Refusal.BAD_VALUE, str(e))


def _contradiction(asked: Sequence[_Asked]) -> ChangeRefused | None:
    """Two requests for the same flag that cannot both be done (`--set tp-size=4 --unset tp-size`, or two
    values): the first such pair in words."""
    first: dict[str, _Asked] = {}
    for a in asked:
        seen = first.setdefault(a.change.name, a)
        if seen.change != a.change:
            return ChangeRefused(Refusal.CONTRADICTION, f"{seen.said} and {a.said} contradict: give one of them")
    return None


def _nothing_to_change(old: Sequence[str], asked: Sequence[_Asked], specs: Sequence[FlagSpec]) -> list[str]:
    """For each request that leaves the flags' values as they are, why (`--unset X`: not set)."""
    now = current_values(old, specs)
    why = []
    for a in asked:
        ch = a.change
        if current_values(apply_changes(old, [ch], specs), specs) == now:
            why.append(f"--{ch.name} is not set" if ch.remove else
                       f"--{ch.name} is already " + ("on" if ch.value is None else repr(now.get(ch.name))))
    return why


def plan_argv(old: Sequence[str], new: Sequence[str], specs: Sequence[FlagSpec]) -> ChangePlan:
    """The plan from the flags as they are to given ones (a rollback to the last flags that reached ready)."""
    return ChangePlan(tuple(old), tuple(new), shown_diff(old, new, specs))


def _plan(old: Sequence[str], asked: Sequence[_Asked], specs: Sequence[FlagSpec], *,
          force: bool) -> ChangePlan | ChangeRefused:
    """The plan over flags already read: the pure part of `plan_change`."""
    try:
        new = apply_changes(old, [a.change for a in asked], specs)
    except FlagValueError as e:
        return ChangeRefused(Refusal.BAD_VALUE, str(e))
    noops = _nothing_to_change(old, asked, specs)
    changed = current_values(new, specs) != current_values(old, specs)
    if asked and not changed and not force:
        return ChangeRefused(Refusal.NOTHING_TO_CHANGE, f"nothing to change: {'; '.join(noops)}; restarting would "
                             "change no flag (--force restarts anyway)")
    return ChangePlan(tuple(old), tuple(new), shown_diff(old, new, specs), tuple(noops) if changed else ())


async def plan_change(view: FlagView, sets: Sequence[str] = (), unsets: Sequence[str] = (), *,
                      edits: Sequence[FlagChange] = (), force: bool = False, gpus: EvidenceView | None = None,
                      without_gpu_evidence: bool = False) -> ChangePlan | ChangeRefused:
    """The restart that applies `--set`/`--unset` words (the CLI) or a dialog's `edits` (the console) to the flags
    as they are now, or why not. The requests are checked before the flags are read: a typo is said as such even
    when the host cannot be reached. A restart with no request is a plain restart; one whose requests change
    nothing is refused unless `force` (the console's confirmation, which shows "no flag change", is its force).

    With `gpus` (the engine the restart will run on), a host that gives no GPU readings is refused too
    (NO_GPU_EVIDENCE), before anything is confirmed, unless `without_gpu_evidence` or the deployment's
    unverified_release_grace_s accepts it: the protocol refuses it again under the lock (tui/ops/evidence.py)."""
    asked = _from_words(view, sets, unsets) if sets or unsets else []
    if isinstance(asked, ChangeRefused):
        return asked
    asked += [_Asked(_said(e), e) for e in edits]
    refused = _contradiction(asked)
    if refused is not None:
        return refused
    old = await view.argv()
    drift = await config_drift(view.configured_command, old, view.manager, view.flag_specs)
    plan = _plan(list(drift.run) if drift else old, asked, view.flag_specs, force=force)
    if isinstance(plan, ChangePlan) and drift is not None:
        # the plan goes from the flags as saved (the protocol checks them under the lock) to the reconciled ones
        plan = ChangePlan(tuple(old), plan.new, shown_diff(old, plan.new, view.flag_specs), plan.noops,
                          drift.running(plan.new).lines)  # `runs:` is what this restart runs, its change made
    if isinstance(plan, ChangePlan) and gpus is not None and not accepted_by(gpus.dep, without_gpu_evidence):
        blind = await no_evidence(gpus)
        if blind is not None:
            return ChangeRefused(Refusal.NO_GPU_EVIDENCE, refusal(blind, "restart"))
    return plan


async def moved_since(view: FlagView, plan: ChangePlan) -> list[str]:
    """How the flags changed since `plan` was computed from them ([] for not at all): a front end says it before
    acting, and the protocol refuses the plan under the lock all the same."""
    now = await view.argv()
    if list(now) == list(plan.old):
        return []
    return diff(list(plan.old), now, view.flag_specs) or ["the command line changed"]


# ---------------------------------------------------------------------------------------------------- last ready


@dataclass(frozen=True, slots=True)
class LastReady:
    """The last flags that reached ready under bringup (saved by the protocol at each ready), beside the flags that
    failed: what a rollback goes back to, and how."""

    name: str
    argv: tuple[str, ...]
    failed: tuple[str, ...]
    #: the flags bringup knows in `argv`: name -> value (None for a switch)
    flags: dict[str, str | None]
    #: going back, as a plan from the failed flags
    back: ChangePlan
    #: the `bringup restart ... --yes` that goes back, or "" when --set/--unset cannot say it (or it would hold a
    #: secret's value: it is printed)
    command: str

    @property
    def same(self) -> bool:
        """The failed flags are the last good ones: the cause is no flag change, and there is nothing to go back to."""
        return list(self.argv) == list(self.failed)


def _others(argv: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
    """The arguments no flag spec covers (the program, the model, the port...)."""
    rest = list(argv)
    for spec in specs:
        rest = remove_flag(rest, spec)
    return rest


def shown_diff(old: Sequence[str], new: Sequence[str], specs: Sequence[FlagSpec]) -> tuple[str, ...]:
    """The change in words with every secret's value `***` (`~ --api-key *** -> ***`): a plan's words are shown as
    they are by every front end (the console's confirmation, in a served console's browser too), noted in the lock
    and recorded, so they are redacted once, here, where they are made."""
    return tuple(redact_text(line) for line in diff(old, new, specs))


def _back_to(name: str, failed: Sequence[str], good: Sequence[str], specs: Sequence[FlagSpec]) -> str:
    """The `bringup restart` that goes from the failed flags back to the good ones, or "" when --set/--unset cannot
    say it (other arguments differ, or a saved value this bringup would not write), or when it would have to give a
    secret's value: this command is printed, and a command with `***` in it would set `***` (`--rollback` goes back
    without printing it)."""
    now, then = current_values(failed, specs), current_values(good, specs)
    unsets = [flag for flag in now if flag not in then]
    sets = [flag if value is None else f"{flag}={value}" for flag, value in then.items()
            if flag not in now or now[flag] != value]
    if not (sets or unsets) or _others(failed, specs) != _others(good, specs):
        return ""
    try:
        if current_values(apply_changes(failed, parse_changes(sets, unsets, specs), specs), specs) != then:
            return ""
    except FlagValueError:
        return ""
    words = [w for flag in unsets for w in ("--unset", flag)] + [w for item in sets for w in ("--set", item)]
    changed = [flag for flag, value in then.items() if value is not None and (flag not in now or now[flag] != value)]
    if any(is_secret_flag(flag) for flag in changed) or any(scrub(w) != w for w in words):
        return ""
    return shlex.join(["bringup", "restart", name, *words, "--yes"])


async def last_ready(view: FlagView, failed: Sequence[str] | None = None) -> LastReady | None:
    """The last flags that reached ready, or None when none have under bringup yet. `failed`: the flags that just
    failed (read now when not given). A manager's or transport's error is the caller's to say."""
    good = await view.manager.read_saved_argv("ready")
    if good is None:
        return None
    now = list(failed) if failed is not None else await view.argv()
    specs = view.flag_specs
    return LastReady(view.name, tuple(good), tuple(now), current_values(good, specs), plan_argv(now, good, specs),
                     _back_to(view.name, now, good, specs))
