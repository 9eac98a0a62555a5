"""Integration over real SSH against a real systemd + journald host (a Debian container booted with
systemd-nspawn by .ci/testhost.sh), with the simulated SGLang server installed as the unit `sglang-sim.service`
and an `nvidia-smi` stand-in that prints its simulated GPUs.

Without the test host these tests are skipped, unless BRINGUP_TESTHOST=required (CI), where its absence fails.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.simdeploy import UNIT
from tests.helpers.testhost import bringup, invocation, require_up, texec
from tests.helpers.wait import slack, until_async, until_awaited
from tui.config.settings import load
from tui.engine import Engine, LogsRead
from tui.model import LogLine, Snapshot
from tui.transport import TransportError
from tui.transport.ssh import SshTransport

pytestmark = pytest.mark.slow
require_up()


def status(cfg: Path) -> dict[str, object]:
    res = bringup(cfg, "status", "remote", "--json")
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def phases(st: dict[str, object]) -> list[str]:
    return [t["phase"] for t in st["timeline"]]  # type: ignore[index, union-attr]


def test_restart_then_wait_reaches_ready(conf: Path) -> None:
    r = bringup(conf, "restart", "remote", "--yes")
    assert r.returncode == 0, r.stderr + r.stdout
    w = bringup(conf, "wait", "remote", "--timeout", "60")
    assert w.returncode == 0, w.stderr
    st = status(conf)
    assert st["phase"] == "ready"
    assert phases(st) == ["starting", "loading", "graph-capture", "warmup", "ready"]
    assert st["invocation"] == invocation()
    gpus = st["gpus"]["gpus"]  # type: ignore[index]
    assert len(gpus) == 8 and all(g["mem_used_mib"] > 100_000 for g in gpus)  # read over SSH by nvidia-smi
    attribution = st["attribution"]  # the unit's cgroup holds the processes on the GPUs
    assert attribution["current_mib"] > 8 * 100_000 and attribution["other_mib"] == 0  # type: ignore[index]


def test_set_flag_writes_dropin_changes_invocation_and_skips_capture(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--yes").returncode == 0
    before = invocation()
    r = bringup(conf, "restart", "remote", "--set", "disable-cuda-graph", "--yes")
    assert r.returncode == 0, r.stderr + r.stdout
    dropin = texec("cat", f"/etc/systemd/system/{UNIT}.d/50-bringup.conf")
    assert "ExecStart=\n" in dropin and "--disable-cuda-graph" in dropin
    previous = json.loads(texec("cat", f"/etc/systemd/system/{UNIT}.d/bringup-previous.json"))
    assert "--disable-cuda-graph" not in previous and "--enable-metrics" in previous  # kept for rollback
    assert invocation() != before
    st = status(conf)
    assert st["phase"] == "ready" and "graph-capture" not in phases(st)
    assert "--disable-cuda-graph" in texec("systemctl", "show", "-p", "ExecStart", UNIT)


def test_dflash_fails_with_cuda_graph_hint_then_toggle_reaches_ready(conf: Path) -> None:
    r = bringup(conf, "restart", "remote", "--set", "speculative-algorithm=DFLASH", "--set",
                "speculative-dflash-block-size=8", "--yes", "--json")
    assert r.returncode == 1
    out = json.loads(r.stdout.strip().splitlines()[-1])  # JSON Lines: the final record is the last line
    f = out["failure"]
    assert f["kind"] == "cuda-graph" and "disable-cuda-graph" in f["hint"]
    assert "cuda_graph_runner" in f["excerpt"] and "torch.AcceleratorError" in f["excerpt"]
    st = status(conf)  # a later look at the failed unit tells the same story, from the journal
    assert st["phase"] == "failed" and st["failure"]["kind"] == "cuda-graph"  # type: ignore[index]
    r = bringup(conf, "restart", "remote", "--set", "disable-cuda-graph", "--yes")
    assert r.returncode == 0, r.stderr
    assert status(conf)["phase"] == "ready"


def test_stale_health_never_gives_a_false_ready(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--set", "scenario=stale-health", "--yes").returncode == 0
    old = invocation()
    proc = subprocess.Popen([sys.executable, "-m", "tui", "--config", str(conf), "restart", "remote", "--yes",
                             "--json"], stdout=subprocess.PIPE, text=True, cwd=conf.parent)
    assert proc.stdout is not None
    ready_at = None
    for line in proc.stdout:
        if '"ready: a generation' in line:
            ready_at = time.time()
    assert proc.wait(timeout=slack(120)) == 0
    new = invocation()
    assert new != old and ready_at is not None
    fired = texec("journalctl", f"_SYSTEMD_INVOCATION_ID={new}", "-o", "json", "--no-pager")
    stamps = [int(json.loads(x)["__REALTIME_TIMESTAMP"]) / 1e6 for x in fired.splitlines()
              if "fired up and ready" in x]
    assert stamps and ready_at >= stamps[0], "ready reported before the new process said it was ready"


def test_fast_restart_waits_for_release_and_never_ooms(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--set", "scenario=oom-on-fast-restart", "--yes").returncode == 0
    r = bringup(conf, "restart", "remote", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "waiting for GPU memory" in r.stdout
    log = texec("journalctl", "-u", UNIT, "--no-pager", f"_SYSTEMD_INVOCATION_ID={invocation()}")
    assert "CUDA out of memory" not in log


def test_two_restarts_at_once_one_is_refused(conf: Path) -> None:
    assert bringup(conf, "restart", "remote", "--yes").returncode == 0
    procs = [subprocess.Popen([sys.executable, "-m", "tui", "--config", str(conf), "restart", "remote", "--yes"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=conf.parent)
             for _ in range(2)]
    outs = [(p.wait(timeout=slack(120)), p.stdout.read() if p.stdout else "") for p in procs]
    codes = sorted(c for c, _ in outs)
    assert codes[0] == 0 and codes[1] != 0, outs
    refused = next(o for c, o in outs if c != 0)
    assert "another bringup is already restarting" in refused and "pid" in refused


def test_shell_metacharacters_never_run_on_the_host(conf: Path, ssh_config: Path) -> None:
    for value in ("$(touch /tmp/pwned)", "x; touch /tmp/pwned", "`touch /tmp/pwned`", "a\ntouch /tmp/pwned"):
        r = bringup(conf, "restart", "remote", "--set", f"speculative-draft-model-path={value}", "--yes")
        assert r.returncode == 2 and "Traceback" not in r.stderr
    assert texec("sh", "-c", "test -e /tmp/pwned && echo yes || echo no").strip() == "no"

    async def direct() -> str:
        t = SshTransport("testhost", config=[str(ssh_config)])
        try:
            res = await t.run(["echo", "$(touch /tmp/pwned); `touch /tmp/pwned` && touch /tmp/pwned"])
            return res.text
        finally:
            await t.close()

    assert asyncio.run(direct()).strip() == "$(touch /tmp/pwned); `touch /tmp/pwned` && touch /tmp/pwned"
    assert texec("sh", "-c", "test -e /tmp/pwned && echo yes || echo no").strip() == "no"


def test_unknown_host_key_is_refused(tmp_path: Path, ssh_config: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    key = next(ln.split()[1] for ln in ssh_config.read_text().splitlines() if "IdentityFile" in ln)
    port = next(ln.split()[1] for ln in ssh_config.read_text().splitlines() if ln.strip().startswith("Port"))
    cfg = tmp_path / "config"
    cfg.write_text(f"Host testhost\n    HostName 127.0.0.1\n    Port {port}\n    User root\n    IdentityFile {key}\n"
                   f"    UserKnownHostsFile {empty}\n    GlobalKnownHostsFile /dev/null\n")

    async def attempt() -> str:
        t = SshTransport("testhost", config=[str(cfg)])
        try:
            await t.run(["true"])
        except TransportError as e:
            return str(e)
        finally:
            await t.close()
        return "connected"

    msg = asyncio.run(attempt())
    assert "unknown SSH host key" in msg and "ssh testhost" in msg


async def test_journal_survives_dropped_connections_without_loss_or_duplicates(conf: Path) -> None:
    settings = load(str(conf))
    r = await asyncio.to_thread(bringup, conf, "restart", "remote", "--yes")
    assert r.returncode == 0
    w = Engine(settings, "remote", settings.deployments["remote"])
    lines: list[LogLine] = []  # every line the engine sends its listeners, as the console gets them
    w.subscribe(lambda u: lines.extend(u.lines) if isinstance(u, LogsRead) else None)
    await w.start()

    def journal() -> list[str]:
        return [json.loads(x)["__CURSOR"] for x in texec(
            "journalctl", f"_SYSTEMD_INVOCATION_ID={w.state.invocation}", "-o", "json", "--no-pager").splitlines()]

    async def caught_up() -> bool:  # give or take the last second of lines
        return len([ln for ln in lines if ln.invocation == w.state.invocation]) >= len(
            await asyncio.to_thread(journal)) - 20

    try:
        await until_async("a first journal line", lambda: lines, 20, every=0.2)
        for _ in range(3):  # cut our SSH connection on the host side while lines stream: the fault's own pace
            await asyncio.sleep(2.5)
            await asyncio.to_thread(texec, "sh", "-c", "pkill -KILL -f 'sshd: root@' || true", check=False)
        await until_awaited("the engine to catch up with the journal", caught_up, 30, every=0.5)
        inv = w.state.invocation
        got = [ln.cursor for ln in lines if ln.invocation == inv]
        reconnects = w.transport.connections - 1  # type: ignore[attr-defined]
    finally:
        await w.close()
    truth = journal()
    assert reconnects >= 2, "the connection was not actually cut and re-opened"
    assert len(got) == len(set(got)), "a journal line was delivered twice"
    assert got == truth[: len(got)], "a journal line was lost or reordered"
    assert len(got) >= len(truth) - 20  # caught up, give or take the last second of lines


def test_non_root_user_restarts_through_sudo(conf: Path) -> None:
    r = bringup(conf, "restart", "as-tester", "--set", "disable-cuda-graph", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    owner = texec("stat", "-c", "%U", f"/etc/systemd/system/{UNIT}.d/50-bringup.conf").strip()
    assert owner == "root"
    assert "--disable-cuda-graph" in texec("systemctl", "show", "-p", "ExecStart", UNIT)


def test_non_root_user_without_sudo_gets_told_what_to_do(conf: Path) -> None:
    r = bringup(conf, "restart", "no-sudo", "--yes")
    assert r.returncode != 0
    assert "sudo = true" in r.stdout + r.stderr and "Traceback" not in r.stderr


def test_unit_not_found_is_named(conf: Path) -> None:
    bad = conf.parent / "bad.toml"
    text = conf.read_text()
    head, sep, rest = text.partition("[deployments.remote]")
    bad.write_text(head + sep + rest.replace(f'unit = "{UNIT}"', 'unit = "sglang-typo.service"', 1))
    r = bringup(bad, "status", "remote")
    assert r.returncode == 2 and "unit sglang-typo.service not found on testhost" in r.stderr
    assert "Traceback" not in r.stderr


async def test_a_released_lock_leaves_no_holder_record_for_wait_to_trust(conf: Path) -> None:
    """A console that restarted the server and stays open must not read, to a later `bringup wait` on the stopped
    unit, as a restart still in progress: the lock's record is cleared when the lock is released."""
    settings = load(str(conf))
    w = Engine(settings, "remote", settings.deployments["remote"])
    record = f"/run/bringup/{UNIT}.lock.owner"
    try:
        async with w.manager.lock("restart"):
            held = json.loads(await asyncio.to_thread(texec, "cat", record))
            assert held["pid"] == os.getpid() and held["purpose"] == "restart"
        assert (await asyncio.to_thread(texec, "cat", record)) == ""
        t0 = time.monotonic()
        r = await asyncio.to_thread(bringup, conf, "wait", "remote", "--timeout", "40")
        assert r.returncode == 4, r.stdout + r.stderr  # stopped, said at once, while this process lives on
        assert time.monotonic() - t0 < 20 and "stopped" in (r.stdout + r.stderr).lower()
    finally:
        await w.close()


