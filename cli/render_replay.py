"""The readable timeline of `recount replay`: one line per trace record, then a summary table.

Each line is ``time  node  description``, the description being `formats.describe.describe_record`
(the same words the TUI and the scenario tests use).  Time is shown from the first record (``+ms``)
because capture clocks are epoch nanoseconds.  Election-state and role changes stand out,
divergences and invariant violations are red, periodic heartbeats are dimmed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from formats.describe import describe_record

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


def _relative(ts: int | None, origin: int | None) -> str:
    if ts is None or origin is None:
        return ""
    return f"+{(ts - origin) / 1_000_000:.3f}ms"


def timeline_line(record: Mapping[str, Any], origin: int | None) -> Text:
    line = Text()
    line.append(f"{_relative(record.get('ts'), origin):>16}  ", style="dim")
    line.append(describe_record(record), style=_style(record))
    if record.get("kind") == "divergence" and record.get("event") is not None:
        line.append(f"  (recorded event {record['event']})", style="red")
    return line


def print_timeline(console: Console, records: Iterable[Mapping[str, Any]], *, source: str) -> None:
    origin = None
    summary = None
    for record in records:
        if record.get("kind") == "summary":
            summary = record
            continue
        if origin is None and record.get("ts") is not None:
            origin = record["ts"]
        console.print(timeline_line(record, origin))
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
