"""Grouping a run's log into error blocks: the reducer's sub-state for "which lines say why it failed".

A failure is told by a whole traceback, not its last line, and a fatal line often follows the traceback that
caused it (SGLang logs the child's traceback, then `Scheduler hit an exception`). So the reducer keeps the block
being read, the last finished one with the line it ended at (a block a few lines above a fatal line is its cause),
and the run's last lines (an exit with no error block shows those instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.lifecycle.lines import CleanLine, continues_block, is_access_line, is_error_line
from tui.lifecycle.presets import Preset

#: lines kept of a block, and of a failure's excerpt
MAX_EXCERPT = 300
#: lines of the run's log kept for a failure that no recognised line explains (an exit): its last lines say why;
#: twice what is shown, so that the access lines left out (bringup's own probes and scrapes, clients' requests)
#: leave room for the server's own words
TAIL = 40
SHOWN_TAIL = 20
#: a finished block at most this many lines above a fatal line (or the log's end) still belongs to it
NEAR = 3


def opens_block(c: CleanLine, preset: Preset, fatal: bool | None = None) -> bool:
    """An error line, or one of the preset's fatal wordings (which a server may log at INFO); `fatal`: whether it is
    one, when the caller has searched already."""
    return is_error_line(c) or (fatal if fatal is not None else bool(preset.fatal.search(c.text)))


@dataclass(frozen=True, slots=True)
class ErrorBlocks:
    #: lines counted since the watch began (never reset: blocks are placed by it)
    line_no: int = 0
    #: the error block being read now
    block: tuple[str, ...] = ()
    #: the last finished block, and the number of its last line
    last_block: tuple[str, ...] = ()
    last_block_end: int = -1
    #: the last TAIL lines of the current run, as shown
    tail: tuple[str, ...] = ()

    def new_run(self) -> ErrorBlocks:
        """A new run forgets the old run's lines (the count goes on)."""
        return ErrorBlocks(line_no=self.line_no)

    def counted(self, shown: str) -> ErrorBlocks:
        """One more non-blank line, before it is grouped."""
        return ErrorBlocks(self.line_no + 1, self.block, self.last_block, self.last_block_end,
                           (*self.tail[1 - TAIL:], shown))

    def quiet(self, n: int, shown: tuple[str, ...]) -> ErrorBlocks:
        """`n` lines outside any block at once (`shown`: the last of them, at most TAIL)."""
        return ErrorBlocks(self.line_no + n, self.block, self.last_block, self.last_block_end,
                           (*self.tail, *shown)[-TAIL:])

    def in_block(self, c: CleanLine, preset: Preset, fatal: bool | None = None) -> bool:
        """Whether a (counted, non-blank) line belongs to an error block (`fatal`: as for `opens_block`)."""
        return opens_block(c, preset, fatal) or (bool(self.block) and continues_block(c))

    def grouped(self, shown: str, in_block: bool) -> ErrorBlocks:
        """The counted line added to the open block, or, when it is none of a block's, the open block finished."""
        if in_block:
            return ErrorBlocks(self.line_no, (*self.block, shown)[-MAX_EXCERPT:], self.last_block,
                               self.last_block_end, self.tail)
        if self.block:
            return ErrorBlocks(self.line_no, (), self.block, self.line_no - 1, self.tail)
        return self

    def cause(self, shown: str) -> tuple[str, ...]:
        """The excerpt for a fatal line just grouped: its block, after the finished block just above it."""
        excerpt = self.block or (shown,)
        if self.last_block and self.last_block_end >= self.line_no - len(self.block) - NEAR:
            excerpt = (*self.last_block, *excerpt)
        return excerpt

    def recent(self) -> tuple[str, ...]:
        """The error block (a traceback, ERROR lines) that ends the log, or ended it a few lines ago."""
        if self.block:
            return self.block
        if self.last_block and self.last_block_end >= self.line_no - NEAR:
            return self.last_block
        return ()

    def exit_lines(self) -> tuple[str, ...]:
        """The lines that say why a run exited: an error block that ends the log (with the lines after it, if it
        has finished), else the log's last lines."""
        cause = self.recent()
        if cause and not self.block:
            after = self.tail[max(0, len(self.tail) - (self.line_no - self.last_block_end)):]
            return (*cause, *_own_words(after))
        return cause or _own_words(self.tail)


def _own_words(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The last SHOWN_TAIL lines the server wrote about itself: an access line (a request answered, bringup's own
    probes and /metrics scrapes among them) says nothing of why it ended."""
    return tuple(ln for ln in lines if not is_access_line(ln))[-SHOWN_TAIL:]
