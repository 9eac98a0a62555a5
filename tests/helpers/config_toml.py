"""Config files for the tests, built from bringup's own config model (tui/config/) and written as TOML.

Building the hosts and deployments as `HostConfig` / `DeploymentConfig` validates them as bringup will, so a test's
config cannot drift from the model unnoticed (a renamed key fails here, at construction, not as a puzzling
`unknown key` in the test's subprocess). Only the keys a test sets are written (`exclude_unset`): the file reads like
one a user would write, and the defaults stay bringup's to decide.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.config.deployments import DeploymentConfig
from tui.config.parts import HostConfig
from tui.config.settings import ProbeConfig

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(k: str) -> str:
    return k if _BARE.match(k) else json.dumps(k)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str | Path):
        return json.dumps(str(v))  # a JSON string is a valid TOML basic string
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML for {v!r}")


def _table(header: str, values: Mapping[str, Any]) -> str:
    return f"[{header}]\n" + "".join(f"{_key(k)} = {_value(v)}\n" for k, v in values.items())


@dataclass
class ConfigFile:
    """One bringup config file. The deployments come last, so that lines a test appends to the file land in the
    last deployment's table (as a user editing the file at its end would)."""

    state_dir: Path | str = ""
    hosts: dict[str, HostConfig] = field(default_factory=dict)
    deployments: dict[str, DeploymentConfig] = field(default_factory=dict)
    probe: ProbeConfig | None = None

    def toml(self) -> str:
        parts = [f"state_dir = {_value(self.state_dir)}\n"] if self.state_dir else []
        if self.probe is not None:
            parts.append(_table("probe", self.probe.model_dump(exclude_unset=True)))
        for section, models in (("hosts", self.hosts), ("deployments", self.deployments)):
            parts += [_table(f"{section}.{_key(n)}", m.model_dump(exclude_unset=True)) for n, m in models.items()]
        return "\n".join(parts)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.toml(), encoding="utf-8")
        return path
