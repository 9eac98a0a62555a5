"""Configuration: the settings, file discovery and one-line error messages (a deployment's models are in
deployments.py, the parts they are built of in parts.py, the built-in demo's in demo.py).

Sources, strongest first: command-line overrides, `BRINGUP_...` environment variables (nested with `__`, e.g.
`BRINGUP_UI__REFRESH_HZ=4`), then the TOML file found by `discover()`. A deployment named `demo` (the embedded
simulated SGLang server) always exists so that `bringup demo` works with no config at all.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, ValidationError
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from tui.config.demo import DEMO, demo_deployment, demo_port
from tui.config.deployments import MANAGERS, Deployment, DeploymentConfig, unknown_manager
from tui.config.parts import ConfigError, HostConfig, Real, Seconds, Strict, Whole
from tui.guard.numbers import FromText
from tui.guard.redact import BOOK

_TOML_PATH: Path | None = None  # the file the settings class reads; set only inside load()
#: the names of the file's deployments and hosts, by section: what an environment variable's name is matched to
#: (`env_names`); set only inside load()
_FILE_NAMES: dict[str, tuple[str, ...]] = {}


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the known name closest to a mistyped one, or "": one wording for an unknown
    deployment, config key or server flag."""
    close = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class ProbeConfig(Strict):
    interval_s: Seconds = 1.0
    timeout_s: Seconds = 5.0
    generation_tokens: Whole = Field(4, ge=1, le=64)
    stall_after_s: Seconds = 60.0
    #: once ready and its counters show it serving (or idle by its own gauges), one generation this often and no
    #: /health in between: liveness is proven by the counters, and every probe is an access line in the server's log
    ready_interval_s: Seconds = 30.0


class UIConfig(Strict):
    #: panels redraw at this rate; a phase change or a log line is shown as it arrives, whatever the rate
    refresh_hz: Real = Field(1.0, gt=0, le=30)
    theme: str = "textual-dark"
    #: action name -> key, e.g. {restart = "R"}; merged over the defaults
    keys: dict[str, str] = Field(default_factory=dict)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BRINGUP_", env_nested_delimiter="__", extra="forbid")

    read_only: bool = False
    #: `bringup serve`: consoles running at once (each an engine and, remotely, an SSH connection); one more is refused
    serve_max_sessions: Whole = Field(default=4, ge=1, le=64)
    state_dir: str = ""
    hosts: dict[str, HostConfig] = Field(default_factory=dict)
    deployments: dict[str, Deployment] = Field(default_factory=dict)
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
        sources: list[PydanticBaseSettingsSource] = [init_settings, _FromEnvironment(settings_cls, env_settings)]
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
                # every name the command takes, the built-in demo's too (it is one: `bringup status demo`)
                demo = [f"{DEMO} (the built-in demo)"] if DEMO in self.deployments else []
                raise ConfigError("several deployments are configured; name one: " + ", ".join([*real, *demo]))
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


class _FromEnvironment(PydanticBaseSettingsSource):
    """The environment's settings, every text in them marked `FromText` (tui/guard/numbers.py): a variable's value
    is text by nature, so a number in it is read from its digits (`BRINGUP_UI__REFRESH_HZ=4`), where the same text
    in TOML (`refresh_hz = "4"`) is refused (a TOML number has no quotes). Pydantic makes the marked text plain
    `str` again wherever text is wanted."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self.inner.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        return env_names(_marked(self.inner()), _FILE_NAMES)


def _name_key(name: str) -> str:
    """A deployment's or host's name as an environment variable can spell it: no variable name takes a hyphen (a
    shell refuses `export BRINGUP_DEPLOYMENTS__K2-6__...`), and pydantic-settings lowers the case of every one."""
    return name.lower().replace("-", "_")


def env_names(values: dict[str, Any], file_names: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The environment's deployments and hosts keyed by the file's own names: `BRINGUP_DEPLOYMENTS__K2_6__ENDPOINT`
    overrides deployment `k2-6` (issue 51: a name with a hyphen could not be overridden at all, the variable made a
    new deployment `k2_6` instead). A name the file has as it is stays itself; one that matches none, or two, of the
    file's names stays as it is (a new deployment, refused for its missing keys, naming the variable)."""
    out = dict(values)
    for section, names in file_names.items():
        table = values.get(section)
        if not isinstance(table, dict):
            continue
        renamed: dict[str, Any] = {}
        for key, value in table.items():
            matches = [n for n in names if _name_key(n) == _name_key(key)]
            target = key if key in names or len(matches) != 1 else matches[0]
            renamed[target] = value
        out[section] = renamed
    return out


