"""Each preset's declared changes between releases, by preset name (tests/unit/test_release_changes.py holds the
facts of consecutive releases to them: a difference not declared fails, and so does a declaration the facts do
not show)."""

from __future__ import annotations

from collections.abc import Mapping

from tui.lifecycle.presets.release_changes import ReleaseChange
from tui.lifecycle.presets.sglang_changes import CHANGES as SGLANG_CHANGES
from tui.lifecycle.presets.vllm_changes import CHANGES as VLLM_CHANGES

DECLARED: Mapping[str, tuple[ReleaseChange, ...]] = {"sglang": SGLANG_CHANGES, "vllm": VLLM_CHANGES}

__all__ = ["DECLARED"]
