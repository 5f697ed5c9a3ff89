"""The aeron-agent text event log (Aeron 1.47): parse each line into a record, and write it back.

What the Java agent (``-javaagent:aeron-agent.jar`` with ``aeron.event.cluster.log``) prints,
one event per line (aeron-formats.md §9)::

    [<seconds>.<nanos9>] <CONTEXT>: <EVENT> [<captureLength>/<length>]: <fields...>
    [<seconds>.<nanos9>] log started <yyyy-MM-dd HH:mm:ss.SSSZ>

The timestamp is the logging thread's ``System.nanoTime()`` (monotonic, one clock per JVM); only
the ``log started`` line ties it to the wall clock.

* CLUSTER events 1-22 become `AgentLogRecord`s with typed ``fields`` under the names Aeron prints:
  ints, booleans, strings; semantic versions (``appVersion=0.0.1``, ``protocolVersion``) as the int
  Aeron encodes (``major << 16 | minor << 8 | patch``); ``flags=0b00000001`` as an int; the
  ``FROM -> TO`` of ELECTION_STATE_CHANGE, STATE_CHANGE, ROLE_CHANGE and
  CLUSTER_BACKUP_STATE_CHANGE as ``from`` and ``to`` (None where Java printed ``null``).
* Lines of other contexts (DRIVER, ARCHIVE, ...) and CLUSTER events this table does not know are
  kept as `OtherLogLine`s: timestamp, context, event name and the text after the header.
* A line that fits none of these is a problem (a `DecodeError` naming the line number); reading
  goes on with the next line.

Each event's text is described once, as data (`CLUSTER_EVENTS`), and both the parser (a regular
expression) and the writer (`format_record`) are built from it, so that parse -> format gives back
the original line byte for byte.  The same table carries the binary layout of each event, so that
`cluster_event` computes the ``[captureLength/length]`` Aeron would print (including Aeron's own
quirks: reasons capped at 300 characters, STANDBY_SNAPSHOT_NOTIFICATION's length counting 8 bytes
more than it encodes) for logs we write ourselves.

No I/O: callers pass lines (or the whole text) and write the strings returned.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from formats.errors import DecodeError

#: EventConfiguration.MAX_EVENT_LENGTH (4096 less the line separator) less the 16-byte log header.
MAX_CAPTURE_LENGTH = 4096 - 1 - 16
MAX_REASON_LENGTH = 300
NANOS_PER_SECOND = 1_000_000_000


@dataclass(frozen=True, slots=True)
class EventSpec:
    """How one CLUSTER event is printed (``template``) and encoded (``layout``).

    ``template`` lists the printed fields in order: ``name`` is ``name=<int>``, ``name:kind`` is
    ``name=<kind>`` (kinds: int, bool, str, version, flags), ``TRANSITION`` is ``FROM -> TO``.
    ``layout`` lists the binary fields in encoding order: ``long:name``, ``int:name``,
    ``byte:name``, ``string:name`` (int32 length + ASCII), ``transition`` and ``trailing:name``
    (a string cut to fit, ending in ``...`` when cut).
    """

    code: int
    template: str
    layout: tuple[str, ...]
    trailing_cap: int | None = None  # a trailing string counts at most this many chars in `length`
    length_surplus: int = 0  # bytes Aeron's length method counts beyond what it encodes


def _longs(*names: str) -> tuple[str, ...]:
    return tuple(f"long:{name}" for name in names)


def _ints(*names: str) -> tuple[str, ...]:
    return tuple(f"int:{name}" for name in names)


_STATE_CHANGE = EventSpec(3, "memberId TRANSITION", ("int:memberId", "transition"))

#: Every CLUSTER event of Aeron 1.47.3 (ClusterEventCode, ClusterEventDissector, ClusterEventEncoder).
CLUSTER_EVENTS: dict[str, EventSpec] = {
    "ELECTION_STATE_CHANGE": EventSpec(
        1,
        "memberId TRANSITION leaderId candidateTermId leadershipTermId logPosition logLeadershipTermId"
        " appendPosition catchupPosition reason:str",
        _longs(
            "candidateTermId",
            "leadershipTermId",
            "logPosition",
            "logLeadershipTermId",
            "appendPosition",
            "catchupPosition",
        )
        + _ints("memberId", "leaderId")
        + ("transition", "trailing:reason"),
        trailing_cap=MAX_REASON_LENGTH,
    ),
    "NEW_LEADERSHIP_TERM": EventSpec(
        2,
        "memberId logLeadershipTermId nextLeadershipTermId nextTermBaseLogPosition nextLogPosition"
        " leadershipTermId termBaseLogPosition logPosition leaderRecordingId timestamp leaderId logSessionId"
        " appVersion:version isStartup:bool",
        _longs(
            "logLeadershipTermId",
            "nextLeadershipTermId",
            "nextTermBaseLogPosition",
            "nextLogPosition",
            "leadershipTermId",
            "termBaseLogPosition",
            "logPosition",
            "leaderRecordingId",
            "timestamp",
        )
        + _ints("memberId", "leaderId", "logSessionId", "appVersion")
        + ("byte:isStartup",),
    ),
    "STATE_CHANGE": _STATE_CHANGE,
    "ROLE_CHANGE": EventSpec(4, _STATE_CHANGE.template, _STATE_CHANGE.layout),
    "CANVASS_POSITION": EventSpec(
        5,
        "memberId logLeadershipTermId logPosition leadershipTermId followerMemberId protocolVersion:version",
        _longs("logLeadershipTermId", "logPosition", "leadershipTermId")
        + _ints("followerMemberId", "protocolVersion", "memberId"),
    ),
    "REQUEST_VOTE": EventSpec(
        6,
        "memberId logLeadershipTermId logPosition candidateTermId candidateId protocolVersion:version",
        _longs("logLeadershipTermId", "logPosition", "candidateTermId")
        + _ints("candidateId", "protocolVersion", "memberId"),
    ),
    "CATCHUP_POSITION": EventSpec(
        7,
        "memberId leadershipTermId logPosition followerMemberId catchupEndpoint:str",
        _longs("leadershipTermId", "logPosition")
        + _ints("followerMemberId", "memberId")
        + ("trailing:catchupEndpoint",),
    ),
    "STOP_CATCHUP": EventSpec(
        8,
        "memberId leadershipTermId followerMemberId",
        _longs("leadershipTermId") + _ints("followerMemberId", "memberId"),
    ),
    "TRUNCATE_LOG_ENTRY": EventSpec(
        9,
        "memberId state:str logLeadershipTermId leadershipTermId candidateTermId commitPosition logPosition"
        " appendPosition oldPosition newPosition",
        _longs(
            "logLeadershipTermId",
            "leadershipTermId",
            "candidateTermId",
            "commitPosition",
            "logPosition",
            "appendPosition",
            "oldPosition",
            "newPosition",
        )
        + ("int:memberId", "string:state"),
    ),
    "REPLAY_NEW_LEADERSHIP_TERM": EventSpec(
        10,
        "memberId isInElection:bool leadershipTermId logPosition termBaseLogPosition appVersion timestamp"
        " timeUnit:str",
        _longs("leadershipTermId", "logPosition", "timestamp", "termBaseLogPosition")
        + _ints("memberId", "appVersion")
        + ("byte:isInElection", "string:timeUnit"),
    ),
    "APPEND_POSITION": EventSpec(
        11,
        "memberId leadershipTermId logPosition followerMemberId flags:flags",
        _longs("leadershipTermId", "logPosition") + _ints("followerMemberId", "memberId") + ("byte:flags",),
    ),
    "COMMIT_POSITION": EventSpec(
        12,
        "memberId leadershipTermId logPosition leaderId",
        _longs("leadershipTermId", "logPosition") + _ints("leaderId", "memberId"),
    ),
    "ADD_PASSIVE_MEMBER": EventSpec(
        13,
        "memberId correlationId memberEndpoints:str",
        ("long:correlationId", "int:memberId", "trailing:memberEndpoints"),
    ),
    "APPEND_SESSION_CLOSE": EventSpec(
        14,
        "memberId sessionId closeReason:str leadershipTermId timestamp timeUnit:str",
        _longs("sessionId", "leadershipTermId", "timestamp")
        + ("int:memberId", "string:closeReason", "string:timeUnit"),
    ),
    "CLUSTER_BACKUP_STATE_CHANGE": EventSpec(16, _STATE_CHANGE.template, _STATE_CHANGE.layout),
    "TERMINATION_POSITION": EventSpec(
        17,
        "memberId logLeadershipTermId logPosition",
        _longs("logLeadershipTermId", "logPosition") + ("int:memberId",),
    ),
    "TERMINATION_ACK": EventSpec(
        18,
        "memberId logLeadershipTermId logPosition senderMemberId",
        _longs("logLeadershipTermId", "logPosition") + _ints("memberId", "senderMemberId"),
    ),
    "SERVICE_ACK": EventSpec(
        19,
        "memberId logPosition timestamp timeUnit:str ackId relevantId serviceId",
        _longs("logPosition", "timestamp", "ackId", "relevantId")
        + _ints("memberId", "serviceId")
        + ("string:timeUnit",),
    ),
    "REPLICATION_ENDED": EventSpec(
        20,
        "memberId purpose:str channel:str srcRecordingId dstRecordingId position hasSynced:bool",
        _longs("srcRecordingId", "dstRecordingId", "position")
        + ("int:memberId", "byte:hasSynced", "string:purpose", "trailing:channel"),
    ),
    "STANDBY_SNAPSHOT_NOTIFICATION": EventSpec(
        21,
        "memberId recordingId leadershipTermId termBaseLeadershipPosition logPosition timestamp timeUnit:str"
        " serviceId archiveEndpoint:str",
        _longs("recordingId", "leadershipTermId", "termBaseLeadershipPosition", "logPosition", "timestamp")
        + _ints("memberId", "serviceId")
        + ("string:timeUnit", "trailing:archiveEndpoint"),
        length_surplus=8,  # standbySnapshotNotificationLength counts two length prefixes as longs
    ),
    "NEW_ELECTION": EventSpec(
        22,
        "memberId leadershipTermId logPosition appendPosition reason:str",
        _longs("leadershipTermId", "logPosition", "appendPosition") + ("int:memberId", "trailing:reason"),
        trailing_cap=MAX_REASON_LENGTH,
    ),
}

#: DYNAMIC_JOIN_STATE_CHANGE_UNUSED (15) exists but its dissector prints nothing, not even a header.
CLUSTER_EVENT_CODES = {name: spec.code for name, spec in CLUSTER_EVENTS.items()} | {
    "DYNAMIC_JOIN_STATE_CHANGE_UNUSED": 15
}


# --- Records --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class LogStarted:
    """``[ts] log started <wall clock>``: ties this JVM's nanoTime clock to the wall clock."""

    ts_ns: int
    wall_clock: str  #: as printed, e.g. ``2026-11-22 01:49:46.563+0000``
    epoch_ms: int  #: the same instant in ms since the epoch
    line_number: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentLogRecord:
    """One CLUSTER event with its fields by Aeron's printed names."""

    ts_ns: int
    context: str
    event: str
    capture_length: int
    length: int
    fields: dict[str, Any]
    line_number: int | None = field(default=None, compare=False)

    @property
    def event_code(self) -> int:
        return CLUSTER_EVENT_CODES[self.event]

    @property
    def truncated(self) -> bool:
        """Aeron captured less than the whole event (a trailing string ends in ``...``)."""
        return self.capture_length < self.length


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherLogLine:
    """A line of another context (DRIVER, ARCHIVE, ...) or an unknown event, kept as printed."""

    ts_ns: int
    context: str
    event: str
    capture_length: int
    length: int
    text: str  #: everything after ``[capture/length]``, usually starting with ``: ``
    line_number: int | None = field(default=None, compare=False)


