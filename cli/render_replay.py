"""The readable timeline of `recount replay`: one line per trace record, then a summary table.

Each line is ``time  node  description``, the description being `formats.describe.describe_record`
(the same words the TUI and the scenario tests use).  Time is relative seconds with milliseconds from
the first record (``+13.402s``), because capture clocks are epoch nanoseconds; ``wall_clock`` shows
UTC instead.  Election-state and role changes stand out, divergences and invariant violations are red.

Heartbeats are hidden unless asked for: a periodic send (CanvassPosition, AppendPosition,
CommitPosition) that repeats, field for field, the last one the member sent to that peer says
nothing new, and such repeats are most of a timeline.  The first of each value and every change are
shown; the summary says how many repeats were hidden.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.times import relative_time, wall_time
from formats.describe import describe_record

#: Timeline lines rendered per console.print.
BATCH_LINES = 512

PERIODIC = frozenset({"CanvassPosition", "AppendPosition", "CommitPosition"})

STYLES = {
    "state": "bold cyan",
    "role": "bold magenta",
    "election": "bold yellow",
    "moduleState": "cyan",
    "nodeState": "green",
    "recordingLog": "green",
    "divergence": "bold red",
    "invariant": "bold white on red",
    "random": "yellow",
    "logAppend": "blue",
}


def _style(record: Mapping[str, Any]) -> str:
    kind = record.get("kind")
    if kind == "send":
        return "dim" if record.get("type") in PERIODIC else ""
    return STYLES.get(kind, "")


class HeartbeatFilter:
    """Says which records repeat a member's last periodic send to the same peer (see the module doc)."""

    __slots__ = ("_last", "hidden")

    def __init__(self) -> None:
        self._last: dict[tuple[Any, Any, Any, Any], Any] = {}
        self.hidden = 0

    def is_repeat(self, record: Mapping[str, Any]) -> bool:
        if record.get("kind") != "send" or record.get("type") not in PERIODIC:
            return False
        key = (record.get("node"), record.get("peer"), record.get("channel"), record.get("type"))
        fields = record.get("fields")
        if self._last.get(key) == fields:
            self.hidden += 1
            return True
        self._last[key] = fields
        return False


def _parts(record: Mapping[str, Any], origin: int | None, wall_clock: bool) -> tuple[str, str, str]:
    """A line's three parts: time, description, and the recorded event a divergence points at."""
    when = wall_time(record.get("ts")) if wall_clock else relative_time(record.get("ts"), origin)
    event = record.get("event") if record.get("kind") == "divergence" else None
    return f"{when:>{24 if wall_clock else 10}}  ", describe_record(record), (
        f"  (recorded event {event})" if event is not None else "")


def timeline_line(record: Mapping[str, Any], origin: int | None, *, wall_clock: bool = False) -> Text:
    when, description, event = _parts(record, origin, wall_clock)
    line = Text()
    line.append(when, style="dim")
    line.append(description, style=_style(record))
    if event:
        line.append(event, style="red")
    return line


def timeline_text(record: Mapping[str, Any], origin: int | None, *, wall_clock: bool = False) -> str:
    """The same line as `timeline_line`, as plain text (what a pipe or file receives)."""
    return "".join(_parts(record, origin, wall_clock))


def print_timeline(
    console: Console,
    records: Iterable[Mapping[str, Any]],
    *,
    source: str,
    heartbeats: bool = False,
    wall_clock: bool = False,
) -> None:
    """The timeline, then the summary table; repeated heartbeats hidden unless ``heartbeats``."""
    origin = None
    summary = None
    repeats = HeartbeatFilter()
    # Lines go out a batch at a time: one console.print per line cost more than the replay.  Into a
    # pipe or file (no colours, no wrapping: the console soft-wraps) they are the plain text itself.
    styled = console.is_terminal or console.is_jupyter or console.record
    batch: list[Any] = []

    def flush() -> None:
        if styled:
            console.print(Text("\n").join(batch))
        else:
            console.file.write("\n".join(batch) + "\n")
        batch.clear()

    for record in records:
        if record.get("kind") == "summary":
            summary = record
            continue
        if origin is None and record.get("ts") is not None:
            origin = record["ts"]
        if not heartbeats and repeats.is_repeat(record):
            continue
        if styled:
            batch.append(timeline_line(record, origin, wall_clock=wall_clock))
        else:
            batch.append(timeline_text(record, origin, wall_clock=wall_clock))
        if len(batch) >= BATCH_LINES:
            flush()
    if batch:
        flush()
    if repeats.hidden:
        console.print(Text(f"{repeats.hidden} repeated heartbeat(s) hidden (--heartbeats shows them)", style="dim"))
    if summary is not None:
        print_summary(console, summary, source=source)


def print_summary(console: Console, summary: Mapping[str, Any], *, source: str) -> None:
    table = Table(title=f"{source}: model {summary.get('model')}", title_justify="left")
    for column in ("member", "election", "role", "term", "leader", "candidate", "log", "append", "commit", "seed", "nomination"):
        table.add_column(column, justify="left" if column in ("election", "role", "nomination") else "right")
    seeds = summary.get("seeds") or {}
    sources = summary.get("nominationDelay") or {}
    for member, state in (summary.get("nodes") or {}).items():
        table.add_row(
            member,
            str(state.get("electionState")),
            str(state.get("role")),
            str(state.get("leadershipTermId")),
            str(state.get("leaderMemberId")),
            str(state.get("candidateTermId")),
            str(state.get("logPosition")),
            str(state.get("appendPosition")),
            str(state.get("commitPosition")),
            str(seeds.get(member, "")),
            str(sources.get(member, "")),
        )
    console.print(table)
    divergences = summary.get("divergences", 0)
    style = "bold red" if divergences else "bold green"
    console.print(Text(f"{divergences} divergence(s); trace sha256 {summary.get('traceSha256')}", style=style))
