"""Configuration: pydantic-settings models, file discovery and one-line error messages.

Sources, strongest first: command-line overrides, `BRINGUP_...` environment variables (nested with `__`, e.g.
`BRINGUP_UI__REFRESH_HZ=4`), then the TOML file found by `discover()`. A deployment named `demo` (the embedded
simulated SGLang server) always exists so that `bringup demo` works with no config at all.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from tui.lifecycle.presets import FlagSpec, preset_names

DEMO = "demo"
_TOML_PATH: Path | None = None  # the file the settings class reads; set only inside load()
_HOST_PORT = re.compile(r"[^:]+:\d+")  # host:port (an IPv6 address has more than one colon)
DEFAULT_DEMO_PORT = 30999

#: a number of seconds: more than zero, and finite (a NaN or an infinity is no deadline anyone meant)
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: a GPU index on its host
GpuIndex = Annotated[int, Field(ge=0)]


class ConfigError(Exception):
    """A config problem, phrased for the user: names the file, the key and what is wrong."""


def demo_port() -> int:
    """The built-in demo's port: $BRINGUP_DEMO_PORT, else 30999. A value that is no port is a ConfigError naming the
    variable (one line, exit 2), raised by load(), never at import: `bringup --version` works whatever it says."""
    text = os.environ.get("BRINGUP_DEMO_PORT", "").strip()
    if not text:
        return DEFAULT_DEMO_PORT
    try:
        port = int(text, 10)
    except ValueError:
        raise ConfigError(f"BRINGUP_DEMO_PORT (environment): {text!r} is not a port number (1-65535)") from None
    if not 1 <= port <= 65535:
        raise ConfigError(f"BRINGUP_DEMO_PORT (environment): {text} is out of range: a port is 1-65535")
    return port


def _demo_port_or_default() -> int:
    try:
        return demo_port()
    except ConfigError:  # said by load(), as one line, by every command that reads the config
        return DEFAULT_DEMO_PORT


#: the demo's port as help texts name it (read at import; load() checks the variable and uses demo_port())
DEMO_PORT = _demo_port_or_default()


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to a mistyped one, or "": one wording for an unknown
    deployment, config key or server flag."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


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


def _gpu_list(v: object) -> object:
    """`gpus`: a list, or "all" (also from the environment: BRINGUP_DEPLOYMENTS__K26__GPUS='[0, 1]' or 0,1)."""
    if not isinstance(v, str):
        return v
    text = v.strip()
    if text.lower() == "all":
        return []  # every GPU on the host, as with no list at all
    try:
        parsed = json.loads(text) if text.startswith("[") else [int(x) for x in text.split(",")]
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        return parsed
    raise ValueError(f'a list of GPU indices such as [0, 1, 2, 3], or "all"; not {v!r}')


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
        return _gpu_list(v)

    @field_validator("command", mode="before")
    @classmethod
    def _argv_list(cls, v: object) -> object:
        if isinstance(v, str):
            raise ValueError(f'an argv list such as {json.dumps(v.split()[:3])[:-1]}, ...], not a shell string')
        return v


class DeploymentConfig(Strict):
    host: str = "local"
    manager: Literal["systemd", "process", "none", "docker", "compose"] = "process"
    unit: str = ""
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    #: docker/compose: the container engine's CLI on the host (podman where its CLI agrees)
    engine: Literal["docker", "podman"] = "docker"
    #: docker: the container's name (compose: found by the project and service when empty)
    container: str = ""
    #: docker: the image and `docker run` options to create the container with when it does not exist
    #: (its command is `command`); an existing container is recreated from its own configuration
    image: str = ""
    run_args: list[str] = Field(default_factory=list)
    #: compose: the project directory (holding docker-compose.yml) and the service
    compose_dir: str = ""
    service: str = ""
    #: compose: the Compose CLI (default: docker-compose, or podman-compose with engine = "podman")
    compose_command: list[str] = Field(default_factory=list)
    preset: str = "sglang"
    endpoint: str = "http://127.0.0.1:30000"
    #: the GPUs the server uses; empty (or "all", the default) means every GPU on the host
    gpus: Annotated[list[GpuIndex], NoDecode] = Field(default_factory=list)  # NoDecode: "all" from the env too
    #: flags shown first in the flags panel (default: every flag the preset knows)
    flags: list[str] = Field(default_factory=list)
    extra_flags: list[FlagConfig] = Field(default_factory=list)
    #: seconds to wait for the old run's GPU memory to be released before giving up a restart
    release_timeout_s: Seconds = 600.0
    #: when the host's GPU readings cannot be had at all (nvidia-smi missing, hanging, not permitted), a restart,
    #: a stop and every sweep configuration wait for them up to release_timeout_s and then refuse: no readings is
    #: no evidence of release. Set this to accept the risk of a CUDA OOM: start (or call the stop done) this many
    #: seconds after the old run's processes are gone, without readings. Unset: refuse.
    unverified_release_grace_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    #: memory (MiB per GPU) above the pre-start baseline still counted as released
    release_tolerance_mib: float = Field(default=1024.0, ge=0, allow_inf_nan=False)
    stop_timeout_s: Seconds = 120.0
    #: process: the cap of one run's log on disk, MiB (its head kept, one previous part, the live file)
    log_max_mib: int = Field(default=256, ge=3)
    ready_timeout_s: Seconds = 1800.0
    #: roll back to the last flags that reached ready when a restart fails
    auto_rollback: bool = False
    #: options (by prefix, e.g. "--sim-") the lifecycle panel leaves out of the command line it shows
    hide_flags: list[str] = Field(default_factory=list)
    #: this deployment's STALLED threshold, when not `probe.stall_after_s` (a server slower or faster than most:
    #: the demo's runs at its time scale)
    stall_after_s: Seconds | None = None
    #: the nodes of a deployment that spans several hosts, head first (empty: one node, `host`)
    nodes: list[NodeConfig] = Field(default_factory=list)
    #: flags whose value is each node's own, besides those the preset knows (SGLang `--node-rank`, ...)
    node_flags: list[str] = Field(default_factory=list)

    @property
    def host_label(self) -> str:
        """The host as the console and the CLI name it: the built-in demo's host is this machine; a deployment over
        several nodes is on each node's host, head first."""
        if len(self.nodes) > 1:
            return ",".join(dict.fromkeys(n.host for n in self.nodes))
        return "local" if self.host == "demo-host" else self.host

    @field_validator("command", "run_args", "compose_command", mode="before")
    @classmethod
    def _argv_list(cls, v: object) -> object:
        if isinstance(v, str):  # never split here: a shell's quoting rules are exactly what bringup keeps out
            raise ValueError(f'an argv list such as {json.dumps(v.split()[:3])[:-1]}, ...], not a shell string')
        return v

    @field_validator("gpus", mode="before")
    @classmethod
    def _all_gpus(cls, v: object) -> object:
        return _gpu_list(v)

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, v: str) -> str:
        if v not in preset_names():
            raise ValueError(f"unknown preset {v!r}; known presets: {', '.join(preset_names())}")
        return v

    @field_validator("endpoint")
    @classmethod
    def _http(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"endpoint must start with http:// or https://, got {v!r}")
        try:
            url = urlsplit(v)
            port = url.port
        except ValueError:  # `:99999`, `:abc`
            port = 0
        if port == 0:
            raise ValueError(f"endpoint {v!r}: its port must be a number 1-65535")
        if not url.hostname:
            raise ValueError(f"endpoint {v!r} names no host (http://HOST:PORT)")
        return v.rstrip("/")

    @property
    def multinode(self) -> bool:
        return len(self.nodes) > 1

    @model_validator(mode="after")
    def _manager_needs(self) -> DeploymentConfig:
        if self.nodes:
            return self._nodes_need()
        if self.manager == "systemd" and not self.unit:
            raise ValueError("manager = 'systemd' needs unit = 'NAME.service'")
        if self.manager == "process" and not self.command:
            raise ValueError("manager = 'process' needs command = ['program', 'arg', ...]")
        return self._container_needs()

    def _container_needs(self) -> DeploymentConfig:
        if self.manager == "docker" and not self.container:
            raise ValueError("manager = 'docker' needs container = 'NAME' (and image = '...' with command = [...] "
                             "to let bringup create it)")
        if self.manager == "docker" and self.image and not self.command:
            raise ValueError("image = ... needs command = ['program', 'arg', ...]: the container's command")
        if self.manager == "compose" and not (self.compose_dir and self.service):
            raise ValueError("manager = 'compose' needs compose_dir = '/path/to/project' and service = 'NAME'")
        if self.manager not in ("docker", "compose"):
            for key in ("container", "image", "run_args", "compose_dir", "service"):
                if key in self.model_fields_set:
                    raise ValueError(f"{key} is for manager = 'docker' or 'compose', not {self.manager!r}")
        return self

    def _nodes_need(self) -> DeploymentConfig:
        if self.manager not in ("systemd", "process"):
            raise ValueError(f"nodes: a deployment over several nodes needs manager = 'systemd' or 'process', "
                             f"not {self.manager!r}")
        if self.gpus:
            raise ValueError("nodes: give each node its own gpus = [...], not the deployment's")
        if "host" in self.model_fields_set and self.host != self.nodes[0].host:
            raise ValueError(f"host = {self.host!r} but the first node (the head, which serves HTTP) is on "
                             f"{self.nodes[0].host!r}; leave host out")
        seen: set[tuple[str, str]] = set()
        for i, n in enumerate(self.nodes):
            what = f"nodes[{i}] (host {n.host!r})"
            if self.manager == "systemd" and not (n.unit or self.unit):
                raise ValueError(f"{what}: manager = 'systemd' needs unit = 'NAME.service' (the node's or the "
                                 "deployment's)")
            if self.manager == "process" and not n.command:
                raise ValueError(f"{what}: manager = 'process' needs the node's own command = [...]")
            ident = (n.host, n.unit or self.unit or str(i))
            if self.manager == "systemd" and ident in seen:
                raise ValueError(f"{what}: the same unit on the same host twice")
            seen.add(ident)
        self.host = self.nodes[0].host
        if self.manager == "systemd" and not self.unit:
            self.unit = self.nodes[0].unit
        return self


