"""The plan file of a sweep (TOML): server configurations, a benchmark matrix, SLOs, an optional dataset.

Pure: it reads a file and validates flags against the preset's FlagSpecs (the same `parse_changes` as
`restart --set`), and imports nothing above the domain. Every error is one line naming the key path
(`configs[2].set.speculative-algoritm: unknown flag ... (did you mean speculative-algorithm?)`), because a sweep
refused at its start costs nothing, and one that dies at its third configuration costs an hour.

    [[configs]]                      # each entry one configuration (a name, flags to set, flags to remove)
    name = "graphs-off"
    set = { disable-cuda-graph = true, speculative-dflash-block-size = 8 }
    unset = ["enable-metrics"]

    [grid]                           # and/or: the cartesian product, auto-named "a=1,b=2"
    speculative-dflash-block-size = [4, 8]

    [matrix]
    prompt_tokens = [128, 2048]
    output_tokens = [128]
    concurrency = [1, 8]
    requests = 16                    # per cell (or duration_s = 60)
    repeats = 1
    warmup_requests = 2

    [slo]                            # optional: goodput = requests meeting every SLO, per second
    ttft_ms = 2000
    tpot_ms = 50
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import tomllib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, field_validator, model_validator

from tui.guard.numbers import MAX_SECONDS, config_real, config_whole
from tui.guard.text import split_lines
from tui.lifecycle.flags import FlagChange, apply_changes, current_values, parse_changes, unknown_flag
from tui.lifecycle.presets import FlagSpec, FlagValueError
from tui.sweep.results import cell_id

#: a plan's numbers are taken as every number from outside is (tui/guard/numbers.py): a TOML number, never a
#: true/false or quoted text, finite (`duration_s = inf` ran a cell forever, an `[slo]` of inf or nan meant nothing)
Real = Annotated[float, BeforeValidator(config_real)]
Whole = Annotated[int, BeforeValidator(config_whole)]
#: the most tokens of a prompt or an output, and the most requests of a cell, a plan can ask for
MAX_TOKENS = 10_000_000
MAX_CONCURRENCY = 100_000
MAX_REQUESTS = 10_000_000
Tokens = Annotated[Whole, Field(le=MAX_TOKENS)]  # at least 1: Matrix._positive says so

FlagValue = bool | int | float | str


def _finite_values(values: dict[str, Any]) -> dict[str, Any]:
    """A flag's value that is a number is a finite one (`--mem-fraction-static = nan` is no setting)."""
    for name, v in values.items():
        for x in v if isinstance(v, list) else [v]:
            if isinstance(x, float) and not math.isfinite(x):
                raise ValueError(f"{name}: {x} is not a finite number")
    return values


