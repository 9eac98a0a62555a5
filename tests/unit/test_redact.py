"""The one redactor (tui/guard/redact.py): a secret named once is hidden everywhere after, by value; JSON stays
JSON; a bringup field named `key` is not a secret; the CLI's writers scrub every write and hand out nothing that
writes around them; a secret with quotes, backslashes, non-ASCII letters or fewer than six characters is hidden in
every spelling an output gives it (issue 47's review, findings 4, 5 and 9)."""

from __future__ import annotations

import io
import json
import shlex
from collections.abc import Iterator

import pytest

from tui.guard.redact import BOOK, ScrubbingWriter, scrub
from tui.lifecycle.secrets import redact_argv, redact_flags, unredact_argv


@pytest.fixture(autouse=True)
def empty_book() -> Iterator[None]:
    BOOK.forget()
    yield
    BOOK.forget()


def test_a_value_named_once_is_hidden_everywhere_after_and_json_stays_json() -> None:
    assert scrub("~ --api-key sk-old-123456 -> sk-new-654321") == "~ --api-key *** -> ***"
    doc = json.dumps({"excerpt": "bad key sk-old-123456", "argv": ["--x", "sk-new-654321"], "key": "g"})
    assert json.loads(scrub(doc)) == {"excerpt": "bad key ***", "argv": ["--x", "***"], "key": "g"}


def test_declared_flags_and_the_environment_by_value() -> None:
    BOOK.declare(["served-model-name"])
    BOOK.learn_argv(["python", "--served-model-name", "private-model-7", "HF_TOKEN=hf_abcdefgh"])
    BOOK.learn_env({"VENDOR_API_KEY": "vendor-key-99", "PATH": "/usr/bin"})
    assert scrub("serving private-model-7 with hf_abcdefgh and vendor-key-99 on /usr/bin") == \
        "serving *** with *** and *** on /usr/bin"
    # a record keeps the flag set, its value hidden; a resumed sweep puts it back from the live command line
    recorded = redact_argv(["--served-model-name", "private-model-7"])
    assert recorded == ["--served-model-name", "***"]
    assert unredact_argv(recorded, ["--served-model-name", "private-model-7"]) == ["--served-model-name",
                                                                                  "private-model-7"]


def test_the_writer_scrubs_every_write() -> None:
    BOOK.learn("sk-live-abcdef")
    out = io.StringIO()
    w = ScrubbingWriter(out)
    print("key sk-live-abcdef", file=w)
    assert out.getvalue() == "key ***\n"


#: secrets an operator may well have: a quote of each kind, a backslash, letters that are not ASCII
AWKWARD = ("sk-pa'ss-w0rd-XYZ", 'sk-ab"cdef12', "sk-ab\\cdef12", "sk-éü€cdef12", "sk-a'b\"c\\d-é9")


@pytest.mark.parametrize("secret", AWKWARD)
def test_a_secret_with_quotes_backslashes_or_non_ascii_is_hidden_in_every_spelling(secret: str) -> None:
    """Issue 47 review, findings 5 and 9: `shlex.quote` writes `'` as `'"'"'`, JSON and repr escape `"` and `\\`,
    JSON writes non-ASCII as `\\u....`: each spelling must be hidden, whatever built the output."""
    BOOK.learn_argv(["srv", "--api-key", secret])
    tail = secret[3:]
    outputs = {
        "shlex.join": shlex.join(["srv", "--api-key", secret]),
        "shlex.quote": f"--api-key {shlex.quote(secret)}",
        "json": json.dumps({"argv": ["--api-key", secret]}),
        "json utf-8": json.dumps({"v": secret}, ensure_ascii=False),
        "json in json": json.dumps(json.dumps({"v": secret})),
        "repr": repr(["--api-key", secret]),
        "a server's ServerArgs": f"server_args=ServerArgs(api_key={secret!r}, port=1)",
        "the text": f"bad key {secret} given",
    }
    for what, text in outputs.items():
        shown = scrub(text)
        unescaped = shown.encode().decode("unicode_escape", "replace")
        assert "***" in shown and tail not in shown and tail not in unescaped, (what, shown)
    # and a JSON document stays one
    assert json.loads(scrub(outputs["json"])) == {"argv": ["--api-key", "***"]}


def test_a_known_value_with_a_quote_is_hidden_whole_after_its_flag() -> None:
    """The name rule stops a value at a quote: run first, it hid `sk-pa` and left `'ss-w0rd-XYZ` in clear."""
    BOOK.learn_argv(["srv", "--api-key", "sk-pa'ss-w0rd-XYZ"])
    assert scrub("bad --api-key sk-pa'ss-w0rd-XYZ given") == "bad --api-key *** given"


