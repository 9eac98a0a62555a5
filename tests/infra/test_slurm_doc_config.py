"""The Slurm configs the README and docs/slurm.md give are configs bringup loads as written (the one in docs/slurm.md
with its commented key uncommented too): a reader who copies one gets a Slurm deployment, not a config error. That
each works on a cluster is tests/e2e/test_slurm_*.py's (the same keys, the test cluster's values)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.config.deployments import SlurmDeployment
from tui.config.settings import load

ROOT = Path(__file__).resolve().parents[2]


def slurm_blocks(page: str) -> list[str]:
    text = (ROOT / page).read_text(encoding="utf-8")
    return [b for b in re.findall(r"^```toml\n(.*?)^```", text, re.S | re.M) if 'manager = "slurm"' in b]


@pytest.mark.parametrize("page", ["README.md", "docs/slurm.md"])
def test_the_documented_slurm_config_loads(tmp_path: Path, page: str) -> None:
    blocks = slurm_blocks(page)
    assert len(blocks) == 1, f"{page}: one Slurm config"
    for text in (blocks[0], blocks[0].replace("# queue_timeout_s", "queue_timeout_s")):
        cfg = tmp_path / "config.toml"
        cfg.write_text(f'state_dir = "{tmp_path / "state"}"\n' + text)
        dep = load(str(cfg)).deployments["k26"]
        assert isinstance(dep, SlurmDeployment), dep
        assert dep.node_count == 2 and dep.gpus_per_node == 8 and "{node_rank}" in dep.command
        assert dep.output_dir.startswith("/") and dep.endpoint == "http://{head}:30000"
    if page == "docs/slurm.md":
        assert dep.queue_timeout == 7200 and dep.ready_timeout_s == 3600
