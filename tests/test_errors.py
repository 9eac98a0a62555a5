"""The likely first mistakes give one line that says what is wrong and what to do (no traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.simdeploy import free_port


def bringup(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(cwd), "XDG_STATE_HOME": str(cwd / "state"), "XDG_CONFIG_HOME": str(cwd / "cfg"),
           "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=60)


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
