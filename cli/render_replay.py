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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cli.times import MS, relative_time, wall_time
from engine import compiled
from engine.steady import RECORD_OF, TEMPLATES
from formats.describe import ARROW, describe_record, describe_send, send_head

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


#: What each member's own process did, as the inputs say (MemberStart, MemberStop, MemberCrash).
LIFECYCLE_WORDS = {"MemberStart": "process started", "MemberStop": "process stopped (clean shutdown)",
                   "MemberCrash": "process killed"}


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """A member's process starting, stopping or being killed, from the replay's input events, with
    the evidence the importer found for it (``extra.evidence``) and, for a start, where its starting
    state came from (``extra.startingState``)."""

    ts: int
    node: int
    type: str  # MemberStart, MemberStop, MemberCrash
    restart: bool = False
    evidence: tuple[str, ...] = ()
    #: False when the inputs show the process gone but not whether it was killed or stopped cleanly
    kind_known: bool = True

    def describe(self) -> str:
        if self.restart:
            word = "process restarted"
        elif not self.kind_known:
            word = "process down (killed or stopped: the inputs cannot tell)"
        else:
            word = LIFECYCLE_WORDS[self.type]
        return f"{self.node} {word} ({self.type} in the inputs)"


def _starting(extra: Mapping[str, Any]) -> list[str]:
    """One line per starting value and its provenance (`recorder.capture.starting_state.Known`)."""
    out = []
    for name, known in (extra.get("startingState") or {}).items():
        if isinstance(known, Mapping):
            value = known.get("value")
            if isinstance(value, Mapping):
                value = " ".join(f"{k}={v}" for k, v in value.items())
            out.append(f"{name} {value}: {known.get('source')}, {known.get('certainty')} ({known.get('note')})")
    return out


def lifecycle_of(events: Iterable[Any], until: int | None = None) -> list[Lifecycle]:
    """The members' starts, stops and kills among ``events`` (up to ``until``), in time order."""
    out = []
    started: set[int] = set()
    for event in sorted((e for e in events if e.dir == "local" and e.type in LIFECYCLE_WORDS), key=lambda e: e.ts):
        if until is not None and event.ts > until:
            break
        extra = event.extra or {}
        evidence = [str(line) for line in extra.get("evidence") or ()] + _starting(extra)
        known = not any("cannot tell" in line for line in evidence)
        out.append(Lifecycle(event.ts, event.node, event.type, restart=event.type == "MemberStart" and event.node in started,
                             evidence=tuple(evidence), kind_known=known))
        if event.type == "MemberStart":
            started.add(event.node)
    return out


_APPEND, _COMMIT, _LOG_APPEND, _LOG_SEND = TEMPLATES


def _numbered(template: str) -> dict[str, Any]:
    """The record of a lane template whose values are their own numbers (0, 1, 2 ...)."""
    return RECORD_OF[template](*range(template.count("%d")))


#: The fields of the periodic sends the steady-state lane makes, in the order of its values (`_LaneItems`): the
#: heartbeat filter keeps such a send's fields as their values in this order, whichever way the send came.
_LANE_FIELDS = {_numbered(template)["type"]: tuple(_numbered(template)["fields"]) for template in (_APPEND, _COMMIT)}
if (tuple(_numbered(_APPEND)["fields"].values()) != (3, 4, 5, 6)
        or tuple(_numbered(_COMMIT)["fields"].values()) != (3, 4, 5)):
    raise ImportError("engine.steady's lane templates no longer hold their fields where _LaneItems reads them")


class HeartbeatFilter:
    """Says which records repeat a member's last periodic send to the same peer (see the module doc)."""

    __slots__ = ("_last", "hidden")

    def __init__(self) -> None:
        self._last: dict[tuple[Any, Any, Any, Any], Any] = {}
        self.hidden = 0

    def is_repeat(self, record: Mapping[str, Any]) -> bool:
        if record.get("kind") != "send" or record.get("type") not in PERIODIC:
            return False
        return self.is_repeated_send(record.get("node"), record.get("peer"), record.get("channel"), record.get("type"),
                                     record.get("fields"))

    def is_repeated_send(self, node: Any, peer: Any, channel: Any, type_name: Any, fields: Any) -> bool:
        """`is_repeat` of a send of a periodic type, given its parts."""
        order = _LANE_FIELDS.get(type_name)
        if order is not None and type(fields) is dict and len(fields) == len(order):
            try:  # kept as the lane's values are (`is_repeated_values`): equal exactly when the dicts are
                fields = tuple([fields[name] for name in order])
            except KeyError:
                pass
        return self.is_repeated_values(node, peer, channel, type_name, fields)

    def is_repeated_values(self, node: Any, peer: Any, channel: Any, type_name: Any, fields: Any) -> bool:
        """`is_repeated_send`, the fields given as the values of `_LANE_FIELDS`'s names in order."""
        key = (node, peer, channel, type_name)
        if self._last.get(key) == fields:
            self.hidden += 1
            return True
        self._last[key] = fields
        return False


