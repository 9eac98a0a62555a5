"""The systemd test host (.ci/testhost.sh; tests/testhost/README.md) as the e2e tests reach it: whether it is up,
a command run on it, its simulated server's unit reset, `bringup` run against it, and the modules' own units
(`bx-*.service`). Its fixtures (`ssh_config`, `conf`, `testhost`, `units`) are tests/e2e/conftest.py's: a test that
asks for one joins the test host's xdist group (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.simdeploy import UNIT
from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "testhost.sh"
#: how long one command on the host may take on an idle machine (`.ci/testhost.sh exec`: a `machinectl shell`)
EXEC_S = 60.0


def host_status() -> dict[str, str]:
    """`.ci/testhost.sh status` as a dict ({} when the test host is not up)."""
    if not SCRIPT.exists():
        return {}
    res = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True, cwd=ROOT,
                         timeout=slack(EXEC_S))
    if res.returncode != 0 or res.stdout.split()[:1] != ["up"]:
        return {}
    return dict(ln.split("=", 1) for ln in res.stdout.splitlines() if "=" in ln)


def host_up() -> bool:
    return bool(host_status())


def not_up(module_level: bool = False) -> None:
    """The test host is not up: a failure where BRINGUP_TESTHOST=required (CI), else a skip (of the module, at
    import)."""
    if os.environ.get("BRINGUP_TESTHOST") == "required":
        pytest.fail("BRINGUP_TESTHOST=required but the test host is not up (.ci/testhost.sh up)")
    pytest.skip("the systemd test host is not up (bash .ci/testhost.sh build && bash .ci/testhost.sh up)",
                allow_module_level=module_level)


def require_up() -> None:
    """At a module's import: the module is skipped (or failed, with BRINGUP_TESTHOST=required) without the host."""
    if not host_up():
        not_up(module_level=True)


@dataclass(frozen=True)
class HostInfo:
    port: int
    key: str
    known_hosts: list[str]  # the host's key lines, "[127.0.0.1]:PORT TYPE BASE64"


def host_info() -> HostInfo:
    """What `.ci/testhost.sh ssh-config` would write, read without writing anything: that command rewrites the
    shared .testhost/keys/known_hosts, which a test running in parallel may be reading."""
    st = host_status()
    if not st:
        not_up()
    port = int(st["ssh"].rsplit(":", 1)[1])
    pubs = sorted(Path(st["rootfs"], "etc", "ssh").glob("ssh_host_*_key.pub"))
    lines = [f"[127.0.0.1]:{port} {' '.join(p.read_text().split()[:2])}" for p in pubs]
    assert lines, f"no host keys in {st['rootfs']}/etc/ssh"
    return HostInfo(port, str(ROOT / ".testhost" / "keys" / "id_ed25519"), lines)


def write_ssh_config(tmp: Path, port: int, key: str, known_hosts: str, *, name: str = "th") -> Path:
    """An ssh_config of the test's own that reaches the host's sshd at `port` (the host's own, or a proxy's) as
    root, with `known_hosts` the only keys trusted."""
    kh = tmp / "known_hosts"
    kh.write_text(known_hosts)
    cfg = tmp / "ssh_config"
    cfg.write_text(f"Host {name}\n    HostName 127.0.0.1\n    Port {port}\n    User root\n    IdentityFile {key}\n"
                   f"    IdentitiesOnly yes\n    UserKnownHostsFile {kh}\n    GlobalKnownHostsFile /dev/null\n")
    return cfg


def ssh_config_at(path: Path) -> Path:
    """`.ci/testhost.sh ssh-config PATH`: the hosts `testhost` (root) and `testhost-tester` (sudo) at PATH."""
    subprocess.run(["bash", str(SCRIPT), "ssh-config", str(path)], check=True, cwd=ROOT, timeout=slack(EXEC_S))
    return path


