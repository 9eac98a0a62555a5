"""No evidence, no change (issue 47, finding 7): a restart whose release wait has no GPU readings to go on is refused
before anything is touched, and a command that cannot be run is said at once.

It was an outage: with nvidia-smi missing on a host, `restart` stopped a ready server, waited the whole release
timeout for readings that could not come, refused to start, and left it stopped. Now the readings are asked for
first (tui/ops/evidence.py, by `plan_change` and by the protocol under the lock): no readings, and the server stays up
with the same process, its argv file as it was, the lock free; `--without-gpu-evidence` goes on by name and is
recorded. A missing nvidia-smi (ENOENT, or a shell's 127) is a permanent error: a `stop` says it in seconds.

End to end: real `bringup` processes, the simulated server as a `process` deployment, and nvidia-smi found on PATH
as the operator's host would have it -- here a PATH without one, or with one that fails.
"""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup, Result, process_alive
from tests.helpers.simdeploy import process_deployment, sim_host
from tui.collectors.gpu_nvml import NvmlSource, NvmlUnavailable
from tui.config.parts import HostConfig

pytestmark = pytest.mark.slow

#: long enough that an old-code wait for readings runs far past every command's timeout below
RELEASE_TIMEOUT_S = 600.0

#: how nvidia-smi is broken on PATH: not there at all, there and failing, there and printing garbage, and a shell
#: that cannot find it (what an SSH host's shell says: 127)
BROKEN = {
    "missing": None,
    "exit-1": "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\nexit 1\n",
    "garbage": "#!/bin/sh\necho 'lorem ipsum, dolor'\necho '%%%'\nexit 0\n",
    "nvml-absent": None,  # gpu_source = "nvml" where NVML cannot be used
}


@dataclass
class Blind(Bringup):
    """The sim deployment whose host reads its GPUs with a bare `nvidia-smi`, found on this command's PATH; `smi`
    True: the simulated one (readings work), else whatever `bin/` holds."""

    smi: bool = True
    shell: bool = False
    nvml: bool = False
    grace: float | None = None
    bin: Path = field(init=False)

    def write_config(self) -> None:
        self.bin = self.tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        extra: dict[str, Any] = {} if self.grace is None else {"unverified_release_grace_s": self.grace}
        dep = process_deployment(self.sim_command(), self.port, release_timeout_s=RELEASE_TIMEOUT_S,
                                 stop_timeout_s=self.stop_timeout_s, **extra)
        bare = ["sh", "-c", 'exec nvidia-smi "$@"', "nvidia-smi"] if self.shell else ["nvidia-smi"]
        host = (sim_host(self.sim_state) if self.smi else HostConfig(gpu_source="nvml") if self.nvml else
                HostConfig(gpu_source="nvidia-smi", nvidia_smi=bare))
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": host}, deployments={self.name: dep}).write(self.config)
        path = f"{self.bin}:/usr/bin:/bin"
        self.env = {**self.env, "PATH": path}

    def blind(self, how: str, *, shell: bool = False) -> None:
        """From now on the GPUs are read with `nvidia-smi` from PATH, broken as `how` says."""
        if shutil.which("nvidia-smi", path=self.env["PATH"].split(":", 1)[1]):
            pytest.skip("this machine has a real nvidia-smi on /usr/bin or /bin")
        if how == "nvml-absent":
            try:
                NvmlSource().close()
            except NvmlUnavailable:
                pass
            else:
                pytest.skip("this machine has a working NVML")
        script = BROKEN[how]
        target = self.bin / "nvidia-smi"
        target.unlink(missing_ok=True)
        if script is not None:
            target.write_text(script)
            target.chmod(target.stat().st_mode | stat.S_IXUSR)
        self.smi, self.shell, self.nvml = False, shell, how == "nvml-absent"
        self.write_config()

    def history(self) -> list[dict[str, Any]]:
        try:
            raw = json.loads((self.run_dir / "history.json").read_text())
        except (OSError, ValueError):
            return []
        runs = raw.get("runs", raw) if isinstance(raw, dict) else raw
        return [r for r in runs if isinstance(r, dict)]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Blind]]:
    made: list[Blind] = []

    def new(**kw: Any) -> Blind:
        d = Blind(tmp_path, **kw)
        made.append(d)
        return d

    yield new
    for d in made:
        d.smi = True
        d.write_config()
        d.run("stop", d.name, timeout=60)


def steps(r: Result, name: str = "") -> list[dict[str, Any]]:
    return [v for v in r.json_values() if isinstance(v, dict) and "step" in v and (not name or v["step"] == name)]