LogLine = LogStarted | AgentLogRecord | OtherLogLine


@dataclass
class AgentLog:
    """A parsed log: every line that could be read, in order, and a problem for each that could not."""

    records: list[LogLine]
    problems: list[DecodeError]

    @property
    def started(self) -> LogStarted | None:
        """The first ``log started`` line (a log appended to by several runs has several)."""
        return next((record for record in self.records if type(record) is LogStarted), None)


# --- Timestamps and values ------------------------------------------------------------------------
def format_timestamp(ts_ns: int) -> str:
    """``[seconds.nanos9] `` without the trailing space, as `LogUtil.appendTimestamp` prints it.

    Java truncates the division toward zero; for a negative time that is not a whole number of
    seconds its output is ill-formed, so we print the sign once before the magnitude instead.
    """
    sign = "-" if ts_ns < 0 else ""
    seconds, nanos = divmod(abs(ts_ns), NANOS_PER_SECOND)
    return f"[{sign}{seconds}.{nanos:09d}]"


def _version_text(version: int) -> str:
    return f"{(version >> 16) & 0xFF}.{(version >> 8) & 0xFF}.{version & 0xFF}"


def _parse_version(text: str) -> int:
    major, minor, patch = (int(part) for part in text.split("."))
    if max(major, minor, patch) > 0xFF:
        raise ValueError(f"semantic version part above 255 in {text}")
    return (major << 16) | (minor << 8) | patch


