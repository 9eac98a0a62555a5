"""The console's cost with 16 deployments on 4 hosts over SSH, next to one deployment, in the same run; and the SSH
connections it opens.

    bash .ci/run   # the test hosts' directories; this boots those not up the same way (as root)
    .venv/bin/python benchmarks/fleet_ssh_cost.py [--hosts 4] [--per-host 4] [--seconds 30]

Four systemd test hosts (.ci/testhost.sh, each in its own TESTHOST_DIR, with its own sshd, journald and simulated
`nvidia-smi`); on each, four units of the simulated SGLang server (TP 2 on GPUs 0-1, 2-3, 4-5, 6-7; --sim-load 0,
--time-scale 0.1), all started and waited for with `bringup wait` over SSH. Then, in a 120x40 pseudo-terminal whose
output is drained (benchmarks/_terminal.py): (a) `bringup console dep-0-0` (one deployment, one host); (b) the fleet
overview of all 16 (`bringup` with no name); (c) the overview of one deployment a host (`bringup console dep-0-0
dep-1-0 ...`): (b) - (c) over the 12 more is what a deployment costs on a host already watched. Each window: CPU %
of one core (utime+stime from /proc), RSS, and the TCP connections the console holds to the hosts' sshd ports (from
/proc/PID/fd and /proc/net/tcp). Every unit is stopped at the end; hosts this script booted are taken down. Writes
benchmarks/results/fleet_ssh_cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pyspy import short, working_samples  # noqa: E402
from _terminal import Pty, cpu_seconds, rss_mib  # noqa: E402
from fleet_cost import start_all  # noqa: E402

from tests.helpers.config_toml import ConfigFile  # noqa: E402
from tests.helpers.ports import free_port  # noqa: E402
from tui.config.deployments import SystemdDeployment  # noqa: E402
from tui.config.parts import HostConfig  # noqa: E402
from tui.config.settings import ProbeConfig, UIConfig  # noqa: E402

SCRIPT = ROOT / ".ci" / "testhost.sh"
OUT = ROOT / "benchmarks" / "results" / "fleet_ssh_cost.json"
UNIT = "sim-fleet-{}.service"


def host_env(i: int) -> dict[str, str]:
    """Host 0.. use .ci/run's directories, names and ports (.testhost, .testhost-b, -c, -d), booted here when not up:
    not to be run beside the suite, whose fault trials reboot the fourth."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESTHOST_")}
    if i:
        letter = "bcdefgh"[i - 1]
        env.update(TESTHOST_DIR=str(ROOT / f".testhost-{letter}"), TESTHOST_NAME=f"bringup-testhost-{letter}",
                   TESTHOST_SSH_PORT=str(2222 + i), TESTHOST_SIM_PORT=str(30001 + i))
    return env


def th(i: int, *args: str, inp: str | None = None, check: bool = True) -> str:
    r = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, env=host_env(i),
                       input=inp, timeout=300)
    if check and r.returncode != 0:
        raise SystemExit(f"testhost {i} {args}: {r.stderr}")
    return r.stdout


def ensure_up(i: int) -> bool:
    """True if this script booted the host (and takes it down at the end)."""
    booted = False
    if subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, cwd=ROOT, env=host_env(i)).returncode:
        for cmd in ("build", "up"):
            th(i, cmd)
        booted = True
    th(i, "install-sim", "tui/sim")  # also on a host booted for other tests (.ci/run's third has none)
    return booted


def unit_text(port: int, gpus: str) -> str:
    return ("[Unit]\nDescription=simulated SGLang (fleet benchmark)\n[Service]\nType=simple\n"
            f"ExecStart=/usr/bin/python3 -u /opt/bringup-sim/server.py --tp-size 2 --host 127.0.0.1 --port {port} "
            f"--enable-metrics --sim-load 0 --sim-gpu-ids {gpus} --sim-state-dir /var/lib/bringup-sim "
            "--time-scale 0.1\nRestart=no\nKillMode=control-group\n")


