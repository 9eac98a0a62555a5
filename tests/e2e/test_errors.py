"""The likely first mistakes give one line that says what is wrong and what to do (no traceback)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.ports import free_port
from tests.helpers.wait import slack

#: each test's demo gets a port of its own, the same for all its commands: the demo's default 30999 may be taken
#: by a demo someone runs on the machine, or by another test of a parallel run
_DEMO_PORTS: dict[Path, int] = {}


def bringup(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(cwd), "XDG_STATE_HOME": str(cwd / "state"), "XDG_CONFIG_HOME": str(cwd / "cfg"),
           "PATH": "/usr/bin:/bin", "BRINGUP_DEMO_PORT": str(_DEMO_PORTS.setdefault(cwd, free_port()))}
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=slack(60))


def one_line(r: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_ssh_refused(tmp_path: Path) -> None:
    ssh_cfg = tmp_path / "ssh_config"
    ssh_cfg.write_text(f"Host gpu-box\n    HostName 127.0.0.1\n    Port {free_port()}\n    User root\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hosts.gpu-box]\nssh = "gpu-box"\nssh_config = "{ssh_cfg}"\n'
                   '[deployments.k26]\nhost = "gpu-box"\nmanager = "systemd"\nunit = "sglang.service"\n')
    r = bringup(tmp_path, "--config", str(cfg), "stop", "k26")
    assert r.returncode == 1
    assert "SSH connection refused" in one_line(r)


def test_wait_on_an_unreachable_host_says_so_at_once(tmp_path: Path) -> None:
    """`bringup wait` goes on trying (a rebooting host comes back) but names the problem at once, not after the
    whole timeout, and again in its timeout line and its JSON."""
    ssh_cfg = tmp_path / "ssh_config"
    ssh_cfg.write_text(f"Host gpu-box\n    HostName 127.0.0.1\n    Port {free_port()}\n    User root\n")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[hosts.gpu-box]\nssh = "gpu-box"\nssh_config = "{ssh_cfg}"\n'
                   '[deployments.k26]\nhost = "gpu-box"\nmanager = "systemd"\nunit = "sglang.service"\n')
    r = bringup(tmp_path, "--config", str(cfg), "wait", "k26", "--timeout", "4")
    assert r.returncode == 3  # a timeout
    first = r.stderr.splitlines()[0]
    assert "k26: cannot read its state:" in first and "SSH connection refused" in first, r.stderr
    assert "timeout after 4 s; last phase: unknown (its state was never read)" in r.stderr, r.stderr
    assert r.stderr.count("SSH connection refused") == 2, r.stderr
    r = bringup(tmp_path, "--config", str(cfg), "wait", "k26", "--timeout", "2", "--json")
    records = [json.loads(x) for x in r.stdout.splitlines()]
    assert records[0]["collector"] == "unit" and "SSH connection refused" in records[0]["error"], r.stdout
    assert records[-1]["result"] == "timeout", r.stdout


def test_typo_in_deployment_name(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[deployments.k26-dflash]\nmanager = "none"\nendpoint = "http://127.0.0.1:9"\n')
    r = bringup(tmp_path, "--config", str(cfg), "status", "k26-dlfash")
    assert r.returncode == 2
    line = one_line(r)
    assert "unknown deployment 'k26-dlfash'" in line and "k26-dflash" in line


def test_no_config_needed_for_the_demo_and_named_when_missing(tmp_path: Path) -> None:
    r = bringup(tmp_path, "--config", str(tmp_path / "nope.toml"), "status")
    assert r.returncode == 2 and "config file not found" in one_line(r)
    r = bringup(tmp_path, "flags", "demo")  # no config anywhere: the built-in demo still exists
    assert r.returncode == 0 and "disable-cuda-graph" in r.stdout


def test_endpoint_wrong(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[deployments.web]\nmanager = "none"\nendpoint = "http://127.0.0.1:{free_port()}"\n')
    r = bringup(tmp_path, "--config", str(cfg), "bench", "web")
    assert r.returncode == 1 and "cannot connect" in one_line(r)
    cfg.write_text('[deployments.web]\nmanager = "none"\nendpoint = "127.0.0.1:30000"\n')
    r = bringup(tmp_path, "--config", str(cfg), "status", "web")
    assert r.returncode == 2 and "endpoint must start with http://" in one_line(r)


def test_unknown_deployment_with_no_config_says_where_bringup_looked(tmp_path: Path) -> None:
    r = bringup(tmp_path, "status", "k26")
    assert r.returncode == 2
    line = one_line(r)
    assert line.startswith("bringup: unknown deployment 'k26'") and "configured: demo" in line
    assert "no config file found" in line
    for where in ("--config", "$BRINGUP_CONFIG", "./config.toml", str(tmp_path / "cfg" / "bringup" / "config.toml")):
        assert where in line, line


def _replay(cwd: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / "cfg"), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "tui", "replay", *args], input=stdin, capture_output=True, cwd=cwd,
                       env=env, timeout=slack(60))
    return subprocess.CompletedProcess(r.args, r.returncode, r.stdout.decode(), r.stderr.decode())


def test_replay_of_a_binary_file_is_refused(tmp_path: Path) -> None:
    blob = tmp_path / "core.bin"
    blob.write_bytes(b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64 + b"[2026-01-01 10:00:00] server_args=...\n")
    for args, stdin in (([str(blob)], b""), (["-"], blob.read_bytes())):
        r = _replay(tmp_path, *args, stdin=stdin)
        assert r.returncode == 2, r
        assert "binary" in one_line(r) and r.stdout == "", r


def test_replay_of_text_that_is_no_server_log_says_so(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("hello\nthis is not a log\nstarting the day\n")
    r = _replay(tmp_path, str(notes))
    assert r.returncode == 2 and r.stdout == "", r
    assert one_line(r).startswith(f"bringup: no SGLang or vLLM log lines recognised in {notes}: give it ")
    r = _replay(tmp_path, "-", stdin=b"hello\n")
    assert r.returncode == 2 and "no SGLang or vLLM log lines recognised in stdin: " in one_line(r)
    r = _replay(tmp_path, "-", "--json", stdin=b"")
    assert r.returncode == 2 and "no SGLang or vLLM log lines" in one_line(r)


def test_replay_of_a_real_log_still_works(tmp_path: Path) -> None:
    log = Path(__file__).parents[1] / "fixtures" / "logs" / "sglang_tp8_capture_in_progress.log"
    r = _replay(tmp_path, "-", stdin=log.read_bytes())
    assert r.returncode == 0 and r.stderr == "", r
    assert "final: graph-capture" in r.stdout, r.stdout


def test_the_console_without_a_terminal_says_so_at_once_and_starts_nothing(tmp_path: Path) -> None:
    """A script that forgets its subcommand must not hang on a console nobody sees, nor start the demo."""
    for args in ((), ("demo",), ("console", "demo")):
        r = bringup(tmp_path, *args)  # stdin and stderr are pipes here
        assert r.returncode == 2, (args, r.stderr)
        assert "needs a terminal" in one_line(r) and "for scripts" in one_line(r)
    assert "demo --headless" in one_line(bringup(tmp_path, "demo"))
    st = bringup(tmp_path, "status", "demo")
    assert "stopped" in st.stdout.lower(), st.stdout  # no demo server was started behind the refusal


def test_a_demo_already_running_is_left_running_by_a_demo_that_found_it(tmp_path: Path) -> None:
    """`bringup demo` stops on exit only what it started: a demo started by `bringup start demo` (or another
    console) is still running afterwards."""
    try:
        assert bringup(tmp_path, "start", "demo", "--no-wait").returncode == 0
        r = bringup(tmp_path, "demo", "--headless", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["result"] == "ready"
        st = bringup(tmp_path, "status", "demo", "--json")
        assert json.loads(st.stdout)["phase"] == "ready", st.stdout  # not stopped by the headless demo
    finally:
        bringup(tmp_path, "stop", "demo")
    assert "stopped" in bringup(tmp_path, "status", "demo").stdout.lower()
