"""Timeline: one lane per member (election state and role over time), terms, problems, the cursor.

Each lane is one row of cells; a cell covers a slice of the window (of time, or of event numbers
with `Timeline.by_events`).  A cell shows the member's state at the end of its slice, except that
an election passing through the slice wins over a steady state, so a 2 ms election stays visible
when the window spans an hour.  Letters name election states (the legend row spells them out),
``━`` is a member outside any election, colour is its role, ``×`` a member whose process is down.
Above the lanes, ``T<term>:<leader>`` marks when a member became leader; below them, ``!`` marks a
divergence or invariant violation and ``▲`` the cursor.  Only the index's lane segments are read:
drawing costs a bisect per cell, however long the replay.
"""

from __future__ import annotations

import bisect

import numpy as np
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from cli.times import relative_time
from cli.tui.session import LaneSegment, Session

GLYPHS = {
    "INIT": "i",
    "CANVASS": "c",
    "NOMINATE": "n",
    "CANDIDATE_BALLOT": "B",
    "FOLLOWER_BALLOT": "b",
    "LEADER_LOG_REPLICATION": "R",
    "LEADER_REPLAY": "P",
    "LEADER_INIT": "I",
    "LEADER_READY": "L",
    "FOLLOWER_LOG_REPLICATION": "r",
    "FOLLOWER_REPLAY": "p",
    "FOLLOWER_CATCHUP_INIT": "u",
    "FOLLOWER_CATCHUP_AWAIT": "u",
    "FOLLOWER_CATCHUP": "U",
    "FOLLOWER_LOG_INIT": "f",
    "FOLLOWER_LOG_AWAIT": "f",
    "FOLLOWER_READY": "F",
    "CLOSED": "━",
}
LEGEND = "c canvass n nominate B/b candidate/follower ballot R/P/I/L leader replication/replay/init/ready r/p/u/U/f/F follower  ━ steady  × down"
LABEL_WIDTH = 16


def _short(ns: int) -> str:
    """Axis labels: ``+0.350s``, ``+12.500s`` from the first event (the one time format, `cli.times`)."""
    return relative_time(ns, 0)


