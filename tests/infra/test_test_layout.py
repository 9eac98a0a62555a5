"""The suite's own rules (tests/README.md): each folder one kind of test, a test module never imports another, and
the console's tests read Textual through its public API only.

- A test module that imports another (for a fixture, a helper, a constant) runs that module's import, its skips
  and its fixtures in the importer, and ties two files that look independent: fixtures go in a conftest.py, helpers
  in tests/helpers/.
- Textual's private attributes (`screen._compositor`, `app._notifications`) and modules (`textual.widgets._toast`)
  change between its releases without notice: the tests read the screen through `App.export_screenshot` and
  snapshots, the notifications through `App.notify` (tests/helpers/console_app.py), widgets through `query`.
- tests/unit starts no process, opens no socket, reaches no host and runs no Textual app: it is the part of the
  suite that runs in seconds on any machine, under any load. tests/console drives a Textual app (Pilot or a
  snapshot) and starts no process; what starts one is tests/e2e's.

Each rule is checked on the tests as written and, so that it cannot pass by checking nothing, on a sample that
breaks it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import textual

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
KINDS = ("unit", "console", "e2e", "infra")

#: modules that start processes, reach hosts or drive apps: no unit test imports them
NOT_UNIT_IMPORTS = ("subprocess", "socket", "socketserver", "http.server", "asyncssh", "aiohttp.web", "textual.pilot",
                    "tests.helpers.e2e", "tests.helpers.testhost", "tests.helpers.containers", "tests.helpers.tmux",
                    "tests.helpers.sim_process", "tests.helpers.processes", "tests.helpers.browser",
                    "tests.helpers.pilot", "tests.helpers.console_app", "tests.helpers.fault_harness",
                    "tests.helpers.multinode_hosts", "tests.helpers.preloaded", "tests.helpers.ssh_proxy")
#: calls that start a process or an app
NOT_UNIT_CALLS = ("create_subprocess_exec", "create_subprocess_shell", "run_test", "read_capped", "start_server")
#: fixtures that start processes or reach hosts (tests/conftest.py, tests/e2e/conftest.py)
NOT_UNIT_FIXTURES = ("make_bringup", "testhost", "testhost_ssh", "ssh_config", "conf", "bx_units", "daemon",
                     "make_container", "snap_compare")
#: modules no console test imports: what starts a process is an e2e test
NOT_CONSOLE_IMPORTS = ("subprocess", "tests.helpers.e2e", "tests.helpers.testhost", "tests.helpers.containers",
                       "tests.helpers.tmux", "tests.helpers.sim_process")
#: modules of work in progress that break a rule, with why: each to be moved, then taken out here
WAITING: dict[str, str] = {
}


def suite_modules(kind: str = "") -> Iterator[Path]:
    for path in sorted((TESTS / kind if kind else TESTS).rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every module an import names (anywhere in the file, a function's local import too), `from X import Y` as
    X.Y as well as X: `from tests.e2e import test_remote` imports a test module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.lineno, node.module
            for a in node.names:
                yield node.lineno, f"{node.module}.{a.name}"


def is_test_module(name: str) -> bool:
    """A module of the suite that is not a helper: a test module of a kind's folder, or a conftest."""
    parts = name.split(".")
    return parts[0] == "tests" and (parts[-1] == "conftest" or (
        len(parts) >= 3 and parts[1] in KINDS and parts[2].startswith("test_")))


def imports_of_test_modules(source: str) -> list[str]:
    found: dict[int, str] = {}
    for n, name in imported(ast.parse(source)):
        if is_test_module(name):
            found.setdefault(n, name)  # `from X import Y`: X, not X.Y as well
    return [f"line {n}: {name}" for n, name in found.items()]


def test_no_test_module_imports_another_test_module() -> None:
    found = {rel(p): bad for p in suite_modules() if (bad := imports_of_test_modules(p.read_text()))}
    assert not found, f"fixtures go in a conftest.py, helpers in tests/helpers/: {found}"


def test_the_import_rule_finds_each_way_of_importing_a_test_module() -> None:
    sample = ("from tests.e2e.test_remote import ssh_config\nfrom tests.e2e import test_containers\n"
              "import tests.console.test_snapshots\nfrom tests import conftest\n"
              "def f():\n    from tests.unit.test_eta import ARGV\n"
              "from tests.helpers.wait import until\nfrom tests.helpers import console_states\n")
    assert [x.split(": ")[1] for x in imports_of_test_modules(sample)] == [
        "tests.e2e.test_remote", "tests.e2e.test_containers", "tests.console.test_snapshots", "tests.conftest",
        "tests.unit.test_eta"]


# ------------------------------------------------------------------------------------------ Textual's private API