class _LaneItems:
    """The line of a steady-state lane item, ``(template, values)`` (`engine.replay.ReplaySession.timeline`):
    what `describe_record` writes of the record it stands for, ``RECORD_OF[template](*values)``, written from
    the values; None when the heartbeat filter hides it.  Out of a cluster at work's common case (a send with
    another member's id in it) the record is built and described.  `engine._window.LaneText` is the same in C
    (`_lane_items` picks it when it is built).

    It also keeps the timeline's time column (`when_at`, for every line: ``when_text(ts, origin)`` formatted
    once per millisecond shown, from ``origin``, the first record's time, which `print_timeline` sets), so that
    `line` gives a lane item's whole line."""

    __slots__ = ("repeats", "heartbeats", "by_template", "origin", "wall_clock", "when_text", "last_ts",
                 "last_shown", "when")

    def __init__(self, repeats: HeartbeatFilter, heartbeats: bool, wall_clock: bool,
                 when_text: Callable[[Any, Any], str]) -> None:
        self.repeats = repeats
        self.heartbeats = heartbeats
        self.by_template = {_APPEND: self.append, _COMMIT: self.commit, _LOG_APPEND: self.log_append,
                            _LOG_SEND: self.log_send}
        self.origin: Any = None
        self.wall_clock = wall_clock
        self.when_text = when_text
        self.last_ts: Any = _NO_TS
        self.last_shown: Any = None
        self.when = ""

    def describe(self, template: str, values: tuple) -> str | None:
        return self.by_template[template](values)

    def when_at(self, ts: Any) -> str:
        """The time column of a line at ``ts``: records come many to an instant, and many to a millisecond."""
        if ts != self.last_ts:
            self.last_ts = ts
            origin = self.origin
            # What the time shows: its millisecond (from the origin; one before it is left to relative_time)
            shown = None if ts is None else ts // MS if self.wall_clock else (ts - origin) // MS if ts >= origin else None
            if shown is None or shown != self.last_shown:
                self.last_shown = shown
                self.when = self.when_text(ts, origin)
        return self.when

    def line(self, template: str, values: tuple) -> str | None:
        """A lane item's line without styles (its time, its description), None when the filter hides it."""
        description = self.describe(template, values)
        return None if description is None else self.when_at(values[0]) + description

    def lines_into(self, block: list, start: int, batch: list, stop_ts: Any) -> int:
        """The `line` of each lane item of ``block`` from ``start`` into ``batch``, up to the first that is not a
        lane item or whose time is at or after ``stop_ts`` (None: no such time): where it stopped."""
        line_of = self.line
        for i in range(start, len(block)):
            item = block[i]
            if type(item) is not tuple or (stop_ts is not None and stop_ts <= item[1][0]):
                return i
            line = line_of(item[0], item[1])
            if line is not None:
                batch.append(line)
        return len(block)

    def append(self, v: tuple) -> str | None:  # ts, node, peer, term, position, follower, flags
        node, peer = v[1], v[2]
        if not self.heartbeats and self.repeats.is_repeated_values(node, peer, "consensus", "AppendPosition",
                                                                   v[3:7]):
            return None
        if v[5] == node and v[6] == 0:
            return f"{send_head(node, peer, 'consensus')}AppendPosition term={v[3]} pos={v[4]}"
        return _described(_APPEND, v)

    def commit(self, v: tuple) -> str | None:  # ts, node, peer, term, position, leader
        node, peer = v[1], v[2]
        if not self.heartbeats and self.repeats.is_repeated_values(node, peer, "consensus", "CommitPosition",
                                                                   v[3:6]):
            return None
        if v[5] == node:
            return f"{send_head(node, peer, 'consensus')}CommitPosition term={v[3]} pos={v[4]}"
        return _described(_COMMIT, v)

    @staticmethod
    def log_send(v: tuple) -> str:  # ts, node, peer, term, session, timestamp, position
        return f"{send_head(v[1], v[2], 'log')}SessionMessageHeader term={v[3]} session={v[4]} @{v[6]}"

    @staticmethod
    def log_append(v: tuple) -> str:  # ts, node, position, term, session, timestamp
        return f"{v[1]} log +SessionMessageHeader {ARROW} {v[2]}"


