"""Rewriting a real unit's ExecStart= on the systemd test host: after bringup sets one flag, the process systemd
starts gets every other word exactly as before (variables from Environment=, specifiers of a template instance,
the `-`, `@`, `:`, `+` prefixes, quoted words with spaces, `\\x20`, `%%`, `$$`, a line continuation), and going back
to the unit's own flags runs the unit exactly as written again. What bringup cannot rewrite exactly is refused,
naming it, with nothing written.

The units are the tests' own (`bx-*.service`, a python3 that sleeps: tests/helpers/testhost.py), so that the
process's argv in /proc is the truth, read after systemd's own parsing, specifier filling and variable expansion.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.helpers.config_toml import ConfigFile
from tests.helpers.testhost import BX_UNIT_NAMES as UNIT_NAMES
from tests.helpers.testhost import bringup, texec
from tui.config.deployments import SystemdDeployment
from tui.config.parts import FlagConfig, HostConfig
from tui.managers import ManagerError, PermanentManagerError
from tui.managers.systemd import SystemdManager
from tui.transport.ssh import SshTransport

pytestmark = pytest.mark.slow

def argv_of(unit: str) -> list[str]:
    """The argv of the unit's running process, as the kernel has it."""
    pid = texec("systemctl", "show", "-p", "MainPID", "--value", unit).strip()
    assert pid not in ("", "0"), f"{unit} is not running: {texec('systemctl', 'status', unit, '--no-pager')}"
    return texec("cat", f"/proc/{pid}/cmdline").split("\0")[:-1]


def restart(unit: str) -> list[str]:
    texec("systemctl", "restart", unit)
    return argv_of(unit)


@pytest.fixture
async def transport(ssh_config: Path) -> AsyncIterator[SshTransport]:
    t = SshTransport("testhost", config=[str(ssh_config)])
    yield t
    await t.close()


@pytest.mark.parametrize("unit", UNIT_NAMES)
async def test_a_flag_set_keeps_every_other_word_and_going_back_restores_the_unit_exactly(
        bx_units: None, transport: SshTransport, unit: str) -> None:
    texec("systemctl", "start", unit)
    before = await asyncio.to_thread(argv_of, unit)
    cat_before = texec("systemctl", "cat", unit)
    mgr = SystemdManager(transport, unit)
    flags = await mgr.read_argv()

    await mgr.write_argv([*flags, "--bx-flag", "7"])
    after = await asyncio.to_thread(restart, unit)
    assert after == [*before, "--bx-flag", "7"]  # every other word as systemd passed it before
    assert await mgr.read_argv() == [*flags, "--bx-flag", "7"]

    await mgr.write_argv(flags)  # a rollback to the unit's own flags
    assert await asyncio.to_thread(restart, unit) == before
    assert texec("systemctl", "cat", unit) == cat_before  # the unit as written, no drop-in of bringup's
    assert texec("ls", "-A", f"/etc/systemd/system/{unit}.d").split() == ["50-bringup.conf.previous",
                                                                         "bringup-previous.json"]


async def test_what_the_unit_runs_for_those_words_is_what_its_author_meant(bx_units: None) -> None:
    """The old rewrite (shlex, everything re-quoted) ran `${MODEL}` and `%N` as literal strings, lost the `-@`
    prefixes and turned `a\\x20b` into `ax20b`: here is what systemd runs for them, before and after a flag."""
    texec("systemctl", "start", "bx-env.service", "bx@a.service", "bx-colon.service")
    env = await asyncio.to_thread(argv_of, "bx-env.service")
    assert env[:2] == ["bx-server", "-c"]  # `@`: the second word is argv[0]
    assert env[3:] == ["--model-path", "/models/kimi", "--served-model-name", "bx-env", "--greeting",
                       "hello  world", "$HOME", "--chat-template", "/etc/tmpl with space.jinja", "--tag", "a b",
                       "--pct", "50%", "single quoted"]
    assert (await asyncio.to_thread(argv_of, "bx@a.service"))[3:] == ["--instance", "a", "--name", "bx@a",
                                                                     "--unit", "bx@a.service"]
    assert (await asyncio.to_thread(argv_of, "bx-colon.service"))[3:] == ["--literal", "${MODEL}", "--dollars", "$$"]


async def test_a_change_to_a_variable_or_a_specifier_is_refused_naming_it(bx_units: None,
                                                                          transport: SshTransport) -> None:
    mgr = SystemdManager(transport, "bx-env.service")
    flags = await mgr.read_argv()
    i = flags.index("--model-path")
    with pytest.raises(PermanentManagerError) as e:
        await mgr.write_argv([*flags[:i], *flags[i + 2:], "--model-path", "/models/other"])
    assert ("the value of --model-path is ${MODEL}, set by Environment=MODEL=/models/kimi in "
            "/etc/systemd/system/bx-env.service: change it there") in str(e.value)
    mgr = SystemdManager(transport, "bx@a.service")
    flags = await mgr.read_argv()
    j = flags.index("--name")
    with pytest.raises(PermanentManagerError, match="the value of --name is %N, filled in by systemd"):
        await mgr.write_argv([*flags[:j], *flags[j + 2:]])
    assert texec("ls", "-A", "/etc/systemd/system/").count("bx") == 3  # no drop-in directory made for either


