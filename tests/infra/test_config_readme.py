"""The configuration reference's "simulated server as your own deployment" example (docs/configuration.md), done
as a newcomer does it: its shell block run in the checkout with a home of its own, then bringup run from a directory
outside the checkout (and from the checkout, whose own config.toml must not hide the user's): the deployment starts,
is ready and stops."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.ports import free_port
from tests.helpers.wait import slack

ROOT = Path(__file__).resolve().parents[2]
VENV_PY = ROOT / ".venv" / "bin" / "python"


def _snippet() -> str:
    """The configuration reference's shell block that writes the simulated deployment into the user's config file."""
    doc = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```bash\n(.*?)^```", doc, re.S | re.M)
    found = [b for b in blocks if "[deployments.sim-a]" in b]
    assert len(found) == 1, "docs/configuration.md's sim-a example is one ```bash block"
    return found[0]


def test_the_snippet_uses_no_relative_path() -> None:
    text = _snippet()
    assert '".venv/bin/python"' not in text
    toml = text[text.index("<<EOF"):]
    assert all(a.startswith(("$PY", "/", "-")) or a in ("tui.sim", "tui.sim.nvidia_smi", "8", "31711", "0.1")
               for a in re.findall(r'"([^"]*)"', toml.split("command = ", 1)[1]))


@pytest.mark.skipif(not VENV_PY.exists(), reason="the README's example runs the checkout's .venv")
def test_the_documented_simulated_deployment_works_outside_the_checkout(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_STATE_HOME": str(tmp_path / "state"),
           "BRINGUP_DEMO_PORT": str(free_port())}
    r = subprocess.run(["bash", "-euc", _snippet()], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=slack(60))
    assert r.returncode == 0, r.stderr
    cfg = home / ".config" / "bringup" / "config.toml"
    text = cfg.read_text()
    assert f'"{VENV_PY}"' in text or str(VENV_PY.resolve()) in text, text
    # a port and a GPU state of this test's own, not the README's (a reader may be trying it on this machine)
    port = free_port()
    cfg.write_text(text.replace("31711", str(port)).replace("/tmp/bringup-sim-a", str(tmp_path / "simgpu")))

    def bringup(*args: str, cwd: Path = elsewhere) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tui", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=slack(120), env={**env, "PYTHONPATH": str(ROOT)})

    try:
        r = bringup("start", "sim-a")
        assert r.returncode == 0, r.stdout + r.stderr
        r = bringup("wait", "sim-a", "--timeout", "90")
        assert r.returncode == 0, r.stdout + r.stderr
        # from the checkout too: its config.toml (an example that sets nothing) does not hide the user's file
        r = bringup("status", "sim-a", "--json", cwd=ROOT)
        assert r.returncode == 0 and '"phase": "ready"' in r.stdout, r.stdout + r.stderr
    finally:
        r = bringup("stop", "sim-a", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
