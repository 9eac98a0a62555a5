"""A released wheel's Python sources, read out of the zip without importing or running any of it: the facts
must describe the release as shipped, and a wheel's import-time code needs torch, CUDA and a GPU besides."""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import PurePosixPath


class WheelError(Exception):
    """A wheel that cannot be read as a release of the server asked for (the message is one line)."""


@dataclass
class Package:
    """The .py files of one wheel, by module name; each parsed once, on first use."""

    server: str
    version: str
    wheel_file: str
    sha256: str
    sources: dict[str, str]  # path in the wheel -> text
    modules: dict[str, str] = field(default_factory=dict)  # dotted module name -> path
    _trees: dict[str, ast.Module | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for path in self.sources:
            self.modules[module_name(path)] = path

    def tree(self, module: str) -> ast.Module | None:
        path = self.modules.get(module)
        return self.tree_of(path) if path is not None else None

    def tree_of(self, path: str) -> ast.Module | None:
        if path not in self._trees:
            try:
                self._trees[path] = ast.parse(self.sources[path], filename=path)
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def paths(self) -> list[str]:
        return sorted(self.sources)


def module_name(path: str) -> str:
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def wheel_name_parts(file_name: str) -> tuple[str, str]:
    """(distribution, version) from a wheel's file name (PEP 427: `name-version-...whl`)."""
    stem = PurePosixPath(file_name).name
    if not stem.endswith(".whl"):
        raise WheelError(f"{stem}: not a wheel (the name does not end in .whl)")
    parts = stem[:-4].split("-")
    if len(parts) < 3:
        raise WheelError(f"{stem}: not a wheel file name (name-version-tags.whl)")
    return parts[0].lower().replace("_", "-"), parts[1]


def read_wheel(data: bytes, file_name: str, server: str) -> Package:
    """The package `server` from a wheel's bytes: only its own .py files (no vendored top-level packages)."""
    dist, version = wheel_name_parts(file_name)
    if dist != server:
        raise WheelError(f"{file_name}: a wheel of {dist}, not of {server}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise WheelError(f"{file_name}: not a zip file ({e})") from e
    sources: dict[str, str] = {}
    with zf:
        for info in zf.infolist():
            name = info.filename
            if not name.endswith(".py") or not name.startswith(server + "/"):
                continue
            sources[name] = zf.read(info).decode("utf-8", errors="replace")
    if f"{server}/__init__.py" not in sources:
        raise WheelError(f"{file_name}: has no {server}/__init__.py: not a wheel of {server}")
    return Package(server=server, version=version, wheel_file=PurePosixPath(file_name).name,
                   sha256=hashlib.sha256(data).hexdigest(), sources=sources)
