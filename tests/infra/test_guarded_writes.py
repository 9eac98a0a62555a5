"""Every file bringup writes and every directory it makes goes through a guarded place (issue 47.1, 47.2).

The guarantees (no link followed, a fresh O_EXCL temporary name renamed over the target, 0600/0700, a directory
another user can write refused) live in `tui/guard/files.py` on this machine and in `tui/transport/remote_dir.py`
(with the transports' `write_file`) on another host. A write made anywhere else does without them, and the last
rounds showed how that goes: each fix held at the site it was made, and the next path (`record --out`, the sweep's
results, `history.lock`, then the systemd manager's `chmod 0644`, docker's `mkdir -p` + `chmod` through a planted
link) repeated the old pattern. So this walks the syntax tree of `tui/` and `widgets/` as an allow-list, not a list
of the writes someone thought of:

- `os.*`: only calls that change no file, and the fd operations (`write`, `pwrite`, `ftruncate`, `fsync`, `read`,
  `close`...) on a descriptor that some open made (the open is what is checked); `os.open` only with flags that are
  all read-only `O_*` names (a number, a variable or any other flag is a write until shown otherwise);
- `open` and every other opener (`io.open`, `io.FileIO`, `codecs.open`, `Path.open`, `tarfile.open`, `ZipFile`):
  a mode that writes, or one it cannot read (a variable, `*args`, `**kw`), is a write; a reference to an opener
  that is not a call (`w = open`, `getattr(p, "write_text")`) is one too;
- `pathlib`'s makers (`write_text`, `mkdir`, `touch`, `chmod`, `rename`, links...), `tempfile`'s and `shutil`'s
  (but `which` and the like), `logging`'s file handlers, `sqlite3.connect`, `dbm`/`shelve`;
- commands: a transport's `write_file`, an argv list naming `mkdir`/`chmod`/`chown`/`tee`/`mv`/`cp`/`install`/`ln`/
  `touch`/`truncate`/`mktemp`/`dd of=`, a `>` redirect (other than to `/dev/null` or another descriptor), or a
  `sh -c` script held in a variable (its text is not seen here).

Not walked: `tui/guard/files.py` (the one place), `tui/sim/` (an instrument, never product
code: the architecture's import contracts keep it apart). Allowed, each with its reason, in `ALLOWED`; an entry
that no longer matches anything fails too, so the list is the true list of the other writers.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("tui", "widgets")
SKIPPED = ("tui/guard/files.py", "tui/sim/")

#: (file, text of the flagged line, or "*": the whole file) -> why it may write without tui/guard/files.py
ALLOWED: dict[tuple[str, str], str] = {
    ("tui/managers/supervisor.py", "*"): (
        "stdlib-only code sent to the server's host with `python3 -c`: it cannot import bringup; it creates every "
        "file with O_CREAT|O_EXCL|O_NOFOLLOW 0600 and its directories 0700 itself"),
    ("tui/transport/ssh.py", 'sftp.open(tmp, "xb", attrs'): (
        "the SSH transport's write_file: a fresh random name created exclusively (FXF_EXCL) with its mode in the "
        "open's attrs, in a directory remote_dir.py checked, renamed over the target"),
    ("tui/transport/remote_dir.py", '["sh", "-c", SCRIPT, "bringup-dir"'): (
        "the one guarded remote-directory helper: stat without following links, parent and directory owned by "
        "us or root and closed to others, made with the mode asked"),
    ("tui/managers/remote_lock.py", '["sh", "-c", _SCRIPT, "bringup-lock"'): (
        "the remote lock: its directory through remote_dir.GUARD_DIR, the lock file made with dd oflag=nofollow "
        "under umask 077, the record a mktemp renamed over (a link replaced, never followed)"),
    ("tui/managers/systemd.py", '["sh", "-c", _WRITE, "bringup-write"'): (
        "root's unit files through sudo (SFTP cannot write as root): its directory through remote_dir.GUARD_DIR, a "
        "mktemp (0600) in it, renamed over the target"),
    ("tui/managers/systemd.py", '["sh", "-c", _USER_LOCK_DIR]'): "prints where the lock goes; writes nothing",
    ("tui/managers/docker.py", "self.transport.write_file(self._p(name)"): (
        "the container manager's records on another host, through the transport's guarded write (0600)"),
    ("tui/managers/process.py", "self.transport.write_file(self._p(name)"): (
        "the process manager's records on another host, through the transport's guarded write (0600)"),
    ("tui/managers/slurm_records.py", "await self.transport.write_file(self.p(name), data)"): (
        "the Slurm manager's records on the login host, through the transport's guarded write (0600) in the "
        "directory remote_dir.py made"),
    ("tui/managers/slurm_script.py", "stamp >>{log}"): (
        "text of the batch script sbatch runs on the cluster, not a command bringup runs: the job writes its "
        "server's output on its node, into the output directory bringup made 0700 the guarded way"),
    ("tui/managers/slurm_script.py", 'srun = " ".join(["srun"'): (
        "text of the batch script (srun's `bash -c` of the node script, quoted): run by the job on the cluster"),
    ("tui/managers/compose.py", "self.transport.write_file(f\"{self.compose_dir}/{OVERRIDE}\""): (
        "the Compose override, through the transport's guarded write, 0600: the compose tool reads it as the "
        "user bringup acts as"),
}

WRITE_MODE_CHARS = set("wax+")
_MODE_TEXT = re.compile(r"^[rwxabt+]{1,4}(:\w*)?$")
MAKERS = {"write_text", "write_bytes", "touch", "mkdir", "makedirs", "mkfifo", "mknod", "symlink_to",
          "hardlink_to", "link_to", "chmod", "lchmod", "rename"}
TEMPFILE = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
            "TemporaryDirectory"}
TEMPFILE_READS = {"gettempdir", "gettempdirb", "gettempprefix"}
SHUTIL_READS = {"which", "get_terminal_size", "disk_usage"}
#: os calls that change no file; and the operations on a descriptor an open made (the open is what is checked)
OS_READS = {"stat", "lstat", "fstat", "getpid", "getppid", "geteuid", "getuid", "getegid", "getgid", "getpgid",
            "kill", "killpg", "_exit", "listdir", "scandir", "urandom", "sysconf", "setsid", "set_blocking",
            "get_blocking", "readlink", "minor", "major", "getcwd", "fspath", "fsencode", "fsdecode", "access",
            "waitpid", "waitstatus_to_exitcode", "fork", "get_terminal_size", "isatty", "cpu_count", "uname",
            "getenv", "strerror", "pipe", "sched_getaffinity", "getloadavg", "statvfs", "fstatvfs", "times",
            "getpgrp", "get_inheritable", "device_encoding", "getlogin", "process_cpu_count"}
OS_FD_OPS = {"read", "pread", "write", "pwrite", "ftruncate", "fsync", "fdatasync", "close", "lseek"}
#: os.open flags that neither create, truncate nor write
READ_FLAGS = {"O_RDONLY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK", "O_DIRECTORY", "O_NOCTTY", "O_NOATIME",
              "O_PATH", "O_LARGEFILE"}
#: openers whose mode is their nth positional argument (default: reading)
OPENERS = {"open": 1, "io.open": 1, "codecs.open": 1, "io.FileIO": 1, "FileIO": 1, "zipfile.ZipFile": 1,
           "ZipFile": 1}
#: callables that, named without being called, are an opener in disguise (`w = open`)
ALIASABLE = {"open", "io.open", "os.open", "os.fdopen", "io.FileIO", "codecs.open"}
FILE_HANDLERS = {"FileHandler", "RotatingFileHandler", "TimedRotatingFileHandler", "WatchedFileHandler"}
ALWAYS = {"sqlite3.connect", "dbm.open", "shelve.open", "os.fdopen"}
#: commands that write or make files, named in an argv list
WRITE_COMMANDS = {"mkdir", "chmod", "chown", "tee", "mv", "cp", "install", "ln", "touch", "truncate", "mktemp",
                  "rsync", "scp"}
SHELLS = {"sh", "bash", "dash", "zsh", "/bin/sh", "/bin/bash"}
_HARMLESS_REDIRECT = re.compile(r"\d?>(&\d|\s*/dev/null)")
_COMMAND_WORD = re.compile(r"(?:^|[\s;|&(])(" + "|".join(sorted(WRITE_COMMANDS)) + r")(?=\s)")


@dataclass(frozen=True)
class Write:
    file: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def _unreadable(call: ast.Call) -> bool:
    """`*args` or `**kw`: what the call is given cannot be read here."""
    return any(isinstance(a, ast.Starred) for a in call.args) or any(kw.arg is None for kw in call.keywords)


def _writes_by_mode(mode: ast.expr | None) -> bool:
    """A mode that writes, or one this cannot read (a variable): both are writes until shown otherwise."""
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODE_CHARS & set(mode.value))
    return True


def _opener_writes(call: ast.Call, pos: int) -> bool:
    if _unreadable(call):
        return True
    mode = next((kw.value for kw in call.keywords if kw.arg == "mode"), None)
    if mode is None and len(call.args) > pos:
        mode = call.args[pos]
    return _writes_by_mode(mode)


def _method_open_writes(call: ast.Call) -> bool:
    """`x.open(...)`: Path.open's mode comes first, tarfile's and sftp's second; a mode-like text anywhere decides,
    and with none, any argument this cannot read may be one."""
    if _unreadable(call):
        return True
    kw = next((k.value for k in call.keywords if k.arg == "mode"), None)
    if kw is not None:
        return _writes_by_mode(kw)
    modes = [a.value for a in call.args
             if isinstance(a, ast.Constant) and isinstance(a.value, str) and _MODE_TEXT.match(a.value)]
    if modes:
        return any(WRITE_MODE_CHARS & set(m.split(":")[0]) for m in modes)
    return bool(call.args) and not all(isinstance(a, ast.Constant) for a in call.args)


def _read_only_flags(flags: ast.expr) -> bool:
    """os.open's flags are read-only `O_*` names joined by `|` (or 0): anything else may create or write."""
    if isinstance(flags, ast.BinOp) and isinstance(flags.op, ast.BitOr):
        return _read_only_flags(flags.left) and _read_only_flags(flags.right)
    if isinstance(flags, ast.Constant):
        return flags.value == 0 and not isinstance(flags.value, bool)
    name = flags.attr if isinstance(flags, ast.Attribute) else flags.id if isinstance(flags, ast.Name) else ""
    return name in READ_FLAGS and (not isinstance(flags, ast.Attribute) or _dotted(flags.value) == "os")


