"""A wait's events as text lines or JSON Lines, and its exit code: what `bringup wait` for one deployment
(follow.py) and for several (fleet.py) print alike.

Text: the phases on stdout, one line each, and everything else (problems, STALLED, the failure, why it ended) on
stderr, so `bringup wait k26 > phases.txt` keeps only the phases. JSON: every event a line on stdout, and the last
line always says how the wait ended (`{"result": ...}`), whatever came before.

A wait for several deployments prints their phases in the order of their times (`Chronicle`): each deployment's
log is read at its own pace, the history of a run under way arrives in a burst, so a line is held until no
deployment can still report an earlier one.
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from collections.abc import Callable

from tui.exit_codes import ExitCode
from tui.lifecycle.eta import eta_words
from tui.model import NoEta, Phase, PhaseEta
from tui.ops.wait import (
    BecameReady,
    FailureFound,
    FoundStopped,
    GaveUp,
    PhaseReached,
    ProblemNoticed,
    StallNoticed,
    TimedOut,
    WaitEvent,
    WaitOutcome,
)

from .eta_report import eta_fields
from .report import fmt_s, print_failure

#: the ETA of a run as it stood when it entered a phase (the phase, and when it was entered)
EtaOnEntry = Callable[[Phase, float], PhaseEta | NoEta | None]


class Chronicle:
    """The phase lines of a wait for several deployments, printed in the order of their times: each is held until
    `release` says no earlier one can still come (the caller knows when each deployment's history is in)."""

    def __init__(self) -> None:
        self._held: list[tuple[float, int, Callable[[], None]]] = []
        self._n = 0

    def hold(self, at: float, say: Callable[[], None]) -> None:
        self._n += 1
        heapq.heappush(self._held, (at, self._n, say))

    def release(self, until: float = float("inf")) -> None:
        """Print, in order of time, every line held whose time is `until` or earlier."""
        while self._held and self._held[0][0] <= until:
            heapq.heappop(self._held)[2]()


class WaitLines:
    """Prints a wait's events for the deployment `name` as they come: an `on_event` for `tui.ops.wait.wait`.
    With a `chronicle` (a wait for several), its phase lines go there, to be printed in order with the others'."""

    def __init__(self, name: str, as_json: bool, *, one_of_several: bool = False,
                 chronicle: Chronicle | None = None, eta: EtaOnEntry | None = None) -> None:
        self.name = name
        #: the ETA as it stood when a phase was entered (from the deployment's past runs), for its phase line
        self.eta = eta
        self._no_eta_said = False
        self.as_json = as_json
        #: `bringup wait a b c`: every line says whose it is (a phase line, the failure, the timeout)
        self.tagged = one_of_several
        self.chronicle = chronicle
        #: the time of the last phase reported, and when (monotonic) it was
        self.last_at: float | None = None
        self.heard_at: float | None = None

    def _json(self, obj: dict[str, object]) -> None:
        print(json.dumps({"deployment": self.name, **obj}), flush=True)

    def _tag(self) -> str:
        return f"{self.name}: " if self.tagged else ""

    def _say(self, text: str) -> None:
        print(f"bringup: {self.name}: {text}", file=sys.stderr, flush=True)

    def __call__(self, ev: WaitEvent) -> None:
        j = self.as_json
        match ev:
            case PhaseReached():
                self.last_at, self.heard_at = max(ev.at, self.last_at or ev.at), time.monotonic()
                if self.chronicle is not None:
                    self.chronicle.hold(ev.at, lambda: self._phase(ev))
                else:
                    self._phase(ev)
            case ProblemNoticed():
                if j:
                    self._json({"error": ev.problem, "collector": ev.source})
                else:
                    self._say(f"{ev.problem} (trying again until the timeout)")
            case StallNoticed():
                if j:
                    self._json({"stalled_for": round(ev.stalled_for, 1), "phase": str(ev.phase)})
                else:
                    self._say(ev.note)
            case BecameReady() | FailureFound() if self.chronicle is not None:
                # how it ended, after its own phases and in order with the others' (its last phase is its end)
                self.chronicle.hold(self.last_at if self.last_at is not None else time.time(), lambda: self._ended(ev))
            case _ if self.chronicle is not None:
                self.chronicle.hold(time.time(), lambda: self._ended(ev))  # found now: stopped, timed out, given up
            case _:
                self._ended(ev)

    def _phase(self, ev: PhaseReached) -> None:
        eta = self.eta(ev.phase, ev.at) if self.eta is not None else None
        if self.as_json:
            self._json({"phase": str(ev.phase), "at": ev.at, "line": ev.line,
                        **(eta_fields(eta) if eta is not None else {})})
        else:
            # several runs, each with its own start: one clock for all (in order), else seconds since it
            when = time.strftime("%H:%M:%S", time.localtime(ev.at)) if self.tagged else fmt_s(ev.since_first)
            print(f"[{when}] {self._tag()}{ev.phase!s:<14} {ev.line[:100]}{self._eta_words(eta)}", flush=True)

    def _eta_words(self, eta: PhaseEta | NoEta | None) -> str:
        """The ETA after the phase's line; that there is none, once a wait."""
        if eta is None or (isinstance(eta, NoEta) and self._no_eta_said):
            return ""
        self._no_eta_said = self._no_eta_said or isinstance(eta, NoEta)
        return f"  [{eta_words(eta)}]"

    def _ended(self, ev: WaitOutcome) -> None:
        match ev:
            case GaveUp():
                if self.as_json:
                    self._json({"error": ev.error, "collector": "unit", "permanent": True})
                self._say(ev.error)  # on stderr with --json too: the error is what a person must fix
            case FailureFound():
                if self.as_json:
                    self._json({"failure": ev.failure.as_dict()})
                else:
                    print_failure(ev.failure, headline=f"\n{self.name} FAILED in {ev.failure.phase}: "
                                  f"{ev.failure.kind}" if self.tagged else "")
            case FoundStopped():
                print(f"bringup: {self.name} is stopped: start it with 'bringup start {self.name}'", file=sys.stderr)
            case TimedOut():
                cause = f"; {ev.problem}" if ev.problem else ""
                if ev.stalled_for is not None:
                    cause += f"; STALLED for {ev.stalled_for:.0f} s"
                last = ev.phase if ev.state_read else "unknown (its state was never read)"
                print(f"{self._tag()}timeout after {ev.after_s:g} s; last phase: {last}{cause}", file=sys.stderr)
            case BecameReady():
                pass
        if self.as_json:
            self._json({"result": ev.result, "phase": str(ev.phase), "invocation": ev.invocation})


def wait_exit_code(outcome: WaitOutcome) -> ExitCode:
    match outcome:
        case BecameReady():
            return ExitCode.OK
        case FailureFound():
            return ExitCode.FAILED
        case FoundStopped():
            return ExitCode.STOPPED
        case TimedOut():
            return ExitCode.TIMEOUT
        case GaveUp():
            return ExitCode.USAGE  # a permanent error: as when a command is refused, trying again will not help
