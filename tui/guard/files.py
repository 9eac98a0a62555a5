"""The one way bringup writes a file or makes a directory on the machine it runs on (issue 47.1).

bringup often runs as root on a shared GPU host, and writes where it is told: its state dir, a results directory, a
record's `--out`. Any directory another user can write is one where that user can plant a symbolic link (or a hard
link, or a file of their own) at the name bringup is about to write, and so make root overwrite any file of the host.
So every write goes through here, and here:

- the directory written into is reached one component at a time, each opened relative to the last with
  O_DIRECTORY | O_NOFOLLOW; a symbolic link on the way is followed only where no other user could have put it (in a
  directory of ours or root's closed to others, or a link of ours in a sticky one), so a link planted anywhere on
  the path, not only at its end, is refused. The directory is checked on that open descriptor (fstat, not a path
  that can be swapped after the check): a real directory, owned by us or by root, that no other user can write.
  Anything else is refused with one line naming the directory and why (`UnsafeLocation`); for an `--out` the
  caller asks `out_path` (a file) or `out_dir` (a directory), which use a fresh private directory made there
  instead, and say so; `check_own_dir` refuses a state dir that is not ours;
- every later step is relative to that descriptor (`dir_fd=`): a parent renamed or replaced meanwhile changes nothing;
- a whole file is written to a temporary name made with O_EXCL | O_NOFOLLOW in the same directory and renamed over
  the target: a reader never sees half a file, and a link planted at the target is replaced, never written through;
- a file appended to or held open (a log, a lock) is opened with O_NOFOLLOW and must be a regular file of ours with
  one link: a hard link to someone else's file is refused;
- files are created 0600 and directories 0700 (the mode is given to the system call that creates them: there is no
  moment where another user can open them); `private_dir` tightens a directory of bringup's own that was looser,
  a write never touches a directory that existed (the operator's home, /tmp).

On another host the same rules are `tui/transport/remote_dir.py` (a directory made or checked without following
links) and the transports' `write_file` (a fresh O_EXCL name, 0600 unless the caller names why, renamed over).
`tests/infra/test_guarded_writes.py` walks the source of `tui/` and `widgets/` as an allow-list and fails on any
other write: any `os` call that changes a file (an `os.open` with a flag that is not a read-only `O_*` name), an
opener whose mode writes or cannot be read, an alias of one, `pathlib`'s, `tempfile`'s and `shutil`'s makers,
file handlers, databases, a transport's `write_file` and argv lists that make or write files, each other site
listed with why.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tui.errors import PermanentError

FILE_MODE = 0o600
DIR_MODE = 0o700
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: links followed in one path at most (the kernel's own limit)
_MAX_HOPS = 40


class UnsafeLocation(PermanentError, OSError):
    """A place bringup will not write to: waiting will not make it safe, so it is said at once, in one line."""


@dataclass(frozen=True)
class OutPath:
    """Where an `--out` file goes: where asked, or in a private directory made beside it (`note` says why)."""
    path: Path
    note: str = ""


def _owner(uid: int) -> str:
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return f"uid {uid}"


def _why_unsafe(st: os.stat_result) -> str:
    """Why a directory is no place to write, or "" when it is one."""
    me = os.geteuid()
    if not stat.S_ISDIR(st.st_mode):
        return "not a directory"
    if st.st_uid not in (me, 0):
        return f"it belongs to {_owner(st.st_uid)}, not to {_owner(me)}"
    if st.st_mode & 0o022:
        return f"other users can write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    return ""


def _may_follow(dfd: int, link: os.stat_result) -> bool:
    """Whether a symbolic link in the directory `dfd` can be followed: only where no other user could have put it
    there, in a directory of ours or root's that no one else can write, or in a sticky one (/tmp) a link of ours
    (which no one else can rename or remove there): the kernel's protected_symlinks rule, kept whatever the sysctl."""
    st = os.fstat(dfd)
    return not _why_unsafe(st) or bool(st.st_mode & stat.S_ISVTX and link.st_uid == os.geteuid())


