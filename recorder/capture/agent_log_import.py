"""aeron-agent logs (Aeron 1.40 … 1.50 text, each dialect told by content) in: local observation events on the capture's timeline.

Each CLUSTER line becomes one ``local`` event at the member it names (``memberId``; a log normally
holds one member, but one JVM running several members logs them all):

====================================  ==========================================================
ELECTION_STATE_CHANGE                 ``ElectionStateChange`` (``from``, ``to``, ``reason`` and
                                      every logged field: leaderId, candidateTermId, ...)
ROLE_CHANGE / STATE_CHANGE            ``RoleChange`` / ``StateChange`` (``from``, ``to``)
NEW_ELECTION                          ``NewElection``
TRUNCATE_LOG_ENTRY                    ``TruncateLogEntry``
REPLAY_NEW_LEADERSHIP_TERM            ``ReplayNewLeadershipTerm``
REPLICATION_ENDED                     ``ReplicationEnded``
any other CLUSTER event               ``AgentEvent`` with ``event`` = its name (e.g. the receipt
                                      lines CANVASS_POSITION, COMMIT_POSITION, ...)
ARCHIVE RECORDING_SIGNAL (to the      ``RecordingSignal`` (``correlationId``, ``recordingId``,
consensus module's control session)   ``position``, ``signal``): an input of the replay
====================================  ==========================================================

The archive's RECORDING_SIGNAL lines are the one part of another context that is read: they are what the
consensus module's `pollArchiveEvents` receives (a log replication follows them, and a STOP of the log
recording starts an election), and the archive is not on the wire when its control runs over IPC.  A
signal goes to the control session that asked for the recording, so only those of the consensus
module's session are taken: the session that asked the archive for something on the log channel
(``alias=log``) or for a replication; a service's snapshot recordings are its own.  A STOP that answers
the module's own request to stop a recording (CMD_IN_STOP_RECORDING_SUBSCRIPTION / _BY_IDENTITY, as a
leader's module does once TERMINATING) is left out: it is the echo of what the model does itself, and
Aeron's module, no longer ACTIVE by then, does nothing with it.  So is a STOP that the module's close
(STATE_CHANGE -> CLOSED) follows with no CLUSTER line between: the closing module never polled it
(`_without_unpolled_stops`).

Fields keep the names Aeron prints.  Booleans are written as Aeron's BooleanType names ("TRUE",
"FALSE"), as the decoded messages' columns hold them, so a column such as ``isStartup`` has one type
in a replay file.  Each event has the extra keys ``line`` (its line number) and ``nanoTime`` (the
time as logged).  Lines of other contexts (DRIVER, ARCHIVE, ...) are counted and skipped; a line
that cannot be read is a problem naming the line, and reading goes on.

Times: ``ts = nanoTime + offset`` of the line's *segment* (a log appended to by several runs starts
a new clock at each ``log started`` line), with the offset from `recorder.capture.align`: the
``log started`` wall clock, refined with the capture's packets when one is given.

`parse_agent_log` and `agent_log_events` are pure; `read_agent_log_file` does the file I/O.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from formats.agent_log import AgentLogRecord, LogStarted, OtherLogLine, read_agent_log
from formats.errors import DecodeError
from formats.events import Event
from recorder.capture.align import ClockAlignment, align_with_capture, from_log_started
from recorder.capture.datagrams import Problem

#: Agent events with their own observation type (formats.events.LOCAL_OBSERVATION_TYPES).
OBSERVATION_TYPES = {
    "ELECTION_STATE_CHANGE": "ElectionStateChange",
    "ROLE_CHANGE": "RoleChange",
    "STATE_CHANGE": "StateChange",
    "NEW_ELECTION": "NewElection",
    "TRUNCATE_LOG_ENTRY": "TruncateLogEntry",
    "REPLAY_NEW_LEADERSHIP_TERM": "ReplayNewLeadershipTerm",
    "REPLICATION_ENDED": "ReplicationEnded",
}

#: Agent logs are text of modest size; refuse something far bigger (a wrong file) before reading it.
MAX_AGENT_LOG_BYTES = 4 << 30


@dataclass(slots=True)
class Segment:
    """The lines logged between one ``log started`` line and the next: one JVM clock."""

    started: LogStarted | None
    records: list[AgentLogRecord] = field(default_factory=list)
    alignment: ClockAlignment | None = None
    #: How long each log publication the module added kept it waiting (ns), in order: from the DRIVER
    #: line CMD_IN_ADD_EXCLUSIVE_PUBLICATION of a channel with ``alias=log`` past the driver's
    #: CMD_OUT_EXCLUSIVE_PUBLICATION_READY to the module's next CLUSTER line (it maps the log buffers after
    #: the answer, logging nothing: 387 ms in f_follower_kill_rejoin_catchup's member 2, a few ms in
    #: the other captures).  The consensus module waits that long (Node.MemberStart).
    log_publication_waits: list[int] = field(default_factory=list)
    #: Each log subscription (``alias=log-cm``) to the next CMD_OUT_AVAILABLE_IMAGE (ns): FOLLOWER_LOG_AWAIT.
    log_image_waits: list[int] = field(default_factory=list)
    #: Each snapshot the consensus module took (STATE_CHANGE ``-> SNAPSHOT`` to the next ``SNAPSHOT ->``,
    #: ns): the module is in SNAPSHOT, not polling its log, until its services and it have written it.
    snapshot_durations: list[int] = field(default_factory=list)
    #: The index in ``snapshot_durations`` of the snapshot that ended in TERMINATING (``SNAPSHOT ->
    #: TERMINATING``: the leader's ClusterTool shutdown), if any.
    shutdown_snapshot: int | None = None
    #: Each time the member entered LEADER_INIT, how long until its services had joined the log (the last
    #: SERVICE_ACK before it left LEADER_INIT; 0 when none shows): `joinLogAsLeader` starts the log
    #: recording and waits for the services, blocking the module all that while.
    leader_join_waits: list[int] = field(default_factory=list)
    #: Each log replay of an election (LEADER_REPLAY or FOLLOWER_REPLAY with an archive CMD_IN_REPLAY in
    #: it), from entering the state to the services' last SERVICE_ACK before leaving it: the archive
    #: replays the log into the services, which take it and acknowledge.
    log_replay_durations: list[int] = field(default_factory=list)
    #: For each of those replays, how long the archive took to answer the replay request (ARCHIVE
    #: CMD_IN_REPLAY to the CMD_OUT_RESPONSE of its correlationId, ns): `AeronArchive.startReplay` is
    #: synchronous, so the consensus module does nothing else all that while.
    log_replay_start_waits: list[int] = field(default_factory=list)
    #: Each catch-up replay the member served as leader (its CLUSTER line CATCHUP_POSITION, then an ARCHIVE
    #: CMD_IN_REPLAY to a follower's endpoint), from that line to the replay session's REPLAY_SESSION_STATE_CHANGE
    #: ``INIT -> REPLAY`` (ns): the archive sends nothing before its publication is connected.
    catchup_replay_waits: list[int] = field(default_factory=list)
    #: Each leader's log session this process joined as a follower (`tryJoinLogAsFollower`), as
    #: ``(logSessionId, recording_ns, services_ns, recorder_ns)``: when (on the log's clock) its archive's
    #: recording counter for the image was there (the module waits for it), when the services
    #: acknowledged (`awaitServicesReady` blocks the module until then), and when the archive's recorder
    #: started on the image (its RECORDING_SIGNAL START or EXTEND: the recording's position moves from
    #: then); None: never (the image was gone before the archive, or the services, subscribed to it).
    #: See `_FollowerJoins`.
    follower_joins: list[tuple[int, int | None, int | None, int | None]] = field(default_factory=list)
    #: When this process, as leader, went ACTIVE -> TERMINATING without a snapshot: the operator's
    #: ClusterControl ABORT toggle (ClusterTool abort), which Aeron's leader acts on in a slow tick.
    aborts: list[int] = field(default_factory=list)


@dataclass(slots=True)
class ParsedAgentLog:
    source: str
    node: int | None  #: the member the log is about (the most frequent memberId of its CLUSTER lines)
    segments: list[Segment]
    problems: list[Problem]
    skipped: Counter[str]
    dialect: str = ""  #: formats.agent_log dialect name, e.g. "1.40-1.43"
    implied_versions: str = ""  #: the Aeron releases that dialect implies, e.g. "1.40–1.43"
    aeron_version: str | None = None  #: the release the log names (``log started``, 1.50 and later)

    @property
    def records(self) -> list[AgentLogRecord]:
        return [record for segment in self.segments for record in segment.records]

    def nodes(self) -> list[int]:
        return sorted({_node_of(r, self.node) for r in self.records} - {None})


def _node_of(record: AgentLogRecord, default: int | None) -> int | None:
    member = record.fields.get("memberId")
    return member if isinstance(member, int) and member >= 0 else default


#: Driver commands the consensus module waits on: (command, channel alias, the driver's answer, Segment list).
DRIVER_WAITS = (
    ("CMD_IN_ADD_EXCLUSIVE_PUBLICATION", re.compile(r"alias=log(\||$)"), "CMD_OUT_EXCLUSIVE_PUBLICATION_READY",
     "log_publication_waits"),
    ("CMD_IN_ADD_SUBSCRIPTION", re.compile(r"alias=log-cm(\||$)"), "CMD_OUT_AVAILABLE_IMAGE", "log_image_waits"),
)
_LOG_CM = DRIVER_WAITS[1][1]


_SESSION_ID = re.compile(r"session-id=(-?[0-9]+)")
_CORRELATION_ID = re.compile(r"\bcorrelationId=(-?[0-9]+)")
_CONTROL_SESSION = re.compile(r"controlSessionId=(-?[0-9]+)")
_LOG_CHANNEL = re.compile(r"alias=log(-cm)?(\||$|\s)")
_STOP_REQUEST = re.compile(r"(subscriptionId|recordingId)=(-?[0-9]+)")
_SIGNAL_FIELDS = re.compile(r"(correlationId|recordingId|subscriptionId|position)=(-?[0-9]+)|signal=([A-Z_]+)")


def _recording_signal(record: OtherLogLine) -> AgentLogRecord:
    """An ARCHIVE RECORDING_SIGNAL line as a record with its fields (controlSessionId, correlationId,
    recordingId, subscriptionId, position, signal)."""
    fields: dict[str, int | str] = {}
    for match in _SIGNAL_FIELDS.finditer(record.text):
        if match.group(3) is not None:
            fields["signal"] = match.group(3)
        else:
            fields[match.group(1)] = int(match.group(2))
    return AgentLogRecord(ts_ns=record.ts_ns, context=record.context, event=record.event,
                          capture_length=record.capture_length, length=record.length, fields=fields,
                          dialect=record.dialect, line_number=record.line_number)


_IMAGE = re.compile(r"sessionId=(-?[0-9]+) .*subscriptionRegistrationId=(-?[0-9]+)")
#: Aeron archive's RecordingPos counter type: the recording of an image has started.
_RECORDING_POSITION_COUNTER = re.compile(r"typeId=100\b")
#: A follower's request to its archive to record the leader's log (its channel is the ``log-cm`` one).
_FOLLOWER_RECORDING = re.compile(r"^CMD_IN_(START|EXTEND)_RECORDING")
_RECORDER_STARTED = re.compile(r"\bsignal=(START|EXTEND)\b")


class _FollowerJoins:
    """How each follower join of one process went, from its DRIVER and ARCHIVE lines and SERVICE_ACKs.

    Aeron's follower joins the leader's log in `tryJoinLogAsFollower` once its log subscription
    (``alias=log-cm``) has the leader's image: it asks its archive to record the log (the archive adds
    a subscription of its own to the same channel), returns false until the archive's recording
    position counter for the session exists, then blocks in `awaitServicesReady` until the services,
    each on a subscription of its own, have the image and acknowledge.  The archive's recorder, a
    thread of its own, records the image from its RECORDING_SIGNAL START or EXTEND on, which may come
    before the services' ack (j_short_timeouts_leader_kill's rejoin) or after it
    (f_follower_kill_rejoin_catchup's).  A subscription added after the image reached end of stream and
    drained never gets it: in h_five_members_leader_kill member 1's term-1 log ended while members 3 and
    4 joined it; member 4's archive subscribed too late, so the recording never started and
    FOLLOWER_LOG_AWAIT timed out; member 3's archive was in time but its service was not, and its
    module waited in `awaitServicesReady` until it was killed.

    The first ``alias=log-cm`` subscription to a session is the module's, later ones the archive's;
    the first recording position counter added after the archive's image is the recording's.  A log
    without DRIVER lines (the real 1.41.7 capture logs none) shows no counter: the join is timed from
    the archive request to the services' ack."""

    __slots__ = ("module_subscriptions", "archive_subscriptions", "image_at", "recording_at", "recorder_requests",
                 "recorder_at", "awaiting_counter", "awaiting_ack", "driver_seen", "asked", "done")

    def __init__(self) -> None:
        self.module_subscriptions: dict[str, str] = {}  # registration id -> session id
        self.archive_subscriptions: dict[str, str] = {}
        self.image_at: dict[str, int] = {}  # session -> when the module's subscription had the image
        self.recording_at: dict[str, int] = {}  # session -> when the archive's recording of it started
        self.recorder_requests: dict[str, str] = {}  # the archive request's correlation id -> session
        self.recorder_at: dict[str, int] = {}  # session -> when the archive's recorder started on it
        self.awaiting_counter: str | None = None
        self.awaiting_ack: str | None = None
        self.driver_seen = False
        self.asked: str | None = None  # without DRIVER lines: the session last asked to be recorded
        self.done: list[tuple[str, int | None, int | None]] = []

    def on_archive(self, record: OtherLogLine) -> None:
        if _FOLLOWER_RECORDING.match(record.event) and _LOG_CM.search(record.text):
            session = _SESSION_ID.search(record.text)
            correlation = _CORRELATION_ID.search(record.text)
            if session is not None and correlation is not None:
                self.recorder_requests[correlation.group(1)] = session.group(1)
                self.asked = session.group(1)
        elif record.event == "RECORDING_SIGNAL" and _RECORDER_STARTED.search(record.text):
            correlation = _CORRELATION_ID.search(record.text)
            session = self.recorder_requests.get(correlation.group(1)) if correlation is not None else None
            if session is not None:
                self.recorder_at.setdefault(session, record.ts_ns)

    def on_driver(self, record: OtherLogLine) -> None:
        self.driver_seen = True
        if record.event == "CMD_IN_ADD_SUBSCRIPTION" and _LOG_CM.search(record.text):
            session = _SESSION_ID.search(record.text)
            registration = _CORRELATION_ID.search(record.text)
            if session is None or registration is None:
                return
            if session.group(1) in self.module_subscriptions.values():
                self.archive_subscriptions[registration.group(1)] = session.group(1)
            else:
                self.module_subscriptions[registration.group(1)] = session.group(1)
        elif record.event == "CMD_OUT_AVAILABLE_IMAGE":
            image = _IMAGE.search(record.text)
            if image is None:
                return
            session, registration = image.groups()
            if self.module_subscriptions.get(registration) == session:
                self.image_at.setdefault(session, record.ts_ns)
            elif self.archive_subscriptions.get(registration) == session and session in self.image_at:
                self.awaiting_counter = session
        elif record.event == "CMD_IN_ADD_COUNTER" and self.awaiting_counter is not None \
                and _RECORDING_POSITION_COUNTER.search(record.text):
            session, self.awaiting_counter = self.awaiting_counter, None
            if session not in self.recording_at:
                self.recording_at[session] = record.ts_ns
                self.awaiting_ack = session

    def on_service_ack(self, ts_ns: int) -> None:
        session, self.awaiting_ack = self.awaiting_ack, None
        if session is not None:
            self.done.append((session, self.recording_at[session], ts_ns))
        elif not self.driver_seen and self.asked is not None:
            self.done.append((self.asked, ts_ns, ts_ns))
        self.asked = None

    def flush(self, segment: Segment | None) -> None:
        """The process ended: each join, those still waiting (for ever) too, into ``segment``."""
        joined = {entry[0] for entry in self.done}
        for session in self.image_at:
            if session not in joined:
                self.done.append((session, self.recording_at.get(session), None))
        if segment is not None:
            asked = set(self.recorder_requests.values())
            segment.follower_joins.extend(
                (int(session), recording, services,
                 # no archive request logged for it: the recorder is taken to start with the recording
                 self.recorder_at.get(session) if session in asked else recording)
                for session, recording, services in self.done)
        self.__init__()
#: A replay to a follower's catch-up endpoint (the election's local replays are to ``aeron:ipc``).
_CATCHUP_REPLAY = re.compile(r"replayChannel=aeron:udp\b")


def parse_agent_log(text: str, *, source: str) -> ParsedAgentLog:
    """Split a log into clock segments of CLUSTER records; count what is not ours."""
    log = read_agent_log(text, source=source)
    problems = [Problem("unreadable line", error.expected, source, line=error.offset) for error in log.problems]
    skipped: Counter[str] = Counter()
    segments: list[Segment] = []
    current: Segment | None = None
    members: Counter[int] = Counter()
    pending: dict[str, int] = {}  # Segment attribute -> when the driver was asked
    asked_for: set[tuple[str, str]] = set()  # (Segment attribute, session id) already waited for
    module_sessions: set[str] = set()  # the consensus module's archive control sessions (this JVM)
    stops_asked: set[tuple[str, int]] = set()  # ("subscriptionId"|"recordingId", id) the module asked to stop
    joins = _FollowerJoins()
    role = None  # the process's role, as its last ROLE_CHANGE left it
    for record in log.records:
        if type(record) is LogStarted:
            joins.flush(current)
            role = None
            pending.clear()
            asked_for.clear()
            module_sessions.clear()
            stops_asked.clear()
            current = Segment(record)
            segments.append(current)
            continue
        if type(record) is not AgentLogRecord:
            skipped[f"{record.context} lines"] += 1
            if record.context == "ARCHIVE" and record.event == "CMD_IN_REPLAY" and pending.get("replay") is not None:
                pending["replaying"] = 1
                correlation = _CORRELATION_ID.search(record.text)
                if correlation is not None:
                    pending["replayAsked"] = record.ts_ns
                    pending["replayCorrelationId"] = int(correlation.group(1))
            elif (record.context == "ARCHIVE" and record.event == "CMD_OUT_RESPONSE"
                  and pending.get("replayAsked") is not None):
                correlation = _CORRELATION_ID.search(record.text)
                if correlation is not None and int(correlation.group(1)) == pending.get("replayCorrelationId"):
                    pending["replayStarted"] = record.ts_ns - pending.pop("replayAsked")
            if record.context == "ARCHIVE" and pending.get("catchupAsked") is not None:
                if record.event == "CMD_IN_REPLAY" and _CATCHUP_REPLAY.search(record.text):
                    pending["catchupReplay"] = pending.pop("catchupAsked")
            if (record.context == "ARCHIVE" and record.event == "REPLAY_SESSION_STATE_CHANGE"
                    and "INIT -> REPLAY" in record.text and pending.get("catchupReplay") is not None
                    and current is not None):
                current.catchup_replay_waits.append(record.ts_ns - pending.pop("catchupReplay"))
            if record.context == "ARCHIVE":
                joins.on_archive(record)
                session = _CONTROL_SESSION.search(record.text)
                if session is not None and record.event.startswith("CMD_IN_") and (
                        record.event.startswith("CMD_IN_REPLICATE") or _LOG_CHANNEL.search(record.text)):
                    module_sessions.add(session.group(1))
                elif record.event.startswith("CMD_IN_STOP_RECORDING"):
                    stops_asked.update((m.group(1), int(m.group(2))) for m in _STOP_REQUEST.finditer(record.text))
                elif record.event == "RECORDING_SIGNAL" and session is not None and session.group(1) in module_sessions:
                    signal = _recording_signal(record)
                    if signal.fields.get("signal") in ("START", "EXTEND"):
                        # a recording (re)starts: a stop asked of the recording id before is not about it
                        stops_asked.discard(("recordingId", signal.fields.get("recordingId")))
                    if signal.fields.get("signal") == "STOP" and (
                            ("subscriptionId", signal.fields.get("subscriptionId")) in stops_asked
                            or ("recordingId", signal.fields.get("recordingId")) in stops_asked):
                        continue
                    if current is None:
                        current = Segment(None)
                        segments.append(current)
                    current.records.append(signal)
                    continue
            if record.context == "DRIVER":
                joins.on_driver(record)
                for asked, alias, answered, waits in DRIVER_WAITS:
                    if record.event == asked and alias.search(record.text):
                        session = _SESSION_ID.search(record.text)
                        if session is not None and (waits, session.group(1)) in asked_for:
                            continue  # the module subscribing again to an image it already has
                        if session is not None:
                            asked_for.add((waits, session.group(1)))
                        pending[waits] = record.ts_ns
                    elif record.event == answered and pending.get(waits) is not None:
                        if current is None:
                            current = Segment(None)
                            segments.append(current)
                        if waits == "log_publication_waits":
                            # The module maps the publication's log buffers after the driver's answer, still
                            # blocked: the wait ends at the next line it logs.
                            pending["logPublicationReady"] = pending.pop(waits)
                        else:
                            getattr(current, waits).append(record.ts_ns - pending.pop(waits))
            continue
        if current is None:
            current = Segment(None)
            segments.append(current)
        asked = pending.pop("logPublicationReady", None)
        if asked is not None:
            current.log_publication_waits.append(record.ts_ns - asked)
        current.records.append(record)
        if record.event == "CATCHUP_POSITION":
            pending["catchupAsked"] = record.ts_ns
        if record.event == "STATE_CHANGE":
            _note_snapshot(current, record, pending)
            if role == "LEADER" and record.fields.get("from") == "ACTIVE" and record.fields.get("to") == "TERMINATING":
                current.aborts.append(record.ts_ns)
        elif record.event == "ROLE_CHANGE":
            role = record.fields.get("to")
        elif record.event in ("ELECTION_STATE_CHANGE", "SERVICE_ACK"):
            _note_leader_join(current, record, pending)
            if record.event == "SERVICE_ACK":
                joins.on_service_ack(record.ts_ns)
        member = record.fields.get("memberId")
        if isinstance(member, int) and member >= 0:
            members[member] += 1
    joins.flush(current)
    node = min(members, key=lambda m: (-members[m], m)) if members else None
    for segment in segments:
        segment.alignment = from_log_started(segment.started)
        segment.records = _without_unpolled_stops(segment.records)
    return ParsedAgentLog(source, node, [s for s in segments if s.records or s.started], problems, skipped,
                          dialect=log.dialect.name, implied_versions=log.dialect.versions,
                          aeron_version=log.aeron_version)


def _without_unpolled_stops(records: list) -> list:
    """``records`` less each STOP signal that the module's close (STATE_CHANGE -> CLOSED) follows with no
    CLUSTER line between: Aeron's module, ACTIVE with no election, enters one in the duty cycle that polls
    a STOP of its log recording (NEW_ELECTION "log recording stopped"), so a module that closed without
    it had stopped its duty cycles (its process was closing) before the signal could be polled.  In
    h_five_members_leader_kill, SIGTERM to all: member 3's archive signalled STOP at 1725.737 (leader 0's
    log ended) and its module was closing (log subscription closed 1725.744, CLOSED 1725.762); member 4's
    signal came at 1725.739, its module polled it and logged NEW_ELECTION at 1725.744 before closing."""
    out = []
    for index, record in enumerate(records):
        if (record.context == "ARCHIVE" and record.event == "RECORDING_SIGNAL" and record.fields.get("signal") == "STOP"
                and index + 1 < len(records)):
            following = records[index + 1]
            if following.event == "STATE_CHANGE" and following.fields.get("to") == "CLOSED":
                continue
        out.append(record)
    return out


def _note_snapshot(segment: Segment, record: AgentLogRecord, pending: dict[str, int]) -> None:
    """A module STATE_CHANGE into or out of SNAPSHOT: the snapshot's duration, and whether it was a shutdown's."""
    if record.fields.get("to") == "SNAPSHOT":
        pending["snapshot"] = record.ts_ns
    elif record.fields.get("from") == "SNAPSHOT" and pending.get("snapshot") is not None:
        segment.snapshot_durations.append(record.ts_ns - pending.pop("snapshot"))
        if record.fields.get("to") == "TERMINATING":
            segment.shutdown_snapshot = len(segment.snapshot_durations) - 1


def _note_leader_join(segment: Segment, record: AgentLogRecord, pending: dict[str, int]) -> None:
    """Entering LEADER_INIT, the services' acks, and leaving it: the leader's wait to join its log; the
    same for a stay in LEADER_REPLAY / FOLLOWER_REPLAY that replayed the log."""
    fields = record.fields
    if record.event == "SERVICE_ACK":
        if pending.get("leaderInit") is not None:
            pending["leaderJoined"] = record.ts_ns
        if pending.get("replay") is not None:
            pending["replayAcked"] = record.ts_ns
        return
    if fields.get("to") in ("LEADER_REPLAY", "FOLLOWER_REPLAY"):
        pending["replay"] = record.ts_ns
        for key in ("replayAcked", "replaying", "replayAsked", "replayStarted"):
            pending.pop(key, None)
    elif fields.get("from") in ("LEADER_REPLAY", "FOLLOWER_REPLAY") and pending.get("replay") is not None:
        entered = pending.pop("replay")
        acked = pending.pop("replayAcked", None)
        started = pending.pop("replayStarted", 0)
        pending.pop("replayAsked", None)
        if pending.pop("replaying", None):
            segment.log_replay_durations.append(acked - entered if acked is not None else 0)
            segment.log_replay_start_waits.append(started)
    if fields.get("to") == "LEADER_INIT":
        pending["leaderInit"] = record.ts_ns
        pending.pop("leaderJoined", None)
    elif fields.get("from") == "LEADER_INIT" and pending.get("leaderInit") is not None:
        entered = pending.pop("leaderInit")
        joined = pending.pop("leaderJoined", None)
        segment.leader_join_waits.append(joined - entered if joined is not None else 0)


def align_agent_log(parsed: ParsedAgentLog, captured: Sequence[Event] | None) -> None:
    """Refine each segment's clock with the captured events (of the same members) when given."""
    if not captured:
        return
    nodes = set(parsed.nodes())
    relevant = [event for event in captured if event.node in nodes and event.channel == "consensus"]
    for segment in parsed.segments:
        if segment.records:
            segment.alignment = align_with_capture(segment.records, relevant, segment.alignment)


def _value(value):
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    return value


def agent_log_events(parsed: ParsedAgentLog) -> list[Event]:
    """The log's observation events, in log order, timed on the aligned timeline."""
    events = []
    for segment in parsed.segments:
        offset = segment.alignment.offset_ns if segment.alignment is not None else 0
        for record in segment.records:
            node = _node_of(record, parsed.node)
            if node is None:
                continue
            fields = {name: _value(value) for name, value in record.fields.items()}
            kind = "RecordingSignal" if record.context == "ARCHIVE" else OBSERVATION_TYPES.get(record.event)
            if kind is None:
                kind = "AgentEvent"
                fields = {"event": record.event, **fields}
            extra = {"line": record.line_number, "nanoTime": record.ts_ns}
            if record.truncated:
                extra["truncated"] = True
            events.append(Event(ts=record.ts_ns + offset, node=node, dir="local", peer=None, channel="local",
                                type=kind, fields=fields, extra=extra))
    return events


#: Receipt lines of the agent log and the captured messages they log, with the fields that tell them apart.
RECEIPTS = {"REQUEST_VOTE": ("RequestVote", (("candidateId", "candidateMemberId"), ("candidateTermId", "candidateTermId"),
                                             ("logPosition", "logPosition")))}


def receipt_order(received: Sequence[Event], logged: Sequence[Event]) -> dict[int, int]:
    """New times for captured messages that a member handled in another order than they were captured.

    Two RequestVotes arriving within a moment of each other are read from their images in an order
    the capture cannot show; the member's agent log can (a REQUEST_VOTE line per message handled).
    ``received`` are the member's inbound captured events, ``logged`` its agent-log events, both in
    time order.  Returns ``{index in received: new ts}``: the matched messages' times, handed out in
    the logged order, so only messages the log shows out of capture order move.
    """
    moved: dict[int, int] = {}
    for event_name, (message_type, keys) in RECEIPTS.items():
        candidates = [(i, e) for i, e in enumerate(received) if e.type == message_type]
        used: set[int] = set()
        matched: list[int] = []
        for line in (e for e in logged if e.type == "AgentEvent" and e.fields.get("event") == event_name):
            want = tuple(line.fields.get(logged_name) for logged_name, _ in keys)
            for i, event in candidates:
                if i not in used and tuple(event.fields.get(name) for _, name in keys) == want:
                    used.add(i)
                    matched.append(i)
                    break
        times = sorted(received[i].ts for i in matched)
        for i, ts in zip(matched, times, strict=True):
            if received[i].ts != ts:
                moved[i] = ts
    return moved


#: A message its member's agent log shows polled this much after its driver's stall ended waited on in
#: the module, not in the driver (far beyond the clock alignment's uncertainty, 1 ms).
LATE_RECEIPT_NS = 20_000_000


def late_receipts(received: Sequence[Event], logged: Sequence[Event], stalls: Sequence[tuple[int, int]]
                  ) -> dict[int, int]:
    """New times for captured messages that reached a member while its media driver was stalled
    (`recorder.capture.driver_stalls`: ``stalls``, (from, until)) and that its agent log shows polled
    more than `LATE_RECEIPT_NS` after the stall ended: when the driver read them again the module was
    busy elsewhere.  Which is a race the capture cannot show (the module may find the image the
    driver just made, and block joining its log, before or after it polls what the driver reads next);
    the agent log's receipt line (CANVASS_POSITION, COMMIT_POSITION, ... `recorder.capture.align.RECEIPTS`)
    can.  In i_restart_all_one_member_behind, member 1's driver stalled from 19:26:57.316 to .425 (the
    catch-up image); leader 0's CommitPosition of .324 was polled at .485, once the module had joined the
    log, in FOLLOWER_CATCHUP (where it sets the catch-up's commit position); in
    g_leader_sigterm_reelection_rejoin, member 0's three CommitPositions waiting in its stalled driver were
    polled as the stall ended, before it joined.  Where a member's receipt lines of one content (type
    and logged fields) are as many as its captured messages of that content, the k-th line logs the
    k-th message.  ``received`` are the member's inbound captured events, ``logged`` its agent-log
    events, both in time order.  Returns ``{index in received: new ts}``."""
    from recorder.capture.align import RECEIPTS as ALL_RECEIPTS

    if not stalls:
        return {}
    logged_times: dict[tuple, list[int]] = {}
    for line in logged:
        spec = ALL_RECEIPTS.get(line.fields.get("event")) if line.type == "AgentEvent" else None
        if spec is None:
            continue
        try:
            content = (spec[0],) + tuple(line.fields[printed] for printed, _ in spec[1])
        except KeyError:
            continue
        logged_times.setdefault(content, []).append(line.ts)
    by_type = {message: pairs for message, pairs in ALL_RECEIPTS.values()}
    captured: dict[tuple, list[int]] = {}
    for index, event in enumerate(received):
        pairs = by_type.get(event.type)
        if pairs is None or event.channel != "consensus":
            continue
        try:
            content = (event.type,) + tuple(event.fields[name] for _, name in pairs)
        except KeyError:
            continue
        captured.setdefault(content, []).append(index)
    moved: dict[int, int] = {}
    for content, indexes in captured.items():
        times = logged_times.get(content, [])
        if len(times) != len(indexes):
            continue
        for index, ts in zip(indexes, times, strict=True):
            arrived = received[index].ts
            stall = next((until for start, until in stalls if start <= arrived < until), None)
            if stall is not None and ts > stall + LATE_RECEIPT_NS:
                moved[index] = ts
    return moved


def read_agent_log_file(path: str | os.PathLike[str]) -> ParsedAgentLog:
    """Read and parse one agent log file (text; bytes that are not UTF-8 are replaced)."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_AGENT_LOG_BYTES:
        raise DecodeError(f"{size} bytes is larger than any agent log we read; wrong file?", source=str(path))
    text = path.read_bytes().decode("utf-8", errors="replace")
    parsed = parse_agent_log(text, source=str(path))
    if not parsed.records:
        what = "no aeron-agent CLUSTER events"
        if parsed.problems:
            what += f" (line {parsed.problems[0].line}: {parsed.problems[0].detail})"
        raise DecodeError(what + "; expected lines like '[1.000000000] CLUSTER: ELECTION_STATE_CHANGE ...'",
                          source=str(path))
    if parsed.node is None:
        raise DecodeError("no CLUSTER line names a memberId >= 0: cannot tell which member logged it",
                          source=str(path))
    return parsed


def looks_like_agent_log(head: bytes) -> bool:
    """Whether a file's first bytes are an aeron-agent log line (``[seconds.nanos] ...``; up to 1.43
    the fraction is microseconds, 6 digits)."""
    text = head.lstrip()[:64]
    if not text.startswith(b"["):
        return False
    close = text.find(b"]")
    if close < 0:
        return False
    stamp = text[1:close].lstrip(b"-")
    seconds, dot, nanos = stamp.partition(b".")
    return bool(dot) and seconds.isdigit() and nanos.isdigit() and len(nanos) in (6, 9)
