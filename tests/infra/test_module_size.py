"""No module in tui/ or widgets/ over 450 lines (issue 49): a module that size holds more than one idea, and a newcomer
reads a module whole before changing it. A module that grows past the limit is split by idea (a class's part others
read, a protocol's follow step, a record's stored form), with a name that says what it holds, never by line count.

The one exception is named here with its reason, so that a new one is a decision someone wrote down."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WALKED = ("tui", "widgets")
LIMIT = 450
#: path -> why it may be longer
EXCEPTIONS: dict[str, str] = {
    "tui/sim/server.py": "the reference server's run, one state machine read top to bottom beside the scenario it "
                         "plays (its arguments, routes, GPUs and releases are apart already); an instrument, not "
                         "the product, stdlib only and copied alone to the test hosts",
}


def lines_of(path: Path) -> int:
    """Lines as `wc -l` counts them."""
    return path.read_bytes().count(b"\n")


def over_limit(root: Path, exceptions: dict[str, str]) -> dict[str, int]:
    """Every module under `root`'s walked folders longer than LIMIT and not excepted, with its length."""
    found: dict[str, int] = {}
    for top in WALKED:
        for f in sorted((root / top).rglob("*.py")):
            name = f.relative_to(root).as_posix()
            n = lines_of(f)
            if n > LIMIT and name not in exceptions:
                found[name] = n
    return found


def test_no_module_is_over_the_limit() -> None:
    assert over_limit(ROOT, EXCEPTIONS) == {}, f"over {LIMIT} lines: split each by idea, not by line count"


def test_each_exception_exists_and_is_still_over_the_limit() -> None:
    """An exception that no longer needs to be one is taken off the list (or the file is gone, and so is its
    reason)."""
    for name in EXCEPTIONS:
        path = ROOT / name
        assert path.exists(), name
        assert lines_of(path) > LIMIT, f"{name} is within {LIMIT} lines now: take it off EXCEPTIONS"


def test_the_check_finds_a_module_over_the_limit_and_spares_the_exceptions(tmp_path: Path) -> None:
    (tmp_path / "tui" / "deep").mkdir(parents=True)
    (tmp_path / "widgets").mkdir()
    (tmp_path / "tui" / "deep" / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "tui" / "edge.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    (tmp_path / "widgets" / "excused.py").write_text("x = 1\n" * (LIMIT + 9), encoding="utf-8")
    found = over_limit(tmp_path, {"widgets/excused.py": "a reason"})
    assert found == {"tui/deep/long.py": LIMIT + 1}