def assert_untouched(bu: Blind, before: dict[str, Any], argv: bytes | None) -> None:
    """The server as it was: the same run, the same process alive, the argv file byte for byte."""
    now = bu.current()
    assert now is not None and now["invocation"] == before["invocation"] and now.get("exited_at") is None, now
    assert process_alive(before["pid"]), before
    assert bu.argv_bytes() == argv
    code, _ = bu.http_get("/health", timeout=5.0)
    assert code == 200


@pytest.mark.parametrize("how", list(BROKEN))
def test_a_restart_without_gpu_readings_is_refused_before_anything_is_touched(
        make: Callable[..., Blind], how: str) -> None:
    bu = make()
    bu.bring_up("--set", "disable-cuda-graph")  # flags written by bringup: its argv file exists
    before, argv = bu.current(), bu.argv_bytes()
    assert before is not None and argv is not None
    bu.blind(how)
    for extra in ((), ("--unset", "disable-cuda-graph")):
        r = bu.run("restart", bu.name, *extra, "--yes", "--json", timeout=60)
        assert r.rc == 2, r.describe()
        msg = r.json()["error"]
        assert "\n" not in msg and msg.startswith("no GPU readings from simhost ("), msg
        assert "nothing was done" in msg and "--without-gpu-evidence" in msg, msg
        if how == "missing":
            assert "cannot run 'nvidia-smi'" in msg and "a permanent error" in msg, msg
        assert not steps(r), r.describe()  # refused before the lock, the flags or a stop
        assert r.seconds < 30, r.describe()
        assert_untouched(bu, before, argv)
    # the lock was let go: the override, next, takes it


def test_the_override_goes_on_without_gpu_evidence_and_is_recorded(make: Callable[..., Blind]) -> None:
    bu = make()
    bu.bring_up()
    old = bu.invocation()
    bu.blind("missing")
    r = bu.run("restart", bu.name, "--set", "disable-cuda-graph", "--without-gpu-evidence", "--yes", "--json",
               timeout=90)
    assert r.rc == 0, r.describe()
    said = steps(r, "evidence")
    assert len(said) == 1 and said[0]["status"] == "skipped", r.describe()
    assert "WITHOUT GPU evidence" in said[0]["detail"] and "--without-gpu-evidence" in said[0]["detail"], said
    release = steps(r, "release")[-1]
    assert release["status"] == "skipped" and "NOT verified" in release["detail"], release
    assert "--without-gpu-evidence" in release["detail"], release
    new = bu.invocation()
    assert new and new != old
    assert "--disable-cuda-graph" in json.dumps(bu.argv_json())
    # the run history's record of the new run names the override among the actions that led to it
    run = next((x for x in bu.history() if x.get("invocation") == new), None)
    assert run is not None, bu.history()
    actions = [a["action"] for a in run.get("actions", [])]
    assert "restart without GPU evidence (--without-gpu-evidence)" in actions, actions


def test_a_start_without_gpu_readings_is_refused_under_the_lock_and_starts_nothing(
        make: Callable[..., Blind]) -> None:
    bu = make()
    bu.blind("exit-1")
    r = bu.run("start", bu.name, "--json", timeout=60)
    assert r.rc == 2, r.describe()
    assert "no GPU readings from simhost" in r.json()["message"], r.describe()
    assert [s["step"] for s in steps(r)] == ["lock", "evidence"], r.describe()
    assert bu.current() is None, bu.current()  # nothing ever started
    ok = bu.run("start", bu.name, "--without-gpu-evidence", "--no-wait", timeout=60)
    assert ok.rc == 0, ok.describe()  # the lock was let go, and the override starts it


@pytest.mark.parametrize("shell", [False, True], ids=["enoent", "shell-127"])
def test_a_missing_nvidia_smi_is_said_at_once_not_after_the_release_timeout(
        make: Callable[..., Blind], shell: bool) -> None:
    """A stop is no restart: it stops. But its release wait now says at once that nvidia-smi cannot be run
    (ENOENT here; a shell's 127, as over SSH), where it waited the whole release timeout (600 s) for it."""
    bu = make()
    bu.bring_up()
    old = bu.current()
    assert old is not None
    bu.blind("missing", shell=shell)
    r = bu.run("stop", bu.name, "--json", timeout=60)
    assert r.rc == 3, r.describe()
    msg = r.json()["error"]
    assert "a permanent error: waiting will not fix it" in msg, msg
    assert ("command not found (exit 127)" if shell else "No such file or directory") in msg, msg
    assert r.seconds < 30, r.describe()
    assert not process_alive(old["pid"])