def _described(template: str, values: tuple) -> str:
    """The description of the record a lane item stands for, built (the uncommon case)."""
    return describe_record(RECORD_OF[template](*values))


#: Each lane template's style (`_style` of the record it makes).
_LANE_STYLES = {template: _style(_numbered(template)) for template in TEMPLATES}


def _lane_items(repeats: HeartbeatFilter, heartbeats: bool, wall_clock: bool = False) -> Any:
    """What describes the timeline's lane items and keeps its time column: `engine._window.LaneText` when it is
    built, else `_LaneItems`."""
    width = 24 if wall_clock else 10

    def when_text(ts: Any, origin: Any) -> str:
        return f"{_when(ts, origin, wall_clock):>{width}}  "

    window = compiled.window_module()
    if window is None:
        return _LaneItems(repeats, heartbeats, wall_clock, when_text)
    return window.LaneText(repeats._last, repeats, not heartbeats, send_head, _described, wall_clock, when_text)


def _when(ts: int | None, origin: int | None, wall_clock: bool) -> str:
    return wall_time(ts) if wall_clock else relative_time(ts, origin)


def _parts(record: Mapping[str, Any], origin: int | None, wall_clock: bool) -> tuple[str, str, str]:
    """A line's three parts: time, description, and the recorded event a divergence points at."""
    when = _when(record.get("ts"), origin, wall_clock)
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


class _Escapes:
    """The escape codes ``console`` writes before and after a text of each style, got once per style by
    rendering a marker through the console itself (so its colour system and NO_COLOR apply as to any
    print); a line built from them is the bytes rich would write for it."""

    __slots__ = ("_console", "_codes")

    def __init__(self, console: Console) -> None:
        self._console = console
        self._codes: dict[str, tuple[str, str]] = {}

    def __call__(self, style: str) -> tuple[str, str]:
        codes = self._codes.get(style)
        if codes is None:
            before, _, after = self.rendered(Text("\0", style=style)).partition("\0")
            codes = self._codes[style] = (before, after)
        return codes

    def rendered(self, text: Text) -> str:
        """``text`` as the console renders it (a line that needs rich: control characters, several lines)."""
        with self._console.capture() as captured:
            self._console.print(text, end="")
        return captured.get()


def _ansi_capable(console: Console) -> bool:
    """Can the timeline's lines go to this console as strings with pre-rendered escape codes?  A terminal
    that does not wrap (`cli.output.stdout` soft-wraps) and keeps no record; else rich prints them."""
    return (console.is_terminal and console.soft_wrap and not console.record and not console.is_jupyter
            and not console.legacy_windows)