class PlanError(ValueError):
    """A plan that cannot run: one line, with the file and key path."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ConfigEntry(_Strict):
    name: str = Field(min_length=1)
    set: dict[str, FlagValue] = Field(default_factory=dict)
    unset: list[str] = Field(default_factory=list)

    _finite = field_validator("set")(_finite_values)


class Matrix(_Strict):
    #: empty with a dataset: its prompts as they are (cells say p0)
    prompt_tokens: list[Tokens] = Field(default_factory=list)
    output_tokens: list[Tokens] = Field(min_length=1)
    concurrency: list[Annotated[Whole, Field(le=MAX_CONCURRENCY)]] = Field(min_length=1)
    requests: Whole | None = Field(None, gt=0, le=MAX_REQUESTS)
    duration_s: Real | None = Field(None, gt=0, le=MAX_SECONDS)
    repeats: Whole = Field(1, gt=0, le=1000)
    warmup_requests: Whole = Field(2, ge=0, le=MAX_REQUESTS)

    @model_validator(mode="after")
    def _positive(self) -> Matrix:
        for key in ("prompt_tokens", "output_tokens", "concurrency"):
            for i, v in enumerate(getattr(self, key)):
                if v < 1:
                    raise ValueError(f"{key}[{i}] must be a positive integer, not {v}")
        if self.requests is not None and self.duration_s is not None:
            raise ValueError("give requests or duration_s per cell, not both")
        return self


class Slo(_Strict):
    ttft_ms: Real | None = Field(None, gt=0, le=MAX_SECONDS * 1000)
    tpot_ms: Real | None = Field(None, gt=0, le=MAX_SECONDS * 1000)
    e2el_ms: Real | None = Field(None, gt=0, le=MAX_SECONDS * 1000)

    def describe(self) -> str | None:
        """The SLO string recorded with every goodput figure, e.g. `ttft_ms<=2000,tpot_ms<=50`."""
        parts = [f"{k}<={v:g}" for k, v in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms),
                                              ("e2el_ms", self.e2el_ms)) if v is not None]
        return ",".join(parts) or None


class PlanFile(_Strict):
    name: str = ""
    dataset: str | None = None
    configs: list[ConfigEntry] = Field(default_factory=list)
    grid: dict[str, list[FlagValue]] = Field(default_factory=dict)
    matrix: Matrix
    slo: Slo | None = None

    _finite = field_validator("grid")(_finite_values)


# ---------------------------------------------------------------------------------------------------- resolved


@dataclass(frozen=True, slots=True)
class SweepConfig:
    """One configuration, resolved: its changes to the original argv, and its flags as recorded."""

    name: str
    #: flag -> value, True for a switch, None for a flag removed
    flags: dict[str, str | bool | None]
    changes: tuple[FlagChange, ...]

    def argv(self, original: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
        """The configuration's command line: the original one with its changes (never the previous config's)."""
        return apply_changes(original, self.changes, specs)

    def carried_by(self, argv: Sequence[str], specs: Sequence[FlagSpec]) -> list[str]:
        """What of this configuration `argv` (the running one) lacks, in words; [] when it carries all of it."""
        have = current_values(argv, specs)
        missing = []
        for name, want in self.flags.items():
            if want is None:
                if name in have:
                    missing.append(f"--{name} still set")
            elif want is True:
                if name not in have:
                    missing.append(f"--{name} missing")
            elif have.get(name, "\0") != want:
                missing.append(f"--{name} is {have.get(name)!r}, not {want!r}")
        return missing


@dataclass(frozen=True, slots=True)
class Cell:
    prompt_tokens: int
    output_tokens: int
    concurrency: int
    repeat: int

    @property
    def id(self) -> str:
        return cell_id(self.prompt_tokens, self.output_tokens, self.concurrency, self.repeat)


@dataclass(frozen=True, slots=True)
class Plan:
    path: Path
    text: str
    name: str
    configs: tuple[SweepConfig, ...]
    cells: tuple[Cell, ...]
    matrix: Matrix
    slo: Slo | None
    dataset: tuple[str, ...] | None

    def requests_for(self, cell: Cell) -> int | None:
        """Requests of a cell; None when the cell runs for `duration_s` instead."""
        if self.matrix.duration_s is not None:
            return None
        return self.matrix.requests or max(4, 2 * cell.concurrency)


def load_plan(path: Path | str, specs: Sequence[FlagSpec], *, max_concurrency: int | None = None) -> Plan:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise PlanError(f"{p}: {e.strerror or e}") from None
    return parse_plan(text, specs, p, max_concurrency=max_concurrency)


def parse_plan(text: str, specs: Sequence[FlagSpec], path: Path = Path("plan.toml"), *,
               max_concurrency: int | None = None) -> Plan:
    """`max_concurrency`: the most streams at once the benchmark client drives (`tui.ops.bench.MAX_CONCURRENCY`, the
    one limit `bringup bench` keeps too), passed in by the caller: this module is pure and imports no client."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{path}: not valid TOML: {e}") from None
    try:
        pf = PlanFile.model_validate(raw)
    except ValidationError as e:
        raise PlanError(f"{path}: {_first_error(e)}") from None
    configs = _configs(pf, specs, path)
    dataset = _dataset(pf.dataset, path) if pf.dataset else None
    m = pf.matrix
    if max_concurrency is not None:
        for i, c in enumerate(m.concurrency):
            if c > max_concurrency:
                raise PlanError(f"{path}: matrix.concurrency[{i}]: {c} streams at once is more than the "
                                f"{max_concurrency} bringup's benchmark client drives (`bringup bench` keeps the "
                                "same limit)")
    prompts = m.prompt_tokens or ([0] if dataset else [])
    if not prompts:
        raise PlanError(f"{path}: matrix.prompt_tokens: give prompt lengths (or a dataset)")
    cells = tuple(Cell(p_, o, c, r) for p_, o, c in itertools.product(prompts, m.output_tokens, m.concurrency)
                  for r in range(1, m.repeats + 1))
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise PlanError(f"{path}: matrix: a value is listed twice (cells would repeat)")
    return Plan(path, text, pf.name or path.stem, configs, cells, m, pf.slo, dataset)


def _first_error(e: ValidationError) -> str:
    """The one error a plan is refused with, by its key path. An unknown key comes first, with the key it is close
    to: a typo (`[matrx]`, `output_token`) also makes the key it meant missing, and "matrix: Field required"
    would hide the mistake; that missing key is then the same mistake, not counted again."""
    errors = e.errors()
    unknown = [err for err in errors if err["type"] == "extra_forbidden"]
    if unknown:
        loc = tuple(unknown[0]["loc"])
        key, fields = str(loc[-1]), _fields_at(loc[:-1])
        close = difflib.get_close_matches(key, fields, n=1, cutoff=0.6)
        msg = f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else
                                         (f"; the keys here: {', '.join(fields)}" if fields else ""))
        meant = {(*loc[:-1], close[0])} if close else set()
        rest = [err for err in errors if err is not unknown[0]
                and not (err["type"] == "missing" and tuple(err["loc"]) in meant)]
        where = _loc(loc)
    else:
        err = errors[0]
        where = _loc(err["loc"])
        msg = "required, not given" if err["type"] == "missing" else \
            str(err["msg"]).removeprefix("Value error, ")
        rest = errors[1:]
    more = f" (and {len(rest)} more)" if rest else ""
    return f"{where + ': ' if where else ''}{msg}{more}"