_INT = r"(0|-?[1-9][0-9]*)"
_KIND_PATTERNS = {
    "int": _INT,
    "bool": r"(true|false)",
    "version": r"((?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*)\.(?:0|[1-9][0-9]*))",
    "flags": r"0b([01]{8})",
}
_PARSERS = {
    "int": int,
    "bool": lambda text: text == "true",
    "version": _parse_version,
    "flags": lambda text: int(text, 2),
    "str": str,
    "state": lambda text: None if text == "null" else text,
}
_FORMATTERS = {
    "int": str,
    "bool": lambda value: "true" if value else "false",
    "version": _version_text,
    "flags": lambda value: f"0b{value & 0xFF:08b}",
    "str": str,
    "state": lambda value: "null" if value is None else value,
}


@dataclass(frozen=True, slots=True)
class _Compiled:
    pattern: re.Pattern[str]
    names: tuple[str, ...]
    kinds: tuple[str, ...]
    pieces: tuple[tuple[str, str | None, str | None], ...]  # (literal before, field name, kind)


def _compile(spec: EventSpec) -> _Compiled:
    tokens = spec.template.split(" ")
    regex = []
    names: list[str] = []
    kinds: list[str] = []
    pieces: list[tuple[str, str | None, str | None]] = []
    for position, token in enumerate(tokens):
        last = position == len(tokens) - 1
        lead = "" if position == 0 else " "
        text_pattern = "(.*)" if last else "(.*?)"
        if token == "TRANSITION":
            regex.append(re.escape(lead) + "(.*?) -> " + text_pattern)
            names += ["from", "to"]
            kinds += ["state", "state"]
            pieces += [(lead, "from", "state"), (" -> ", "to", "state")]
            continue
        name, _, kind = token.partition(":")
        kind = kind or "int"
        regex.append(re.escape(f"{lead}{name}=") + (text_pattern if kind == "str" else _KIND_PATTERNS[kind]))
        names.append(name)
        kinds.append(kind)
        pieces.append((f"{lead}{name}=", name, kind))
    return _Compiled(
        re.compile(": " + "".join(regex) + r"\Z", re.DOTALL), tuple(names), tuple(kinds), tuple(pieces)
    )