def test_wait_on_a_permanent_error_exits_2_at_once(conf: Path, tmp_path: Path) -> None:
    """A unit that is not there, or a host key that is not known, will not fix itself: `wait` says so and exits 2
    at once instead of retrying until its timeout."""
    text = conf.read_text()
    head, sep, rest = text.partition("[deployments.remote]")
    typo = conf.parent / "typo.toml"
    typo.write_text(head + sep + rest.replace(f'unit = "{UNIT}"', 'unit = "sglang-typo.service"', 1))
    ssh = Path(text.split('ssh_config = "', 1)[1].split('"', 1)[0])
    strange = tmp_path / "strange_ssh_config"
    strange.write_text(ssh.read_text().replace("UserKnownHostsFile", "UserKnownHostsFile /dev/null\n#"))
    unknown = conf.parent / "unknown.toml"
    unknown.write_text(text.replace(str(ssh), str(strange)))
    for cfg, words in ((typo, "not found"), (unknown, "host key")):
        t0 = time.monotonic()
        r = bringup(cfg, "wait", "remote", "--timeout", "120")
        assert r.returncode == 2, r.stdout + r.stderr
        assert time.monotonic() - t0 < 30 and words in r.stderr and "Traceback" not in r.stderr, r.stderr


SWEEP_PLAN = """
[[configs]]
name = "graphs"
[[configs]]
name = "nographs"
set = { disable-cuda-graph = true }
[[configs]]
name = "dflash-graphs"
set = { speculative-algorithm = "DFLASH", speculative-dflash-block-size = 8 }

[matrix]
prompt_tokens = [16]
output_tokens = [8]
concurrency = [1, 2]
requests = 2
warmup_requests = 1
"""


