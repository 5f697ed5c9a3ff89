"""The TUI's widgets; each draws from a `cli.tui.session.Session` and the app's cursor, nothing else."""

from cli.tui.widgets.diff_view import DiffView
from cli.tui.widgets.event_list import EventList
from cli.tui.widgets.inspector import Inspector
from cli.tui.widgets.timeline import Timeline

__all__ = ["DiffView", "EventList", "Inspector", "Timeline"]
