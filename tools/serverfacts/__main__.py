"""`python -m tools.serverfacts [sglang==0.5.23 vllm==0.34.0 ...] [--wheels DIR] [--out DIR]`: refresh the committed
facts of releases from their wheels. Run by hand when a release comes out (never by CI: it downloads wheels of
hundreds of MB); the diff of the JSON files is the review of what changed.

`python -m tools.serverfacts --new`: the releases on the package index (pip's own, `pip index versions`) that have no
facts yet, one `SERVER==VERSION` a line, ready to pass back: run by hand before work on the presets, never by the
tests (it asks the index)."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import tui.lifecycle.presets.facts as committed
from tools.serverfacts.extract import SERVERS, SIZE_BUDGET, dumps, facts_from_wheel
from tools.serverfacts.new_releases import IndexError_, index_versions, missing_releases
from tools.serverfacts.wheel import WheelError
from tui.lifecycle.presets.facts import known_versions


def default_releases() -> tuple[str, ...]:
    """Every release with committed facts (the files' names decide: a release is added by naming it once)."""
    return tuple(f"{server}=={version}" for server in SERVERS for version in known_versions(server))


#: where the product reads the facts (package data beside `tui/lifecycle/presets/facts.py`), not this tool's tree
OUT_DIR = Path(committed.__file__).resolve().parent / "facts"


class RefreshError(Exception):
    """One release could not be refreshed (the message is one line)."""


def parse_spec(spec: str) -> tuple[str, str]:
    server, sep, version = spec.partition("==")
    server = server.strip().lower()
    if not sep or not version.strip() or server not in SERVERS:
        raise RefreshError(f"{spec!r}: expected SERVER==VERSION with SERVER one of {', '.join(SERVERS)}")
    return server, version.strip()


def find_wheel(folder: Path, server: str, version: str) -> Path | None:
    hits = sorted(p for p in folder.glob(f"{server}-{version}-*.whl") if p.is_file())
    return hits[0] if hits else None


def download_wheel(server: str, version: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           f"{server}=={version}", "-d", str(into)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RefreshError(f"{server}=={version}: pip download failed: {e}") from e
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RefreshError(f"{server}=={version}: pip download failed (exit {p.returncode}): {last}")
    wheel = find_wheel(into, server, version)
    if wheel is None:
        raise RefreshError(f"{server}=={version}: pip download left no {server}-{version}-*.whl")
    return wheel


def refresh(spec: str, wheels: Path | None, out: Path, tmp: Path, budget: int = SIZE_BUDGET) -> str:
    server, version = parse_spec(spec)
    wheel = find_wheel(wheels, server, version) if wheels is not None else None
    if wheel is None:
        wheel = download_wheel(server, version, tmp)
    try:
        facts, notes = facts_from_wheel(wheel.read_bytes(), wheel.name, server, budget)
    except WheelError as e:
        raise RefreshError(str(e)) from e
    except (LookupError, RecursionError) as e:
        raise RefreshError(f"{wheel.name}: extraction failed: {e}") from e
    if facts["version"] != version:
        raise RefreshError(f"{wheel.name}: the wheel is version {facts['version']}, not {version}")
    target = out / f"{server}-{version}.json"
    text = dumps(facts)
    target.write_text(text, encoding="utf-8")
    n_formats = sum(len(g["entries"]) for g in facts["log_formats"])
    counts = (f"{len(facts['options'])} options, {n_formats} log formats, "
              f"{len(facts['metrics'])} metrics, {len(facts['routes'])} routes")
    return f"{target.name}: {len(text.encode()) // 1000} KB ({counts})" + "".join(f"; {n}" for n in notes)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.serverfacts", description=__doc__)
    ap.add_argument("releases", nargs="*", metavar="SERVER==VERSION",
                    help="releases to refresh (default: every release with facts); with --new: servers to ask about")
    ap.add_argument("--wheels", type=Path, help="a folder that may already hold the wheels (else pip downloads)")
    ap.add_argument("--out", type=Path, default=OUT_DIR, help="where the facts go (default: %(default)s)")
    ap.add_argument("--budget-kb", type=int, default=SIZE_BUDGET // 1000,
                    help="size a release's file should stay under: a file over it is reported, nothing is cut "
                    "(the drop policy is the same for every release; default: %(default)s)")
    ap.add_argument("--new", action="store_true",
                    help="list the releases on the package index with no facts yet (asks the index; nothing written)")
    args = ap.parse_args(argv)
    if args.new:
        return list_new(args.releases)
    if args.wheels is not None and not args.wheels.is_dir():
        print(f"--wheels {args.wheels}: not a folder", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    with tempfile.TemporaryDirectory(prefix="serverfacts-") as tmp:
        for spec in args.releases or default_releases():
            start = time.monotonic()
            try:
                line = refresh(spec, args.wheels, args.out, Path(tmp), args.budget_kb * 1000)
            except RefreshError as e:
                print(f"error: {e}", file=sys.stderr)
                failed += 1
                continue
            print(f"{line} [{time.monotonic() - start:.0f} s]", flush=True)
    return 1 if failed else 0


def list_new(servers: Sequence[str]) -> int:
    """Print each release of each server (all: none named) that the index has and the facts lack, oldest first,
    with why it is listed; exit 1 when the index could not be asked."""
    wanted = [s.strip().lower() for s in servers] or list(SERVERS)
    unknown = [s for s in wanted if s not in SERVERS]
    if unknown:
        print(f"--new: {', '.join(unknown)}: not a server ({', '.join(SERVERS)})", file=sys.stderr)
        return 2
    failed = 0
    for server in wanted:
        try:
            available = index_versions(server)
        except IndexError_ as e:
            print(f"error: {e}", file=sys.stderr)
            failed += 1
            continue
        for version, why in missing_releases(available, known_versions(server)):
            print(f"{server}=={version}\t{why}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
