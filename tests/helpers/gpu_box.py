"""One `process` deployment on GPUs 2-5 of a local host (its endpoint never reached), as the engine's picture
and the console's panels read it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import console_states as cs
from tests.helpers.config_toml import ConfigFile
from tests.helpers.ports import free_port
from tui.config.deployments import parse_deployment
from tui.config.parts import HostConfig
from tui.config.settings import Settings, load

NAME = "k26-dflash"


def settings(tmp: Path) -> Settings:
    """One `process` deployment on GPUs 2-5 of a local host; its endpoint is never reached."""
    dep = parse_deployment({"host": "gpu-box", "manager": "process", "command": list(cs.ARGV), "gpus": [2, 3, 4, 5],
                            "endpoint": f"http://127.0.0.1:{free_port()}"})
    return load(str(ConfigFile(state_dir=tmp / "state", hosts={"gpu-box": HostConfig(gpu_source="none")},
                               deployments={NAME: dep}).write(tmp / "config.toml")))
