"""A hostile local user against every place bringup writes on its own machine (issue 47.1, the adversary class).

bringup runs as root; `nobody` (acting through `runuser`) owns a directory the operator writes into, or the
directory a state dir sits in, and plants symbolic links and squatted names there before bringup comes. The
invariants, for each trial:
- no write outside: a root-owned victim file (and directory) the links point at is never written, created in or
  changed;
- nothing readable: what bringup wrote cannot be read by `nobody`;
- nothing lost: the record and the sweep's results are still written, where asked or in a private subdirectory
  that bringup names; a place it cannot use safely is refused in one line naming it (exit 2), not written through.

The machine's own kernel may protect links in sticky world-writable directories (fs.protected_symlinks); the
hostile directories here are `nobody`'s own, where no sysctl protects anything.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers.e2e import Bringup
from tests.helpers.wait import slack
from tui.collectors.shared_generations import SharedGenerations
from tui.engine.history import HistoryStore, history_path
from tui.engine.incident_file import write_record
from tui.lifecycle.history import Observed, record_of
from tui.lifecycle.run_record import RunRecord
from tui.managers import PermanentManagerError
from tui.managers.file_lock import FileLock
from tui.model import Phase, Transition
from tui.sweep.recorder import write_pointer

RUNUSER = shutil.which("runuser")
# CI sets BRINGUP_ADVERSARY=required: there a missing second user fails these trials instead of skipping them
pytestmark = pytest.mark.skipif((os.geteuid() != 0 or RUNUSER is None)
                                and os.environ.get("BRINGUP_ADVERSARY") != "required",
                                reason="a second user needs root and runuser")
HOSTILE = "nobody"


def as_hostile(*argv: str) -> subprocess.CompletedProcess[str]:
    assert RUNUSER is not None
    return subprocess.run([RUNUSER, "-u", HOSTILE, "--", *argv], capture_output=True, text=True, timeout=slack(30))


def hostile_reads(path: Path) -> bool:
    return as_hostile("cat", str(path)).returncode == 0


@pytest.fixture
def arena() -> Iterator[Path]:
    """/tmp/bringup-adv-X (root's, 0755: every user can enter it) holding `eve` (the hostile user's own directory)
    and `victim` (root's, 0700: a file and a directory bringup must never touch)."""
    top = Path(tempfile.mkdtemp(prefix="bringup-adv-", dir="/tmp"))
    top.chmod(0o755)
    eve = top / "eve"
    eve.mkdir(mode=0o755)
    pw = subprocess.run(["id", "-u", HOSTILE], capture_output=True, text=True, check=True)
    os.chown(eve, int(pw.stdout), -1)
    victim = top / "victim"
    victim.mkdir(mode=0o700)
    (victim / "precious").write_text("precious\n")
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def untouched(victim: Path) -> None:
    """Nothing written outside: the victim directory holds its one file, unchanged."""
    assert sorted(os.listdir(victim)) == ["precious"], sorted(os.listdir(victim))
    assert (victim / "precious").read_text() == "precious\n"


def plant(link: Path, target: Path) -> None:
    r = as_hostile("ln", "-sfn", str(target), str(link))
    assert r.returncode == 0, r.stderr


def a_run(_runs: object = None) -> RunRecord:
    """One failed run of deployment `d`, as the history records it."""
    t = 1_800_000_000.0
    tl = (Transition(Phase.STARTING, t), Transition(Phase.FAILED, t + 5))
    return record_of(Observed("d", "failed0123456789", t, ("python3", "-m", "server"), tl, Phase.FAILED, t + 5), None)


# ---------------------------------------------------------------------------------------------- in one process


def test_record_out_into_another_users_directory_goes_private_and_writes_nothing_through(arena: Path) -> None:
    """`record --out ~eve/report.md`, where eve planted links at the name and at the temporary name bringup used
    (`.report.md.PID`): the victim is untouched, the record is written, in a private directory there, named."""
    eve, victim = arena / "eve", arena / "victim"
    state = arena / "state"
    HistoryStore(history_path(state, "d")).put(a_run)
    plant(eve / "report.md", victim / "precious")
    plant(eve / f".report.md.{os.getpid()}", victim / "precious")
    notes: list[str] = []
    path, _, text = write_record(state, "d", out=str(eve / "report.md"), note=notes.append)
    untouched(victim)
    assert path is not None and path.read_text() == text and "failed012345" in text
    assert path.parent.parent == eve and path.parent.name.startswith("bringup-") and path.name == "report.md"
    assert notes and str(path) in notes[0] and "not a safe place" in notes[0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not hostile_reads(path)


WRITERS: dict[str, Callable[[Path], object]] = {
    "history (history.lock, history.json)": lambda s: HistoryStore(history_path(s, "d")).put(a_run),
    "the default record": lambda s: write_record(s, "d"),
    "the sweep's pointer": lambda s: write_pointer(s, "d", s / "sweeps" / "x"),
    "the process lock": lambda s: asyncio.run(FileLock(str(s / "deployments" / "d" / "restart.lock"),
                                                       "test").__aenter__()),
    "shared generations": lambda s: SharedGenerations(s / "deployments" / "d" / "generations", "w",
                                                      keep_s=60).append(1.0, 2.0, 3),
}


def tree(d: Path) -> dict[str, tuple[int, int, str]]:
    """Every entry under `d`: (owner, mode, link target or "")."""
    out = {}
    for root, dirs, names in os.walk(d):
        for n in dirs + names:
            p = Path(root) / n
            st = os.lstat(p)
            out[str(p.relative_to(d))] = (st.st_uid, st.st_mode, os.readlink(p) if p.is_symlink() else "")
    return out


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_state_dir_swapped_for_a_link_by_the_owner_of_its_parent_writes_nothing_outside(
        arena: Path, writer: str) -> None:
    """The state dir (root's, 0700) sits in eve's directory (a `su` that kept her HOME): she moves it aside and
    puts in its place a link to a tree of her own, the deployment's history in it (readable: a run to record), and
    at every name bringup writes there a link to root's victim (the temporary names it used included). Whatever
    bringup writes is refused in one line: nothing is written into her tree or through it."""
    eve, victim = arena / "eve", arena / "victim"
    state = eve / "state"
    HistoryStore(history_path(state, "d")).put(a_run)  # made by root, before: closed to her
    assert not hostile_reads(state / "deployments" / "d" / "history.json")
    fake = eve / "fake" / "deployments" / "d"
    assert as_hostile("mkdir", "-p", str(fake)).returncode == 0
    shutil.copyfile(state / "deployments" / "d" / "history.json", fake / "history.json")
    os.chown(fake / "history.json", os.stat(eve).st_uid, -1)
    assert as_hostile("mv", str(state), str(eve / "moved")).returncode == 0
    plant(state, eve / "fake")
    # links where a name is rewritten whole (history, the pointer: their temporary names too); the lock and the
    # generations, opened where they are, are left for bringup to make: in her tree, where it must not write
    for name in ("history.lock", "sweep.json", f".sweep.json.{os.getpid()}.tmp"):
        plant(fake / name, victim / "precious")
    plant(fake / "records", victim)
    before = tree(eve / "fake")
    try:
        WRITERS[writer](state)
    except (OSError, PermanentManagerError) as e:  # refused, in one line
        assert "\n" not in str(e) and "symbolic link" in str(e), e
    untouched(victim)
    assert tree(eve / "fake") == before


# ---------------------------------------------------------------------------------------------- the command line

PLAN = """
name = "adv"
[[configs]]
name = "base"
[matrix]
prompt_tokens = [16]
output_tokens = [4]
concurrency = [1]
requests = 2
warmup_requests = 0
"""


@pytest.mark.slow
def test_the_commands_keep_their_files_from_another_user(make_bringup: Callable[..., Bringup], arena: Path,
                                                         tmp_path: Path) -> None:
    """`sweep --out` and `record --out` into eve's directory, full of her links; a state dir that is hers."""
    eve, victim = arena / "eve", arena / "victim"
    results = eve / "results"
    assert as_hostile("mkdir", str(results)).returncode == 0
    plant(results / "records.jsonl", victim / "precious")
    plant(results / "sweep.json", victim / "precious")
    plant(results / "plan.toml", victim / "precious")
    plant(results / "logs", victim)
    bu = make_bringup()
    bu.bring_up(timeout=60)
    plan = tmp_path / "plan.toml"
    plan.write_text(PLAN)

    r = bu.run("sweep", bu.name, str(plan), "--out", str(results), "--yes", "--json", timeout=180)
    assert r.rc == 0, r.describe()
    untouched(victim)
    start = json.loads(r.out.splitlines()[0])
    made = Path(start["dir"])
    assert made.parent == results and made.name.startswith("bringup-"), start
    assert f"{results} is not a safe place to write" in r.err and str(made) in r.err
    recs = [json.loads(x) for x in (made / "records.jsonl").read_text().splitlines() if x.strip()]
    assert {(x["type"], x["config"]) for x in recs if x["type"] in ("config", "cell")} == {
        ("config", "base"), ("cell", "base")}, recs  # nothing lost: the sweep's records, where it said
    for p in (made / "records.jsonl", made / "sweep.json"):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600 and not hostile_reads(p), p
    assert stat.S_IMODE(made.stat().st_mode) == 0o700

    plant(eve / "report.md", victim / "precious")
    r = bu.run("record", bu.name, "--out", str(eve / "report.md"))
    assert r.rc == 0, r.describe()
    untouched(victim)
    written = Path(r.out.strip().removeprefix("wrote "))
    assert written.parent.parent == eve and written.read_text().startswith("#") and not hostile_reads(written)
    assert str(written) in r.err

    theirs = eve / "state"
    assert as_hostile("mkdir", str(theirs)).returncode == 0
    env = {**bu.env, "BRINGUP_STATE_DIR": str(theirs)}
    r = bu.run("status", bu.name, env=env)
    assert r.rc == 2 and r.err.strip().count("\n") == 0, r.describe()
    assert f"state_dir {theirs} is not bringup's own: it belongs to {HOSTILE}" in r.err
    assert os.listdir(theirs) == []
