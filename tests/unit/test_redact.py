"""The one redactor (tui/guard/redact.py): a secret named once is hidden everywhere after, by value; JSON stays
JSON; a bringup field named `key` is not a secret; the CLI's writers scrub every write."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from tui.guard.redact import BOOK, ScrubbingWriter, scrub
from tui.lifecycle.secrets import redact_argv, unredact_argv


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
