"""No import circle in tui/ or widgets/: the layers contract of lint-imports keeps layers apart, but two modules of
one layer importing each other (the engine's streams reaching back into core.py, cli/fleet.py <-> cli/follow.py)
pass it. A circle means neither module can be read, tested or moved without the other; this fails naming it.

The graph is grimp's (installed with import-linter): every import of a module, at its top, inside a function or
under TYPE_CHECKING, `from . import x` included. One kind of import is no arrow here: a module's import of its own
package (`tui.lifecycle.presets.sglang` taking `Preset` from `tui.lifecycle.presets`). A package is the face of its
modules: Python has begun running it before any of them, so such an import can never be the far end of a circle
in load order, and the package's lazy look-ups of its modules (`get_preset` asking the registry) are the face
doing its job. Two modules of one package, or of two, importing each other are a circle.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest


def import_cycles(*packages: str) -> list[list[str]]:
    """Each circle of the packages' import graph, as one cycle of module names (the first repeated at the end): the
    shortest way round from the first module of the circle."""
    return [way for way, _ in import_circles(*packages)]


def import_circles(*packages: str) -> list[tuple[list[str], list[str]]]:
    """Each circle of the packages' import graph: the shortest way round from its first module, and every module in
    it (the modules that can all reach each other: Tarjan's strongly connected components)."""
    graph = grimp.build_graph(*packages, cache_dir=None)
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if not m.startswith(i + "."))
             for m in sorted(graph.modules)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(root: str) -> None:  # iterative: a deep import chain must not hit the recursion limit
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1 or node in edges[node]:
                    components.append(sorted(component))

    for m in edges:
        if m not in index:
            visit(m)
    return [(_way_round(edges, c), c) for c in sorted(components)]


def _way_round(edges: dict[str, list[str]], component: list[str]) -> list[str]:
    """The shortest cycle through the component's first module (breadth first, inside the component)."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in edges[node]:
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child in members and child not in came_from:
                    came_from[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start, start]


def test_tui_and_widgets_have_no_import_cycle() -> None:
    circles = import_circles("tui", "widgets")
    assert not circles, "import circles:\n" + "\n".join(
        " -> ".join(way) + (f"  (all of: {', '.join(members)})" if len(members) > 2 else "")
        for way, members in circles)


def _package(root: Path, name: str, modules: dict[str, str]) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for mod, text in modules.items():
        (pkg / f"{mod}.py").write_text(text)


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("planted_")]:
        del sys.modules[name]


def test_a_planted_cycle_is_found_and_named(on_path: Path) -> None:
    """Through a function-level import and a `from . import x`: the two forms a top-level scan would miss."""
    _package(on_path, "planted_cycle", {
        "core": "from . import stream\n",
        "stream": "def run():\n    from planted_cycle.view import show\n    return show\n",
        "view": "from planted_cycle import core\n\ndef show():\n    return core\n",
        "apart": "from planted_cycle import view\n",
    })
    assert import_cycles("planted_cycle") == [
        ["planted_cycle.core", "planted_cycle.stream", "planted_cycle.view", "planted_cycle.core"]]


def test_two_circles_are_named_apart(on_path: Path) -> None:
    _package(on_path, "planted_two", {
        "a": "import planted_two.b\n", "b": "import planted_two.a\n",
        "c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted_two.d import X\n",
        "d": "from planted_two.c import *\nX = 1\n",
    })
    assert import_cycles("planted_two") == [
        ["planted_two.a", "planted_two.b", "planted_two.a"], ["planted_two.c", "planted_two.d", "planted_two.c"]]


def test_a_package_without_a_cycle_passes(on_path: Path) -> None:
    """A module taking a name from its own package, which looks its modules up lazily (the package's face), and
    modules importing in one direction."""
    _package(on_path, "planted_none", {"a": "from . import b\n", "b": "import json\nfrom planted_none import X\n"})
    (on_path / "planted_none" / "__init__.py").write_text("X = 1\n\ndef a():\n    from planted_none import a\n")
    assert import_cycles("planted_none") == []
