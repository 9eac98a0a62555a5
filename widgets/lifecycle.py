"""The lifecycle panel: the phase, big and coloured; seconds per phase; stall warning; failure and hint; and the
steps of a restart in progress. Plain data in (a Snapshot and restart steps), Rich Text out: server text is
never parsed as markup."""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from tui.guard.redact import scrub
from tui.lifecycle.eta import eta_words
from tui.lifecycle.presets.facts import ReleaseMatch, known_versions, version_key
from tui.lifecycle.secrets import redact_argv
from tui.model import Phase, PhaseEta, Snapshot, Step
from tui.words import duration
from widgets.cells import TextLines
from widgets.written import set_text

_EXC = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception)\b")
STEP_MARK = {"done": "✓", "running": "…", "failed": "✗", "skipped": "-"}


#: phases a server rests in: their clock need not tick every second
RESTING = (Phase.READY, Phase.FAILED, Phase.STOPPED)


def fmt_secs(s: float) -> str:
    """A duration in one notation everywhere: `42.3s`, `2m30s`, `2h05m`."""
    return duration(s)


def fmt_age(s: float, phase: Phase) -> str:
    """How long a phase lasted, in `fmt_secs`' notation. A phase in progress keeps its seconds (still loading, or
    hung?); a resting one (ready, failed, stopped) counts whole minutes after its first minute, whether it is the
    current phase or a past one, so its figure never changes notation from one frame to the next, and a console
    left on a ready server redraws its lifecycle panel once a minute, not every second."""
    return duration(s, resting=phase in RESTING)


#: a release as shown: the reducer takes none longer than 64 characters, the header shows no more than this
RELEASE_SHOWN = 40


def release_text(release: ReleaseMatch | None, server: str) -> str:
    """The server's release for the header: `SGLang 0.5.23`, `vLLM 0.35.0 · newer than known: facts of 0.34.0`;
    "" until the server has said it (no guess). The release is the server's own text, a plain release string (the
    reducer takes nothing else), cut short; the header renders it as plain text, never as markup."""
    if release is None or not release.version:
        return ""
    version = release.version if len(release.version) <= RELEASE_SHOWN else release.version[:RELEASE_SHOWN - 1] + "…"
    head = f"{server} {version}".strip()
    facts = release.facts
    if facts is None or release.exact:
        return head
    known = known_versions(facts.server)
    ours = version_key(release.version)
    if known and ours > version_key(known[-1]):
        return f"{head} · newer than known: facts of {facts.version}"
    if known and ours < version_key(known[0]):
        return f"{head} · older than known: facts of {facts.version}"
    return f"{head} · no facts of its own: facts of {facts.version}"


def _server_flags(argv: Sequence[str], hide: Sequence[str] = (), limit: int = 400) -> str:
    """The options part of a server command line: what the operator toggles, less the deployment's `hide_flags`
    (options that are noise to an operator, such as the demo simulator's own) and their values; secrets' values as
    `***` (a console is shared on screens and in `bringup serve`'s browser tabs)."""
    start = next((i for i, a in enumerate(argv) if a.startswith("--")), len(argv))
    shown: list[str] = []
    skip = False
    prefixes = tuple(hide)
    for a in redact_argv(argv[start:]):
        if prefixes and a.startswith(prefixes):
            skip = "=" not in a
            continue
        if skip and not a.startswith("--"):
            skip = False
            continue
        skip = False
        shown.append(a)
    text = scrub(" ".join(shown))  # the one redactor too: a flag the config declares secret, a value known by value
    return text if len(text) <= limit else text[: limit - 1] + "…"


def timeline_text(snap: Snapshot, now: float, width: int) -> Text:
    """Phases with their durations, `loading 12.0s > graph-capture 8.1s > ...`, broken between phases, never
    between a phase and its duration (Rich would wrap at the space inside `ready 15.6s`)."""
    t = Text()
    if not snap.timeline:
        t.append("no run observed yet", style="dim")
        return t
    col = 0
    for i, tr in enumerate(snap.timeline):
        end = snap.timeline[i + 1].at if i + 1 < len(snap.timeline) else now
        style = "bold" if i + 1 == len(snap.timeline) else ""
        if tr.phase == Phase.FAILED:
            style = "bold red"
        item = f"{tr.phase} {fmt_age(max(0.0, end - tr.at), tr.phase)}"
        if i:
            if col + 3 + len(item) > width:
                t.append("\n")
                col = 0
            else:
                t.append(" › ", style="dim")
                col += 3
        t.append(item, style=style)
        col += len(item)
    return t


#: phases whose latest log line is news: a bring-up on its way
PROGRESSING = (Phase.STARTING, Phase.LOADING, Phase.GRAPH_CAPTURE, Phase.WARMUP)


_PERCENT = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d+)?)%")
_COUNT = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")


def _one_row(text: str, width: int) -> str:
    """The line in one row. A progress bar's line that does not fit (`Loading safetensors checkpoint shards:  68%
    Completed | 44/64 [...]`) puts its figures first, `68% 44/64 Loading safetensors checkpoint…`: cut at the
    end, a narrow terminal would keep the words and lose the progress."""
    width = max(width, 10)
    if len(text) <= width:
        return text
    pct = _PERCENT.search(text)
    if pct is not None:
        count = _COUNT.search(text, pct.end())
        figures = pct.group(0) + (f" {count.group(0)}" if count else "")
        what = text[: pct.start()].rstrip(" :|")
        text = f"{figures} {what}" if what else figures
        if len(text) <= width:
            return text
    return text[: width - 1] + "…"