def _fields_at(loc: Sequence[Any]) -> list[str]:
    """The keys the plan's schema takes at a key path (list indices skipped): [] where it takes any key."""
    model: type[BaseModel] | None = PlanFile
    for part in loc:
        if isinstance(part, int):
            continue
        if model is None or part not in model.model_fields:
            return []
        model = _model_in(model.model_fields[part].annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: `Matrix`, `Slo | None`, `list[ConfigEntry]`; None for a plain value or a dict."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _known(specs: Sequence[FlagSpec]) -> dict[str, FlagSpec]:
    return {n: f for f in specs for n in (f.name, *f.aliases)}


def _check_name(flag: str, where: str, specs: Sequence[FlagSpec], path: Path) -> FlagSpec:
    known = _known(specs)
    name = flag.strip().lstrip("-")
    if name in known:
        return known[name]
    raise PlanError(f"{path}: {where}: {unknown_flag(name, list(known))}")


def _value_text(v: FlagValue) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer() and not math.isinf(v):
        return repr(v)
    return str(v)


def _resolve(name: str, sets: dict[str, FlagValue], unsets: Sequence[str], where: str, specs: Sequence[FlagSpec],
             path: Path, set_at: str | None = None) -> SweepConfig:
    """`set_at`: the key path of the set values' errors, when it is not `{where}.set.{flag}` (a grid's values)."""
    changes: list[FlagChange] = []
    flags: dict[str, str | bool | None] = {}
    for flag, value in sets.items():
        at = set_at or f"{where}.set.{flag}"
        spec = _check_name(flag, at, specs, path)
        if spec.kind == "bool" and not isinstance(value, bool):
            raise PlanError(f"{path}: {at}: --{spec.name} is a switch: true or false, not {value!r}")
        item = spec.name if value is True else f"{spec.name}={_value_text(value)}"
        try:
            ch = parse_changes([item], [], specs)[0]
        except FlagValueError as e:
            raise PlanError(f"{path}: {at}: {e}") from None
        changes.append(ch)
        flags[spec.name] = None if ch.remove else (True if ch.value is None else ch.value)
    for i, flag in enumerate(unsets):
        spec = _check_name(flag, f"{where}.unset[{i}]", specs, path)
        if spec.name in flags:
            raise PlanError(f"{path}: {where}.unset[{i}]: --{spec.name} is also set: give one of them")
        changes.append(FlagChange(spec.name, None, remove=True))
        flags[spec.name] = None
    return SweepConfig(name, flags, tuple(changes))


def _configs(pf: PlanFile, specs: Sequence[FlagSpec], path: Path) -> tuple[SweepConfig, ...]:
    out = [_resolve(c.name, c.set, c.unset, f"configs[{i}]", specs, path) for i, c in enumerate(pf.configs)]
    for flag, values in pf.grid.items():  # each grid value by its own key path, before any combination
        if not values:
            raise PlanError(f"{path}: grid.{flag}: give at least one value")
        _check_name(flag, f"grid.{flag}", specs, path)
        for i, v in enumerate(values):
            _resolve("", {flag: v}, [], "grid", specs, path, set_at=f"grid.{flag}[{i}]")
    keys = list(pf.grid)
    for combo in itertools.product(*(pf.grid[k] for k in keys)) if keys else ():
        name = ",".join(f"{k.lstrip('-')}={_value_text(v)}" for k, v in zip(keys, combo, strict=True))
        out.append(_resolve(name, dict(zip(keys, combo, strict=True)), [], f"grid({name})", specs, path))
    if not out:
        raise PlanError(f"{path}: no configuration: give [[configs]] entries and/or a [grid]")
    seen: set[str] = set()
    for c in out:
        if c.name in seen:
            raise PlanError(f"{path}: configs: the name {c.name!r} is used twice")
        seen.add(c.name)
    return tuple(out)


def _dataset(name: str, plan_path: Path) -> tuple[str, ...]:
    p = Path(name).expanduser()
    if not p.is_absolute():
        p = plan_path.parent / p
    try:
        lines = split_lines(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise PlanError(f"{plan_path}: dataset: {p}: {e.strerror or e}") from None
    prompts = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt = obj["prompt"]
            if not isinstance(prompt, str) or not prompt:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise PlanError(f"{plan_path}: dataset: {p}:{n}: each line must be {{\"prompt\": \"...\"}}") from None
        prompts.append(prompt)
    if not prompts:
        raise PlanError(f"{plan_path}: dataset: {p} has no prompts")
    return tuple(prompts)
