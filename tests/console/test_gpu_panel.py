"""The GPU panel (widgets/gpus.py) as plain rows: labelled columns, the deployment's GPUs marked and said so,
GiB throughout, colours for what is wrong only (memory against the server's own budget), columns that use the
width they have and drop the least telling one at narrow widths rather than cutting a value."""

from __future__ import annotations

from tests.helpers import console_states as cs
from tests.helpers.console_app import screen_text
from tests.helpers.gpu_snapshots import ALL, text
from tests.helpers.pilot import settled, until
from widgets.gpus import LEGEND, MARK, GpuPanel


async def test_the_panel_shows_the_legend_as_its_subtitle() -> None:
    from textual.app import App, ComposeResult

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield GpuPanel(id="gpus")

    app = One()
    async with app.run_test(size=(100, 14)) as pilot:
        panel = app.query_one(GpuPanel)
        panel.show(cs.gpus(128.4, 68), cs.history(128.4), [0, 1], 106324)
        await settled(pilot)
        assert panel.border_subtitle == LEGEND


async def test_rows_are_refitted_when_a_scrollbar_takes_a_column() -> None:
    """A note above eight GPUs in a short panel: the scrollbar appears after the rows were fitted to the whole
    width, and the rows lost their last character to an ellipsis."""
    from textual.app import App, ComposeResult

    from tui.model import Attribution

    class One(App[None]):
        CSS = "GpuPanel { height: 8; border: round white; padding: 0 1; overflow-y: auto; overflow-x: hidden; }"

        def compose(self) -> ComposeResult:
            yield GpuPanel(id="gpus")

    app = One()
    async with app.run_test(size=(40, 12)) as pilot:
        panel = app.query_one(GpuPanel)
        held = Attribution(current_mib=0, previous_mib=5000, other_mib=0, previous_gpus=(0, 1))
        panel.show(cs.gpus(128.4, 68), cs.history(128.4), ALL, 1, False, held, 0.9)
        # the scrollbar shows, then the rows are refitted to the column it left
        await until(pilot, lambda: panel.show_vertical_scrollbar and all(
            len(text(r)) <= panel.scrollable_content_region.width for r in panel.rows if text(r).startswith(MARK)))
        await settled(pilot)
        assert panel.show_vertical_scrollbar
        width = panel.scrollable_content_region.width
        assert all(len(text(r)) <= width for r in panel.rows if text(r).startswith(MARK)), panel.plain()
        painted = screen_text(app)
        assert "…" not in painted and "460 W" in painted, painted