def _os_call(name: str, call: ast.Call) -> str:
    attr = name.removeprefix("os.")
    if attr.startswith(("path.", "environ.")) or attr in OS_READS or attr in OS_FD_OPS:
        return ""
    if attr == "open":
        flags = call.args[1] if len(call.args) > 1 else next(
            (kw.value for kw in call.keywords if kw.arg == "flags"), None)
        if flags is None or _unreadable(call) or not _read_only_flags(flags):
            return "os.open that may create or write"
        return ""
    return f"{name}()"


def _text(e: ast.expr) -> str | None:
    """The text of a string literal, an f-string's with `{}` for what it holds; None for anything else."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return e.value
    if isinstance(e, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in e.values)
    return None


def _argv_write(node: ast.List | ast.Tuple) -> str:
    """Why an argv list writes files on the host it runs on, or ""."""
    texts = [t for t in map(_text, node.elts) if t is not None]
    named = sorted(WRITE_COMMANDS & set(texts))
    if named:
        return f"an argv naming {named[0]}"
    if "dd" in texts and any(t.startswith("of=") for t in texts):
        return "an argv of dd of="
    for i, e in enumerate(node.elts[:-1]):
        if isinstance(e, ast.Constant) and e.value == "-c" and any(t in SHELLS for t in texts[:i + 1]):
            script = node.elts[i + 1]
            if not (isinstance(script, ast.Constant) and isinstance(script.value, str)):
                return "a shell script held in a variable"
            if _COMMAND_WORD.search(script.value):
                return f"a shell script running {_COMMAND_WORD.search(script.value)[1]}"  # type: ignore[index]
    if any(">" in _HARMLESS_REDIRECT.sub("", t) for t in texts):
        return "an argv with a > redirect"
    return ""


def writes_in(source: str, file: str = "<test>") -> list[Write]:
    """Every construct in `source` that creates, writes or changes a file or a directory other than through the
    guard (see the module)."""
    tree = ast.parse(source)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found: list[Write] = []
    for node in ast.walk(tree):
        what = ""
        if isinstance(node, ast.List | ast.Tuple):
            what = _argv_write(node)
        elif isinstance(node, ast.Name | ast.Attribute) and id(node) not in called and isinstance(node.ctx, ast.Load):
            name = _dotted(node)
            if name in ALIASABLE or (isinstance(node, ast.Attribute) and node.attr in MAKERS | {"write_file"}):
                what = f"{name} named without a call (an alias of a writer)"
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            last = name.rsplit(".", 1)[-1]
            if name in OPENERS:
                target = node.args[0] if node.args else None
                devnull = target is not None and _dotted(target) == "os.devnull"
                if _opener_writes(node, OPENERS[name]) and not devnull:
                    what = f"{name}() for writing"
            elif name in ALWAYS or last in FILE_HANDLERS:
                what = f"{name}()"
            elif name.startswith("os."):
                what = _os_call(name, node)
            elif last == "open":
                if _method_open_writes(node):
                    what = f"{name}() for writing"
            elif name == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) and \
                    node.args[1].value in MAKERS | {"open", "write_file"}:
                what = f"getattr(..., {node.args[1].value!r})"
            elif last == "write_file":
                what = f"{name}() (a transport's write)"
            elif name.startswith("shutil."):
                what = "" if last in SHUTIL_READS else f"{name}()"
            elif name.startswith("tempfile."):
                what = "" if last in TEMPFILE_READS else f"{name}()"
            elif last in MAKERS or last in TEMPFILE:
                what = f"{name}()"
        if what:
            found.append(Write(file, node.lineno, what))  # type: ignore[attr-defined]
    return found


def _allowance(w: Write, source_line: str) -> tuple[str, str] | None:
    if (w.file, "*") in ALLOWED:
        return (w.file, "*")
    return next(((f, text) for f, text in ALLOWED if f == w.file and text in source_line), None)


def _walk() -> tuple[list[Write], set[tuple[str, str]]]:
    """The writes not allowed, and the allowances used."""
    found: list[Write] = []
    used: set[tuple[str, str]] = set()
    for top in WALKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SKIPPED):
                continue
            source = path.read_text(encoding="utf-8")
            lines = source.split("\n")
            for w in writes_in(source, rel):
                allowance = _allowance(w, lines[w.line - 1])
                if allowance is None:
                    found.append(w)
                else:
                    used.add(allowance)
    return found, used


def unguarded_writes() -> list[Write]:
    return _walk()[0]


def test_every_write_in_tui_and_widgets_goes_through_the_guard() -> None:
    found = unguarded_writes()
    assert not found, ("writes that go around tui/guard/files.py (use write_private, open_private, open_append, "
                       "private_dir or out_path; on another host the transport's write_file and "
                       "transport/remote_dir.py), or add the site to ALLOWED with why:\n" + "\n".join(map(str, found)))


def test_every_allowed_site_is_still_there() -> None:
    """An allowance that matches nothing is a hole waiting for the next write at that place: removed, or fixed."""
    stale = set(ALLOWED) - _walk()[1]
    assert not stale, f"ALLOWED names sites that no longer write: {sorted(stale)}"


def test_the_walk_sees_the_tree() -> None:
    """A walk of nothing passes every time: the guard's own module must be where it is, and the walk must reach the
    modules that write through it."""
    assert (ROOT / "tui/guard/files.py").is_file()
    users = [p for p in (ROOT / "tui").rglob("*.py") if "tui.guard.files import" in p.read_text(encoding="utf-8")]
    assert len(users) >= 6, users


@pytest.mark.parametrize("snippet", [
    'open(p, "w")', 'open(p, "a", encoding="utf-8")', 'open(p, mode="x")', 'open(p, "wb")', 'open(p, "ab")',
    'open(p, "r+")', "open(p, mode)", 'p.open("w")', 'Path(p).open(mode="a")',
    'p.write_text("x")', 'p.write_bytes(b"x")', "p.mkdir(parents=True)", "p.touch()", "os.mkdir(p)",
    "os.makedirs(p, exist_ok=True)", "os.open(p, os.O_WRONLY | os.O_CREAT, 0o600)", "os.open(p, FLAGS)",
    "tempfile.mkstemp(dir=d)", "tempfile.mkdtemp()", "tempfile.NamedTemporaryFile()", "mkstemp()",
    "shutil.copy(a, b)", "shutil.copyfile(a, b)", "shutil.move(a, b)", "shutil.copytree(a, b)",
    # the reviewer's list (issue 47, finding 6): each of these went through the old walk
    "os.open(p, os.O_WRONLY | os.O_TRUNC)", "os.open(p, 0o100)", "os.open(p, 64 | 1, 0o644)", 'os.fdopen(fd, "w")',
    'io.FileIO(p, "w")', "open(p, **kw)", "open(*a)", "w = open", "f = io.open", "os.replace(a, b)",
    "os.rename(a, b)", "os.chmod(p, 0o644)", "os.symlink(a, b)", "os.link(a, b)", "os.truncate(p, 0)",
    "logging.FileHandler(p)", "logging.handlers.RotatingFileHandler(p)", 'zipfile.ZipFile(p, "w")',
    "sqlite3.connect(p)", 'transport.run(["mkdir", "-p", d])', 'transport.run(["chmod", "go-rwx", d])',
    'transport.run(["sh", "-c", "cat > $1", "x", p])', 'transport.run(["tee", p])',
    'transport.write_file(p, b"x")', 'run(["sudo", "-n", "install", "-m", "644", a, b])', '["mv", "-f", a, b]',
    '["cp", a, b]', '["ln", "-s", a, b]', '["dd", "if=/dev/zero", f"of={p}"]', 'run(["sh", "-c", SCRIPT, p])',
    'run(["sh", "-c", "mkdir -p \\"$1\\"", "x", d])', "f = p.write_text", 'getattr(p, "write_text")("x")',
    "os.fchmod(fd, 0o644)", "os.unlink(p)", 'tarfile.open(p, "w:gz")', "p.chmod(0o644)", "p.rename(q)",
    "shutil.rmtree(d)",
])
def test_each_way_to_write_is_caught(snippet: str) -> None:
    assert len(writes_in(snippet)) >= 1, snippet


@pytest.mark.parametrize("snippet", [
    "open(p)", 'open(p, "rb")', 'open(p, encoding="ascii")', 'open(os.devnull, "w")', 'p.open("rb")', "p.open()",
    "os.open(p, os.O_RDONLY | os.O_NOFOLLOW)", "os.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=d)",
    "p.read_text()", 'write_private(p, "x")', "open_append(p)", 'sftp.open(path, "rb", block_size=0)',
    "os.write(fd, b)", "os.pwrite(fd, b, 0)", "os.ftruncate(fd, 0)", "os.fstat(fd)", "os.path.join(a, b)",
    'os.environ.get("X")', 'shutil.which("x")', 'run(["systemctl", "cat", unit])',
    """run(["sh", "-c", 'exec "$@" 2>&1 >/dev/null', "x", *argv])""", 'run(["dd", f"if={p}", "bs=1"])',
    "asyncio.open_connection(h, p)", 'text.replace("a", "b")',
])
def test_reads_and_the_guard_are_not(snippet: str) -> None:
    assert writes_in(snippet) == [], snippet


def test_a_write_added_to_a_module_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole walk, on a copy of a real module with one plain write added: found, by file and line."""
    src = (ROOT / "tui/engine/incident_file.py").read_text(encoding="utf-8")
    planted = src + '\n\ndef _leak(p):\n    p.write_text("x")\n'
    (tmp_path / "tui" / "engine").mkdir(parents=True)
    (tmp_path / "tui" / "engine" / "incident_file.py").write_text(planted, encoding="utf-8")
    (tmp_path / "widgets").mkdir()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = unguarded_writes()
    assert [str(w) for w in found] == [f"tui/engine/incident_file.py:{len(planted.split(chr(10))) - 1}: "
                                       "p.write_text()"]
