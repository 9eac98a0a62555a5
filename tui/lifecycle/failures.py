"""Declaring a failure and growing its excerpt: the phase it belongs to, its kind and hint, the words for an exit.

A failure is declared on its first fatal line and told in full as the rest of its traceback arrives, so its phase,
kind and hint are decided again from the whole excerpt each time it grows.
"""

from __future__ import annotations

import signal
from dataclasses import replace

from tui.lifecycle.error_blocks import MAX_EXCERPT
from tui.lifecycle.presets import Preset
from tui.lifecycle.state import RANK, Excerpt, LifecycleState, enter
from tui.model import Failure, FailureKind, Phase, Transition, UnitState

_INFERRED = "(phase inferred from the traceback)"
#: the sub-state of a container the kernel's OOM killer ended (container_state.py), and the hint for it
OOM_KILLED = "oom-killed"
OOM_KILLED_HINT = ("the container ran out of host memory (RAM, not GPU memory) at its memory limit: raise or remove "
                   "its --memory limit (`mem_limit:` in Compose; `docker inspect` shows HostConfig.Memory), or lower "
                   "what the server holds in host memory (CPU offload, swap space, tokenizer workers)")


#: SIGKILL leaves no line in the server's log: who sends it
SIGKILL_HINT = ("SIGKILL leaves no line in the server's own log: look for the kernel's OOM killer (host RAM, not GPU "
                "memory: `journalctl -k | grep -i 'killed process'` or `dmesg`), a stop that ran past its timeout "
                "(systemd's TimeoutStopSec, `docker stop -t`), or a `kill -9` from outside")


def fail(s: LifecycleState, preset: Preset, at: float, excerpt: tuple[str, ...], kind: FailureKind | None,
         open_: bool) -> LifecycleState:
    """The run failed at `at`; `kind` None: the excerpt says which kind."""
    phase: Phase = s.phase if s.phase not in (Phase.FAILED, Phase.STOPPED, Phase.STOPPING) else Phase.STARTING
    inferred = preset.infer_phase("\n".join(excerpt), phase)
    if inferred != phase and s.phase in RANK and RANK.get(inferred, 0) > RANK[s.phase]:
        # a log that starts mid-way: the traceback says where it was; record that phase (reached by now)
        s = enter(s, inferred, at, _INFERRED)
    phase = inferred
    if kind is None:
        kind = preset.classify("\n".join(excerpt), phase)
    f = Failure(phase=phase, kind=kind, excerpt=excerpt[-MAX_EXCERPT:], hint=preset.hint(kind, phase,
                s.flag_dict()), at=at)
    s = replace(s, failure=f, excerpt=Excerpt.OPEN if open_ else Excerpt.CLOSED)
    return enter(s, Phase.FAILED, at, excerpt[-1] if excerpt else "")


def extend_failure(s: LifecycleState, preset: Preset, text: str) -> LifecycleState:
    """One more line of the failure's traceback: its later frames may tell the phase and kind better."""
    assert s.failure is not None
    excerpt = (*s.failure.excerpt, text)[-MAX_EXCERPT:]
    joined = "\n".join(excerpt)
    phase = s.failure.phase
    if len(s.timeline) >= 2 and s.timeline[-2].phase == Phase.STARTING:
        phase = preset.infer_phase(joined, Phase.STARTING)
    kind = preset.classify(joined, phase)
    keep = kind == s.failure.kind == FailureKind.EXIT and s.failure.hint == SIGKILL_HINT  # what the exit said
    hint = s.failure.hint if keep else preset.hint(kind, phase, s.flag_dict())
    f = replace(s.failure, excerpt=excerpt, kind=kind, phase=phase, hint=hint)
    timeline = s.timeline
    if phase != s.failure.phase and timeline and timeline[-1].phase == Phase.FAILED and \
            all(t.phase != phase for t in timeline):
        # the traceback's later frames told where it failed: show that phase before the failure
        timeline = (*timeline[:-1], Transition(phase, timeline[-1].at, _INFERRED), timeline[-1])
    return replace(s, failure=f, timeline=timeline)


