"""The command line's contract with a script: numbers that must be positive, errors as one JSON object with
`--json`, `flags --json` as docs/cli.md says, restarts that would change nothing, one confirmation rule for
`restart` and `stop`, a failed restart that names what to go back to, and `replay` reading the flags from the log.

Every `bringup` here is a real subprocess (`python -m tui`) in the test's own tmp dir (tests/helpers/e2e.py); the
ones marked slow run the simulated SGLang server as a `process` deployment and wait on what it prints, never on a
fixed sleep.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.dflash_crash import DFLASH_CRASH, DFLASH_HINT
from tests.helpers.e2e import Bringup, Result, free_port, process_alive, sim_processes
from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
DFLASH = ("--set", "speculative-algorithm=DFLASH", "--set", "speculative-dflash-block-size=8")


@pytest.fixture
def bu(make_bringup: Callable[..., Bringup]) -> Bringup:
    """A `process` deployment `sim` of the simulated server, configured but not started; stopped at the end."""
    b = make_bringup()
    b.env["BRINGUP_DEMO_PORT"] = str(free_port())  # no command here may ever reach the demo's default port
    return b


def one_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 1, f"not one line:\n{text}"
    return lines[0]


def json_error(r: Result) -> dict[str, Any]:
    """The error of a `--json` command: exactly one JSON object on stdout, `{"error": ..., "code": rc}`, with the
    same words on stderr as without --json."""
    out = [ln for ln in r.out.splitlines() if ln.strip()]
    assert len(out) == 1, f"not exactly one line on stdout:\n{r.describe()}"
    obj = json.loads(out[0])
    assert isinstance(obj, dict), r.describe()
    assert isinstance(obj.get("error"), str) and obj["error"], r.describe()
    assert obj.get("code") == r.rc, r.describe()
    assert "Traceback" not in r.text, r.describe()
    return obj


def nothing_started(b: Bringup) -> None:
    assert b.invocation() is None, "a server was started"
    assert b.argv_json() is None, "flags were written"
    assert not sim_processes(str(b.tmp)), "a simulated server runs"


# ---------------------------------------------------------------------------- numbers that must be positive


POSITIVE = [
    ("wait", "--timeout", "-5"),
    ("wait", "--timeout", "0"),
    ("wait", "--timeout", "nan"),
    ("wait", "--timeout", "inf"),
    ("wait", "--timeout", "soon"),
    ("start", "--timeout", "-1"),
    ("restart", "--timeout", "0"),
    ("bench", "--requests", "0"),
    ("bench", "--prompt-tokens", "-3"),
    ("bench", "--max-tokens", "0"),
    ("bench", "--timeout", "-1"),
    ("demo", "--time-scale", "0"),
]


@pytest.mark.parametrize(("cmd", "option", "value"), POSITIVE, ids=[" ".join(c) for c in POSITIVE])
def test_a_number_that_must_be_positive_is_a_usage_error(bu: Bringup, cmd: str, option: str, value: str) -> None:
    args = ["demo", "--headless"] if cmd == "demo" else [cmd, bu.name, "--yes"] if cmd == "restart" else [cmd, bu.name]
    r = bu.run(*args, option, value)
    assert r.rc == 2, r.describe()
    line = one_line(r.err)
    assert re.fullmatch(rf"bringup {cmd}: error: argument {option}: (?:must be|takes) a positive "
                        rf"(?:number|integer).*'{re.escape(value)}' \(see `bringup {cmd} --help`\)", line), line
    assert "never awaited" not in r.err and r.out == "", r.describe()
    j = bu.run(*args, option, value, "--json")
    assert j.rc == 2 and json_error(j)["error"] == line, j.describe()
    nothing_started(bu)


# ---------------------------------------------------------------------------- --json errors


def _ssh_refused_config(b: Bringup) -> Path:
    ssh_cfg = b.tmp / "ssh_config"
    ssh_cfg.write_text(f"Host gpu-box\n    HostName 127.0.0.1\n    Port {free_port()}\n    User root\n")
    cfg = b.tmp / "remote.toml"
    cfg.write_text(f'[hosts.gpu-box]\nssh = "gpu-box"\nssh_config = "{ssh_cfg}"\n'
                   '[deployments.k26]\nhost = "gpu-box"\nmanager = "systemd"\nunit = "sglang.service"\n')
    return cfg


ERRORS: list[tuple[str, list[str], int, str]] = [
    ("unknown deployment, status", ["status", "nosuch"], 2, r"unknown deployment 'nosuch'"),
    ("unknown deployment, wait", ["wait", "nosuch"], 2, r"unknown deployment 'nosuch'"),
    ("unknown deployment, flags", ["flags", "nosuch"], 2, r"unknown deployment 'nosuch'"),
    ("unknown deployment, restart", ["restart", "nosuch", "--yes"], 2, r"unknown deployment 'nosuch'"),
    ("unknown deployment, stop", ["stop", "nosuch"], 2, r"unknown deployment 'nosuch'"),
    ("unknown deployment, bench", ["bench", "nosuch"], 2, r"unknown deployment 'nosuch'"),
    ("unknown flag", ["restart", "sim", "--set", "tpsize=8", "--yes"], 2, r"did you mean 'tp-size'"),
    ("bad flag value", ["restart", "sim", "--set", "tp-size=abc", "--yes"], 2, r"integer"),
    ("unknown command", ["nosuchcommand"], 2, r"invalid choice: 'nosuchcommand'"),
    ("unknown option", ["status", "sim", "--verbose"], 2, r"unrecognized arguments: --verbose"),
    ("missing config file", ["status", "sim", "--config", "{tmp}/nope.toml"], 2, r"config file not found"),
    ("broken config", ["status", "sim", "--config", "{tmp}/broken.toml"], 2, r"not valid TOML"),
    ("replay of no log", ["replay", "{tmp}/notes.txt"], 2, r"no SGLang or vLLM log lines"),
    ("unreachable host, flags", ["flags", "k26", "--config", "{remote}"], 1, r"SSH connection refused"),
    ("unreachable host, restart", ["restart", "k26", "--yes", "--config", "{remote}"], 1, r"SSH connection refused"),
    ("unreachable host, stop", ["stop", "k26", "--config", "{remote}"], 1, r"SSH connection refused"),
]


@pytest.mark.parametrize(("args", "rc", "pattern"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_every_error_with_json_is_one_object_on_stdout(bu: Bringup, args: list[str], rc: int, pattern: str) -> None:
    (bu.tmp / "broken.toml").write_text("[deployments.sim\n", encoding="utf-8")
    (bu.tmp / "notes.txt").write_text("hello\nnot a log\n", encoding="utf-8")
    words = [a.format(tmp=bu.tmp, remote=_ssh_refused_config(bu)) for a in args]
    explicit = "--config" in words
    for as_json in (["--json"], []):
        r = bu.run(*words, *as_json, config=not explicit)
        assert r.rc == rc, r.describe()
        assert re.search(pattern, one_line(r.err)), r.describe()  # the human's line, with --json too
        if as_json:
            assert re.search(pattern, json_error(r)["error"]), r.describe()
        else:
            assert r.out.strip() == "", r.describe()
    r = bu.run("--json", *words, config=not explicit)  # --json before the command reads the same
    assert r.rc == rc and re.search(pattern, json_error(r)["error"]), r.describe()
    nothing_started(bu)


def test_flags_json_is_the_one_object_the_docs_describe(bu: Bringup) -> None:
    r = bu.run("flags", bu.name, "--json")
    assert r.rc == 0, r.describe()
    d = json.loads(one_line(r.out))
    assert isinstance(d, dict), r.out
    assert d["deployment"] == bu.name and d["preset"] == "sglang"
    rows = {row["name"]: row for row in d["flags"]}
    assert rows["tp-size"]["value"] == "8" and rows["disable-cuda-graph"]["value"] is False
    assert rows["disable-cuda-graph"]["key"] == "g" and rows["speculative-algorithm"]["choices"]
    doc = " ".join((ROOT / "docs" / "cli.md").read_text(encoding="utf-8").split())  # the CLI's JSON, in detail
    assert "`status`, `stop` and `flags` one object" in doc
    assert '`{"deployment": ..., "preset": ..., "flags": [{"name", "kind", "value", "choices", "key", "help"}' in doc
    assert set(next(iter(rows.values()))) == {"name", "kind", "value", "choices", "key", "help"}
    assert '`{"error": "...", "code": N}`' in doc


# ---------------------------------------------------------------------------- restarts that would change nothing


NOTHING: list[tuple[str, list[str], str]] = [
    ("unset a flag that is not set", ["--unset", "skip-server-warmup"],
     r"nothing to change: --skip-server-warmup is not set; .*\(--force restarts anyway\)"),
    ("switch off a switch that is off", ["--set", "disable-cuda-graph=false"],
     r"nothing to change: --disable-cuda-graph is not set"),
    ("set a value it has", ["--set", "tp-size=8"], r"nothing to change: --tp-size is already '8'"),
    ("set a switch that is on", ["--set", "enable-metrics"], r"nothing to change: --enable-metrics is already on"),
    ("several, none a change", ["--set", "tp-size=8", "--unset", "skip-server-warmup"],
     r"nothing to change: --tp-size is already '8'; --skip-server-warmup is not set"),
    ("set and unset the same flag", ["--set", "tp-size=4", "--unset", "tp-size"],
     r"--set tp-size=4 and --unset tp-size contradict: give one of them"),
    ("two values of one flag", ["--set", "tp-size=4", "--set", "tp=2"],
     r"--set tp-size=4 and --set tp=2 contradict"),
    ("a switch on and off", ["--set", "disable-cuda-graph", "--set", "disable-cuda-graph=false"],
     r"--set disable-cuda-graph and --set disable-cuda-graph=false contradict"),
    ("contradiction with --force", ["--set", "tp-size=4", "--unset", "tp-size", "--force"], r"contradict"),
    ("an unknown flag close to a known one", ["--set", "tpsize=8"],
     r"unknown flag 'tpsize' \(did you mean 'tp-size'\?\); `bringup flags sim` lists"),
    ("unset with underscores", ["--unset", "enable_metrics"], r"unknown flag 'enable_metrics' \(did you mean "
                                                              r"'enable-metrics'\?\)"),
]


@pytest.mark.parametrize(("extra", "pattern"), [c[1:] for c in NOTHING], ids=[c[0] for c in NOTHING])
def test_a_restart_that_would_change_nothing_is_refused(bu: Bringup, extra: list[str], pattern: str) -> None:
    r = bu.run("restart", bu.name, "--yes", *extra)
    assert r.rc == 2, r.describe()
    assert re.search(pattern, one_line(r.err)) and one_line(r.err).startswith("bringup: "), r.describe()
    assert r.out == "", r.describe()
    nothing_started(bu)


# ---------------------------------------------------------------------------- replay reads the log's flags


def test_bringup_replay_prints_the_flags_and_the_dflash_hint(bu: Bringup) -> None:
    log = bu.tmp / "dflash-crash.log"
    log.write_text("\n".join(DFLASH_CRASH) + "\n", encoding="utf-8")
    r = bu.run("replay", str(log), config=False)
    assert r.rc == 1, r.describe()
    assert f"hint: {DFLASH_HINT}" in r.out, r.describe()
    assert re.search(r"^flags: .*--speculative-algorithm DFLASH", r.out, re.M), r.describe()
    j = bu.run("replay", str(log), "--json", config=False)
    d = json.loads(one_line(j.out))
    assert j.rc == 1 and d["failure"]["hint"].startswith(DFLASH_HINT) and d["flags"]["speculative-algorithm"] == \
        "DFLASH", j.describe()


# ---------------------------------------------------------------------------- real runs (the simulated server)


def _on_a_terminal(b: Bringup, *args: str, answer: bytes) -> Result:
    """`bringup ARGS` with a terminal for stdin (a pty) on which `answer` is already typed."""
    main, sub = pty.openpty()
    try:
        os.write(main, answer)
        p = subprocess.run(b.cmd(*args), cwd=b.tmp, env=b.env, stdin=sub, capture_output=True, timeout=slack(60))
    finally:
        os.close(sub)
        os.close(main)
    return Result(list(args), p.returncode, p.stdout.decode(), p.stderr.decode(), 0.0)


@pytest.mark.slow
def test_restart_and_stop_follow_one_confirmation_rule(bu: Bringup) -> None:
    """At a terminal both ask, and a no leaves the server as it was; with no terminal (a script, ssh) both act."""
    bu.bring_up()
    inv, pid = bu.invocation(), bu.current()["pid"]  # type: ignore[index]
    for cmd in ("stop", "restart"):
        r = _on_a_terminal(bu, cmd, bu.name, answer=b"n\n")
        assert r.rc == 2, r.describe()
        # the question on stderr (stdout is the output's: JSON with --json), then the one-line answer to a no
        assert re.fullmatch(rf"{cmd.capitalize()} sim on \S+ .*\? \[y/N\] bringup: cancelled; nothing changed",
                            one_line(r.err)), r.describe()
        assert r.out == "", r.describe()
        assert bu.invocation() == inv and process_alive(pid), f"{cmd} acted on a no"
    r = bu.run("restart", bu.name)  # no terminal and no --yes: the command line is the instruction
    assert r.rc == 0 and "ready" in r.out, r.describe()
    assert bu.invocation() != inv and not process_alive(pid)
    pid2 = bu.current()["pid"]  # type: ignore[index]
    s = bu.run("stop", bu.name)
    assert s.rc == 0 and "stopped" in s.out, s.describe()
    assert not process_alive(pid2)


@pytest.mark.slow
def test_force_restarts_when_the_flags_would_not_change(bu: Bringup) -> None:
    bu.bring_up()
    inv = bu.invocation()
    r = bu.run("restart", bu.name, "--unset", "skip-server-warmup", "--yes")
    assert r.rc == 2 and "nothing to change" in one_line(r.err), r.describe()
    assert bu.invocation() == inv
    r = bu.bring_up("--unset", "skip-server-warmup", "--force")
    assert "flags unchanged" in r.out and bu.invocation() != inv, r.describe()
    # a change with a part that is a no-op goes ahead, and says which part changed nothing
    r = bu.bring_up("--set", "disable-cuda-graph", "--unset", "skip-server-warmup")
    assert "bringup: note: --skip-server-warmup is not set, as asked" in r.err, r.describe()
    assert "--disable-cuda-graph" in bu.argv_json()


@pytest.mark.slow
def test_a_failed_restart_names_the_last_ready_flags_the_way_back_and_rollback(bu: Bringup) -> None:
    # nothing has reached ready yet: it says there is nothing to go back to
    r = bu.run("restart", bu.name, *DFLASH, "--yes", timeout=60)
    assert r.rc == 1, r.describe()
    assert "no flags of sim have reached ready under bringup yet, so there is nothing to roll back to" in r.out
    assert "--rollback" in r.out, r.describe()
    back = ["--unset", "speculative-algorithm", "--unset", "speculative-dflash-block-size"]
    bu.bring_up(*back)  # ready: these flags are saved as the last good ones
    good = bu.argv_json()

    r = bu.run("restart", bu.name, *DFLASH, "--yes", "--json", timeout=60)
    assert r.rc == 1, r.describe()
    final = r.json()
    assert final["ok"] is False and final["code"] == 1 and final["error"] == final["message"], final
    assert final["last_ready"]["argv"] == good, final
    assert final["last_ready"]["command"] == f"bringup restart sim {' '.join(back)} --yes", final
    assert final["last_ready"]["flags"]["tp-size"] == "8" and "speculative-algorithm" not in \
        final["last_ready"]["flags"], final

    r = bu.run("restart", bu.name, "--yes", timeout=60)  # the failing flags once more, as text
    assert r.rc == 1, r.describe()
    last = r.out.strip().splitlines()[-4:]
    assert last[0].startswith("sim: failed in"), r.describe()
    assert re.fullmatch(r"last flags that reached ready: --tp-size 8 --enable-metrics", last[1]), r.describe()
    assert last[2] == f"to go back to them: bringup restart sim {' '.join(back)} --yes", r.describe()
    assert last[3] == "or restart with --rollback: on a failure it goes back to them by itself", r.describe()
    ok = bu.run(*last[2].removeprefix("to go back to them: bringup ").split(), timeout=60)  # as said, it works
    assert ok.rc == 0 and "sim: ready" in ok.out, ok.describe()
    assert bu.argv_json() == good

    # with --rollback it goes back by itself, and says so
    r = bu.run("restart", bu.name, *DFLASH, "--rollback", "--yes", timeout=90)
    assert r.rc == 1 and "rolled back: ready" in r.out, r.describe()
    assert r.out.strip().splitlines()[-2:] == ["last flags that reached ready: --tp-size 8 --enable-metrics",
                                               "--rollback went back to them (see its result above)"], r.describe()
    assert bu.argv_json() == good and bu.status()["phase"] == "ready"


@pytest.mark.slow
def test_replay_of_the_simulated_dflash_crash_gives_the_hint_the_restart_gave(bu: Bringup) -> None:
    r = bu.run("restart", bu.name, *DFLASH, "--yes", "--json", timeout=60)
    assert r.rc == 1, r.describe()
    live = r.json()["failure"]
    assert live["hint"].startswith(DFLASH_HINT), live
    log = bu.run_dir / "logs" / f"{bu.invocation()}.log"
    # the simulated release's own form: a dict from SGLang 0.5.20 on (`server_args={...}`), the dataclass before
    assert any(re.search(r"server_args=(?:ServerArgs\(|\{)", text) for _, text in bu.log_lines(str(bu.invocation())))
    rp = bu.run("replay", str(log), "--json", config=False)
    assert rp.rc == 1, rp.describe()
    got = json.loads(one_line(rp.out))["failure"]
    assert got["kind"] == live["kind"] == "cuda-graph", got
    assert got["hint"] == live["hint"].replace("bringup restart sim ", "bringup restart <deployment> "), got
