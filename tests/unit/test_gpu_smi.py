"""nvidia-smi CSV parsing (tui/collectors/gpu_smi.py): real rows from tests/fixtures/nvidia_smi/, a 16-GPU page
built here, driver failure text, and fuzzing. A bracketed value (`[N/A]`, `[Not Supported]`, ...) is missing
(None), never 0."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tui.collectors.gpu_smi import (
    APP_FIELDS,
    QUERY_FIELDS,
    SmiSource,
    driver_error,
    parse_apps_csv,
    parse_gpu_csv,
    parse_gpu_row,
)
from tui.transport import CommandResult, TransportError

SMI = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def _fixture(name: str) -> tuple[tuple[str, ...], list[str]]:
    """(fields from the `# command:` line's --query-gpu=..., data rows)."""
    lines = (SMI / name).read_text(encoding="utf-8").splitlines()
    cmd = next(x for x in lines if x.startswith("# command:"))
    m = re.search(r"--query-gpu=(\S+)", cmd)
    fields = tuple(m.group(1).split(",")) if m else ()
    return fields, [x for x in lines if x and not x.startswith("#")]


# ------------------------------------------------------------------------------------------------ fixtures

# These queries have no `index` column, and the parser (rightly) needs one to place a GPU: the verbatim rows are
# given an index column in front, which leaves every value of the real row as it was.


def test_na_fan_nounits() -> None:
    # enkore/i3pystatus PR #776, newer driver: `[N/A]` fan speed
    fields, rows = _fixture("na_fan_nounits.csv")
    assert fields == ("memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed",
                      "utilization.gpu", "utilization.memory")
    gpus = parse_gpu_csv("\n".join("0, " + r for r in rows), ("index", *fields))
    assert len(gpus) == 1
    g = gpus[0]
    assert g.mem_total_mib == 2004.0
    assert g.mem_used_mib == 0.0, "a real 0 stays 0"
    assert g.temp_c == 44.0
    assert g.util_pct == 0.0
    assert g.mem_util_pct == 0.0
    assert g.power_w is None  # not queried
    assert not g.lost


def test_not_supported_fan_old_driver() -> None:
    fields, rows = _fixture("not_supported_fan_nounits_old_driver.csv")
    ts_sample = parse_gpu_row("0, " + rows[0], ("index", *fields))
    assert ts_sample is not None
    g = ts_sample[1]
    assert g.temp_c == 44.0
    assert g.mem_total_mib == 2004.0
    assert not g.lost


def test_not_supported_fields_are_none() -> None:
    # tutulino/Megaminer#235: GTX 770, many `[Not Supported]`, with units (`52 %`)
    fields, rows = _fixture("not_supported_fields.csv")
    assert fields[:6] == ("gpu_name", "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw",
                          "power.limit")
    gpus = parse_gpu_csv("0, " + rows[0], ("index", *fields))
    assert len(gpus) == 1
    g = gpus[0]
    assert g.util_pct is None
    assert g.mem_util_pct is None
    assert g.power_w is None
    assert g.power_limit_w is None
    assert g.temp_c == 52.0
    assert not g.lost, "[Not Supported] is a missing value, not a lost GPU"


def test_many_na_fields_rtx3080() -> None:
    # plambe/zabbix-nvidia-smi-multi-gpu#17: 27 fields, exact query unknown. Columns 0-3 and 7 are identifiable
    # (timestamp, index, name, uuid, memory.total of a 10 GB card); the other names are assumed: only what the
    # parser does with them (bracket -> None, number -> number) is checked.
    _, rows = _fixture("many_na_fields_rtx3080.csv")
    fields = ("timestamp", "index", "name", "uuid", "power.draw", "power.limit", "clocks.sm", "memory.total",
              "memory.used", "memory.free", "utilization.memory", "n1", "utilization.gpu", "temperature.gpu",
              "compute_mode", *(f"n{i}" for i in range(2, 7)), "pstate", *(f"n{i}" for i in range(7, 13)))
    assert len(fields) == 27
    parsed = parse_gpu_row(rows[0], fields)
    assert parsed is not None
    ts, g = parsed
    assert ts == "2021/08/31 11:37:40.983"
    assert g.index == 0
    assert g.name == "NVIDIA GeForce RTX 3080"
    assert g.uuid == "GPU-8fe3a97d-51f6-a669-0d80-b4530b81b816"
    assert g.mem_total_mib == 10240.0
    assert g.mem_used_mib is not None
    assert g.power_w is None
    assert g.power_limit_w is None
    assert g.sm_clock_mhz is None
    assert g.mem_util_pct is None
    assert g.util_pct == 0.0
    assert g.temp_c == 54.0
    assert not g.lost


def test_driver_not_loaded() -> None:
    text = (SMI / "driver_not_loaded.txt").read_text(encoding="utf-8")
    err = driver_error(text)
    assert err.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")
    assert "\n" not in err
    assert parse_gpu_csv(text) == []


@pytest.mark.parametrize("text", ["No devices were found",
                                  "Failed to initialize NVML: Driver/library version mismatch"])
def test_other_driver_errors(text: str) -> None:
    assert driver_error("\n" + text + "\n") == text


def test_no_driver_error_in_normal_output() -> None:
    assert driver_error(_sixteen()) == ""


def test_mig_table_is_not_mistaken_for_csv() -> None:
    # XuehaiPan/nvitop PR #8: the default table output
    text = (SMI / "mig_devices_table.txt").read_text(encoding="utf-8")
    assert parse_gpu_csv(text) == []
    assert parse_apps_csv(text) == []


# ------------------------------------------------------------------------------------------------ 16 GPUs


def _sixteen(units: bool = False) -> str:
    mib, pct, w, mhz = (" MiB", " %", " W", " MHz") if units else ("", "", "", "")
    rows = []
    for i in range(16):
        used = f"{70_000 + i}{mib}"
        util = f"{50 + i}{pct}"
        power = f"{400.5 + i:.2f}{w}"
        name = "NVIDIA H200"
        if i == 9:
            used = util = "[GPU requires reset]"
        if i == 12:
            power = "[N/A]"
        if i == 13:
            name = "[Unknown Error]"
        rows.append(f"2026/05/29 17:01:02.123, {i}, GPU-{i:08x}-0000-0000-0000-000000000000, {name}, {used}, "
                    f"143771{mib}, {util}, {10 + i}{pct}, {40 + i}, {power}, 700.00{w}, 1980{mhz}")
    return "\n".join(rows) + "\n"


@pytest.mark.parametrize("units", [False, True])
def test_sixteen_gpus(units: bool) -> None:
    gpus = parse_gpu_csv(_sixteen(units))
    assert [g.index for g in gpus] == list(range(16))
    g0 = gpus[0]
    assert g0.mem_used_mib == 70_000.0
    assert g0.mem_total_mib == 143_771.0
    assert g0.util_pct == 50.0
    assert g0.mem_util_pct == 10.0
    assert g0.temp_c == 40.0
    assert g0.power_w == 400.5
    assert g0.power_limit_w == 700.0
    assert g0.sm_clock_mhz == 1980.0
    assert g0.name == "NVIDIA H200"
    assert g0.uuid == "GPU-00000000-0000-0000-0000-000000000000"
    assert gpus[15].mem_used_mib == 70_015.0
    lost = gpus[9]
    assert lost.lost
    assert lost.mem_used_mib is None and lost.util_pct is None
    assert lost.error == "[GPU requires reset]"
    assert lost.mem_total_mib == 143_771.0
    assert gpus[12].power_w is None and not gpus[12].lost
    assert gpus[13].lost and gpus[13].name == ""
    assert sum(g.lost for g in gpus) == 2


def test_apps_csv() -> None:
    uuid3 = "GPU-00000003-0000-0000-0000-000000000000"
    text = (f"106324, /usr/bin/python3, 81234, {uuid3}\n"
            f"106327, python, [N/A], {uuid3}\n"
            "not-a-pid, x, 1, GPU-x\n"
            "1, too, few\n")
    apps = parse_apps_csv(text, {uuid3: 3})
    assert [(a.pid, a.name, a.used_mib, a.gpu_index) for a in apps] == [
        (106324, "/usr/bin/python3", 81234.0, 3), (106327, "python", None, 3)]
    assert APP_FIELDS == ("pid", "process_name", "used_memory", "gpu_uuid")


# ------------------------------------------------------------------------------------------------ SmiSource


class FakeTransport:
    name = "fake"

    def __init__(self, gpu: CommandResult | Exception, apps: CommandResult | None = None) -> None:
        self.gpu = gpu
        self.apps = apps or CommandResult(0, b"", b"")
        self.calls: list[list[str]] = []

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        self.calls.append(list(argv))
        if any(a.startswith("--query-compute-apps=") for a in argv):
            return self.apps
        if isinstance(self.gpu, Exception):
            raise self.gpu
        return self.gpu

    def stream(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
        raise NotImplementedError

    async def read_file(self, path: str) -> bytes | None:
        return None

    async def write_file(self, path: str, data: bytes) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_source_once_reads_gpus_and_processes() -> None:
    apps = CommandResult(0, b"106324, python3, 81234, GPU-00000002-0000-0000-0000-000000000000\n", b"")
    t = FakeTransport(CommandResult(0, _sixteen().encode(), b""), apps)
    snap = await SmiSource(t, ["nvidia-smi"]).once()
    assert snap.error == ""
    assert len(snap.gpus) == 16
    assert [(p.pid, p.gpu_index) for p in snap.processes] == [(106324, 2)]
    query = t.calls[0]
    assert query[0] == "nvidia-smi"
    assert "--query-gpu=" + ",".join(QUERY_FIELDS) in query
    assert "--format=csv,noheader,nounits" in query


async def test_source_once_reports_driver_failure() -> None:
    text = (SMI / "driver_not_loaded.txt").read_bytes()
    snap = await SmiSource(FakeTransport(CommandResult(9, text, b"")), ["nvidia-smi"]).once()
    assert snap.gpus == ()
    assert snap.error.startswith("NVIDIA-SMI has failed")


async def test_source_once_reports_missing_binary() -> None:
    t = FakeTransport(TransportError("cannot run 'nvidia-smi': No such file or directory"))
    snap = await SmiSource(t, ["nvidia-smi"]).once()
    assert "nvidia-smi" in snap.error
    assert snap.gpus == ()


# ------------------------------------------------------------------------------------------------ fuzz

_values = st.one_of(
    st.sampled_from(["[N/A]", "[Not Supported]", "[GPU requires reset]", "[Unknown Error]", "[", "", "N/A", "0",
                     "-1", "1e400", "-1e400", "nan", "inf", "-inf", "1.5", "81234 MiB", "52 %", "350.50 W",
                     "1980 MHz", "44 C", "GPU-abc", "NVIDIA H200", "9" * 400, "0x10", "١٢", " 7 "]),
    st.text(max_size=20),
)
_rows = st.lists(_values, max_size=14).map(", ".join)
_fields = st.lists(st.sampled_from([*QUERY_FIELDS, "fan.speed", "gpu_name", ""]), max_size=14)


@settings(max_examples=300, deadline=None)
@given(row=_rows, fields=_fields)
def test_parse_gpu_row_never_raises(row: str, fields: list[str]) -> None:
    r = parse_gpu_row(row, fields)
    if r is not None:
        g = r[1]
        assert g.index >= 0
        for v in (g.mem_used_mib, g.mem_total_mib, g.util_pct, g.temp_c, g.power_w, g.sm_clock_mhz):
            assert v is None or (v == v and abs(v) != float("inf"))


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.lists(_rows, max_size=10).map("\n".join), st.text(max_size=500)))
def test_parse_csv_never_raises(text: str) -> None:
    parse_gpu_csv(text)
    parse_gpu_csv(text, ("index", "memory.used"))
    apps = parse_apps_csv(text, {"GPU-abc": 1})
    assert all(isinstance(a.pid, int) for a in apps)
