"""The diff view: two replays' stories side by side, aligned, differences marked.

The rows come from `cli.tui.session.align` (difflib over the `describe_record` lines of each side's
notable records: state and role changes, elections, node-state.dat and recording.log writes,
significant sends, divergences).  Equal rows are plain; a row where the sides differ, or where one
side has nothing, is marked ``≠`` and styled `diff-view--differs`.  Drawn with the line API like the
event list: one line per row, whatever the length.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from cli.tui.session import DiffRow, StoryLine, format_duration


class DiffView(ScrollView, can_focus=True, inherit_bindings=False):
    COMPONENT_CLASSES = {"diff-view--differs", "diff-view--cursor", "diff-view--time", "diff-view--missing"}

    row: reactive[int] = reactive(0)

    def __init__(
        self,
        rows: list[DiffRow],
        left_name: str,
        right_name: str,
        origins: tuple[int, int] = (0, 0),
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.left_name = left_name
        self.right_name = right_name
        self.origins = origins  # each side's first event: times are shown from it, as in the event list
        self.set_rows(rows)

    def set_rows(self, rows: list[DiffRow]) -> None:
        self.rows = rows
        self.virtual_size = Size(self.size.width or 80, len(rows))
        self.refresh()

    def watch_row(self, _: int) -> None:
        self.scroll_to_region(Region(0, self.row, 1, 1), animate=False, immediate=True)
        self.refresh()

    def _half(self, line: StoryLine | None, width: int, origin: int) -> Text:
        style = self.get_component_rich_style
        if line is None:
            return Text("·".ljust(width), style=style("diff-view--missing"))
        text = Text(("+" + format_duration(line.ts - origin)).rjust(14) + " ", style=style("diff-view--time"))
        text.append(line.text)
        text.truncate(width, pad=True)
        return text

    def header(self, width: int) -> Text:
        half = max((width - 3) // 2, 10)
        return Text("  " + self.left_name[:half].ljust(half) + "│" + self.right_name[:half])

    def row_text(self, i: int, width: int = 160) -> str:
        return self._line(i, width).plain

    def _line(self, i: int, width: int) -> Text:
        half = max((width - 3) // 2, 10)
        row = self.rows[i]
        mark = "≠" if row.differs else " "
        text = Text(mark + " ")
        text.append_text(self._half(row.left, half, self.origins[0]))
        text.append("│")
        text.append_text(self._half(row.right, half, self.origins[1]))
        if row.differs:
            text.stylize(self.get_component_rich_style("diff-view--differs"))
        return text

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = int(self.scroll_offset.y) + y
        if i >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        strip = Strip(list(self._line(i, width).render(self.app.console))).crop_extend(
            0, width, self.rich_style
        )
        if i == self.row:
            strip = strip.apply_style(self.get_component_rich_style("diff-view--cursor"))
        return strip