def _walk(path: Path, *, make: bool) -> int:
    """An open descriptor of the directory `path`, reached one component at a time, each opened relative to the
    one before with O_NOFOLLOW: a link is followed only where `_may_follow` says (a link another user planted
    anywhere along the way, not only at the end, is refused); `make`: a missing component is created 0700 there.
    Raises UnsafeLocation, or OSError (FileNotFoundError when missing and not `make`)."""
    text = os.fspath(path)
    fd = os.open("/" if text.startswith("/") else ".", _DIR_FLAGS)
    parts = [c for c in text.split("/") if c not in ("", ".")]
    hops = 0
    try:
        while parts:
            name = parts.pop(0)
            try:
                nfd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make or hops > _MAX_HOPS:
                    raise
                hops += 1
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, DIR_MODE, dir_fd=fd)
                parts.insert(0, name)  # opened again: what is there now is checked like anything found
                continue
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise UnsafeLocation(f"refusing to use {path}: {name} is not a directory") from None
                if not _may_follow(fd, st):
                    raise UnsafeLocation(f"refusing to use {path}: {name} is a symbolic link in a directory other "
                                         f"users can write (or not ours)") from None
                hops += 1
                if hops > _MAX_HOPS:
                    raise UnsafeLocation(f"refusing to use {path}: too many symbolic links") from None
                target = os.readlink(name, dir_fd=fd)
                if target.startswith("/"):
                    os.close(fd)
                    fd = os.open("/", _DIR_FLAGS)
                parts[:0] = [c for c in target.split("/") if c not in ("", ".")]
                continue
            os.close(fd)
            fd = nfd
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_dir(path: Path, *, make: bool = False) -> int:
    """`_walk`, its errors said in one line naming the directory."""
    try:
        return _walk(path, make=make)
    except UnsafeLocation:
        raise
    except OSError as e:
        raise UnsafeLocation(f"cannot open the directory {path}: {e.strerror or e}") from None


@contextlib.contextmanager
def _checked_dir(path: Path, *, make: bool) -> Iterator[int]:
    """An open descriptor of the directory `path`, checked (see the module's docstring); missing directories made
    0700 first when `make` (one that exists is left as it is: it may be the operator's home)."""
    fd = _open_dir(path, make=make)
    try:
        why = _why_unsafe(os.fstat(fd))
        if why:
            raise UnsafeLocation(f"refusing to write into {path}: {why}")
        yield fd
    finally:
        os.close(fd)


def private_dir(path: str | Path) -> Path:
    """`path` made a private directory of bringup's own: missing ones (and missing parents) are created 0700; `path`
    must then be a real directory of ours or root's that no other user can write, and if it is ours and others can
    read or enter it, it is tightened to 0700. A parent that already existed is never changed: it is someone's
    choice (tightening `/tmp` would lock every other user out of it)."""
    p = Path(path).expanduser()
    fd = _open_dir(p, make=True)
    try:
        st = os.fstat(fd)
        why = _why_unsafe(st)
        if why:
            raise UnsafeLocation(f"refusing to use {p} as a directory of bringup's: {why}")
        if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, DIR_MODE)
    finally:
        os.close(fd)
    return p


def check_own_dir(path: str | Path, what: str) -> None:
    """A directory bringup keeps its own files in (the state dir), when it is there: a real directory of ours or
    root's that no other user can write (a shared one lets that user plant links and read the records), else
    UnsafeLocation naming `what`, in one line. One not there yet is fine: it is made 0700 when first written."""
    p = Path(path).expanduser()
    try:
        fd = _walk(p, make=False)
    except FileNotFoundError:
        return
    except UnsafeLocation as e:
        raise UnsafeLocation(f"{what} {p}: {e}") from None
    except OSError as e:
        raise UnsafeLocation(f"{what} {p}: cannot open it: {e.strerror or e}") from None
    try:
        why = _why_unsafe(os.fstat(fd))
    finally:
        os.close(fd)
    if why:
        raise UnsafeLocation(f"{what} {p} is not bringup's own: {why}; set state_dir to a directory of yours")


def write_private(path: str | Path, data: str | bytes, *, mode: int = FILE_MODE, make_dir: bool = True,
                  durable: bool = False) -> Path:
    """The whole file `path`, atomically: written to a fresh name beside it (O_EXCL, O_NOFOLLOW, `mode`) and renamed
    over it. `make_dir`: the directory is made (0700) when missing. `durable`: fsync'd before the rename (a file a
    reader must find whole after a crash: a sweep's state). Raises UnsafeLocation (see the module) or OSError."""
    p = Path(path).expanduser()
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with _checked_dir(p.parent, make=make_dir) as dfd:
        tmp = _fresh(dfd, p.name, mode)
        try:
            fd = os.open(tmp, os.O_WRONLY | _FILE_FLAGS, dir_fd=dfd)
            try:
                view = memoryview(raw)
                while view:
                    view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, p.name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise
    return p


