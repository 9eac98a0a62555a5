"""The console's keymap (`[ui] keys`), checked before the console starts: every action named exists and no two
actions of one screen share a key. (The key bar, help and palette are the console screen's: tui/console/screen.py.)
"""

from __future__ import annotations

from collections.abc import Iterable

from textual.binding import Binding


def declared_keys(cls: type) -> dict[str, str]:
    """Binding id -> its declared key, over a console class and the classes it derives from (the subclass's
    binding of an id wins, as in Textual)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        for b in vars(klass).get("BINDINGS", ()):
            if isinstance(b, Binding) and b.id:
                out[b.id] = b.key
    return out


def keymap_problem(scopes: Iterable[type], keys: dict[str, str]) -> str:
    """What is wrong with `[ui] keys` for the console, in one line ("" when nothing): an action none of its
    `scopes` (the app's class, its screens' classes) has -- a typo there would leave the key as it was without a
    word -- or two actions of one scope on one key (Textual would silently take one of them, and the other, restart
    say, would have no key at all)."""
    from tui.config.settings import did_you_mean

    declared = [declared_keys(c) for c in scopes]
    known = {a for d in declared for a in d}
    for action in keys:
        if action not in known:
            return (f"[ui] keys: no action {action!r}{did_you_mean(action, known)}; the actions are: "
                    f"{', '.join(sorted(known))}")
    for scope in declared:
        by_key: dict[str, list[str]] = {}
        for action, key in scope.items():
            for k in keys.get(action, key).split(","):
                by_key.setdefault(k.strip(), []).append(action)
        for key, actions in by_key.items():
            if len(actions) > 1 and any(a in keys for a in actions):
                which = " and ".join(f"{a}{'' if a in keys else ' (its default)'}" for a in actions)
                return f"[ui] keys: {key!r} is the key of both {which}: give one of them another key"
    return ""