_COMPILED = {name: _compile(spec) for name, spec in CLUSTER_EVENTS.items()}

# Numbers as Java prints them (no leading zeros), so that every line we accept prints back the same.
_COUNT = r"(0|[1-9][0-9]*)"
_HEADER = re.compile(
    rf"\[(-?){_COUNT}\.([0-9]{{9}})\] "
    rf"(?:([A-Z][A-Z0-9_]*): ([A-Z][A-Z0-9_]*) \[{_COUNT}/{_COUNT}\]|log started (.*)\Z)"
)
_WALL_CLOCK = "%Y-%m-%d %H:%M:%S.%f%z"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- Parsing --------------------------------------------------------------------------------------
def parse_line(line: str, *, line_number: int | None = None, source: str | None = None) -> LogLine:
    """One line of the log (its line ending is ignored).  Raises DecodeError (unit "line")."""
    line = line.rstrip("\r\n")

    def problem(expected: str) -> DecodeError:
        return DecodeError(expected, source=source, offset=line_number, unit="line")

    match = _HEADER.match(line)
    if match is None:
        raise problem(f"an aeron-agent line '[seconds.nanos] CONTEXT: EVENT [n/n]: ...', found {line[:60]!r}")
    sign, seconds, nanos, context, event, capture, length, wall_clock = match.groups()
    ts_ns = int(seconds) * NANOS_PER_SECOND + int(nanos)
    if sign:
        if ts_ns == 0:
            raise problem("a timestamp other than -0")
        ts_ns = -ts_ns
    if wall_clock is not None:
        try:
            instant = datetime.strptime(wall_clock, _WALL_CLOCK)
        except ValueError:
            raise problem(f"'log started yyyy-MM-dd HH:mm:ss.SSSZ', found {wall_clock!r}") from None
        epoch_ms = (instant - _EPOCH) // timedelta(milliseconds=1)
        return LogStarted(ts_ns=ts_ns, wall_clock=wall_clock, epoch_ms=epoch_ms, line_number=line_number)
    rest = line[match.end() :]
    compiled = _COMPILED.get(event) if context == "CLUSTER" else None
    if compiled is None:
        return OtherLogLine(
            ts_ns=ts_ns,
            context=context,
            event=event,
            capture_length=int(capture),
            length=int(length),
            text=rest,
            line_number=line_number,
        )
    body = compiled.pattern.match(rest)
    if body is None:
        raise problem(f"CLUSTER {event} fields '{CLUSTER_EVENTS[event].template}'")
    fields: dict[str, Any] = {}
    try:
        for name, kind, text in zip(compiled.names, compiled.kinds, body.groups(), strict=True):
            fields[name] = _PARSERS[kind](text)
    except ValueError as error:
        raise problem(f"CLUSTER {event}: {error}") from None
    return AgentLogRecord(
        ts_ns=ts_ns,
        context=context,
        event=event,
        capture_length=int(capture),
        length=int(length),
        fields=fields,
        line_number=line_number,
    )


