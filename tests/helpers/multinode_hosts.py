"""Two systemd test hosts as the nodes of one deployment (`.ci/testhost.sh`, the second with TESTHOST_DIR): a
unit per host running the simulated server as SGLang's `--nnodes 2 --node-rank N`, and the config that watches
both. Shared by tests/e2e/test_multinode_testhost.py and benchmarks/multinode_failure.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tests.helpers.wait import slack
from tui.config.deployments import SystemdDeployment
from tui.config.parts import HostConfig, NodeConfig
from tui.config.settings import ProbeConfig

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "testhost.sh"
#: the second host's state directory (.ci/run boots it next to the first)
SECOND = os.environ.get("BRINGUP_TESTHOST_B_DIR", str(ROOT / ".testhost-b"))
UNIT = "sim-node.service"


def _env(second: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}
    if second:
        env["TESTHOST_DIR"] = SECOND
    return env


def th(second: bool, *args: str, check: bool = True, inp: str | None = None) -> str:
    """`.ci/testhost.sh ARGS` on the first host or the second."""
    res = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=slack(60),
                         env=_env(second), input=inp)
    if check and res.returncode != 0:
        raise AssertionError(f"testhost {'B' if second else 'A'} {args}: {res.returncode} {res.stderr}")
    return res.stdout


def _up(second: bool) -> bool:
    res = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, cwd=ROOT, env=_env(second))
    return res.returncode == 0 and res.stdout.startswith("up")


def hosts_up() -> bool:
    return SCRIPT.exists() and _up(False) and _up(True)


def unit_text(rank: int, port: int, rdv: int, *extra: str) -> str:
    args = (f"--model-path moonshotai/Kimi-K2.6 --tp-size 8 --nnodes 2 --node-rank {rank} --dist-init-addr "
            f"127.0.0.1:{rdv} --host 127.0.0.1 --port {port} --enable-metrics --sim-load 2 --sim-gpus 8 "
            f"--sim-gpu-ids 0,1,2,3 --sim-state-dir /var/lib/bringup-sim --time-scale 0.1 {' '.join(extra)}")
    return (f"[Unit]\nDescription=SGLang node {rank} of 2 (simulated)\n[Service]\nType=simple\n"
            f"ExecStart=/usr/bin/python3 -u /opt/bringup-sim/server.py {args.strip()}\nRestart=no\n"
            "KillMode=control-group\nTimeoutStopSec=30\n")


def reset(second: bool) -> None:
    th(second, "exec", "sh", "-c", f"systemctl stop {UNIT}; rm -rf /etc/systemd/system/{UNIT}*; "
       f"systemctl daemon-reload; systemctl reset-failed {UNIT} 2>/dev/null; rm -rf /var/lib/bringup-sim/holders; "
       "rm -f /run/lock/bringup-*", check=False)


def node_config(tmp: Path, *, worker: tuple[str, ...] = (), head: tuple[str, ...] = ()) -> Path:
    """Both hosts' units installed afresh (head on the first, worker on the second), and bringup's config of the
    deployment `mn` over them."""
    port, rdv = free_port(), free_port()
    hosts = {}
    for second, name, rank, extra in ((False, "node-a", 0, head), (True, "node-b", 1, worker)):
        reset(second)
        th(second, "exec", "sh", "-c", f"cat > /etc/systemd/system/{UNIT} && systemctl daemon-reload",
           inp=unit_text(rank, port, rdv, *extra))
        cfg = tmp / f"ssh-{name}"
        th(second, "ssh-config", str(cfg))
        hosts[name] = HostConfig(ssh="testhost", ssh_config=str(cfg))
    dep = SystemdDeployment(manager="systemd", unit=UNIT, endpoint=f"http://127.0.0.1:{port}",
                            release_tolerance_mib=512, release_timeout_s=120,
                            nodes=[NodeConfig(host="node-a", gpus=[0, 1, 2, 3]),
                                   NodeConfig(host="node-b", gpus=[0, 1, 2, 3])])
    return ConfigFile(state_dir=tmp / "state", probe=ProbeConfig(interval_s=0.3), hosts=hosts,
                      deployments={"mn": dep}).write(tmp / "bringup.toml")
