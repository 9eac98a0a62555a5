"""The console's incident record: on a failed run it offers the record once (a notice naming the key), and the key
writes it (tui/engine/incident_file.py: the same file as `bringup record`) and says where."""

from __future__ import annotations

from textual.binding import Binding

from tui.config import Settings
from tui.console.keys import ConsoleKeys
from tui.engine.incident_file import write_record
from tui.lifecycle.incident import NoSuchRun, record_command
from tui.model import Phase, Snapshot


class RecordKeys(ConsoleKeys):
    """The record key; the console's classes derive from it and call `offer_record` with each new snapshot."""

    settings: Settings
    deployment: str
    snap: Snapshot
    live: bool

    BINDINGS = [
        Binding("i", "record", "Write the incident record of the failed (or latest) run", show=False, id="record"),
    ]

    def offer_record(self, before: Snapshot, snap: Snapshot) -> None:
        """A run seen failing (not one already failed when the console opened): the record is offered, once."""
        if not self.live or snap.phase != Phase.FAILED or before.phase in (Phase.FAILED, Phase.UNKNOWN):
            return
        key = self._key_for("record")
        self.notify(f"{snap.deployment} failed: {key} writes its incident record "
                    f"({record_command(snap.deployment, snap.invocation)})", timeout=12, markup=False)

    def _key_for(self, binding_id: str) -> str:
        """The key the binding is on now (a keymap may have moved it)."""
        for key, active in self.active_bindings.items():
            if active.binding.id == binding_id:
                return key
        return "i"

    def action_record(self) -> None:
        run = self.snap.invocation if self.snap.phase == Phase.FAILED else ""
        try:
            path, _, _ = write_record(self.settings.state_path(), self.deployment, run)
        except NoSuchRun as e:
            self.notify(str(e), severity="warning", timeout=8, markup=False)
            return
        except OSError as e:
            self.notify(f"record: {e.strerror or e}", severity="error", timeout=8, markup=False)
            return
        self.notify(f"incident record written: {path}", timeout=12, markup=False)
