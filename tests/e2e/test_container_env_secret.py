"""A container's environment (an HF_TOKEN) is in no `docker create` command line bringup runs (issue 29.4): every
user of the host reads a command line through `ps` while it runs. The entries go in as `--env-file /dev/stdin`, and
the container made has them exactly. Against the real engines of tests/e2e/test_containers.py (skipped without one)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from tests.helpers.containers import IMAGE, MakeContainer
from tui.managers import unreported
from tui.managers.container_create import env_to_file
from tui.managers.docker import DockerManager
from tui.transport import CommandResult
from tui.transport.local import LocalTransport


class RecordingTransport(LocalTransport):
    """This machine's transport, keeping every argv it runs (what `ps` would have shown)."""

    def __init__(self) -> None:
        super().__init__()
        self.argvs: list[list[str]] = []

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        self.argvs.append(list(argv))
        return await super().run(argv, timeout=timeout, input=input, env=env)


def test_env_options_become_an_env_file_and_what_it_cannot_say_stays() -> None:
    opts = ["--name", "c", "-e", "HF_TOKEN=hf_x", "--env", "A=b=c", "--env=B= spaced ", "-e", "FROM_CLI",
            "-e", "Q='quoted'", "-e", "NL=a\nb", "-p", "1:1"]
    rest, text = env_to_file(opts)
    assert text == "HF_TOKEN=hf_x\nA=b=c\nB= spaced \n"
    assert rest == ["--name", "c", "-e", "FROM_CLI", "-e", "Q='quoted'", "-e", "NL=a\nb", "-p", "1:1"]
    assert env_to_file(["--name", "c"]) == (["--name", "c"], "")


@pytest.mark.slow
def test_a_create_and_a_recreate_put_no_env_value_in_argv(make_container: MakeContainer,
                                                           tmp_path: Path) -> None:
    d = make_container("envsecret")
    secret = f"hf_{uuid.uuid4().hex}"
    t = RecordingTransport()
    m = DockerManager(t, d.container, str(tmp_path / "state"), engine=d.engine, image=IMAGE,
                      run_args=["-e", f"HF_TOKEN={secret}", "--env", "PLAIN=1 2 3"], command=["sleep", "600"])
    asyncio.run(m._create_new(["sleep", "600"], unreported))
    env = d.inspect()["Config"]["Env"]
    assert f"HF_TOKEN={secret}" in env and "PLAIN=1 2 3" in env
    info = asyncio.run(m._container())
    asyncio.run(m._recreate(info, ["sleep", "601"], unreported))
    after = d.inspect()
    assert after["Config"]["Cmd"] == ["sleep", "601"] and after["Id"] != info["Id"]
    assert f"HF_TOKEN={secret}" in after["Config"]["Env"] and "PLAIN=1 2 3" in after["Config"]["Env"]
    creates = [a for a in t.argvs if "create" in a]
    assert len(creates) == 2 and all("/dev/stdin" in a for a in creates), creates
    assert [a for a in t.argvs if any(secret in w for w in a)] == []
    asyncio.run(m.write_argv(["sleep", "602"]))  # bringup's records: the state dir 0700, its files 0600
    state = tmp_path / "state"
    assert oct(state.stat().st_mode & 0o777) == "0o700"
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in state.iterdir()} == {
        "argv.json": "0o600", "argv.previous.json": "0o600"}
