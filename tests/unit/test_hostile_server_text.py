"""What a hostile server prints, read back, recorded and written up (issue 47.2): forged line ends followed by a
forged epoch and a phase marker, non-finite stamps, backtick fences, Markdown and HTML, a huge traceback. The real
history store writes its real file (the process manager reading such a log: tests/e2e/test_process_log_stamps.py);
the record's Markdown is parsed by a CommonMark parser (with GitHub's tables), not searched for strings."""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tui.engine.history import HistoryStore, RunRecorder
from tui.lifecycle.history import Observed, record_of
from tui.lifecycle.incident import Quote, incident, markdown, quoted
from tui.lifecycle.reducer import initial
from tui.lifecycle.run_record import MAX_RECORD_BYTES, RunRecord, Span, size_of, to_dict
from tui.model import Failure, FailureKind, Phase, Transition

T0 = 1_765_000_000.0
def observed(inv: str, excerpt: tuple[str, ...], phases: list[tuple[Phase, float]], **kw: Any) -> Observed:
    f = Failure(Phase.LOADING, FailureKind.OOM, excerpt, "lower --mem-fraction-static", T0 + 5)
    return Observed(deployment="k26", invocation=inv, started_at=T0, argv=("python", "-m", "sglang", "--tp", "8"),
                    timeline=tuple(Transition(p, T0 + at, "") for p, at in phases), phase=Phase.FAILED,
                    now=T0 + 10, failure=f, **kw)


def test_a_huge_traceback_makes_a_record_within_its_bound_its_end_kept() -> None:
    excerpt = ("Traceback (most recent call last):",
               *(f'  File "/x/{i}.py", line {i}, in f' + " " + "y" * 16_000 for i in range(198)),
               "RuntimeError: CUDA error: an illegal memory access was encountered")
    r = record_of(observed("big", excerpt, [(Phase.STARTING, 0), (Phase.LOADING, 2), (Phase.FAILED, 5)]), None)
    assert size_of(r) <= MAX_RECORD_BYTES, size_of(r)
    assert r.failure is not None and r.failure.excerpt[-1] == excerpt[-1]
    assert "not kept" in r.failure.excerpt[0]


def test_a_record_with_a_number_that_is_none_is_skipped_with_a_note_and_never_written(tmp_path: Path) -> None:
    path = tmp_path / "deployments" / "k26" / "history.json"
    store = HistoryStore(path)
    good = record_of(observed("good", ("x",), [(Phase.STARTING, 0), (Phase.FAILED, 5)]), None)
    store.put(lambda _runs: good)
    bad = RunRecord("bad", "k26", T0 + 100, "h", timeline=(Span(Phase.READY, math.inf, 0.0),))
    assert store.put(lambda _runs: bad) is None
    text = path.read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert [r.invocation for r in HistoryStore(path).runs()] == ["good"]
    # a file an older bringup wrote, Infinity in it: the record is skipped with a note, the rest read
    data = json.loads(text)
    forged = to_dict(good) | {"invocation": "forged", "started_at": T0 + 200}
    forged["timeline"] = [{"phase": "ready", "at": math.inf, "seconds": 0.0}]
    data["runs"].append(forged)
    path.write_text(json.dumps(data))
    fresh = HistoryStore(path)
    assert [r.invocation for r in fresh.runs()] == ["good"]
    assert fresh.notes and fresh.notes[0].startswith("run forged skipped: timeline at: inf"), fresh.notes


def test_the_history_file_and_its_lock_are_private_and_no_link_is_followed(tmp_path: Path) -> None:
    path = tmp_path / "deployments" / "k26" / "history.json"
    path.parent.mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.write_text("someone's file\n")
    os.symlink(target, path.parent / "history.lock")
    with pytest.raises(OSError, match="symbolic link"):
        HistoryStore(path).put(lambda _runs: record_of(observed("a", ("x",), [(Phase.STARTING, 0)]), None))
    assert target.read_text() == "someone's file\n"
    os.unlink(path.parent / "history.lock")
    HistoryStore(path).put(lambda _runs: record_of(observed("a", ("x",), [(Phase.STARTING, 0)]), None))
    for name in ("history.json", "history.lock"):
        assert (path.parent / name).stat().st_mode & 0o777 == 0o600, name


class _ThreadSeen(HistoryStore):
    """The real store, noting the thread each write ran on."""

    threads: list[int]

    def put(self, record_for: Any) -> RunRecord | None:
        self.threads.append(threading.get_ident())
        return super().put(record_for)


async def test_the_engines_history_writes_happen_off_its_event_loop(tmp_path: Path) -> None:
    store = _ThreadSeen(tmp_path / "history.json")
    store.threads = []
    rec = RunRecorder(store, clock=lambda: T0 + 10)
    state = replace(initial(), invocation="inv1", invocation_started=T0,
                    timeline=(Transition(Phase.STARTING, T0, ""),), phase=Phase.STARTING)

    class Watched:
        name, host_name, gpus, other_holder = "k26", "local", None, None
        dep = type("D", (), {"what_runs": "server"})()
        gpu = type("G", (), {"attribution": staticmethod(lambda running: None)})()

        def __init__(self) -> None:
            self.state = state

        def named(self, failure: Failure | None) -> Failure | None:
            return failure

    rec.changed(Watched())  # type: ignore[arg-type]
    await rec.flush()
    assert store.threads and threading.get_ident() not in store.threads
    assert [r.invocation for r in HistoryStore(store.path).runs()] == ["inv1"]


# ---------------------------------------------------------------- the record's Markdown

HOSTILE = ("```", "# Forged heading", "<script>alert(1)</script>", "[click](http://evil.example/x)",
           "![img](http://evil.example/i.png)", "````", "~~~", "| a | b |", "\x1b]52;c;SGVsbG8=\x07clipboard",
           "\u202egnp.exe", "RuntimeError: CUDA error: an illegal memory access was encountered")


def tokens(md: str) -> list[Any]:
    return MarkdownIt("commonmark").enable("table").parse(md)


def test_nothing_a_server_prints_escapes_the_records_code_block() -> None:
    runs = [record_of(observed("hostile", HOSTILE, [(Phase.STARTING, 0), (Phase.FAILED, 5)],
                               release="0.5 <b>x</b> [l](http://e.example) `tick`"), None)]
    md = markdown(incident(runs[0], runs))
    toks = tokens(md)
    assert not [t for t in toks if t.type.startswith("html")]
    inline = [c for t in toks if t.children for c in t.children]
    assert not [c for c in inline if c.type in ("link_open", "image", "html_inline")], md
    headings = [toks[i + 1].content for i, t in enumerate(toks) if t.type == "heading_open"]
    assert headings == ["k26: run hostile failed", "Failure", "Flags", "Timeline", "Going back"], headings
    fences = [t for t in toks if t.type == "fence"]
    excerpt = "\n".join(HOSTILE).replace("\x1b]52;c;SGVsbG8=\x07", "").replace("\u202e", "")
    assert fences[0].content == excerpt + "\n", fences[0].content
    assert "\x1b" not in md and "\u202e" not in md


def test_quoted_text_in_a_table_keeps_its_row() -> None:
    md = "| who | change |\n|---|---|\n" + f"| {quoted('a | b', Quote.CELL)} | {quoted('`x` | y', Quote.CELL)} |\n"
    rows = [t for t in tokens(md) if t.type == "td_open"]
    assert len(rows) == 2, md
    assert quoted("ops laptop 7") == "ops laptop 7"  # plain words stay plain
    assert quoted("a\n# b") == "`a # b`"
