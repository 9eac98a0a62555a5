"""Input at the edges of the configuration (tui/config/): the shipped ./config.toml sets nothing and never shadows
the user's own file; every message about what is configured names the file in use, as an absolute path; every
BRINGUP_* variable bringup reads and every number of the config models is checked, and a bad one is one line naming
the variable or the key, exit 2, no traceback (`--version` works whatever they say). Also the edges of `--set` and of
`exporter --listen`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel

from tests.helpers.ports import free_port
from tests.helpers.wait import slack
from tui.config.demo import DEMO
from tui.config.deployments import MANAGERS, DeploymentConfig
from tui.config.parts import ConfigError, FlagConfig, HostConfig, NodeConfig
from tui.config.settings import ProbeConfig, Settings, UIConfig, discover, load
from tui.lifecycle.flags import parse_changes, unknown_flag
from tui.lifecycle.presets import FlagValueError, get_preset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No config from the developer's machine: empty cwd, HOME and XDG dirs, no BRINGUP_* variables."""
    for k in list(os.environ):
        if k.startswith("BRINGUP_"):
            monkeypatch.delenv(k)
    for d in ("home", "work"):
        (tmp_path / d).mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _dep(name: str) -> str:
    return f'[deployments.{name}]\nmanager = "none"\nendpoint = "http://127.0.0.1:9"\n'