def ssh_connections(pid: int, ports: set[int]) -> int:
    """TCP connections of `pid` whose remote port is one of the hosts' sshd ports (IPv4 loopback)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    n = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f[9] in inodes and int(f[2].split(":")[1], 16) in ports and f[3] == "01":  # ESTABLISHED
            n += 1
    return n


def spy_summary(raw: Path, top: int = 30) -> dict[str, object]:
    """A py-spy raw profile as the functions of bringup's own code (tui/, widgets/) on the stack of most working
    samples (the innermost of ours in each sample), and the leaf functions: where the overview's CPU goes without
    cProfile's overhead, which triples the cost of every Python call and so distorts what is cheap and frequent."""
    ours: dict[str, int] = {}
    leaves: dict[str, int] = {}
    total = 0
    for frames, n in working_samples(raw):
        total += n
        leaves[short(frames[-1])] = leaves.get(short(frames[-1]), 0) + n
        mine = [f for f in frames if "/tui/" in f or "/widgets/" in f]
        if mine:
            where = mine[-1].split(" (")[0] + " " + "/".join(mine[-1].rstrip(")").rsplit("/", 2)[-2:])
            ours[where] = ours.get(where, 0) + n
    return {"working_samples": total,
            "ours_innermost": sorted(([n, f] for f, n in ours.items()), reverse=True)[:top],
            "leaves": sorted(([n, f] for f, n in leaves.items()), reverse=True)[:top]}


