"""The parts a configuration is built of: its number types (every number of the config is `Real` or `Whole`, as
tui/guard/numbers.py takes a number from outside), the strict model every table is (an unknown key is an error, never
ignored), a host (`[hosts.X]`), a flag the user declares, a node of a deployment over several hosts, and the lists a
table gives (GPUs, argv lists) as TOML or an environment variable writes them. The deployment models that are built of
them are deployments.py's; the settings that hold them, settings.py's.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_settings import NoDecode

from tui.guard.numbers import MAX_SECONDS, config_real, config_whole, whole
from tui.lifecycle.presets import FlagSpec

_HOST_PORT = re.compile(r"[^:]+:\d+")  # host:port (an IPv6 address has more than one colon)

#: every number of the config is one of these two (tests/infra/test_config_numbers.py holds every model to it): a
#: number as tui/guard/numbers.py takes one from outside, a TOML number, never `true` (once a 1 s timeout) nor
#: `"10"` (once 10), nor an infinity or a NaN; from the environment, where every value is text, its digits
Real = Annotated[float, BeforeValidator(config_real)]
Whole = Annotated[int, BeforeValidator(config_whole)]
#: a number of seconds: more than zero, and finite (a NaN or an infinity is no deadline anyone meant), up to a year
Seconds = Annotated[Real, Field(gt=0, le=MAX_SECONDS)]
#: a GPU index on its host
GpuIndex = Annotated[Whole, Field(ge=0, le=4095)]


class ConfigError(Exception):
    """A config problem, phrased for the user: names the file, the key and what is wrong."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HostConfig(Strict):
    """Where servers run. `ssh` is a host name or a Host alias of the ssh_config file; empty means this machine.

    User, Port, ProxyJump and IdentityFile are given in that file (~/.ssh/config, or the file named by
    `ssh_config`), never in `ssh` itself: `user@host` and `host:port` are not understood there.
    """

    ssh: str = ""
    #: an ssh_config file read instead of ~/.ssh/config (aliases, User, Port, ProxyJump, IdentityFile...)
    ssh_config: str = ""
    sudo: bool = False
    #: how to read GPUs: auto (NVML locally, else nvidia-smi), nvml, nvidia-smi, none
    gpu_source: Literal["auto", "nvml", "nvidia-smi", "none"] = "auto"
    nvidia_smi: list[str] = Field(default_factory=lambda: ["nvidia-smi"])
    #: where the process manager keeps pid files, logs and flag history (default: bringup's state dir)
    state_dir: str = ""

    @field_validator("ssh")
    @classmethod
    def _plain_destination(cls, v: str) -> str:
        if "@" in v or _HOST_PORT.fullmatch(v):
            raise ValueError(f"{v!r}: user@ and :port are not understood here; put User and Port in a Host block "
                             "of ~/.ssh/config (or of the file named by ssh_config) and give its alias")
        return v

    @property
    def is_local(self) -> bool:
        return not self.ssh


class FlagConfig(Strict):
    """A server option the preset does not know, declared by the user."""

    name: str
    kind: Literal["bool", "int", "float", "str", "choice"] = "bool"
    help: str = ""
    choices: list[str] = Field(default_factory=list)
    key: str = ""

    def spec(self) -> FlagSpec:
        return FlagSpec(self.name.lstrip("-"), self.kind, self.help, tuple(self.choices), key=self.key)


def gpu_list(v: object) -> object:
    """`gpus`: a list, or "all" (also from the environment: BRINGUP_DEPLOYMENTS__K26__GPUS='[0, 1]' or 0,1)."""
    if not isinstance(v, str):
        return v
    text = v.strip()
    if text.lower() == "all":
        return []  # every GPU on the host, as with no list at all
    try:
        parsed = json.loads(text) if text.startswith("[") else [whole(x, "gpus", text=True) for x in text.split(",")]
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return parsed
    raise ValueError(f'a list of GPU indices such as [0, 1, 2, 3], or "all"; not {v!r}')


def argv_list(v: object) -> object:
    """An argv list; never split here: a shell's quoting rules are exactly what bringup keeps out."""
    if isinstance(v, str):
        raise ValueError(f'an argv list such as {json.dumps(v.split()[:3])[:-1]}, ...], not a shell string')
    return v


class NodeConfig(Strict):
    """One node of a deployment that spans several hosts. The first node is the head: it serves HTTP."""

    host: str
    #: the node's own unit (systemd; default: the deployment's `unit`) or command line (process)
    unit: str = ""
    command: list[str] = Field(default_factory=list)
    gpus: Annotated[list[GpuIndex], NoDecode] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: whether flags edited for the deployment are written to this node's command line (false for a node that
    #: runs something else, a `ray start --block` worker)
    flags: bool = True

    @field_validator("gpus", mode="before")
    @classmethod
    def _all_gpus(cls, v: object) -> object:
        return gpu_list(v)

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: object) -> object:
        return argv_list(v)
