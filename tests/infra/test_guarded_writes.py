"""Every file bringup writes and every directory it makes goes through tui/guard/files.py (issue 47.1).

The guarantees (no link followed, a fresh O_EXCL temporary name renamed over the target, 0600/0700, a directory
another user can write refused) live in that one module. A write made anywhere else does without them, and the
last round showed how that goes: each fix held at the site it was made, and the next new path (`record --out`,
the sweep's results, `history.lock`) repeated the old pattern. So this walks the syntax tree of `tui/` and
`widgets/` and fails on any other way to create or write a file: `open()` for writing, `Path.open`/`write_text`/
`write_bytes`/`touch`/`mkdir`, `os.open` with O_CREAT (or flags it cannot read), `os.mkdir`/`makedirs`,
`tempfile`'s makers, `shutil`'s copies and moves.

Not walked: `tui/guard/files.py` (the one place), `tui/sim/` and `tui/serverfacts/` (instruments, never product
code: the architecture's import contracts keep them apart). Allowed, each with its reason, in `ALLOWED`.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("tui", "widgets")
SKIPPED = ("tui/guard/files.py", "tui/sim/", "tui/serverfacts/")

#: (file, what) -> why it may write without the guard
ALLOWED: dict[tuple[str, str], str] = {
    ("tui/managers/supervisor.py", "*"): (
        "stdlib-only code sent to the server's host with `python3 -c`: it cannot import bringup; it creates every "
        "file with O_CREAT|O_EXCL|O_NOFOLLOW 0600 and its directories 0700 itself"),
    ("tui/transport/ssh.py", "sftp.open"): (
        "a file on the remote host, over SFTP: a fresh random name created exclusively (FXF_EXCL) and renamed over"),
    ("tui/transport/ssh.py", "sftp.makedirs"): "the directory of a file on the remote host, over SFTP",
}

WRITE_MODE_CHARS = set("wax+")
MAKERS = {"write_text", "write_bytes", "touch", "mkdir", "makedirs", "mkfifo", "mknod", "symlink_to",
          "hardlink_to", "link_to"}
TEMPFILE = {"mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
            "TemporaryDirectory"}
SHUTIL = {"copy", "copy2", "copyfile", "copytree", "copyfileobj", "move"}


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


def _mode(call: ast.Call, pos: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "mode":
            return kw.value
    return call.args[pos] if len(call.args) > pos else None


def _writes_by_mode(mode: ast.expr | None) -> bool:
    """A mode that writes, or one this cannot read (a variable): both are writes until shown otherwise."""
    if mode is None:
        return False
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODE_CHARS & set(mode.value))
    return True


def _creates(flags: ast.expr) -> bool:
    """os.open's flags name O_CREAT, or something other than os.O_* constants (which may hide it)."""
    for node in ast.walk(flags):
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if name == "O_CREAT":
            return True
        if isinstance(node, ast.Name) and node.id != "os" and not node.id.startswith("O_"):
            return True
    return False


def writes_in(source: str, file: str = "<test>") -> list[Write]:
    """Every call in `source` that creates or writes a file or a directory other than through the guard."""
    found: list[Write] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        last = name.rsplit(".", 1)[-1]
        what = ""
        if name == "open":
            target = node.args[0] if node.args else None
            if _writes_by_mode(_mode(node, 1)) and not (target is not None and _dotted(target) == "os.devnull"):
                what = "open() for writing"
        elif last == "open" and name != "os.open":
            if _writes_by_mode(_mode(node, 0)):
                what = f"{name}() for writing"
        elif name == "os.open":
            flags = node.args[1] if len(node.args) > 1 else next(
                (kw.value for kw in node.keywords if kw.arg == "flags"), None)
            if flags is None or _creates(flags):
                what = "os.open with O_CREAT"
        elif last in MAKERS or last in TEMPFILE or (name.startswith("shutil.") and last in SHUTIL):
            what = f"{name}()"
        if what:
            found.append(Write(file, node.lineno, what))
    return found


def _allowed(w: Write, source_line: str) -> bool:
    if (w.file, "*") in ALLOWED:
        return True
    return any(f == w.file and what in source_line for f, what in ALLOWED)


def unguarded_writes() -> list[Write]:
    found: list[Write] = []
    for top in WALKED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in SKIPPED):
                continue
            source = path.read_text(encoding="utf-8")
            lines = source.splitlines()
            found += [w for w in writes_in(source, rel) if not _allowed(w, lines[w.line - 1])]
    return found


def test_every_write_in_tui_and_widgets_goes_through_the_guard() -> None:
    found = unguarded_writes()
    assert not found, ("writes that go around tui/guard/files.py (use write_private, open_private, open_append, "
                       "private_dir or out_path):\n" + "\n".join(map(str, found)))


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
])
def test_each_way_to_write_is_caught(snippet: str) -> None:
    assert len(writes_in(snippet)) == 1, snippet


@pytest.mark.parametrize("snippet", [
    "open(p)", 'open(p, "rb")', 'open(p, encoding="ascii")', 'open(os.devnull, "w")', 'p.open("rb")',
    "os.open(p, os.O_RDONLY | os.O_NOFOLLOW)", "p.read_text()", 'write_private(p, "x")', "open_append(p)",
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
    assert [str(w) for w in found] == [f"tui/engine/incident_file.py:{len(planted.splitlines())}: p.write_text()"]
