"""The one way bringup writes a file (tui/guard/files.py, issue 47.1): links, hard links, squatted temporary names,
directories other users can write, modes, and `--out`'s private subdirectory. Real files in a temporary directory;
the cases that need a second owner run as root (chown), and are skipped otherwise."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from tui.guard import files
from tui.guard.files import (
    UnsafeLocation,
    check_own_dir,
    open_append,
    open_private,
    out_dir,
    out_path,
    private_dir,
    write_private,
)

OTHER_UID = 65534  # nobody
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a file of another owner needs root to make")


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p, follow_symlinks=False).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    v = tmp_path / "victim"
    v.write_text("precious\n")
    return v


def test_a_new_file_is_0600_and_a_new_directory_0700(tmp_path: Path) -> None:
    p = write_private(tmp_path / "a" / "b" / "f.json", "{}")
    assert p.read_text() == "{}"
    assert (mode(p), mode(tmp_path / "a"), mode(tmp_path / "a" / "b")) == (0o600, 0o700, 0o700)
    assert sorted(os.listdir(p.parent)) == ["f.json"]  # no temporary left behind


def test_an_existing_directory_of_ours_is_not_tightened_by_a_write(tmp_path: Path) -> None:
    """A file written into the operator's home (`--out ~/x.md`) must not close their home to everyone else."""
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    write_private(home / "x.md", "x")
    assert mode(home) == 0o755 and mode(home / "x.md") == 0o600