class ProbeConfig(Strict):
    interval_s: Seconds = 1.0
    timeout_s: Seconds = 5.0
    generation_tokens: int = Field(4, ge=1, le=64)
    stall_after_s: Seconds = 60.0
    #: once ready and its counters show it serving (or idle by its own gauges), one generation this often and no
    #: /health in between: liveness is proven by the counters, and every probe is an access line in the server's log
    ready_interval_s: Seconds = 30.0


class UIConfig(Strict):
    #: panels redraw at this rate; a phase change or a log line is shown as it arrives, whatever the rate
    refresh_hz: float = Field(1.0, gt=0, le=30, allow_inf_nan=False)
    theme: str = "textual-dark"
    #: action name -> key, e.g. {restart = "R"}; merged over the defaults
    keys: dict[str, str] = Field(default_factory=dict)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BRINGUP_", env_nested_delimiter="__", extra="forbid")

    read_only: bool = False
    #: `bringup serve`: consoles running at once (each an engine and, remotely, an SSH connection); one more is refused
    serve_max_sessions: int = Field(default=4, ge=1, le=64)
    state_dir: str = ""
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    deployments: dict[str, DeploymentConfig] = Field(default_factory=dict)
    probe: ProbeConfig = Field(default_factory=ProbeConfig)  # type: ignore[arg-type]
    ui: UIConfig = Field(default_factory=UIConfig)  # type: ignore[arg-type]
    #: set by load(): the config file read, whether files were searched for at all, whether the file was named
    #: (--config, $BRINGUP_CONFIG) rather than found, and the files found but passed over for setting nothing
    _config_file: Path | None = PrivateAttr(default=None)
    _searched: bool = PrivateAttr(default=False)
    _named: bool = PrivateAttr(default=False)
    _passed_over: tuple[Path, ...] = PrivateAttr(default=())

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if _TOML_PATH is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=_TOML_PATH))
        return tuple(sources)

    # ------------------------------------------------------------------ helpers

    @property
    def config_file(self) -> Path | None:
        """The config file load() read (None: none was found, or the settings were built in code)."""
        return self._config_file

    def config_source(self) -> str:
        """Which file these settings came from, in words, for every header and every "nothing configured": a
        user who wrote one file while another one won must be able to see it. The path is absolute (which
        ./config.toml), and a file found but passed over for setting nothing (the checkout's commented example)
        is named too."""
        skipped = "; ".join(f"{_absolute(p)} passed over: it sets nothing, only comments" for p in self._passed_over)
        if self._config_file is not None:
            return f"config: {_absolute(self._config_file)}" + (f" ({skipped})" if skipped else "")
        if self._searched:
            return (f"no config file found (looked at --config, $BRINGUP_CONFIG, ./config.toml, "
                    f"{xdg_config_file()}" + (f"; {skipped}" if skipped else "") + ")")
        return "config: built in"

    def state_path(self) -> Path:
        if self.state_dir:
            return Path(self.state_dir).expanduser()
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "bringup"

    def host(self, name: str) -> HostConfig:
        if name in self.hosts:
            return self.hosts[name]
        if name == "local":
            return HostConfig()
        raise ConfigError(f"unknown host {name!r} (define [hosts.{name}] in the config)")

    def deployment(self, name: str | None) -> tuple[str, DeploymentConfig]:
        if name is None:
            real = [n for n in self.deployments if n != DEMO]
            name = real[0] if len(real) == 1 else DEMO if not real else ""
            if not name:
                raise ConfigError("several deployments are configured; name one: " + ", ".join(real))
        try:
            return name, self.deployments[name]
        except KeyError:
            raise ConfigError(self._unknown_deployment(name)) from None

    def _unknown_deployment(self, name: str) -> str:
        known = ", ".join(self.deployments) or "none"
        msg = f"unknown deployment {name!r}" + did_you_mean(name, self.deployments)
        msg += f"; configured: {known}"
        nothing = not any(n != DEMO for n in self.deployments)
        # the file, unless the user named it and it configures deployments: one found by searching (or none found)
        # may not be the one the user edited
        if self._searched and (nothing or not self._named or self._config_file is None):
            msg += "; " + self.config_source()
        return msg


