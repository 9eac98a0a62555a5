""".ci/testhost.sh without booting a container: its syntax, the host-layout check (run against layouts made in a
private mount namespace), and the guards around the record of the running host (against a stand-in systemd-nspawn,
a shell script of that name in a cgroup of its own, booting an empty rootfs in a scratch copy of the repo).

Never touches the real test host: every command that could change state runs in a scratch copy, whose .testhost/ is
its own, under a cgroup name of its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "testhost.sh"
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="the script runs as root only")


def run(script: Path, *argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}
    return subprocess.run(["bash", str(script), *argv], capture_output=True, text=True, timeout=slack(60),
                          env={**base, **(env or {})})


def supported() -> bool:
    return IS_ROOT and run(SCRIPT, "check").returncode == 0


def test_syntax() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck() -> None:
    res = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


#: the Slurm test cluster's script (three test hosts of SCRIPT; tests/e2e/test_slurm_cluster.py runs it for real)
SLURM_SCRIPT = ROOT / ".ci" / "slurm.sh"


def test_slurm_script_syntax() -> None:
    assert subprocess.run(["bash", "-n", str(SLURM_SCRIPT)]).returncode == 0


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_slurm_script_shellcheck() -> None:
    res = subprocess.run(["shellcheck", str(SLURM_SCRIPT)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout


# --------------------------------------------------------------------------------------------------- host layout

# each builds another host layout inside `unshare --mount`, then runs `check`; (setup, what the error must say)
LAYOUTS = {
    "pure cgroup2": ("mount -t cgroup2 none /sys/fs/cgroup", "pure cgroup2"),
    "cgroup v1 only": ("mount -t tmpfs none /sys/fs/cgroup/unified", "no cgroup2 at /sys/fs/cgroup/unified"),
    "no name=systemd": ("mount -t tmpfs none /sys/fs/cgroup/systemd", "no cgroup v1 name=systemd"),
    "read-only cgroups": ("mount -o remount,bind,ro /sys/fs/cgroup/systemd", "not writable"),
    "booted with systemd": ("mount -t tmpfs none /run/systemd && mkdir /run/systemd/system", "booted with systemd"),
}


@needs_root
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_unsupported_layout_is_refused(layout: str) -> None:
    if not supported():
        pytest.skip("this machine is not a supported host itself")
    setup, why = LAYOUTS[layout]
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                          f'{setup} && exec bash "$0" check', str(SCRIPT)], capture_output=True, text=True,
                         timeout=slack(30))
    assert res.returncode == 1, res
    assert res.stderr.startswith("[testhost] error: unsupported host: ") and why in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1


@needs_root
@pytest.mark.skipif(shutil.which("unshare") is None, reason="no unshare")
def test_systemd_as_pid1_is_refused(tmp_path: Path) -> None:
    if not supported():
        pytest.skip("this machine is not a supported host itself")
    init = tmp_path / "systemd"   # PID 1's comm is the name of the file it runs
    init.write_text(f'#!/bin/bash\nbash {SCRIPT} check\nexit $?\n')
    init.chmod(0o755)
    res = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", str(init)], capture_output=True, text=True,
                         timeout=slack(30))
    assert res.returncode == 1 and "systemd is PID 1" in res.stderr, res


# ------------------------------------------------------------------------------------------ the running host's record


@pytest.fixture
def fake_host(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A scratch repo whose (empty) rootfs is 'booted' by a stand-in systemd-nspawn, in the cgroup NAME."""
    if not supported():
        pytest.skip("needs a supported host (root, hybrid cgroups)")
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / ".ci" / "testhost.sh")
    rootfs = repo / ".testhost" / "rootfs"
    rootfs.mkdir(parents=True)
    (repo / ".testhost" / "run").mkdir()
    nspawn = tmp_path / "bin" / "systemd-nspawn"
    nspawn.parent.mkdir()
    nspawn.write_text("#!/bin/bash\nread -r _\n")   # no child: it stays in its cgroup alone
    nspawn.chmod(0o755)
    name = f"thtest-{os.getpid()}"
    proc = subprocess.Popen([str(nspawn), "-D", str(rootfs), "-b", "-M", name], stdin=subprocess.PIPE)
    cgroups = [Path(f"/sys/fs/cgroup/{h}/{name}") for h in ("systemd", "unified")]
    try:
        for cg in cgroups:
            cg.mkdir()
            (cg / "cgroup.procs").write_text(str(proc.pid))
        (repo / ".testhost" / "run" / "nspawn.pid").write_text(f"{proc.pid}\n")
        (repo / ".testhost" / "run" / "host.env").write_text(
            f"TESTHOST_NAME={name}\nTESTHOST_SSH_PORT=2395\nTESTHOST_SIM_PORT=30095\n")
        yield repo / ".ci" / "testhost.sh", name
    finally:
        proc.kill()
        proc.wait()
        for cg in cgroups:
            if cg.exists():
                cg.rmdir()