def print_timeline(
    console: Console,
    records: Iterable[Mapping[str, Any] | tuple[str, tuple[int, ...]]],
    *,
    source: str,
    heartbeats: bool = False,
    wall_clock: bool = False,
    lifecycle: Iterable[Lifecycle] = (),
    blocks: bool = False,
) -> None:
    """The timeline, then the summary table; repeated heartbeats hidden unless ``heartbeats``.
    ``lifecycle`` (`lifecycle_of` the inputs) puts a line in for each process stop, kill and restart,
    and a ``process`` column in the table.

    Each line is built as a string and written a batch at a time: plain into a pipe or file; on a
    terminal with the escape codes of its styles, rendered once per style (`_Escapes`); rich renders
    each line itself only for a console that records, wraps or is a notebook.  One rich print per line
    cost more than the replay, and a rich `Text` per line still as much as the replay's json.

    ``records`` may hold the steady-state lane's items, ``(template, values)`` (`ReplaySession.timeline`): each
    is written as the record it stands for would be (`_LaneItems`), without that record being built.  With
    ``blocks``, ``records`` gives lists of them (`ReplaySession.timeline_blocks`): the lines of a block's lane
    items are made in one call where the console takes them without styles."""
    origin = None
    summary = None
    repeats = HeartbeatFilter()
    styled = console.is_terminal or console.is_jupyter or console.record
    escapes = _Escapes(console) if styled and _ansi_capable(console) else None
    texts = styled and escapes is None  # a rich Text per line
    batch: list[Any] = []
    if escapes is not None:
        dim, red = escapes("dim"), escapes("red")
        codes = {style: escapes(style) for style in {"", "dim", *STYLES.values()}}

    def flush() -> None:
        if texts:
            console.print(Text("\n").join(batch))
        else:
            console.file.write("\n".join(batch) + "\n")
        batch.clear()

    def lifecycle_line(happened: Lifecycle) -> Any:
        line = _lifecycle_line(happened, origin, wall_clock)
        return line if texts else escapes.rendered(line) if escapes is not None else line.plain

    lifecycle = list(lifecycle)
    # A first start shows anyway (the member's election begins), unless the inputs say where its state came from.
    pending = [one for one in lifecycle if one.type != "MemberStart" or one.restart or one.evidence]
    lane = _lane_items(repeats, heartbeats, wall_clock)
    lane_describe, lane_line, when_at, lane_style = lane.describe, lane.line, lane.when_at, _LANE_STYLES

    def take(record: Any) -> None:
        """One record, or one lane item, into the batch."""
        nonlocal origin, summary
        if type(record) is tuple and texts:
            record = RECORD_OF[record[0]](*record[1])  # a rich Text per line is made from the record
        if type(record) is tuple:  # a steady-state lane item, (template, values): its line written from its values
            template, values = record
            ts = values[0]
            if origin is None:
                origin = lane.origin = ts
            while pending and pending[0].ts <= ts:
                batch.append(lifecycle_line(pending.pop(0)))
            if escapes is None:  # (a pipe or file: the line without styles, whole)
                line = lane_line(template, values)
                if line is not None:  # (None: a repeated heartbeat)
                    batch.append(line)
                    if len(batch) >= BATCH_LINES:
                        flush()
                return
            description = lane_describe(template, values)
            if description is None:  # a repeated heartbeat
                return
            style, event = lane_style[template], None
        else:
            get = record.get
            kind = get("kind")
            if kind == "summary":
                summary = record
                return
            ts = get("ts")
            if origin is None and ts is not None:
                origin = lane.origin = ts
            while pending and ts is not None and pending[0].ts <= ts:
                batch.append(lifecycle_line(pending.pop(0)))
            if kind == "send":  # most records: their parts are taken once, for the filter and the line
                node, peer, channel, type_name, fields = get("node"), get("peer"), get("channel"), get("type"), get("fields")
                if type_name in PERIODIC and not heartbeats and repeats.is_repeated_send(node, peer, channel, type_name,
                                                                                          fields):
                    return
                if not texts:
                    description = describe_send(node, peer, channel, str(type_name), fields or {}, get("logPosition"))
            elif not texts:
                description = describe_record(record)
            if texts:
                batch.append(timeline_line(record, origin, wall_clock=wall_clock))
                if len(batch) >= BATCH_LINES:
                    flush()
                return
            style = None  # the record's (`_style`), found where escape codes are written
            event = get("event") if kind == "divergence" else None
        when = when_at(ts)
        if escapes is not None:
            batch.append(_escaped(escapes, codes, dim, red, when, description,
                                  _style(record) if style is None else style, event))
        elif event is None:
            batch.append(when + description)
        else:
            batch.append(f"{when}{description}  (recorded event {event})")
        if len(batch) >= BATCH_LINES:
            flush()

    if not blocks:
        for record in records:
            take(record)
    else:
        # A block's runs of lane items into the batch in one call (`lines_into`: a pipe or file's lines, the
        # time of the next lifecycle line a stop), anything else one by one; the batch flushed between runs.
        lines_into = lane.lines_into if escapes is None and not texts else None
        for block in records:
            i, count = 0, len(block)
            while i < count:
                if lines_into is not None and origin is not None:
                    i = lines_into(block, i, batch, pending[0].ts if pending else None)
                    if len(batch) >= BATCH_LINES:
                        flush()
                    if i == count:
                        break
                take(block[i])
                i += 1
    for happened in pending:
        batch.append(lifecycle_line(happened))
    if batch:
        flush()
    if repeats.hidden:
        console.print(Text(f"{repeats.hidden} repeated heartbeat(s) hidden (--heartbeats shows them)", style="dim"))
    if summary is not None:
        print_summary(console, summary, source=source, lifecycle=lifecycle, origin=origin, wall_clock=wall_clock)


#: No record's ts (None is one): what the time cache starts from.
_NO_TS = object()


