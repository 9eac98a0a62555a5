"""No GPU readings is no GPU memory release (issue 28, item 1), and no "started" before a process exists (item 3).

A user's restart, on a host whose `nvidia_smi` could not be run, said "cannot verify GPU memory release" and started
at once: the old run's memory was released 20 s later, and the new run died of torch.OutOfMemoryError. Now a host
configured with a GPU source but giving no readings is waited on for them up to release_timeout_s, then the start
is refused (exit 3) -- unless a grace accepts the risk (`unverified_release_grace_s`, `--unverified-release-grace`).
A stop is not called done without readings either. A host that declares no GPU telemetry (`gpu_source = "none"`)
has nothing to wait for, as before.

End to end, as the CLI tests are (tests/helpers/e2e.py): real `bringup` subprocesses, the simulated server as a
`process` deployment, and the simulated nvidia-smi -- or a path where there is none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup, Result, process_alive
from tests.helpers.ports import free_port
from tests.helpers.simdeploy import process_deployment, sim_command, sim_host
from tui.config.parts import HostConfig

pytestmark = pytest.mark.slow


@dataclass
class Deployment(Bringup):
    """A simulated `process` deployment whose host's GPU readings can be broken (`nvidia_smi`: a path where there
    is no program) or declared absent (`gpu_source = "none"`), with a grace, and a command of its own."""

    nvidia_smi: tuple[str, ...] = ()
    gpu_source: Literal["auto", "nvml", "nvidia-smi", "none"] = "nvidia-smi"
    grace: float | None = None
    command: tuple[str, ...] = ()

    def write_config(self) -> None:
        extra: dict[str, Any] = {} if self.grace is None else {"unverified_release_grace_s": self.grace}
        dep = process_deployment(list(self.command) or self.sim_command(), self.port,
                                 release_timeout_s=self.release_timeout_s, stop_timeout_s=self.stop_timeout_s, **extra)
        host = sim_host(self.sim_state)
        if self.nvidia_smi or self.gpu_source != "nvidia-smi":
            host = HostConfig(gpu_source=self.gpu_source, nvidia_smi=list(self.nvidia_smi) or host.nvidia_smi)
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": host}, deployments={self.name: dep}).write(self.config)

    def break_readings(self) -> str:
        """From now on the host's `nvidia_smi` is a path with no program: every GPU reading fails."""
        missing = str(self.tmp / "no-such-dir" / "nvidia-smi")
        self.nvidia_smi = (missing,)
        self.write_config()
        return missing


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Deployment]]:
    made: list[Deployment] = []

    def new(**kw: Any) -> Deployment:
        d = Deployment(tmp_path, **kw)
        made.append(d)
        return d

    yield new
    for d in made:
        d.run("stop", d.name, "--unverified-release-grace", "0", timeout=60)


def steps(r: Result, name: str = "") -> list[dict[str, Any]]:
    return [v for v in r.json_values() if isinstance(v, dict) and "step" in v and (not name or v["step"] == name)]


def test_a_restart_without_gpu_readings_is_refused_and_leaves_the_server_running(
        make: Callable[..., Deployment]) -> None:
    """It once stopped the server, waited release_timeout_s for readings, refused to start and left it stopped (an
    outage, issue 47): now it is refused before anything is touched (tests/e2e/test_no_evidence_no_change.py)."""
    bu = make(release_timeout_s=3.0)
    bu.bring_up()
    old = bu.current()
    assert old is not None
    missing = bu.break_readings()
    r = bu.run("restart", bu.name, "--yes", "--json", timeout=90)
    assert r.rc == 2, r.describe()
    final = r.json()
    assert final["code"] == 2 and not final.get("ok"), r.describe()
    msg = final["error"]
    # one line: what could not be read (the command, the OS's error), that nothing was done, and how to go on
    assert "\n" not in msg, msg
    assert f"no GPU readings from simhost (nvidia-smi: cannot run '{missing}'" in msg, msg
    assert "nothing was done" in msg and "--without-gpu-evidence" in msg, msg
    assert not steps(r) and "started: pid" not in r.out, r.describe()
    # the old run still runs
    cur = bu.current()
    assert cur is not None and cur["invocation"] == old["invocation"] and cur["exited_at"] is None, cur
    assert process_alive(old["pid"])


def test_with_the_grace_configured_a_restart_starts_after_it_saying_the_release_was_not_verified(
        make: Callable[..., Deployment]) -> None:
    bu = make(release_timeout_s=60.0)
    bu.bring_up()
    old = bu.invocation()
    bu.grace = 2.0
    bu.break_readings()
    r = bu.run("restart", bu.name, "--yes", "--json", timeout=90)
    assert r.rc == 0, r.describe()
    rel = steps(r, "release")
    gone = next(s for s in rel if "processes are gone" in s["detail"])
    done = rel[-1]
    assert done["status"] == "skipped", rel
    assert "NOT verified" in done["detail"] and "unverified_release_grace_s" in done["detail"], done
    assert "CUDA OOM" in done["detail"], done
    start = steps(r, "start")[0]
    # the grace counted from the old run's processes gone (steps are stamped by the wall clock and the grace is
    # timed by the monotonic one: a millisecond of slew between them is not a shorter grace)
    assert start["at"] - gone["at"] >= 2.0 - 0.01, (gone, start)
    assert r.json()["release"] == done["detail"], r.describe()
    new = bu.invocation()
    assert new and new != old


