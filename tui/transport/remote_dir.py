"""The one guarded way to make or check a directory on another host (issue 47.1, 47.2): `tui/guard/files.py`'s rules
where bringup cannot run Python of its own, in one `sh -c` script with every path an argument.

A directory on a host is made or used only when no other user of that host could have put something in its place:
its parent belongs to root or to the user bringup acts as there and no one else can write it (unless sticky, as
/tmp), and the directory itself is no symbolic link, is that user's (or root's, where asked) and writable by no one
else. Checked with `stat` without following links, so a link planted at the name (or in place of the parent) is
refused with the reason, never followed: `mkdir -p` and SFTP's `makedirs` follow links, and a `chmod` that follows one
as root locks everyone out of what it points to. Missing parents are made under umask 077, the directory itself with
the mode asked; `tighten` narrows a directory of the user's own that others could enter (a state dir) and is off where
the directory is the operator's (a compose project).

Used by the SSH transport's `write_file` (the directory a file goes into), the container managers' state dir, and
the remote lock (`managers/remote_lock.py`, whose script starts with `GUARD_DIR`).
"""

from __future__ import annotations

from tui.transport import CommandResult, PermanentTransportError, Transport, TransportError

#: shell functions: `refuse WHY` (prints `refused: WHY`, exits 3) and `guard_dir DIR MODE OWNERS TIGHTEN` (OWNERS:
#: `me` -- the directory must be the acting user's -- or `me-or-root`; TIGHTEN 1: a directory of ours with bits
#: beyond MODE for group or others is narrowed to MODE). Sets `me` (the acting uid) and `d` (DIR).
GUARD_DIR = r"""
set -fu
me=$(id -u)
refuse() { echo "refused: $*"; exit 3; }
# owner uid, octal mode, owner name of a path itself (stat without -L: a link is not followed)
meta() { stat -c '%u %a %U' -- "$1" 2>/dev/null; }
guard_dir() {
    d=$1 want=$2 owners=$3 tighten=$4
    case $d in */*) p=${d%/*} ;; *) p=. ;; esac
    [ -n "$p" ] || p=/
    [ -d "$p" ] || (umask 077; mkdir -p -- "$p") 2>/dev/null || refuse "cannot create $p"
    set -- $(meta "$p")
    [ $# -eq 3 ] || refuse "cannot read $p"
    [ "$1" = 0 ] || [ "$1" = "$me" ] || refuse "$p (above $d) belongs to $3, not to root or to uid $me"
    m=$((0$2))
    if [ $((m & 18)) -ne 0 ] && [ $((m & 512)) -eq 0 ]; then
        refuse "$p (above $d) is writable by others (mode $2) and not sticky"
    fi
    if [ -L "$d" ]; then refuse "$d is a symbolic link (to $(readlink -- "$d")), not a directory of its own"; fi
    if [ ! -e "$d" ]; then
        mkdir -m "$want" -- "$d" 2>/dev/null || [ -d "$d" ] || refuse "cannot create $d"
    fi
    if [ -L "$d" ] || [ ! -d "$d" ]; then refuse "$d is not a directory"; fi
    set -- $(meta "$d")
    [ $# -eq 3 ] || refuse "cannot read $d"
    if [ "$1" != "$me" ] && { [ "$owners" != me-or-root ] || [ "$1" != 0 ]; }; then
        refuse "$d belongs to $3 (uid $1), not to uid $me: remove it, or make it uid $me's"
    fi
    m=$((0$2))
    if [ $((m & 18)) -ne 0 ]; then refuse "$d is writable by group or others (mode $2): chmod go-w it"; fi
    # no link (checked above) in a parent no one else can change: the chmod reaches this directory and no other
    if [ "$tighten" = 1 ] && [ "$1" = "$me" ] && [ $((m & ~0$want & 63)) -ne 0 ]; then
        chmod -- "$want" "$d" || refuse "cannot chmod $d"
    fi
}
"""

#: `sh -c SCRIPT bringup-dir DIR MODE OWNERS TIGHTEN`: answers `ok` or `refused: WHY`
SCRIPT = GUARD_DIR + 'guard_dir "$1" "$2" "$3" "$4"\necho ok\n'


def dir_argv(path: str, *, mode: int = 0o700, root_ok: bool = False, tighten: bool = True) -> list[str]:
    """The command that makes or checks the directory `path` on a host (see the module)."""
    return ["sh", "-c", SCRIPT, "bringup-dir", path, f"{mode:o}", "me-or-root" if root_ok else "me",
            "1" if tighten else "0"]


def refusal(path: str, where: str, res: CommandResult) -> str:
    """"" when the command made or found the directory fine, else why not, in one line."""
    out = res.text.strip()
    if res.rc == 0 and out == "ok":
        return ""
    why = out.removeprefix("refused: ") if out.startswith("refused: ") else (res.error_text or out or f"rc {res.rc}")
    return f"{where}: refusing to use {path} as a directory of bringup's: {why[:300]}"


async def private_dir(transport: Transport, path: str, *, mode: int = 0o700, root_ok: bool = False,
                      tighten: bool = True) -> None:
    """The directory `path` on the transport's host made (`mode`) or checked, see the module; a refusal is a
    PermanentTransportError (waiting will not make the directory safe), a command that could not run a
    TransportError."""
    res = await transport.run(dir_argv(path, mode=mode, root_ok=root_ok, tighten=tighten), timeout=15)
    why = refusal(path, transport.name, res)
    if why:
        raise (PermanentTransportError if res.rc == 3 else TransportError)(why)