def _escaped(escapes: _Escapes, codes: dict[str, tuple[str, str]], dim: tuple[str, str], red: tuple[str, str],
             when: str, description: str, style: str, event: Any) -> str:
    """A timeline line with its styles' escape codes (``style``: its record's, `_style`): what rich renders for
    `timeline_line`."""
    if not description.isprintable():  # rich strips some control characters, splits lines: let it
        line = Text()
        line.append(when, style="dim")
        line.append(description, style=style)
        if event is not None:
            line.append(f"  (recorded event {event})", style="red")
        return escapes.rendered(line)
    style_on, style_off = codes[style] if description else ("", "")
    line = f"{dim[0]}{when}{dim[1]}{style_on}{description}{style_off}"
    return line if event is None else f"{line}{red[0]}  (recorded event {event}){red[1]}"


def _lifecycle_line(happened: Lifecycle, origin: int | None, wall_clock: bool) -> Text:
    """The event's line, then one indented line per piece of evidence."""
    when = _when(happened.ts, origin, wall_clock)
    width = 24 if wall_clock else 10
    line = Text(f"{when:>{width}}  ", style="dim")
    line.append(happened.describe(), style="bold magenta")
    for evidence in happened.evidence:
        line.append(f"\n{'':>{width}}    evidence: ", style="dim")
        line.append(evidence, style="magenta")
    return line


def _process(member: str, lifecycle: list[Lifecycle], origin: int | None, wall_clock: bool) -> str:
    last = next((one for one in reversed(lifecycle) if str(one.node) == member), None)
    if last is None or last.type == "MemberStart":
        return "running"
    when = _when(last.ts, origin, wall_clock)
    if not last.kind_known:
        return f"down {when}"
    return f"{'killed' if last.type == 'MemberCrash' else 'stopped'} {when}"


def print_summary(console: Console, summary: Mapping[str, Any], *, source: str, lifecycle: Iterable[Lifecycle] = (),
                  origin: int | None = None, wall_clock: bool = False) -> None:
    """The members at the end.  With ``lifecycle``, a ``process`` column says which were still running
    (the state of a killed or stopped member is as it left it, not a second leader)."""
    lifecycle = list(lifecycle)
    table = Table(title=f"{source}: model {summary.get('model')}", title_justify="left")
    columns = ["member", *(["process"] if lifecycle else []), "election", "role", "term", "leader", "candidate", "log",
               "append", "commit", "seed", "nomination"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("process", "election", "role", "nomination") else "right")
    seeds = summary.get("seeds") or {}
    sources = summary.get("nominationDelay") or {}
    for member, state in (summary.get("nodes") or {}).items():
        table.add_row(
            member,
            *([_process(member, lifecycle, origin, wall_clock)] if lifecycle else []),
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
    for member, verdict in (summary.get("verdicts") or {}).items():
        text, style = verdict_line(member, verdict, origin, wall_clock)
        console.print(Text(text, style=style))
    divergences = summary.get("divergences", 0)
    style = "bold red" if divergences else "bold green"
    console.print(Text(f"{divergences} divergence(s); trace sha256 {summary.get('traceSha256')}", style=style))


def verdict_line(member: str, verdict: Mapping[str, Any], origin: int | None = None, wall_clock: bool = False
                 ) -> tuple[str, str]:
    """One member's verdict (the summary's ``verdicts``, `engine.divergences.count_causes`): the line and
    its style."""
    count = verdict.get("divergences", 0)
    if not count:
        return f"member {member}: replayed as recorded, no divergence", "green"
    parts = []
    if verdict.get("model"):
        first = verdict.get("firstModelTs")
        when = f", the first at {_when(first, origin, wall_clock).strip()}" if first is not None else ""
        parts.append(f"{verdict['model']} from the model{when}")
    if verdict.get("timing"):
        parts.append(f"{verdict['timing']} timing (the same behaviour at another time)")
    if verdict.get("evidence"):
        settled = "; ".join(verdict.get("settledBy") or ())
        parts.append(f"{verdict['evidence']} from missing evidence ({settled} would settle it)")
    checks = verdict.get("checks", count)
    runs = f" ({checks} checks)" if checks != count else ""
    if verdict.get("model"):
        return f"member {member}: DIVERGES: {count} divergence(s){runs}: " + ", ".join(parts), "bold red"
    return f"member {member}: {count} divergence(s){runs}, none from the model: " + ", ".join(parts), "yellow"
