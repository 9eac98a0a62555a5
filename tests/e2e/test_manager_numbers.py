"""The numbers the managers and the SSH transport read from a command's output, a host's file or a config are taken
by tui/guard/numbers.py (issue 47.5): a value that is no number is absent (or, for a config's value, refused in one
line), never a crash and never taken.

Each reader used to check `x.isdigit()` and call `int(x)`/`float(x)`: `"²".isdigit()` is True and `int("²")` raises,
so do 5,000 digits (Python's limit on a number's digits); `float("inf")` and 30 digits were taken; `-1` went through
`lstrip("-")`. The commands here are real processes through the real local transport: `systemctl` and `docker`
stand-ins on PATH print what a hostile or broken tool would (systemd itself prints no `²`).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.managers import LockHeld
from tui.managers.docker import DockerManager
from tui.managers.remote_lock import RemoteLock
from tui.managers.systemd import SystemdManager
from tui.model import UnitState
from tui.transport import PermanentTransportError, process_alive
from tui.transport.local import LocalTransport
from tui.transport.ssh_known_hosts import _check_jump_hosts, client_options

#: no number at all, or none that is a pid, a count, a moment or a port: each crashed a reader or was taken
HOSTILE = ["²", "inf", "-1", "9" * 5000, "9" * 30, "true"]
#: the tests' names for them (5,000 digits are no name)
IDS = ["superscript-2", "inf", "minus-1", "5000-digits", "30-digits", "true"]
UNIT = "sglang.service"
RUNNING = UnitState(active="active", sub="running", main_pid=0, invocation="i")


def _tool(directory: Path, name: str, body: str) -> Path:
    """An executable stand-in for a host's tool: `body` is a shell script's text."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


