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
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.e2e import Bringup, Result, free_port, process_alive, sim_processes
from tui.lifecycle.presets import get_preset
from tui.lifecycle.reducer import initial, reduce
from tui.lifecycle.replay import replay
from tui.lifecycle.server_args import argv_from_fields, argv_from_line, fields_from_line
from tui.model import FailureKind, LogLine, Phase, UnitObserved, UnitState

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


def test_the_flag_names_suggested_are_the_closest_known() -> None:
    from tui.config import did_you_mean

    assert did_you_mean("tpsize", ["disable-cuda-graph", "tp-size", "ep-size"]) == " (did you mean 'tp-size'?)"
    assert did_you_mean("zzz", ["tp-size"]) == ""


# ---------------------------------------------------------------------------- replay reads the log's flags


# the K2.6 DFlash crash as SGLang logs it: its arguments line first (`server_args=ServerArgs(...)`, every field,
# defaults included), then load, capture, ready, and the DFLASH verify faulting at a graph replay (the wordings of
# tests/unit/test_reducer.py, from the released wheels)
SERVER_ARGS = ("[2026-05-29 16:59:40] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6', "
               "tokenizer_path='/root/models/Kimi-K2.6', tokenizer_mode='auto', skip_tokenizer_init=False, "
               "load_format='auto', trust_remote_code=True, dtype='auto', kv_cache_dtype='auto', "
               "quantization=None, context_length=None, device='cuda', served_model_name='/root/models/Kimi-K2.6', "
               "chat_template=None, is_embedding=False, revision=None, host='0.0.0.0', port=30001, "
               "mem_fraction_static=0.85, max_running_requests=None, chunked_prefill_size=8192, "
               "max_prefill_tokens=16384, schedule_policy='fcfs', schedule_conservativeness=1.0, "
               "cpu_offload_gb=0, tp_size=8, ep_size=8, stream_interval=1, random_seed=42, "
               "watchdog_timeout=300, log_level='info', log_requests=False, enable_metrics=True, "
               "decode_log_interval=40, api_key=None, file_storage_path='sglang_storage', dp_size=1, "
               "load_balance_method='round_robin', dist_init_addr=None, nnodes=1, node_rank=0, "
               "json_model_override_args='{}', lora_paths=None, max_loras_per_batch=8, "
               "attention_backend='flashinfer', sampling_backend='flashinfer', "
               "speculative_algorithm='DFLASH', speculative_draft_model_path='/root/models/Kimi-K2.6-DFlash', "
               "speculative_num_steps=None, speculative_eagle_topk=None, speculative_num_draft_tokens=8, "
               "speculative_dflash_block_size=8, disable_cuda_graph=False, disable_cuda_graph_padding=False, "
               "cuda_graph_max_bs=256, cuda_graph_bs=[1, 2, 4, 8, 16, 24, 32], enable_torch_compile=False, "
               "skip_server_warmup=False, enable_p2p_check=False)")
DFLASH_CRASH = [
    SERVER_ARGS,
    "[2026-05-29 16:59:48 TP0 EP0] Load weight begin. avail mem=94.00 GB",
    "[2026-05-29 17:01:02 TP0 EP0] Load weight end. elapsed=73.65 s, type=KimiK25ForConditionalGeneration, "
    "quant=compressed-tensors, avail mem=21.76 GB, mem usage=72.24 GB.",
    "[2026-05-29 17:01:10 TP0 EP0] Capture cuda graph begin. This can take up to several minutes.",
    "[2026-05-29 17:05:40] The server is fired up and ready to roll!",
    "[2026-05-29 17:06:20 TP0 EP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/speculative/dflash_worker_v2.py", line 715, '
    "in forward_batch_generation",
    "    verify_output = self.verify(batch)",
    '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 1021, '
    "in replay",
    "    self.graphs[self.bs].replay()",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
]
DFLASH_HINT = "CUDA graphs crashed with DFLASH speculative decoding: restart with CUDA graphs off"
#: the DFLASH deployment's command line, as the live console reads it from the unit
DFLASH_ARGV = ("/usr/bin/python3", "-m", "sglang.launch_server", "--model-path", "/root/models/Kimi-K2.6",
               "--tp-size", "8", "--ep-size", "8", "--speculative-algorithm", "DFLASH",
               "--speculative-draft-model-path", "/root/models/Kimi-K2.6-DFlash", "--speculative-dflash-block-size",
               "8", "--port", "30001", "--enable-metrics", "--mem-fraction-static", "0.85")


def _live_hint(lines: list[str], argv: tuple[str, ...]) -> str:
    """The hint the console gives for these lines of a run whose unit has this argv (the engine's events)."""
    sglang = get_preset("sglang")
    s = reduce(initial(), UnitObserved(100.0, UnitState(active="active", sub="running", main_pid=4242,
                                                        invocation="inv", started_at=100.0, argv=argv)), sglang)
    for i, text in enumerate(lines):
        s = reduce(s, LogLine(at=101.0 + i, text=text, invocation="inv"), sglang)
    assert s.failure is not None
    return s.failure.hint


def test_replay_reads_the_flags_from_server_args_and_gives_the_live_dflash_hint() -> None:
    r = replay(DFLASH_CRASH)
    f = r.state.failure
    assert f is not None and f.kind == FailureKind.CUDA_GRAPH and f.phase == Phase.READY
    assert f.hint.startswith(DFLASH_HINT), f.hint
    assert f.hint == _live_hint(DFLASH_CRASH[1:], DFLASH_ARGV)  # what the console said, word for word
    flags = r.as_dict()["flags"]
    assert isinstance(flags, dict)
    assert flags["speculative-algorithm"] == "DFLASH" and flags["tp-size"] == "8"
    assert flags["enable-metrics"] is None and "disable-cuda-graph" not in flags  # a switch on; one off


