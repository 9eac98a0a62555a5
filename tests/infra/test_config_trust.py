"""A config file another user can write is used, with one warning line on stderr naming the file and its owner
(issue 29.12): `./config.toml` is picked up from the current directory, and a config names commands bringup runs.
Real files: one chowned to another uid (the suite runs as root here), one chmod 0666, and a clean one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
OTHER_UID = 4242


def status(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / "xdg"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tui", *args, "status", "--json"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=slack(60))


def warnings(r: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in r.stderr.splitlines() if "warning: the config file" in ln]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_a_config_in_the_current_directory_owned_by_another_user(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text("read_only = true\n")
    os.chmod(cfg, 0o644)
    os.chown(cfg, OTHER_UID, OTHER_UID)
    r = status(tmp_path)
    assert r.returncode == 0, r
    (line,) = warnings(r)
    assert line == (f"bringup: warning: the config file {cfg} is owned by uid {OTHER_UID}, not by you or root: it "
                    "can name commands bringup runs (nvidia_smi, an ssh_config's ProxyCommand)"), line


def test_a_config_writable_by_others_and_a_clean_one(tmp_path: Path) -> None:
    cfg = tmp_path / "etc" / "bringup.toml"
    cfg.parent.mkdir()
    cfg.write_text("read_only = true\n")
    os.chmod(cfg, 0o666)
    r = status(tmp_path, "--config", str(cfg))
    (line,) = warnings(r)
    assert str(cfg) in line and "writable by group and others (mode 0666)" in line and "(owner " in line, line
    os.chmod(cfg, 0o600)
    r = status(tmp_path, "--config", str(cfg))
    assert r.returncode == 0 and not warnings(r), r