def _absolute(path: Path) -> Path:
    """A path as the user should read it in a message: absolute, which ./config.toml it is."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


def demo_deployment(state_dir: Path, scenario: str = "", time_scale: float = 1.0,
                    port: int | None = None) -> tuple[HostConfig, DeploymentConfig]:
    """The built-in demo: the simulated SGLang server as a `process` deployment on this machine (on
    $BRINGUP_DEMO_PORT's port unless `port` is given)."""
    port = demo_port() if port is None else port
    sim_state = str(state_dir / "demo" / "sim-gpus")
    cmd = [sys.executable, "-u", "-m", "tui.sim", "--model-path", "moonshotai/Kimi-K2.6", "--tp-size", "8",
           "--ep-size", "8", "--host", "127.0.0.1", "--port", str(port), "--enable-metrics", "--sim-load", "4",
           "--sim-state-dir", sim_state, "--time-scale", f"{time_scale:g}"]
    if scenario == "dflash-graph-crash":  # the K2.6 DFlash configuration, spelled out so the flags panel shows it
        cmd += ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "z-lab/Kimi-K2.6-DFlash",
                "--speculative-dflash-block-size", "8"]
    if scenario:
        cmd += ["--scenario", scenario]
    host = HostConfig(gpu_source="nvidia-smi",
                      nvidia_smi=[sys.executable, "-m", "tui.sim.nvidia_smi", "--sim-state-dir", sim_state])
    dep = DeploymentConfig(host="demo-host", manager="process", command=cmd, preset="sglang",
                           hide_flags=["--sim-", "--time-scale", "--scenario"],  # the simulator's own
                           endpoint=f"http://127.0.0.1:{port}", gpus=list(range(8)),
                           release_timeout_s=120.0, release_tolerance_mib=512.0, stop_timeout_s=30.0,
                           # the simulated minute runs at the time scale, and so does the time it takes to stall
                           stall_after_s=max(1.0, 60.0 * time_scale) if time_scale != 1.0 else None)
    return host, dep