class Timeline(Widget):
    """The member lanes; reads `Session.index` and the app's cursor."""

    COMPONENT_CLASSES = {
        "timeline--axis",
        "timeline--label",
        "timeline--leader",
        "timeline--candidate",
        "timeline--follower",
        "timeline--election",
        "timeline--down",
        "timeline--cursor",
        "timeline--problem",
        "timeline--term",
        "timeline--legend",
        "timeline--selected",
    }

    #: Not a repaint on its own: a step moves the cursor within one cell almost always, and the lanes are
    #: drawn again only when what they show changes (`follow_cursor`).
    cursor: reactive[int] = reactive(0, repaint=False)
    member: reactive[int | None] = reactive(None)
    zoom: reactive[int] = reactive(0)  # each step halves the window around the cursor
    by_events: reactive[bool] = reactive(False)

    def __init__(self, session: Session, **kwargs) -> None:
        super().__init__(**kwargs)
        self.session = session
        self._lane_cache: dict = {}  # glyphs per member, for one window and index state
        self._problem_cache: dict = {}
        self._drawn: tuple | None = None  # what the last drawing depended on (`_drawn_key`)
        self._lane_positions: dict[tuple[int, int], list[int]] = {}  # each lane's segment positions

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.session.members) + 4

    # -- the window ---------------------------------------------------------------------------------------

    def _key_of(self, position: int) -> int:
        return position if self.by_events else int(self.session.source.ts[position])

    def window(self) -> tuple[int, int]:
        """[low, high) of the keys (ns or event numbers) the lanes cover."""
        source = self.session.source
        if len(source) == 0:
            return 0, 1
        first, last = self._key_of(0), self._key_of(len(source) - 1)
        span = max(last - first + 1, 1)
        width = max(span >> self.zoom, 1)
        if width >= span:
            return first, first + span
        centre = self._key_of(min(self.cursor, len(source) - 1))
        low = min(max(centre - width // 2, first), first + span - width)
        return low, low + width

    def _cells(self) -> int:
        return max(self.size.width - LABEL_WIDTH, 10)

    def _bounds(self, low: int, high: int, cells: int) -> list[int]:
        return [low + (high - low) * c // cells for c in range(cells + 1)]

    def column_of(self, position: int) -> int | None:
        low, high = self.window()
        key = self._key_of(position)
        if not low <= key < high:
            return None
        return (key - low) * self._cells() // (high - low)

    # -- drawing --------------------------------------------------------------------------------------------

    def _drawn_key(self) -> tuple:
        """Everything the drawing depends on that a move of the cursor can change."""
        session = self.session
        low, high = self.window()
        cursor = min(self.cursor, max(len(session) - 1, 0))
        column = self.column_of(cursor) if len(session) else None
        lanes = session.index.lanes
        current = tuple(
            bisect.bisect_right(self._positions(lanes.get(member, [])), cursor) for member in session.members
        )
        return (self.size, low, high, column, current, self.member, self.zoom, self.by_events,
                session.index.done, len(session.index.problem_positions), len(session.index.terms))

    def follow_cursor(self, cursor: int) -> None:
        """Move the cursor; draw again only if that changes what is drawn (its cell, a lane's label)."""
        self.cursor = cursor
        if self._drawn != self._drawn_key():
            self.refresh()

    def _positions(self, segments: list[LaneSegment]) -> list[int]:
        """Where each of a lane's segments begins (kept while the lane does not grow)."""
        key = (id(segments), len(segments))
        cached = self._lane_positions.get(key)
        if cached is None:
            if len(self._lane_positions) > 64:
                self._lane_positions.clear()
            cached = self._lane_positions[key] = [s.position for s in segments]
        return cached

    def render(self) -> Text:
        self._drawn = self._drawn_key()
        session = self.session
        cells = self._cells()
        low, high = self.window()
        bounds = self._bounds(low, high, cells)
        cursor_col = self.column_of(min(self.cursor, max(len(session) - 1, 0))) if len(session) else None
        style = self.get_component_rich_style
        lines: list[Text] = []

        axis = Text(" " * LABEL_WIDTH, style=style("timeline--axis"))
        marks = [" "] * cells
        step = max(cells // 4, 1)
        for c in range(0, cells, step):
            label = f"#{bounds[c]}" if self.by_events else _short(bounds[c] - session.source.origin)
            label = "|" + label
            for i, ch in enumerate(label):
                if c + i < cells:
                    marks[c + i] = ch
        axis.append("".join(marks), style=style("timeline--axis"))
        lines.append(axis)

        terms = Text("terms".ljust(LABEL_WIDTH), style=style("timeline--label"))
        term_row = [" "] * cells
        for start in session.index.terms:
            key = self._key_of(start.position)
            if not low <= key < high:
                continue
            col = (key - low) * cells // (high - low)
            label = f"T{start.leadership_term_id}:{start.leader_member_id}"
            for i, ch in enumerate(label):
                if col + i < cells:
                    term_row[col + i] = ch
        terms.append("".join(term_row), style=style("timeline--term"))
        lines.append(terms)

        key = (low, high, cells, session.index.done, self.by_events)
        if self._lane_cache.get("key") != key:
            self._lane_cache = {"key": key}
            for member in session.members:
                segments = session.index.lanes.get(member, [])
                keys = [self._key_of(s.position) for s in segments]
                self._lane_cache[member] = [
                    self._glyph(self._segment_in(segments, keys, bounds[c], bounds[c + 1]))
                    for c in range(cells)
                ]
        cursor_style = style("timeline--cursor")
        for member in session.members:
            segments = session.index.lanes.get(member, [])
            at = bisect.bisect_right(self._positions(segments), self.cursor) - 1
            current = segments[at] if at >= 0 else None
            label_style = style("timeline--selected") if member == self.member else style("timeline--label")
            summary = f"{member} " + (f"{current.role[:4]} t{current.leadership_term_id}" if current else "-")
            line = Text(summary[: LABEL_WIDTH - 1].ljust(LABEL_WIDTH), style=label_style)
            run, run_style = "", None
            for c, (glyph, glyph_style) in enumerate(self._lane_cache[member]):
                if c == cursor_col:
                    glyph_style = glyph_style + cursor_style
                if glyph_style != run_style and run:
                    line.append(run, style=run_style)
                    run = ""
                run += glyph
                run_style = glyph_style
            if run:
                line.append(run, style=run_style)
            lines.append(line)

        problems = Text("problems".ljust(LABEL_WIDTH), style=style("timeline--label"))
        row = list(self._problem_row(low, high, cells))
        if cursor_col is not None:
            row[cursor_col] = "▲"
        for c, ch in enumerate(row):
            problems.append(
                ch, style=style("timeline--cursor") if c == cursor_col else style("timeline--problem")
            )
        lines.append(problems)

        legend = Text(LEGEND[: max(self.size.width, 1)], style=style("timeline--legend"))
        lines.append(legend)
        return Text("\n").join(lines)

    def _problem_row(self, low: int, high: int, cells: int) -> str:
        """The problems row's marks for this window (worked out again only when the window or the
        problems found change: a replay can have tens of thousands)."""
        positions = self.session.index.problem_positions
        key = (low, high, cells, len(positions), self.by_events)
        if self._problem_cache.get("key") != key:
            row = [" "] * cells
            if positions:
                keys = np.asarray(positions, dtype=np.int64)
                if not self.by_events:
                    keys = self.session.source.ts[keys]
                inside = keys[(keys >= low) & (keys < high)]
                for col in np.unique((inside - low) * cells // (high - low)).tolist():
                    row[col] = "!"
            self._problem_cache = {"key": key, "row": "".join(row)}
        return self._problem_cache["row"]

    @staticmethod
    def _segment_in(segments: list[LaneSegment], keys: list[int], low: int, high: int) -> LaneSegment | None:
        """The segment a cell [low, high) shows: an election inside it, else the state at its end."""
        first = bisect.bisect_left(keys, low)
        last = bisect.bisect_left(keys, high)
        for segment in segments[first:last]:
            if segment.running and segment.election_state != "CLOSED":
                return segment
        return segments[last - 1] if last > 0 else None

    def _glyph(self, segment: LaneSegment | None):
        style = self.get_component_rich_style
        if segment is None:
            return " ", style("timeline--axis")
        if not segment.running:
            return "×", style("timeline--down")
        role_style = {
            "LEADER": style("timeline--leader"),
            "CANDIDATE": style("timeline--candidate"),
        }.get(segment.role, style("timeline--follower"))
        glyph = GLYPHS.get(segment.election_state, "?")
        if segment.election_state != "CLOSED":
            role_style = role_style + style("timeline--election")
        return glyph, role_style
