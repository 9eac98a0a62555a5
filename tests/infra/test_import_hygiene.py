"""The engine never imports textual (DESIGN.md, "Layers and data flow"); checked in a fresh interpreter, as
Harlequin does, so that nothing imported earlier by the test session can hide an import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]

MODULES = (
    "tui.engine", "tui.cli", "tui.config.settings", "tui.model", "tui.lifecycle.lines", "tui.lifecycle.reducer",
    "tui.lifecycle.replay", "tui.lifecycle.presets.sglang", "tui.lifecycle.presets.vllm", "tui.ops.restart",
    "tui.lifecycle.flags", "tui.managers.process", "tui.transport.local", "tui.transport.lines", "tui.sim.server",
    "tui.exporter.collector", "tui.cli.exporter",
)
# every module of these packages, including ones added later
PACKAGES = ("tui.collectors", "tui.transport", "tui.lifecycle", "tui.ops", "tui.managers", "tui.engine", "tui.exporter")

_SCRIPT = """
import importlib, json, pkgutil, sys
mods = list(sys.argv[1].split(","))
for pkg in sys.argv[2].split(","):
    p = importlib.import_module(pkg)
    mods += [m.name for m in pkgutil.walk_packages(p.__path__, pkg + ".")]
imported = []
for m in mods:
    importlib.import_module(m)
    imported.append(m)
print(json.dumps({"imported": imported, "textual": sorted(k for k in sys.modules
                  if k == "textual" or k.startswith("textual.") or k.startswith("textual_"))}))
"""


def test_engine_modules_do_not_import_textual() -> None:
    p = subprocess.run([sys.executable, "-c", _SCRIPT, ",".join(MODULES), ",".join(PACKAGES)], cwd=ROOT,
                       capture_output=True, text=True, timeout=slack(120))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    imported = set(out["imported"])
    assert set(MODULES) <= imported
    for name in ("tui.collectors.gpu_smi", "tui.collectors.gpu_nvml", "tui.collectors.metrics",
                 "tui.collectors.probes"):
        assert name in imported
    assert out["textual"] == [], f"textual imported by the engine: {out['textual']}"


def test_the_check_would_notice_textual() -> None:
    # guard against a check that can never fail: importing textual itself must show up
    p = subprocess.run([sys.executable, "-c", _SCRIPT, "textual", "tui.ops"], cwd=ROOT, capture_output=True,
                       text=True, timeout=slack(120))
    assert p.returncode == 0, p.stderr
    assert "textual" in json.loads(p.stdout.strip().splitlines()[-1])["textual"]


def test_a_bringup_command_does_not_load_the_command_line_of_httpx() -> None:
    """httpx loads its own CLI (click, pygments, rich's syntax) whenever click is installed, as it is here (for
    import-linter) and next to SGLang and vLLM: tens of milliseconds at each `bringup` start, never used. Checked
    where click is importable, so the check could fail; and httpx still has its `main`, the stub."""
    script = ("import importlib.util, json, sys; import tui.cli, httpx; "
              "print(json.dumps({'click_installed': importlib.util.find_spec('click') is not None, "
              "'loaded': sorted(m for m in ('click', 'pygments', 'httpx._main', 'rich.syntax') "
              "if sys.modules.get(m) is not None), 'main': callable(httpx.main)}))")
    p = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=slack(120))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["click_installed"], "click is not installed here: this check cannot fail"
    assert out["loaded"] == [] and out["main"], out
