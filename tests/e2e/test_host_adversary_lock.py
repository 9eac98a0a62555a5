"""The restart lock on the systemd test host against a local user who wants it to fail: `mallory`, no sudo, no key
(.ci/testhost.sh), acting through `runuser`. The host runs with fs.protected_symlinks=0 (the test machine's kernel),
so a link planted in a sticky world-writable directory is followed by root.

- (a) the old place (/run/lock/bringup-UNIT.lock) held or squatted blocks nothing; the new one (/run/bringup)
  cannot be made, opened or written by mallory; a lock directory with the wrong owner or mode, or a link in its
  place, is refused at once with the reason, never waited on;
- (b) a link planted where the record goes (or the lock file) writes nothing through it;
- (c) a lock held by something that is no bringup is refused naming its pid and user.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.helpers.testhost import as_mallory, texec
from tests.helpers.wait import until, until_awaited
from tui.managers import LockHeld, PermanentManagerError
from tui.managers.remote_lock import RemoteLock
from tui.managers.systemd import SystemdManager
from tui.transport.ssh import SshTransport

pytestmark = pytest.mark.slow

UNIT = "bx-lock.service"  # this module's own: no unit is needed to take its lock
LOCK_DIR = "/run/bringup"  # where bringup acting as root keeps the locks (tui/managers/systemd.py)
LOCK = f"{LOCK_DIR}/{UNIT}.lock"
OLD = f"/run/lock/bringup-{UNIT}.lock"
VICTIM = "/etc/bx-victim.conf"
TRIAL = "/run/bx-adversary"  # a lock directory of this module's, to break in every way without touching /run/bringup


def spawn(*argv: str, user: str = "") -> int:
    """A process left running on the host (its own session: killed with its group at the end)."""
    cmd = " ".join(f"'{a}'" for a in (("runuser", "-u", user, "--") if user else ()) + argv)
    return int(texec("sh", "-c", f"setsid {cmd} </dev/null >/dev/null 2>&1 & echo $!").strip())


def holding(path: str, timeout: float = 10) -> None:
    """Wait until someone holds a flock on `path` (the kernel's table, without trying it)."""
    def held() -> bool:
        ino = texec("sh", "-c", f"stat -c %i {path} 2>/dev/null || true").strip()
        return bool(ino) and f":{ino} " in texec("cat", "/proc/locks")

    until(f"someone to hold {path}", held, timeout, every=0.1)


@pytest.fixture
def host() -> Iterator[list[int]]:
    """A clean host for this module's lock, and the processes a test leaves there, killed at the end."""
    def clean() -> None:
        texec("sh", "-c", f"rm -rf {OLD} {OLD}.owner {LOCK} {LOCK}.owner {TRIAL} {VICTIM}; "
                          "rm -rf /run/user/$(id -u tester)/bringup /home/tester/.cache/bringup-*; true", check=False)
    clean()
    texec("sh", "-c", f"printf 'precious\\n' > {VICTIM}; chmod 644 {VICTIM}")
    started: list[int] = []
    yield started
    for pid in started:
        texec("/bin/kill", "-KILL", "--", f"-{pid}", check=False)
    ours = [ln for ln in texec("ps", "-eo", "pid,args").splitlines()[1:]
            if ("bx-lock" in ln or "bx-adversary" in ln) and ln.split(None, 1)[1].split()[0] != "ps"]
    held = texec("sh", "-c", f"stat -c %i {LOCK} 2>/dev/null || true").strip()
    holders = [ln for ln in texec("cat", "/proc/locks").splitlines() if held and f":{held} " in ln]
    clean()
    assert not ours and not holders, f"left running on the host: {ours} {holders}"


@pytest.fixture
async def root(ssh_config: Path) -> AsyncIterator[SshTransport]:
    t = SshTransport("testhost", config=[str(ssh_config)])
    yield t
    await t.close()


@pytest.fixture
async def tester(ssh_config: Path) -> AsyncIterator[SshTransport]:
    t = SshTransport("testhost-tester", config=[str(ssh_config)])
    yield t
    await t.close()


# ------------------------------------------------------------------------------------------------ (a)


async def test_the_old_lock_path_held_or_forged_by_an_attacker_blocks_nothing(
        host: list[int], root: SshTransport, tester: SshTransport) -> None:
    host.append(spawn("flock", "-n", OLD, "sleep", "300", user="mallory"))
    await asyncio.to_thread(holding, OLD)
    texec("sh", "-c", f"runuser -u mallory -- sh -c 'echo {{\\\"who\\\": \\\"ops@elsewhere\\\"}} > {OLD}.owner'")
    for mgr in (SystemdManager(root, UNIT), SystemdManager(tester, UNIT, sudo=True)):
        async with asyncio.timeout(20):
            async with mgr.lock("restart") as info:
                assert await mgr.lock("watch").holder() == info  # its own record, where bringup reads it
    assert texec("stat", "-c", "%U %a", OLD).strip() == "mallory 644"  # the attacker's file, left alone


async def test_the_attacker_cannot_make_open_or_write_the_lock_directory(host: list[int], root: SshTransport) -> None:
    mgr = SystemdManager(root, UNIT)
    async with mgr.lock("restart"):
        pass
    assert texec("stat", "-c", "%U %a", LOCK_DIR, LOCK).split() == ["root", "755", "root", "600"]
    for argv in (["mkdir", f"{LOCK_DIR}/x"], ["flock", "-n", LOCK, "true"], ["touch", f"{LOCK}.owner"],
                 ["ln", "-s", VICTIM, f"{LOCK_DIR}/y"]):
        rc, out = as_mallory(*argv)
        assert rc != 0 and "Permission denied" in out, (argv, out)
    rc, out = as_mallory("cat", f"{LOCK}.owner")  # the record is for every operator to read
    assert rc == 0


@pytest.mark.parametrize(("setup", "reason"), [
    (f"mkdir -m 755 {TRIAL} && chown mallory {TRIAL}", f"{TRIAL} belongs to mallory (uid 1001), not to uid 0"),
    (f"mkdir -m 777 {TRIAL}", f"{TRIAL} is writable by group or others (mode 777): chmod go-w it"),
    (f"mkdir -m 775 {TRIAL}", f"{TRIAL} is writable by group or others (mode 775)"),
    (f"ln -s /tmp {TRIAL}", f"{TRIAL} is a symbolic link (to /tmp), not a directory of its own"),
    (f"mkdir -m 755 {TRIAL} && ln -s {VICTIM} {TRIAL}/bx.lock", f"{TRIAL}/bx.lock is a symbolic link"),
])
async def test_a_lock_directory_someone_else_could_write_is_refused_at_once_with_the_reason(
        host: list[int], root: SshTransport, setup: str, reason: str) -> None:
    texec("sh", "-c", setup)
    t0 = time.monotonic()
    with pytest.raises(PermanentManagerError) as e:
        async with RemoteLock(root, f"{TRIAL}/bx.lock", "restart"):
            pass
    assert time.monotonic() - t0 < 10
    assert f"cannot take the lock {TRIAL}/bx.lock on testhost: {reason}" in str(e.value)
    assert texec("cat", VICTIM) == "precious\n"


async def test_a_user_without_root_gets_a_directory_of_its_own_and_its_checks(host: list[int],
                                                                              tester: SshTransport) -> None:
    mgr = SystemdManager(tester, UNIT)  # no sudo: not root on the host
    path = await mgr.lock_path()
    uid = texec("id", "-u", "tester").strip()
    assert path in (f"/run/user/{uid}/bringup/{UNIT}.lock", f"/home/tester/.cache/bringup-{_hostname()}/{UNIT}.lock")
    async with mgr.lock("restart"):
        pass
    d = path.rsplit("/", 1)[0]
    texec("sh", "-c", f"chown root {d}")  # someone else's now: refused, naming it
    with pytest.raises(PermanentManagerError, match=f"{d} belongs to root \\(uid 0\\), not to uid {uid}"):
        async with mgr.lock("restart"):
            pass


def _hostname() -> str:
    return texec("uname", "-n").strip()


# ------------------------------------------------------------------------------------------------ (b)


async def test_a_link_planted_where_the_record_goes_writes_nothing_through_it(host: list[int],
                                                                              root: SshTransport) -> None:
    # the old place: mallory's link in the sticky /run/lock, followed by root where protected_symlinks=0
    rc, out = as_mallory("ln", "-s", VICTIM, f"{OLD}.owner")
    assert rc == 0, out
    # the new place: mallory cannot plant one (above); one there anyway (root's, or from before) is replaced
    texec("sh", "-c", f"mkdir -p -m 755 {LOCK_DIR}; ln -sfn {VICTIM} {LOCK}.owner")
    mgr = SystemdManager(root, UNIT)
    async with mgr.lock("restart", "a change") as info:
        await mgr.lock("restart").note("flags: written")  # a note from another lock object: not ours, no write
        held = mgr.lock("watch")
        assert await held.holder() == info
    assert texec("cat", VICTIM) == "precious\n"
    assert texec("stat", "-c", "%F %U %a", f"{LOCK}.owner").strip() == "regular empty file root 644"
    assert texec("readlink", f"{OLD}.owner").strip() == VICTIM  # untouched, and unused


async def test_a_link_at_the_lock_files_path_is_refused_and_its_target_unchanged(host: list[int],
                                                                                 root: SshTransport) -> None:
    texec("sh", "-c", f"mkdir -p -m 755 {LOCK_DIR}; ln -sfn {VICTIM} {LOCK}")
    with pytest.raises(PermanentManagerError, match=f"{LOCK} is a symbolic link"):
        async with SystemdManager(root, UNIT).lock("restart"):
            pass
    assert texec("cat", VICTIM) == "precious\n"
    assert texec("stat", "-c", "%a", VICTIM).strip() == "644"


# ------------------------------------------------------------------------------------------------ (c)


async def test_a_lock_held_by_a_process_that_is_no_bringup_names_its_pid_and_user(host: list[int],
                                                                                  root: SshTransport) -> None:
    mgr = SystemdManager(root, UNIT)
    async with mgr.lock("restart"):  # the directory and the file, as bringup makes them
        pass
    pid = spawn("flock", "-n", LOCK, "sleep", "300")  # an operator's stray command, say
    host.append(pid)
    await asyncio.to_thread(holding, LOCK)
    with pytest.raises(LockHeld) as e:
        async with mgr.lock("restart"):
            pass
    assert (f"the lock {LOCK} on testhost is held by pid {pid} (user root: flock -n {LOCK} sleep 300), which is "
            "not a bringup; it left no record") in str(e.value)
    assert "another bringup" not in str(e.value)
    # a record that names another process (forged, or a dead bringup's) does not make it a bringup
    fake = {"who": "ops@gpu-1", "pid": 4242, "since": time.time(), "purpose": "restart x", "token": "t",
            "lock_pid": 1}
    texec("sh", "-c", f"printf '%s' '{json.dumps(fake)}' > {LOCK}.owner")
    with pytest.raises(LockHeld, match=rf"held by pid {pid} \(user root: flock .*\), which is not a bringup; its "
                                       r"record names ops@gpu-1 \(pid 4242\) restart x since .*, holding pid 1"):
        async with mgr.lock("restart"):
            pass


async def test_a_lock_held_by_another_bringup_is_still_named_as_that_bringup(
        host: list[int], root: SshTransport, tester: SshTransport) -> None:
    first = SystemdManager(tester, UNIT, sudo=True)  # as root through sudo: the same lock as root's
    async with first.lock("restart a", "+ --x") as info:
        assert texec("stat", "-c", "%U %a", LOCK, f"{LOCK}.owner").split() == ["root", "600", "root", "644"]
        with pytest.raises(LockHeld, match=rf"another bringup is already restarting this deployment: {info.who} "
                                           rf"\(pid {info.pid}\) restart a since .*: \+ --x"):
            async with SystemdManager(root, UNIT).lock("restart b"):
                pass
        await first.lock("watch").note("ignored")  # not the holding object: nothing written
        assert json.loads(texec("cat", f"{LOCK}.owner"))["token"] == info.token
    assert texec("cat", f"{LOCK}.owner") == ""  # released: the record cleared, through sudo


async def test_a_sudo_lock_goes_with_the_connection(host: list[int], root: SshTransport, ssh_config: Path) -> None:
    """The holder runs as root under sudo; a connection that goes (here: closed without releasing) ends it."""
    t = SshTransport("testhost-tester", config=[str(ssh_config)])
    lock = SystemdManager(t, UNIT, sudo=True).lock("restart")
    await lock.__aenter__()
    assert await lock.still_held()
    await t.close()

    async def taken() -> bool:
        try:
            async with SystemdManager(root, UNIT).lock("restart"):
                return True
        except LockHeld:
            return False

    await until_awaited("the lock free once its holder's connection is gone", taken, 20, every=0.3)