def texec(*argv: str, check: bool = True, input: str | None = None) -> str:
    """`argv` run on the host as root (`.ci/testhost.sh exec`), its stdout; with `check`, a failure raises."""
    res = subprocess.run(["bash", str(SCRIPT), "exec", *argv], capture_output=True, text=True, cwd=ROOT,
                         timeout=slack(EXEC_S), input=input)
    if check and res.returncode != 0:
        raise AssertionError(f"{argv}: {res.returncode} {res.stderr}")
    return res.stdout


def reset_unit() -> None:
    """The simulated server's unit stopped, its drop-ins, holders and locks gone: as installed."""
    texec("sh", "-c", f"systemctl stop {UNIT}; rm -rf /etc/systemd/system/{UNIT}.d; systemctl daemon-reload; "
          f"systemctl reset-failed {UNIT} 2>/dev/null; rm -rf /var/lib/bringup-sim/holders; "
          f"rm -f /tmp/pwned /run/lock/bringup-* /run/bringup/{UNIT}.lock*", check=False)


def invocation(unit: str = UNIT) -> str:
    return texec("systemctl", "show", "-p", "InvocationID", "--value", unit).strip()


def bringup(cfg: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`bringup --config CFG ARGS` in CFG's directory, without the tester's BRINGUP_* settings; `timeout` bounds
    the command on an idle machine (stretched by `slack`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    return subprocess.run([sys.executable, "-m", "tui", "--config", str(cfg), *args], capture_output=True,
                          text=True, timeout=slack(timeout), env=env, cwd=cfg.parent)


def as_mallory(*argv: str) -> tuple[int, str]:
    """`argv` run on the host as `mallory` (no sudo, no key): its exit status and its output."""
    out = texec("sh", "-c", " ".join(["runuser", "-u", "mallory", "--", *(f"'{a}'" for a in argv)])
                + " 2>&1; echo rc=$?", check=False)
    body, _, rc = out.rpartition("rc=")
    return int(rc.strip() or 1), body


# ------------------------------------------------------------------------------ the modules' own units

SLEEP = '-c "import time; time.sleep(3600)"'
#: units of the tests' own (a python3 that sleeps), whose ExecStart= has every kind of word systemd parses
BX_UNITS = {
    # Environment= variables, a specifier, the `-` and `@` prefixes, quoting, escapes, %% and $$, a continuation
    "bx-env.service": (
        "[Unit]\nDescription=bringup test: a unit with variables\n[Service]\n"
        'Environment=MODEL=/models/kimi "GREETING=hello  world"\n'
        f"ExecStart=-@/usr/bin/python3 bx-server {SLEEP} \\\n"
        "    --model-path ${MODEL} --served-model-name %N --greeting \"${GREETING}\" $$HOME \\\n"
        "# a comment inside the continued line\n"
        '    --chat-template "/etc/tmpl with space.jinja" --tag a\\x20b --pct 50%% \'single quoted\'\n'),
    # a template: the instance's specifiers, the `+` prefix
    "bx@.service": f"[Service]\nExecStart=+/usr/bin/python3 {SLEEP} --instance %i --name %N --unit %n\n",
    # the `:` prefix: no variable expansion at all
    "bx-colon.service": ("[Service]\nEnvironment=MODEL=/m\n"
                         f"ExecStart=:/usr/bin/python3 {SLEEP} --literal ${{MODEL}} --dollars $$\n"),
}
BX_UNIT_NAMES = ("bx-env.service", "bx@a.service", "bx-colon.service")


def remove_bx_units() -> None:
    for name in (*BX_UNIT_NAMES, "bx@.service"):
        texec("sh", "-c", f"systemctl stop {name} 2>/dev/null; rm -rf /etc/systemd/system/{name} "
                          f"/etc/systemd/system/{name}.d; true")
    texec("systemctl", "daemon-reload")


def install_bx_units() -> None:
    remove_bx_units()
    for name, text in BX_UNITS.items():
        texec("sh", "-c", f"cat > /etc/systemd/system/{name}", input=text)
    texec("systemctl", "daemon-reload")
