"""One answer for one server's release (issue 51, item 6): `bringup flags`, `bringup status` and the console read
the release from the same place, the engine's, which includes what the server's HTTP answer said (SGLang's
`/server_info`: SGLang never logs its release). `flags` used to say "release not said yet; flags of 0.5.23" and
put `g` on `disable-cuda-graph` while `status` said 0.5.23 and the console put `g` on `cuda-graph-backend-decode`.
Real `bringup` processes against the simulated server (tui/sim), which answers `/server_info`."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.helpers.e2e import Bringup

pytestmark = pytest.mark.slow


def test_flags_and_status_name_one_release_and_one_key(make_bringup: Callable[..., Bringup]) -> None:
    bu = make_bringup(sim_args=("--release", "0.5.23"))
    bu.bring_up()
    status = bu.status()
    assert status["release"]["version"] == "0.5.23", status.get("release")
    r = bu.ok("flags", bu.name, "--json")
    d = r.json()
    assert d["release"] == "0.5.23", r.describe()
    keys = {row["key"]: row["name"] for row in d["flags"] if row["key"]}
    # 0.5.23 deprecates --disable-cuda-graph: its key moved to the flag that took over (as the console shows it)
    assert keys.get("g") == "cuda-graph-backend-decode", keys
    text = bu.ok("flags", bu.name).out
    assert text.splitlines()[0] == f"{bu.name} (SGLang 0.5.23)", text