def private_names(files: list[Path]) -> set[str]:
    """The private names a body of code defines: its `_x` functions, classes, class and module attributes, and
    every `self._x` (or any `obj._x`) it assigns."""
    out: set[str] = set()
    for f in files:
        try:
            tree = ast.parse(f.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for n in ast.walk(tree):
            names: list[str] = []
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [n.name]
            elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                names = [n.attr]
            elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names = [n.id]
            out.update(x for x in names if x.startswith("_") and not x.startswith("__"))
    return out


@cache
def textual_private() -> frozenset[str]:
    """Textual's private names that no code of this repository defines: read on a test's object, they can only
    be Textual's (a name both define, `_tick`, is the repository's own and left to review)."""
    ours = private_names([*ROOT.glob("tui/**/*.py"), *ROOT.glob("widgets/**/*.py"), *TESTS.rglob("*.py")])
    return frozenset(private_names(list(Path(textual.__file__).parent.rglob("*.py"))) - ours)


def private_textual_uses(source: str, private: frozenset[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in private):
            found.append(f"line {node.lineno}: {node.args[1].value!r}")  # getattr(app, "_compositor")
    for n, name in imported(ast.parse(source)):
        parts = name.split(".")
        if parts[0] == "textual" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:]):
            found.append(f"line {n}: import of {name}")
    return sorted(found, key=lambda x: int(x.split(":")[0].split()[1]))


def test_tests_use_no_private_textual_api() -> None:
    private = textual_private()
    assert {"_compositor", "_notifications"} <= private  # the rule's premise: these are Textual's own
    found = {rel(p): bad for p in suite_modules() if (bad := private_textual_uses(p.read_text(), private))}
    assert not found, f"Textual's public API only (tests/helpers/console_app.py): {found}"


def test_the_private_api_rule_finds_attributes_names_and_modules() -> None:
    sample = ("strips = app.screen._compositor.render_strips()\nnotes = list(app._notifications)\n"
              "x = getattr(app, '_compositor')\nfrom textual.widgets._toast import Toast\n"
              "import textual._compositor\nok = app.screen.query('Toast')\n")
    assert private_textual_uses(sample, textual_private()) == [
        "line 1: ._compositor", "line 2: ._notifications", "line 3: '_compositor'",
        "line 4: import of textual.widgets._toast", "line 4: import of textual.widgets._toast.Toast",
        "line 5: import of textual._compositor"]


# ------------------------------------------------------------------------------------------ each folder one kind


def unit_breaches(source: str) -> list[str]:
    tree = ast.parse(source)
    found = [f"line {n}: imports {name}" for n, name in imported(tree)
             if any(name == m or name.startswith(m + ".") for m in NOT_UNIT_IMPORTS)]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in NOT_UNIT_CALLS:
                found.append(f"line {node.lineno}: calls {name}")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            found += [f"line {node.lineno}: {node.name} takes the fixture {a.arg}" for a in node.args.args
                      if a.arg in NOT_UNIT_FIXTURES]
    return found


def console_breaches(source: str) -> list[str]:
    tree = ast.parse(source)
    found = [f"line {n}: imports {name}" for n, name in imported(tree)
             if any(name == m or name.startswith(m + ".") for m in NOT_CONSOLE_IMPORTS)]
    drives = any((isinstance(n, ast.Attribute) and n.attr == "run_test") or (isinstance(n, ast.arg)
                 and n.arg == "snap_compare") for n in ast.walk(tree))
    return found if drives else [*found, "drives no Textual app (run_test or snap_compare): not a console test"]


def test_each_folder_holds_one_kind_of_test() -> None:
    found = {rel(p): bad for p in suite_modules("unit") if p.name.startswith("test_") and rel(p) not in WAITING
             and (bad := unit_breaches(p.read_text()))}
    found |= {rel(p): bad for p in suite_modules("console") if p.name.startswith("test_")
              and (bad := console_breaches(p.read_text()))}
    assert not found, f"unit: no process, socket, host or app; console: an app, no process (tests/README.md): {found}"
    gone = [m for m in WAITING if not (ROOT / m).exists() or not unit_breaches((ROOT / m).read_text())]
    assert not gone, f"moved or fixed: take them out of WAITING: {gone}"


def test_the_kind_rules_find_what_does_not_belong() -> None:
    unit = ("import subprocess\nfrom tests.helpers.pilot import until\n"
            "async def test_a(make_bringup): await asyncio.create_subprocess_exec('x')\n"
            "async def test_b():\n    async with App().run_test() as pilot:\n        pass\n")
    assert unit_breaches(unit) == ["line 1: imports subprocess", "line 2: imports tests.helpers.pilot",
                                   "line 2: imports tests.helpers.pilot.until",
                                   "line 3: test_a takes the fixture make_bringup",
                                   "line 3: calls create_subprocess_exec", "line 5: calls run_test"]
    assert console_breaches("def test_words(): assert plural(1, 'x')\n") == [
        "drives no Textual app (run_test or snap_compare): not a console test"]
    assert console_breaches("import subprocess\nasync def test_a(): await App().run_test()\n") == [
        "line 1: imports subprocess"]