async def test_a_unit_bringup_cannot_rewrite_exactly_is_refused_with_nothing_written(
        bx_units: None, transport: SshTransport) -> None:
    texec("sh", "-c", "mkdir -p /etc/systemd/system/bx-env.service.d && "
                     "cat > /etc/systemd/system/bx-env.service.d/override.conf",
         input="[Service]\nExecStart=\nExecStart=/usr/bin/python3 -c pass\n")
    texec("sh", "-c", "cat > /etc/systemd/system/bx-colon.service",
         input="[Service]\nType=oneshot\nExecStart=/bin/true one\nExecStart=/bin/true two\n")
    texec("systemctl", "daemon-reload")
    mgr = SystemdManager(transport, "bx-env.service")
    with pytest.raises(PermanentManagerError, match=r"ExecStart= is also set in /etc/systemd/system/bx-env\.service\.d/"
                                             r"override\.conf, which systemd reads after bringup's"):
        await mgr.write_argv([*await mgr.read_argv(), "--x"])
    mgr = SystemdManager(transport, "bx-colon.service")
    with pytest.raises(PermanentManagerError, match="2 ExecStart= command lines in effect"):
        await mgr.write_argv([*await mgr.read_argv(), "--x"])
    assert "50-bringup.conf" not in texec("sh", "-c", "ls -A /etc/systemd/system/bx-*.d 2>/dev/null; true")


def test_restart_set_over_ssh_keeps_the_units_words_and_unset_restores_it(bx_units: None, tmp_path: Path,
                                                                         ssh_config: Path) -> None:
    """The same through `bringup restart --set` and `--unset` (no server to wait for: --no-wait)."""
    cfg = ConfigFile(
        state_dir=tmp_path / "state",
        hosts={"testhost": HostConfig(ssh="testhost", ssh_config=str(ssh_config), gpu_source="none")},
        deployments={"bx": SystemdDeployment(host="testhost", manager="systemd", unit="bx-env.service",
                                             endpoint="http://127.0.0.1:9", stop_timeout_s=20,
                                             extra_flags=[FlagConfig(name="bx-flag", kind="int"),
                                                          FlagConfig(name="model-path", kind="str")])},
    ).write(tmp_path / "bringup.toml")
    texec("systemctl", "start", "bx-env.service")
    before = argv_of("bx-env.service")
    cat_before = texec("systemctl", "cat", "bx-env.service")
    r = bringup(cfg, "restart", "bx", "--set", "bx-flag=7", "--yes", "--no-wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert argv_of("bx-env.service") == [*before, "--bx-flag", "7"]
    r = bringup(cfg, "restart", "bx", "--set", "model-path=/models/other", "--yes", "--no-wait")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the value of --model-path is ${MODEL}, set by Environment=MODEL=/models/kimi" in r.stdout + r.stderr
    r = bringup(cfg, "restart", "bx", "--unset", "bx-flag", "--yes", "--no-wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert argv_of("bx-env.service") == before
    assert texec("systemctl", "cat", "bx-env.service") == cat_before


def tmp_listing() -> list[str]:
    return sorted(texec("sh", "-c", "ls -A /tmp /var/tmp").split())  # the two world-writable temp directories


async def test_sudo_writes_leave_nothing_in_tmp_even_when_they_fail(bx_units: None, ssh_config: Path) -> None:
    """Through sudo, the drop-in goes through no temp file of a guessable name in /tmp (the old one stayed there,
    0644, when `sudo install` failed): it is made by `mktemp` next to its destination, 0600 (it holds the command
    line and its secrets; systemd reads it as root)."""
    t = SshTransport("testhost-tester", config=[str(ssh_config)])
    try:
        mgr = SystemdManager(t, "bx-env.service", sudo=True)
        flags = await mgr.read_argv()
        before = set(await asyncio.to_thread(tmp_listing))

        async def new_in_tmp() -> set[str]:  # systemd's own PrivateTmp= directories may come and go meanwhile
            return {n for n in set(await asyncio.to_thread(tmp_listing)) - before
                    if not n.startswith("systemd-private-")}

        await mgr.write_argv([*flags, "--bx-flag", "1"])
        assert texec("stat", "-c", "%U %a", "/etc/systemd/system/bx-env.service.d/50-bringup.conf").split() == [
            "root", "600"]
        assert await new_in_tmp() == set()
        # a write that fails (its directory is a file): the error said, nothing left anywhere
        texec("sh", "-c", "rm -rf /etc/systemd/system/bx-env.service.d && touch /etc/systemd/system/bx-env.service.d")
        with pytest.raises(ManagerError):
            await mgr.write_argv([*flags, "--bx-flag", "2"])
        assert await new_in_tmp() == set()
        assert texec("sh", "-c", "find /etc/systemd/system -name '.bringup.*'") == ""
    finally:
        await t.close()