def _fresh(dfd: int, name: str, mode: int) -> str:
    """A new empty file beside `name`, made by us alone (O_EXCL): a name another user planted is never used."""
    for _ in range(64):
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, mode, dir_fd=dfd))
            return tmp
        except FileExistsError:
            continue
    raise UnsafeLocation(f"cannot make a temporary file beside {name}: every name tried was taken")


def open_private(path: str | Path, flags: int = os.O_RDWR, *, mode: int = FILE_MODE, make_dir: bool = True) -> int:
    """A file of ours opened (and created `mode` when missing) for appending or holding (a log, a lock): the
    descriptor. Refused when the name is a link (symbolic or hard), not a regular file, or another user's."""
    p = Path(path).expanduser()
    with _checked_dir(p.parent, make=make_dir) as dfd:
        try:  # O_NONBLOCK: a FIFO squatted at the name fails or returns at once instead of hanging the open
            fd = os.open(p.name, flags | os.O_CREAT | os.O_NONBLOCK | _FILE_FLAGS, mode, dir_fd=dfd)
        except OSError as e:
            if e.errno == errno.ELOOP:  # the name is a symbolic link
                raise UnsafeLocation(f"refusing to open {p}: it is a symbolic link") from None
            if e.errno == errno.ENXIO:
                raise UnsafeLocation(f"refusing to open {p}: not a regular file") from None
            raise
    if not flags & os.O_NONBLOCK:
        os.set_blocking(fd, True)
    st = os.fstat(fd)
    why = ("not a regular file" if not stat.S_ISREG(st.st_mode)
           else f"it belongs to {_owner(st.st_uid)}" if st.st_uid != os.geteuid()
           else "it has another name too (a hard link)" if st.st_nlink != 1 else "")
    if why:
        os.close(fd)
        raise UnsafeLocation(f"refusing to open {p}: {why}")
    if stat.S_IMODE(st.st_mode) & ~mode & 0o777:
        os.fchmod(fd, mode)  # one an older bringup made 0644: no one else may read it from now on
    return fd


def open_append(path: str | Path, *, mode: int = FILE_MODE, make_dir: bool = True) -> IO[str]:
    """A text file of ours opened for appending (see `open_private`); the caller closes it."""
    return os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND, mode=mode, make_dir=make_dir), "a",
                     encoding="utf-8")


def out_path(path: str | Path) -> OutPath:
    """Where a file the operator named (`--out FILE`) can be written: there, when its directory is a safe one (see
    the module); else in a new private directory made in that directory (`bringup-XXXX/FILE`), with a note saying
    so. Missing directories are made 0700. Raises UnsafeLocation when neither can be done."""
    p = Path(path).expanduser()
    d, why = _safe_or_private(p.parent)
    return OutPath(p) if not why else OutPath(d / p.name, _moved(p.parent, why, d / p.name))


def out_dir(path: str | Path) -> OutPath:
    """Where a directory the operator named (`sweep --out DIR`) can be filled: there, when it is missing (made 0700)
    or a safe one (see the module); else a new private directory made inside it (`DIR/bringup-XXXX`), with a note
    saying so. Raises UnsafeLocation when neither can be done."""
    p = Path(path).expanduser()
    d, why = _safe_or_private(p)
    return OutPath(p) if not why else OutPath(d, _moved(p, why, d))


def _moved(asked: Path, why: str, instead: Path) -> str:
    return f"{asked} is not a safe place to write ({why}): written to {instead} instead"


def _safe_or_private(d: Path) -> tuple[Path, str]:
    """`d` (made 0700 when missing) and "" when it is a safe directory, else a fresh private one in it and why."""
    fd = _open_dir(d, make=True)
    try:
        why = _why_unsafe(os.fstat(fd))
        if not why:
            return d, ""
        for _ in range(64):
            sub = f"bringup-{secrets.token_hex(4)}"
            try:
                os.mkdir(sub, DIR_MODE, dir_fd=fd)
                break
            except FileExistsError:
                continue
        else:
            raise UnsafeLocation(f"cannot make a private directory in {d}")
    except PermissionError as e:
        raise UnsafeLocation(f"cannot write into {d}: {e.strerror}") from None
    finally:
        os.close(fd)
    return d / sub, why
