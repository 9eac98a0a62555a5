"""Replay a recorded log through the same reducer the console uses.

Accepts plain server output, journald short format, and `journalctl -o json` lines (one JSON object per line,
MESSAGE possibly a byte array), mixed freely. systemd's own messages in a JSON journal become unit events, so a
replay sees "the process exited" exactly as the live console would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tui.lifecycle.lines import clean, split_output
from tui.lifecycle.presets import Preset, get_preset
from tui.lifecycle.reducer import LifecycleState, initial, reduce
from tui.model import Event, LogLine, UnitObserved, UnitState

_SYSTEMD_EXIT = re.compile(r"Main process exited, code=(?P<code>\w+), status=(?P<status>[^/\s]+)")
_SYSTEMD_FAILED = re.compile(r"Failed with result '(?P<result>[^']+)'")
_SYSTEMD_STARTED = re.compile(r"^Started ")


def journal_message(obj: dict[str, object]) -> str:
    """MESSAGE as text: journald sends non-UTF-8 messages as arrays of byte values."""
    msg = obj.get("MESSAGE", "")
    if isinstance(msg, list):
        try:
            return bytes(int(b) & 0xFF for b in msg).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return ""
    return msg if isinstance(msg, str) else "" if msg is None else str(msg)


def _journal_events(obj: dict[str, object], seq: float) -> Iterator[Event]:
    try:
        at = int(str(obj.get("__REALTIME_TIMESTAMP", ""))) / 1e6
    except ValueError:
        at = seq
    text = journal_message(obj)
    inv = str(obj.get("_SYSTEMD_INVOCATION_ID") or "")
    if not inv and (obj.get("_PID") == "1" or obj.get("SYSLOG_IDENTIFIER") == "systemd"):
        unit_inv = str(obj.get("INVOCATION_ID") or "")
        m = _SYSTEMD_EXIT.search(text)
        if m:
            status_s = m["status"]
            status = int(status_s) if status_s.lstrip("-").isdigit() else None
            active = "failed" if status not in (0, None) or m["code"] != "exited" else "inactive"
            yield UnitObserved(at, UnitState(active=active, sub="exited", invocation=unit_inv, exit_status=status))
        elif _SYSTEMD_FAILED.search(text):
            yield UnitObserved(at, UnitState(active="failed", sub="failed", invocation=unit_inv))
        elif _SYSTEMD_STARTED.search(text) and unit_inv:
            yield UnitObserved(at, UnitState(active="active", sub="running", invocation=unit_inv, started_at=at))
        return
    for piece in split_output(text):
        yield LogLine(at=at, text=piece, invocation=inv, cursor=str(obj.get("__CURSOR") or ""))


#: `<epoch seconds> <line>`: how the supervisor of a `process` deployment writes its server's output
_STORED = re.compile(r"^(1[5-9]\d{8}(?:\.\d+)?) (.*)$")


def events_from_lines(lines: Iterable[str]) -> Iterator[Event]:
    """Events from recorded lines. Timestamps come from the lines' own prefixes where they have one; lines
    without one inherit the previous line's time (a traceback happens at the time of its first line)."""
    last = 0.0
    for i, raw in enumerate(lines):
        raw = raw.rstrip("\n")
        if not raw.strip() or raw.startswith("# source:") or raw.startswith("# server:"):
            continue
        if raw.lstrip().startswith("{"):
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = None
            if isinstance(obj, dict):
                for ev in _journal_events(obj, last):
                    last = max(last, ev.at)
                    yield ev
                continue
        stored = _STORED.match(raw)
        if stored:  # bringup's own log of a `process` deployment: each line as the supervisor stamped it
            at = float(stored[1])
            last = at if at >= last else last
            for piece in split_output(stored[2]):
                yield LogLine(at=last, text=piece)
            continue
        for piece in split_output(raw):
            ts = clean(piece).ts
            if ts is not None and ts >= last - 86400 * 180:
                last = ts if last == 0.0 or ts >= last else last
            elif last == 0.0:
                last = float(i)
            yield LogLine(at=last, text=piece)


_SGLANG_HINTS = re.compile(r"server_args=|fired up and ready|Load weight (?:begin|end)|Capture cuda graph|TP\d+\]|"
                           r"Decode batch|sglang|launch_server\.py", re.I)
_VLLM_HINTS = re.compile(r"vLLM|EngineCore|\[(?:gpu_model_runner|core|api_server|loader|worker)\.py:\d+\]|"
                         r"Avg prompt throughput|vllm\.", re.I)


def detect_preset(lines: Iterable[str]) -> str:
    sg = vl = 0
    for n, line in enumerate(lines):
        sg += bool(_SGLANG_HINTS.search(line))
        vl += bool(_VLLM_HINTS.search(line))
        if n > 2000:
            break
    return "vllm" if vl > sg else "sglang"


@dataclass(frozen=True, slots=True)
class ReplayResult:
    state: LifecycleState
    preset: str

    def as_dict(self) -> dict[str, object]:
        s = self.state
        return {
            "final": str(s.phase),
            "phases": [{"phase": str(t.phase), "at": t.at, "line": t.line} for t in s.timeline],
            "failure": s.failure.as_dict() if s.failure else None,
            "preset": self.preset,
        }


def replay(lines: list[str], preset_name: str = "auto") -> ReplayResult:
    name = detect_preset(lines) if preset_name == "auto" else preset_name
    preset: Preset = get_preset(name)
    state = initial(require_probe=False)
    for ev in events_from_lines(lines):
        state = reduce(state, ev, preset)
    return ReplayResult(state, name)
