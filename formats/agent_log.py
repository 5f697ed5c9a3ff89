"""The aeron-agent text event log (Aeron 1.40 … 1.50): parse each line into a record, and write it back.

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

Three dialects (`DIALECTS`, checked against aeron-agent's dissectors at each tag and against real
logs of 1.41.7, 1.47.3 and 1.50.4): up to 1.43 the clock has 6 decimals (microseconds) and
ELECTION_STATE_CHANGE has no reason; 1.44-1.49 is the table below; from 1.50 every reason is quoted,
ROLE_CHANGE / STATE_CHANGE carry one, NEW_LEADERSHIP_TERM prints commitPosition and ``log started``
names each component's version.  A log's dialect is told from its content (`detect_dialect`), each
record keeps the dialect it was read in, and prints back in it.

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


# --- Dialects -------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Dialect:
    """How one range of Aeron releases prints its log (checked in aeron-agent's dissectors per tag).

    ``first``/``last`` are the first and last release lines printing it (``last`` None: still
    current).  Events not in ``events`` print as in `CLUSTER_EVENTS`.
    """

    name: str
    first: str
    last: str | None
    fraction_digits: int  # 6: LogUtil.appendTimestamp printed microseconds (up to 1.43); 9: nanoseconds
    events: dict[str, EventSpec]
    loggers_in_log_started: bool = False  # ", enabled loggers: {CONTEXT: version=... commit=..., ...}"

    @property
    def versions(self) -> str:
        """The releases it implies, as ``1.44–1.49`` or ``1.50 and later``."""
        return f"{self.first}–{self.last}" if self.last else f"{self.first} and later"


def _with_reason(spec: EventSpec, reason_kind: str) -> EventSpec:
    """``spec`` whose ``reason`` field prints as ``reason_kind`` (str: bare; qstr: in double quotes)."""
    return EventSpec(spec.code, spec.template.replace("reason:str", f"reason:{reason_kind}"), spec.layout,
                     spec.trailing_cap, spec.length_surplus)


_ESC = CLUSTER_EVENTS["ELECTION_STATE_CHANGE"]
_NLT = CLUSTER_EVENTS["NEW_LEADERSHIP_TERM"]
_STATE_CHANGE_WITH_REASON = EventSpec(
    3, "memberId TRANSITION reason:qstr", _STATE_CHANGE.layout + ("trailing:reason",), trailing_cap=MAX_REASON_LENGTH
)

#: Oldest first.  Up to 1.43 no reason on ELECTION_STATE_CHANGE (and no NEW_ELECTION); 1.44 added both
#: and nanosecond timestamps; 1.50 quotes every reason, gives ROLE_CHANGE/STATE_CHANGE one, prints
#: NewLeadershipTerm's commitPosition (schema v15) and the components' versions at ``log started``.
DIALECTS: tuple[Dialect, ...] = (
    Dialect(
        "1.40-1.43", "1.40", "1.43", 6,
        {"ELECTION_STATE_CHANGE": EventSpec(
            1, _ESC.template.removesuffix(" reason:str"),
            tuple(item for item in _ESC.layout if item != "trailing:reason"))},
    ),
    Dialect("1.44-1.49", "1.44", "1.49", 9, {}),
    Dialect(
        "1.50", "1.50", None, 9,
        {
            "ELECTION_STATE_CHANGE": _with_reason(_ESC, "qstr"),
            "NEW_ELECTION": _with_reason(CLUSTER_EVENTS["NEW_ELECTION"], "qstr"),
            "STATE_CHANGE": _STATE_CHANGE_WITH_REASON,
            "ROLE_CHANGE": EventSpec(4, _STATE_CHANGE_WITH_REASON.template, _STATE_CHANGE_WITH_REASON.layout,
                                     trailing_cap=MAX_REASON_LENGTH),
            "CLUSTER_BACKUP_STATE_CHANGE": EventSpec(16, _STATE_CHANGE_WITH_REASON.template,
                                                     _STATE_CHANGE_WITH_REASON.layout, trailing_cap=MAX_REASON_LENGTH),
            "NEW_LEADERSHIP_TERM": EventSpec(
                2, _NLT.template.replace(" logPosition ", " logPosition commitPosition "),
                _NLT.layout[:7] + ("long:commitPosition",) + _NLT.layout[7:]),
        },
        loggers_in_log_started=True,
    ),
)
DIALECT_BY_NAME = {dialect.name: dialect for dialect in DIALECTS}
#: What the table above (CLUSTER_EVENTS) describes, and what records default to.
DEFAULT_DIALECT = "1.44-1.49"


def event_spec(event: str, dialect: str = DEFAULT_DIALECT) -> EventSpec:
    return DIALECT_BY_NAME[dialect].events.get(event) or CLUSTER_EVENTS[event]


# --- Records --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class LogStarted:
    """``[ts] log started <wall clock>``: ties this JVM's nanoTime clock to the wall clock."""

    ts_ns: int
    wall_clock: str  #: as printed, e.g. ``2026-11-22 01:49:46.563+0000``
    epoch_ms: int  #: the same instant in ms since the epoch
    loggers: str | None = None  #: 1.50 and later: what follows ``, enabled loggers: ``, as printed
    dialect: str = DEFAULT_DIALECT
    line_number: int | None = field(default=None, compare=False)

    @property
    def versions(self) -> dict[str, str]:
        """Each logged component's Aeron version (``{"CLUSTER": "1.50.4", ...}``); empty before 1.50."""
        return dict(_LOGGER_VERSION.findall(self.loggers or ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentLogRecord:
    """One CLUSTER event with its fields by Aeron's printed names."""

    ts_ns: int
    context: str
    event: str
    capture_length: int
    length: int
    fields: dict[str, Any]
    dialect: str = DEFAULT_DIALECT  #: the dialect whose template the line matched
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
    dialect: str = DEFAULT_DIALECT
    line_number: int | None = field(default=None, compare=False)


LogLine = LogStarted | AgentLogRecord | OtherLogLine


@dataclass
class AgentLog:
    """A parsed log: every line that could be read, in order, and a problem for each that could not."""

    records: list[LogLine]
    problems: list[DecodeError]
    dialect: Dialect = DIALECT_BY_NAME[DEFAULT_DIALECT]  #: told from the text (`detect_dialect`)

    @property
    def started(self) -> LogStarted | None:
        """The first ``log started`` line (a log appended to by several runs has several)."""
        return next((record for record in self.records if type(record) is LogStarted), None)

    @property
    def aeron_version(self) -> str | None:
        """The Aeron release the log names (1.50 and later print it at ``log started``), else None."""
        for record in self.records:
            if type(record) is LogStarted and record.versions:
                versions = record.versions
                return versions.get("CLUSTER") or next(iter(versions.values()))
        return None


# --- Timestamps and values ------------------------------------------------------------------------
def format_timestamp(ts_ns: int, fraction_digits: int = 9) -> str:
    """``[seconds.nanos9] `` without the trailing space, as `LogUtil.appendTimestamp` prints it.

    With ``fraction_digits`` 6 (Aeron up to 1.43), microseconds: the nanoseconds below are dropped.

    Java truncates the division toward zero; for a negative time that is not a whole number of
    seconds its output is ill-formed, so we print the sign once before the magnitude instead.
    """
    sign = "-" if ts_ns < 0 else ""
    seconds, nanos = divmod(abs(ts_ns), NANOS_PER_SECOND)
    if fraction_digits == 6:
        return f"[{sign}{seconds}.{nanos // 1000:06d}]"
    return f"[{sign}{seconds}.{nanos:09d}]"


def _version_text(version: int) -> str:
    return f"{(version >> 16) & 0xFF}.{(version >> 8) & 0xFF}.{version & 0xFF}"


def _parse_version(text: str) -> int:
    major, minor, patch = (int(part) for part in text.split("."))
    if max(major, minor, patch) > 0xFF:
        raise ValueError(f"semantic version part above 255 in {text}")
    return (major << 16) | (minor << 8) | patch


_INT = r"(0|-?[1-9][0-9]*)"
_STATE_NAME = r"[A-Za-z0-9_]+"  # an enum constant's name, or null
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
    "qstr": str,
    "state": lambda text: None if text == "null" else text,
}
_FORMATTERS = {
    "int": str,
    "bool": lambda value: "true" if value else "false",
    "version": _version_text,
    "flags": lambda value: f"0b{value & 0xFF:08b}",
    "str": str,
    "qstr": lambda value: f'"{value}"',
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
        quoted_pattern = '"(.*)"' if last else '"(.*?)"'
        if token == "TRANSITION":
            regex.append(re.escape(lead) + f"({_STATE_NAME}) -> ({_STATE_NAME})")
            names += ["from", "to"]
            kinds += ["state", "state"]
            pieces += [(lead, "from", "state"), (" -> ", "to", "state")]
            continue
        name, _, kind = token.partition(":")
        kind = kind or "int"
        value_pattern = {"str": text_pattern, "qstr": quoted_pattern}.get(kind) or _KIND_PATTERNS[kind]
        regex.append(re.escape(f"{lead}{name}=") + value_pattern)
        names.append(name)
        kinds.append(kind)
        pieces.append((f"{lead}{name}=", name, kind))
    return _Compiled(
        re.compile(": " + "".join(regex) + r"\Z", re.DOTALL), tuple(names), tuple(kinds), tuple(pieces)
    )


_COMPILED = {name: _compile(spec) for name, spec in CLUSTER_EVENTS.items()}
#: (dialect, event) -> compiled template, for every dialect and event.
_COMPILED_IN = {
    (dialect.name, name): _compile(dialect.events[name]) if name in dialect.events else _COMPILED[name]
    for dialect in DIALECTS
    for name in CLUSTER_EVENTS
}
_LOGGER_VERSION = re.compile(r"([A-Z][A-Z0-9_]*): [^,{}]*?version=([0-9][0-9A-Za-z.\-]*)")
_LOGGERS = ", enabled loggers: "

# Numbers as Java prints them (no leading zeros), so that every line we accept prints back the same.
_COUNT = r"(0|[1-9][0-9]*)"
_HEADER = re.compile(
    rf"\[(-?){_COUNT}\.([0-9]{{9}}|[0-9]{{6}})\] "
    rf"(?:([A-Z][A-Z0-9_]*): ([A-Z][A-Z0-9_]*) \[{_COUNT}/{_COUNT}\]|log started (.*)\Z)"
)
_WALL_CLOCK = "%Y-%m-%d %H:%M:%S.%f%z"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- Parsing --------------------------------------------------------------------------------------
def _candidates(fraction_digits: int, hint: str | None) -> list[Dialect]:
    fitting = [dialect for dialect in reversed(DIALECTS) if dialect.fraction_digits == fraction_digits]
    preferred = hint or DEFAULT_DIALECT
    return sorted(fitting, key=lambda dialect: dialect.name != preferred)  # the hint, then the newest first


def parse_line(
    line: str, *, line_number: int | None = None, source: str | None = None, dialect: str | None = None
) -> LogLine:
    """One line of the log (its line ending is ignored).  Raises DecodeError (unit "line").

    The dialect is told from the line itself (the timestamp's digits, the template its fields
    match); ``dialect`` is the one to prefer where a line reads the same in several.
    """
    line = line.rstrip("\r\n")

    def problem(expected: str) -> DecodeError:
        return DecodeError(expected, source=source, offset=line_number, unit="line")

    match = _HEADER.match(line)
    if match is None:
        raise problem(f"an aeron-agent line '[seconds.nanos] CONTEXT: EVENT [n/n]: ...', found {line[:60]!r}")
    sign, seconds, fraction, context, event, capture, length, wall_clock = match.groups()
    ts_ns = int(seconds) * NANOS_PER_SECOND + int(fraction) * 10 ** (9 - len(fraction))
    if sign:
        if ts_ns == 0:
            raise problem("a timestamp other than -0")
        ts_ns = -ts_ns
    candidates = _candidates(len(fraction), dialect)
    if wall_clock is not None:
        wall_clock, loggers_sep, loggers = wall_clock.partition(_LOGGERS)
        try:
            instant = datetime.strptime(wall_clock, _WALL_CLOCK)
        except ValueError:
            raise problem(f"'log started yyyy-MM-dd HH:mm:ss.SSSZ', found {wall_clock!r}") from None
        epoch_ms = (instant - _EPOCH) // timedelta(milliseconds=1)
        chosen = next(d for d in candidates if d.loggers_in_log_started == bool(loggers_sep) or d is candidates[-1])
        return LogStarted(ts_ns=ts_ns, wall_clock=wall_clock, epoch_ms=epoch_ms,
                          loggers=loggers if loggers_sep else None, dialect=chosen.name, line_number=line_number)
    rest = line[match.end() :]
    if context != "CLUSTER" or event not in CLUSTER_EVENTS:
        return OtherLogLine(
            ts_ns=ts_ns,
            context=context,
            event=event,
            capture_length=int(capture),
            length=int(length),
            text=rest,
            dialect=candidates[0].name,
            line_number=line_number,
        )
    for candidate in candidates:
        compiled = _COMPILED_IN[candidate.name, event]
        body = compiled.pattern.match(rest)
        if body is not None:
            break
    else:
        raise problem(f"CLUSTER {event} fields '{event_spec(event, candidates[0].name).template}'")
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
        dialect=candidate.name,
        line_number=line_number,
    )


def detect_dialect(lines: Iterable[str]) -> Dialect:
    """The dialect a log is written in, from the first line that tells (default: 1.44-1.49)."""
    for line in lines:
        match = _HEADER.match(line)
        if match is None:
            continue
        if len(match.group(3)) == 6:
            return DIALECT_BY_NAME["1.40-1.43"]
        if match.group(8) is not None and _LOGGERS in line:
            return DIALECT_BY_NAME["1.50"]
        if match.group(5) in ("ELECTION_STATE_CHANGE", "NEW_ELECTION", "ROLE_CHANGE") and " reason=" in line:
            return DIALECT_BY_NAME["1.50" if ' reason="' in line else "1.44-1.49"]
    return DIALECT_BY_NAME[DEFAULT_DIALECT]


def read_agent_log(lines: Iterable[str] | str, *, source: str | None = None) -> AgentLog:
    """Every line of a log (an iterable of lines, or the whole text).  Blank lines are skipped."""
    lines = lines.splitlines() if isinstance(lines, str) else list(lines)
    dialect = detect_dialect(lines)
    records: list[LogLine] = []
    problems: list[DecodeError] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(parse_line(line, line_number=number, source=source, dialect=dialect.name))
        except DecodeError as error:
            problems.append(error)
    return AgentLog(records, problems, dialect)


# --- Writing --------------------------------------------------------------------------------------
def format_record(record: LogLine) -> str:
    """The line exactly as Aeron prints it, without the line separator."""
    dialect = DIALECT_BY_NAME[record.dialect]
    timestamp = format_timestamp(record.ts_ns, dialect.fraction_digits)
    if type(record) is LogStarted:
        loggers = "" if record.loggers is None else _LOGGERS + record.loggers
        return f"{timestamp} log started {record.wall_clock}{loggers}"
    header = f"{timestamp} {record.context}: {record.event} [{record.capture_length}/{record.length}]"
    if type(record) is OtherLogLine:
        return header + record.text
    compiled = _COMPILED_IN.get((record.dialect, record.event))
    if compiled is None:
        raise ValueError(f"not a CLUSTER event we can print: {record.event}")
    parts = [header, ": "]
    values = record.fields
    for literal, name, kind in compiled.pieces:
        parts.append(literal)
        parts.append(_FORMATTERS[kind](values[name]))
    return "".join(parts)


def cluster_event(
    event: str, ts_ns: int, fields: dict[str, Any], *, context: str = "CLUSTER", dialect: str = DEFAULT_DIALECT
) -> AgentLogRecord:
    """A CLUSTER record as Aeron's logger would make it: lengths computed, trailing strings cut to fit.

    ``fields`` holds every field of the event's template by its printed name (``from``/``to`` for
    a transition, None printing as ``null``).
    """
    spec = event_spec(event, dialect)
    missing = [name for name in _COMPILED_IN[dialect, event].names if name not in fields]
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
        ts_ns=ts_ns, context=context, event=event, capture_length=capture_length, length=length, fields=values,
        dialect=dialect,
    )


def format_log_started(ts_ns: int, epoch_ms: int) -> str:
    """The first line of a log, for a wall clock given in ms since the epoch (printed in UTC)."""
    instant = datetime.fromtimestamp(epoch_ms // 1000, tz=UTC).replace(microsecond=(epoch_ms % 1000) * 1000)
    wall_clock = instant.strftime("%Y-%m-%d %H:%M:%S.") + f"{epoch_ms % 1000:03d}" + instant.strftime("%z")
    return format_record(LogStarted(ts_ns=ts_ns, wall_clock=wall_clock, epoch_ms=epoch_ms))
