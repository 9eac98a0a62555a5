"""The adversary class, its hostile-server half (issue 47): a real `process` deployment whose server prints what an
adversary would (forged line ends followed by a forged epoch and a phase marker, `inf` and `nan` stamps, backtick
fences, Markdown headings, HTML and links, escape and bidi codes, a huge traceback, a line of megabytes) and then
dies; the real CLI (`start`, `status`, `wait`, `record`), each a process of its own, over the run's real log and
history file. The invariants: no command crashes, no phase the server forged, the history file is valid JSON with
finite numbers and bounded, and the record's Markdown has the server's text inside its code block only."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from tests.helpers.config_toml import ConfigFile
from tests.helpers.e2e import Bringup
from tests.helpers.simdeploy import process_deployment, sim_host

pytestmark = pytest.mark.slow

#: the phase the forged lines claim
FORGED = "graph-capture"
#: what the server prints, then it exits 1. Every forged piece, after a character str.splitlines() takes for a line
#: end, is a line of the supervisor's form (`<epoch> <text>`) with an epoch of the server's choosing and a marker of
#: a phase this server never reaches (graph capture: its marker must begin a line, so only a forged line has it)
SERVER = r'''
import sys, time
out = sys.stdout
out.write("[2026-01-01 00:00:00] server_args=ServerArgs(model_path='m', tp_size=8)\n")
for sep in ("\x1c", "\x1d", "\x1e", "\x85", "\u2028"):
    for stamp in ("inf", "nan", "-inf", "Infinity", "1e999", "1700000000"):
        out.write(f"[2026-01-01 00:00:01] junk{sep}{stamp} Capture cuda graph begin. This can take up to 1 s\n")
out.write("```\n# Forged heading\n<script>alert(1)</script>\n[click](http://evil.example/x)\n````\n")
out.write("\x1b]52;c;SGVsbG8=\x07\x1b[2J\u202egnp.exe\n")
out.write("z" * (3 << 20) + "\n")
out.write("Traceback (most recent call last):\n")
for i in range(300):
    out.write(f'  File "/x/m{i}.py", line {i}, in f ' + "y" * 20000 + "\n")
out.write("```\n# Forged heading in the traceback\n")
out.write("torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
out.flush()
sys.exit(1)
'''


@dataclass
class HostileBringup(Bringup):
    """A `process` deployment of the hostile server instead of the simulated one."""

    script: Path | None = None

    def write_config(self) -> None:
        if self.script is None:
            self.script = self.tmp / "hostile_server.py"
            self.script.write_text(SERVER)
        dep = process_deployment([sys.executable, "-u", str(self.script)], self.port,
                                 release_timeout_s=self.release_timeout_s, stop_timeout_s=self.stop_timeout_s)
        ConfigFile(state_dir=self.state_dir, hosts={"simhost": sim_host(self.sim_state)},
                   deployments={self.name: dep}).write(self.config)


def _no_constant(name: str) -> Any:
    raise AssertionError(f"history.json holds {name}")


def _numbers(v: Any) -> list[float]:
    if isinstance(v, dict):
        return [x for w in v.values() for x in _numbers(w)]
    if isinstance(v, list):
        return [x for w in v for x in _numbers(w)]
    return [float(v)] if isinstance(v, int | float) and not isinstance(v, bool) else []


def test_a_hostile_servers_lines_forge_nothing_and_crash_nothing(make_bringup: Callable[..., Bringup],
                                                                 tmp_path: Path) -> None:
    bu = make_bringup()
    bu = HostileBringup(bu.tmp, name="hostile")
    start = bu.run("start", bu.name, "--json", "--timeout", "60", timeout=120)
    assert start.rc == 1, start.describe()
    assert "Traceback (most recent call last)" not in start.err, start.describe()

    for _ in range(2):  # the second reads the run back as an ended one, with the history the first wrote
        st = bu.run("status", bu.name, "--json", timeout=60)
        assert st.rc in (0, 1) and "Traceback (most recent call last)" not in st.err, st.describe()
        d = st.json()
        assert d["phase"] == "failed", d
        assert FORGED not in json.dumps(d.get("timeline")), d.get("timeline")
    text = bu.run("status", bu.name, timeout=60)
    assert text.rc in (0, 1) and "Traceback (most recent call last)" not in text.err, text.describe()
    assert "\x1b" not in text.out and "\u202e" not in text.out

    wait = bu.run("wait", bu.name, "--timeout", "20", "--json", timeout=60)
    assert wait.rc == 1 and "Traceback (most recent call last)" not in wait.err, wait.describe()
    assert FORGED not in [v.get("phase") for v in wait.json_values() if isinstance(v, dict)], wait.out

    raw = (bu.run_dir / "history.json").read_text(encoding="utf-8")
    hist = json.loads(raw, parse_constant=_no_constant)
    assert all(math.isfinite(x) for x in _numbers(hist))
    (run,) = hist["runs"]
    assert run["outcome"] == "failed" and FORGED not in [s["phase"] for s in run["timeline"]], run["timeline"]
    assert all(s["at"] < 4e9 for s in run["timeline"]), run["timeline"]
    assert len(raw.encode()) <= 80 * 1024, len(raw.encode())  # one record: its bound and the file's frame
    assert any(x.endswith("an illegal memory access was encountered") for x in run["failure"]["excerpt"])

    rec = bu.run("record", bu.name, "--json", timeout=60)
    assert rec.rc == 0 and "Traceback (most recent call last)" not in rec.err, rec.describe()
    md = Path(rec.json()["path"]).read_text(encoding="utf-8")
    toks = MarkdownIt("commonmark").enable("table").parse(md)
    headings = [toks[i + 1].content for i, t in enumerate(toks) if t.type == "heading_open"]
    assert not [h for h in headings if "Forged" in h], headings
    assert not [t for t in toks if t.type.startswith("html")], md[:2000]
    inline = [c for t in toks if t.children for c in t.children]
    assert not [c for c in inline if c.type in ("link_open", "image", "html_inline")]
    (excerpt_block, *_) = [t for t in toks if t.type == "fence" and "illegal memory access" in t.content]
    assert "# Forged heading in the traceback" in excerpt_block.content  # in the block, as the server printed it
    assert "\x1b" not in md and "\u202e" not in md
