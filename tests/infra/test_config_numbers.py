"""Every number of the config and of a sweep plan is taken the one way (issue 47.5, tui/guard/numbers.py): a TOML
number, finite, in range; never `true` (`release_timeout_s = true` was a 1 s timeout), never `"10"` (was 10), never
inf or nan (`duration_s = inf` ran a sweep cell forever). The walk below fails on a new int or float field of any
config or plan model that is not of the guarded types (`Real`, `Whole`: their validator is guard's); the rest load
real files through the real loader."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, BeforeValidator

from tests.helpers.wait import slack
from tui.config import deployments, parts, settings
from tui.guard.numbers import config_real, config_whole
from tui.sweep import plan
from tui.sweep.plan import PlanError, parse_plan

ROOT = Path(__file__).resolve().parents[2]
GUARDS = (config_real, config_whole)
#: fields whose numbers are not the config's but a server flag's value (checked by the flag's spec: finite there)
FLAG_VALUES = {"ConfigEntry.set", "PlanFile.grid"}


def _guarded(meta: Any) -> bool:
    return any(isinstance(m, BeforeValidator) and m.func in GUARDS for m in meta)


def _unguarded(tp: Any, guarded: bool, where: str, seen: set[type]) -> list[str]:
    if typing.get_origin(tp) is Annotated:
        base, *meta = typing.get_args(tp)
        return _unguarded(base, guarded or _guarded(meta), where, seen)
    if tp is bool:
        return []
    if tp in (int, float):
        return [] if guarded else [where]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return models_unguarded(tp, seen)
    return [x for a in typing.get_args(tp) for x in _unguarded(a, guarded, where, seen)]


def models_unguarded(model: type[BaseModel], seen: set[type] | None = None) -> list[str]:
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    out = []
    for name, field in model.model_fields.items():
        where = f"{model.__name__}.{name}"
        if where not in FLAG_VALUES:
            out += _unguarded(field.annotation, _guarded(field.metadata), where, seen)
    return out


def test_every_number_of_the_config_and_the_plan_is_of_a_guarded_type() -> None:
    roots: list[type[BaseModel]] = [settings.Settings, *deployments.MANAGERS.values(), plan.PlanFile]
    seen: set[type] = set()
    found = [x for m in roots for x in models_unguarded(m, seen)]
    assert not found, ("numbers taken from a config or a plan must be tui.config.parts.Real / Whole (or the plan's): "
                       + ", ".join(found))
    assert settings.ProbeConfig in seen and plan.Slo in seen and parts.NodeConfig in seen  # the walk walks


def test_the_walk_finds_a_plain_number() -> None:
    class Loose(BaseModel):
        timeout_s: float | None = None
        ok: parts.Real = 1.0
        flag: bool = False
    assert models_unguarded(Loose) == ["Loose.timeout_s"]


def status(tmp: Path, toml: str, **env: str) -> subprocess.CompletedProcess[str]:
    cfg = tmp / "c.toml"
    cfg.write_text(f'state_dir = "{tmp / "state"}"\n' + toml)
    base = {"HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tui", "flags", "--config", str(cfg), "--json", "x"], cwd=tmp,
                          env=base | env, capture_output=True, text=True, timeout=slack(60))


DEP = '[deployments.x]\nmanager = "none"\nendpoint = "http://127.0.0.1:9"\n'


@pytest.mark.parametrize(("value", "said"), [
    ("true", "deployments.x.release_timeout_s: true is a true/false, not a number"),
    ('"10"', "deployments.x.release_timeout_s: '10' is text, not a number (write it without quotes)"),
    ("inf", "deployments.x.release_timeout_s: inf is not a finite number"),
    ("nan", "deployments.x.release_timeout_s: nan is not a finite number"),
])
def test_a_config_number_that_is_none_is_refused_in_one_line(tmp_path: Path, value: str, said: str) -> None:
    r = status(tmp_path, DEP + f"release_timeout_s = {value}\n")
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert said in r.stdout + r.stderr, (r.stdout, r.stderr)


def test_the_environment_gives_numbers_as_digits_and_still_no_infinity(tmp_path: Path) -> None:
    ok = status(tmp_path, DEP, BRINGUP_DEPLOYMENTS__X__RELEASE_TIMEOUT_S="5", BRINGUP_UI__REFRESH_HZ="4")
    assert ok.returncode in (0, 1), (ok.stdout, ok.stderr)
    bad = status(tmp_path, DEP, BRINGUP_UI__REFRESH_HZ="inf")
    assert bad.returncode == 2 and "BRINGUP_UI__REFRESH_HZ (environment): ui.refresh_hz" in bad.stdout + bad.stderr


@pytest.mark.parametrize(("text", "said"), [
    ("duration_s = inf", "matrix.duration_s: inf is not a finite number"),
    ("duration_s = true", "matrix.duration_s: true is a true/false, not a number"),
    ("requests = 2.5", "matrix.requests: 2.5 is not a whole number"),
    ("[slo]\nttft_ms = inf", "slo.ttft_ms: inf is not a finite number"),
    ("[slo]\ntpot_ms = nan", "slo.tpot_ms: nan is not a finite number"),
])
def test_a_plan_number_that_is_none_is_refused(text: str, said: str) -> None:
    with pytest.raises(PlanError) as e:
        parse_plan('[[configs]]\nname = "a"\n[matrix]\noutput_tokens = [8]\nprompt_tokens = [16]\n'
                   f'concurrency = [1]\n{text}\n', [])
    assert said in str(e.value), str(e.value)