class CgroupHost(LocalTransport):
    """This host, with its cgroup tree's files under `root`: a unit's `cgroup.procs` is what the test writes."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root

    async def read_file(self, path: str) -> bytes | None:
        if path.startswith("/sys/fs/cgroup/"):
            path = str(self.root / path.removeprefix("/sys/fs/cgroup/"))
        return await super().read_file(path)


@pytest.fixture
def systemctl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `systemctl` first on PATH: `show` prints the file `show` beside it, `cat` a unit that runs /bin/true."""
    bin_dir = tmp_path / "bin"
    _tool(bin_dir, "systemctl", 'case "$1" in\n'
                                'show) cat "$(dirname "$0")/show" ;;\n'
                                f"cat) printf '# /etc/systemd/system/{UNIT}\\n[Service]\\nExecStart=/bin/true\\n' ;;\n"
                                "esac\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir / "show"


def _show(**props: str) -> str:
    base = {"LoadState": "loaded", "ActiveState": "active", "SubState": "running", "InvocationID": "i",
            "ExecMainCode": "2", "ControlGroup": f"/system.slice/{UNIT}"}
    return "".join(f"{k}={v}\n" for k, v in {**base, **props}.items())


@pytest.mark.parametrize("bad", HOSTILE, ids=IDS)
async def test_systemctl_shows_numbers_that_are_none_read_as_absent(systemctl: Path, tmp_path: Path,
                                                                    bad: str) -> None:
    systemctl.write_text(_show(MainPID=bad, NRestarts=bad, ExecMainStatus=bad, ExecMainStartTimestamp=f"@{bad}",
                               ActiveEnterTimestamp=f"@{bad}", InactiveEnterTimestamp=f"@{bad}"))
    unit = await SystemdManager(LocalTransport(), UNIT).state()
    assert (unit.main_pid, unit.n_restarts, unit.exit_status, unit.started_at, unit.exited_at) == (0, 0, None,
                                                                                                  None, None)
    assert unit.active == "active" and unit.argv == ("/bin/true",)  # the rest of the reading is still there


async def test_systemctl_shows_real_numbers_as_they_are(systemctl: Path) -> None:
    systemctl.write_text(_show(MainPID="1234", NRestarts="2", ExecMainStatus="9", ExecMainStartTimestamp="@",
                               ActiveEnterTimestamp="@1732870000", InactiveEnterTimestamp=""))
    unit = await SystemdManager(LocalTransport(), UNIT).state()
    assert (unit.main_pid, unit.n_restarts, unit.exit_status, unit.started_at, unit.exited_at) == (
        1234, 2, -9, 1732870000.0, None)  # killed by signal 9, and the start from ActiveEnterTimestamp


@pytest.mark.parametrize("bad", HOSTILE, ids=IDS)
async def test_a_cgroups_procs_words_that_are_no_pids_are_left_out(systemctl: Path, tmp_path: Path,
                                                                   bad: str) -> None:
    systemctl.write_text(_show(MainPID="12"))
    procs = tmp_path / "cgroup" / "system.slice" / UNIT / "cgroup.procs"
    procs.parent.mkdir(parents=True)
    procs.write_text(f"12\n{bad}\n34\n")
    mgr = SystemdManager(CgroupHost(tmp_path / "cgroup"), UNIT)
    unit = await mgr.state()
    assert await mgr.pids(unit) == {12, 34}


@pytest.mark.parametrize("bad", HOSTILE, ids=IDS)
async def test_docker_tops_words_that_are_no_pids_are_left_out(tmp_path: Path, bad: str) -> None:
    (tmp_path / "top").write_text(f"PID\n12\n{bad}\n34 extra\n")
    docker = _tool(tmp_path / "bin", "docker", f'[ "$1" = top ] && cat {tmp_path / "top"}\n')
    mgr = DockerManager(LocalTransport(), "sglang", str(tmp_path / "state"), engine=str(docker))
    assert await mgr.pids(RUNNING) == {12, 34}


# ------------------------------------------------------------------ the lock's record and the lock script's answer


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A live process that is no lock's holder: what a forged record's pid may name."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _record(path: Path, lock_pid: object, token: str = "t") -> None:
    rec = {"who": "ops@gpu-1", "pid": 4242, "since": time.time(), "purpose": "restart", "token": token,
           "lock_pid": lock_pid}
    Path(f"{path}.owner").write_text(json.dumps(rec))


@pytest.mark.parametrize("bad", [*HOSTILE, 10**30, -1, True, "LIVE", "LIVE_UNDERSCORED", "LIVE_SPACED"],
                         ids=[*IDS, "number-10e30", "number-minus-1", "json-true", "live-pid-in-quotes",
                              "live-pid-with-underscore", "live-pid-with-space"])
async def test_a_record_whose_lock_pid_is_no_pid_names_no_holder(tmp_path: Path, sleeper: int, bad: object) -> None:
    """The script writes `lock_pid` as a JSON number (`$$`); a pid in quotes, even one alive, names nobody."""
    live = {"LIVE": str(sleeper), "LIVE_UNDERSCORED": f"{sleeper:_}", "LIVE_SPACED": f" {sleeper}"}
    lock = RemoteLock(LocalTransport(), str(tmp_path / "x.lock"), "restart")
    _record(tmp_path / "x.lock", live.get(bad, bad) if isinstance(bad, str) else bad)
    assert await lock.holder() is None


async def test_a_record_whose_lock_pid_is_alive_names_its_holder(tmp_path: Path, sleeper: int) -> None:
    lock = RemoteLock(LocalTransport(), str(tmp_path / "x.lock"), "restart")
    _record(tmp_path / "x.lock", sleeper)
    holder = await lock.holder()
    assert holder is not None and holder.who == "ops@gpu-1"


@pytest.mark.parametrize("bad", HOSTILE, ids=IDS)
async def test_a_busy_answer_whose_pids_are_none_is_no_crash(tmp_path: Path, bad: str) -> None:
    lock = RemoteLock(LocalTransport(), str(tmp_path / "x.lock"), "restart")
    held = await lock._busy(str(tmp_path / "x.lock"), f"busy {bad} root sleep 300")
    assert isinstance(held, LockHeld)
    assert "no live record names it" in str(held) and f"pid {bad}" not in str(held)


async def test_a_lock_whose_record_names_its_pid_in_quotes_is_not_held_and_kills_nothing(tmp_path: Path,
                                                                                          sleeper: int) -> None:
    """Our own token, but the holder's pid as text naming another live process: `still_held` does not take it as
    ours, and `retake` does not kill that process."""
    path = tmp_path / "x.lock"
    lock = RemoteLock(LocalTransport(), str(path), "restart")
    async with lock as info:
        assert await lock.still_held()
        _record(path, str(sleeper), token=info.token)
        assert not await lock.still_held()
        await lock.retake()
        assert await process_alive(LocalTransport(), sleeper)
        assert await lock.still_held()  # taken again, the record rewritten by the script


# ------------------------------------------------------------------ a ProxyJump host's port, from the ssh_config


@pytest.mark.parametrize("bad", [*HOSTILE, "0", "65536", "+"], ids=[*IDS, "0", "65536", "plus"])
def test_a_proxy_jump_port_that_is_no_port_is_refused_in_one_line(tmp_path: Path, bad: str) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text(f"Host target\n  HostName 127.0.0.1\n  ProxyJump ops@jump:{bad}\n")
    opts = client_options("target", [str(cfg)])
    with pytest.raises(PermanentTransportError, match=r"^target: the ProxyJump host 'jump' in ssh_config .* has the "
                                                      r"port '.{1,20}', which is not a port \(1\.\.65535\); "
                                                      r"refusing to connect$") as e:
        _check_jump_hosts("target", [str(cfg)], opts)
    assert "\n" not in str(e.value) and len(str(e.value)) < 300


def test_a_proxy_jump_port_that_is_one_is_taken(tmp_path: Path) -> None:
    cfg = tmp_path / "ssh_config"
    cfg.write_text("Host target\n  HostName 127.0.0.1\n  ProxyJump ops@jump:2222,jump2\n")
    _check_jump_hosts("target", [str(cfg)], client_options("target", [str(cfg)]))  # nothing refused

