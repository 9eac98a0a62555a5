"""What bringup writes on a host over SSH, on the systemd test host (issue 47, review findings 1 and 2).

- The systemd manager wrote the drop-in (`ExecStart=... --api-key V`), `50-bringup.conf.previous` and
  `bringup-{previous,ready}.json` with `chmod 0644`: every user of the host read the secret. They are root's and 0600
  now, whether bringup is root there or root through sudo, and bringup still reads them back (through sudo).
- The SSH transport's `write_file` created its file with no mode (the host's umask: 0644) and made the directory with
  SFTP's `makedirs`, which follows a link: a link `mallory` planted in a shared directory had root write through it.
  Now the file is 0600 from its open, and its directory goes through `transport/remote_dir.py` (no link followed).
- The docker manager's `mkdir -p -m 700 D` + `chmod go-rwx D` followed a link planted at D: root's chmod reached the
  link's target. Refused now, the target unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.helpers.testhost import as_mallory, texec
from tui.managers import PermanentManagerError
from tui.managers.docker import DockerManager
from tui.managers.systemd import SystemdManager
from tui.transport import TransportError
from tui.transport.ssh import SshTransport

pytestmark = pytest.mark.slow

UNIT = "bx-env.service"
DROPIN = f"/etc/systemd/system/{UNIT}.d"
SECRET = "sk-remote-canary-0600"


def owner_mode(path: str) -> list[str]:
    return texec("stat", "-c", "%U %a", path).split()


@pytest.fixture
def arena() -> Iterator[str]:
    """A directory every user of the host can write (root's, 1777, as /tmp), a victim directory (root's, 0755: /etc's
    stand-in) and a victim file in it."""
    top = texec("mktemp", "-d", "/tmp/bx-arena-XXXXXX").strip()
    texec("sh", "-c", f"chmod 1777 {top} && mkdir -m 755 {top}-victim && printf 'precious\\n' > {top}-victim/f")
    yield top
    texec("rm", "-rf", top, f"{top}-victim")


def victim_untouched(top: str) -> None:
    assert texec("stat", "-c", "%U %a", f"{top}-victim").split() == ["root", "755"]
    assert texec("ls", "-A", f"{top}-victim").split() == ["f"]
    assert texec("cat", f"{top}-victim/f") == "precious\n"


@pytest.mark.parametrize("as_who", ["root", "sudo"])
async def test_the_drop_in_and_the_saved_command_lines_are_roots_0600_and_read_back(
        bx_units: None, ssh_config: object, as_who: str) -> None:
    t = SshTransport("testhost" if as_who == "root" else "testhost-tester", config=[str(ssh_config)])
    try:
        mgr = SystemdManager(t, UNIT, sudo=as_who == "sudo")
        flags = await mgr.read_argv()
        first, second = [*flags, "--api-key", SECRET], [*flags, "--api-key", SECRET + "2"]
        await mgr.write_argv(first)
        await mgr.write_argv(second)  # the first drop-in kept as .previous
        await mgr.save_argv("ready", second)
        for name in ("50-bringup.conf", "50-bringup.conf.previous", "bringup-previous.json", "bringup-ready.json"):
            assert owner_mode(f"{DROPIN}/{name}") == ["root", "600"], name
            rc, out = as_mallory("cat", f"{DROPIN}/{name}")
            assert rc != 0 and SECRET not in out, name
        assert SECRET in texec("cat", f"{DROPIN}/50-bringup.conf")
        mgr._argv = None
        assert await mgr.read_argv() == second  # read back through sudo where it is root that way
        assert await mgr.read_saved_argv("ready") == second
        assert await mgr.read_saved_argv("previous") == json.loads(texec("cat", f"{DROPIN}/bringup-previous.json"))
    finally:
        await t.close()


async def test_an_ssh_write_is_0600_whatever_the_umask_and_its_directory_0700(ssh_config: object) -> None:
    t = SshTransport("testhost-tester", config=[str(ssh_config)])
    try:
        d = (await t.run(["mktemp", "-d"])).text.strip()
        await t.write_file(f"{d}/made/override.yml", b"command: [--api-key, x]\n")
        assert texec("stat", "-c", "%a", f"{d}/made/override.yml").strip() == "600"
        assert texec("stat", "-c", "%a", f"{d}/made").strip() == "700"
        await t.write_file(f"{d}/shown", b"x", mode=0o644)
        assert texec("stat", "-c", "%a", f"{d}/shown").strip() == "644"
        await t.run(["rm", "-r", d])
    finally:
        await t.close()


async def test_an_ssh_write_through_a_planted_directory_link_is_refused(arena: str, ssh_config: object) -> None:
    assert as_mallory("ln", "-s", f"{arena}-victim", f"{arena}/records")[0] == 0
    t = SshTransport("testhost", config=[str(ssh_config)])  # root
    try:
        with pytest.raises(TransportError, match="symbolic link"):
            await t.write_file(f"{arena}/records/argv.json", b'["--api-key", "x"]')
    finally:
        await t.close()
    victim_untouched(arena)


async def test_a_link_planted_at_dockers_state_dir_is_refused_and_its_target_keeps_its_mode(
        arena: str, ssh_config: object) -> None:
    assert as_mallory("mkdir", "-m", "777", f"{arena}/deployments")[0] == 0
    assert as_mallory("ln", "-s", f"{arena}-victim", f"{arena}/deployments/llm")[0] == 0
    t = SshTransport("testhost", config=[str(ssh_config)])  # root: the chmod that reached /etc
    try:
        mgr = DockerManager(t, "llm", f"{arena}/deployments/llm")
        with pytest.raises(PermanentManagerError) as e:
            await mgr._write_json("argv.json", ["--api-key", "x"])
        assert "\n" not in str(e.value) and f"{arena}/deployments" in str(e.value), e.value
    finally:
        await t.close()
    victim_untouched(arena)
