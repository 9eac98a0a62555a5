"""Secrets' values never leave bringup (issue 29.4): `--api-key`, `--hf-token` and the like become `***` in the
exporter's `bringup_info{flags}`, `status --json`, the lock's record, a sweep's results and the console's command
line, in both the `--flag value` and the `--flag=value` forms; the rule is checked against every flag name the
covered releases' facts list."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from tui.cli.report import render_status, snapshot_dict
from tui.exporter.collector import flags_label
from tui.lifecycle.flags import diff
from tui.lifecycle.presets.registry import PRESETS
from tui.lifecycle.secrets import REDACTED, is_secret, redact_argv, redact_flags, redact_text, unredact_argv
from tui.managers.file_lock import FileLock
from tui.managers.lock_record import lock_info_from
from tui.model import Phase, Snapshot, UnitState
from tui.sweep.recorder import Recorder
from tui.sweep.results import ConfigRecord, SweepMeta, read_results
from widgets.lifecycle import _server_flags

SECRET = "sk-live-4f9a2c"
HF = "hf_Zq81secret"
ARGV = ("python3", "-m", "sglang.launch_server", "--model-path", "m", "--api-key", SECRET,
        f"--admin-api-key={SECRET}", "--hf-token", HF, "--max-total-tokens", "4096", "--allow-credentials",
        "--tp-size", "8")
FACTS = Path(__file__).resolve().parents[2] / "tui" / "lifecycle" / "presets" / "facts"


def _fact_flags() -> set[str]:
    """Every option name the committed release facts list (`--api-key`, `--max-total-tokens`, ...)."""
    names: set[str] = set()

    def walk(o: object) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                walk(k)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, str) and re.fullmatch(r"--[a-z0-9][a-z0-9-]*", o):
            names.add(o)
    for f in FACTS.glob("*.json"):
        walk(json.loads(f.read_text()))
    return names


def assert_clean(text: str) -> None:
    assert SECRET not in text and HF not in text, text


def test_the_rule_picks_exactly_the_real_secret_flags_of_every_covered_release() -> None:
    names = _fact_flags()
    assert len(names) > 500  # the facts were read
    assert {n for n in names if is_secret(n)} == {"--api-key", "--admin-api-key", "--hf-token",
                                                  "--ssl-keyfile-password"}
    # the words alone would catch these; none holds a secret
    for name in ("--max-total-tokens", "--tokenizer", "--ssl-keyfile", "--allow-credentials",
                 "--kt-max-deferred-experts-per-token", "--bucket-time-to-first-token", "--speculative-token-map"):
        assert not is_secret(name), name
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "api_key", "--password", "OPENAI_API_KEY", "--auth"):
        assert is_secret(name), name


def test_both_forms_and_environment_entries_are_redacted_and_still_visible() -> None:
    out = redact_argv([*ARGV, "-e", f"HF_TOKEN={HF}", "--hf-token=", "--api-key", "--port", "80"])
    assert_clean(" ".join(out))
    assert out[out.index("--api-key") + 1] == REDACTED
    assert f"--admin-api-key={REDACTED}" in out and f"HF_TOKEN={REDACTED}" in out
    assert out[out.index("--max-total-tokens") + 1] == "4096" and "--allow-credentials" in out
    assert out[-3:] == ["--api-key", "--port", "80"]  # a secret flag with no value takes no other option
    assert redact_flags({"api-key": SECRET, "tp-size": "8", "hf-token": None}) == {
        "api-key": REDACTED, "tp-size": "8", "hf-token": None}


def test_text_forms_a_change_and_a_servers_own_words() -> None:
    text = redact_text(f"~ --api-key {SECRET} -> {HF}; server_args=ServerArgs(api_key='{SECRET}', admin_api_key=None)"
                       f" non-default args: {{'hf_token': '{HF}'}} HF_TOKEN={HF}")
    assert_clean(text)
    assert "admin_api_key=None" in text and "~ --api-key *** -> ***" in text


def test_a_resumed_sweep_takes_its_secrets_back_from_the_running_server() -> None:
    recorded = redact_argv(ARGV)
    assert unredact_argv(recorded, ARGV) == list(ARGV)
    with pytest.raises(ValueError, match="--api-key"):
        unredact_argv(recorded, [a for a in ARGV if a not in ("--api-key", SECRET)])


def test_exporter_flags_label() -> None:
    label = flags_label(UnitState("active", argv=ARGV))
    assert_clean(label)
    assert f"--api-key '{REDACTED}'" in label and "--max-total-tokens 4096" in label


def test_status_json_and_text() -> None:
    snap = Snapshot("d", "h", Phase.READY, "inv", (), None, None, None, None, None, flags=ARGV)
    d = snapshot_dict(snap, {"api-key": SECRET, "tp-size": "8"}, 0.0)
    assert_clean(json.dumps(d))
    assert_clean(render_status(d))
    assert d["flags"]["api-key"] == REDACTED and REDACTED in d["argv"]


def test_console_command_line() -> None:
    shown = _server_flags(ARGV)
    assert_clean(shown)
    assert "--api-key ***" in shown


def test_no_offered_flag_is_a_secret() -> None:
    """The flags listing (`bringup flags`, the console's dialog), `restart --set` and the restart confirmation's
    diff show only the presets' flags: none is a secret, so a change to a secret shows as another argument."""
    for p in PRESETS.values():
        assert not [s.name for s in p.flags if is_secret(s.name)], p.name
        changed = diff(list(ARGV), [a if a != SECRET else "sk-new" for a in ARGV], p.flags)
        assert_clean("; ".join(changed))


def test_the_lock_record_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "d.lock"

    async def take() -> None:
        async with FileLock(str(path), "restart d", f"+ --api-key {SECRET}; ~ --hf-token a -> {HF}") as info:
            assert_clean(info.change)
            raw = path.read_bytes().decode()
            assert_clean(raw)
            holder = lock_info_from(raw)
            assert holder is not None and "--api-key ***" in holder.change
    asyncio.run(take())


def test_sweep_results_hold_no_secret(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "sweep")
    rec.write_meta(SweepMeta("d", "h", 0.0, ARGV, ("a",), ("c",), "running", 1))
    rec.append(ConfigRecord("a", {"api-key": SECRET, "tp-size": "4"}, ARGV, "inv", "failed", 1, None, {}, None,
                            0.0).to_json())
    rec.write_log("a", [f"# argv: {' '.join(ARGV)}", f"server_args=ServerArgs(api_key='{SECRET}')"])
    rec.close()
    for f in (tmp_path / "sweep").rglob("*"):
        if f.is_file():
            assert_clean(f.read_text())
    assert rec.meta is not None and SECRET in rec.meta.original_argv  # the runner keeps the real one in memory
    res = read_results(tmp_path / "sweep")
    assert res.meta is not None and REDACTED in res.meta.original_argv
    assert res.configs[0].flags["tp-size"] == "4"