@needs_root
def test_second_up_with_another_name_is_refused(fake_host: tuple[Path, str]) -> None:
    script, name = fake_host
    res = run(script, "up", env={"TESTHOST_NAME": "other", "TESTHOST_SSH_PORT": "2299"})
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res
    assert f"the test host {name} (ssh 127.0.0.1:2395, sim port 30095) is already up" in res.stderr
    assert f"TESTHOST_NAME={name} " in res.stderr and " down" in res.stderr
    # the same name on another port: refused too
    res = run(script, "up", env={"TESTHOST_SSH_PORT": "2299"})
    assert res.returncode == 1 and "not booting" in res.stderr, res
    assert (script.parent.parent / ".testhost" / "run" / "host.env").exists()   # nothing was cleaned up


@needs_root
def test_refused_for_a_host_of_an_older_script(fake_host: tuple[Path, str]) -> None:
    """No host.env, only run/port: the name comes from nspawn's cgroup."""
    script, name = fake_host
    run_dir = script.parent.parent / ".testhost" / "run"
    (run_dir / "host.env").unlink()
    (run_dir / "port").write_text("2395\n")
    res = run(script, "up", env={"TESTHOST_NAME": "other", "TESTHOST_SSH_PORT": "2299"})
    assert res.returncode == 1 and f"the test host {name} (ssh 127.0.0.1:2395," in res.stderr, res


@needs_root
def test_other_commands_use_the_record(fake_host: tuple[Path, str]) -> None:
    script, name = fake_host
    # no PID 1 behind the stand-in: `status` finds the recorded host's cgroup, not the default name's
    res = run(script, "status")
    assert res.returncode == 3 and res.stdout.startswith("stale"), res
    res = run(script, "down", env={"TESTHOST_NAME": "other"})
    assert res.returncode == 1 and f"the test host running from {script.parent.parent}/.testhost/rootfs is {name}" \
        in res.stderr, res
    res = run(script, "clean", env={"TESTHOST_NAME": "other"})
    assert res.returncode == 1 and f"the test host {name} is up" in res.stderr, res
    assert (script.parent.parent / ".testhost" / "rootfs").is_dir()
    res = run(script, "status", env={"TESTHOST_NAME": "other"})
    assert res.returncode == 3 and res.stdout == "down\n"
    assert f"warning: TESTHOST_NAME=other, but the running host is {name}" in res.stderr, res


@needs_root
def test_bad_variables_are_refused() -> None:
    for env, msg in [({"TESTHOST_NAME": "a/b"}, "not a machine name"), ({"TESTHOST_SSH_PORT": "70000"}, "not a port"),
                     ({"TESTHOST_SIM_PORT": "x"}, "not a port")]:
        res = run(SCRIPT, "status", env=env)
        assert res.returncode == 1 and msg in res.stderr, (env, res)
