"""Configuration (tui/config/settings.py): discovery order, validation messages that name file/key/problem, env
overrides, and the always-present `demo` deployment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.wait import slack
from tui.config.demo import DEMO
from tui.config.parts import ConfigError
from tui.config.settings import discover, load

ROOT = Path(__file__).resolve().parents[2]

GOOD = """\
[hosts.ct200]
ssh = "ct200"

[deployments.k26]
host = "ct200"
manager = "systemd"
unit = "sglang-k26-dflash.service"
endpoint = "http://127.0.0.1:30001"
gpus = [0, 1, 2, 3, 4, 5, 6, 7]

[probe]
interval_s = 2.0
"""


def _deployment_toml(name: str) -> str:
    return f'[deployments.{name}]\nmanager = "systemd"\nunit = "{name}.service"\n'


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No config from the developer's machine: empty cwd, HOME and XDG dirs, no BRINGUP_* variables."""
    for k in list(os.environ):
        if k.startswith("BRINGUP_"):
            monkeypatch.delenv(k)
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(work)
    return tmp_path


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as ei:
        load(str(path))
    return str(ei.value)


# ------------------------------------------------------------------------------------------------ happy path


def test_good_config_loads(tmp_path: Path) -> None:
    s = load(str(_write(tmp_path / "c.toml", GOOD)))
    assert set(s.deployments) == {"k26", DEMO}
    d = s.deployments["k26"]
    assert d.manager == "systemd"
    assert d.unit == "sglang-k26-dflash.service"
    assert d.gpus == list(range(8))
    assert s.probe.interval_s == 2.0
    assert s.probe.timeout_s == 5.0  # default kept
    assert s.host("ct200").ssh == "ct200"
    assert s.deployment(None)[0] == "k26", "the only real deployment is the default"


def test_demo_exists_with_no_config() -> None:
    assert discover(None) is None
    s = load(None)
    assert list(s.deployments) == [DEMO]
    name, dep = s.deployment(None)
    assert name == DEMO
    assert dep.manager == "process"
    assert dep.command


# ------------------------------------------------------------------------------------------------ errors


def test_broken_toml_names_the_file(tmp_path: Path) -> None:
    p = _write(tmp_path / "broken.toml", "[deployments.k26\nhost = 1\n")
    msg = _error(p)
    assert str(p) in msg
    assert "TOML" in msg
    assert "line 1" in msg


