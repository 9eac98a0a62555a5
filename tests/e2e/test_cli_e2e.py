"""End-to-end tests of the `bringup` command line against the simulated SGLang server (`tui.sim`).

Every test writes its own config (a `process` deployment of the sim on a free port, state under tmp_path), runs
`python -m tui ...` as a subprocess with HOME/XDG inside tmp_path, and looks only at what a user can see: exit
codes, stdout/stderr, the state directory, the HTTP endpoint and the process table. After each test the
deployment is stopped with `bringup stop`, and any `tui.sim` process still mentioning the test's tmp path is
killed and fails the test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.e2e import (
    READY_LINE,
    Bringup,
    Poller,
    Proc,
    Result,
    free_port,
    kill_processes,
    process_alive,
    wait_no_sim_processes,
)
from tests.helpers.wait import slack

pytestmark = pytest.mark.slow

PHASES_WITH_GRAPHS = ["starting", "loading", "graph-capture", "warmup", "ready"]
PHASES_WITHOUT_GRAPHS = ["starting", "loading", "warmup", "ready"]
DFLASH = ("--set", "speculative-algorithm=DFLASH", "--set", "speculative-dflash-block-size=8")


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture
def bu(make_bringup: Callable[..., Bringup]) -> Bringup:
    return make_bringup()


def phases(status: dict[str, Any]) -> list[str]:
    return [t["phase"] for t in status["timeline"]]


def steps(r: Result) -> list[dict[str, Any]]:
    return [v for v in r.json_values() if isinstance(v, dict) and "step" in v]


def assert_no_crash(r: Result) -> None:
    """bringup itself did not crash (the server's tracebacks in an excerpt are fine)."""
    assert "internal error" not in r.text, r.describe()
    assert not re.search(r'File "[^"]*/tui/', r.text), r.describe()


def assert_timeline(d: dict[str, Any], expected: list[str]) -> None:
    assert phases(d) == expected, json.dumps(d["timeline"], indent=1)
    ats = [t["at"] for t in d["timeline"]]
    assert ats == sorted(ats), d["timeline"]
    for t in d["timeline"]:
        assert isinstance(t["seconds"], int | float) and t["seconds"] >= 0, t
    # every phase before ready took time (the sim's bring-up has real, scaled durations)
    assert all(t["seconds"] > 0 for t in d["timeline"][1:-1]), d["timeline"]


# ---------------------------------------------------------------------------- restart to ready


def test_restart_reaches_ready_through_every_phase_then_disable_cuda_graph(bu: Bringup) -> None:
    r = bu.bring_up()
    assert "ready" in r.out, r.describe()
    w = bu.run("wait", bu.name, "--timeout", "20")
    assert w.rc == 0, w.describe()
    assert "ready" in w.out
    d = bu.status()
    assert d["phase"] == "ready"
    inv1 = bu.invocation()
    assert d["invocation"] == inv1
    assert_timeline(d, PHASES_WITH_GRAPHS)
    pid1 = bu.current()["pid"]  # type: ignore[index]

    r2 = bu.bring_up("--set", "disable-cuda-graph")
    assert "+ --disable-cuda-graph" in r2.out, r2.describe()
    assert "--disable-cuda-graph" in bu.argv_json()
    assert "--disable-cuda-graph" not in (bu.read_json("argv.previous.json") or [])
    assert "--disable-cuda-graph" in bu.read_json("argv.ready.json")
    inv2 = bu.invocation()
    assert inv2 and inv2 != inv1
    assert "--disable-cuda-graph" in bu.current()["argv"]  # type: ignore[index]
    assert not process_alive(pid1), "the old server process is still alive after the restart"

    d2 = bu.status()
    assert d2["phase"] == "ready" and d2["invocation"] == inv2
    assert_timeline(d2, PHASES_WITHOUT_GRAPHS)
    assert "disable-cuda-graph" in d2["flags"]
    assert not any("CUDA graph begin" in text for _, text in bu.log_lines(inv2))


# ---------------------------------------------------------------------------- DFLASH + CUDA graphs


def assert_dflash_failure(f: dict[str, Any]) -> None:
    assert f["phase"] in ("warmup", "graph-capture"), f
    assert f["kind"] == "cuda-graph", f
    assert "disable-cuda-graph" in f["hint"], f
    ex = f["excerpt"]
    # the whole traceback, in order: first frame, the graph replay frame, the exception and its advice lines
    marks = ["Traceback (most recent call last):", "run_scheduler_process", "cuda_graph_runner.py",
             "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
             "CUDA_LAUNCH_BLOCKING=1"]
    at = [ex.find(m) for m in marks]
    assert all(i >= 0 for i in at), f"excerpt lacks part of the traceback:\n{ex}"
    assert at == sorted(at), f"traceback out of order:\n{ex}"
    assert len(ex.splitlines()) >= 25, ex


def test_dflash_with_cuda_graphs_fails_with_hint_then_disable_cuda_graph_recovers(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, *DFLASH, "--yes", "--json", timeout=40)
    assert r.rc == 1, r.describe()
    final = r.json()
    assert final["ok"] is False and final["phase"] == "failed", final
    assert [json.loads(ln) for ln in r.out.splitlines() if ln.strip()][-1] == final  # JSON Lines, one per line
    assert_dflash_failure(final["failure"])
    assert f"bringup restart {bu.name} --set disable-cuda-graph" in final["failure"]["hint"], final  # to copy
    assert final["invocation"] == bu.invocation()
    assert any(s["step"] == "follow" and s["status"] == "failed" for s in steps(r)), r.describe()
    assert "Traceback" not in r.err, r.describe()
    argv = bu.argv_json()
    assert argv[-4:] == ["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "8"], argv

    failed_inv = bu.invocation()
    r2 = bu.bring_up("--set", "disable-cuda-graph")
    assert "sim: ready" in r2.out, r2.describe()
    argv2 = bu.argv_json()
    assert {"--disable-cuda-graph", "DFLASH", "--speculative-dflash-block-size"} <= set(argv2), argv2
    d = bu.status()
    assert d["phase"] == "ready" and d["invocation"] not in (None, failed_inv)
    assert_timeline(d, PHASES_WITHOUT_GRAPHS)


def test_a_flag_the_server_refuses_is_named_bad_args_and_unsetting_it_recovers(bu: Bringup) -> None:
    """A flag this server version does not know (declared in extra_flags): argparse refuses the command line, and
    that is said as such, not "exited without a recognised error"."""
    with bu.config.open("a", encoding="utf-8") as f:
        f.write('extra_flags = [{ name = "not-a-sim-flag", kind = "bool" }]\n')  # still [deployments.sim]
    r = bu.run("restart", bu.name, "--set", "not-a-sim-flag", "--yes", timeout=40)
    assert r.rc == 1, r.describe()
    assert "FAILED in starting: bad-args" in r.err, r.describe()
    assert "unrecognized arguments: --not-a-sim-flag" in r.err, r.describe()
    assert f"bringup restart {bu.name} --unset not-a-sim-flag" in r.err, r.describe()  # the refused flag named
    ok = bu.bring_up("--unset", "not-a-sim-flag")
    assert "sim: ready" in ok.out, ok.describe()


def test_wait_on_a_failing_deployment_exits_1_with_excerpt_and_hint(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, *DFLASH, "--yes", "--no-wait")
    assert r.rc == 0, r.describe()
    w = bu.run("wait", bu.name, "--timeout", "30", timeout=40)
    assert w.rc == 1, w.describe()
    assert re.search(r"FAILED in (warmup|graph-capture): cuda-graph", w.err), w.describe()
    assert "Traceback (most recent call last):" in w.err
    assert "cuda_graph_runner.py" in w.err
    assert "  | torch.AcceleratorError: CUDA error: an illegal memory access was encountered" in w.err
    hint = [x for x in w.err.splitlines() if x.startswith("hint:")]
    assert len(hint) == 1 and "disable-cuda-graph" in hint[0], w.describe()
    assert_no_crash(w)


def test_status_and_wait_after_the_failure_still_show_the_real_failure(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, *DFLASH, "--yes", timeout=40)
    assert r.rc == 1, r.describe()
    s = bu.run("status", bu.name, "--json")
    assert s.rc == 1, s.describe()
    assert_dflash_failure(s.json()["failure"])
    w = bu.run("wait", bu.name, "--timeout", "5")
    assert w.rc == 1, w.describe()
    assert "cuda-graph" in w.err and "torch.AcceleratorError" in w.err, w.describe()


# ---------------------------------------------------------------------------- stale health after SIGTERM


def test_stale_old_process_answers_v1_models_but_ready_waits_for_the_new_ready_line(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(scenario="stale-health")
    bu.bring_up()
    inv_a = bu.invocation()
    assert inv_a

    with Poller(bu.endpoint + "/v1/models") as poll:
        rs = bu.popen("restart", bu.name, "--yes", "--json", label="restart")
        rs.wait_for(r'"step": "start", "status": "done"', timeout=30)
        wt = bu.popen("wait", bu.name, "--json", "--timeout", "30", label="wait")
        res = rs.finish(40)
        wres = wt.finish(40)
    assert res.rc == 0, res.describe()
    assert wres.rc == 0, wres.describe()

    inv_b = bu.invocation()
    assert inv_b and inv_b != inv_a
    cur = bu.current()
    assert cur is not None
    t_term = bu.log_time(inv_a, "SIGTERM received")
    t_ready_b = bu.log_time(inv_b, READY_LINE)

    # the trap is real: after SIGTERM and before the new process existed, the old one still answered 200
    stale = [(t, code) for t, code, _ in poll.samples if code == 200 and t_term < t < cur["started_at"]]
    assert stale, f"no 200 from /v1/models after SIGTERM: {[(round(t - t_term, 2), c) for t, c, _ in poll.samples]}"

    # bringup restart: `ready` only after the new invocation exists, and not before its own ready line
    lines = rs.out_lines
    i_start = next(i for i, (_, x) in enumerate(lines) if '"step": "start", "status": "done"' in x)
    ready_lines = [(i, t) for i, (t, x) in enumerate(lines)
                   if '"step": "follow"' in x and ('"detail": "ready"' in x or '"status": "done"' in x)]
    assert ready_lines, res.describe()
    for i, t in ready_lines:
        assert i > i_start, res.describe()
        assert t >= t_ready_b, f"restart said ready {t_ready_b - t:.3f}s before the new process's ready line"
    assert res.json()["invocation"] == inv_b

    # bringup wait, started while the restart was following the new run
    events = [json.loads(x) for _, x in wt.out_lines if x.startswith("{")]
    ready_ev = [e for e in events if e.get("phase") == "ready"]
    assert ready_ev, wres.describe()
    assert ready_ev[0]["at"] >= t_ready_b
    t_wait_ready = next(t for t, x in wt.out_lines if '"phase": "ready"' in x)
    assert t_wait_ready >= t_ready_b

    d = bu.status()
    assert d["invocation"] == inv_b and d["phase"] == "ready"
    assert d["timeline"][-1]["phase"] == "ready" and d["timeline"][-1]["at"] >= t_ready_b


def test_wait_started_while_another_bringup_restarts_follows_the_new_run(
        make_bringup: Callable[..., Bringup]) -> None:
    # stale-health keeps the old process stopping for a while; the long release delay keeps the gap before the new
    # process starts open for a second or more, so `wait` surely starts in between
    bu = make_bringup(scenario="stale-health", sim_args=("--sim-release-delay", "30"))
    bu.bring_up()
    rs = bu.popen("restart", bu.name, "--yes", "--json", label="restart")
    rs.wait_for(r'"step": "stop", "status": "running"', timeout=30)
    wt = bu.popen("wait", bu.name, "--json", "--timeout", "30", label="wait")
    res, wres = rs.finish(40), wt.finish(40)
    assert res.rc == 0, res.describe()
    assert wres.rc == 0, wres.describe()
    assert wres.json_values()[-1]["phase"] == "ready"


# ---------------------------------------------------------------------------- fast restart vs GPU memory


def stop_by_hand(bu: Bringup) -> dict[str, Any]:
    """SIGTERM to the server, as `systemctl stop` or a kill by hand does, until it has exited; its run record."""
    cur = bu.current()
    assert cur is not None
    os.kill(int(cur["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + slack(20)
    while (bu.current() or {}).get("exited_at") is None:
        assert time.monotonic() < deadline, "the server did not exit on SIGTERM"
        time.sleep(0.1)
    return cur


def test_restart_waits_for_gpu_memory_while_a_naive_stop_and_start_ooms(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(scenario="oom-on-fast-restart", sim_args=("--sim-release-delay", "40"))  # 4 s at 0.1
    bu.bring_up()
    # the next run holds its memory 0.3-1 x 20 s x slack per GPU after its exit, for the naive start below: a new
    # Python process must read it before the last GPU is freed, which on a loaded 2-core machine took longer than
    # 4 s (it did not OOM, and served until its timeout)
    bu.sim_args = ("--sim-release-delay", f"{slack(20.0) / bu.time_scale:g}")
    bu.write_config()
    r = bu.bring_up()
    out = r.out
    assert "waiting for GPU memory" in out, r.describe()
    assert re.search(r"GPU memory released after \d+\.\d s", out), r.describe()
    assert out.index("waiting for GPU memory") < out.index("GPU memory released") < out.index("[...] start")
    inv = bu.invocation()
    assert inv
    assert not any("out of memory" in text for _, text in bu.log_lines(inv))

    # the naive way: stop (the server exits, as `systemctl stop` returns), then start the same server at once
    # without waiting for the memory to be released (`bringup stop` would wait: see the next tests)
    stop_by_hand(bu)
    naive = subprocess.run(bu.sim_command(free_port()), cwd=bu.tmp, env=bu.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=slack(30))
    text = naive.stdout.decode("utf-8", "replace")
    assert naive.returncode != 0, text[-3000:]
    assert "Traceback (most recent call last):" in text, text[-3000:]
    assert "torch.OutOfMemoryError: CUDA out of memory." in text, text[-3000:]


def test_stop_then_start_as_two_commands_waits_for_gpu_memory(make_bringup: Callable[..., Bringup]) -> None:
    """`bringup stop && bringup start`, the seeds' stop/sleep/start in two commands: stopped means released."""
    bu = make_bringup(scenario="oom-on-fast-restart", sim_args=("--sim-release-delay", "40"))  # 4 s at 0.1
    bu.bring_up()
    s = bu.run("stop", bu.name, timeout=60)
    assert s.rc == 0, s.describe()
    m = re.search(r"stopped in \d+\.\d s; GPU memory released after (\d+\.\d) s", s.out)
    assert m, s.describe()
    assert float(m[1]) >= 1.0, s.describe()  # the simulated driver frees the last GPU 1.2-4 s after the exit
    r = bu.run("start", bu.name, timeout=60)
    assert r.rc == 0, r.describe()
    inv = bu.invocation()
    assert inv
    assert not any("out of memory" in text for _, text in bu.log_lines(inv))


def test_start_after_a_stop_it_did_not_see_waits_for_gpu_memory(make_bringup: Callable[..., Bringup]) -> None:
    """The server stopped behind bringup's back (SIGTERM by hand, `systemctl stop`): a new `bringup start` knows
    no old PIDs, and the memory the dead run still holds must not pass for another tenant's."""
    # 12 s at 0.1 (the last of the 8 GPUs freed 4-12 s after the exit, most often after 10): the memory must still
    # be held when the new `bringup start` reaches its release step, and a Python process takes seconds to get there
    # on a loaded machine (with 4 s, CI's 2 cores once saw everything released at 0.1 s)
    bu = make_bringup(scenario="oom-on-fast-restart", sim_args=("--sim-release-delay", "120"))
    bu.bring_up()
    cur = stop_by_hand(bu)
    r = bu.run("start", bu.name, timeout=60)
    assert r.rc == 0, r.describe()
    assert "waiting for GPU memory" in r.out, r.describe()
    inv = bu.invocation()
    assert inv and inv != cur["invocation"]
    assert not any("out of memory" in text for _, text in bu.log_lines(inv))


def test_an_endpoint_on_another_port_than_the_server_listens_on_is_named(make_bringup: Callable[..., Bringup]) -> None:
    """A wrong port in `endpoint`: probes never answer and the run only looks hung ("STALLED"). The server's own
    "Uvicorn running on" line says where it listens: start names the mismatch while it waits and in its timeout,
    status in its notes."""
    bu = make_bringup()
    wrong = free_port()
    text = bu.config.read_text(encoding="utf-8")
    bu.config.write_text(text.replace(f'endpoint = "{bu.endpoint}"', f'endpoint = "http://127.0.0.1:{wrong}"'),
                         encoding="utf-8")
    r = bu.run("start", bu.name, "--timeout", "12", timeout=60)
    assert r.rc == 3, r.describe()  # a timeout
    said = f"the server listens on port {bu.port}, but the endpoint is http://127.0.0.1:{wrong}"
    assert said in r.out, r.describe()  # as a step, while it waits
    assert f"not ready within 12 s (last phase: warmup); {said}" in r.text, r.describe()
    notes = bu.status()["notes"]
    assert any(said in n for n in notes), notes
    bu.run("stop", bu.name)


def test_a_hung_start_says_stalled_and_that_the_server_still_runs(make_bringup: Callable[..., Bringup]) -> None:
    """Headless, "still loading" and "hung" must not look the same either, and a start that gives up says that it
    left the server running."""
    bu = make_bringup(scenario="hang-loading")
    with bu.config.open("a", encoding="utf-8") as f:
        f.write("\n[probe]\nstall_after_s = 3\n")
    r = bu.run("start", bu.name, "--timeout", "10", timeout=60)
    assert r.rc == 3, r.describe()
    assert re.search(r"STALLED in loading: no log line or GPU memory change for \d+ s", r.out), r.describe()
    assert "STALLED for" in r.text and f"the server is still running: `bringup stop {bu.name}` stops it" in r.text, \
        r.describe()
    w = bu.run("wait", bu.name, "--timeout", "3")
    assert w.rc == 3 and "STALLED in loading" in w.err and "; STALLED for" in w.err, w.describe()
    j = bu.run("wait", bu.name, "--timeout", "2", "--json")
    assert any(rec.get("phase") == "loading" and rec.get("stalled_for", 0) >= 3 for rec in j.json_values()), \
        j.describe()
    assert bu.run("stop", bu.name).rc == 0


def test_demo_on_a_taken_port_says_so_at_once_and_how_to_pick_another(tmp_path: Path) -> None:
    import socket

    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with socket.socket() as other:  # another program on the demo's port
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        env = {**b.env, "BRINGUP_DEMO_PORT": str(port)}
        r = b.run("demo", "--headless", config=False, env=env, cwd=empty, timeout=30)
    assert r.rc == 1, r.describe()
    # the port suggested is one found free then: the next one unless a parallel test holds it
    # (tests/e2e/test_demo_port.py)
    m = re.fullmatch(rf"bringup: port {port} on 127\.0\.0\.1 is taken by another program: run the demo on another "
                     r"port, e\.g\. BRINGUP_DEMO_PORT=(\d+) bringup demo", r.err.strip())
    assert m is not None and int(m.group(1)) > port, r.describe()
    assert r.seconds < slack(10) and not wait_no_sim_processes(str(tmp_path), timeout=2.0), r.describe()


def test_demo_headless_killed_stops_its_server(tmp_path: Path) -> None:
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(free_port())}
    p = Proc(b.cmd("demo", "--headless", "--scenario", "hang-loading", "--time-scale", "0.2", config=False),
             cwd=empty, env=env, label="demo --headless")
    p.wait_for(r"\] loading", timeout=30)
    os.kill(p.pid, signal.SIGTERM)
    r = p.finish(30)
    assert r.rc == 128 + signal.SIGTERM, r.describe()
    left = wait_no_sim_processes(str(tmp_path), timeout=5.0)
    assert not left, f"the demo left its server running: {left}"


# ---------------------------------------------------------------------------- the restart lock


def test_two_concurrent_restarts_one_proceeds_the_other_names_the_lock_holder(
        make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--sim-release-delay", "30"))  # a lock window of a second or more
    bu.bring_up()
    inv0 = bu.invocation()
    a = bu.popen("restart", bu.name, "--yes", label="restart A")
    b = bu.popen("restart", bu.name, "--yes", label="restart B")
    ra, rb = a.finish(60), b.finish(60)
    results = {a.pid: ra, b.pid: rb}
    winners = [pid for pid, r in results.items() if r.rc == 0]
    assert len(winners) == 1, "\n\n".join(r.describe() for r in results.values())
    winner = winners[0]
    loser = results[b.pid if winner == a.pid else a.pid]
    assert loser.rc != 0, loser.describe()
    assert f"pid {winner}" in loser.text, loser.describe()
    assert "lock" in loser.text.lower(), loser.describe()
    assert "Traceback" not in loser.text
    logs = sorted(p.name for p in (bu.run_dir / "logs").iterdir())
    assert len(logs) == 2, logs  # the first run and the winner's: the loser started nothing
    assert bu.invocation() != inv0
    assert bu.status()["phase"] == "ready"


# ---------------------------------------------------------------------------- wait, unset, stop


STOPPED_MSG = "bringup: sim is stopped: start it with 'bringup start sim'"


def test_wait_on_a_never_started_deployment_says_it_is_stopped_at_once(bu: Bringup) -> None:
    r = bu.run("wait", bu.name, "--timeout", "60")
    assert r.rc == 4, r.describe()
    assert r.seconds < 15, r.describe()  # not the whole --timeout
    assert r.err.strip() == STOPPED_MSG, r.describe()
    assert "timeout" not in r.err
    assert "Traceback" not in r.text
    j = bu.run("wait", bu.name, "--timeout", "60", "--json")
    assert j.rc == 4 and [json.loads(ln) for ln in j.out.splitlines()] == \
        [{"deployment": bu.name, "result": "stopped", "phase": "stopped", "invocation": ""}], j.describe()


def test_wait_with_a_timeout_shorter_than_the_grace_still_times_out(bu: Bringup) -> None:
    r = bu.run("wait", bu.name, "--timeout", "1")
    assert r.rc == 3, r.describe()
    assert "timeout after 1 s" in r.err and "stopped" in r.err, r.describe()
    j = bu.run("wait", bu.name, "--timeout", "1", "--json")
    assert j.rc == 3 and json.loads(j.out.splitlines()[-1])["result"] == "timeout", j.describe()


def test_restart_no_wait_says_lock_taken_then_wait_follows_it_to_ready(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, "--yes", "--no-wait")
    assert r.rc == 0, r.describe()
    assert re.search(r"\[ok \] lock +lock taken \(\S+@\S+, pid \d+\)", r.out), r.describe()
    assert "lock held by" not in r.out, r.describe()
    w = bu.run("wait", bu.name, "--timeout", "30")
    assert w.rc == 0, w.describe()
    assert re.search(r"\] ready ", w.out), w.describe()


def test_unset_not_set_is_refused_forced_it_starts_a_stopped_deployment_and_stop_stops(bu: Bringup) -> None:
    assert bu.invocation() is None
    no = bu.run("restart", bu.name, "--unset", "skip-server-warmup", "--yes")
    assert no.rc == 2 and "nothing to change: --skip-server-warmup is not set" in no.err, no.describe()
    assert bu.invocation() is None  # refused: nothing started
    r = bu.bring_up("--unset", "skip-server-warmup", "--force")
    assert "flags unchanged" in r.out, r.describe()
    assert "was not running" in r.out, r.describe()
    assert bu.argv_json() is None  # nothing to write
    cur = bu.current()
    assert cur is not None and process_alive(cur["pid"])
    assert "--skip-server-warmup" not in cur["argv"]

    s = bu.run("stop", bu.name)
    assert s.rc == 0 and "stopped" in s.out, s.describe()
    assert not process_alive(cur["pid"])
    rec = bu.current()
    assert rec is not None and rec["exited_at"] is not None
    s2 = bu.run("stop", bu.name)
    assert s2.rc == 0 and "not running" in s2.out, s2.describe()
    d = bu.status()
    assert d["unit"] is not None and d["unit"]["active"] != "active"


def test_after_stop_status_is_stopped_and_wait_says_so_at_once(bu: Bringup) -> None:
    bu.bring_up()
    assert bu.run("stop", bu.name).rc == 0
    d = bu.status()
    assert d["phase"] == "stopped", json.dumps(d["timeline"], indent=1)
    w = bu.run("wait", bu.name, "--timeout", "60")
    assert w.rc == 4, w.describe()
    assert w.seconds < 15 and w.err.strip() == STOPPED_MSG, w.describe()


# ---------------------------------------------------------------------------- the demo


def test_demo_headless_reaches_ready_and_stops_its_server(tmp_path: Path) -> None:
    b = Bringup(tmp_path)  # only for the isolated environment; the demo needs no config
    empty = tmp_path / "empty"
    empty.mkdir()
    port = free_port()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(port)}
    r = b.run("demo", "--headless", "--time-scale", "0.1", config=False, env=env, cwd=empty, timeout=60)
    assert r.rc == 0, r.describe()
    seen = [m.group(1) for m in re.finditer(r"^\[\s*[\d.]+s\] (\S+)", r.out, re.M)]
    assert seen == PHASES_WITH_GRAPHS, r.describe()
    assert "Traceback" not in r.text
    left = wait_no_sim_processes(str(tmp_path), timeout=3.0)
    assert not left, f"the demo left its server running: {left}"
    with pytest.raises(OSError):
        b.http_get("/health", port=port)


def test_demo_with_other_settings_than_a_kept_one_says_it_restarts_it(tmp_path: Path) -> None:
    b = Bringup(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**b.env, "BRINGUP_DEMO_PORT": str(free_port())}
    kept = b.run("demo", "--headless", "--keep", "--time-scale", "0.1", config=False, env=env, cwd=empty, timeout=60)
    assert kept.rc == 0, kept.describe()
    try:
        again = b.run("demo", "--headless", "--time-scale", "0.2", config=False, env=env, cwd=empty, timeout=60)
        assert again.rc == 0, again.describe()
        assert "bringup demo: the running demo had other settings (scenario, time scale): restarting it with these" \
            in again.err, again.describe()
    finally:
        b.run("stop", "demo", config=False, env=env, cwd=empty, timeout=60)
    assert not wait_no_sim_processes(str(tmp_path), timeout=5.0)


# ---------------------------------------------------------------------------- bad input changes nothing


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bringup]:
    """One deployment brought up with a flag change (so argv.json exists) for all bad-input cases."""
    tmp = tmp_path_factory.mktemp("badinput")
    b = Bringup(tmp)
    try:
        b.bring_up("--set", "disable-cuda-graph")
        yield b
    finally:
        b.run("stop", b.name, timeout=60)
        left = wait_no_sim_processes(str(tmp))
        kill_processes(left)
        assert not left, f"processes left behind: {left}"


PWNED = "{pwned}"
BAD_INPUTS: list[tuple[str, list[str], str]] = [
    ("unknown deployment", ["restart", "nosuch", "--yes"], r"unknown deployment 'nosuch'"),
    ("unknown deployment, status", ["status", "nosuch"], r"unknown deployment 'nosuch'"),
    ("unknown flag", ["restart", "sim", "--set", "no-such-flag", "--yes"], r"unknown flag 'no-such-flag'"),
    ("unknown flag to unset", ["restart", "sim", "--unset", "no-such-flag", "--yes"], r"unknown flag"),
    ("bad int", ["restart", "sim", "--set", "cuda-graph-max-bs-decode=abc", "--yes"], r"integer"),
    # removed by SGLang 0.5.21: the newest release's flags stand until the run says its own
    ("a removed flag", ["restart", "sim", "--set", "cuda-graph-max-bs=64", "--yes"],
     r"--cuda-graph-max-bs is not a flag of SGLang"),
    ("int out of range", ["restart", "sim", "--set", "tp-size=0", "--yes"], r"tp-size"),
    ("bad choice", ["restart", "sim", "--set", "speculative-algorithm=FOO", "--yes"], r"must be one of"),
    ("semicolon", ["restart", "sim", "--set", f"speculative-draft-model-path=m;touch {PWNED}", "--yes"],
     r"characters"),
    ("command substitution", ["restart", "sim", "--set", f"speculative-draft-model-path=$(touch {PWNED})",
                              "--yes"], r"characters"),
    ("backticks", ["restart", "sim", "--set", f"speculative-draft-model-path=`touch {PWNED}`", "--yes"],
     r"characters"),
    ("embedded newline", ["restart", "sim", "--set", f"speculative-draft-model-path=m\ntouch {PWNED}", "--yes"],
     r"characters"),
    ("semicolon in an int", ["restart", "sim", "--set", f"cuda-graph-max-bs-decode=8;touch {PWNED}", "--yes"],
     r"integer"),
    ("substitution in a switch", ["restart", "sim", "--set", f"disable-cuda-graph=$(touch {PWNED})", "--yes"],
     r"switch"),
    ("semicolon in a choice", ["restart", "sim", "--set", f"speculative-algorithm=EAGLE;touch {PWNED}", "--yes"],
     r"must be one of"),
    ("value starting with a dash", ["restart", "sim", "--set", "speculative-draft-model-path=--port=1", "--yes"],
     r"may not start with"),
    # with no terminal and no --yes a restart acts, as a stop does (tests/e2e/test_cli_usage.py): no refusal case here
    ("unset a flag that is not set", ["restart", "sim", "--unset", "skip-server-warmup"], r"nothing to change"),
    ("set and unset one flag", ["restart", "sim", "--set", "tp-size=4", "--unset", "tp-size", "--yes", "--force"],
     r"contradict"),
    ("unknown flag close to a known one", ["restart", "sim", "--set", "tpsize=8", "--yes"],
     r"unknown flag 'tpsize' \(did you mean 'tp-size'\?\)"),
]


def _expect_refused(b: Bringup, r: Result, pattern: str) -> None:
    assert r.rc == 2, r.describe()
    err = r.err.strip()
    assert len(err.splitlines()) == 1, f"not a one-line message:\n{r.describe()}"
    assert err.startswith("bringup: "), r.describe()
    assert re.search(pattern, err), r.describe()
    assert "Traceback" not in r.err and "Traceback" not in r.out, r.describe()
    assert not b.pwned.exists(), "a flag value was run by a shell"


@pytest.mark.parametrize(("args", "pattern"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_is_refused_and_changes_nothing(running: Bringup, args: list[str], pattern: str) -> None:
    b = running
    args = [a.replace(PWNED, str(b.pwned)) for a in args]
    before = (b.argv_bytes(), b.invocation(), b.current())
    assert before[0] is not None and before[1]
    r = b.run(*args)
    _expect_refused(b, r, pattern)
    assert r.out.strip() == "", r.describe()
    assert (b.argv_bytes(), b.invocation(), b.current()) == before
    assert process_alive(before[2]["pid"])  # type: ignore[index]


@pytest.mark.parametrize("broken", ["not toml", "unknown key", "missing file"])
def test_broken_config_is_refused_with_one_line(running: Bringup, broken: str) -> None:
    b = running
    path = b.tmp / f"broken-{broken.replace(' ', '-')}.toml"
    if broken == "not toml":
        path.write_text(b.config.read_text() + "\n[deployments.sim\ncommand = [\n", encoding="utf-8")
    elif broken == "unknown key":
        path.write_text(b.config.read_text() + "\nbogus_key = 1\n", encoding="utf-8")
    before = (b.argv_bytes(), b.current())
    for args in (["restart", "sim", "--yes"], ["status", "sim"]):
        r = b.run(*args, config=path)
        _expect_refused(b, r, re.escape(str(path)))
    assert (b.argv_bytes(), b.current()) == before


def test_trailing_newline_in_a_flag_value_is_refused(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, "--set", "speculative-draft-model-path=model\n", "--yes", "--no-wait")
    assert bu.argv_json() is None, f"argv.json was written: {bu.argv_json()!r}"
    assert bu.invocation() is None, "the server was started"
    _expect_refused(bu, r, r"characters")


def test_config_option_before_the_subcommand(bu: Bringup) -> None:
    r = bu.run("--config", str(bu.config), "status", bu.name, "--json", config=False)
    assert r.rc == 0, r.describe()
    assert r.json()["deployment"] == bu.name
    r2 = bu.run("--json", "status", bu.name)
    assert r2.rc == 0, r2.describe()
    assert r2.json()["deployment"] == bu.name


def test_flags_lists_booleans_on_or_off_and_values_as_the_console_does(bu: Bringup) -> None:
    r = bu.run("flags", bu.name)
    assert r.rc == 0, r.describe()
    rows = {ln.split()[0]: ln.split()[1] for ln in r.out.splitlines()[2:] if ln.strip()}
    assert rows["disable-cuda-graph"] == "off"  # a boolean the command line does not have
    assert rows["tp-size"].isdigit()  # a value it has
    assert "-" in {v for k, v in rows.items() if k not in ("disable-cuda-graph",)}  # a value flag it lacks
    j = {row["name"]: row["value"] for row in json.loads(bu.run("flags", bu.name, "--json").out)["flags"]}
    assert j["disable-cuda-graph"] is False and j["tp-size"].isdigit()


def test_a_slow_stop_says_what_the_old_run_still_holds_while_it_stops(make_bringup: Callable[..., Bringup]) -> None:
    # stale-health: after SIGTERM the old process lingers 8 s x time scale (2.4 s here), holding its GPU memory
    bu = make_bringup(scenario="stale-health", time_scale=0.3)
    bu.bring_up()
    pid = bu.current()["pid"]  # type: ignore[index]
    res = bu.run("restart", bu.name, "--yes", timeout=90)
    assert res.rc == 0, res.describe()
    held = [x for x in res.out.splitlines() if "stop" in x and "stopping:" in x]
    assert held, res.describe()
    assert "GiB held on GPU" in held[0] and str(pid) in held[0], held
