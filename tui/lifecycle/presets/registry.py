"""The registry: every server type bringup knows, one preset each, and the only list of them.

Configuration checks a deployment's `preset` against it, `replay --preset` offers its names, a replay tells which
server wrote a log by each preset's `detection`, and everything else reads a server's knowledge from its preset. A new
server type is a preset module added to `_PRESETS` (ARCHITECTURE.md, "Where to add things");
tests/infra/test_preset_registry.py checks that every registered preset provides what that list asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tui.lifecycle.presets import Preset, sglang, vllm

#: in order: a log that no preset recognises (or recognises as much as another) is the first one's
_PRESETS: tuple[Preset, ...] = (sglang.SGLANG, vllm.VLLM)

PRESETS: Mapping[str, Preset] = MappingProxyType({p.name: p for p in _PRESETS})


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})") from None


def preset_names() -> tuple[str, ...]:
    return tuple(PRESETS)


def display_names() -> tuple[str, ...]:
    """The servers' own names, for messages: ("SGLang", "vLLM")."""
    return tuple(p.display_name for p in PRESETS.values())
