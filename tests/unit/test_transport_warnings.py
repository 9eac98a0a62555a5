"""cryptography 51 deprecates DSA, and asyncssh names its DSA types at import: ten warnings on stderr before every
command that loads the SSH transport, breaking bringup's one-line errors (the e2e error tests, on a fresh install,
caught it). The filter lives in tui/transport/__init__.py; this checks it on any installed cryptography: what
asyncssh's modules warn of that deprecation is dropped, the same words from anywhere else still show. A fresh
interpreter loading the SSH transport: tests/e2e/test_transport_import.py."""

from __future__ import annotations

import warnings

from tui.transport import quiet_asyncssh_deprecations

DSA = "DSA is deprecated and support will be removed in a future release. Use a more modern signature algorithm."


def _shown(module: str, message: str = DSA) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        # set again inside: pytest restores the filters after collecting, where the package's import set it
        quiet_asyncssh_deprecations()
        warnings.warn_explicit(message, UserWarning, "misc.py", 32, module=module)
    return [str(w.message) for w in seen]


def test_asyncssh_modules_warning_of_a_deprecated_algorithm_are_quiet() -> None:
    assert _shown("asyncssh.crypto.misc") == []
    assert _shown("asyncssh.crypto.dsa") == []


def test_the_same_words_from_elsewhere_and_other_asyncssh_warnings_still_show() -> None:
    assert _shown("tui.transport.ssh") == [DSA]
    assert _shown("asyncssh.connection", "a real problem with this connection") == [
        "a real problem with this connection"]