def window(p: Pty, seconds: float, ports: set[int], spy: str | None = None) -> dict[str, object]:
    spying = None
    if spy:  # sampled over the same window, at 100 Hz
        raw = OUT.parent / "fleet_ssh_cost_overview_pyspy.txt"
        spying = (raw, subprocess.Popen([spy, "record", "-p", str(p.pid), "-d", str(int(seconds)), "-r", "100", "-f",
                                         "raw", "-o", str(raw), "--nonblocking", "--full-filenames"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
    c0, b0, t0 = cpu_seconds(p.pid), p.bytes, time.monotonic()
    rss, conns = [], []
    while time.monotonic() - t0 < seconds:
        rss.append(rss_mib(p.pid))
        conns.append(ssh_connections(p.pid, ports))
        time.sleep(1.0)
    wall = time.monotonic() - t0
    out: dict[str, object] = {
        "cpu_percent_of_one_core": round(100 * (cpu_seconds(p.pid) - c0) / wall, 2),
        "rss_mib_max": round(max(rss), 1), "ssh_connections_max": max(conns), "seconds": round(wall, 1),
        "terminal_output_kib": round((p.bytes - b0) / 1024, 1)}
    if spying is not None:
        spying[1].wait(timeout=seconds + 60)
        out["py_spy"] = spy_summary(spying[0])
        spying[0].unlink(missing_ok=True)
    return out


def watch(argv: list[str], env: dict[str, str], cwd: str, needle: bytes, seconds: float, warmup: float,
          ports: set[int], quit_key: bool = False, spy: str | None = None) -> dict[str, object]:
    p = Pty(argv, env, rows=40, cols=120, cwd=cwd)
    try:
        if p.wait_for(needle, 90) is None:
            raise SystemExit(f"{needle!r} never drawn by {' '.join(argv[3:])}")
        time.sleep(warmup)
        return window(p, seconds, ports, spy)
    finally:
        if quit_key:  # a clean exit (a profile is written only then)
            p.keys(b"q")
            for _ in range(150):
                if not p.alive():
                    break
                time.sleep(0.1)
        p.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--per-host", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--profile", metavar="FILE", help="also run the overview under cProfile, stats written to FILE")
    ap.add_argument("--py-spy", metavar="PY_SPY", help="sample the overview with this py-spy over its window: where "
                    "its CPU goes, by function of ours (in the JSON, `overview_all.py_spy`)")
    args = ap.parse_args()
    if args.hosts < 2 or args.per_host < 2:
        ap.error("--hosts and --per-host must be 2 or more: the overview of one deployment a host is compared with all")
    booted = [i for i in range(args.hosts) if ensure_up(i)]
    ports = {2222 + i for i in range(args.hosts)}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        hosts, deps = {}, {}
        for i in range(args.hosts):
            cfg = d / f"ssh-{i}"
            th(i, "ssh-config", str(cfg))
            hosts[f"host-{i}"] = HostConfig(ssh="testhost", ssh_config=str(cfg))
            for j in range(args.per_host):
                port = free_port()
                gpus = f"{2 * j},{2 * j + 1}"
                th(i, "exec", "sh", "-c", f"cat > /etc/systemd/system/{UNIT.format(j)}", inp=unit_text(port, gpus))
                deps[f"dep-{i}-{j}"] = SystemdDeployment(host=f"host-{i}", manager="systemd", unit=UNIT.format(j),
                                                         endpoint=f"http://127.0.0.1:{port}", gpus=[2 * j, 2 * j + 1])
            th(i, "exec", "sh", "-c", "rm -rf /var/lib/bringup-sim/holders; systemctl daemon-reload")
        cfg = ConfigFile(state_dir=d / "state", probe=ProbeConfig.model_validate({}), hosts=hosts,
                         deployments=deps).write(d / "config.toml")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
        env.update(HOME=tmp, XDG_STATE_HOME=f"{tmp}/xdg-state", XDG_CONFIG_HOME=f"{tmp}/cfg", TERM="xterm-256color",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        bringup = [sys.executable, "-m", "tui", "--config", str(cfg)]
        names = list(deps)

        def run(*a: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
            return subprocess.run([*bringup, *a], env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)

        try:
            ready_s = start_all(run, names, 300)
            print(f"{len(names)} deployments on {args.hosts} hosts ready in {ready_s:.1f} s", flush=True)
            one = watch([*bringup, "console", names[0]], env, tmp, b"READY", args.seconds, args.warmup, ports)
            print("one deployment:", json.dumps(one), flush=True)
            fleet = watch(bringup, env, tmp, f"Deployments ({len(names)})".encode(), args.seconds, args.warmup,
                          ports, spy=args.py_spy)
            print(f"overview of {len(names)}:", json.dumps(fleet), flush=True)
            # the overview of one deployment a host: every host's connection, GPU stream and journal already paid,
            # so the 16's cost over this one is what the deployments added to hosts already watched
            firsts = [f"dep-{i}-0" for i in range(args.hosts)]
            per_host = watch([*bringup, "console", *firsts], env, tmp, f"Deployments ({len(firsts)})".encode(),
                             args.seconds, args.warmup, ports)
            print(f"overview of {len(firsts)}, one a host:", json.dumps(per_host), flush=True)
            # the engines alone, nothing drawn: the exporter runs the same fleet headless
            listen = f"127.0.0.1:{free_port()}"
            engines = watch([*bringup, "exporter", "--listen", listen], env, tmp, b"", args.seconds, args.warmup,
                            ports)
            print(f"exporter of {len(names)}:", json.dumps(engines), flush=True)
            if args.profile:
                prof = [sys.executable, "-m", "cProfile", "-o", args.profile, "-m", "tui", "--config", str(cfg)]
                watch(prof, env, tmp, f"Deployments ({len(names)})".encode(), args.seconds, args.warmup, ports,
                      quit_key=True)
        finally:
            for i in range(args.hosts):
                th(i, "exec", "sh", "-c", "systemctl stop 'sim-fleet-*'; rm -f /etc/systemd/system/sim-fleet-*; "
                   "systemctl daemon-reload; rm -rf /var/lib/bringup-sim/holders", check=False)
            for i in booted:
                th(i, "down", check=False)
    extra = len(names) - 1
    added = len(names) - args.hosts
    result = {
        "what": (f"bringup's console in a 120x40 pseudo-terminal: (a) `console dep-0-0`, one deployment; (b) the fleet "
                 f"overview of {len(names)} deployments on {args.hosts} systemd test hosts over SSH (units of the "
                 "simulated SGLang server, TP 2 each, --sim-load 0, --time-scale 0.1, all ready)"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "refresh_hz": UIConfig.model_validate({}).refresh_hz,
        "all_ready_s": round(ready_s, 1), "one_deployment": one, "overview_all": fleet,
        "engines_alone_exporter": engines,
        "overview_one_a_host": per_host,
        # the measure: what one more deployment costs on a host already watched, (16 - one a host) / 12
        "per_extra_deployment_on_a_watched_host": {
            "cpu_percent_of_one_core": round((float(fleet["cpu_percent_of_one_core"])
                                              - float(per_host["cpu_percent_of_one_core"])) / added, 2),
            "rss_mib": round((float(fleet["rss_mib_max"]) - float(per_host["rss_mib_max"])) / added, 1)},
        # the older measure, kept to compare runs: (16 - one deployment's console) / 15, the hosts' connections
        # and the overview's own drawing spread over the deployments
        "per_extra_deployment": {
            "cpu_percent_of_one_core": round((float(fleet["cpu_percent_of_one_core"]) - float(one["cpu_percent_of_one_core"]))
                                             / extra, 2),
            "rss_mib": round((float(fleet["rss_mib_max"]) - float(one["rss_mib_max"])) / extra, 1)},
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
