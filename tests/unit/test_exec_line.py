"""systemd's ExecStart= grammar (tui/managers/exec_line.py) on real cases, and the systemd manager's rewrite of a
unit's command line through a fake host: every word bringup does not change is written back as the unit writes it.

The expected argvs of `test_words_as_systemd_252_reads_them` are what systemd 252 passed to a process (the test
host, `python3 -c 'print(json.dumps(sys.argv[1:]))'` as the unit's command), not what this parser thinks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tui.managers import PermanentManagerError
from tui.managers.exec_line import ExecLineError, assignments, parse, quote, read
from tui.managers.exec_start import Origins, rewrite, unit_exec, values
from tui.managers.systemd import SystemdManager, exec_start_from_cat
from tui.transport import CommandResult

# ------------------------------------------------------------------------------------------------ words


def test_words_as_systemd_252_reads_them() -> None:
    line = parse(r'''/usr/bin/python3 a"b c"d --x="1 2" 'q' a\x20b a\sb "x\ty" \; trailing\\ a\ b'''
                 r''' \x41\u00e9\xc3\xa9 \q x\x4 \101 \s "\;" \\; "a"b'c d' 50%% "%%i"''')
    # systemd 252 on the test host passed exactly these (after python3)
    assert line.argv[1:] == ["ab cd", "--x=1 2", "q", "a b", "a b", "x\ty", ";", "trailing\\", "a\\ b", "Aéé",
                             "\\q", "x\\x4", "A", " ", "\\;", "\\;", "abc d", "50%", "%i"]
    assert all(not w.opaque for w in line.words)


def test_variables_and_specifiers_are_kept_as_written_and_opaque() -> None:
    line = parse("/usr/bin/python3 --model-path ${MODEL} $EXTRA a$MODEL ${MODEL}x $$MODEL $${MODEL} %N %i "
                 r"\x25i \x24{MODEL} --tp=${TP}")
    got = {w.raw: (w.value, w.specifiers, w.variables) for w in line.words[1:]}
    assert got["${MODEL}"] == ("${MODEL}", (), ("${MODEL}",))
    assert got["$EXTRA"] == ("$EXTRA", (), ("$EXTRA",))  # a word of its own: split at whitespace by systemd
    assert got["a$MODEL"] == ("a$MODEL", (), ())  # `$NAME` inside a word is itself (systemd 252: "a$MODEL")
    assert got["${MODEL}x"][2] == ("${MODEL}",)
    assert got["$$MODEL"] == ("$MODEL", (), ())  # `$$` is a dollar
    assert got["$${MODEL}"] == ("${MODEL}", (), ())
    assert got["%N"] == ("%N", ("%N",), ())
    assert got[r"\x25i"] == ("%i", ("%i",), ())  # escapes first, then specifiers (systemd 252: "inst")
    assert got[r"\x24{MODEL}"][2] == ("${MODEL}",)  # ... then variables (systemd 252: "/models/x")
    assert got["--tp=${TP}"][2] == ("${TP}",)


def test_the_colon_prefix_turns_variables_off() -> None:
    line = parse(":/usr/bin/python3 ${MODEL} $$ %i")
    assert line.prefix == ":" and line.no_env
    assert line.argv == ["/usr/bin/python3", "${MODEL}", "$$", "%i"]  # systemd 252: "${MODEL}", "$$", "inst"
    assert not line.words[1].opaque and line.words[3].opaque


@pytest.mark.parametrize(("first", "prefix", "program"), [
    ("/bin/x", "", "/bin/x"), ("-/bin/x", "-", "/bin/x"), ("@/bin/x", "@", "/bin/x"), ("-@:/bin/x", "-@:", "/bin/x"),
    ("+/bin/x", "+", "/bin/x"), ("!!/bin/x", "!!", "/bin/x"), ("+!/bin/x", "+", "!/bin/x"),
    ("--/bin/x", "-", "-/bin/x"), ('"-/bin/x"', "-", "/bin/x"),
])
def test_prefixes_by_systemds_rules(first: str, prefix: str, program: str) -> None:
    line = parse(f"{first} a")
    assert (line.prefix, line.argv[0], line.words[0].raw) == (prefix, program, first)


@pytest.mark.parametrize(("value", "construct"), [
    ('/bin/x "unbalanced', "unbalanced quotes"),
    ("/bin/x a ; /bin/y", "several command lines"),
    ("-", "no program"),
])
def test_what_systemd_would_not_read_is_refused_by_name(value: str, construct: str) -> None:
    with pytest.raises(ExecLineError, match=construct):
        parse(value)
    assert read(value).written == value  # reading for show never fails


def test_lines_joined_as_systemd_joins_them() -> None:
    text = ("# /etc/systemd/system/u.service\n[Service]\nEnvironment=A=1\n"
            'ExecStart=/usr/bin/python3 -c "import x" a \\\n'
            "# a comment inside is skipped\n"
            "  b \\\n"
            "   ; and so is this one\\\n"
            '  d "e \\\nf" g\n'
            "ExecStartPre = /bin/true\n"
            "Restart=no \\\n\nNext=1\n")
    got = {a.key: a for a in assignments(text)}
    assert got["ExecStart"].value == '/usr/bin/python3 -c "import x" a    b    d "e  f" g'
    assert parse(got["ExecStart"].value).argv[3:] == ["a", "b", "d", "e  f", "g"]  # systemd 252: the same
    assert got["ExecStartPre"].value == "/bin/true"
    assert got["Restart"].value == "no"  # an empty line ends a continuation
    assert got["Next"].value == "1" and got["ExecStart"].source == "/etc/systemd/system/u.service"


# ------------------------------------------------------------------------------------------------ writing


@given(st.text(alphabet=st.characters(codec="utf-8", blacklist_characters="\x00"), max_size=40))
def test_quote_reads_back_as_the_same_word_with_nothing_opaque(arg: str) -> None:
    for program, no_env in (("/bin/x", False), (":/bin/x", True)):
        line = parse(f"{program} {quote(arg, no_env=no_env)}")
        assert line.argv[1:] == [arg] and not line.words[1].opaque


def test_quote_escapes_specifiers_and_variables() -> None:
    assert quote("50%") == '"50%%"' and quote("a$b") == '"a$$b"' and quote("a$b", no_env=True) == '"a$b"'
    assert quote("plain/path-1.0") == "plain/path-1.0" and quote("") == '""' and quote(";") == "\\;"


REAL = ("-@/usr/bin/python3 sglang-%i -m sglang.launch_server --model-path ${MODEL} --served-model-name %N "
        '--host 0.0.0.0 "--chat-template=/etc/tmpl with space.jinja" --tag a\\x20b $EXTRA_ARGS')


def test_a_flag_set_keeps_every_other_word_byte_for_byte() -> None:
    line = parse(REAL)
    new = rewrite(line, [*line.argv, "--disable-cuda-graph", "--mem-fraction-static", "0.8"])
    assert new == REAL + " --disable-cuda-graph --mem-fraction-static 0.8"
    assert parse(new).argv == [*line.argv, "--disable-cuda-graph", "--mem-fraction-static", "0.8"]


def test_a_flag_changed_and_one_removed_touch_only_their_words() -> None:
    line = parse(REAL + " --tp-size 4 --enable-metrics")
    argv = line.argv
    argv[argv.index("--tp-size") + 1] = "8"
    argv.remove("--enable-metrics")
    assert rewrite(line, argv) == REAL + " --tp-size 8"
    assert rewrite(parse(REAL + " --tp-size 8"), line.argv) == REAL + " --tp-size 4 --enable-metrics"  # and back


def test_a_change_to_a_variable_or_specifier_word_is_refused_naming_it() -> None:
    cat = ("# /etc/systemd/system/sglang@.service\n[Service]\nEnvironment=MODEL=/models/k2 OTHER=1\n"
           f"ExecStart={REAL}\n")
    ue = unit_exec(cat)
    assert ue.line is not None
    argv = ue.line.argv
    i = argv.index("--model-path")
    with pytest.raises(ExecLineError) as e:
        rewrite(ue.line, argv[:i] + argv[i + 2:] + ["--model-path", "/models/other"], ue.origins)
    assert str(e.value) == ("the value of --model-path is ${MODEL}, set by Environment=MODEL=/models/k2 in "
                            "/etc/systemd/system/sglang@.service: change it there")
    j = argv.index("--served-model-name")
    with pytest.raises(ExecLineError, match=r"the value of --served-model-name is %N, filled in by systemd \(%N the "
                                            "unit name without its type suffix\\): bringup does not rewrite"):
        rewrite(ue.line, argv[:j] + argv[j + 2:], ue.origins)
    with pytest.raises(ExecLineError, match=r"the word \$EXTRA_ARGS would change, a variable the unit sets in no "
                                            "Environment= or EnvironmentFile="):
        rewrite(ue.line, argv[:-1], ue.origins)
    with pytest.raises(ExecLineError, match="not the program"):
        rewrite(ue.line, ["/usr/bin/python3.12", *argv[1:]], ue.origins)


def test_an_environment_file_is_named_when_it_may_set_the_variable() -> None:
    cat = "[Service]\nEnvironmentFile=-/etc/default/sglang\nExecStart=/bin/x --model-path ${MODEL}\n"
    ue = unit_exec(cat)
    assert ue.line is not None
    with pytest.raises(ExecLineError, match="set by EnvironmentFile=-/etc/default/sglang: change it there"):
        rewrite(ue.line, ["/bin/x"], ue.origins)
    assert "MODEL" not in Origins.of(assignments("[Service]\nEnvironment=MODEL=1\nEnvironment=\n")).env


def test_effective_exec_start_after_resets_and_who_sets_it() -> None:
    cat = ("# /usr/lib/systemd/system/u.service\n[Service]\nExecStart=/bin/a one\n\n"
           "# /etc/systemd/system/u.service.d/10-x.conf\n[Service]\nExecStart=\nExecStart=/bin/b two\n\n"
           "# /etc/systemd/system/u.service.d/50-bringup.conf\n[Service]\nExecStart=\nExecStart=/bin/b three\n")
    assert exec_start_from_cat(cat) == values(cat) == ["/bin/b", "three"]
    assert unit_exec(cat, without="/etc/systemd/system/u.service.d/50-bringup.conf").lines[0].argv == ["/bin/b", "two"]
    assert unit_exec(cat).setters == ("/usr/lib/systemd/system/u.service", "/etc/systemd/system/u.service.d/10-x.conf",
                                      "/etc/systemd/system/u.service.d/50-bringup.conf")
    oneshot = "[Service]\nType=oneshot\nExecStart=/bin/a\nExecStart=/bin/b\n"
    assert len(unit_exec(oneshot).lines) == 2


# ------------------------------------------------------------------------------------------------ the manager


class FakeHost:
    """A host with a unit's files: `systemctl cat` shows them in systemd's order; root files are written by the
    manager's one `sh -c` (content on stdin), and read back through sudo by another. SFTP writes are a failure:
    nothing goes through a temp file of ours."""

    name = "fakehost"

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = {k: v.encode() for k, v in files.items()}
        self.commands: list[list[str]] = []

    def cat(self) -> str:
        main = [p for p in self.files if p.endswith(".service")]
        drop = sorted((p for p in self.files if p.endswith(".conf")), key=lambda p: p.rsplit("/", 1)[1])
        return "\n".join(f"# {p}\n{self.files[p].decode()}" for p in [*main, *drop])

    async def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: bytes | None = None,
                  env: Mapping[str, str] | None = None) -> CommandResult:
        self.commands.append(list(argv))
        a = list(argv[2:]) if list(argv[:2]) == ["sudo", "-n"] else list(argv)
        if a[:2] == ["systemctl", "cat"]:
            return CommandResult(0, self.cat().encode(), b"")
        if a[:2] == ["sh", "-c"] and a[3] == "bringup-write":
            assert input is not None and len(input) == int(a[5])
            self.files[a[4]] = input
        elif a[:2] == ["sh", "-c"] and a[3] == "bringup-read":  # a root file read back through sudo
            return CommandResult(0, self.files[a[4]], b"") if a[4] in self.files else CommandResult(3, b"", b"")
        elif a[0] == "rm":
            self.files.pop(a[-1], None)
        return CommandResult(0, b"", b"")

    async def read_file(self, path: str) -> bytes | None:
        return self.files.get(path)

    async def write_file(self, path: str, data: bytes, *, mode: int = 0o600) -> None:
        raise AssertionError(f"a root file written over SFTP: {path}")


UNIT = "/etc/systemd/system/sglang@.service"
DROP = "/etc/systemd/system/sglang@a.service.d/50-bringup.conf"
ORIGINAL = f"[Service]\nEnvironment=MODEL=/models/k2\nExecStart={REAL} \\\n  --port 30000\n"


async def test_the_manager_rewrites_keeps_and_restores_the_unit_exactly() -> None:
    host = FakeHost({UNIT: ORIGINAL})
    mgr = SystemdManager(host, "sglang@a.service", sudo=True)  # type: ignore[arg-type]
    before = await mgr.read_argv()
    assert before[-2:] == ["--port", "30000"] and "${MODEL}" in before
    await mgr.write_argv([*before, "--disable-cuda-graph"])
    body = host.files[DROP].decode()
    # the continuation joined, one space between words, every word as written
    assert f"ExecStart=\nExecStart={REAL} --port 30000 --disable-cuda-graph\n" in body
    assert await mgr.read_argv() == [*before, "--disable-cuda-graph"]
    assert json.loads(host.files[DROP.replace("50-bringup.conf", "bringup-previous.json")]) == before
    await mgr.write_argv(before)  # a rollback to the unit's own: no drop-in, the unit as written runs again
    assert DROP not in host.files and host.files[DROP + ".previous"].decode() == body
    assert await mgr.read_argv() == before
    written = [c for c in host.commands if "bringup-write" in c]
    assert written and all(c[:2] == ["sudo", "-n"] for c in written)
    assert not any("/tmp" in a for c in host.commands for a in c)  # no temp file anyone could guess


async def test_the_manager_refuses_what_it_cannot_write_exactly() -> None:
    host = FakeHost({UNIT: ORIGINAL})
    mgr = SystemdManager(host, "sglang@a.service")  # type: ignore[arg-type]
    before = await mgr.read_argv()
    i = before.index("--model-path")
    with pytest.raises(PermanentManagerError,
                       match=r"sglang@a.service on fakehost: cannot rewrite its ExecStart= exactly: "
                             r"the value of --model-path is \$\{MODEL\}, set by Environment=MODEL="):
        await mgr.write_argv(before[:i] + before[i + 2:] + ["--model-path", "/m"])
    host.files["/etc/systemd/system/sglang@a.service.d/override.conf"] = b"[Service]\nExecStart=\nExecStart=/bin/y\n"
    with pytest.raises(PermanentManagerError,
                       match=r"ExecStart= is also set in .*override\.conf, which systemd reads after "
                             r"bringup.s 50-bringup\.conf"):
        await mgr.write_argv(["/bin/y", "--x"])
    host = FakeHost({"/etc/systemd/system/o.service": "[Service]\nType=oneshot\nExecStart=/bin/a\nExecStart=/bin/b\n"})
    with pytest.raises(PermanentManagerError, match="2 ExecStart= command lines in effect"):
        await SystemdManager(host, "o.service").write_argv(["/bin/a", "--x"])  # type: ignore[arg-type]
    assert not [c for c in host.commands if "bringup-write" in c]  # nothing written