def discover(explicit: str | None) -> Path | None:
    """The config file to use: --config, $BRINGUP_CONFIG, ./config.toml, $XDG_CONFIG_HOME/bringup/config.toml."""
    return find_config(explicit)[0]


def find_config(explicit: str | None) -> tuple[Path | None, bool, tuple[Path, ...]]:
    """The config file to use, whether it was named (--config, $BRINGUP_CONFIG) rather than found, and the files
    found but passed over. A file named is used as it is. Of those searched for (./config.toml, then
    $XDG_CONFIG_HOME/bringup/config.toml), one that sets nothing (empty, or every key commented out: the
    checkout's own config.toml, an example) is passed over for the next: a user's ~/.config/bringup/config.toml is
    not shadowed by an example in the directory bringup runs from."""
    for given, source in ((explicit, "--config"), (os.environ.get("BRINGUP_CONFIG"), "$BRINGUP_CONFIG")):
        if given:
            p = Path(given).expanduser()
            if not p.is_file():
                raise ConfigError(f"{_absolute(p)}: config file not found (from {source})")
            return p, True, ()
    passed: list[Path] = []
    for p in (Path("config.toml"), xdg_config_file()):
        if not p.is_file():
            continue
        if not _sets_nothing(p):
            return p, False, tuple(passed)
        passed.append(p)
    return None, False, tuple(passed)


def _sets_nothing(path: Path) -> bool:
    """Whether a file parses to an empty table (a file that cannot be read or parsed sets something: it is used, so
    that its problem is said)."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8")) == {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def xdg_config_file() -> Path:
    """$XDG_CONFIG_HOME/bringup/config.toml ($XDG_CONFIG_HOME defaults to ~/.config); one place for discovery
    and for the error that lists where bringup looked."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "bringup" / "config.toml"


