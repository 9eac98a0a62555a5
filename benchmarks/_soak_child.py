"""Runs `bringup` with tracemalloc on (one frame a trace: cheap enough for an hour), and on SIGUSR2 writes the top
allocation sites by file and line to $SOAK_DIR/snapshot-N.json (N counting from 0): console_soak.py compares them
to say what grew. A measuring wrapper, not part of bringup.

    SOAK_DIR=d python benchmarks/_soak_child.py demo
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import tracemalloc
from collections.abc import Sized
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COUNT = {"n": 0}


def _short(path: str) -> str:
    """A file as the package or the checkout names it (`textual/strip.py`, `tui/...`): results carry no path of the
    machine they ran on."""
    if "site-packages/" in path:
        return path.rsplit("site-packages/", 1)[1]
    root = f"{ROOT}/"
    return path[len(root):] if path.startswith(root) else os.path.basename(path)  # not pathlib: it is watched


def _type_name(o: object) -> str:
    t = type(o)
    return f"{t.__module__}.{t.__qualname__}"


def live_objects() -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """The objects the collector tracks, counted by type; and for each type named in $SOAK_HOLDERS (comma-separated,
    `tui.model.LogLine`), what holds its instances, by the holder's type and size: a site that allocates is not
    always the one that keeps, and a growing count says which container to bound."""
    gc.collect()
    objs = gc.get_objects()
    counts: dict[str, int] = {}
    for o in objs:
        k = _type_name(o)
        counts[k] = counts.get(k, 0) + 1
    watched = {n for n in os.environ.get("SOAK_HOLDERS", "").split(",") if n}
    holders: dict[str, dict[str, int]] = {}
    for o in objs:
        name = _type_name(o)
        if name not in watched:
            continue
        h = holders.setdefault(name, {})
        for r in gc.get_referrers(o):
            if r is objs:
                continue
            size = len(r) if isinstance(r, Sized) else 0
            key = f"{_type_name(r)} len~{10 ** len(str(size)) // 10 if size else 0}"
            h[key] = h.get(key, 0) + 1
    del objs
    top = dict(sorted(counts.items(), key=lambda kv: -kv[1])[:300])
    return top, holders


def sizes() -> dict[str, list[dict[str, int]]]:
    """For each type named in $SOAK_SIZES (`widgets.log_buffer.LogBuffer`), each instance's containers by
    attribute and length: a bounded buffer still filling grows as a leak does, until it is full."""
    watched = {n for n in os.environ.get("SOAK_SIZES", "").split(",") if n}
    out: dict[str, list[dict[str, int]]] = {}
    for o in gc.get_objects():
        name = _type_name(o)
        if name in watched:
            fields = vars(o) if hasattr(o, "__dict__") else {}
            out.setdefault(name, []).append({k: len(v) for k, v in fields.items() if isinstance(v, Sized)
                                             and not isinstance(v, str | bytes)})
    return out


def _where(frame: tracemalloc.Frame) -> str:
    return f"{_short(frame.filename)}:{frame.lineno}"


def callers(snap: tracemalloc.Snapshot) -> dict[str, list[dict[str, object]]]:
    """For each site named in $SOAK_CALLERS (comma-separated, `pathlib.py:71`), the live blocks made there grouped
    by the whole stack that made them (as deep as $SOAK_FRAMES): a site in the standard library says little, the
    code above it says who keeps its blocks."""
    watched = {n for n in os.environ.get("SOAK_CALLERS", "").split(",") if n}
    out: dict[str, list[dict[str, object]]] = {}
    if not watched:
        return out
    for s in snap.statistics("traceback"):
        site = _where(s.traceback[-1])  # the most recent frame: where the block was made
        if site not in watched:
            continue
        out.setdefault(site, []).append({"kib": round(s.size / 1024, 1), "count": s.count,
                                         "stack": [_where(f) for f in s.traceback]})
    return {k: v[:20] for k, v in out.items()}


#: new path components pathlib interned, by the stack that parsed them ($SOAK_INTERN=1): `sys.intern`'s table grows
#: with each new name and never shrinks, so a path parsed with a new name each time grows it for good
INTERNED: dict[str, int] = {}
_SEEN: set[int] = set()


class _InternWatch:
    """What pathlib sees as `sys`: the real module, but an `intern` that counts new names by who parsed them (hashes
    only: holding the names would keep them alive)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(sys, name)

    @staticmethod
    def intern(s: str) -> str:
        h = hash(s)
        if h not in _SEEN:
            _SEEN.add(h)
            f = sys._getframe(2)
            stack = []
            while f is not None and len(stack) < 8:
                if "pathlib" not in f.f_code.co_filename:
                    stack.append(f"{_short(f.f_code.co_filename)}:{f.f_lineno}")
                f = f.f_back
            key = " <- ".join(stack[:5])
            INTERNED[key] = INTERNED.get(key, 0) + 1
        return sys.intern(s)


def snapshot(*_: Any) -> None:
    types, holders = live_objects()
    held = sizes()
    snap = tracemalloc.take_snapshot()
    stats = snap.statistics("lineno")
    top = [{"where": _where(s.traceback[0]), "kib": round(s.size / 1024, 1),
            "count": s.count} for s in stats[:400]]
    out = Path(os.environ["SOAK_DIR"]) / f"snapshot-{COUNT['n']}.json"
    out.write_text(json.dumps({"traced_kib": round(tracemalloc.get_traced_memory()[0] / 1024, 1), "top": top,
                               "types": types, "holders": holders, "sizes": held, "callers": callers(snap),
                               "interned": dict(sorted(INTERNED.items(), key=lambda kv: -kv[1])[:30])}))
    COUNT["n"] += 1


if __name__ == "__main__":
    tracemalloc.start(int(os.environ.get("SOAK_FRAMES", "1")))
    signal.signal(signal.SIGUSR2, snapshot)
    if os.environ.get("SOAK_INTERN"):
        import pathlib

        pathlib.sys = _InternWatch()  # type: ignore[assignment]
    from tui.cli import main

    sys.exit(main(sys.argv[1:]))