class LifecyclePanel(Vertical):
    DEFAULT_CLASSES = "panel"

    def compose(self) -> ComposeResult:
        # by priority, as a small terminal cuts from the bottom: the phase, what failed and the hint, then how
        # it got here, a restart's steps, and the command line
        yield Static(" STOPPED ", id="phase-big", classes="phase-stopped")
        yield TextLines(id="failure")
        yield TextLines(id="phase-detail")
        yield TextLines(id="steps")
        yield TextLines(id="context")

    def show(self, snap: Snapshot, now: float, steps: Sequence[Step] = (), note: str = "",
             hide_flags: Sequence[str] = ()) -> None:
        phase = snap.phase
        stalled = snap.stalled_for
        big = self.query_one("#phase-big", Static)
        badge = f" {str(phase).upper()} "
        if stalled is not None:  # the state itself, not a note under it: loading, and stuck
            badge += f"· STALLED {fmt_secs(stalled)} "
        set_text(big, badge)
        cls = "phase-stalled" if stalled is not None else f"phase-{phase}"
        if not big.has_class(cls):
            big.set_classes(cls)
        detail = Text()
        if snap.timeline:
            detail.append(f"for {fmt_age(max(0.0, now - snap.timeline[-1].at), phase)}", style="bold")
        if snap.invocation:
            detail.append(f"  run {snap.invocation[:8]}", style="dim")
        if snap.unit is not None and snap.unit.main_pid:
            detail.append(f"  pid {snap.unit.main_pid}", style="dim")
        if snap.stale:  # what is shown below is old news, or not news yet
            detail.append(f"\n{snap.stale}", style="bold yellow")
        if stalled is not None:
            detail.append("\nno log line or GPU memory change: hung, or a very slow step?", style="yellow")
        if snap.latest_line and (stalled is not None or phase in PROGRESSING):
            # what the bring-up is doing now, or the last thing it said before it stalled; one row, cut
            lead = "last line: " if stalled is not None else "› "
            detail.append("\n" + lead, style="bold" if stalled is not None else "dim")
            detail.append(_one_row(snap.latest_line, self._width() - len(lead)),
                          style="" if stalled is not None else "dim")
        if phase == Phase.QUEUED and snap.timeline and snap.timeline[-1].line:  # the scheduler's reason, its start
            detail.append("\n› " + _one_row(snap.timeline[-1].line, self._width() - 2), style="dim")
        if snap.eta is not None and phase in (Phase.QUEUED, *PROGRESSING):  # how long is left, by past runs
            slow = isinstance(snap.eta, PhaseEta) and bool(snap.eta.slower)
            detail.append("\n" + eta_words(snap.eta), style="yellow" if slow else "dim")
        detail.append("\n")
        detail.append_text(timeline_text(snap, now, self._width()))
        if note:
            detail.append("\n" + note, style="italic")
        self.query_one("#phase-detail", TextLines).update(detail)
        for wid, text in (("#steps", self._steps(steps)), ("#failure", self._failure(snap))):
            w = self.query_one(wid, TextLines)
            w.update(text)
            w.display = bool(text.plain)  # an empty one would still take a row
        ctx = Text()  # wrapped at the width: a longer command line gets its rows
        if snap.endpoint and phase not in (Phase.STOPPED, Phase.STOPPING, Phase.FAILED):  # no probes then: stale
            ctx.append(f"endpoint: {snap.endpoint}\n", style="dim")
        flags = _server_flags(snap.flags, hide_flags)
        if flags:
            ctx.append(flags, style="dim")
        self.query_one("#context", TextLines).update(ctx)

    def _width(self) -> int:
        w = self.content_region.width if self.is_mounted else 0
        return w if w > 0 else 80

    def _failure(self, snap: Snapshot) -> Text:
        f = snap.failure
        loop = snap.crash_loop
        t = Text()
        if loop is not None:
            # runs failing one after another (`Restart=`): the count, and the last failure while the next starts
            t.append(loop.words, style="bold red")
            if f is None:
                t.append("\nhint: ", style="bold")
                t.append(loop.last.hint)
                return t
            t.append("\n")
        if f is None:
            return t
        t.append(f"{f.kind} in {f.phase}", style="bold red")
        # the exception line says most; else the last line
        last = next((x for x in reversed(f.excerpt) if _EXC.match(x.strip())), "") or \
            next((x for x in reversed(f.excerpt) if x.strip()), "")
        if last:
            t.append("\n" + last[:300], style="red")
        t.append("\nhint: ", style="bold")
        t.append(f.hint)
        return t

    def _steps(self, steps: Sequence[Step]) -> Text:
        t = Text(no_wrap=True, overflow="ellipsis")  # one row a step (and `text-wrap: nowrap` in the CSS)
        shown: dict[str, Step] = {}
        for s in steps:
            shown[s.name] = s
        for name, s in shown.items():
            status = s.status
            style = {"failed": "bold red", "running": "bold", "done": "green", "skipped": "dim"}.get(status, "")
            t.append(f"{STEP_MARK.get(status, ' ')} {name:<8} {s.detail}\n", style=style)
        t.rstrip()
        return t
