"""Declaring a failure and growing its excerpt: the phase it belongs to, its kind and hint, the words for an exit.

A failure is declared on its first fatal line and told in full as the rest of its traceback arrives, so its phase,
kind and hint are decided again from the whole excerpt each time it grows.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from dataclasses import replace

from tui.lifecycle.error_blocks import MAX_EXCERPT
from tui.lifecycle.lines import clean
from tui.lifecycle.presets import HintFn, Preset
from tui.lifecycle.presets.common import bad_args_hint
from tui.lifecycle.state import BEFORE_READY, RANK, STARTUP, Excerpt, LifecycleState, enter
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


#: a traceback's last line, the exception that ended it (`torch.OutOfMemoryError: CUDA out of memory...`,
#: `Exception: Capture cuda graph failed: ...`, `KeyboardInterrupt`)
_FINAL_EXCEPTION = re.compile(r"[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure)(?::|$)")
_EXCEPTION_WORDS = ("Error", "Exception", "Interrupt", "Exit", "Failure")
#: a warning, whoever prints it: PyTorch's C++ log (`[rank0]:[W508 00:41:45.803613446 ProcessGroupNCCL.cpp:1496]
#: Warning: WARNING: destroy_process_group() was not called before program exit, ...`, printed by every process that
#: used NCCL as it exits, crash or not: vllm-project/vllm#17386; `W508` is May 8), Python's warnings module
#: (`file.py:12: UserWarning:`)
_NATIVE_WARNING = re.compile(r"^(?:\[rank\d+\]:)?\[W\d{3,4} \d\d:\d\d:\d\d|^\S+\.py:\d+: \w*Warning: ")


def _hint(s: LifecycleState, preset: Preset) -> HintFn:
    """The hints of this run's release (its flags); while the run has not said it, the release the deployment's
    last run said (what `--set` validates against and the record's way back spells); else the newest's worded
    for any release (tui/lifecycle/presets/per_release.py)."""
    said = s.release.version if s.release is not None else s.session.release_before
    return preset.for_version(said or None).hint


def _hint_for(s: LifecycleState, preset: Preset, kind: FailureKind, phase: Phase, excerpt: Sequence[str]) -> str:
    """The hint for a failure; a refused command line's names the flag argparse refused (its excerpt says which),
    so the operator is told what to unset or fix, not to read the usage dump."""
    if kind == FailureKind.BAD_ARGS:
        return bad_args_hint("\n".join(clean(x).text for x in excerpt))
    return _hint(s, preset)(kind, phase, s.flag_dict())


def _noise(line: str, preset: Preset) -> bool:
    """A line that does not say what went wrong: a warning (a logger's WARNING, PyTorch's exit warnings), or what a
    failure does to the rest of the server (the preset's consequence lines: SGLang's SIGQUIT to the parent)."""
    if preset.consequence is not None and preset.consequence.search(line):
        return True
    if "Warn" not in line and "WARN" not in line:
        return False
    c = clean(line)
    if preset.fatal.search(c.text):
        return False  # a fatal line logged as a warning says what went wrong (vLLM's `engine core exited unexpectedly`)
    return c.level == "WARNING" or bool(_NATIVE_WARNING.search(c.text))


def classify(preset: Preset, excerpt: Sequence[str], phase: Phase) -> FailureKind:
    """The failure's kind, from what caused it: the exception that ended the run (a traceback's last line, the last
    first: a chained traceback ends in what ended it, an API server's `Engine core initialization failed` follows the
    engine's own), then the rest of the cause block. Noise (warnings, consequences) never decides it: PyTorch's exit
    warning names ProcessGroupNCCL after any failure of a process that used NCCL."""
    cause = [x for x in excerpt if not _noise(x, preset)]
    for line in reversed(cause):
        if any(w in line for w in _EXCEPTION_WORDS):
            text = clean(line).text
            if _FINAL_EXCEPTION.match(text):
                for c in preset.classifiers:
                    if c.pattern.search(text):
                        return c.kind
    return preset.classify("\n".join(cause), phase)


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
        kind = classify(preset, excerpt, phase)
    f = Failure(phase=phase, kind=kind, excerpt=excerpt[-MAX_EXCERPT:], hint=_hint_for(s, preset, kind, phase, excerpt),
                at=at)
    s = replace(s, failure=f, excerpt=Excerpt.OPEN if open_ else Excerpt.CLOSED)
    return enter(s, Phase.FAILED, at, excerpt[-1] if excerpt else "")


def extend_failure(s: LifecycleState, preset: Preset, text: str) -> LifecycleState:
    """One more line of the failure's traceback: its later frames may tell the phase and kind better."""
    assert s.failure is not None
    excerpt = (*s.failure.excerpt, text)[-MAX_EXCERPT:]
    joined = "\n".join(excerpt)
    phase = s.failure.phase
    if len(s.timeline) >= 2 and s.timeline[-2].phase in (Phase.STARTING, Phase.LOADING, Phase.GRAPH_CAPTURE):
        # the phase the lines reached, placed again by the frames read so far (a mid-way log's, or profiling's)
        phase = preset.infer_phase(joined, s.timeline[-2].phase)
    kind = classify(preset, excerpt, phase)
    keep = kind == s.failure.kind == FailureKind.EXIT and s.failure.hint == SIGKILL_HINT  # what the exit said
    hint = s.failure.hint if keep else _hint_for(s, preset, kind, phase, excerpt)
    f = replace(s.failure, excerpt=excerpt, kind=kind, phase=phase, hint=hint)
    timeline = s.timeline
    if phase != s.failure.phase and timeline and timeline[-1].phase == Phase.FAILED and \
            all(t.phase != phase for t in timeline) and \
            (len(timeline) < 2 or RANK.get(phase, 0) > RANK.get(timeline[-2].phase, 0)):
        # the traceback's later frames told where it failed: show that phase before the failure
        timeline = (*timeline[:-1], Transition(phase, timeline[-1].at, _INFERRED), timeline[-1])
    return replace(s, failure=f, timeline=timeline)


def cause_arrived(s: LifecycleState, preset: Preset, excerpt: tuple[str, ...]) -> LifecycleState:
    """The exit was seen before its cause arrived (journals over SSH lag the unit state): the cause wins."""
    assert s.failure is not None
    phase = preset.infer_phase("\n".join(excerpt), s.failure.phase)
    kind = classify(preset, excerpt, phase)
    f = replace(s.failure, excerpt=excerpt[-MAX_EXCERPT:], kind=kind, phase=phase,
                hint=_hint_for(s, preset, kind, phase, excerpt))
    return replace(s, failure=f, excerpt=Excerpt.OPEN)


#: a stop line that says the stop was SIGTERM: SGLang's handler (`SIGTERM received. signum=...`), vLLM's engine core
#: (`[shutdown] EngineCore: trigger received signal=SIGTERM`, v1/engine/core.py 0.25.0+) and its API server's
#: `raise KeyboardInterrupt("terminated")` while it starts (entrypoints/openai/api_server.py 0.8.5-0.25.0,
#: entrypoints/launchers/api_server/entry.py 0.30.0-0.34.0), which Python prints as the traceback's last line
_SIGTERM_STOP = re.compile(r"\bSIGTERM\b|^KeyboardInterrupt: terminated$")
#: exit statuses of a process SIGTERM ended with no handler: killed by the signal, or a container's 128 + 15
_SIGTERM_STATUS = (-signal.SIGTERM, 128 + signal.SIGTERM)


def sigterm_words(phase: Phase) -> str:
    """The reason a run that was starting up stopped, as its timeline says it."""
    return f"terminated by SIGTERM while {phase}"


def stop_reason(s: LifecycleState) -> str:
    """Why a stopping run stopped, when its stop line says SIGTERM came while it was starting up (a stop, not a
    crash: `terminated by SIGTERM while loading`); empty otherwise."""
    t = s.timeline
    if len(t) >= 2 and t[-1].phase == Phase.STOPPING and t[-2].phase in STARTUP and _SIGTERM_STOP.search(t[-1].line):
        return sigterm_words(t[-2].phase)
    return ""


def terminated(s: LifecycleState, u: UnitState, end: float) -> LifecycleState | None:
    """A run that was starting up, ended by SIGTERM without a word (SGLang has no SIGTERM handler until its
    tokenizer manager's event loop runs: the process dies of the signal): stopped by whoever sent it. None when the
    unit ended some other way, or only in part (one node of several: the others run on, a deployment broken)."""
    if s.phase not in STARTUP or u.exit_status not in _SIGTERM_STATUS or u.lingering:
        return None
    return enter(s, Phase.STOPPED, end, sigterm_words(s.phase))


def stop_arrived(s: LifecycleState, preset: Preset, text: str) -> LifecycleState | None:
    """The exit was seen before the line that says it was a clean stop (journals over SSH lag the unit state; vLLM
    exits by its own KeyboardInterrupt, SIGINT's status, right after printing it): a stop, as when the line comes
    first. None when the failure is no unexplained exit, the line is no stop line, or a node runs on."""
    f = s.failure
    if f is None or f.kind != FailureKind.EXIT or preset.stopping is None or not preset.stopping.search(text):
        return None
    if s.unit is not None and s.unit.lingering:
        return None
    timeline = s.timeline[:-1] if s.timeline and s.timeline[-1].phase == Phase.FAILED else s.timeline
    s = replace(s, failure=None, excerpt=Excerpt.CLOSED, timeline=timeline,
                phase=timeline[-1].phase if timeline else Phase.STARTING)
    s = enter(s, Phase.STOPPING, f.at, text)
    return enter(s, Phase.STOPPED, f.at, stop_reason(s))


def exited(s: LifecycleState, preset: Preset, u: UnitState, end: float) -> LifecycleState:
    """The unit ended unasked while starting or serving: a failure, told by the error block that ends the log if
    there is one, else by the log's last lines and how the process ended."""
    if u.sub == OOM_KILLED:
        return _oom_killed(s, preset, u, end, s.blocks.exit_lines())
    cause = s.blocks.recent()
    kind = classify(preset, cause, s.phase) if cause else FailureKind.EXIT
    if kind == FailureKind.UNKNOWN:
        kind = FailureKind.EXIT
    shown = s.blocks.exit_lines()
    words = exit_words(u.exit_status, s.session.log_source, shown=bool(shown), explained=kind != FailureKind.EXIT,
                       when=f" on node {u.ended_on}" if u.ended_on else "")
    s = fail(s, preset, end, (*shown, words), kind, open_=True)
    if kind == FailureKind.EXIT and u.exit_status in (-signal.SIGKILL, 128 + signal.SIGKILL) and s.failure:
        s = replace(s, failure=replace(s.failure, hint=SIGKILL_HINT))
    return replace(s, excerpt=Excerpt.AWAITING_CAUSE if kind == FailureKind.EXIT else Excerpt.OPEN)


def ended_by_scheduler(s: LifecycleState, preset: Preset, u: UnitState, end: float) -> LifecycleState:
    """A scheduler ended the run and said why (`UnitState.verdict`: a time limit, a node lost, a preemption, a cancel
    by someone else, host memory): that is the failure's kind and hint, its words after the server's last lines,
    and it stands over what the log said of the end (a server killed at its time limit may log an error on its way
    out; a worker's NCCL error follows its peer's node lost). An exit code alone (EXIT) is an exit like any other:
    the server's own error, when its log has one, is the cause. Seen ending first (Slurm's COMPLETING, a SIGTERM
    line), the failure is in the phase the run was in before. Said once: the word repeated at each reading is no
    news."""
    v = u.verdict
    assert v is not None
    f = s.failure
    if s.phase == Phase.FAILED and f is not None:
        if v.kind == FailureKind.EXIT or (f.kind == v.kind and v.words in f.excerpt):
            return s
        return replace(s, failure=replace(f, kind=v.kind, hint=v.hint, excerpt=(*f.excerpt, v.words)[-MAX_EXCERPT:]),
                       excerpt=Excerpt.CLOSED)
    live = next((t.phase for t in reversed(s.timeline) if t.phase in (*BEFORE_READY, Phase.READY)), Phase.STARTING)
    if v.kind == FailureKind.EXIT:
        return exited(replace(s, phase=live), preset, replace(u, verdict=None), end)
    excerpt = (*s.blocks.exit_lines(), v.words)[-MAX_EXCERPT:]
    s = replace(s, phase=live, failure=Failure(live, v.kind, excerpt, v.hint, end), excerpt=Excerpt.CLOSED)
    return enter(s, Phase.FAILED, end, v.words)


FIRST_LOOK = " before bringup first looked"


def failed_before_first_look(s: LifecycleState, preset: Preset, u: UnitState, at: float) -> LifecycleState:
    """The first reading finds the unit failed already: no log of it was seen, so the words say where to read."""
    if u.sub == OOM_KILLED:
        return _oom_killed(replace(s, invocation=u.invocation), preset, u, at, ())
    lines = (exit_words(u.exit_status, s.session.log_source, shown=False, when=FIRST_LOOK),)
    s = fail(replace(s, invocation=u.invocation), preset, at, lines, FailureKind.EXIT, open_=False)
    return replace(s, excerpt=Excerpt.AWAITING_LOG)


def lines_after_exit(s: LifecycleState, preset: Preset) -> LifecycleState:
    """A line of a run whose exit was seen before its log was: read back after bringup first looked at a run that
    had exited already (AWAITING_LOG), or lagging behind the exit (AWAITING_CAUSE: the log's reader was behind the
    service manager on a loaded host, and no line is the fatal one that would name the cause). The excerpt becomes
    the log's last lines, as when the log came first: a server that died at import showed only where to read why."""
    assert s.failure is not None and s.unit is not None
    node = f" on node {s.unit.ended_on}" if s.unit.ended_on else ""
    when = FIRST_LOOK if s.excerpt == Excerpt.AWAITING_LOG else node
    lines = s.blocks.exit_lines()
    kind = classify(preset, lines, s.failure.phase) if lines else FailureKind.EXIT
    if kind == FailureKind.UNKNOWN:
        kind = FailureKind.EXIT
    words = exit_words(s.unit.exit_status, s.session.log_source, shown=bool(lines),
                       explained=kind != FailureKind.EXIT, when=when)
    hint = s.failure.hint if kind == s.failure.kind else _hint_for(s, preset, kind, s.failure.phase, lines)
    return replace(s, failure=replace(s.failure, excerpt=(*lines, words)[-MAX_EXCERPT:], kind=kind, hint=hint))


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