def test_sweep_over_ssh_writes_each_configuration_as_a_dropin_and_puts_the_original_back(conf: Path) -> None:
    """The sweep on a systemd unit over SSH: each configuration's flags are in the unit's drop-in and its running
    command line (checked by the sweep, recorded per configuration), the failing one is recorded with its kind,
    and at the end the unit runs its original command line again."""
    assert bringup(conf, "restart", "remote", "--yes").returncode == 0

    def exec_argv() -> str:  # the command line systemd runs, without the pid and times of the last run
        shown = texec("systemctl", "show", "-p", "ExecStart", UNIT)
        return shown.split("argv[]=", 1)[1].split(" ;", 1)[0]
    original = exec_argv()
    plan = conf.parent / "plan.toml"
    plan.write_text(SWEEP_PLAN)
    out = conf.parent / "results"
    r = bringup(conf, "sweep", "remote", str(plan), "--out", str(out), "--yes", "--json", timeout=600)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr  # one configuration fails, the sweep goes on
    recs = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]
    configs = {c["config"]: c for c in recs if c["type"] == "config"}
    assert configs["graphs"]["status"] == "ready" and configs["nographs"]["status"] == "ready"
    assert "--disable-cuda-graph" in configs["nographs"]["argv"]
    assert "--disable-cuda-graph" not in configs["graphs"]["argv"]
    assert configs["dflash-graphs"]["status"] == "failed"
    assert configs["dflash-graphs"]["failure"]["kind"] == "cuda-graph"
    cells = [c for c in recs if c["type"] == "cell"]
    assert {(c["config"], c["cell"]) for c in cells if c["valid"]} == {
        (cfg, cell) for cfg in ("graphs", "nographs") for cell in ("p16-o8-c1-r1", "p16-o8-c2-r1")}
    invocations = {c["config"]: c["invocation"] for c in cells}
    assert invocations["graphs"] != invocations["nographs"]  # each configuration its own run of the unit
    assert exec_argv() == original and "--disable-cuda-graph" not in original
    assert status(conf)["phase"] == "ready"