def read_agent_log(lines: Iterable[str] | str, *, source: str | None = None) -> AgentLog:
    """Every line of a log (an iterable of lines, or the whole text).  Blank lines are skipped."""
    if isinstance(lines, str):
        lines = lines.splitlines()
    records: list[LogLine] = []
    problems: list[DecodeError] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(parse_line(line, line_number=number, source=source))
        except DecodeError as error:
            problems.append(error)
    return AgentLog(records, problems)


# --- Writing --------------------------------------------------------------------------------------
def format_record(record: LogLine) -> str:
    """The line exactly as Aeron prints it, without the line separator."""
    timestamp = format_timestamp(record.ts_ns)
    if type(record) is LogStarted:
        return f"{timestamp} log started {record.wall_clock}"
    header = f"{timestamp} {record.context}: {record.event} [{record.capture_length}/{record.length}]"
    if type(record) is OtherLogLine:
        return header + record.text
    compiled = _COMPILED.get(record.event)
    if compiled is None:
        raise ValueError(f"not a CLUSTER event we can print: {record.event}")
    parts = [header, ": "]
    values = record.fields
    for literal, name, kind in compiled.pieces:
        parts.append(literal)
        parts.append(_FORMATTERS[kind](values[name]))
    return "".join(parts)


def cluster_event(
    event: str, ts_ns: int, fields: dict[str, Any], *, context: str = "CLUSTER"
) -> AgentLogRecord:
    """A CLUSTER record as Aeron's logger would make it: lengths computed, trailing strings cut to fit.

    ``fields`` holds every field of the event's template by its printed name (``from``/``to`` for
    a transition, None printing as ``null``).
    """
    spec = CLUSTER_EVENTS[event]
    missing = [name for name in _COMPILED[event].names if name not in fields]
    if missing:
        raise ValueError(f"{event} needs fields {missing}")
    sizes = {"long": 8, "int": 4, "byte": 1}
    before_trailing = 0
    trailing_name = None
    for item in spec.layout:
        kind, _, name = item.partition(":")
        if kind in sizes:
            before_trailing += sizes[kind]
        elif kind == "string":
            before_trailing += 4 + len(str(fields[name]))
        elif kind == "transition":
            before_trailing += (
                4 + len(_FORMATTERS["state"](fields["from"])) + 4 + len(_FORMATTERS["state"](fields["to"]))
            )
        else:
            trailing_name = name
    length = before_trailing + spec.length_surplus
    values = dict(fields)
    if trailing_name is not None:
        text = str(fields[trailing_name])
        counted = len(text) if spec.trailing_cap is None else min(len(text), spec.trailing_cap)
        length += 4 + counted
        capture_length = min(length, MAX_CAPTURE_LENGTH)
        room = capture_length - before_trailing - 4
        if len(text) > room:
            text = text[: room - 3] + "..."
        values[trailing_name] = text
    else:
        capture_length = min(length, MAX_CAPTURE_LENGTH)
    return AgentLogRecord(
        ts_ns=ts_ns, context=context, event=event, capture_length=capture_length, length=length, fields=values
    )


def format_log_started(ts_ns: int, epoch_ms: int) -> str:
    """The first line of a log, for a wall clock given in ms since the epoch (printed in UTC)."""
    instant = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC).replace(microsecond=(epoch_ms % 1000) * 1000)
    wall_clock = instant.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}" + instant.strftime("%z")
    return format_record(LogStarted(ts_ns=ts_ns, wall_clock=wall_clock, epoch_ms=epoch_ms))