def cause_arrived(s: LifecycleState, preset: Preset, excerpt: tuple[str, ...]) -> LifecycleState:
    """The exit was seen before its cause arrived (journals over SSH lag the unit state): the cause wins."""
    assert s.failure is not None
    phase = preset.infer_phase("\n".join(excerpt), s.failure.phase)
    kind = preset.classify("\n".join(excerpt), phase)
    f = replace(s.failure, excerpt=excerpt[-MAX_EXCERPT:], kind=kind, phase=phase,
                hint=preset.hint(kind, phase, s.flag_dict()))
    return replace(s, failure=f, excerpt=Excerpt.OPEN)


def exited(s: LifecycleState, preset: Preset, u: UnitState, end: float) -> LifecycleState:
    """The unit ended unasked while starting or serving: a failure, told by the error block that ends the log if
    there is one, else by the log's last lines and how the process ended."""
    if u.sub == OOM_KILLED:
        return _oom_killed(s, preset, u, end, s.blocks.exit_lines())
    cause = s.blocks.recent()
    kind = preset.classify("\n".join(cause), s.phase) if cause else FailureKind.EXIT
    if kind == FailureKind.UNKNOWN:
        kind = FailureKind.EXIT
    shown = s.blocks.exit_lines()
    words = exit_words(u.exit_status, s.session.log_source, shown=bool(shown), explained=kind != FailureKind.EXIT,
                       when=f" on node {u.ended_on}" if u.ended_on else "")
    s = fail(s, preset, end, (*shown, words), kind, open_=True)
    if kind == FailureKind.EXIT and u.exit_status in (-signal.SIGKILL, 128 + signal.SIGKILL) and s.failure:
        s = replace(s, failure=replace(s.failure, hint=SIGKILL_HINT))
    return replace(s, excerpt=Excerpt.AWAITING_CAUSE if kind == FailureKind.EXIT else Excerpt.OPEN)


def failed_before_first_look(s: LifecycleState, preset: Preset, u: UnitState, at: float) -> LifecycleState:
    """The first reading finds the unit failed already: no log of it was seen, so the words say where to read."""
    if u.sub == OOM_KILLED:
        return _oom_killed(replace(s, invocation=u.invocation), preset, u, at, ())
    lines = (exit_words(u.exit_status, s.session.log_source, shown=False, when=" before bringup first looked"),)
    return fail(replace(s, invocation=u.invocation), preset, at, lines, FailureKind.EXIT, open_=False)


def _oom_killed(s: LifecycleState, preset: Preset, u: UnitState, end: float,
                shown: tuple[str, ...]) -> LifecycleState:
    """The kernel's OOM killer ended it at its container's memory limit: that is the cause, whatever the log says."""
    words = exit_words(u.exit_status, explained=True).replace("the server process", "the container", 1) + \
        ": killed by the kernel's OOM killer at the container's memory limit"
    s = fail(s, preset, end, (*shown, words), FailureKind.OOM, open_=False)
    assert s.failure is not None
    return replace(s, failure=replace(s.failure, hint=OOM_KILLED_HINT))


def exit_words(status: int | None, log_source: str = "", *, shown: bool = True, explained: bool = False,
               when: str = "") -> str:
    """How the server process ended, in words that fit any service manager (systemd, a process, docker); unless
    the lines above it explain the exit, where to read why."""
    if status is None:
        what = "the server process exited"
    elif status < 0:
        what = f"the server process was killed by signal {-status}{_signame(-status)}"
    elif status > 128 and _signame(status - 128):
        what = f"the server process exited with status {status} (killed by signal {status - 128}" \
               f"{_signame(status - 128)})"
    else:
        what = f"the server process exited with status {status}"
    what += when
    if explained:
        return what
    where = f" of {log_source}" if log_source else " of its log"
    if shown:
        return f"{what}; no error line was recognised: the lines above are the last{where}"
    return f"{what}; no error line was recognised: read the last lines{where}"


def _signame(n: int) -> str:
    try:
        return f", {signal.Signals(n).name}"
    except ValueError:
        return ""