def test_unknown_key(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", _deployment_toml("k26") + "colour = 'red'\n")
    msg = _error(p)
    assert str(p) in msg
    assert "deployments.k26.colour" in msg
    assert "unknown key" in msg


def test_unknown_top_level_key(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", "refresh = 3\n")
    msg = _error(p)
    assert "refresh" in msg
    assert "unknown key" in msg


@pytest.mark.parametrize(("toml", "key"), [
    ("[probe]\ninterval_s = 'fast'\n", "probe.interval_s"),
    (_deployment_toml("k26") + "gpus = 'half'\n", "deployments.k26.gpus"),  # "all" is the one word
    ("[ui]\nrefresh_hz = 0\n", "ui.refresh_hz"),
    ("read_only = 'sometimes'\n", "read_only"),
])
def test_wrong_type(tmp_path: Path, toml: str, key: str) -> None:
    p = _write(tmp_path / "c.toml", toml)
    msg = _error(p)
    assert str(p) in msg
    assert key in msg


def test_gpus_all_means_every_gpu_as_the_docs_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration reference (docs/configuration.md) gives "all" as `gpus`' default: written out, it is
    accepted, and means what no list means (every GPU on the host), from the file and from the environment alike."""
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    row = next(ln for ln in doc.splitlines() if "`gpus`" in ln and "`endpoint`" in ln and ln.startswith("|"))
    assert row.rstrip(" |").split("|")[-2].strip().endswith("all"), row  # the default column says "all"
    for word in ("all", "ALL", " all "):
        s = load(str(_write(tmp_path / "c.toml", _deployment_toml("k26") + f"gpus = {word!r}\n")))
        assert s.deployments["k26"].gpus == [], word
    assert load(str(_write(tmp_path / "d.toml", _deployment_toml("k26")))).deployments["k26"].gpus == []
    p = _write(tmp_path / "e.toml", GOOD)  # gpus = [0..7] in the file
    for env, want in (("all", []), ("[0, 1]", [0, 1]), ("2,3", [2, 3])):
        monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K26__GPUS", env)
        assert load(str(p)).deployments["k26"].gpus == want, env
    monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K26__GPUS", "some")
    with pytest.raises(ConfigError, match=r'BRINGUP_DEPLOYMENTS__K26__GPUS \(environment\): deployments\.k26\.gpus: '
                                          r'a list of GPU indices such as \[0, 1, 2, 3\], or "all"'):
        load(str(p))


def test_an_environment_value_that_is_not_json_is_a_config_error(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K26__ENV", "not-a-table")
    with pytest.raises(ConfigError, match=r"^environment: "):
        load(str(_write(tmp_path / "c.toml", GOOD)))


def test_one_line_per_problem(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", "[probe]\ninterval_s = 'fast'\ntimeout_s = -1\nnope = 1\n")
    lines = _error(p).splitlines()
    assert len(lines) == 3
    assert all(line.startswith(str(p)) for line in lines)


def test_systemd_without_unit(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", '[deployments.k26]\nmanager = "systemd"\n')
    msg = _error(p)
    assert "deployments.k26" in msg
    assert "unit" in msg


def test_process_without_command(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", '[deployments.k26]\nmanager = "process"\n')
    assert "command" in _error(p)


def test_unknown_preset(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", _deployment_toml("k26") + 'preset = "tensorrt"\n')
    msg = _error(p)
    assert "deployments.k26.preset" in msg
    assert "tensorrt" in msg
    assert "sglang" in msg and "vllm" in msg


def test_unknown_host(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", _deployment_toml("k26") + 'host = "ct201"\n')
    msg = _error(p)
    assert str(p) in msg
    assert "deployments.k26.host" in msg
    assert "ct201" in msg


def test_bad_endpoint(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", _deployment_toml("k26") + 'endpoint = "127.0.0.1:30000"\n')
    assert "deployments.k26.endpoint" in _error(p)


def test_missing_explicit_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.toml"):
        load(str(tmp_path / "nope.toml"))


def test_missing_env_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_CONFIG", str(tmp_path / "gone.toml"))
    with pytest.raises(ConfigError, match=r"gone\.toml.*BRINGUP_CONFIG"):
        load(None)


def test_unknown_deployment_lists_configured_ones(tmp_path: Path) -> None:
    s = load(str(_write(tmp_path / "c.toml", _deployment_toml("k26") + _deployment_toml("qwen3"))))
    with pytest.raises(ConfigError) as ei:
        s.deployment("llama")
    msg = str(ei.value)
    assert "llama" in msg
    for name in ("k26", "qwen3", DEMO):
        assert name in msg
    with pytest.raises(ConfigError, match="k26"):
        s.deployment(None)  # two real deployments: the user must name one


def test_typo_in_a_deployment_name_suggests_the_close_one(tmp_path: Path) -> None:
    s = load(str(_write(tmp_path / "c.toml", _deployment_toml("k26") + _deployment_toml("qwen3"))))
    with pytest.raises(ConfigError) as ei:
        s.deployment("k62")
    msg = str(ei.value)
    assert msg == f"unknown deployment 'k62' (did you mean 'k26'?); configured: k26, qwen3, {DEMO}"
    assert "no config file found" not in msg


def test_unknown_deployment_without_a_config_file_says_where_bringup_looked(isolated: Path) -> None:
    s = load(None)
    with pytest.raises(ConfigError) as ei:
        s.deployment("k26")
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"unknown deployment 'k26'; configured: {DEMO}; no config file found (looked at ")
    xdg = isolated / "xdg" / "bringup" / "config.toml"
    for where in ("--config", "$BRINGUP_CONFIG", "./config.toml", str(xdg)):
        assert where in msg, msg


@pytest.mark.parametrize("ssh", ["root@10.1.2.200", "gpu-box:2222", "root@gpu-box:2222"])
def test_ssh_with_a_user_or_port_points_to_the_ssh_config_file(tmp_path: Path, ssh: str) -> None:
    msg = _error(_write(tmp_path / "c.toml", f'[hosts.gpu]\nssh = "{ssh}"\n'))
    assert "\n" not in msg and "hosts.gpu.ssh" in msg and repr(ssh) in msg
    assert "Port" in msg and "~/.ssh/config" in msg and "ssh_config" in msg


def test_ssh_host_names_and_ipv6_addresses_are_accepted(tmp_path: Path) -> None:
    s = load(str(_write(tmp_path / "c.toml", '[hosts.a]\nssh = "gpu-box"\n[hosts.b]\nssh = "fe80::1"\n')))
    assert s.host("a").ssh == "gpu-box" and s.host("b").ssh == "fe80::1"


def test_unknown_host_lookup() -> None:
    s = load(None)
    assert s.host("local").is_local
    with pytest.raises(ConfigError, match="nowhere"):
        s.host("nowhere")


# ------------------------------------------------------------------------------------------------ discovery


def test_discovery_order(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = _write(isolated / "a" / "explicit.toml", _deployment_toml("from_flag"))
    env = _write(isolated / "b" / "env.toml", _deployment_toml("from_env"))
    cwd = _write(Path.cwd() / "config.toml", _deployment_toml("from_cwd"))
    xdg = _write(isolated / "xdg" / "bringup" / "config.toml", _deployment_toml("from_xdg"))
    monkeypatch.setenv("BRINGUP_CONFIG", str(env))

    assert discover(str(explicit)) == explicit
    assert "from_flag" in load(str(explicit)).deployments

    assert discover(None) == env
    assert set(load(None).deployments) == {"from_env", DEMO}

    monkeypatch.delenv("BRINGUP_CONFIG")
    assert discover(None) is not None and discover(None).resolve() == cwd.resolve()  # type: ignore[union-attr]
    assert set(load(None).deployments) == {"from_cwd", DEMO}

    cwd.unlink()
    assert discover(None) == xdg
    assert set(load(None).deployments) == {"from_xdg", DEMO}

    # without $XDG_CONFIG_HOME: ~/.config
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert discover(None) is None
    home_cfg = _write(Path(os.environ["HOME"]) / ".config" / "bringup" / "config.toml", _deployment_toml("from_home"))
    assert discover(None) == home_cfg
    assert set(load(None).deployments) == {"from_home", DEMO}


# ------------------------------------------------------------------------------------------------ environment


def test_env_override_deep_merges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path / "c.toml", GOOD)
    monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K26__ENDPOINT", "http://127.0.0.1:40000")
    monkeypatch.setenv("BRINGUP_PROBE__TIMEOUT_S", "9")
    monkeypatch.setenv("BRINGUP_UI__REFRESH_HZ", "4")
    s = load(str(p))
    d = s.deployments["k26"]
    assert d.endpoint == "http://127.0.0.1:40000"
    # the rest of the deployment and of [probe] still comes from the file
    assert d.unit == "sglang-k26-dflash.service"
    assert d.host == "ct200"
    assert d.gpus == list(range(8))
    assert s.probe.timeout_s == 9.0
    assert s.probe.interval_s == 2.0
    assert s.ui.refresh_hz == 4.0


def test_env_override_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRINGUP_PROBE__TIMEOUT_S", "soon")
    with pytest.raises(ConfigError, match=r"probe\.timeout_s"):
        load(str(_write(tmp_path / "c.toml", GOOD)))


def test_a_problem_from_the_environment_names_the_variable_not_the_file(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = _write(tmp_path / "c.toml", GOOD)
    monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K27__ENDPOINT", "http://127.0.0.1:40000")  # k27: not in the file
    with pytest.raises(ConfigError) as e:
        load(str(p))
    assert str(e.value).startswith(f"BRINGUP_DEPLOYMENTS__K27__ENDPOINT (environment): deployments.k27: no "
                                   f"deployment 'k27' in {p} (a typo in the name?"), e.value
    monkeypatch.delenv("BRINGUP_DEPLOYMENTS__K27__ENDPOINT")
    monkeypatch.setenv("BRINGUP_DEPLOYMENTS__K26__ENDPOINTT", "http://127.0.0.1:40000")
    with pytest.raises(ConfigError) as e:
        load(str(p))
    assert str(e.value) == ("BRINGUP_DEPLOYMENTS__K26__ENDPOINTT (environment): deployments.k26.endpointt: "
                            "unknown key (did you mean 'endpoint'?)"), e.value


def test_an_unknown_key_suggests_the_close_one_of_its_section(tmp_path: Path) -> None:
    assert "unknown key (did you mean 'endpoint'?)" in _error(
        _write(tmp_path / "a.toml", _deployment_toml("k26") + "endpont = 'http://127.0.0.1:1'\n"))
    assert "unknown key (did you mean 'timeout_s'?)" in _error(_write(tmp_path / "b.toml", "[probe]\ntimeout = 3\n"))
    assert "did you mean" not in _error(_write(tmp_path / "c.toml", "colour = 'red'\n"))


def test_read_only_from_cli_overrides_file(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml", "read_only = false\n")
    assert load(str(p), read_only=True).read_only is True
    assert load(str(p)).read_only is False


# ------------------------------------------------------------------------------------------------ CLI


def _cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRINGUP_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "tui", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=slack(60))


def test_cli_broken_config_after_subcommand_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = _write(tmp_path / "BAD.toml", "[deployments.k26\n")
    p = _cli(Path.cwd(), "status", "--config", str(bad))
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert str(bad) in err[0]
    assert "Traceback" not in p.stderr


def test_cli_broken_config_before_subcommand_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = _write(tmp_path / "BAD.toml", "[deployments.k26\n")
    p = _cli(Path.cwd(), "--config", str(bad), "status")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert str(bad) in err[0]
    assert "Traceback" not in p.stderr


def test_a_command_written_as_a_shell_string_is_refused_with_the_list_it_should_be(tmp_path: Path) -> None:
    p = _write(tmp_path / "c.toml",
               '[deployments.x]\nmanager = "process"\ncommand = "python3 -m sglang.launch_server"\n')
    msg = _error(p)
    assert "deployments.x.command" in msg and "not a shell string" in msg
    assert '["python3", "-m", "sglang.launch_server", ...]' in msg


def test_the_demo_stalls_at_its_time_scale(tmp_path: Path) -> None:
    """`bringup demo --time-scale 0.1 --scenario hang-loading` says STALLED after a simulated minute (6 s), not after
    a real one; a deployment without its own threshold keeps `probe.stall_after_s`."""
    from tests.helpers.simdeploy import write_config
    from tui.engine import Engine

    fast = load(str(write_config(tmp_path / "a")), time_scale=0.1)
    normal = load(str(write_config(tmp_path / "b")))
    assert fast.deployments[DEMO].stall_after_s == pytest.approx(6.0)
    assert normal.deployments[DEMO].stall_after_s is None
    assert Engine(fast, DEMO, fast.deployments[DEMO]).state.session.stall_after == pytest.approx(6.0)
    assert Engine(normal, DEMO, normal.deployments[DEMO]).state.session.stall_after == normal.probe.stall_after_s