def test_a_link_at_the_target_is_replaced_never_written_through(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f").symlink_to(victim)
    write_private(tmp_path / "d" / "f", "new")
    assert victim.read_text() == "precious\n"
    assert not (tmp_path / "d" / "f").is_symlink() and (tmp_path / "d" / "f").read_text() == "new"


def test_a_hard_link_at_the_target_is_replaced_never_written_through(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "d").mkdir()
    os.link(victim, tmp_path / "d" / "f")
    write_private(tmp_path / "d" / "f", "new")
    assert victim.read_text() == "precious\n" and (tmp_path / "d" / "f").read_text() == "new"


def test_squatted_temporary_names_are_never_used(tmp_path: Path, victim: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The first names tried are taken (links to a victim, a file of someone's): each is passed over, untouched."""
    d = tmp_path / "d"
    d.mkdir()
    names = iter(["aaaa", "bbbb", "cccc"])
    monkeypatch.setattr(files.secrets, "token_hex", lambda n: next(names))
    (d / ".f.aaaa.tmp").symlink_to(victim)
    (d / ".f.bbbb.tmp").write_text("theirs")
    write_private(d / "f", "mine")
    assert victim.read_text() == "precious\n" and (d / ".f.bbbb.tmp").read_text() == "theirs"
    assert (d / "f").read_text() == "mine" and not (d / ".f.cccc.tmp").exists()


def test_a_directory_others_can_write_is_refused_in_one_line(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    for write in (lambda: write_private(shared / "f", "x"), lambda: os.close(open_private(shared / "f")),
                  lambda: private_dir(shared)):
        with pytest.raises(UnsafeLocation, match="other users can write to it") as e:
            write()
        assert "\n" not in str(e.value) and str(shared) in str(e.value)
    assert os.listdir(shared) == []


@root_only
def test_a_directory_of_another_user_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeLocation, match="it belongs to"):
        write_private(theirs / "f", "x")
    assert os.listdir(theirs) == []


def test_a_link_planted_anywhere_along_the_path_in_an_open_directory_is_refused(tmp_path: Path) -> None:
    """Not only the last component: a link in a directory others can write, on the way, is not followed."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "sub").mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anyone could have put the link there
    (shared / "out").symlink_to(elsewhere)
    with pytest.raises(UnsafeLocation, match="symbolic link"):
        write_private(shared / "out" / "sub" / "f", "x")
    with pytest.raises(UnsafeLocation, match="symbolic link"):
        out_path(shared / "out" / "sub" / "f")
    assert os.listdir(elsewhere / "sub") == []


def test_links_are_followed_where_no_one_else_could_have_put_them(tmp_path: Path) -> None:
    """A state dir that is a link the operator made (their own directory, closed to others) works as before."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "state").symlink_to("real")
    write_private(tmp_path / "state" / "deployments" / "d" / "f", "x")
    assert (real / "deployments" / "d" / "f").read_text() == "x"
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "mine").symlink_to(real)
    write_private(sticky / "mine" / "g", "y")  # ours, in a sticky directory: no one else can replace it
    assert (real / "g").read_text() == "y"


def test_open_private_refuses_links_other_files_and_fifos_without_hanging(tmp_path: Path, victim: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "sym").symlink_to(victim)
    os.link(victim, d / "hard")
    os.mkfifo(d / "fifo", 0o600)
    for name, why in (("sym", "symbolic link"), ("hard", "hard link"), ("fifo", "not a regular file")):
        done: list[BaseException] = []

        def attempt(n: str = name, done: list[BaseException] = done) -> None:
            try:
                os.close(open_private(d / n, os.O_WRONLY | os.O_APPEND))
            except BaseException as e:
                done.append(e)

        t = threading.Thread(target=attempt, daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), f"open_private hung on {name}"
        assert len(done) == 1 and isinstance(done[0], UnsafeLocation) and why in str(done[0]), (name, done)
    assert victim.read_text() == "precious\n"


@root_only
def test_open_private_refuses_a_file_of_another_user(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    os.chown(tmp_path / "f", OTHER_UID, OTHER_UID)
    with pytest.raises(UnsafeLocation, match="belongs to"):
        open_private(tmp_path / "f")


def test_open_append_appends_and_tightens_a_file_an_older_bringup_left_0644(tmp_path: Path) -> None:
    p = tmp_path / "logs" / "a.log"
    with open_append(p) as f:
        f.write("one\n")
    p.chmod(0o644)
    with open_append(p) as f:
        f.write("two\n")
    assert p.read_text() == "one\ntwo\n" and mode(p) == 0o600 and mode(p.parent) == 0o700


def test_private_dir_tightens_its_own_directory_and_no_parent(tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    (parent / "state").mkdir(parents=True)
    parent.chmod(0o755)
    (parent / "state").chmod(0o755)
    private_dir(parent / "state")
    assert (mode(parent), mode(parent / "state")) == (0o755, 0o700)


def test_out_path_is_where_asked_in_a_safe_directory(tmp_path: Path) -> None:
    assert out_path(tmp_path / "r.md") == files.OutPath(tmp_path / "r.md")
    made = out_path(tmp_path / "new" / "r.md")
    assert made.path == tmp_path / "new" / "r.md" and not made.note and mode(tmp_path / "new") == 0o700


def test_out_path_in_an_open_directory_is_a_fresh_private_one_there_said_so(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    first, second = out_path(shared / "r.md"), out_path(shared / "r.md")
    assert first.path.parent.parent == shared and first.path.name == "r.md" and first.path != second.path
    assert first.path.parent.name.startswith("bringup-") and mode(first.path.parent) == 0o700
    assert f"{shared} is not a safe place to write" in first.note and str(first.path) in first.note
    write_private(first.path, "x")
    assert mode(first.path) == 0o600


def test_out_dir_is_the_directory_or_a_private_one_in_it(tmp_path: Path) -> None:
    assert out_dir(tmp_path / "results") == files.OutPath(tmp_path / "results")
    assert mode(tmp_path / "results") == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    where = out_dir(shared)
    assert where.path.parent == shared and "not a safe place" in where.note and mode(where.path) == 0o700


def test_a_shared_state_dir_is_refused_naming_the_setting(tmp_path: Path) -> None:
    check_own_dir(tmp_path / "not-yet", "state_dir")  # made 0700 when first written
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o775)
    with pytest.raises(UnsafeLocation, match=r"^state_dir .*shared is not bringup's own: other users can write"):
        check_own_dir(shared, "state_dir")