async def test_a_crash_loop_under_restart_always_keeps_the_last_failure(conf: Path) -> None:
    """A unit that fails and is restarted by systemd's `Restart=always`: each restart's `Starting` made the next run
    the answer, and the failure just before it (its cause) was gone. The console's engine counts the runs failed one
    after another and keeps the last one's cause while the next run starts."""
    r = await asyncio.to_thread(bringup, conf, "restart", "remote", "--set", "scenario=dflash-graph-crash", "--yes")
    assert r.returncode == 1, r.stdout + r.stderr  # the run fails in graph capture; now let systemd restart it
    await asyncio.to_thread(texec, "sh", "-c", f"mkdir -p /etc/systemd/system/{UNIT}.d && printf "
                            "'[Unit]\\nStartLimitIntervalSec=0\\n[Service]\\nRestart=always\\nRestartSec=1\\n' "
                            f"> /etc/systemd/system/{UNIT}.d/zz-restart-always.conf && systemctl daemon-reload && "
                            f"systemctl restart {UNIT}")
    settings = load(str(conf))
    w = Engine(settings, "remote", settings.deployments["remote"])
    await w.start()
    try:
        def looping() -> Snapshot | None:  # two runs failed, and the third is starting: where the failure was lost
            s = w.snapshot()
            return s if s.crash_loop is not None and s.crash_loop.failed >= 2 and s.failure is None else None

        snap = await until_async(lambda: f"a crash loop seen (phase {w.snapshot().phase}, restarts by systemd: "
                                 f"{texec('systemctl', 'show', '-p', 'NRestarts', '--value', UNIT).strip()})",
                                 looping, 90, every=0.2)
        # a later look of its own (`status`), while the loop goes on: the runs before the one it sees are the
        # run history's, which the watching engine wrote as each run failed
        st: dict[str, object] = {}
        text = ""

        async def json_says_it() -> bool:
            nonlocal st
            st = await asyncio.to_thread(status, conf)
            # the runs before, as the watching engine wrote them as each failed: on a loaded runner its write of the
            # last one can come after a look has started, so a later look is waited for, never a moment
            loop = st.get("crash_loop")
            return isinstance(loop, dict) and int(loop.get("failed") or 0) >= 2

        async def words_say_it() -> bool:
            nonlocal text
            text = (await asyncio.to_thread(bringup, conf, "status", "remote")).stdout
            return "CRASH LOOP" in text and "runs failed" in text  # its own look sees the runs before, as the JSON did

        await until_awaited(lambda: f"status --json to show the crash loop: {st.get('phase')} {st.get('failure')}",
                            json_says_it, 30, every=0)
        await until_awaited(lambda: f"status to say CRASH LOOP: {text}", words_say_it, 30, every=0)
    finally:
        await w.close()
    got = st.get("crash_loop")
    assert isinstance(got, dict), f"status --json shows no crash loop: {st.get('phase')} {st.get('failure')}"
    assert got["failed"] >= 2 and got["last"]["kind"] == "cuda-graph"
    assert "torch.AcceleratorError" in got["cause"]
    assert "CRASH LOOP: " in text, text
    assert "; the last: cuda-graph in " in text and ": torch.AcceleratorError: " in text, text
    assert "the last run failed in " in text or "\nfailed in " in text, "the last failure's excerpt and hint"
    loop = snap.crash_loop
    assert loop is not None
    assert loop.failed >= 2 and snap.failure is None
    assert loop.last.kind == "cuda-graph" and "disable-cuda-graph" in loop.last.hint
    assert "torch.AcceleratorError" in loop.cause
    assert loop.restarts >= 1