def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _env_source(loc: tuple[Any, ...]) -> str | None:
    """The BRINGUP_* variable behind a problem at `loc`, if one is: the file is not to blame for the environment
    (BRINGUP_DEPLOYMENTS__K26__ENDPOINT alone makes a deployment k26 that has no manager or command)."""
    parts = [str(p).lower() for p in loc]
    for var in sorted(os.environ):
        if not var.startswith("BRINGUP_") or var == "BRINGUP_CONFIG":
            continue
        path = var.removeprefix("BRINGUP_").lower().split("__")
        n = min(len(path), len(parts))
        if n and path[:n] == parts[:n]:
            return var
    return None


def _close_key(loc: tuple[Any, ...]) -> str:
    """`did you mean` for an unknown key, among the keys of the section it is in."""
    if not loc:
        return ""
    section: type[BaseModel] = Settings
    for part in loc[:-1]:
        if part in section.model_fields:
            ann = section.model_fields[part].annotation
            inner = getattr(ann, "__args__", (ann,))[-1]  # dict[str, X] -> X
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                section = inner
    return did_you_mean(str(loc[-1]), section.model_fields)


def _settings_error(e: SettingsError) -> str:
    """pydantic-settings' complaint about a variable that is not the JSON its key needs (`error parsing value for
    field "deployments" from source "EnvSettingsSource"`), naming the variable (it names only the top-level key)."""
    m = re.search(r'field "([^"]+)"', str(e))
    if m is None:
        return f"environment: {e}"
    prefix = f"BRINGUP_{m.group(1)}".upper()
    found = sorted(v for v in os.environ if v.upper() == prefix or v.upper().startswith(prefix + "__"))
    names = " or ".join(found) or prefix
    return (f"environment: {names}: not the JSON its key needs (a table such as '{{\"KEY\": \"value\"}}' or a "
            "list such as '[\"a\", \"b\"]')")


def load(explicit: str | None = None, *, read_only: bool | None = None, scenario: str = "",
         time_scale: float = 1.0) -> Settings:
    """Load and validate the config; every problem becomes a ConfigError with one line per issue, naming the file
    (as an absolute path) or the environment variable."""
    port = demo_port()  # the environment's own variable, checked before anything is read
    path, named, passed_over = find_config(explicit)
    where = str(_absolute(path)) if path else "environment"
    in_file: dict[str, Any] = {}
    if path is not None:
        try:
            in_file = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{where}: not valid TOML: {e}") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{where}: cannot read: {e}") from None
    global _TOML_PATH
    _TOML_PATH = path
    try:
        settings = Settings() if read_only is None else Settings(read_only=read_only)
    except SettingsError as e:  # a BRINGUP_* variable that is not the JSON its key needs
        raise ConfigError(_settings_error(e)) from None
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            key = _loc(err["loc"]) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = "unknown key" + _close_key(err["loc"])
            var = _env_source(err["loc"])
            loc = err["loc"]
            if var and len(loc) >= 2 and loc[0] in ("deployments", "hosts") and \
                    loc[1] not in (in_file.get(loc[0]) or {}):
                # the variable names a deployment (or host) the file does not have: that is the mistake, not
                # the keys such a new one would need
                msg = (f"no {str(loc[0])[:-1]} {loc[1]!r} in {where if path else 'the config'} (a typo in the "
                       f"name? one added from the environment needs all its keys: {msg})")
            source = f"{var} (environment)" if var else where
            msgs.append(f"{source}: {key}: {msg}")
        raise ConfigError("\n".join(msgs)) from None
    finally:
        _TOML_PATH = None
    settings._config_file, settings._searched = path, True
    settings._named, settings._passed_over = named, passed_over
    host, dep = demo_deployment(settings.state_path(), scenario=scenario, time_scale=time_scale, port=port)
    settings.hosts.setdefault("demo-host", host)
    if DEMO not in settings.deployments:
        settings.deployments[DEMO] = dep
    for name, d in settings.deployments.items():
        if d.host != "local" and d.host not in settings.hosts:
            raise ConfigError(f"{where}: deployments.{name}.host: unknown host {d.host!r}; "
                              f"add [hosts.{d.host}] with ssh = \"...\"")
        for i, n in enumerate(d.nodes):
            if n.host != "local" and n.host not in settings.hosts:
                raise ConfigError(f"{where}: deployments.{name}.nodes[{i}].host: unknown host {n.host!r}; "
                                  f"add [hosts.{n.host}] with ssh = \"...\"")
    return settings
