"""The console's app as the read-only rule and the redactor see it: every action (keys of every screen and widget,
the palette, the overview's action keys, links) passes `run_action`, which asks the one table of actions
(tui/console/gate.py) before Textual dispatches it; every notification passes the one redactor (tui/guard/redact.py).
The console's app (viewer.py) is one of these.
"""

from __future__ import annotations

import contextlib
from typing import Any

from textual import actions
from textual.actions import ActionParseResult
from textual.app import App, ScreenStackError
from textual.dom import DOMNode
from textual.notifications import SeverityLevel

from tui.console import gate
from tui.guard.redact import scrub


class GatedApp(App[int]):
    """An app whose actions go through the read-only gate and whose notifications through the redactor."""

    #: whether actions that change the deployment, send its server work or write a file are refused
    read_only: bool

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification of the console and its screens (theirs call this one) through the one redactor
        (tui/guard/redact.py): a restart's failure, a flag's change and a server's words may name a secret."""
        super().notify(scrub(message), title=scrub(title), severity=severity, timeout=timeout, markup=markup)

    def _resolve_action(self, action: str | ActionParseResult, default_namespace: DOMNode | None,
                       namespaces: Any) -> tuple[str, str]:
        """An action's name and the module of the method it would run ("" when none), found as Textual finds
        it: the namespace named (app, screen, focused, or one the caller maps), else the default one."""
        where, name, _ = actions.parse(action) if isinstance(action, str) else action
        target: Any = default_namespace or self
        if where:
            target = (namespaces or {}).get(where)
            if target is None and where in ("app", "screen", "focused"):  # Textual's own action targets
                with contextlib.suppress(ScreenStackError):
                    target = getattr(self, where)
        method = getattr(target, f"_action_{name}", None) or getattr(target, f"action_{name}", None)
        return name, str(getattr(method, "__module__", "") or "")

    def refusal(self, action: str | ActionParseResult, default_namespace: DOMNode | None = None,
                namespaces: Any = None) -> str | None:
        """What the read-only console says instead of running `action`; None when it may run."""
        name, module = self._resolve_action(action, default_namespace, namespaces)
        return gate.refusal(name, module, read_only=self.read_only)

    async def run_action(self, action: str | ActionParseResult, default_namespace: DOMNode | None = None,
                         namespaces: Any = None) -> bool:
        """Every action (keys of every screen and widget, the palette, the overview's action keys, links) comes
        through here: in read-only mode, one that changes or writes anything says so and does nothing."""
        why = self.refusal(action, default_namespace, namespaces)
        if why is not None:
            self.notify(why, severity="warning", timeout=6, markup=False)
            return True  # handled: the key is answered, by the refusal
        return await super().run_action(action, default_namespace, namespaces)
