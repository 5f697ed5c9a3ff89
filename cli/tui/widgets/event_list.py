"""The event list: every event (and the trace records it produced) around the cursor, virtualised.

A `ScrollView` drawn with Textual's line API, in the way of toolong's log view: no widget per row;
`render_line` asks the session for just the events on screen (decoded a block at a time) and their
records, so a million-event replay scrolls like a ten-event one.  `cli.tui.session.ListLayout` maps
screen lines to (event, record slot); the filter decides which events are laid out.  Each event line
is ``time  #seq  sent|recv  describe_event`` (a message appears twice, as its sender sent it and as
its receiver got it; the word says which copy the row is); the records under it are
``describe_record`` lines, each change followed by its cause (``on RequestVote from 0``, ``on its
nomination deadline``).  The records come from re-executing the block they are in; a block not at
hand yet is asked of the app (`RecountApp.want_records`, done in a worker) and drawn as ``…`` until
it comes, so scrolling never waits for it.  Marks in the left gutter: ``▶`` the cursor (besides its highlight, so it
shows without colour), ``◆`` bookmark, ``!`` a divergence or invariant violation anchored at the event.

Heartbeats (periodic CanvassPosition/AppendPosition/CommitPosition) are hidden unless
``show_heartbeats``, except where the replay shows something notable under one (a state change, a
divergence): the index says which, so more of them reappear as it proceeds.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cli.tui.session import INLINE_STEPS, EventFilter, ListLayout, Session, cause_of
from formats.describe import describe_cause, describe_record

WIDTH = 240
#: The copy of a message an event row is: the sender's (out) or the receiver's (in).
SIDES = {"out": "sent ", "in": "recv "}
RECORD_CLASSES = {
    "state": "event-list--state",
    "role": "event-list--state",
    "election": "event-list--state",
    "moduleState": "event-list--state",
    "divergence": "event-list--problem",
    "invariant": "event-list--problem",
    "nodeState": "event-list--file",
    "recordingLog": "event-list--file",
}


class EventList(ScrollView, can_focus=True, inherit_bindings=False):
    """Events in replay order, filtered; the cursor's event is highlighted and kept in view."""

    COMPONENT_CLASSES = {
        "event-list--cursor",
        "event-list--cursor-mark",
        "event-list--time",
        "event-list--seq",
        "event-list--local",
        "event-list--record",
        "event-list--state",
        "event-list--problem",
        "event-list--file",
        "event-list--bookmark",
    }

    cursor: reactive[int] = reactive(0)
    show_records: reactive[bool] = reactive(True)
    show_heartbeats: reactive[bool] = reactive(False)

    class Picked(Message):
        """A line was clicked: move the cursor to its event."""

        def __init__(self, position: int) -> None:
            super().__init__()
            self.position = position

    def __init__(self, session: Session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session
        self.filter = EventFilter()
        self.bookmarks: set[int] = set()
        self._laid_counts: tuple[int, bool] | None = None
        self._strips: dict[tuple, Strip] = {}
        self.hidden_heartbeats = 0
        self._loading = False
        self.layout_lines = ListLayout(self.filter.positions(session.source), None)
        self._relayout()

    # -- layout ----------------------------------------------------------------------------------------

    def _relayout(self) -> None:
        index = self.session.index
        counts = index.counts if self.show_records and len(index.counts) == len(self.session) else None
        self._laid_counts = (index.done, index.finished) if counts is not None or not self.show_heartbeats else None
        self.layout_lines = ListLayout(self._shown_positions(), counts)
        self.virtual_size = Size(WIDTH, self.layout_lines.height)

    def _shown_positions(self):
        positions = self.filter.positions(self.session.source)
        self.hidden_heartbeats = 0
        if self.show_heartbeats or not len(positions):
            return positions
        index = self.session.index
        heartbeat = self.session.source.heartbeat_mask()[positions]
        keep = np.fromiter(index.notable.keys(), dtype=np.int64, count=len(index.notable))
        if index.problem_positions:
            keep = np.concatenate((keep, np.asarray(index.problem_positions, dtype=np.int64)))
        if len(keep):
            heartbeat &= ~np.isin(positions, keep)
        shown = positions[~heartbeat]
        self.hidden_heartbeats = len(positions) - len(shown)
        return shown

    def set_filter(self, event_filter: EventFilter) -> None:
        self.filter = event_filter
        self._relayout()
        self.scroll_to_cursor(center=True)
        self.refresh()

    def index_progressed(self) -> None:
        """The index reached further (or finished): record lines appear under more events, and
        heartbeats with something notable under them reappear."""
        index = self.session.index
        if (self.show_records or not self.show_heartbeats) and (index.done, index.finished) != self._laid_counts:
            self._relayout()
            self.scroll_to_cursor()
            self.refresh()

    def watch_show_records(self, _: bool) -> None:
        self._relayout()
        self.scroll_to_cursor(center=True)
        self.refresh()

    def watch_show_heartbeats(self, _: bool) -> None:
        self._relayout()
        self.scroll_to_cursor(center=True)
        self.refresh()

    def clear_lines(self) -> None:
        """Draw every line anew (the time format changed)."""
        self._strips.clear()
        self.refresh()

    def watch_cursor(self, _: int) -> None:
        self.scroll_to_cursor()
        self.refresh()

    def scroll_to_cursor(self, *, center: bool = False) -> None:
        if not len(self.layout_lines.positions):
            return
        line = self.layout_lines.line_of(self.cursor)
        i = self.layout_lines.index_of(self.cursor)
        lines = int(self.layout_lines.starts[i + 1] - self.layout_lines.starts[i])
        self.scroll_to_region(
            Region(0, line, 1, min(lines, max(self.size.height, 1))),
            animate=False,
            center=center,
            immediate=True,
        )

    def around(self, position: int, height: int | None = None) -> list[int]:
        """The shown events within half a screen's height (and a few) of ``position`` either way: those
        on screen when the list centres it, as a jump does, and where ``j``/``k`` land for a while
        (`Session.prepare` works their moments out together).  Half, not a whole screen: a seek's
        re-execution costs in proportion (1M events: 10.5 -> 7.7 ms of CPU per seek), and a row scrolled
        into view beyond them costs its block's records then.  From another thread, pass ``height``
        (read on the app's thread): asking a widget its size may lay the screen out."""
        layout = self.layout_lines
        if not len(layout.positions):
            return []
        i = layout.index_of(position)
        reach = max((self.size.height if height is None else height) // 2 + 4, 10)
        return layout.positions[max(i - reach, 0) : i + reach + 1].tolist()

    def visible_positions(self) -> list[int]:
        """The events on screen, top to bottom (what tests read)."""
        top = int(self.scroll_offset.y)
        seen = []
        for y in range(top, min(top + self.size.height, self.layout_lines.height)):
            i, slot = self.layout_lines.line(y)
            if slot == 0:
                seen.append(int(self.layout_lines.positions[i]))
        return seen

    def line_text(self, y: int) -> str:
        """Plain text of virtual line ``y`` (what tests read; records are worked out if not at hand)."""
        return self._text(y, wait=True).plain

    # -- drawing --------------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line = scroll_y + y
        width = self.size.width
        if line >= self.layout_lines.height:
            return Strip.blank(width, self.rich_style)
        i, slot = self.layout_lines.line(line)
        position = int(self.layout_lines.positions[i])
        # A line's look depends only on these (and the theme), so rendered lines are kept, as toolong does.
        key = (
            position,
            slot,
            position in self.bookmarks,
            position in self._problem_positions(),
            self._laid_counts,
        )
        strip = self._strips.get(key)
        if strip is None:
            self._loading = False
            strip = Strip(list(self._text(line).render(self.app.console)))
            if not self._loading:  # a "…" waiting for its records is drawn again when they come
                self._strips[key] = strip
                if len(self._strips) > 4096:
                    self._strips.pop(next(iter(self._strips)))
        if slot == 0 and position == self.cursor:
            strip = Strip(list(self._text(line, cursor=True).render(self.app.console)))
            strip = strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
            # over the row's own colours, not under them (Strip.apply_style would let them win)
            cursor = self.get_component_rich_style("event-list--cursor")
            return Strip(Segment.apply_style(list(strip), post_style=cursor), strip.cell_length)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)

    def notify_style_update(self) -> None:
        self._strips.clear()  # the theme or the styles changed: lines are drawn anew
        super().notify_style_update()

    def _text(self, line: int, *, cursor: bool = False, wait: bool = False) -> Text:
        style = self.get_component_rich_style
        i, slot = self.layout_lines.line(line)
        position = int(self.layout_lines.positions[i])
        source = self.session.source
        if slot == 0:
            problem = position in self._problem_positions()
            text = Text("▶" if cursor else " ", style=style("event-list--cursor-mark"))
            gutter = ("◆" if position in self.bookmarks else " ") + ("!" if problem else " ")
            text.append(
                gutter,
                style=style("event-list--bookmark")
                if position in self.bookmarks
                else style("event-list--problem"),
            )
            when = source.when(int(source.ts[position]))
            text.append(when.rjust(24 if source.wall_clock else 10) + " ", style=style("event-list--time"))
            text.append(f"#{int(source.seq[position])}".ljust(8), style=style("event-list--seq"))
            direction = source.dir_name(position)
            text.append(SIDES.get(direction, "     "), style=style("event-list--seq"))
            if not wait and not source.is_decoded(position):
                # decoded in the background (the file may have to be read): "…" until then
                self._loading = True
                want = getattr(self.app, "want_events", None)
                if want is not None:
                    want(position)
                    text.append("…", style=style("event-list--record"))
                    return text
            describe = source.describe(position)
            text.append(
                describe,
                style=style("event-list--local") if source.dir_name(position) == "local" else Style(),
            )
            return text
        records = self.session.records_cached(position)
        if records is None and (wait or self.session.source.block_size <= INLINE_STEPS):
            records = self.session.records_at(position)  # a short block: on the spot
        if records is None:
            self._loading = True
            want = getattr(self.app, "want_records", None)
            if want is not None:
                want(position)
            return Text("     ↳ …", style=style("event-list--record"))
        if slot - 1 >= len(records):
            return Text("")
        record = records[slot - 1]
        kind = record.get("kind")
        text = Text("     ↳ ", style=style("event-list--record"))
        ts = record.get("ts")
        source = self.session.source
        text.append(
            (source.when(int(ts)) if ts is not None else "").rjust(24 if source.wall_clock else 10) + " ",
            style=style("event-list--time"),
        )
        text.append(describe_record(record), style=style(RECORD_CLASSES.get(str(kind), "event-list--record")))
        cause = describe_cause(cause_of(record))
        if cause:
            text.append("  " + cause, style=style("event-list--record"))
        return text

    def _problem_positions(self) -> set[int]:
        problems = self.session.index.problem_positions
        if len(problems) != getattr(self, "_problems_seen", -1):
            self._problems_seen = len(problems)
            self._problem_set = set(problems)
        return self._problem_set

    # -- mouse ----------------------------------------------------------------------------------------

    def on_click(self, event: events.Click) -> None:
        line = int(self.scroll_offset.y) + event.y
        if 0 <= line < self.layout_lines.height:
            i, _ = self.layout_lines.line(line)
            self.post_message(self.Picked(int(self.layout_lines.positions[i])))