def test_replay_reads_any_flag_of_server_args_not_the_one_case() -> None:
    # graphs off by another flag the hint looks at: no "turn graphs off" for a run that had them off
    off = SERVER_ARGS.replace("disable_cuda_graph=False", "disable_cuda_graph=True")
    f = replay([off, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and not f.hint.startswith(DFLASH_HINT), f.hint
    # no speculative decoding: the table's own CUDA graph hint, as live
    plain = SERVER_ARGS.replace("speculative_algorithm='DFLASH'", "speculative_algorithm=None")
    f = replay([plain, *DFLASH_CRASH[1:]]).state.failure
    plain_argv = tuple(a for a in DFLASH_ARGV if a not in ("--speculative-algorithm", "DFLASH"))
    assert f is not None and f.hint == _live_hint(DFLASH_CRASH[1:], plain_argv) and "DFLASH" not in f.hint
    # EAGLE3 too: the algorithm is read, not matched against one word
    eagle = SERVER_ARGS.replace("speculative_algorithm='DFLASH'", "speculative_algorithm='EAGLE3'")
    f = replay([eagle, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and f.hint.startswith("CUDA graphs crashed with EAGLE3 speculative decoding"), f.hint


def test_replay_of_a_cut_server_args_line_still_reads_the_fields_before_the_cut() -> None:
    cut = SERVER_ARGS[:SERVER_ARGS.index("speculative_draft_model_path")]  # journald's line limit, an excerpt
    f = replay([cut, *DFLASH_CRASH[1:]]).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint
    # in a stored log of a `process` deployment (`<epoch> <line>`) and a journal (`-o short`) alike
    stored = [f"{1780074000 + i}.5 {line}" for i, line in enumerate(DFLASH_CRASH)]
    f = replay(stored).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint
    journal = [f"May 29 17:0{i % 10}:00 dflash-train python3[106324]: {line}" for i, line in enumerate(DFLASH_CRASH)]
    f = replay(journal).state.failure
    assert f is not None and f.hint.startswith(DFLASH_HINT), f.hint


def test_replay_reads_vllm_non_default_args_of_a_real_log() -> None:
    r = replay((ROOT / "tests" / "fixtures" / "logs" / "vllm_v010_starting_args.log").read_text().splitlines())
    assert r.preset == "vllm" and r.as_dict()["flags"] == {"tensor-parallel-size": "2"}


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


# the arguments lines, as each server prints them
SGLANG_LINE = "server_args=ServerArgs(model_path='m', tp_size=8, disable_cuda_graph=True, enable_metrics=False, " \
              "lora_paths=None, cuda_graph_bs=[1, 2], json_model_override_args='{}', chat_template='')"
VLLM_DICT = "non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'tensor_parallel_size': 2, 'enforce_eager': True, " \
            "'speculative_config': {'method': 'dflash', 'num_speculative_tokens': 8}}"
VLLM_NAMESPACE = "args: Namespace(host=None, port=8000, model='Qwen/Qwen2-7B', tensor_parallel_size=4, " \
                 "enforce_eager=False, max_model_len=4096)"


def test_server_args_lines_become_the_options_they_came_from() -> None:
    assert argv_from_line(SGLANG_LINE) == ("--model-path", "m", "--tp-size", "8", "--disable-cuda-graph",
                                           "--cuda-graph-bs", "[1,2]", "--json-model-override-args", "{}")
    # vLLM's `model_tag` is `vllm serve MODEL`'s positional: the model, first, never a `--model-tag` option
    assert argv_from_line(VLLM_DICT) == ("Qwen/Qwen3-8B", "--tensor-parallel-size", "2",
                                         "--enforce-eager", "--speculative-config",
                                         '{"method":"dflash","num_speculative_tokens":8}')
    assert argv_from_line(VLLM_NAMESPACE) == ("--port", "8000", "--model", "Qwen/Qwen2-7B",
                                              "--tensor-parallel-size", "4", "--max-model-len", "4096")
    # a value that is no literal (an enum's repr) costs that field only
    fields = fields_from_line("server_args=ServerArgs(tp_size=2, load_format=<LoadFormat.AUTO: 'auto'>, "
                              "speculative_algorithm='NGRAM')")
    assert fields == {"tp_size": 2, "speculative_algorithm": "NGRAM"}
    assert argv_from_fields({"a_b": 1.5, "c": False, "d": None, "e": True}) == ("--a-b", "1.5", "--e")
    for other in ("Load weight begin. avail mem=94.00 GB", "args: nothing here", "server_args=", ""):
        assert argv_from_line(other) is None, other


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.sampled_from(["", "server_args=ServerArgs(", "non-default args: {",
                                                "args: Namespace("]))
def test_server_args_parsing_never_raises(text: str, head: str) -> None:
    argv = argv_from_line(head + text)
    assert argv is None or all(isinstance(a, str) for a in argv)


# ---------------------------------------------------------------------------- real runs (the simulated server)


def _on_a_terminal(b: Bringup, *args: str, answer: bytes) -> Result:
    """`bringup ARGS` with a terminal for stdin (a pty) on which `answer` is already typed."""
    main, sub = pty.openpty()
    try:
        os.write(main, answer)
        p = subprocess.run(b.cmd(*args), cwd=b.tmp, env=b.env, stdin=sub, capture_output=True, timeout=60)
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
