"""`python -m tools.serverfacts --new`: which releases the index has and the facts lack. The index is never asked
here (tests reach no network): its answer is `pip index versions`' text, parsed."""

from __future__ import annotations

import pytest

from tools.serverfacts.__main__ import main
from tools.serverfacts.new_releases import missing_releases, parse_index_versions

PIP_ANSWER = """WARNING: Location 'file:///x/simple/sglang/' is ignored: it is neither a file nor a directory.
sglang (0.5.24)
Available versions: 0.5.24, 0.5.23, 0.5.22rc1, 0.5.22, 0.5.21, 0.5.15.post1, 0.5.15, 0.4.10, 0.4.9
"""


def test_the_index_answer_is_read() -> None:
    assert parse_index_versions(PIP_ANSWER) == ["0.5.24", "0.5.23", "0.5.22rc1", "0.5.22", "0.5.21", "0.5.15.post1",
                                                "0.5.15", "0.4.10", "0.4.9"]
    assert parse_index_versions("ERROR: No matching distribution found for nothing") == []


def test_missing_releases_are_final_ones_from_the_oldest_covered_on() -> None:
    got = missing_releases(parse_index_versions(PIP_ANSWER), ("0.4.10", "0.5.15", "0.5.21", "0.5.23"))
    assert [v for v, _ in got] == ["0.5.15.post1", "0.5.22", "0.5.24"]  # no rc, nothing older than 0.4.10
    why = dict(got)
    assert "goes by 0.5.15" in why["0.5.15.post1"] and "between" in why["0.5.22"]
    assert why["0.5.24"] == "newer than every release with facts (goes by 0.5.23)"
    assert missing_releases(["1.0"], ()) == [("1.0", "no release of this server has facts")]


def test_new_names_a_server_it_knows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--new", "nosuchserver"]) == 2
    assert "nosuchserver: not a server" in capsys.readouterr().err
