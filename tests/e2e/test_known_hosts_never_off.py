"""Host-key checking cannot be switched off by a line of ssh_config (issue 29, item 3).

asyncssh takes `UserKnownHostsFile none` as "no checking": `ssh` refused the host and bringup connected. Now bringup
reads the known_hosts files itself (`tui.transport.ssh_known_hosts.known_hosts_for`) and hands asyncssh what they
trust, never None: every way of naming no file (none, /dev/null, an empty, missing or unreadable file, a token that
cannot be expanded), with any StrictHostKeyChecking, refuses the host with the same "unknown SSH host key" error as a
known_hosts without the host's entry, even when ~/.ssh/known_hosts (which asyncssh falls back to) holds the real
key. The files that do name the key are honoured as `ssh` honours them: several files, GlobalKnownHostsFile
alongside `UserKnownHostsFile none`, `~`, `%d`, `%u`, `%h`, `%p`, `${VAR}`.

Against the real sshd of the test host (.ci/testhost.sh; skipped when it is not up, unless BRINGUP_TESTHOST=required).
The fixture is `testhost` (tests/e2e/conftest.py), so these tests join the test host's xdist group
(tests/conftest.py) and never run while another test stops that host's sshd.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import asyncssh
import pytest

from tests.helpers.testhost import HostInfo
from tui.errors import PermanentError
from tui.transport import TransportError
from tui.transport.ssh import SshTransport
from tui.transport.ssh_known_hosts import known_hosts_for

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, testhost: HostInfo) -> Path:
    """A HOME whose ~/.ssh/known_hosts trusts the test host's real keys: asyncssh's own fallback when it is handed
    an empty known_hosts. A case that must refuse the host refuses it although this file would let it in."""
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    (h / ".ssh" / "known_hosts").write_text("".join(ln + "\n" for ln in testhost.known_hosts))
    monkeypatch.setenv("HOME", str(h))
    return h


def config(tmp: Path, testhost: HostInfo, lines: str, name: str = "ssh_config") -> Path:
    cfg = tmp / name
    cfg.write_text(f"Host testhost\n    HostName 127.0.0.1\n    Port {testhost.port}\n    User root\n"
                   f"    IdentityFile {testhost.key}\n    IdentitiesOnly yes\n"
                   + "".join(f"    {ln}\n" for ln in lines.splitlines()))
    return cfg


async def attempt(cfg: Path) -> TransportError | None:
    """The error of a first command through `cfg`, or None when it connected and ran."""
    t = SshTransport("testhost", config=[str(cfg)])
    try:
        res = await t.run(["true"])
    except TransportError as e:
        assert t.status.startswith("failed:") and t.last_error is e, t.status
        return e
    finally:
        await t.close()
    assert res.rc == 0
    return None


def pinned(testhost: HostInfo) -> str:
    return "".join(ln + "\n" for ln in testhost.known_hosts)


def head(msg: str) -> str:
    """The part of an unknown-host-key message that does not depend on which files were read."""
    return msg.split(": it is not in ", 1)[0]


# (the lines of the Host block after its address and key, files to create first: name -> content)
NO_KNOWN_HOSTS = {
    "none": ("UserKnownHostsFile none", {}),
    "none-case": ("UserKnownHostsFile NONE\nGlobalKnownHostsFile none", {}),
    "dev-null": ("UserKnownHostsFile /dev/null\nGlobalKnownHostsFile /dev/null", {}),
    "empty-file": ("UserKnownHostsFile {tmp}/empty\nGlobalKnownHostsFile /dev/null", {"empty": ""}),
    "missing-file": ("UserKnownHostsFile {tmp}/missing\nGlobalKnownHostsFile /dev/null", {}),
    "unreadable-file": ("UserKnownHostsFile {tmp}/adir\nGlobalKnownHostsFile /dev/null", {"adir/": ""}),
    "strict-no": ("StrictHostKeyChecking no\nUserKnownHostsFile none", {}),
    "strict-off": ("StrictHostKeyChecking off\nUserKnownHostsFile /dev/null", {}),
    "accept-new": ("StrictHostKeyChecking accept-new\nUserKnownHostsFile {tmp}/empty\nGlobalKnownHostsFile /dev/null",
                   {"empty": ""}),
    "token-it-cannot-expand": ("UserKnownHostsFile %C\nGlobalKnownHostsFile /dev/null", {}),
    "several-files-none-with-the-key": (
        "UserKnownHostsFile {tmp}/empty /dev/null {tmp}/missing\nGlobalKnownHostsFile /dev/null", {"empty": ""}),
}


@pytest.mark.parametrize("case", list(NO_KNOWN_HOSTS))
async def test_no_known_hosts_file_means_every_host_key_is_unknown_and_refused(
        case: str, testhost: HostInfo, tmp_path: Path, home: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    (tmp_path / "other").write_text(f"otherhost {' '.join(other)}\n")  # a known_hosts without this host
    base = await attempt(config(tmp_path, testhost, f"UserKnownHostsFile {tmp_path}/other\n"
                                                    "GlobalKnownHostsFile /dev/null", "base_config"))
    assert base is not None and base.kind == "host-key-unknown", base  # the message without the host's entry
    lines, files = NO_KNOWN_HOSTS[case]
    for name, content in files.items():
        if name.endswith("/"):
            (tmp_path / name).mkdir()
        else:
            (tmp_path / name).write_text(content)
    cfg = config(tmp_path, testhost, lines.format(tmp=tmp_path))
    err = await attempt(cfg)
    assert err is not None, f"{case}: connected without checking the host key"
    msg = str(err)
    assert isinstance(err, PermanentError) and err.kind == "host-key-unknown", msg
    assert head(msg) == head(str(base)) == f"testhost: unknown SSH host key for [127.0.0.1]:{testhost.port}", msg
    assert "refusing to connect" in msg and str(cfg) in msg and "CHANGED" not in msg, msg
    real = next(ln for ln in testhost.known_hosts if " ssh-ed25519 " in ln).split(None, 1)[1]
    assert asyncssh.import_public_key(real).get_fingerprint() in msg, msg  # what to check with the host's owner
    assert str(home) not in msg, msg  # ~/.ssh/known_hosts is not read when the config names other files
    if case == "accept-new":
        assert (tmp_path / "empty").read_text() == "", "a key was recorded"


async def test_the_words_say_why_no_file_was_read(testhost: HostInfo, tmp_path: Path, home: Path) -> None:
    err = await attempt(config(tmp_path, testhost, "UserKnownHostsFile none"))
    msg = str(err)
    assert "it is not in any known_hosts file (UserKnownHostsFile none" in msg, msg
    assert "accept it once" not in msg and "UserKnownHostsFile in" in msg, msg  # `ssh` could record it nowhere
    err = await attempt(config(tmp_path, testhost, f"UserKnownHostsFile {tmp_path}\nGlobalKnownHostsFile /dev/null"))
    assert f"{tmp_path} cannot be read" in str(err), err


# ways of writing it that name the host's key: honoured, as `ssh` honours them
TRUSTED = {
    "global-beside-user-none": "UserKnownHostsFile none\nGlobalKnownHostsFile /dev/null {tmp}/kh",
    "second-of-several": "UserKnownHostsFile {tmp}/empty {tmp}/kh\nGlobalKnownHostsFile /dev/null",
    "tilde": "UserKnownHostsFile ~/kh\nGlobalKnownHostsFile /dev/null",
    "percent-d": "UserKnownHostsFile %d/kh\nGlobalKnownHostsFile /dev/null",
    "percent-u-h-p": "UserKnownHostsFile {tmp}/%u-%h-%p\nGlobalKnownHostsFile /dev/null",
    "env-var": "UserKnownHostsFile ${{BRINGUP_TEST_KH}}\nGlobalKnownHostsFile /dev/null",
    "default-file": "",
}


@pytest.mark.parametrize("case", list(TRUSTED))
async def test_the_files_that_name_the_key_are_honoured(case: str, testhost: HostInfo, tmp_path: Path, home: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").write_text("")
    for path in (tmp_path / "kh", home / "kh", tmp_path / f"{getpass.getuser()}-127.0.0.1-{testhost.port}"):
        path.write_text(pinned(testhost))
    monkeypatch.setenv("BRINGUP_TEST_KH", str(tmp_path / "kh"))
    if case != "default-file":
        (home / ".ssh" / "known_hosts").write_text("")  # the key is only where the config says
    cfg = config(tmp_path, testhost, TRUSTED[case].format(tmp=tmp_path))
    assert await attempt(cfg) is None
    kh = known_hosts_for("testhost", [str(cfg)])
    assert kh.read and all(os.path.isabs(f) for f in kh.read), kh


async def test_a_changed_key_in_a_file_named_with_a_token_says_changed(testhost: HostInfo, tmp_path: Path,
                                                                       home: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[:2]
    (home / "kh").write_text(f"[127.0.0.1]:{testhost.port} {' '.join(other)}\n")
    err = await attempt(config(tmp_path, testhost, "UserKnownHostsFile %d/kh\nGlobalKnownHostsFile /dev/null"))
    assert err is not None and err.kind == "host-key-changed" and f"{home}/kh:1" in str(err), err


async def test_a_jump_host_with_user_known_hosts_none_is_refused(testhost: HostInfo, tmp_path: Path,
                                                                 home: Path) -> None:
    """A ProxyJump host is connected by asyncssh with its own reading of the config: `none` there is refused too."""
    kh = tmp_path / "kh"
    kh.write_text(pinned(testhost))
    cfg = config(tmp_path, testhost, f"UserKnownHostsFile {kh}\nProxyJump jump")
    with cfg.open("a") as f:
        f.write(f"Host jump\n    HostName 127.0.0.1\n    Port {testhost.port}\n    User root\n"
                f"    IdentityFile {testhost.key}\n    IdentitiesOnly yes\n    UserKnownHostsFile none\n")
    err = await attempt(cfg)
    assert err is not None and isinstance(err, PermanentError) and "ProxyJump host jump" in str(err), err