def bringup(tmp: Path, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
    """`python -m tui ...` as a user runs it: a home, config and state of its own, only the variables given."""
    base = {"HOME": str(tmp / "home"), "XDG_CONFIG_HOME": str(tmp / "xdg"), "XDG_STATE_HOME": str(tmp / "state"),
            "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "BRINGUP_DEMO_PORT": str(free_port())}
    return subprocess.run([sys.executable, "-m", "tui", *args], capture_output=True, text=True, timeout=slack(60),
                          cwd=cwd or tmp / "work", env={**base, **(env or {})})


def one_line(r: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


# ------------------------------------------------------------------------------------ the shipped config.toml


def test_the_shipped_config_toml_sets_nothing() -> None:
    """The checkout's config.toml is an example: every key commented out, so that it parses to an empty table."""
    assert tomllib.loads((ROOT / "config.toml").read_text(encoding="utf-8")) == {}


def test_a_config_toml_that_sets_nothing_is_passed_over_for_the_users_own(isolated: Path) -> None:
    example = _write(Path.cwd() / "config.toml", "# read_only = false\n\n# [probe]\n# interval_s = 1.0\n")
    xdg = _write(isolated / "xdg" / "bringup" / "config.toml", _dep("mine"))
    assert discover(None) == xdg
    s = load(None)
    assert set(s.deployments) == {"mine", DEMO}
    assert s.config_source() == (f"config: {xdg.resolve()} ({example.resolve()} passed over: it sets nothing, "
                                 "only comments)")
    # a ./config.toml that sets anything is used, as before, even when it has no deployment
    _write(example, "[probe]\ninterval_s = 2.0\n")
    assert discover(None) == Path("config.toml")
    s = load(None)
    assert set(s.deployments) == {DEMO} and s.config_source() == f"config: {example.resolve()}"
    # and a broken one is used, so that its problem is said, with the file's absolute path
    _write(example, "[probe\n")
    with pytest.raises(ConfigError) as ei:
        load(None)
    assert str(ei.value).startswith(f"{example.resolve()}: not valid TOML")


def test_a_named_file_that_sets_nothing_is_used() -> None:
    """--config (or $BRINGUP_CONFIG) is the user's word: used even when it sets nothing."""
    empty = _write(Path.cwd() / "empty.toml", "# nothing\n")
    _write(Path(os.environ["XDG_CONFIG_HOME"]) / "bringup" / "config.toml", _dep("mine"))
    s = load("empty.toml")
    assert set(s.deployments) == {DEMO} and s.config_file == Path("empty.toml")
    assert s.config_source() == f"config: {empty.resolve()}"


def test_nothing_configured_says_which_file_was_passed_over(isolated: Path) -> None:
    example = _write(Path.cwd() / "config.toml", "# [deployments.k26]\n")
    with pytest.raises(ConfigError) as ei:
        load(None).deployment("k26")
    msg = str(ei.value)
    xdg = isolated / "xdg" / "bringup" / "config.toml"
    assert msg == (f"unknown deployment 'k26'; configured: {DEMO}; no config file found (looked at --config, "
                   f"$BRINGUP_CONFIG, ./config.toml, {xdg}; {example.resolve()} passed over: it sets nothing, "
                   "only comments)")


def test_an_unknown_deployment_names_the_file_found(isolated: Path) -> None:
    """A file found by searching may not be the one the user edited: an unknown deployment names it, absolute."""
    cfg = _write(Path.cwd() / "config.toml", _dep("k26"))
    with pytest.raises(ConfigError) as ei:
        load(None).deployment("qwen")
    assert str(ei.value) == f"unknown deployment 'qwen'; configured: k26, {DEMO}; config: {cfg.resolve()}"


def test_the_checkout_does_not_hide_the_users_config(isolated: Path) -> None:
    """The issue as a user met it: ~/.config/bringup/config.toml written, bringup run from the checkout."""
    _write(isolated / "xdg" / "bringup" / "config.toml", _dep("mine"))
    r = bringup(isolated, "status", "nope", cwd=ROOT)
    line = one_line(r)
    assert "configured: mine, demo" in line, line
    assert f"{ROOT / 'config.toml'} passed over: it sets nothing" in line, line


def test_config_errors_name_the_file_as_an_absolute_path(isolated: Path) -> None:
    cfg = _write(Path.cwd() / "sub" / "c.toml", '[probe]\ninterval_s = "fast"\n')
    r = bringup(isolated, "--config", "sub/c.toml", "status")
    assert one_line(r).startswith(f"bringup: {cfg.resolve()}: probe.interval_s: "), r.stderr
    r = bringup(isolated, "--config", "sub/none.toml", "status")
    assert one_line(r) == f"bringup: {cfg.parent.resolve() / 'none.toml'}: config file not found (from --config)"


def test_exporter_with_nothing_configured_names_the_file(isolated: Path) -> None:
    r = bringup(isolated, "exporter")
    line = one_line(r)
    assert line.startswith("bringup: no deployments configured (the built-in demo aside): "), line
    assert "no config file found (looked at --config" in line, line
    cfg = _write(isolated / "work" / "config.toml", "[probe]\ninterval_s = 2.0\n")
    line = one_line(bringup(isolated, "exporter"))
    assert line.endswith(f"; config: {cfg.resolve()}"), line


# ------------------------------------------------------------------------------------ environment variables


@pytest.mark.parametrize(("value", "words"), [
    ("abc", "'abc' is not a port number (1-65535)"),
    ("99999", "99999 is out of range: a port is 1-65535"),
    ("0", "0 is out of range: a port is 1-65535"),
    ("-5", "-5 is out of range: a port is 1-65535"),
])
def test_bringup_demo_port_that_is_no_port_is_one_line(isolated: Path, value: str, words: str) -> None:
    for args in (("status",), ("flags", "demo"), ("demo", "--headless")):
        r = bringup(isolated, *args, env={"BRINGUP_DEMO_PORT": value})
        assert one_line(r) == f"bringup: BRINGUP_DEMO_PORT (environment): {words}", args


def test_version_works_with_a_broken_variable(isolated: Path) -> None:
    r = bringup(isolated, "--version", env={"BRINGUP_DEMO_PORT": "abc"})
    assert r.returncode == 0 and r.stdout.startswith("bringup "), r
    assert "Traceback" not in r.stderr
    r = bringup(isolated, "--help", env={"BRINGUP_DEMO_PORT": "abc"})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r


@pytest.mark.parametrize(("var", "value", "words"), [
    ("BRINGUP_PROBE__INTERVAL_S", "abc", "probe.interval_s: 'abc' is not a number (plain digits"),
    ("BRINGUP_PROBE__INTERVAL_S", "inf", "probe.interval_s: 'inf' is not a number (plain digits"),
    ("BRINGUP_PROBE__TIMEOUT_S", "-1", "probe.timeout_s: Input should be greater than 0"),
    ("BRINGUP_UI__REFRESH_HZ", "0", "ui.refresh_hz: Input should be greater than 0"),
    ("BRINGUP_READ_ONLY", "maybe", "read_only: Input should be a valid boolean"),
])
def test_a_settings_variable_that_does_not_fit_is_one_line_naming_it(isolated: Path, var: str, value: str,
                                                                       words: str) -> None:
    line = one_line(bringup(isolated, "status", env={var: value}))
    assert line.startswith(f"bringup: {var} (environment): {words}"), line


@pytest.mark.parametrize("var", ["BRINGUP_PROBE", "BRINGUP_DEPLOYMENTS__K26__ENV"])
def test_a_variable_that_is_not_json_is_named(isolated: Path, var: str) -> None:
    """pydantic-settings names only the top-level key: the line names the variable that holds the bad value."""
    line = one_line(bringup(isolated, "status", env={var: "not-json"}))
    assert line.startswith(f"bringup: environment: {var}: not the JSON its key needs (a table such as "), line


# ------------------------------------------------------------------------------------ numbers in the file


def _numeric(annotation: Any) -> bool:
    """Whether a field's type holds a number (int or float, directly, optional, or as a list's items)."""
    if annotation in (int, float):
        return True
    return any(_numeric(a) for a in typing.get_args(annotation) if a is not types.NoneType)


def _bounds(model: type[BaseModel], name: str) -> list[Any]:
    """The bounds on a field: its own metadata, and its items' (list[Annotated[int, Field(ge=0)]])."""
    field = model.model_fields[name]
    found = [m for m in field.metadata if isinstance(m, annotated_types.Gt | annotated_types.Ge)]

    def walk(ann: Any) -> None:
        for a in typing.get_args(ann):
            found.extend(m for m in getattr(a, "__metadata__", ()) for m in getattr(m, "metadata", [m])
                         if isinstance(m, annotated_types.Gt | annotated_types.Ge))
            walk(a)
    walk(field.annotation)
    return found


MODELS: list[type[BaseModel]] = [HostConfig, FlagConfig, NodeConfig, DeploymentConfig, *MANAGERS.values(),
                                 ProbeConfig, UIConfig, Settings]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_every_number_of_the_config_is_bounded(model: type[BaseModel]) -> None:
    """Every numeric field of every model has a lower bound: a new one cannot slip in unchecked."""
    for name, field in model.model_fields.items():
        if _numeric(field.annotation):
            assert _bounds(model, name), f"{model.__name__}.{name} takes any number"


#: (key path in the file, TOML text putting a bad value there)
BAD = {
    "deployments.k.stop_timeout_s": "-10", "deployments.k.ready_timeout_s": "0",
    "deployments.k.release_timeout_s": "-1", "deployments.k.release_tolerance_mib": "-1",
    "deployments.k.unverified_release_grace_s": "-1", "deployments.k.stall_after_s": "0",
    "deployments.k.gpus.1": None, "probe.interval_s": "0", "probe.timeout_s": "-1", "probe.stall_after_s": "0",
    "probe.ready_interval_s": "-30", "probe.generation_tokens": "0", "ui.refresh_hz": "0",
}


@pytest.mark.parametrize("key", BAD)
def test_a_number_out_of_its_range_in_the_file_is_refused_naming_the_key(isolated: Path, key: str) -> None:
    section, _, rest = key.partition(".")
    if key == "deployments.k.gpus.1":
        text = _dep("k") + "gpus = [0, -1]\n"
    elif section == "deployments":
        text = _dep("k") + f"{rest.split('.')[-1]} = {BAD[key]}\n"
    else:
        text = f"[{section}]\n{rest} = {BAD[key]}\n"
    cfg = _write(isolated / "c.toml", text)
    with pytest.raises(ConfigError) as ei:
        load(str(cfg))
    msg = str(ei.value)
    assert msg.startswith(f"{cfg}: {key}: Input should be greater than"), msg
    assert "\n" not in msg


@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_timeout_must_be_finite(isolated: Path, value: str) -> None:
    cfg = _write(isolated / "c.toml", _dep("k") + f"stop_timeout_s = {value}\n")
    with pytest.raises(ConfigError, match=rf"deployments\.k\.stop_timeout_s: {value} is not a finite number$"):
        load(str(cfg))


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:99999", "http://127.0.0.1:0", "http://127.0.0.1:abc"])
def test_an_endpoint_port_out_of_range_is_refused(isolated: Path, endpoint: str) -> None:
    cfg = _write(isolated / "c.toml", f'[deployments.k]\nmanager = "none"\nendpoint = "{endpoint}"\n')
    with pytest.raises(ConfigError) as ei:
        load(str(cfg))
    assert str(ei.value) == f"{cfg}: deployments.k.endpoint: endpoint {endpoint!r}: its port must be a number 1-65535"


def test_a_negative_timeout_in_the_file_is_one_line_and_exit_2(isolated: Path) -> None:
    """The issue's case: `stop` with stop_timeout_s = -10 SIGKILLed at once ("did not stop within -10 s")."""
    cfg = _write(isolated / "c.toml", '[deployments.k]\nmanager = "process"\ncommand = ["sleep", "60"]\n'
                                      "stop_timeout_s = -10\n")
    line = one_line(bringup(isolated, "--config", str(cfg), "stop", "k", "--yes"))
    assert line == f"bringup: {cfg}: deployments.k.stop_timeout_s: Input should be greater than 0"


# ------------------------------------------------------------------------------------ --set and --listen


@pytest.mark.parametrize("item", ["", "===", "=4", "--"])
def test_set_without_a_name_says_what_set_takes(item: str) -> None:
    specs = get_preset("sglang").flags
    with pytest.raises(FlagValueError) as ei:
        parse_changes([item], [], specs)
    assert str(ei.value) == f"--set needs NAME or NAME=VALUE, not {item!r}"
    with pytest.raises(FlagValueError, match=r"^--unset needs NAME, not ''$"):
        parse_changes([], [""], specs)
    assert unknown_flag("", ["tp-size"]).startswith("--set needs NAME or NAME=VALUE")


@pytest.mark.parametrize("item", ["", "==="])
def test_restart_set_without_a_name_is_one_line(isolated: Path, item: str) -> None:
    line = one_line(bringup(isolated, "restart", "demo", "--set", item, "--yes"))
    assert line.startswith("bringup: --set needs NAME or NAME=VALUE"), line


def test_exporter_on_an_address_in_use_is_a_usage_error(isolated: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = bringup(isolated, "exporter", "demo", "--listen", f"127.0.0.1:{port}")
    line = one_line(r)
    assert line.startswith(f"bringup: --listen 127.0.0.1:{port}: cannot listen there: "), line
    assert "in use" in line, line


def test_an_out_of_range_flag_value_is_echoed_as_given() -> None:
    """`--set tp-size=99999999999999999999` said `got 1e+20`: the value is said as it was typed."""
    from tui.lifecycle.flags import FlagValueError, parse_changes
    from tui.lifecycle.presets.registry import PRESETS

    specs = [f for f in PRESETS["sglang"].flags if f.kind == "int" and f.maximum is not None]
    assert specs, "no bounded integer flag in the SGLang preset"
    big = "9" * 20
    with pytest.raises(FlagValueError) as e:
        parse_changes([f"{specs[0].name}={big}"], [], specs)
    assert big in str(e.value) and "e+" not in str(e.value), e.value