def test_a_secret_named_in_quotes_is_hidden_with_its_escapes() -> None:
    assert scrub('ServerArgs(api_key="sk-ab\\"cdef12")') == 'ServerArgs(api_key="***")'
    assert scrub("Namespace(api_key='sk-abc\\'defgh')") == "Namespace(api_key='***')"
    assert scrub('--api-key "sk-quoted secret"') == '--api-key "***"'
    assert scrub("then sk-abc'defgh again") == "then *** again"  # learned by its name above, unescaped


def test_a_short_secret_learned_by_name_is_hidden_as_a_word() -> None:
    """Finding 4: `bringup flags` printed `--api-key k3y-7` (shorter than MIN_LEN) in its `name value` table and
    its JSON, which are no `--flag V` shape the name rule sees."""
    BOOK.declare(["--served-model-name"])
    BOOK.learn_argv(["srv", "--api-key", "k3y-7", "--served-model-name", "m0d", "--port", "12345",
                     "--hf-token", "42"])
    table = "  api-key           k3y-7       -    the API key [str]\n  served-model-name  m0d"
    assert scrub(table) == "  api-key           ***       -    the API key [str]\n  served-model-name  ***"
    doc = json.dumps({"flags": [{"name": "api-key", "value": "k3y-7"},
                                {"name": "served-model-name", "value": "m0d"}]})
    assert json.loads(scrub(doc)) == {"flags": [{"name": "api-key", "value": "***"},
                                                {"name": "served-model-name", "value": "***"}]}
    # a word only: never inside another word; a number is hidden only where a name points at it (JSON stays JSON)
    assert scrub("k3y-77 xk3y-7 m0dal 'm0d'") == "k3y-77 xk3y-7 m0dal '***'"
    assert scrub('{"pid": 42, "port": 12345}') == '{"pid": 42, "port": 12345}'
    assert scrub("--hf-token 42") == "--hf-token ***"
    # a short value no name pointed at is not learned
    BOOK.learn("abcd")
    assert scrub("abcd") == "abcd"


def test_redact_flags_hides_declared_and_short_values_by_name() -> None:
    BOOK.declare(["served-model-name"])
    assert redact_flags({"api-key": "k3y", "served-model-name": "m", "port": "8000", "enable-x": None}) == \
        {"api-key": "***", "served-model-name": "***", "port": "8000", "enable-x": None}
    assert redact_argv(["--served-model-name", "m", "--served-model-name=m"]) == \
        ["--served-model-name", "***", "--served-model-name=***"]


def test_the_writer_hands_out_nothing_that_writes_around_it() -> None:
    """Finding 9: `w.buffer.write(...)` and `os.write(w.fileno(), ...)` printed in clear."""
    BOOK.learn("sk-live-abcdef")
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    w = ScrubbingWriter(out)
    w.write("text sk-live-abcdef\n")
    assert w.buffer is not None
    w.buffer.write("bytes sk-live-abcdef é\n".encode())
    w.buffer.write(b"\xff not utf-8 sk-live-abcdef\n")  # bytes that are no text go through as they came
    w.flush()
    assert raw.getvalue() == "text ***\nbytes *** é\n".encode() + b"\xff not utf-8 ***\n"
    with pytest.raises(io.UnsupportedOperation):
        w.fileno()
    with pytest.raises(io.UnsupportedOperation):
        w.buffer.fileno()
    with pytest.raises(AttributeError):
        w.detach  # noqa: B018 - the stream under it is not handed out either
    assert w.encoding == "utf-8" and w.isatty() is False


def test_the_last_flags_that_reached_ready_are_redacted_before_quoting() -> None:
    """Finding 5: `restart`'s "last flags that reached ready" shell-quoted the value first (`'sk-pa'"'"'ss'`)."""
    from tui.cli.actions import _flag_words
    from tui.lifecycle.history import going_back
    from tui.lifecycle.presets import FlagSpec
    from tui.ops.change import _back_to

    secret = "sk-pa'ss-w0rd-XYZ"
    assert _flag_words({"api-key": secret, "port": "8000"}) == "--api-key '***' --port 8000"
    assert secret[5:] not in going_back("d", {"api-key": "x"}, {"api-key": secret})
    specs = [FlagSpec("api-key", "str"), FlagSpec("port", "int")]
    # a way back that would have to print a secret is not given as a command (it would set `***`)
    assert _back_to("d", ["srv", "--api-key", "new-key-1"], ["srv", "--api-key", secret], specs) == ""
    assert _back_to("d", ["srv", "--port", "1"], ["srv", "--port", "2"], specs) == \
        "bringup restart d --set port=2 --yes"