def test_a_stop_without_gpu_readings_exits_3_and_the_grace_flag_lets_start_and_stop_through(
        make: Callable[..., Deployment]) -> None:
    bu = make(release_timeout_s=3.0)
    bu.bring_up()
    old = bu.current()
    assert old is not None
    bu.break_readings()
    s = bu.run("stop", bu.name, timeout=60)
    assert s.rc == 3, s.describe()
    line = [x for x in s.err.splitlines() if x.startswith("bringup:")]
    assert len(line) == 1, s.describe()
    # a program that cannot be run is said at once, not after release_timeout_s
    assert ("stopped, but GPU memory release not verified: no GPU readings from simhost (a permanent error: "
            "waiting will not fix it)") in line[0], s.describe()
    assert "a start now could hit a CUDA OOM" in line[0] and "--unverified-release-grace" in line[0], s.describe()
    assert not process_alive(old["pid"])  # stopped all the same: only its memory is unproven

    # the risk accepted on the command line, for this command only: start, then stop, without readings
    st = bu.run("start", bu.name, "--unverified-release-grace", "1", timeout=90)
    assert st.rc == 0, st.describe()
    assert re.search(r"\[ - \] release +GPU memory release NOT verified", st.out), st.describe()
    assert "started: pid" in st.out, st.describe()
    s2 = bu.run("stop", bu.name, "--unverified-release-grace", "0", "--json", timeout=60)
    assert s2.rc == 0, s2.describe()
    assert "NOT verified" in s2.json()["release"], s2.describe()
    # and without it, a start is refused again, before it starts anything: the flag was this command's only
    st2 = bu.run("start", bu.name, timeout=60)
    assert st2.rc == 2 and "no GPU readings from simhost" in st2.out and "nothing was done" in st2.out, \
        st2.describe()


def test_a_host_that_declares_no_gpu_telemetry_still_restarts_without_waiting(
        make: Callable[..., Deployment]) -> None:
    bu = make(gpu_source="none", release_timeout_s=60.0)
    r = bu.run("restart", bu.name, "--yes", timeout=90)
    assert r.rc == 0, r.describe()
    assert re.search(r"\[ - \] release +GPU memory release not verified: simhost declares no GPU telemetry "
                     r"\(gpu_source = \"none\"\)", r.out), r.describe()
    s = bu.run("stop", bu.name, timeout=60)
    assert s.rc == 0, s.describe()


def test_a_command_that_cannot_be_run_fails_the_start_naming_it_never_started_pid_0(
        make: Callable[..., Deployment], tmp_path: Path) -> None:
    """A `process` deployment whose command is a relative path that does not exist from where bringup runs (the
    report: `.venv/bin/python` run from another directory): the supervisor never had a process."""
    cmd = (".venv/bin/python", *sim_command(free_port(), tmp_path / "simgpu")[1:])
    bu = make(command=cmd)
    for verb in ("start", "restart"):
        r = bu.run(verb, bu.name, "--yes", timeout=60) if verb == "restart" else bu.run(verb, bu.name, timeout=60)
        assert r.rc not in (0, 3), r.describe()
        assert not re.search(r"\bpid 0\b|(?<!not )started:", r.text), r.describe()
        failed = [x for x in r.out.splitlines() if re.match(r"\s*\[ERR\] start ", x)]
        assert len(failed) == 1, r.describe()
        assert "cannot start '.venv/bin/python': No such file or directory" in failed[0], r.describe()
        assert f"relative to {bu.tmp}" in failed[0], r.describe()
        assert "cannot start '.venv/bin/python'" in r.out.splitlines()[-1], r.describe()


SWEEP_PLAN = """
name = "no-readings"
[[configs]]
name = "graphs-off"
set = { disable-cuda-graph = true }
[[configs]]
name = "base"

[matrix]
prompt_tokens = [16]
output_tokens = [8]
concurrency = [1]
requests = 2
warmup_requests = 1
"""


def test_a_sweep_without_gpu_readings_records_the_refusal_and_starts_no_further_configuration(
        make: Callable[..., Deployment], tmp_path: Path) -> None:
    """Every configuration of a sweep goes through the same safe restart: a refused release ends the sweep there,
    with its reason in the records, and the next configuration is never started into GPUs that may be held."""
    bu = make(release_timeout_s=3.0)
    bu.bring_up()
    old = bu.current()
    assert old is not None
    bu.break_readings()
    plan = tmp_path / "plan.toml"
    plan.write_text(SWEEP_PLAN)
    out = tmp_path / "results"
    r = bu.run("sweep", bu.name, str(plan), "--out", str(out), "--yes", "--json", timeout=120)
    assert r.rc != 0, r.describe()
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    # refused before its flags were written or the server stopped (no evidence, no change: issue 47)
    refused = [x for x in recs if x.get("type") == "step" and x["name"] == "evidence" and x["status"] == "failed"]
    assert [x["config"] for x in refused] == ["graphs-off"], recs
    assert "no GPU readings" in refused[0]["detail"], refused
    touched = [x for x in recs if x.get("type") == "step" and x["name"] in ("flags", "stop", "start")]
    assert not touched, recs  # nothing written, stopped or started
    assert not [x for x in recs if x.get("config") == "base"], recs  # the next configuration never began
    done = recs[-1]
    assert done["type"] == "done" and done["status"] == "failed", done
    assert "no GPU readings" in done["message"] and "graphs-off" in done["message"], done
    cur = bu.current()
    assert cur is not None and cur["invocation"] == old["invocation"] and cur["exited_at"] is None, cur