def _marked(value: Any) -> Any:
    if isinstance(value, str):
        return FromText(value)
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v) for v in value]
    return value


def _absolute(path: Path) -> Path:
    """A path as the user should read it in a message: absolute, which ./config.toml it is."""
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


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
    parts = [_name_key(str(p)) for p in loc]  # `k2-6` is the variable's K2_6 (env_names)
    for var in sorted(os.environ):
        if not var.startswith("BRINGUP_") or var == "BRINGUP_CONFIG":
            continue
        path = [_name_key(p) for p in var.removeprefix("BRINGUP_").split("__")]
        n = min(len(path), len(parts))
        if n and path[:n] == parts[:n]:
            return var
    return None


def _close_key(loc: tuple[Any, ...], variant: type[BaseModel] | None = None) -> str:
    """`did you mean` for an unknown key, among the keys of the section it is in (a deployment's: those of its
    manager's variant)."""
    if not loc:
        return ""
    section: type[BaseModel] = Settings if variant is None else variant
    for part in loc[:-1] if variant is None else loc[2:-1]:
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


def _deployment_error(err: ErrorDetails) -> tuple[tuple[Any, ...], type[BaseModel] | None, str]:
    """A problem's place, the variant it is in, and its words, as the user reads them: a deployment's variant
    is its `manager`, not a level of the file (`deployments.k26.unit`, not `deployments.k26.systemd.unit`), and a
    manager that is none of the kinds is said as of a key with a choice, not as pydantic's union tag."""
    loc, msg = tuple(err["loc"]), err["msg"].removeprefix("Value error, ")
    if len(loc) < 2 or loc[0] != "deployments":
        return loc, None, msg
    if err["type"] in ("union_tag_invalid", "union_tag_not_found"):
        return (*loc[:2], "manager"), None, unknown_manager(err.get("input"))
    if len(loc) >= 3 and loc[2] in MANAGERS:
        return (*loc[:2], *loc[3:]), MANAGERS[str(loc[2])], msg
    return loc, None, msg


def load(explicit: str | None = None, *, read_only: bool | None = None, scenario: str | None = "",
         time_scale: float | None = 1.0) -> Settings:
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
    global _TOML_PATH, _FILE_NAMES
    _TOML_PATH = path
    _FILE_NAMES = {section: tuple(str(n) for n in table) for section in ("deployments", "hosts")
                   if isinstance(table := in_file.get(section), dict)}
    try:
        settings = Settings() if read_only is None else Settings(read_only=read_only)
    except SettingsError as e:  # a BRINGUP_* variable that is not the JSON its key needs
        raise ConfigError(_settings_error(e)) from None
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc, variant, msg = _deployment_error(err)
            key = _loc(loc) or "(top level)"
            if err["type"] == "extra_forbidden":
                msg = "unknown key" + _close_key(loc, variant)
            var = _env_source(loc)
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
        _TOML_PATH, _FILE_NAMES = None, {}
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
    learn_secrets(settings.deployments.values())
    return settings


def learn_secrets(deployments: Iterable[DeploymentConfig]) -> None:
    """The secrets a configuration holds, into the redactor's book (tui/guard/redact.py) as soon as it is loaded:
    the flags it declares secret (`secret_flags`), and the values of secret flags and variables in each command
    line, container's arguments and `env`, so that no output of any front end shows them."""
    deployments = list(deployments)
    for d in deployments:
        BOOK.declare(d.secret_flags)
    for d in deployments:
        for part in (d, *d.nodes):
            for words in ("command", "run_args", "compose_command"):
                BOOK.learn_argv([str(w) for w in getattr(part, words, None) or []])
            BOOK.learn_env({str(k): str(v) for k, v in (getattr(part, "env", None) or {}).items()})
